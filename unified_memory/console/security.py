"""What keeps the console safe in a browser: the response headers of every console page (a strict
Content-Security-Policy with no script at all, no framing, no sniffing, no caching, no referrer),
the session cookie's attributes, form tokens (CSRF) compared in constant time, and the checks of
where a redirect may go.

    >>> safe_next("/ui/facts?u=ada"), safe_next("https://evil.example/"), safe_next("//evil.example")
    ('/ui/facts?u=ada', '/ui/', '/ui/')
"""

from __future__ import annotations

import hmac
from typing import Any

from starlette.datastructures import MutableHeaders

__all__ = ["CSP", "HEADERS", "SESSION_COOKIE", "LOGIN_COOKIE", "apply_headers", "same_token", "safe_next",
           "cookie_options"]

#: Scripts are not allowed at all (the console has none); styles and images only from the console.
CSP = ("default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
#: The session cookie (its token is the session; only its digest is stored).
SESSION_COOKIE = "um_console"
#: The sign-in form's cookie (the form carries the same value: a login form cannot be posted from elsewhere).
LOGIN_COOKIE = "um_console_login"


def apply_headers(headers: MutableHeaders) -> None:
    """Set the console's security headers on a response."""
    for name, value in HEADERS.items():
        headers[name] = value


def same_token(sent: object, expected: str) -> bool:
    """Whether a form's token is the session's (constant-time; anything but a string is refused)."""
    return isinstance(sent, str) and 0 < len(sent) <= 200 and hmac.compare_digest(sent.encode(), expected.encode())


def safe_next(target: object) -> str:
    """``target`` when it is a console path of this site, else the console's home (no open redirect)."""
    if isinstance(target, str) and target.startswith("/ui/") and not target.startswith("//") \
            and "\\" not in target and all(ord(c) > 31 for c in target) and len(target) <= 2000:
        return target
    return "/ui/"


def cookie_options(secure: bool) -> dict[str, Any]:
    """The attributes of the console's cookies: not readable by scripts, not sent by other sites,
    only under /ui, and only over HTTPS when the page came over HTTPS."""
    return {"httponly": True, "samesite": "strict", "path": "/ui", "secure": secure}
