"""The ASGI layers every request passes: a request id and one structured access-log line
(:class:`AccessLog`), and the body size limit (:class:`BodyLimit`).

The access log is one JSON object per request on the ``unified_memory.service.access``
logger: ``request_id``, ``method``, ``path``, ``status``, ``ms``, ``client``, and the
``key_id`` and ``user`` the request was authenticated as (never the key). The request id
is the caller's ``X-Request-ID`` when it is a short printable token, else a new one; it is
sent back in ``X-Request-ID`` and inside error bodies.

A body over ``limit`` bytes is refused with 413 before the handler runs: at once when
``Content-Length`` says so, else as soon as the streamed body passes the limit. A body whose
next part does not come within ``idle_timeout`` seconds is answered 408 (and the connection
closed): a client that stalls mid-body holds nothing for long. A refused request writes
nothing (handlers read the whole body before they write).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from unified_memory.service.errors import TooLarge, error_body

__all__ = ["AccessLog", "BodyLimit", "BodyTimeout", "send_json"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Answer = tuple[int, dict[str, Any], dict[str, str]]  # status, JSON body, headers

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


class BodyTimeout(Exception):  # noqa: N818 - an answer, not a failure
    """The request body stalled: no part of it came within the idle timeout (408)."""


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes (``limits`` may raise it per path prefix) with 413,
    and bodies that stall for ``idle_timeout`` seconds (None: no timeout) with 408."""

    def __init__(self, app: ASGIApp, limit: int, *, limits: dict[str, int] | None = None,
                 idle_timeout: float | None = None) -> None:
        self.app = app
        self.limit = limit
        self.limits = limits or {}
        self.idle_timeout = idle_timeout

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
        too_large: Answer = (413, error_body("too_large", f"request body over {limit} bytes", "body", request_id), {})
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > limit):
            await send_json(send, *too_large)
            return
        received = 0
        whole = False  # the last part of the body came: receive() waits for a disconnect from now on
        refusal: Answer | None = None  # the body failed: whatever the app answers becomes this
        started = False

        async def receiving() -> Message:
            nonlocal received, whole, refusal
            if whole or self.idle_timeout is None:
                message = await receive()
            else:
                try:
                    message = await asyncio.wait_for(receive(), self.idle_timeout)
                except TimeoutError:
                    refusal = (408, error_body("timeout", f"no part of the request body came for {self.idle_timeout:g} s",
                                               "body", request_id), {"Connection": "close"})
                    raise BodyTimeout() from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                whole = not message.get("more_body", False)
                if received > limit:
                    refusal = too_large
                    raise TooLarge(limit)
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            if refusal is not None:
                # The app may have caught the failed read (Starlette answers it with 400): the answer
                # is the refusal, and what the app would have sent is dropped.
                if not started:
                    started = True
                    await send_json(send, *refusal)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        except (TooLarge, BodyTimeout):
            if not started and refusal is not None:
                started = True
                await send_json(send, *refusal)
