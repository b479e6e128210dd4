"""The HTTP service: :func:`create_app` builds the FastAPI application over one memory file,
:func:`serve` runs it with uvicorn (``unified-memory serve``).

One process serves every user of the file: each request is scoped to the user in its path
and runs on the memory's worker thread (the async twins), so the event loop only parses,
authenticates and answers. Liveness is ``GET /healthz`` (the process answers), readiness
``GET /readyz`` (the memory file answers a query). On shutdown (SIGTERM / Ctrl-C) uvicorn
stops accepting connections and lets the requests in flight finish; then the memory is
closed on its worker, after every write queued before it.

    >>> import tempfile, os
    >>> from unified_memory import UnifiedMemory
    >>> from unified_memory.service.app import create_app
    >>> app = create_app(UnifiedMemory(os.path.join(tempfile.mkdtemp(), "m.db"), retrieval="lexical"))
    >>> sorted(p for p in app.openapi()["paths"] if "{user_id}" in p)[:3]
    ['/v1/users/{user_id}', '/v1/users/{user_id}/context', '/v1/users/{user_id}/entities']
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.exceptions import HTTPException
from starlette.routing import Route

from tiers.maintenance.keys import KeyRing
from tiers.storage.backend import Storage
from unified_memory._version import __version__
from unified_memory.errors import ConfigError, UnifiedMemoryError, wrong_type
from unified_memory.memory import UnifiedMemory
from unified_memory.service.api_docs import install_docs
from unified_memory.service.auth import Gate, Refusal
from unified_memory.service.errors import TooLarge, error_body, field_of_location, status_of
from unified_memory.service.gatekeeper import Gatekeeper
from unified_memory.service.middleware import AccessLog, BodyLimit
from unified_memory.service.routes import admin_router, router
from unified_memory.validation import pydantic_error

__all__ = ["ServiceSettings", "create_app", "serve", "serve_workers", "app_from_environment", "WORKER_SPEC", "GC_THRESHOLDS", "SWITCH_INTERVAL",
           "tune_gc"]

log = logging.getLogger("unified_memory.service")


class ServiceSettings(BaseModel):
    """What an operator may tune. ``max_body_bytes``: any request body (413 above it);
    ``max_import_bytes``: ``POST /import`` bodies; ``max_failed_auth`` failed
    authentications per client address per ``failed_auth_window`` seconds before 429;
    ``mcp``: mount the MCP server at ``/mcp``; ``console``: serve the web console at ``/ui``. Slow and numerous clients (applied by
    :func:`serve`): a request head must arrive within ``header_timeout`` seconds (else the
    connection is closed), a body may pause at most ``body_timeout`` seconds (else 408), and
    more than ``max_connections`` open connections are answered 503. ``trusted_proxies``:
    the addresses (or networks, or ``*``) whose ``X-Forwarded-For`` names the client; none by
    default, so the client is the TCP peer.

        >>> ServiceSettings(trusted_proxies=["10.0.0.0/8"]).header_timeout
        10.0
    """

    model_config = ConfigDict(extra="forbid")

    max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    max_import_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    max_failed_auth: int = Field(default=20, ge=1)
    failed_auth_window: float = Field(default=60.0, gt=0)
    mcp: bool = True
    console: bool = True
    trusted_proxies: list[str] = Field(default_factory=list)
    header_timeout: float = Field(default=10.0, gt=0, le=3600)
    body_timeout: float = Field(default=30.0, gt=0, le=3600)
    max_connections: int = Field(default=1000, ge=1)

    @field_validator("trusted_proxies")
    @classmethod
    def _addresses(cls, value: list[str]) -> list[str]:
        for i, address in enumerate(value):
            try:
                if address != "*":
                    ipaddress.ip_network(address, strict=False)
            except ValueError:
                raise ValueError(f"{address[:80]!r} (item {i}) is not an IP address, a network "
                                 "(10.0.0.0/8) or '*'") from None
        return value


def _request_id(request: Request) -> str | None:
    return getattr(request.state, "request_id", None)


#: FastAPI's answer to a JSON body ``json.loads`` fails on other than by a syntax error.
_UNPARSED_BODY = "There was an error parsing the body"


def _unparsed_reason(cause: BaseException | None) -> str:
    """Why a body could not be parsed, for the ``malformed_json`` answer."""
    if isinstance(cause, UnicodeDecodeError):
        return f"not UTF-8 (byte {cause.start})"
    if isinstance(cause, RecursionError):
        return "nested too deeply"
    return "it could not be read"


def _not_an_object(error: dict[str, Any]) -> str:
    """What the body was instead of a JSON object, from the validation error at ``body``."""
    if error.get("type") == "missing":
        return "there is no body"
    value = error.get("input")
    if isinstance(value, bytes | str) or error.get("type") == "json_invalid":
        return str(error.get("msg", ""))
    kinds = ((bool, "a boolean"), (int | float, "a number"), (list, "an array"), (type(None), "null"))
    return "got " + next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(UnifiedMemoryError)
    async def library_error(request: Request, exc: UnifiedMemoryError) -> JSONResponse:
        status, kind = status_of(exc)
        if status >= 500:
            log.error("request %s failed: %s: %s", _request_id(request), type(exc).__name__, exc)
        return JSONResponse(error_body(kind, str(exc), exc.field, _request_id(request)), status_code=status)

    @app.exception_handler(Refusal)
    async def refused(request: Request, exc: Refusal) -> JSONResponse:
        return JSONResponse(error_body(exc.type, exc.message, exc.field, _request_id(request)),
                            status_code=exc.status, headers=exc.headers)

    def malformed_json(request: Request, reason: str) -> JSONResponse:
        return JSONResponse(error_body("malformed_json", "the body must be a JSON object in UTF-8 (Content-Type: "
                                       f"application/json): {reason}", "body", _request_id(request)), status_code=400)

    @app.exception_handler(RequestValidationError)
    async def schema_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid" or (
                tuple(first.get("loc", ())) == ("body",) and not isinstance(first.get("input"), dict)):
            # not JSON, or JSON that is not an object (an array, a string, a number, null, nothing)
            return malformed_json(request, _not_an_object(first))
        # the most specific error: a union's members each fail, the one naming a field says most
        first = max(errors, key=lambda e: len(field_of_location(e.get("loc", ())) or ""), default=first)
        field = field_of_location(first.get("loc", ()))
        message = f"{field or 'body'}: {first.get('msg', 'invalid')}"
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more)"
        return JSONResponse(error_body("invalid", message, field or "body", _request_id(request)), status_code=422)

    @app.exception_handler(TooLarge)
    async def too_large(request: Request, exc: TooLarge) -> JSONResponse:
        return JSONResponse(error_body("too_large", str(exc), "body", _request_id(request)), status_code=413)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == _UNPARSED_BODY:  # FastAPI: json.loads raised, not JSONDecodeError
            return malformed_json(request, _unparsed_reason(exc.__cause__))
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid")
        return JSONResponse(error_body(kind, str(exc.detail), None, _request_id(request)),
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("request %s failed", _request_id(request))
        request_id = _request_id(request)  # Starlette answers this one outside AccessLog: echo the id here
        return JSONResponse(error_body("internal", "internal error; see the server log", None, request_id),
                            status_code=500, headers={"X-Request-ID": request_id} if request_id else None)


def _settings(settings: ServiceSettings | dict[str, Any] | None) -> ServiceSettings:
    if isinstance(settings, ServiceSettings):
        return settings
    if settings is not None and not isinstance(settings, dict):
        raise wrong_type("settings", "ServiceSettings or dict", settings)
    try:
        return ServiceSettings(**(settings or {}))
    except ValidationError as exc:
        error = pydantic_error("settings", exc)
        raise ConfigError(str(error), field=error.field) from None


def create_app(memory: UnifiedMemory, *, keys: KeyRing | None = None,
               settings: ServiceSettings | dict[str, Any] | None = None) -> FastAPI:
    """The service over ``memory`` (its file holds the API keys unless ``keys`` is given).

    The application owns the memory from then on: it is closed when the application shuts down.
    """
    chosen = _settings(settings)
    ring = keys if keys is not None else KeyRing(Storage(memory.path, pool_size=memory.config.pool_size))
    mcp_app, mcp_lifespan = _mcp(memory) if chosen.mcp else (None, None)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            # The model loads before uvicorn listens: no request waits seconds for it.
            await asyncio.to_thread(memory.warm_up)
            if mcp_lifespan is not None:
                await stack.enter_async_context(mcp_lifespan())
            try:
                yield
            finally:
                await memory.__aexit__(None, None, None)  # on the worker, after the writes queued before
                ring.storage.close()

    app = FastAPI(title="unified-memory", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  description="Tiered long-term memory for LLM agents, over HTTP. Send "
                              "`Authorization: Bearer <key>` (create one with `unified-memory keys create`).")
    app.state.memory = memory
    app.state.keys = ring
    app.state.settings = chosen
    _install_error_handlers(app)
    install_docs(app)
    app.include_router(router)
    app.include_router(admin_router)

    @app.get("/healthz", tags=["operations"], summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", tags=["operations"], summary="Readiness: the memory file answers")
    async def readyz() -> JSONResponse:
        try:
            await memory.astats()
        except UnifiedMemoryError as exc:
            return JSONResponse({"status": "unavailable", "reason": type(exc).__name__}, status_code=503)
        return JSONResponse({"status": "ready"})

    if mcp_app is not None:  # a Route, not a mount: clients use exactly /mcp (a mount would redirect it)
        app.router.routes.append(Route("/mcp", endpoint=mcp_app, methods=["GET", "POST", "DELETE"]))
    gate = Gate(ring, max_failures=chosen.max_failed_auth, window=chosen.failed_auth_window)
    if chosen.console:  # its sign-in checks keys with the same gate: one limit on failed attempts
        from unified_memory.console import install_console

        install_console(app, memory, ring, gate)
    # Outermost first: request id and access log, then keys, then the body limit.
    app.add_middleware(BodyLimit, limit=chosen.max_body_bytes, limits={"/import": chosen.max_import_bytes},
                       idle_timeout=chosen.body_timeout)
    app.add_middleware(Gatekeeper, gate=gate)
    app.add_middleware(AccessLog)
    return app


def _mcp(memory: UnifiedMemory) -> tuple[Any, Any]:
    """The MCP server's ASGI app (each request runs with :data:`~unified_memory.service.mcp.current_memory`
    set to the memory of the user the gatekeeper admitted, scoped by the ``agent_id`` / ``session_id``
    query parameters) and the session manager's ``run`` for the lifespan."""
    from urllib.parse import parse_qs

    from unified_memory.service.mcp import build_mcp_server, current_memory, mcp_http_app

    inner, sessions = mcp_http_app(build_mcp_server())

    class ScopedMCP:  # an ASGI app (an instance, so Starlette's Route passes it scope, receive, send)
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            user = scope.get("state", {}).get("user_id")
            if user is None:  # the gatekeeper admits no /mcp request without a user
                raise Refusal(401, "unauthorized", "missing API key", field="authorization")
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            view = memory.scoped(user_id=user, agent_id=(query.get("agent_id") or [None])[0],
                                 session_id=(query.get("session_id") or [None])[0])
            token = current_memory.set(view)
            try:
                await inner(scope, receive, send)
            finally:
                current_memory.reset(token)

    return ScopedMCP(), sessions.run


def serve(memory: UnifiedMemory, *, host: str = "127.0.0.1", port: int = 8080,
          settings: ServiceSettings | dict[str, Any] | None = None, log_level: str = "info") -> None:
    """Run the service until SIGINT / SIGTERM (requests in flight finish, then the memory closes)."""
    import uvicorn

    chosen = _settings(settings)
    logging.basicConfig(level=log_level.upper(), format="%(message)s")
    tune_gc()
    config = uvicorn.Config(create_app(memory, settings=chosen), host=host, port=port, log_level=log_level,
                            access_log=False, timeout_graceful_shutdown=30, lifespan="on", **_connections(chosen))
    _graceful_server(config).run()


def _connections(settings: ServiceSettings) -> dict[str, Any]:
    """uvicorn's options for ``settings``: head deadline, connection limit, trusted proxies."""
    from unified_memory.service.connections import uvicorn_options

    return uvicorn_options(trusted_proxies=settings.trusted_proxies, header_timeout=settings.header_timeout,
                           max_connections=settings.max_connections)


#: The cyclic garbage collector's thresholds in a service process (Python's: 700, 10, 10).
GC_THRESHOLDS = (10_000, 20, 20)


#: How long a thread may hold the GIL while another waits for it, in a service process (Python's: 5 ms).
#: A recall gives the GIL up at every database call and waits to get it back; while another tenant's
#: 100 KB turns keep two threads busy, each wait was a whole interval. ``benchmarks/tenant_fairness.py
#: --recalls 300 --max-seconds 60`` (SQLite): B's recall p50 / p95 200 / 368 ms at 5 ms, 37 / 76 ms at
#: 0.5 ms; A's turns 9.6 / s and 7.8 / s.
SWITCH_INTERVAL = 0.0005


def tune_gc() -> None:
    """Collect the young generation every 10,000 allocations, not every 700: a recall allocates
    thousands of objects, so the default ran several collections per request (6.5% of the memory
    worker's samples), and the full ones paused a request for ~100 ms now and then. Measured with
    ``benchmarks/server.py --servers 2 --pin`` at 16 clients, 40 s, twice each way: 380 / 378 req/s
    and turn p99 156 / 149 ms by default, 402 / 392 req/s and 64 / 68 ms with these. Only the
    processes the service runs: a program that embeds the memory keeps its own settings. Also
    sets the GIL's switch interval to :data:`SWITCH_INTERVAL`, so one tenant's busy threads do not
    make another's short calls wait 5 ms at each database call."""
    import gc
    import sys

    gc.set_threshold(*GC_THRESHOLDS)
    sys.setswitchinterval(SWITCH_INTERVAL)


#: The environment variable that hands each worker process of ``serve_workers`` what to open.
WORKER_SPEC = "UNIFIED_MEMORY_SERVE_SPEC"


def serve_workers(db: str, *, workers: int, overrides: dict[str, Any] | None = None, host: str = "127.0.0.1",
                  port: int = 8080, settings: dict[str, Any] | None = None, log_level: str = "info") -> None:
    """Run ``workers`` service processes on one listening socket (uvicorn's supervisor restarts one
    that dies). Each opens the file itself (:func:`app_from_environment`): they share it as any
    processes do (docs/deployment.md), a write answered by one is recalled through the others.
    SIGTERM / SIGINT stops them gracefully."""
    import json
    import os

    import uvicorn

    chosen = _settings(settings)
    os.environ[WORKER_SPEC] = json.dumps({"db": db, "overrides": overrides or {}, "settings": chosen.model_dump(),
                                          "log_level": log_level})
    logging.basicConfig(level=log_level.upper(), format="%(message)s")
    uvicorn.run("unified_memory.service.app:app_from_environment", factory=True, workers=workers, host=host,
                port=port, log_level=log_level, access_log=False, timeout_graceful_shutdown=30, lifespan="on",
                **_connections(chosen))


def app_from_environment() -> FastAPI:
    """The application of one worker process of :func:`serve_workers` (its spec in :data:`WORKER_SPEC`)."""
    import json
    import os

    spec = json.loads(os.environ[WORKER_SPEC])
    logging.basicConfig(level=str(spec.get("log_level", "info")).upper(), format="%(message)s")
    tune_gc()
    settings = _settings(spec.get("settings"))
    _connections(settings)  # this process's head deadline (uvicorn builds the protocol here)
    return create_app(UnifiedMemory(spec["db"], **spec.get("overrides", {})), settings=settings)


def _graceful_server(config: Any) -> Any:
    """uvicorn's server, except that the SIGTERM / SIGINT that asked for a graceful shutdown is not
    raised again once the shutdown is done (uvicorn does, so the process died of the signal):
    a service stopped cleanly exits 0, as process supervisors and tests expect."""
    import uvicorn

    class GracefulServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return GracefulServer(config)
