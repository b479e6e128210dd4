"""Async twins of :class:`~unified_memory.UnifiedMemory`'s methods (``aadd_turn``,
``arecall``, ``acontext``, ...) that never block the event loop.

Each twin runs its sync method in a worker thread and awaits it, so SQLite, the
BM25 index and embedding never stall the loop. They are plain coroutines (no
``asyncio.run`` inside), so they work in an already running loop such as Jupyter's::

    >>> import asyncio
    >>> from unified_memory import UnifiedMemory
    >>> async def main():
    ...     async with UnifiedMemory() as mem:
    ...         await mem.aremember("I keep bees")
    ...         return [hit.text for hit in await mem.arecall("bees")]
    >>> asyncio.run(main())   # in Jupyter: await main()
    ['I keep bees']

Why a dedicated executor rather than ``asyncio.to_thread``: every memory file (one
:class:`~tiers.storage.backend.Storage`, shared by all ``scoped`` views) has a few worker threads
(:data:`~unified_memory.coordinator.lanes.WORKERS`) and one lane per user
(:class:`~unified_memory.coordinator.lanes.Lanes`): the calls of one user run one at a time,
in call order, and the calls of different users run side by side, so one user's slow call
(a 100 KB message to extract from) never holds back another's recall. A call about every
user (``close`` at the end of ``async with``, ``reindex(all_users=True)``, an import or
ingest naming no user) waits for every call queued before it, and every call queued after
it waits for it; ``users()`` and ``export_jsonl(all_users=True)`` wait for the calls before
them only. In return (1) twenty gathered ``aadd_turn`` calls of one user hold one thread,
not twenty of the loop's shared default executor, and (2) the workers belong to the
memory, not to a loop, so the memory can be used from successive loops (``asyncio.run``
twice, Jupyter kernels).

What calls of different users share is guarded as for threads calling the sync API: the
storage's lock (SQLite's one connection, the in-memory BM25 postings, the window tail kept
between writes), the access log's lock, and the lock a write holds while the event bus
holds its events. A write extracts before it takes the storage's lock, so another user's
reads go on meanwhile (:meth:`~unified_memory.coordinator.writer.Writer.write_messages`).
The context variables of the caller are carried into the worker, as ``asyncio.to_thread``
does. Cancelling the awaiting task abandons a call that has not started; one already
running completes in its thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from datetime import datetime
from typing import Any, Literal, TypeVar

from tiers.storage.backend import Storage
from unified_memory.coordinator.items_api import ItemsAPI
from unified_memory.coordinator.lanes import EVERY_USER, Lane, fenced_executor, lanes_for
from unified_memory.io.ingest import IngestReport
from unified_memory.protocols import Extractor
from unified_memory.types import (
    ContextBlock,
    Entity,
    Episode,
    ExtractedFact,
    Fact,
    MemoryStats,
    Message,
    Profile,
    RecallHit,
    StoredItem,
    Triple,
)

__all__ = ["AsyncAPI", "ASYNC_TWINS"]

T = TypeVar("T")

# sync name -> async twin name; every twin below is listed here.
ASYNC_TWINS: dict[str, str] = {
    name: "a" + name
    for name in (
        "add_turn",
        "add_message",
        "add_messages",
        "remember",
        "remember_many",
        "correct",
        "fact_history",
        "add_triple",
        "recall",
        "context",
        "assemble_context",
        "consolidate",
        "end_session",
        "clear",
        "reindex",
        "facts",
        "count_facts",
        "entities",
        "triples",
        "neighbors",
        "episodes",
        "stats",
        "summary",
        "profile",
        "warm_up",
        "users",
        "export_jsonl",
        "import_jsonl",
        "forget",
        "ingest",
        "put_item",
        "get_item",
        "delete_item",
        "search_items",
        "item_namespaces",
    )
}


def _executor_for(owner: Storage) -> Executor:
    """An executor over the file's lanes whose calls are each about every user
    (``loop.run_in_executor(_executor_for(storage), fn)``, as benchmarks/server.py times calls)."""
    return fenced_executor(owner)


class AsyncAPI(ItemsAPI):
    """The async layer: ``await mem.arecall(...)`` is ``mem.recall(...)`` run in a worker thread,
    with the same signature. Also ``async with UnifiedMemory() as mem:`` (closes the memory in
    a worker on exit, after every call queued before)."""

    async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in a worker thread, in this memory's user's lane, and await its result."""
        return await self._queued((self._view.user_id,), fn, *args, **kwargs)

    async def _queued(self, lanes: tuple[Lane, ...], fn: Callable[..., T], /, *args: Any, wait_only: bool = False,
                      **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in a worker thread in ``lanes`` (see
        :class:`~unified_memory.coordinator.lanes.Lanes`) and await its result."""
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        future = lanes_for(self._view.backend.storage).submit(call, lanes, wait_only=wait_only)
        return await asyncio.wrap_future(future)

    def _lanes_of(self, user_id: object = None) -> tuple[Lane, ...]:
        """This memory's user's lane, and ``user_id``'s too (a call that works on another user; a
        value that is no user id is refused by the call itself)."""
        own = self._view.user_id
        return (own, user_id) if isinstance(user_id, str) and user_id != own else (own,)

    async def __aenter__(self) -> AsyncAPI:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._queued(EVERY_USER, self.close)

    async def aadd_turn(
        self,
        user: str,
        assistant: str | None = None,
        *,
        when: Any = None,
        metadata: Mapping[str, Any] | None = None,
        extract: bool | None = None,
        extractor: Extractor | None = None,
    ) -> list[str]:
        """Async :meth:`add_turn` (runs in a worker thread)."""
        return await self._run(
            self.add_turn, user, assistant, when=when, metadata=metadata, extract=extract, extractor=extractor
        )

    async def aadd_message(
        self,
        role: str,
        content: str | None,
        *,
        name: str | None = None,
        when: Any = None,
        metadata: Mapping[str, Any] | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_call_id: str | None = None,
        extract: bool | None = None,
    ) -> str:
        """Async :meth:`add_message` (runs in a worker thread)."""
        return await self._run(
            self.add_message,
            role,
            content,
            name=name,
            when=when,
            metadata=metadata,
            tool_calls=tool_calls,
            tool_call_id=tool_call_id,
            extract=extract,
        )

    async def aadd_messages(
        self, messages: Iterable[Message | Mapping[str, Any]], *, extract: bool | None = None
    ) -> list[str]:
        """Async :meth:`add_messages` (runs in a worker thread)."""
        return await self._run(self.add_messages, messages, extract=extract)

    async def aremember(
        self,
        text: str,
        *,
        importance: float | None = None,
        category: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        ttl_days: float | None = None,
    ) -> str:
        """Async :meth:`remember` (runs in a worker thread)."""
        return await self._run(
            self.remember,
            text,
            importance=importance,
            category=category,
            metadata=metadata,
            ttl_days=ttl_days,
        )

    async def aremember_many(
        self, texts_or_facts: Iterable[str | Mapping[str, Any] | ExtractedFact]
    ) -> list[str]:
        """Async :meth:`remember_many` (runs in a worker thread)."""
        return await self._run(self.remember_many, texts_or_facts)

    async def aadd_triple(
        self,
        subject: str,
        predicate: str,
        obj: str,
        *,
        confidence: float = 1.0,
        metadata: Mapping[str, Any] | None = None,
    ) -> str:
        """Async :meth:`add_triple` (runs in a worker thread)."""
        return await self._run(
            self.add_triple, subject, predicate, obj, confidence=confidence, metadata=metadata
        )

    async def arecall(
        self,
        query: str,
        *,
        limit: int = 10,
        tiers: Sequence[str] | str | None = None,
        days: float | None = None,
        where: Mapping[str, Any] | None = None,
        as_of: datetime | str | float | None = None,
        diversify: bool = True,
    ) -> list[RecallHit]:
        """Async :meth:`recall` (runs in a worker thread)."""
        return await self._run(self.recall, query, limit=limit, tiers=tiers, days=days, where=where, as_of=as_of,
                               diversify=diversify)

    async def acontext(
        self,
        query: str | None = None,
        *,
        max_tokens: int | None = None,
        include_conversation: bool = True,
        limit: int | None = None,
        as_of: datetime | str | float | None = None,
    ) -> ContextBlock:
        """Async :meth:`context` (runs in a worker thread)."""
        return await self._run(
            self.context, query, max_tokens=max_tokens, include_conversation=include_conversation, limit=limit,
            as_of=as_of,
        )

    async def aassemble_context(
        self, max_tokens: int = 4000, *, query: str | None = None, include_conversation: bool = True
    ) -> str:
        """Async :meth:`assemble_context` (runs in a worker thread)."""
        return await self._run(
            self.assemble_context, max_tokens, query=query, include_conversation=include_conversation
        )

    async def aconsolidate(self) -> int:
        """Async :meth:`consolidate` (runs in a worker thread)."""
        return await self._run(self.consolidate)

    async def aend_session(self) -> int:
        """Async :meth:`end_session` (runs in a worker thread)."""
        return await self._run(self.end_session)

    async def aclear(self, include_long_term: bool = False) -> None:
        """Async :meth:`clear` (runs in a worker thread)."""
        return await self._run(self.clear, include_long_term)

    async def areindex(self, *, all_users: bool = False, progress: Callable[[int, int], Any] | None = None) -> int:
        """Async :meth:`reindex` (runs in a worker thread)."""
        lanes = EVERY_USER if all_users is True else self._lanes_of()
        return await self._queued(lanes, self.reindex, all_users=all_users, progress=progress)

    async def afacts(
        self,
        *,
        include_archived: bool = False,
        include_inactive: bool = False,
        category: str | None = None,
        limit: int | None = None,
        order: Literal["time", "importance"] = "time",
        include_history: bool = False,
        offset: int = 0,
    ) -> list[Fact]:
        """Async :meth:`facts` (runs in a worker thread)."""
        return await self._run(
            self.facts, include_archived=include_archived, include_inactive=include_inactive, category=category,
            limit=limit, order=order, include_history=include_history, offset=offset,
        )

    async def acount_facts(self, *, include_archived: bool = False, include_inactive: bool = False,
                           category: str | None = None, include_history: bool = False) -> int:
        """Async :meth:`count_facts` (runs in a worker thread)."""
        return await self._run(self.count_facts, include_archived=include_archived, include_inactive=include_inactive,
                               category=category, include_history=include_history)

    async def aentities(self, *, type: str | None = None, limit: int | None = None) -> list[Entity]:
        """Async :meth:`entities` (runs in a worker thread)."""
        return await self._run(self.entities, type=type, limit=limit)

    async def atriples(self, entity: str | None = None) -> list[Triple]:
        """Async :meth:`triples` (runs in a worker thread)."""
        return await self._run(self.triples, entity)

    async def aneighbors(self, entity: str, *, depth: int = 1) -> list[Triple]:
        """Async :meth:`neighbors` (runs in a worker thread)."""
        return await self._run(self.neighbors, entity, depth=depth)

    async def aepisodes(
        self, *, days: float | None = None, session_id: str | None = None, limit: int | None = None
    ) -> list[Episode]:
        """Async :meth:`episodes` (runs in a worker thread)."""
        return await self._run(self.episodes, days=days, session_id=session_id, limit=limit)

    async def astats(self) -> MemoryStats:
        """Async :meth:`stats` (runs in a worker thread)."""
        return await self._run(self.stats)

    async def acorrect(self, fact_id: str, *, text: str | None = None, importance: float | None = None,
                       category: str | None = None) -> str:
        """Async :meth:`correct` (runs in a worker thread)."""
        return await self._run(self.correct, fact_id, text=text, importance=importance, category=category)

    async def afact_history(self, fact_id: str) -> list[Fact]:
        """Async :meth:`fact_history` (runs in a worker thread)."""
        return await self._run(self.fact_history, fact_id)

    async def aprofile(self, *, as_of: datetime | str | float | None = None) -> Profile:
        """Async :meth:`profile` (runs in a worker thread)."""
        return await self._run(self.profile, as_of=as_of)

    async def asummary(self) -> str:
        """Async :meth:`summary` (runs in a worker thread)."""
        return await self._run(self.summary)

    async def awarm_up(self) -> None:
        """Async :meth:`warm_up` (runs in a worker thread)."""
        await self._run(self.warm_up)

    async def ausers(self) -> list[str]:
        """Async :meth:`users` (runs in a worker thread)."""
        return await self._queued(EVERY_USER, self.users, wait_only=True)

    async def aexport_jsonl(
        self, destination: str | os.PathLike[str] | Any, *, all_users: bool = False
    ) -> int:
        """Async :meth:`export_jsonl` (runs in a worker thread)."""
        every = all_users is True
        lanes = EVERY_USER if every else self._lanes_of()
        return await self._queued(lanes, self.export_jsonl, destination, all_users=all_users, wait_only=every)

    async def aimport_jsonl(self, source: str | os.PathLike[str] | Any, *, user_id: str | None = None) -> int:
        """Async :meth:`import_jsonl` (runs in a worker thread)."""
        lanes = EVERY_USER if user_id is None else self._lanes_of(user_id)
        return await self._queued(lanes, self.import_jsonl, source, user_id=user_id)

    async def aforget(
        self, *, user_id: str | None = None, ids: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Async :meth:`forget` (runs in a worker thread)."""
        return await self._queued(self._lanes_of(user_id), self.forget, user_id=user_id, ids=ids)

    async def aingest(
        self,
        path: str | os.PathLike[str],
        *,
        format: str = "auto",
        user_id: str | None = None,
        progress: Callable[[int, int], Any] | None = None,
        extract: bool | None = None,
    ) -> IngestReport:
        """Async :meth:`ingest` (runs in a worker thread)."""
        lanes = EVERY_USER if user_id is None else self._lanes_of(user_id)
        return await self._queued(
            lanes, self.ingest, path, format=format, user_id=user_id, progress=progress, extract=extract
        )

    async def aput_item(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
                        index: list[str] | bool | None = None, ttl: float | None = None,
                        vectors: Sequence[Sequence[float]] | None = None) -> None:
        """Async :meth:`put_item` (runs in a worker thread)."""
        return await self._run(self.put_item, namespace, key, value, index=index, ttl=ttl, vectors=vectors)

    async def aget_item(self, namespace: Sequence[str], key: str, *, refresh_ttl: bool = True) -> StoredItem | None:
        """Async :meth:`get_item` (runs in a worker thread)."""
        return await self._run(self.get_item, namespace, key, refresh_ttl=refresh_ttl)

    async def adelete_item(self, namespace: Sequence[str], key: str) -> bool:
        """Async :meth:`delete_item` (runs in a worker thread)."""
        return await self._run(self.delete_item, namespace, key)

    async def asearch_items(self, namespace_prefix: Sequence[str], *, query: str | None = None,
                            filter: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0,
                            refresh_ttl: bool = True, query_vector: Sequence[float] | None = None,
                            distance_type: str = "cosine") -> list[StoredItem]:
        """Async :meth:`search_items` (runs in a worker thread)."""
        return await self._run(self.search_items, namespace_prefix, query=query, filter=filter, limit=limit,
                               offset=offset, refresh_ttl=refresh_ttl, query_vector=query_vector,
                               distance_type=distance_type)

    async def aitem_namespaces(self, *, prefix: Sequence[str] | None = None, suffix: Sequence[str] | None = None,
                               max_depth: int | None = None, limit: int = 100, offset: int = 0
                               ) -> list[tuple[str, ...]]:
        """Async :meth:`item_namespaces` (runs in a worker thread)."""
        return await self._run(self.item_namespaces, prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit,
                               offset=offset)
