"""The ASGI layer that authenticates every request under ``/v1`` and ``/mcp`` before anything
else reads it (a refused request's body is never parsed, and nothing is written).

``/v1/users/{user_id}...`` needs a key for that user (or an admin key); other ``/v1`` paths
need an admin key; ``/mcp`` needs any valid key (a user key acts for its user; an admin
key names the user in the ``X-User-Id`` header). ``/healthz``, ``/readyz``, ``/docs`` and
``/openapi.json`` are open. The caller is put in ``scope["state"]``: ``principal``,
``key_id``, ``user_id``.

A user id may hold a ``/`` (sent as ``%2F``): the router matches paths decoded, where it would
make two segments, so for such an id the routed path keeps the segment as sent, and the
routes take the user from ``scope["state"]["user_id"]`` (decoded here, where the key was
checked for it).
"""

from __future__ import annotations

from urllib.parse import unquote, unquote_to_bytes

from unified_memory.service.auth import Gate, Principal, Refusal
from unified_memory.service.errors import error_body
from unified_memory.service.middleware import ASGIApp, Receive, Scope, Send, send_json

__all__ = ["Gatekeeper", "USER_HEADER", "PROTECTED", "is_protected"]

USER_HEADER = b"x-user-id"
#: The paths that need a key (these and what is below them); every other path is open.
PROTECTED = ("/v1", "/mcp")


def is_protected(path: str) -> bool:
    """Whether ``path`` needs a key.

    >>> is_protected("/v1/users/ada/facts"), is_protected("/healthz"), is_protected("/v1x")
    (True, False, False)
    """
    return any(path == p or path.startswith(p + "/") for p in PROTECTED)


def _routed_path(raw_path: bytes) -> str:
    """The path as the router should match it: decoded, except the user id segment, kept as sent."""
    parts = raw_path.decode("latin-1").split("?", 1)[0].split("/")
    return "/".join(part if i == 3 else unquote(part) for i, part in enumerate(parts))


def _user_in_path(raw_path: bytes) -> str | None:
    """The ``{user_id}`` segment of ``/v1/users/{user_id}/...`` (percent-decoded), else None."""
    parts = raw_path.decode("latin-1").split("?", 1)[0].split("/")
    if len(parts) >= 4 and parts[1] == "v1" and parts[2] == "users" and parts[3]:
        return unquote(parts[3], errors="strict")
    return None


def _not_utf8_parameter(query: bytes) -> str | None:
    """The name of the first query parameter whose name or value is not UTF-8 once percent-decoded."""
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        try:
            unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8")
            unquote_to_bytes(value.replace(b"+", b" ")).decode("utf-8")
        except UnicodeDecodeError:
            return unquote_to_bytes(name.replace(b"+", b" ")).decode("utf-8", errors="replace")[:100] or "query"
    return None


class Gatekeeper:
    """Authenticate (401 / 429) and authorize (403) before the application sees the request."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not is_protected(path):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        headers = dict(scope.get("headers") or [])
        client = scope.get("client")
        try:
            principal = self.gate.authenticate(headers.get(b"authorization", b"").decode("latin-1") or None,
                                               client[0] if client else "unknown")
            state["principal"], state["key_id"] = principal, principal.key_id
            user = self._user(principal, path, scope.get("raw_path") or path.encode(), headers)
        except Refusal as refusal:
            await send_json(send, refusal.status, error_body(refusal.type, refusal.message, refusal.field,
                                                             state.get("request_id")), refusal.headers)
            return
        except UnicodeDecodeError:
            await send_json(send, 400, error_body("malformed_path", "the user id is not valid UTF-8", "user_id",
                                                  state.get("request_id")))
            return
        state["user_id"] = user
        bad = _not_utf8_parameter(scope.get("query_string") or b"")
        if bad is not None:  # else Starlette would pass on U+FFFD: a scope or filter the caller never sent
            await send_json(send, 400, error_body("malformed_query", f"{bad}: the value is not valid UTF-8", bad,
                                                  state.get("request_id")))
            return
        if user is not None and "/" in user and not path.startswith("/mcp"):
            scope = {**scope, "path": _routed_path(scope.get("raw_path") or path.encode())}
        await self.app(scope, receive, send)

    def _user(self, principal: Principal, path: str, raw_path: bytes, headers: dict[bytes, bytes]) -> str | None:
        if path == "/mcp" or path.startswith("/mcp/"):
            named = headers.get(USER_HEADER, b"").decode("utf-8", errors="strict") or None
            if principal.owner is not None:
                if named is not None and named != principal.owner:
                    self.gate.authorize(principal, named)
                return principal.owner
            if named is None:
                raise Refusal(400, "invalid", "an admin key must name the user in the X-User-Id header",
                              field="x-user-id")
            return named
        user = _user_in_path(raw_path)
        if user is None:
            self.gate.require_admin(principal)
            return None
        self.gate.authorize(principal, user)
        return user
