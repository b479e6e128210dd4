"""A visit to the console: :class:`Console` (its templates, sign-ins and the checks every page
makes) and :class:`Visit` (who is looking, at which user).

Every page is a plain GET rendered on the server; every change is a POST form carrying the
session's form token. A request without a session is sent to the sign-in page; a user key
sees its own user only (a page of another user answers 403 and names nothing of it); an admin
key picks the user (``?u=``). The user is a query parameter, not a path segment, so any user
id (a ``/`` in it too) is one value.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tiers.maintenance.keys import KeyRing
from tiers.maintenance.sign_ins import SignIn, SignIns
from unified_memory.console.security import SESSION_COOKIE, apply_headers
from unified_memory.errors import ConflictError, NotFoundError, UnifiedMemoryError
from unified_memory.memory import UnifiedMemory
from unified_memory.service.auth import Gate
from unified_memory.service.errors import status_of

__all__ = ["CONSOLE_PATH", "Console", "Visit", "Denied"]

_LOG = logging.getLogger("unified_memory.console")

#: Where the console lives on the service.
CONSOLE_PATH = "/ui"


class Denied(Exception):  # noqa: N818 - an answer
    """A page refused: HTTP status and a message that names no data of another user."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class _SignInFirst(Exception):  # noqa: N818
    pass


@dataclass
class Visit:
    """One request of a signed-in person: their session, and the user they look at (with that
    user's memory), when the page is about one."""

    request: Request
    signin: SignIn
    user: str | None
    memory: UnifiedMemory | None

    @property
    def admin(self) -> bool:
        return self.signin.owner is None

    def url(self, path: str, **params: Any) -> str:
        """A console link to ``path`` for the same user, with ``params`` (None values left out)."""
        query = {"u": self.user} if self.user is not None and self.admin else {}
        query.update({k: v for k, v in params.items() if v is not None})
        return f"{CONSOLE_PATH}{path}" + (f"?{urlencode(query, doseq=True)}" if query else "")

    def page_url(self, offset: int) -> str:
        """This page's address with ``offset`` (a page of a listing)."""
        params = [(k, v) for k, v in self.request.query_params.multi_items() if k not in ("offset", "done")]
        return self.request.url.path + "?" + urlencode([*params, ("offset", str(offset))])

    def need_memory(self) -> UnifiedMemory:
        if self.memory is None:
            raise Denied(400, "choose a user first")
        return self.memory


def _when(value: Any) -> str:
    """A time as the pages show it (UTC, to the minute)."""
    if value is None:
        return "-"
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if isinstance(value, datetime) else str(value)


class Console:
    """The console over one memory: its templates, sign-ins and the checks every page makes."""

    def __init__(self, memory: UnifiedMemory, keys: KeyRing, gate: Gate) -> None:
        from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

        self.memory = memory
        self.gate = gate
        self.sign_ins = SignIns(keys.storage)
        self.templates = Environment(loader=PackageLoader("unified_memory.console", "templates"),
                                     autoescape=select_autoescape(default=True, default_for_string=True),
                                     undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.templates.filters["when"] = _when
        self.templates.filters["pct"] = lambda v: f"{float(v or 0.0):.2f}"

    # -- answers ---------------------------------------------------------------------------------

    def render(self, template: str, status: int = 200, **values: Any) -> HTMLResponse:
        html = self.templates.get_template(template).render(**values)
        response = HTMLResponse(html, status_code=status)
        apply_headers(response.headers)
        return response

    @staticmethod
    def redirect(to: str) -> RedirectResponse:
        response = RedirectResponse(to, status_code=303)
        apply_headers(response.headers)
        return response

    # -- who is looking ----------------------------------------------------------------------------

    async def signed_in(self, request: Request) -> SignIn | None:
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            return None
        return await asyncio.to_thread(self.sign_ins.find, token)

    async def visit(self, request: Request, *, user_page: bool = True) -> Visit:
        """The visit of a signed-in person (else :class:`_SignInFirst`); ``user_page``: the page is
        about one user (``?u=``, or the key's own), whom the key must grant (else 403)."""
        signin = await self.signed_in(request)
        if signin is None:
            raise _SignInFirst
        if not user_page:
            return Visit(request, signin, None, None)
        asked = request.query_params.get("u")
        if asked is None and request.method == "POST":
            form = await request.form()
            asked = form.get("u") if isinstance(form.get("u"), str) else None  # type: ignore[assignment]
        user = signin.owner if signin.owner is not None and not asked else asked
        if user is None or user == "":
            raise _Choose
        if signin.owner is not None and user != signin.owner:
            raise Denied(403, "this API key does not grant access to that user")
        try:
            memory = self.memory.scoped(user_id=user)
        except UnifiedMemoryError as exc:
            raise Denied(400, str(exc)) from None
        return Visit(request, signin, user, memory)

    def page(self, handler: Callable[[Console, Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """A route answering what ``handler`` answers, or: the sign-in page for a visitor without a
        session, the users page for an admin who chose no user, an error page (4xx) for a refused
        or bad request, and an error page (5xx, what went wrong in the server's log) for anything
        else: a browser never gets a JSON body."""
        async def route(request: Request) -> Response:
            try:
                return await handler(self, request)
            except _SignInFirst:
                here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return self.redirect(f"{CONSOLE_PATH}/login?{urlencode({'next': here})}")
            except _Choose:
                return self.redirect(f"{CONSOLE_PATH}/users")
            except Denied as exc:
                return self.render("error.html", exc.status, title="Not allowed" if exc.status == 403 else "Error",
                                   message=exc.message, visit=None)
            except NotFoundError as exc:
                return self.render("error.html", 404, title="Not found", message=str(exc), visit=None)
            except ConflictError as exc:
                return self.render("error.html", 409, title="Conflict", message=str(exc), visit=None)
            except UnifiedMemoryError as exc:
                if isinstance(exc, ValueError | TypeError):
                    return self.render("error.html", 400, title="Bad request", message=str(exc), visit=None)
                status, _ = status_of(exc)  # the service's status for it: busy, read-only, ...
                _LOG.error("console %s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
                return self.render("error.html", status, title="Unavailable" if status == 503 else "Error",
                                   message=str(exc), visit=None)
            except Exception:  # a page, never a JSON body, whatever went wrong; the log says what
                _LOG.exception("console %s %s failed", request.method, request.url.path)
                return self.render("error.html", 500, title="Something went wrong",
                                   message="The page could not be shown; the server's log says why.", visit=None)

        return route

    async def not_found(self, request: Request) -> Response:
        """The page of an address under the console that is none of its pages."""
        return self.render("error.html", 404, title="Not found", message=f"There is no page {request.url.path}.",
                           visit=None)


class _Choose(Exception):  # noqa: N818
    pass
