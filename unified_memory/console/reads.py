"""What the console's pages show, read for one user: each function takes the memory scoped to
that user and runs on the memory's worker, in the user's lane (:func:`on_lane`), like every call
of the JSON API. The queries themselves are :mod:`tiers.browse`'s (one user each, bounded).
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tiers.browse.episodes import (
    Conversation,
    ConversationPage,
    Related,
    conversation,
    conversations,
    facts_of_messages,
    messages_by_id,
    related_entities,
)
from tiers.browse.facts import Bucket, FactPage, FactQuery, browse_facts, fact_timeline
from tiers.browse.forgetting import ForgetPreview, preview_entity, preview_fact, preview_session
from tiers.browse.graph import EntityCard, around, entity_card, find_entities, top_entities
from tiers.records.scope import Scope
from tiers.storage.backend import Storage
from unified_memory.coordinator.lanes import lanes_for
from unified_memory.memory import UnifiedMemory
from unified_memory.types import Episode, Fact, MemoryStats, Profile, Triple

__all__ = ["on_lane", "Overview", "overview", "facts_page", "FactDetail", "fact_detail", "GraphView", "graph_view",
           "EpisodesView", "episodes_view", "forget_preview", "users_page"]

T = TypeVar("T")


async def on_lane(memory: UnifiedMemory, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(memory, *args, **kwargs)`` on the memory's workers, in its user's lane (as its async
    twins run: after the user's calls queued before, beside other users' calls)."""
    view = memory.view
    call = functools.partial(contextvars.copy_context().run, fn, memory, *args, **kwargs)
    return await asyncio.wrap_future(lanes_for(view.backend.storage).submit(call, (view.scope.user_id,)))


def _where(memory: UnifiedMemory) -> tuple[Storage, Scope]:
    view = memory.view
    return view.backend.storage, view.scope


@dataclass
class Overview:
    """The overview page: counts, facts over time, the top entities and the profile."""

    stats: MemoryStats
    timeline: list[Bucket]
    entities: list[EntityCard]
    profile: Profile


def overview(memory: UnifiedMemory) -> Overview:
    """The overview: stats, 30 spans of facts over time, the 10 most mentioned entities, the profile."""
    storage, scope = _where(memory)
    return Overview(memory.stats(), fact_timeline(storage, scope, buckets=30), top_entities(storage, scope, limit=10),
                    memory.profile())


def facts_page(memory: UnifiedMemory, query: FactQuery) -> tuple[FactPage, list[str]]:
    """A page of facts and the user's categories (for the filter)."""
    storage, scope = _where(memory)
    page = browse_facts(storage, scope, dataclasses.replace(query, now=memory.view.backend.clock()))
    categories = [row[0] for row in storage.execute(
        "SELECT DISTINCT category FROM facts WHERE user_id = ? AND category IS NOT NULL ORDER BY category LIMIT 200",
        [scope.user_id]).fetchall()]
    return page, categories


@dataclass
class FactDetail:
    """A fact's page: its versions, the messages it came from (with the facts each produced), its entities."""

    fact: Fact
    versions: list[Fact]
    messages: list[Episode]
    entities: list[Related]


def fact_detail(memory: UnifiedMemory, fact_id: str) -> FactDetail:
    """A fact, its versions, the messages they came from and the entities of those messages' relations."""
    storage, scope = _where(memory)
    versions = memory.fact_history(fact_id)  # NotFoundError for another user's id
    fact = next(f for f in versions if f.id == fact_id)
    sources = list(dict.fromkeys(s for f in versions for s in f.source_message_ids))
    return FactDetail(fact, versions, messages_by_id(storage, scope, sources), related_entities(storage, scope, sources))


@dataclass
class GraphView:
    """The graph page: the entity looked at (None: not found), its relations, matches of a search."""

    card: EntityCard | None
    triples: list[Triple] = field(default_factory=list)
    matches: list[EntityCard] = field(default_factory=list)


def graph_view(memory: UnifiedMemory, name: str | None, hops: int) -> GraphView:
    """The entity called ``name`` (the most mentioned one when None) and its relations, or matches."""
    storage, scope = _where(memory)
    if not name:
        top = top_entities(storage, scope, limit=1)
        if not top:
            return GraphView(None)
        name = top[0].name
    card = entity_card(storage, scope, name)
    if card is None:
        return GraphView(None, matches=find_entities(storage, scope, name))
    return GraphView(card, around(storage, scope, card.id, hops=hops))


@dataclass
class EpisodesView:
    """The episodes page: the conversations, and one of them, a page of its messages with their facts."""

    conversations: list[Conversation]
    session_id: str | None
    page: ConversationPage | None
    facts: dict[str, list[Fact]]


def episodes_view(memory: UnifiedMemory, session_id: str | None, offset: int, limit: int) -> EpisodesView:
    """The conversations, and a page of ``session_id``'s (the latest when None) with the facts of each turn."""
    storage, scope = _where(memory)
    listed = conversations(storage, scope, limit=100)
    chosen = session_id if session_id is not None else (listed[0].session_id if listed else None)
    if chosen is None:
        return EpisodesView(listed, None, None, {})
    page = conversation(storage, scope, chosen, offset=offset, limit=limit)
    return EpisodesView(listed, chosen, page, facts_of_messages(storage, scope, [m.id for m in page.messages]))


def forget_preview(memory: UnifiedMemory, kind: str, item: str) -> ForgetPreview | None:
    """What forgetting the ``kind`` (fact, entity, session) ``item`` would take; None: not this user's."""
    storage, scope = _where(memory)
    if kind == "fact":
        return preview_fact(storage, scope, item)
    if kind == "entity":
        return preview_entity(storage, scope, item)
    return preview_session(storage, scope, item)


def users_page(memory: UnifiedMemory, contains: str, offset: int, limit: int) -> tuple[list[str], int]:
    """The users (admin only), those whose id holds ``contains``, a page of them and how many match."""
    users = [u for u in memory.users() if contains.casefold() in u.casefold()]
    return users[offset:offset + limit], len(users)
