"""The MCP server driven by the ``mcp`` package's own client: over stdio (``unified-memory mcp``
in a child process) and over streamable HTTP (the ASGI app behind a middleware that picks the
user's memory from a header, served by uvicorn on loopback)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx2  # noqa: E402  (the mcp SDK's own HTTP client)
import uvicorn  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Route  # noqa: E402

from unified_memory import UnifiedMemory  # noqa: E402
from unified_memory.service.mcp import build_mcp_server, current_memory, mcp_http_app  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"remember", "recall", "context", "log_turn", "forget"}


def stdio(db: Path, user: str) -> Client:
    """A client of ``python -m unified_memory mcp`` for ``user`` (this checkout's code, lexical recall)."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "UNIFIED_MEMORY_CACHE": os.environ.get("UNIFIED_MEMORY_CACHE", str(db.parent / "cache"))}
    return Client(StdioServerParameters(
        command=sys.executable, args=["-m", "unified_memory", "--retrieval", "lexical", "mcp", "--db", str(db),
                                      "--user", user], env=env, cwd=str(db.parent)), read_timeout_seconds=30)


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def run(coro: Awaitable[Any]) -> Any:
    """Run ``coro``; a failure inside the client's task groups is raised as itself (an assertion
    error stays readable), not as nested exception groups."""
    try:
        return asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        raise leaf from None


@pytest.mark.slow
def test_stdio_tools_remember_recall_context_log_forget(tmp_path):
    db = tmp_path / "memory.db"

    async def scenario() -> None:
        async with stdio(db, "ada") as client:
            listed = (await client.list_tools()).tools
            assert {t.name for t in listed} == TOOLS
            for tool in listed:
                assert len(tool.description or "") > 80, tool.name
                assert tool.input_schema["type"] == "object" and tool.input_schema["properties"], tool.name
                assert tool.output_schema and tool.output_schema["type"] == "object", tool.name
                for name, prop in tool.input_schema["properties"].items():
                    assert prop.get("description"), f"{tool.name}.{name} has no description"
            schemas = {t.name: t.input_schema for t in listed}
            assert schemas["recall"]["required"] == ["query"] and schemas["forget"]["required"] == ["ids"]

            stored = await client.call_tool("remember", {"text": "I am allergic to peanuts", "importance": 0.9,
                                                         "category": "health"})
            assert not stored.is_error, text_of(stored)
            fact_id = stored.structured_content["id"]
            assert fact_id.startswith("fact_") and fact_id in text_of(stored)

            found = await client.call_tool("recall", {"query": "peanuts allergy", "limit": 5})
            assert not found.is_error, text_of(found)
            hits = found.structured_content["hits"]
            assert hits[0]["id"] == fact_id and hits[0]["tier"] == "long_term"
            assert hits[0]["text"] == "I am allergic to peanuts" and hits[0]["score"] > 0 and hits[0]["created_at"]
            first = text_of(found).splitlines()[0]
            assert first.startswith("1. [long_term, ") and "I am allergic to peanuts" in first and fact_id in first

            block = await client.call_tool("context", {"query": "can I eat peanuts?", "max_tokens": 300})
            assert not block.is_error, text_of(block)
            assert "allergic to peanuts" in block.structured_content["text"]
            assert block.structured_content["text"] == text_of(block)
            assert 0 < block.structured_content["tokens"] <= 300
            assert block.structured_content["max_tokens"] == 300
            assert fact_id in [h["id"] for h in block.structured_content["hits"]]

            logged = await client.call_tool("log_turn", {"user": "My sister Zelda lives in Reykjavik",
                                                         "assistant": "Noted!"})
            assert not logged.is_error, text_of(logged)
            ids = logged.structured_content["ids"]
            assert len(ids) == 2 and all(i in text_of(logged) for i in ids)
            turn = await client.call_tool("recall", {"query": "Zelda Reykjavik", "limit": 10})
            assert any("Reykjavik" in h["text"] for h in turn.structured_content["hits"])
            assert set(ids) & {h["id"] for h in turn.structured_content["hits"]}  # the turn itself

            gone = await client.call_tool("forget", {"ids": [fact_id]})
            assert not gone.is_error, text_of(gone)
            assert gone.structured_content["forgotten"] == [fact_id]
            assert gone.structured_content["deleted"]["facts"] == 1
            after = await client.call_tool("recall", {"query": "peanuts allergy"})
            assert fact_id not in {h["id"] for h in after.structured_content["hits"]}
            assert "I am allergic to peanuts" not in text_of(after)
            # the relation the fact stated and its value went with it: nothing about peanuts is left
            assert after.structured_content["hits"] == [] and text_of(after).startswith("No memories match")
            # the rest stays: forget deletes only the ids given
            assert any("Reykjavik" in h["text"] for h in
                       (await client.call_tool("recall", {"query": "Zelda"})).structured_content["hits"])
            # several ids at once: the turn's two messages, and what was taken only from them
            both = await client.call_tool("forget", {"ids": ids})
            assert not both.is_error and both.structured_content["deleted"]["messages"] == 2
            assert ids[0] not in {h["id"] for h in
                                  (await client.call_tool("recall", {"query": "Zelda"})).structured_content["hits"]}

    run(scenario())
    with UnifiedMemory(db, user_id="ada", retrieval="lexical") as mem:
        assert mem.stats().messages == 0 and not [f for f in mem.facts() if "peanuts" in f.text]


@pytest.mark.parametrize("tool, arguments, field", [
    ("remember", {"text": "I keep bees", "importance": 7}, "importance"),
    ("remember", {"text": "   "}, "text"),
    ("recall", {"query": "bees", "limit": 0}, "limit"),
    ("recall", {"query": "bees", "limit": 1000}, "limit"),
    ("recall", {"query": "bees", "tiers": ["nonsense"]}, "tiers"),
    ("recall", {"query": "bees", "days": -3}, "days"),
    ("recall", {"query": "bees", "limit": "many"}, "limit"),
    ("context", {"max_tokens": 0}, "max_tokens"),
    ("log_turn", {"user": ""}, "user"),
    ("forget", {"ids": []}, "ids"),
    ("forget", {"ids": ["fact_does_not_exist"]}, "ids"),
])
def test_in_process_bad_arguments_are_tool_errors_naming_the_field(tool, arguments, field):
    with UnifiedMemory(retrieval="lexical") as mem:
        kept = mem.remember("I keep bees")
        server = build_mcp_server(lambda: mem)
        before = mem.stats()

        async def call() -> Any:
            async with Client(server) as client:  # in process, through the SDK's request handling
                return await client.call_tool(tool, arguments)

        result = run(call())
        assert result.is_error
        assert field in text_of(result)
        if result.structured_content is not None:  # the memory refused it (not the schema)
            assert result.structured_content["error"]["field"] == field
            assert text_of(result).startswith(f"{field}:")
        assert mem.stats() == before and [f.id for f in mem.facts()] == [kept]


@pytest.mark.slow
def test_stdio_bad_argument_writes_nothing_and_users_stay_apart(tmp_path):
    db = tmp_path / "shared.db"

    async def scenario() -> None:
        async with stdio(db, "ada") as ada, stdio(db, "bob") as bob:
            refused = await ada.call_tool("remember", {"text": "I keep bees", "importance": 3})
            assert refused.is_error and text_of(refused).startswith("importance:")
            assert refused.structured_content["error"]["field"] == "importance"
            empty = await ada.call_tool("recall", {"query": "bees"})
            assert empty.structured_content["hits"] == []

            ada_fact = (await ada.call_tool("remember", {"text": "My locker code is 4711"})).structured_content["id"]
            bob_fact = (await bob.call_tool("remember", {"text": "My locker code is 9000"})).structured_content["id"]
            facts = {"query": "locker code", "tiers": ["long_term"]}
            assert [h["id"] for h in (await ada.call_tool("recall", facts)).structured_content["hits"]] == [ada_fact]
            assert [h["id"] for h in (await bob.call_tool("recall", facts)).structured_content["hits"]] == [bob_fact]
            ada_sees = await ada.call_tool("recall", {"query": "locker code 4711 9000"})
            bob_sees = await bob.call_tool("recall", {"query": "locker code 4711 9000"})
            assert "4711" in text_of(ada_sees) and "9000" not in text_of(ada_sees)
            assert "9000" in text_of(bob_sees) and "4711" not in text_of(bob_sees)
            assert "9000" not in (await ada.call_tool("context", {"query": "locker"})).structured_content["text"]
            # ada cannot forget bob's memory by its id
            stolen = await ada.call_tool("forget", {"ids": [bob_fact]})
            assert stolen.is_error and text_of(stolen).startswith("ids:")
            assert [h["id"] for h in (await bob.call_tool("recall", facts)).structured_content["hits"]] == [bob_fact]

    run(scenario())
    with UnifiedMemory(db, user_id="ada", retrieval="lexical") as mem:
        assert [f.text for f in mem.facts()] == ["My locker code is 4711"]
        assert [f.text for f in mem.scoped(user_id="bob").facts()] == ["My locker code is 9000"]


# --- streamable HTTP: the app mounted at /mcp, the user's memory set by a middleware ----------------

class UserFromHeader:
    """An outer ASGI middleware (as the service's bearer-key middleware will be): it sets
    ``current_memory`` to the memory of the user named by ``X-User`` for the request."""

    def __init__(self, app: Any, memory: UnifiedMemory) -> None:
        self.app, self.memory = app, memory

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        user = dict(scope["headers"]).get(b"x-user", b"").decode()
        if not user:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            return await send({"type": "http.response.body", "body": b""})
        token = current_memory.set(self.memory.scoped(user_id=user))
        try:
            await self.app(scope, receive, send)
        finally:
            current_memory.reset(token)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def user_from_header_http_middleware(memory: UnifiedMemory) -> Any:
    """The same as a ``BaseHTTPMiddleware`` dispatch (FastAPI's ``@app.middleware("http")``)."""
    from starlette.responses import Response

    async def dispatch(request: Any, call_next: Any) -> Any:
        user = request.headers.get("x-user")
        if not user:
            return Response(status_code=401)
        token = current_memory.set(memory.scoped(user_id=user))
        try:
            return await call_next(request)
        finally:
            current_memory.reset(token)

    return dispatch


@pytest.fixture(params=["asgi-middleware", "fastapi-http-middleware"])
def http_url(tmp_path, request):
    memory = UnifiedMemory(tmp_path / "http.db", retrieval="lexical")
    mcp_asgi, sessions = mcp_http_app(build_mcp_server())

    @asynccontextmanager
    async def lifespan(app: Any):
        async with sessions.run():
            yield

    if request.param == "asgi-middleware":
        app: Any = UserFromHeader(Starlette(routes=[Route("/mcp", endpoint=mcp_asgi)], lifespan=lifespan), memory)
    else:  # as the service will be: FastAPI, the MCP app on the route /mcp, a middleware in front
        from fastapi import FastAPI

        app = FastAPI(lifespan=lifespan)
        app.router.routes.append(Route("/mcp", endpoint=mcp_asgi))
        app.middleware("http")(user_from_header_http_middleware(memory))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        memory.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_streamable_http_serves_each_request_as_the_user_the_middleware_chose(http_url, mode):
    async def connect(user: str) -> Any:
        http = httpx2.AsyncClient(headers={"X-User": user}, timeout=30)
        return http, Client(streamable_http_client(http_url, http_client=http), mode=mode)

    async def scenario() -> None:
        (ada_http, ada), (bob_http, bob) = await connect("ada"), await connect("bob")
        async with ada_http, bob_http, ada, bob:
            # auto speaks the 2026 protocol (each POST served inline), legacy the handshake era
            # (served in the session manager's task group): the middleware's memory reaches both
            assert (ada.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS) == (mode == "legacy")
            assert {t.name for t in (await ada.list_tools()).tools} == TOOLS
            ada_fact = (await ada.call_tool("remember", {"text": f"My favourite tea is sencha ({mode})"}))
            assert not ada_fact.is_error, text_of(ada_fact)
            bob_fact = await bob.call_tool("remember", {"text": f"My favourite tea is rooibos ({mode})"})
            facts = {"query": "favourite tea", "tiers": ["long_term"]}
            ada_hits = (await ada.call_tool("recall", facts)).structured_content["hits"]
            bob_hits = (await bob.call_tool("recall", facts)).structured_content["hits"]
            assert [h["id"] for h in ada_hits] == [ada_fact.structured_content["id"]]
            assert [h["id"] for h in bob_hits] == [bob_fact.structured_content["id"]]
            ada_all = text_of(await ada.call_tool("recall", {"query": "favourite tea sencha rooibos"}))
            bob_all = text_of(await bob.call_tool("recall", {"query": "favourite tea sencha rooibos"}))
            assert "sencha" in ada_all and "rooibos" not in ada_all
            assert "rooibos" in bob_all and "sencha" not in bob_all
            refused = await bob.call_tool("forget", {"ids": [ada_fact.structured_content["id"]]})
            assert refused.is_error and text_of(refused).startswith("ids:")
            assert len((await ada.call_tool("recall", facts)).structured_content["hits"]) == 1

    run(scenario())
    with httpx2.Client() as plain:  # no user: the middleware refuses before MCP is reached
        assert plain.post(http_url, json={}).status_code == 401


def test_http_server_without_a_memory_for_the_request_answers_an_error_and_no_data():
    server = build_mcp_server()  # memory_for reads current_memory, which nothing set here

    async def call() -> Any:
        async with Client(server) as client:
            return await client.call_tool("recall", {"query": "anything"})

    result = run(call())
    assert result.is_error and "recall" in text_of(result) and not result.structured_content


@pytest.mark.slow
def test_stdio_stdout_carries_only_protocol_messages(tmp_path):
    import json
    import subprocess

    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "log_turn", "arguments": {
            "user": "I live in Lisbon", "assistant": "Lovely city"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recall", "arguments": {
            "query": "Lisbon", "limit": 0}}},
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "unified_memory", "--retrieval", "lexical", "mcp", "--db",
                             str(tmp_path / "m.db"), "--user", "ada"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        lines = [proc.stdout.readline() for _ in range(3)]  # stdin stays open until every reply is in
        proc.stdin.close()
        lines += proc.stdout.readlines()
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        watchdog.cancel()
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    replies = [json.loads(line) for line in lines]  # every line is JSON-RPC
    assert all(r.get("jsonrpc") == "2.0" for r in replies) and [r.get("id") for r in replies] == [1, 2, 3]
    assert replies[1]["result"]["structuredContent"]["ids"] and not replies[1]["result"].get("isError")
    assert replies[2]["result"]["isError"] and replies[2]["result"]["content"][0]["text"].startswith("limit:")


def test_mcp_command_without_the_server_extra_says_what_to_install(tmp_path):
    import subprocess

    fake = tmp_path / "no-extra" / "mcp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'mcp\'", name="mcp")\n')
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "unified_memory", "mcp", "--db", str(tmp_path / "m.db"),
                           "--user", "ada"], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 1 and done.stdout == ""
    assert "pip install 'unified-memory[server]'" in done.stderr
    assert not (tmp_path / "m.db").exists()
