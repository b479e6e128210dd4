"""The connections ``serve`` accepts: uvicorn's options (:func:`uvicorn_options`) with the
service's limits on slow and numerous clients, and its HTTP protocol with a deadline on the
request head (:data:`HeadDeadline`: uvicorn has a keep-alive timeout but none for a head that
trickles in, so a client sending a byte now and then held its connection for ever).

- a request head (request line and headers) must be complete ``header_timeout`` seconds after
  the connection opened, or after its first byte on a kept-alive connection (between requests
  uvicorn's keep-alive timeout closes an idle connection), and hold at most
  :data:`MAX_HEAD_BYTES`; else the connection is closed without an answer;
- more than ``max_connections`` open connections: a request on another one is answered 503
  (uvicorn's ``limit_concurrency``);
- ``X-Forwarded-For`` / ``X-Forwarded-Proto`` are read only from the ``trusted_proxies``
  (uvicorn trusts 127.0.0.1 by default; here nobody unless configured), so the client address
  the failed-authentication limiter and the access log use is the TCP peer's.

The body's idle timeout is an ASGI layer (:class:`~unified_memory.service.middleware.BodyLimit`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HeadDeadline", "uvicorn_options", "set_header_timeout", "MAX_HEAD_BYTES"]

#: The longest request head (request line and headers) a connection may send.
MAX_HEAD_BYTES = 64 * 1024


class _Deadline(asyncio.Protocol):
    """The head deadline of one connection, mixed into uvicorn's HTTP protocols: started when the
    connection opens and when a request head begins, stopped when the head is complete; when it
    passes, the connection is closed."""

    header_timeout: float = 10.0  # the process's (set_header_timeout)
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    head_timer: asyncio.TimerHandle | None = None
    head_bytes = 0

    def head_begins(self) -> None:
        """A head is awaited: start the deadline (unless one runs)."""
        if self.head_timer is None:
            self.head_bytes = 0
            self.head_timer = self.loop.call_later(self.header_timeout, self.head_late)

    def head_done(self) -> None:
        """The head is complete (or the connection went): no deadline."""
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def head_grew(self, size: int) -> None:
        """``size`` more bytes of the head came: close the connection past :data:`MAX_HEAD_BYTES`."""
        self.head_bytes += size
        if self.head_bytes > MAX_HEAD_BYTES:
            self.head_late()

    def head_late(self) -> None:
        """The deadline passed (or the head is too long): close the connection without an answer."""
        self.head_done()
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.head_begins()

    def connection_lost(self, exc: Exception | None) -> None:
        self.head_done()
        super().connection_lost(exc)


class H11Deadline(_Deadline, H11Protocol):
    """uvicorn's h11 protocol with the head deadline and :data:`MAX_HEAD_BYTES`, counted here up
    to the blank line that ends the head (h11 bounds only what it buffers of an unfinished head,
    so a long head that arrives whole would pass)."""

    head_tail = b""  # the last bytes of the head so far: its end may straddle two reads

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # between requests: these bytes are (part of) a head
            self.head_begins()
            seen = self.head_tail + data
            end = seen.find(b"\r\n\r\n")
            self.head_tail = seen[-3:] if end < 0 else b""
            self.head_grew(len(data) if end < 0 else max(0, end + 4 - (len(seen) - len(data))))
            if self.transport.is_closing():
                return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self.head_done()
            self.head_tail = b""


HeadDeadline: type[asyncio.Protocol] = H11Deadline
"""The HTTP protocol ``serve`` gives uvicorn: httptools' when installed (uvicorn's choice), else h11's."""

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools is optional (uvicorn[standard] has it)
    pass
else:
    class HttpToolsDeadline(_Deadline, HttpToolsProtocol):
        """uvicorn's httptools protocol with the head deadline and :data:`MAX_HEAD_BYTES`."""

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.head_begins()

        def on_url(self, url: bytes) -> None:
            super().on_url(url)
            self.head_grew(len(url))

        def on_header(self, name: bytes, value: bytes) -> None:
            super().on_header(name, value)
            self.head_grew(len(name) + len(value) + 4)

        def on_headers_complete(self) -> None:
            self.head_done()
            super().on_headers_complete()

    HeadDeadline = HttpToolsDeadline


def set_header_timeout(seconds: float) -> None:
    """The head deadline of every connection this process accepts from now on (uvicorn names the
    protocol class and builds it in each worker process, so the deadline is the process's)."""
    _Deadline.header_timeout = float(seconds)


def uvicorn_options(*, trusted_proxies: list[str], header_timeout: float, max_connections: int) -> dict[str, Any]:
    """uvicorn's options for the service (``uvicorn.Config`` / ``uvicorn.run`` keywords): the HTTP
    protocol with a head deadline (set here for this process), no WebSocket upgrades, the
    connection limit, and forwarded headers only from ``trusted_proxies``."""
    set_header_timeout(header_timeout)
    return {"http": HeadDeadline, "ws": "none", "proxy_headers": bool(trusted_proxies),
            "forwarded_allow_ips": list(trusted_proxies), "limit_concurrency": max_connections + 1,  # counts the asker
            "h11_max_incomplete_event_size": MAX_HEAD_BYTES}
