"""The console's routes, mounted on the service under :data:`CONSOLE_PATH` by :func:`install_console`:
the sign-in, the pages, the actions and the two static files (the stylesheet and the icon), all
answered with the console's security headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import Response

from tiers.maintenance.keys import KeyRing
from unified_memory.console import actions, pages, signin
from unified_memory.console.security import apply_headers
from unified_memory.console.visits import CONSOLE_PATH, Console
from unified_memory.memory import UnifiedMemory
from unified_memory.service.auth import Gate

__all__ = ["CONSOLE_PATH", "install_console"]

_STATIC = {"console.css": "text/css; charset=utf-8", "favicon.svg": "image/svg+xml"}


def _static(name: str) -> Callable[[Request], Awaitable[Response]]:
    data = resources.files("unified_memory.console").joinpath("static", name).read_bytes()

    async def serve(_request: Request) -> Response:
        response = Response(data, media_type=_STATIC[name])
        apply_headers(response.headers)
        response.headers["Cache-Control"] = "public, max-age=3600"
        return response

    return serve


def install_console(app: FastAPI, memory: UnifiedMemory, keys: KeyRing, gate: Gate) -> Console:
    """Serve the console under :data:`CONSOLE_PATH` on ``app`` (the service over ``memory``)."""
    console = Console(memory, keys, gate)
    routes: list[tuple[str, Callable[..., Awaitable[Response]], list[str]]] = [
        ("/login", signin.login_form, ["GET"]), ("/login", signin.login, ["POST"]), ("/logout", signin.logout, ["POST"]),
        ("/", pages.home, ["GET"]), ("/users", pages.users, ["GET"]), ("/overview", pages.overview, ["GET"]),
        ("/facts", pages.facts, ["GET"]), ("/fact", pages.fact, ["GET"]), ("/graph", pages.graph, ["GET"]),
        ("/episodes", pages.episodes, ["GET"]), ("/recall", pages.recall, ["GET"]),
        ("/fact/edit", actions.edit_fact, ["POST"]), ("/forget", actions.forget_form, ["GET"]),
        ("/forget", actions.forget, ["POST"]), ("/export", actions.export, ["GET"]),
    ]
    for path, handler, methods in routes:
        app.add_api_route(CONSOLE_PATH + path, console.page(handler), methods=methods, include_in_schema=False)
    app.add_api_route(CONSOLE_PATH, lambda: console.redirect(CONSOLE_PATH + "/"), methods=["GET"],
                      include_in_schema=False)
    for name in _STATIC:
        app.add_api_route(f"{CONSOLE_PATH}/static/{name}", _static(name), methods=["GET"], include_in_schema=False)
    # last: any other address under the console is a page saying so (not the service's JSON 404)
    app.add_api_route(CONSOLE_PATH + "/{rest:path}", console.not_found, methods=["GET", "POST"], include_in_schema=False)
    return console
