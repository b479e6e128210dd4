"""The routes of ``/v1/users/{user_id}``: writes, reads, export / import, forgetting.

Every handler awaits the memory's async twins (``aadd_turn``, ``arecall``, ...), which run
in the memory's worker thread, so the event loop never waits on SQLite. ``agent_id`` and
``session_id`` are query parameters scoping the call as in ``UnifiedMemory.scoped``.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import tempfile
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

from tiers.items.checks import filter_from_wire
from unified_memory.errors import MemoryTypeError, MemoryValueError, NotFoundError
from unified_memory.memory import UnifiedMemory
from unified_memory.service.api_docs import ERROR_RESPONSES
from unified_memory.service.auth import Principal, Refusal
from unified_memory.service.errors import TooLarge
from unified_memory.service.schemas import (
    ContextIn,
    Deleted,
    FactCorrectionIn,
    FactIn,
    FactPage,
    FactsIn,
    ForgetIn,
    IdOut,
    Ids,
    Imported,
    ItemGetIn,
    ItemIn,
    ItemKeyIn,
    ItemNamespacesIn,
    ItemSearchIn,
    MessagesIn,
    RecallIn,
    RecallOut,
    TripleIn,
    TurnIn,
)
from unified_memory.validation import check_text

__all__ = ["router", "admin_router"]

router = APIRouter(prefix="/v1/users/{user_id}", tags=["memory"], responses=ERROR_RESPONSES)
admin_router = APIRouter(prefix="/v1", tags=["admin"], responses=ERROR_RESPONSES)


async def memory_for(request: Request, user_id: str, agent_id: str | None = None,
                     session_id: str | None = None) -> UnifiedMemory:
    """The service's memory scoped to the path's user (the gatekeeper checked the key for it, and
    decoded it: the path parameter of a user id holding ``/`` is still percent-encoded)."""
    user_id = getattr(request.state, "user_id", None) or user_id
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None or not principal.may_act_for(user_id):
        raise Refusal(403, "forbidden", "this API key does not grant access to that user", field="user_id")
    base: UnifiedMemory = request.app.state.memory
    return base.scoped(user_id=user_id, agent_id=agent_id, session_id=session_id)


Memory = Annotated[UnifiedMemory, Depends(memory_for)]


def _json(record: Any) -> dict[str, Any]:
    return record.model_dump(mode="json")  # type: ignore[no-any-return]


def _listing(key: str, records: Sequence[BaseModel], **extra: Any) -> Response:
    """``{key: [records...], **extra}`` serialised by pydantic-core at once (FastAPI would validate the
    answer against its model and re-encode it in Python: a third of a recall's time on the event loop)."""
    head = "".join(f"{json.dumps(name)}:{json.dumps(value)}," for name, value in extra.items())
    body = "{" + head + json.dumps(key) + ":[" + ",".join(r.model_dump_json() for r in records) + "]}"
    return Response(content=body.encode("utf-8"), media_type="application/json")


@contextlib.contextmanager
def _body_names(library: str, body: str) -> Iterator[None]:
    """Errors naming the library's argument (the pattern ``library``) name the request's field instead
    (``body``, a replacement: the library's ``obj`` is the body's ``object``)."""
    try:
        yield
    except (MemoryValueError, MemoryTypeError) as exc:
        found = re.match(library, exc.field or "")
        if found is None:
            raise
        named = found.expand(body)
        raise type(exc)(str(exc).replace(found.group(0), named, 1), field=named + (exc.field or "")[found.end():]) \
            from None


# -- writing ---------------------------------------------------------------------------------

@router.post("/turns", response_model=Ids, status_code=201, summary="Log a user message and the reply")
async def add_turn(body: TurnIn, mem: Memory) -> Ids:
    return Ids(ids=await mem.aadd_turn(body.user, body.assistant, when=body.when, metadata=body.metadata,
                                       extract=body.extract))


@router.post("/messages", response_model=Ids, status_code=201, summary="Log messages (one transaction)")
async def add_messages(body: MessagesIn, mem: Memory) -> Ids:
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    for given, message in zip(body.messages, messages, strict=True):
        if given.content is None:
            message["content"] = None  # a tool-calling assistant message has no content
    with _body_names(r"(messages\[\d+\])\.created_at\b", r"\1.when"):
        return Ids(ids=await mem.aadd_messages(messages, extract=body.extract))


@router.post("/facts", response_model=IdOut, status_code=201, summary="Store a long-term fact")
async def remember(body: FactIn, mem: Memory) -> IdOut:
    return IdOut(id=await mem.aremember(body.text, importance=body.importance, category=body.category,
                                        metadata=body.metadata, ttl_days=body.ttl_days))


@router.post("/facts/batch", response_model=Ids, status_code=201, summary="Store many facts (all or none)")
async def remember_many(body: FactsIn, mem: Memory) -> Ids:
    items = [f if isinstance(f, str) else f.model_dump(exclude_none=True) for f in body.facts]
    with _body_names(r"texts_or_facts\b", "facts"):
        return Ids(ids=await mem.aremember_many(items))


@router.post("/triples", response_model=IdOut, status_code=201, summary="Add a relation to the graph")
async def add_triple(body: TripleIn, mem: Memory) -> IdOut:
    with _body_names(r"obj\b", "object"):
        return IdOut(id=await mem.aadd_triple(body.subject, body.predicate, body.object, confidence=body.confidence,
                                              metadata=body.metadata))


@router.delete("/facts/{fact_id}", response_model=Deleted, summary="Forget one fact (and what derives from it)")
async def forget_fact(fact_id: str, mem: Memory) -> Deleted:
    if not fact_id.startswith("fact_"):
        raise NotFoundError(f"fact_id: no fact {fact_id[:80]!r}", field="fact_id")
    try:
        return Deleted(deleted=await mem.aforget(ids=[fact_id]))
    except NotFoundError:
        raise NotFoundError(f"fact_id: no fact {fact_id[:80]!r}", field="fact_id") from None


@router.patch("/facts/{fact_id}", response_model=IdOut,
               summary="Correct a fact: a new version supersedes it (the old one stays as history)")
async def correct_fact(fact_id: str, body: FactCorrectionIn, mem: Memory) -> IdOut:
    return IdOut(id=await mem.acorrect(fact_id, text=body.text, importance=body.importance, category=body.category))


@router.get("/facts/{fact_id}/history", summary="A fact's versions, oldest first, to the current one")
async def fact_history(fact_id: str, mem: Memory) -> Response:
    return _listing("facts", await mem.afact_history(fact_id))


@router.post("/forget", response_model=Deleted,
             summary="Forget these items (messages, facts, entities, relations) and what derives from them")
async def forget_items(body: ForgetIn, mem: Memory) -> Deleted:
    """One transaction: every id must be this user's (else 404 naming ``ids``, and nothing is deleted)."""
    for i, item in enumerate(body.ids):
        check_text(f"ids[{i}]", item)  # an empty, NUL or lone-surrogate id: 422 naming the item
    return Deleted(deleted=await mem.aforget(ids=body.ids))


# -- reading ---------------------------------------------------------------------------------

@router.post("/recall", response_model=RecallOut, summary="Federated recall over the tiers")
async def recall(body: RecallIn, mem: Memory) -> Response:
    hits = await mem.arecall(body.query, limit=body.limit, tiers=body.tiers, days=body.days, where=body.where,
                             as_of=body.as_of, diversify=body.diversify)
    return _listing("hits", hits)


@router.post("/context", summary="A token-budgeted memory block for the next LLM call")
async def context(body: ContextIn, mem: Memory) -> Response:
    block = await mem.acontext(body.query, max_tokens=body.max_tokens, include_conversation=body.include_conversation,
                               limit=body.limit, as_of=body.as_of)
    return Response(content=block.model_dump_json().encode("utf-8"), media_type="application/json")


@router.get("/facts", response_model=FactPage, summary="This user's facts, a page at a time")
async def facts(mem: Memory, limit: Annotated[int, Query(ge=1, le=1000)] = 100,
                offset: Annotated[int, Query(ge=0)] = 0, category: str | None = None,
                include_archived: bool = False, include_inactive: bool = False,
                include_history: bool = False, order: Literal["time", "importance"] = "time") -> Response:
    page = await mem.afacts(category=category, include_archived=include_archived, include_inactive=include_inactive,
                            include_history=include_history, order=order, limit=limit, offset=offset)
    total = await mem.acount_facts(category=category, include_archived=include_archived,
                                   include_inactive=include_inactive, include_history=include_history)
    following = offset + len(page)
    return _listing("facts", page, total=total, next_offset=following if following < total and page else None)


@router.get("/entities", summary="This user's entities, most mentioned first")
async def entities(mem: Memory, type: str | None = None,
                   limit: Annotated[int | None, Query(ge=1)] = None) -> Response:
    return _listing("entities", await mem.aentities(type=type, limit=limit))


@router.get("/triples", summary="This user's relations (optionally those touching one entity)")
async def triples(mem: Memory, entity: str | None = None) -> Response:
    return _listing("triples", await mem.atriples(entity))


@router.get("/episodes", summary="This user's episodic log, oldest first")
async def episodes(mem: Memory, days: float | None = None, session: str | None = None,
                   limit: Annotated[int | None, Query(ge=1)] = None) -> Response:
    with _body_names(r"session_id\b", "session"):  # the scope's session_id was checked by memory_for
        found = await mem.aepisodes(days=days, session_id=session, limit=limit)
    return _listing("episodes", found)


@router.get("/profile", summary="The user's profile: current key facts, safety first (every context shows it)")
async def profile(mem: Memory, as_of: str | None = None) -> Response:
    found = await mem.aprofile(as_of=as_of)
    return Response(content=found.model_dump_json().encode("utf-8"), media_type="application/json")


@router.get("/stats", summary="Counts of what this user's memory holds")
async def stats(mem: Memory) -> dict[str, Any]:
    found = _json(await mem.astats())
    found["path"] = None  # the server's file system is not the caller's business
    return found


# -- keyed items (UnifiedMemory.put_item ..., LangGraph's store) -----------------------------

@router.put("/items", summary="Store a keyed item (a JSON object under a namespace and a key)")
async def put_item(body: ItemIn, mem: Memory) -> dict[str, Any]:
    await mem.aput_item(tuple(body.namespace), body.key, body.value, index=body.index, ttl=body.ttl,
                        vectors=body.vectors)
    return {"stored": True}


@router.post("/items/get", summary="One keyed item (null when there is none or it expired)")
async def get_item(body: ItemGetIn, mem: Memory) -> dict[str, Any]:
    item = await mem.aget_item(tuple(body.namespace), body.key, refresh_ttl=body.refresh_ttl)
    return {"item": None if item is None else _json(item)}


@router.post("/items/delete", summary="Delete one keyed item")
async def delete_item(body: ItemKeyIn, mem: Memory) -> dict[str, Any]:
    return {"deleted": await mem.adelete_item(tuple(body.namespace), body.key)}


@router.post("/items/search", summary="Keyed items under a namespace prefix, filtered, ranked by a query")
async def search_items(body: ItemSearchIn, mem: Memory) -> Response:
    found = await mem.asearch_items(tuple(body.namespace_prefix), query=body.query,
                                    filter=filter_from_wire("filter", body.filter), limit=body.limit,
                                    offset=body.offset, refresh_ttl=body.refresh_ttl, query_vector=body.query_vector,
                                    distance_type=body.distance_type)
    return _listing("items", found)


@router.post("/items/namespaces", summary="The namespaces holding this user's keyed items")
async def item_namespaces(body: ItemNamespacesIn, mem: Memory) -> dict[str, Any]:
    found = await mem.aitem_namespaces(prefix=None if body.prefix is None else tuple(body.prefix),
                                       suffix=None if body.suffix is None else tuple(body.suffix),
                                       max_depth=body.max_depth, limit=body.limit, offset=body.offset)
    return {"namespaces": [list(ns) for ns in found]}


# -- moving and forgetting -------------------------------------------------------------------

def _chunks(spool: Any) -> Iterator[bytes]:
    try:
        spool.seek(0)
        while chunk := spool.read(1 << 16):
            yield chunk
    finally:
        spool.close()


@router.get("/export", summary="This user's rows of every tier as JSON Lines (streamed)",
            response_class=StreamingResponse)
async def export(mem: Memory) -> StreamingResponse:
    spool = tempfile.SpooledTemporaryFile(max_size=8 << 20, mode="w+b")  # noqa: SIM115 - closed by _chunks
    try:
        text = io.TextIOWrapper(spool, encoding="utf-8", newline="\n", write_through=True)
        await mem.aexport_jsonl(text)
        text.detach()
    except BaseException:
        spool.close()
        raise
    return StreamingResponse(_chunks(spool), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="{_file_name(mem.user_id)}"'})


def _file_name(user_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in user_id)[:64]
    return f"memory-{safe or 'user'}.jsonl"


@router.post("/import", response_model=Imported, summary="Import an export (JSON Lines) into this user")
async def import_rows(request: Request, mem: Memory) -> Imported:
    """The body is streamed to a spool (memory, then a temporary file past 8 MiB), never held
    whole; a line over ``max_body_bytes`` (what one write may send) is refused (413) as soon as
    it passes that size. Every row then meets the checks of the single-item routes."""
    limit = request.app.state.settings.max_body_bytes
    spool = tempfile.SpooledTemporaryFile(max_size=8 << 20, mode="w+b")  # noqa: SIM115 - closed below
    with spool:
        line = 0  # bytes of the line being read
        number = 1
        async for chunk in request.stream():
            *ends, tail = chunk.split(b"\n")
            for end in ends:
                if line + len(end) > limit:
                    raise TooLarge(limit, f"line {number} of the import is over {limit} bytes "
                                          "(the most one write may send)")
                line, number = 0, number + 1
            line += len(tail)
            if line > limit:
                raise TooLarge(limit, f"line {number} of the import is over {limit} bytes "
                                      "(the most one write may send)")
            spool.write(chunk)
        spool.seek(0)
        return Imported(imported=await mem.aimport_jsonl(spool, user_id=mem.user_id))


@router.delete("", response_model=Deleted, summary="Forget everything of this user")
async def forget_user(mem: Memory) -> Deleted:
    return Deleted(deleted=await mem.aforget(user_id=mem.user_id))


# -- admin -----------------------------------------------------------------------------------

@admin_router.get("/users", summary="The users this file holds (admin key)")
async def users(request: Request) -> dict[str, Any]:
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None or not principal.admin:
        raise Refusal(403, "forbidden", "this needs an admin API key", field="authorization")
    base: UnifiedMemory = request.app.state.memory
    return {"users": await base.ausers()}

