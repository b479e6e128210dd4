"""The async twins of :class:`~unified_memory.remote.client.RemoteMemory` (``aadd_turn``,
``arecall``, ``acontext``, ...), with the names and signatures of ``UnifiedMemory``'s
(:data:`~unified_memory.coordinator.async_api.ASYNC_TWINS`), over ``httpx.AsyncClient``: the
event loop never waits on the network. Arguments are checked before any request, as in the
sync methods. Every event loop gets its own async client (an async client cannot outlive
its loop), so successive ``asyncio.run`` calls work.

    >>> import asyncio
    >>> from unified_memory.remote.client import RemoteMemory
    >>> async def main():
    ...     async with RemoteMemory("http://127.0.0.1:9", "um_key", user_id="ada", timeout=0.5) as mem:
    ...         await mem.arecall("")
    >>> asyncio.run(main())
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: query: must not be empty
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

from unified_memory.protocols import Extractor
from unified_memory.remote import wire
from unified_memory.remote.files import destination as export_destination
from unified_memory.remote.files import source_bytes
from unified_memory.remote.transport import Connection, Scope
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

__all__ = ["AsyncTwins"]

T = TypeVar("T")


class AsyncTwins:
    """The async layer of :class:`RemoteMemory` (over its :class:`Connection` and :class:`Scope`)."""

    _connection: Connection
    _scope: Scope

    async def _asend(self, call: wire.Call[T], *, content: bytes | None = None) -> T:
        return await self._connection.asend(self._scope, call, content=content)

    async def __aexit__(self, *exc: object) -> None:
        await self._connection.aclose()

    async def aclose(self) -> None:
        """Close the connection (this loop's async client too); every scoped view shares it."""
        await self._connection.aclose()

    async def aadd_turn(self, user: str, assistant: str | None = None, *, when: Any = None,
                        metadata: Mapping[str, Any] | None = None, extract: bool | None = None,
                        extractor: Extractor | None = None) -> list[str]:
        """Async :meth:`add_turn`."""
        return await self._asend(wire.add_turn(user, assistant, when=when, metadata=metadata, extract=extract,
                                               extractor=extractor))

    async def aadd_message(self, role: str, content: str | None, *, name: str | None = None, when: Any = None,
                           metadata: Mapping[str, Any] | None = None, tool_calls: list[dict[str, Any]] | None = None,
                           tool_call_id: str | None = None, extract: bool | None = None) -> str:
        """Async :meth:`add_message`."""
        return await self._asend(wire.add_message(
            role, content, name=name, when=when, metadata=metadata, tool_calls=tool_calls, tool_call_id=tool_call_id,
            extract=extract))

    async def aadd_messages(self, messages: Iterable[Message | Mapping[str, Any]], *,
                            extract: bool | None = None) -> list[str]:
        """Async :meth:`add_messages`."""
        call = wire.add_messages(messages, extract=extract)
        return [] if call is None else await self._asend(call)

    async def aremember(self, text: str, *, importance: float | None = None, category: str | None = None,
                        metadata: Mapping[str, Any] | None = None, ttl_days: float | None = None) -> str:
        """Async :meth:`remember`."""
        return await self._asend(wire.remember(
            text, importance=importance, category=category, metadata=metadata, ttl_days=ttl_days))

    async def aremember_many(self, texts_or_facts: Iterable[str | Mapping[str, Any] | ExtractedFact]) -> list[str]:
        """Async :meth:`remember_many`."""
        call = wire.remember_many(texts_or_facts)
        return [] if call is None else await self._asend(call)

    async def aadd_triple(self, subject: str, predicate: str, obj: str, *, confidence: float = 1.0,
                          metadata: Mapping[str, Any] | None = None) -> str:
        """Async :meth:`add_triple`."""
        return await self._asend(wire.add_triple(
            subject, predicate, obj, confidence=confidence, metadata=metadata))

    async def arecall(self, query: str, *, limit: int = 10, tiers: Sequence[str] | str | None = None,
                      days: float | None = None, where: Mapping[str, Any] | None = None,
                      as_of: datetime | str | float | None = None, diversify: bool = True) -> list[RecallHit]:
        """Async :meth:`recall`."""
        return await self._asend(wire.recall(
            query, limit=limit, tiers=tiers, days=days, where=where, as_of=as_of, diversify=diversify))

    async def acontext(self, query: str | None = None, *, max_tokens: int | None = None,
                       include_conversation: bool = True, limit: int | None = None,
                       as_of: datetime | str | float | None = None) -> ContextBlock:
        """Async :meth:`context`."""
        return await self._asend(wire.context(
            query, max_tokens=max_tokens, include_conversation=include_conversation, limit=limit, as_of=as_of))

    async def aassemble_context(self, max_tokens: int = 4000, *, query: str | None = None,
                                include_conversation: bool = True) -> str:
        """Async :meth:`assemble_context`."""
        return (await self.acontext(query, max_tokens=max_tokens, include_conversation=include_conversation)).text

    async def afacts(self, *, include_archived: bool = False, include_inactive: bool = False,
                     category: str | None = None, limit: int | None = None,
                     order: Literal["time", "importance"] = "time", include_history: bool = False,
                     offset: int = 0) -> list[Fact]:
        """Async :meth:`facts` (pages through ``GET /facts``)."""
        params, wanted, start = wire.facts_query(
            include_archived=include_archived, include_inactive=include_inactive, category=category, limit=limit,
            order=order, include_history=include_history, offset=offset)
        found: list[Fact] = []
        following: int | None = start
        while following is not None and (wanted is None or len(found) < wanted):
            size = wire.PAGE if wanted is None else min(wire.PAGE, wanted - len(found))
            page, following = await self._asend(wire.facts_page(params, following, size))
            found.extend(page)
        return found

    async def acount_facts(self, *, include_archived: bool = False, include_inactive: bool = False,
                    category: str | None = None, include_history: bool = False) -> int:
        """How many facts :meth:`facts` lists with the same filters (``GET /facts``'s ``total``)."""
        return await self._asend(wire.facts_count(include_archived=include_archived, include_inactive=include_inactive,
                                            category=category, include_history=include_history))

    async def aentities(self, *, type: str | None = None, limit: int | None = None) -> list[Entity]:
        """Async :meth:`entities`."""
        return await self._asend(wire.entities(type=type, limit=limit))

    async def atriples(self, entity: str | None = None) -> list[Triple]:
        """Async :meth:`triples`."""
        return await self._asend(wire.triples(entity))

    async def aepisodes(self, *, days: float | None = None, session_id: str | None = None,
                        limit: int | None = None) -> list[Episode]:
        """Async :meth:`episodes`."""
        return await self._asend(
            wire.episodes(days=days, session_id=session_id, limit=limit))

    async def aprofile(self, *, as_of: datetime | str | float | None = None) -> Profile:
        """Async :meth:`profile`."""
        return await self._asend(wire.profile(as_of=as_of))

    async def astats(self) -> MemoryStats:
        """Async :meth:`stats`."""
        return await self._asend(wire.stats())

    async def ausers(self) -> list[str]:
        """Async :meth:`users` (an admin key)."""
        return await self._asend(wire.users())

    async def aexport_jsonl(self, destination: str | os.PathLike[str] | Any, *, all_users: bool = False) -> int:
        """Async :meth:`export_jsonl` (streamed)."""
        wire.check_export(all_users)
        with export_destination(destination) as out:
            return await self._connection.aexport(self._scope, out.write)

    async def aimport_jsonl(self, source: str | os.PathLike[str] | Any, *, user_id: str | None = None) -> int:
        """Async :meth:`import_jsonl`."""
        user = wire.check_user("user_id", user_id, optional=True)
        data = source_bytes(source)
        return await self._asend(wire.import_rows(user), content=data)

    async def aforget(self, *, user_id: str | None = None, ids: Sequence[str] | None = None) -> dict[str, int]:
        """Async :meth:`forget`."""
        user, item_ids = wire.check_forget(user_id, ids)
        if item_ids is None:
            return await self._asend(wire.forget_user(user))
        return await self._asend(wire.forget_items(item_ids, user))

    def scoped(self, *, user_id: str | None = None, agent_id: str | None = None,
               session_id: str | None = None) -> AsyncTwins:
        raise NotImplementedError  # pragma: no cover - RemoteMemory defines it

    async def aput_item(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
                        index: list[str] | bool | None = None, ttl: float | None = None,
                        vectors: Sequence[Sequence[float]] | None = None) -> None:
        """Async :meth:`put_item`."""
        await self._asend(wire.put_item(namespace, key, value, index=index, ttl=ttl, vectors=vectors))

    async def aget_item(self, namespace: Sequence[str], key: str, *, refresh_ttl: bool = True) -> StoredItem | None:
        """Async :meth:`get_item`."""
        return await self._asend(wire.get_item(namespace, key, refresh_ttl=refresh_ttl))

    async def adelete_item(self, namespace: Sequence[str], key: str) -> bool:
        """Async :meth:`delete_item`."""
        return await self._asend(wire.delete_item(namespace, key))

    async def asearch_items(self, namespace_prefix: Sequence[str], *, query: str | None = None,
                            filter: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0,
                            refresh_ttl: bool = True, query_vector: Sequence[float] | None = None,
                     distance_type: str = "cosine") -> list[StoredItem]:
        """Async :meth:`search_items`."""
        return await self._asend(wire.search_items(namespace_prefix, query=query, filter=filter, limit=limit,
                                                   offset=offset, refresh_ttl=refresh_ttl, query_vector=query_vector,
                                            distance_type=distance_type))

    async def aitem_namespaces(self, *, prefix: Sequence[str] | None = None, suffix: Sequence[str] | None = None,
                               max_depth: int | None = None, limit: int = 100, offset: int = 0
                               ) -> list[tuple[str, ...]]:
        """Async :meth:`item_namespaces`."""
        return await self._asend(wire.item_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit,
                                                      offset=offset))
