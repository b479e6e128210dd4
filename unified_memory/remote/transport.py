"""The HTTP side of :class:`~unified_memory.remote.client.RemoteMemory`: one :class:`Connection`
(the service's URL, the API key, an ``httpx.Client`` and one ``httpx.AsyncClient`` per event
loop, created on first use) shared by every ``scoped`` view, sending
:class:`~unified_memory.remote.wire.Call` objects for a :class:`Scope`.

Failures become the library's errors: the service's error answers through
:func:`~unified_memory.remote.wire_errors.error_from`, a refused connection or a timeout a
:class:`~unified_memory.errors.StoreUnavailableError` naming the URL, a closed connection a
:class:`~unified_memory.errors.ClosedError`.

    >>> from unified_memory.remote.wire import stats
    >>> connection = Connection("http://127.0.0.1:9", "um_key", timeout=0.5)
    >>> connection.target(Scope("ada", None, None), stats())
    ('/v1/users/ada/stats', {})
    >>> connection.send(Scope("ada", None, None), stats())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    unified_memory.errors.StoreUnavailableError: url: cannot reach the memory service at http://127.0.0.1:9: ...
    >>> connection.close()
"""

from __future__ import annotations

import asyncio
import codecs
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

from unified_memory._version import __version__
from unified_memory.errors import ClosedError, DependencyError, StorageError, StoreUnavailableError
from unified_memory.remote.wire import Call
from unified_memory.remote.wire_errors import error_from

try:
    import httpx
except ImportError as exc:  # pragma: no cover - the server extra brings httpx
    raise DependencyError("RemoteMemory needs httpx: pip install 'unified-memory[server]'") from exc

__all__ = ["Connection", "Scope"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Scope:
    """Whose memory a call reads or writes: the user in the path, agent and session as query parameters."""

    user_id: str
    agent_id: str | None
    session_id: str | None


def _segment(user_id: str) -> str:
    return quote(user_id, safe="")


#: Requests one event loop sends at once over a connection (httpx's pool holds 100 connections).
IN_FLIGHT = 32


class Connection:
    """The URL, the key and the HTTP clients, shared by a :class:`RemoteMemory` and its scoped views."""

    def __init__(self, url: str, api_key: str, *, timeout: float) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {api_key}", "User-Agent": f"unified-memory/{__version__}",
                        "Accept": "application/json"}
        self.closed = False
        self._client: httpx.Client | None = None
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary())
        self._gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary())
        self._lock = threading.Lock()

    # -- the clients ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise ClosedError("url: this RemoteMemory is closed", field="url")

    def client(self) -> httpx.Client:
        """The sync client (one connection pool for every scoped view)."""
        with self._lock:
            self._check_open()
            if self._client is None:
                self._client = httpx.Client(base_url=self.url, headers=self.headers, timeout=self.timeout)
            return self._client

    def aclient(self) -> httpx.AsyncClient:
        """The async client of the running event loop (an async client cannot outlive its loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._check_open()
            client = self._async.get(loop)
            if client is None:
                client = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=self.timeout)
                self._async[loop] = client
            return client

    def gate(self) -> asyncio.Semaphore:
        """The running loop's limit on requests in flight (:data:`IN_FLIGHT`). httpx's pool rescans its
        whole queue on every pass (encode/httpcore#1035): thousands of gathered calls would stall
        the loop and time out waiting for a connection; waiting here is cheap and unbounded."""
        loop = asyncio.get_running_loop()
        with self._lock:
            gate = self._gates.get(loop)
            if gate is None:
                gate = self._gates[loop] = asyncio.Semaphore(IN_FLIGHT)
            return gate

    def close(self) -> None:
        """Close the sync client and forget the async ones (idempotent; ``aclose`` closes the loop's too)."""
        with self._lock:
            self.closed = True
            client, self._client = self._client, None
            self._async.clear()
        if client is not None:
            client.close()

    async def aclose(self) -> None:
        """Close the running loop's async client, then everything else."""
        with self._lock:
            running = self._async.pop(asyncio.get_running_loop(), None)
        if running is not None:
            await running.aclose()
        self.close()

    # -- requests ------------------------------------------------------------------------------

    def target(self, scope: Scope, call: Call[Any]) -> tuple[str, dict[str, Any]]:
        """The path and query parameters of ``call`` for ``scope``."""
        if call.admin:
            return f"/v1{call.path}", dict(call.params)
        user = call.user if call.user is not None else scope.user_id
        params = {k: _query(v) for k, v in call.params.items()}
        if scope.agent_id is not None:
            params["agent_id"] = scope.agent_id
        if scope.session_id is not None:
            params["session_id"] = scope.session_id
        return f"/v1/users/{_segment(user)}{call.path}", params

    def _failed(self, exc: Exception) -> StoreUnavailableError:
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "cannot reach the memory service"
        return StoreUnavailableError(f"url: {kind} at {self.url}: {type(exc).__name__}: {exc}"[:1000], field="url")

    def _answer(self, response: httpx.Response, call: Call[T]) -> T:
        if response.status_code >= 400:
            raise error_from(response.status_code, _body(response), self.url, call.fields)
        try:
            data = response.json()
        except ValueError:
            raise StorageError(f"url: the memory service at {self.url} answered something that is not JSON "
                               f"(HTTP {response.status_code})", field="url") from None
        return call.parse(data)

    def send(self, scope: Scope, call: Call[T], *, content: bytes | None = None) -> T:
        """Send ``call`` and read its answer (sync)."""
        path, params = self.target(scope, call)
        try:
            response = self.client().request(call.method, path, params=params, json=call.json, content=content,
                                             headers=_content_type(content))
        except httpx.TransportError as exc:
            raise self._failed(exc) from exc
        return self._answer(response, call)

    async def asend(self, scope: Scope, call: Call[T], *, content: bytes | None = None) -> T:
        """Send ``call`` and read its answer (async)."""
        path, params = self.target(scope, call)
        try:
            async with self.gate():
                response = await self.aclient().request(call.method, path, params=params, json=call.json,
                                                        content=content, headers=_content_type(content))
        except httpx.TransportError as exc:
            raise self._failed(exc) from exc
        return self._answer(response, call)

    # -- export, streamed ----------------------------------------------------------------------

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except httpx.TransportError as exc:
            raise self._failed(exc) from exc

    def export(self, scope: Scope, write: Callable[[str], Any]) -> int:
        """Stream ``GET /export`` into ``write`` (text, as it arrives); returns the row lines."""
        path, params = self.target(scope, _EXPORT)
        lines = _Lines(write)
        with self._errors(), self.client().stream("GET", path, params=params) as response:
            if response.status_code >= 400:
                response.read()
                raise error_from(response.status_code, _body(response), self.url)
            for chunk in response.iter_bytes():
                lines.feed(chunk)
        return lines.rows()

    async def aexport(self, scope: Scope, write: Callable[[str], Any]) -> int:
        """Async :meth:`export`."""
        path, params = self.target(scope, _EXPORT)
        lines = _Lines(write)
        async with self.gate(), self._aerrors(), self.aclient().stream("GET", path, params=params) as response:
            if response.status_code >= 400:
                await response.aread()
                raise error_from(response.status_code, _body(response), self.url)
            async for chunk in response.aiter_bytes():
                lines.feed(chunk)
        return lines.rows()

    @asynccontextmanager
    async def _aerrors(self) -> AsyncIterator[None]:
        try:
            yield
        except httpx.TransportError as exc:
            raise self._failed(exc) from exc


_EXPORT: Call[Any] = Call("GET", "/export", lambda body: body)


class _Lines:
    """Decodes the streamed export, hands the text on and counts its lines (the first is the header)."""

    def __init__(self, write: Callable[[str], Any]) -> None:
        self.write = write
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.newlines = 0

    def feed(self, chunk: bytes) -> None:
        self.newlines += chunk.count(b"\n")
        text = self.decoder.decode(chunk)
        if text:
            self.write(text)

    def rows(self) -> int:
        tail = self.decoder.decode(b"", final=True)
        if tail:
            self.write(tail)
        return max(0, self.newlines - 1)


def _query(value: Any) -> Any:
    return ("true" if value else "false") if isinstance(value, bool) else value


def _content_type(content: bytes | None) -> dict[str, str] | None:
    return None if content is None else {"Content-Type": "application/x-ndjson"}


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text[:500]
