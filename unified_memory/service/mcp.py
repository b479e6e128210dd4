"""The MCP server: a user's memory as five tools for an MCP client (desktop assistants, IDE agents).

Tools: ``remember`` (store a fact), ``recall`` (search every tier; numbered lines with each
memory's id), ``context`` (a token-budgeted memory block for a prompt), ``log_turn`` (record a
conversation turn, extracting facts from it) and ``forget`` (delete memories by the ids recall
or remember returned). Each answers readable text plus structured content; a bad argument is
an error result (``isError``) whose message starts with the field at fault, and writes nothing.
The tools call the memory's async twins, so the event loop never waits on SQLite.

``build_mcp_server(memory_for)`` builds the server; ``memory_for()`` returns the (already
user-scoped) :class:`~unified_memory.UnifiedMemory` of the current call. ``run_stdio`` serves
one user over stdio (``unified-memory mcp``); ``mcp_http_app`` gives the ASGI app and session
manager to mount at ``/mcp`` in the HTTP service, where a middleware sets :data:`current_memory`
for each request (the default ``memory_for`` reads it). Mounting, exactly::

    from contextlib import asynccontextmanager
    from fastapi import FastAPI
    from starlette.routing import Route
    from unified_memory.service.mcp import build_mcp_server, current_memory, mcp_http_app

    mcp_asgi, mcp_sessions = mcp_http_app(build_mcp_server())

    @asynccontextmanager
    async def lifespan(app):
        async with mcp_sessions.run():  # the MCP session manager's task group: must run
            yield

    app = FastAPI(lifespan=lifespan)
    app.router.routes.append(Route("/mcp", endpoint=mcp_asgi))  # clients use http://host:port/mcp
    # and in the bearer-key middleware, before the request goes on:
    #     token = current_memory.set(memory.scoped(user_id=key_user)); ...; current_memory.reset(token)

A :class:`~starlette.routing.Route` (every method, exactly ``/mcp``), not ``app.mount``: a mount
matches ``/mcp/...`` only and would answer ``/mcp`` with a redirect. The app ignores the path.
The value set in an outer ASGI (or ``BaseHTTPMiddleware``) middleware is visible inside the tools:
the per-request server tasks are started from the request's task and copy its context
(``tests/service/test_mcp.py`` checks it over both protocol eras).

    >>> import asyncio
    >>> from unified_memory import UnifiedMemory
    >>> mem = UnifiedMemory(retrieval="lexical")
    >>> server = build_mcp_server(lambda: mem)
    >>> sorted(tool.name for tool in asyncio.run(server.list_tools()))
    ['context', 'forget', 'log_turn', 'recall', 'remember']
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from os import PathLike
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field
from starlette.types import ASGIApp

from unified_memory._version import __version__
from unified_memory.errors import MemoryTypeError, MemoryValueError, invalid
from unified_memory.retrieval.context import escape_item
from unified_memory.types import TIERS, RecallHit

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from unified_memory.memory import UnifiedMemory

__all__ = ["current_memory", "memory_from_context", "build_mcp_server", "run_stdio", "mcp_http_app",
           "SERVER_NAME", "MAX_RECALL_LIMIT"]

_LOG = logging.getLogger(__name__)

SERVER_NAME = "unified-memory"
MAX_RECALL_LIMIT = 50
"""The most hits one ``recall`` call returns (more would flood the model's context)."""

current_memory: ContextVar[UnifiedMemory] = ContextVar("unified_memory_current_memory")
"""The memory of the request being served over HTTP, set by the service's middleware."""

INSTRUCTIONS = (
    "Long-term memory of the user across conversations. Call `recall` (or `context`) before answering "
    "anything that may depend on what the user said earlier (preferences, people, plans, past "
    "conversations). Call `remember` when the user states a durable fact worth keeping. Call `log_turn` "
    "after each exchange to keep the conversation history (facts are extracted from it). Call `forget` "
    "with the ids shown by `recall` only when the user asks to delete something."
)


def memory_from_context() -> UnifiedMemory:
    """The memory :data:`current_memory` holds for this request (the HTTP ``memory_for``).

    >>> from unified_memory import UnifiedMemory
    >>> mem = UnifiedMemory()
    >>> token = current_memory.set(mem)
    >>> memory_from_context() is mem
    True
    >>> current_memory.reset(token)
    """
    try:
        return current_memory.get()
    except LookupError:
        raise RuntimeError("no memory for this request: set unified_memory.service.mcp.current_memory in the "
                           "middleware before the request reaches the MCP app") from None


# --- structured results (each tool's published output schema) ---------------------------------

class Hit(BaseModel):
    """One recalled memory: ``id`` is what ``forget`` takes."""

    id: str
    tier: str
    text: str
    score: float
    created_at: str | None = None
    superseded: bool = False


class RememberResult(BaseModel):
    """What ``remember`` stored."""

    id: str
    text: str


class RecallResult(BaseModel):
    """The memories matching a query, best first."""

    query: str
    hits: list[Hit]


class ContextResult(BaseModel):
    """A memory block to put in a prompt, and the memories it holds."""

    text: str
    tokens: int
    max_tokens: int
    hits: list[Hit]
    sections: dict[str, int]


class LogTurnResult(BaseModel):
    """The ids of the messages logged (the user's, then the assistant's)."""

    ids: list[str]


class ForgetResult(BaseModel):
    """The ids forgotten and the rows deleted per table (with what derived from them)."""

    forgotten: list[str]
    deleted: dict[str, int]


def _hit(hit: RecallHit) -> Hit:
    return Hit(id=hit.id, tier=hit.tier, text=hit.text, score=round(hit.score, 4),
               created_at=hit.created_at.isoformat() if hit.created_at is not None else None,
               superseded=bool(hit.components.get("superseded")) or hit.components.get("status") == "superseded")


def _line(number: int, hit: RecallHit) -> str:
    """``1. [long_term, 2024-05-08] I keep bees (score 0.83, id fact_…)`` on one line."""
    tags: list[str] = [hit.tier]
    if hit.created_at is not None:
        tags.append(hit.created_at.strftime("%Y-%m-%d"))
    if hit.components.get("superseded") or hit.components.get("status") == "superseded":
        tags.append("superseded")
    role = hit.components.get("role")
    said = f"{escape_item(role)[:20]}: " if isinstance(role, str) and hit.tier in ("episodic", "short_term") else ""
    return f"{number}. [{', '.join(tags)}] {said}{escape_item(hit.text)} (score {hit.score:.2f}, id {hit.id})"


def _result(text: str, data: BaseModel) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=data.model_dump(mode="json"))


def _refusal(exc: MemoryValueError | MemoryTypeError) -> CallToolResult:
    """An argument the memory refused, as a tool error naming the field (nothing was written)."""
    message = " ".join(str(exc).split())
    field = exc.field
    if field and not message.startswith(f"{field}:"):
        message = f"{field}: {message}"
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True,
                          structured_content={"error": {"type": type(exc).__name__, "field": field,
                                                        "message": message}})


async def _guarded(call: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
    try:
        return await call()
    except (MemoryValueError, MemoryTypeError) as exc:
        return _refusal(exc)


def _check_ids(ids: object) -> list[str]:
    """``forget``'s ids: a non-empty list of non-blank strings (never "everything")."""
    if not isinstance(ids, list) or not ids:
        raise invalid("ids", "give at least one id (the ids recall and remember show)")
    if not all(isinstance(i, str) and i.strip() for i in ids):
        raise invalid("ids", "every id must be a non-empty string")
    return list(dict.fromkeys(i.strip() for i in ids))


# --- the tools ------------------------------------------------------------------------------------

_TIER_TEXT = ("Optional: search only these kinds of memory: long_term (facts), entity (people, places, things), "
              "episodic (past conversations), short_term (the current conversation). Omit to search all.")


def build_mcp_server(memory_for: Callable[[], UnifiedMemory] = memory_from_context, *,
                     name: str = SERVER_NAME) -> MCPServer[Any]:
    """An MCP server whose tools act on ``memory_for()``, the user-scoped memory of the current call.

    ``memory_for`` defaults to :func:`memory_from_context` (the HTTP service sets
    :data:`current_memory` per request); over stdio it returns the one user's memory.

    >>> import asyncio
    >>> from unified_memory import UnifiedMemory
    >>> mem = UnifiedMemory(retrieval="lexical")
    >>> result = asyncio.run(build_mcp_server(lambda: mem).call_tool("remember", {"text": "I keep bees"}))
    >>> result.structured_content["text"], mem.facts()[0].text
    ('I keep bees', 'I keep bees')
    """
    server: MCPServer[Any] = MCPServer(name, instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False)
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=writes, description=(
        "Store one durable fact about the user in long-term memory, to be recalled in later conversations: "
        "preferences, personal details, health, relationships, decisions, plans, commitments. Call it when "
        "the user states something worth knowing next time (not for small talk). Restating a known fact "
        "reinforces it; a newer fact on the same subject (\"I moved to Porto\") replaces the old one. "
        "Returns the fact's id (forget takes it)."))
    async def remember(
        text: Annotated[str, Field(description=(
            "The fact as one self-contained sentence that makes sense on its own later, "
            "e.g. \"The user is allergic to peanuts\" or \"I live in Lisbon\"."))],
        importance: Annotated[float | None, Field(description=(
            "How much it matters, 0 (trivia) to 1 (critical, e.g. health or safety). Omit to let the "
            "memory judge."), json_schema_extra={"minimum": 0, "maximum": 1})] = None,
        category: Annotated[str | None, Field(description=(
            "Optional short label: preference, personal, health, work, location, plan, ..."))] = None,
    ) -> Annotated[CallToolResult, RememberResult]:
        async def run() -> CallToolResult:
            fact_id = await memory_for().aremember(text, importance=importance, category=category)
            shown = escape_item(text.strip())
            return _result(f"Remembered: {shown} (id {fact_id})", RememberResult(id=fact_id, text=text.strip()))

        return await _guarded(run)

    @server.tool(annotations=reads, description=(
        "Search the user's memory (facts, people and places, past and current conversations) for what is "
        "relevant to a query. Use it before answering anything that depends on what the user said earlier. "
        "Returns numbered lines, best first: `N. [tier, date] text (score, id ID)`; the ids are what "
        "`forget` takes. Structured content: {query, hits: [{id, tier, text, score, created_at, "
        "superseded}]}. A memory marked superseded was true once and has been replaced."))
    async def recall(
        query: Annotated[str, Field(description=(
            "What to look for, in natural words, e.g. \"food allergies\" or \"where does Maria live\"."))],
        limit: Annotated[int, Field(description=f"How many memories at most (1 to {MAX_RECALL_LIMIT}).",
                                    json_schema_extra={"minimum": 1, "maximum": MAX_RECALL_LIMIT})] = 10,
        tiers: Annotated[list[str] | None, Field(description=_TIER_TEXT, json_schema_extra={
            "items": {"type": "string", "enum": list(TIERS)}})] = None,
        days: Annotated[float | None, Field(description=(
            "Optional: only memories from the last N days (e.g. 7)."), json_schema_extra={"exclusiveMinimum": 0})
        ] = None,
    ) -> Annotated[CallToolResult, RecallResult]:
        async def run() -> CallToolResult:
            if isinstance(limit, int) and not isinstance(limit, bool) and limit > MAX_RECALL_LIMIT:
                raise invalid("limit", f"must be at most {MAX_RECALL_LIMIT}, got {limit}")
            hits = await memory_for().arecall(query, limit=limit, tiers=tiers, days=days)
            data = RecallResult(query=query, hits=[_hit(h) for h in hits])
            if not hits:
                return _result(f"No memories match {' '.join(query.split())!r}.", data)
            return _result("\n".join(_line(i, h) for i, h in enumerate(hits, 1)), data)

        return await _guarded(run)

    @server.tool(annotations=reads, description=(
        "Get a ready-to-use memory block for the next answer: the relevant facts, people, past conversation "
        "and the recent conversation, within a token budget. Put the returned text in your working context "
        "when the user's request may depend on what you know about them. Structured content: {text, tokens, "
        "max_tokens, hits, sections}."))
    async def context(
        query: Annotated[str | None, Field(description=(
            "What the next answer is about (e.g. the user's message). Omit for a general block."))] = None,
        max_tokens: Annotated[int | None, Field(description=(
            "Token budget of the block (default: the memory's, 4000 unless configured)."),
            json_schema_extra={"minimum": 1})] = None,
    ) -> Annotated[CallToolResult, ContextResult]:
        async def run() -> CallToolResult:
            block = await memory_for().acontext(query, max_tokens=max_tokens)
            data = ContextResult(text=block.text, tokens=block.tokens, max_tokens=block.max_tokens,
                                 hits=[_hit(h) for h in block.hits],
                                 sections={k: s.tokens for k, s in block.sections.items()})
            return _result(block.text or "(the memory holds nothing relevant yet)", data)

        return await _guarded(run)

    @server.tool(annotations=writes, description=(
        "Record one exchange of the conversation (the user's message and your reply) in the user's memory. "
        "Facts, people and relations are extracted from the user's message at once, so later `recall` and "
        "`context` calls find them; the turn also becomes searchable conversation history. Call it after "
        "each exchange. Returns the ids of the messages logged."))
    async def log_turn(
        user: Annotated[str, Field(description="The user's message, verbatim.")],
        assistant: Annotated[str | None, Field(description="Your reply, verbatim (optional).")] = None,
    ) -> Annotated[CallToolResult, LogTurnResult]:
        async def run() -> CallToolResult:
            ids = await memory_for().aadd_turn(user, assistant)
            return _result(f"Logged the turn ({len(ids)} message(s): {', '.join(ids)}).", LogTurnResult(ids=ids))

        return await _guarded(run)

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                             open_world_hint=False), description=(
        "Delete memories for good, by id: only the ids given (as shown by `recall` or returned by "
        "`remember` and `log_turn`), and what was derived from them (a forgotten message takes the facts "
        "extracted from it along). Use it only when the user asks to forget something; recall first to "
        "find the ids. An unknown id deletes nothing and is an error."))
    async def forget(
        ids: Annotated[list[str], Field(description="The ids to delete, e.g. [\"fact_1a2b...\"].",
                                        json_schema_extra={"minItems": 1})],
    ) -> Annotated[CallToolResult, ForgetResult]:
        async def run() -> CallToolResult:
            chosen = _check_ids(ids)
            counts = await memory_for().aforget(ids=chosen)
            deleted = {table: n for table, n in counts.items() if n}
            summary = ", ".join(f"{table} {n}" for table, n in sorted(deleted.items())) or "nothing"
            return _result(f"Forgot {len(chosen)} item(s): {', '.join(chosen)} (deleted: {summary}).",
                           ForgetResult(forgotten=chosen, deleted=deleted))

        return await _guarded(run)

    return server


# --- transports ----------------------------------------------------------------------------------

def run_stdio(db_path: str | PathLike[str], user_id: str, agent_id: str | None = None,
              session_id: str | None = None, **overrides: Any) -> None:
    """Serve ``user_id``'s memory in the file ``db_path`` over stdio until the client closes stdin.

    Only MCP messages go to stdout; logs go to stderr. ``overrides`` are
    :class:`~unified_memory.config.MemoryConfig` fields (``retrieval="lexical"``, ...). The
    memory is closed (its writes finished) when the client goes.
    """
    from unified_memory.memory import UnifiedMemory

    with UnifiedMemory(db_path, user_id=user_id, agent_id=agent_id, session_id=session_id, **overrides) as mem:
        server = build_mcp_server(lambda: mem)
        _LOG.info("serving the memory of %r in %s over stdio", user_id, db_path)
        anyio.run(server.run_stdio_async)


def mcp_http_app(server: MCPServer[Any], *, json_response: bool = True,
                 transport_security: TransportSecuritySettings | None = None,
                 ) -> tuple[ASGIApp, StreamableHTTPSessionManager]:
    """The ASGI app serving ``server`` over streamable HTTP (stateless), and its session manager.

    Route every method of ``/mcp`` to the app (it ignores the path) and run
    ``session_manager.run()`` in the parent app's lifespan (see the module's docstring).
    Stateless: each POST is served on its own, so any process serves any request.
    ``json_response`` answers plain JSON rather than an event stream. ``transport_security``:
    the SDK's Host/Origin checks (DNS-rebinding protection), off by default because the
    service sits behind bearer keys and, often, a reverse proxy with its own host name.

    >>> from unified_memory import UnifiedMemory
    >>> mem = UnifiedMemory()
    >>> app, sessions = mcp_http_app(build_mcp_server(lambda: mem))
    >>> callable(app), type(sessions).__name__
    (True, 'StreamableHTTPSessionManager')
    """
    security = transport_security or TransportSecuritySettings(enable_dns_rebinding_protection=False)
    server.streamable_http_app(streamable_http_path="/", json_response=json_response, stateless_http=True,
                               transport_security=security)
    sessions = server.session_manager
    # an object, not a function: Starlette's Route serves a function as a GET-only request handler
    return StreamableHTTPASGIApp(sessions), sessions

