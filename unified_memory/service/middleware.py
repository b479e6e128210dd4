"""The ASGI layers every request passes: a request id and one structured access-log line
(:class:`AccessLog`), and the body size limit (:class:`BodyLimit`).

The access log is one JSON object per request on the ``unified_memory.service.access``
logger: ``request_id``, ``method``, ``path``, ``status``, ``ms``, ``client``, and the
``key_id`` and ``user`` the request was authenticated as (never the key). The request id
is the caller's ``X-Request-ID`` when it is a short printable token, else a new one; it is
sent back in ``X-Request-ID`` and inside error bodies.

A body over ``limit`` bytes is refused with 413 before the handler runs: at once when
``Content-Length`` says so, else as soon as the streamed body passes the limit. A refused
request writes nothing (handlers read the whole body before they write).
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from unified_memory.service.errors import TooLarge, error_body

__all__ = ["AccessLog", "BodyLimit", "send_json"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

access_log = logging.getLogger("unified_memory.service.access")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


async def send_json(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    """Answer a request with a JSON body from inside ASGI middleware."""
    payload = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


class AccessLog:
    """Give every request an id (``scope["state"]["request_id"]``) and log one line when it ends."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            client = scope.get("client")
            access_log.info(json.dumps({
                "request_id": request_id, "method": scope.get("method"), "path": scope.get("path"),
                "status": status, "ms": round((time.perf_counter() - started) * 1000, 2),
                "client": client[0] if client else None, "key_id": state.get("key_id"),
                "user": state.get("user_id")}))


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes (``limits`` may raise it per path prefix) with 413."""

    def __init__(self, app: ASGIApp, limit: int, *, limits: dict[str, int] | None = None) -> None:
        self.app = app
        self.limit = limit
        self.limits = limits or {}

    def _limit_for(self, path: str) -> int:
        for suffix, limit in self.limits.items():
            if path.endswith(suffix):
                return limit
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit_for(scope.get("path", ""))
        request_id = scope.get("state", {}).get("request_id")
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await send_json(send, 413, error_body("too_large", f"request body over {limit} bytes", "body", request_id))
            return
        received = 0
        over = False  # the streamed body passed the limit: whatever the app answers becomes a 413
        started = False

        async def receiving() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    raise TooLarge(limit)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            if over:
                # The app may have caught TooLarge (Starlette answers a failed body read with 400):
                # the answer is 413, and what the app would have sent is dropped.
                if not started:
                    started = True
                    await send_json(send, 413, error_body("too_large", f"request body over {limit} bytes", "body",
                                                          request_id))
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        except TooLarge:
            if not started:
                started = True
                await send_json(send, 413, error_body("too_large", f"request body over {limit} bytes", "body",
                                                      request_id))
