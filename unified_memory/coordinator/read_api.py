"""The reading layer of :class:`~unified_memory.memory.UnifiedMemory`: recall, context,
the running summary, and the exploring methods (facts, entities, triples, episodes,
window, stats), and who the memory is (user, agent, session, path, configuration); the
first layer of the class, over a typed :class:`~unified_memory.coordinator.view.MemoryView`.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.remember("I keep bees")
    ...     [h.text for h in mem.recall("bees", tiers="long_term")]
    ['I keep bees']
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from tiers.graph.cards import describe
from tiers.graph.entities import is_user_node
from tiers.storage.backend import SCHEMA_VERSION
from unified_memory.config import MemoryConfig
from unified_memory.coordinator.backend import Backend
from unified_memory.coordinator.view import MemoryView
from unified_memory.errors import NotFoundError, invalid, wrong_type
from unified_memory.retrieval.context import assemble, informative
from unified_memory.retrieval.federation import RecallRequest, federated_recall, first_person
from unified_memory.retrieval.profile import (
    MAX_PROFILE_FACTS,
    PROFILE_CATEGORIES,
    build_profile,
    profile_hits,
)
from unified_memory.retrieval.rerank import rerank
from unified_memory.types import (
    ContextBlock,
    Entity,
    Episode,
    Fact,
    MemoryStats,
    Message,
    Profile,
    RecallHit,
    Triple,
)
from unified_memory.validation import (
    check_bool,
    check_limit,
    check_optional_text,
    check_scope_id,
    check_text,
    check_tiers,
    parse_when,
)

__all__ = ["ReadingAPI"]


class ReadingAPI:
    """Identity, recall, context and exploration: the reading layer of
    :class:`~unified_memory.memory.UnifiedMemory`, over one :class:`MemoryView`."""

    _view: MemoryView

    @property
    def _backend(self) -> Backend:  # for the benchmarks; tests use unified_memory.testing.internals
        return self._view.backend

    @property
    def view(self) -> MemoryView:
        """The backend (storage, tiers, plug-ins) and scope this memory works through, for
        :func:`unified_memory.testing.internals` and the package's own tools. Not a stable
        API: production code uses the methods, tests ``internals(memory)``."""
        return self._view

    @property
    def config(self) -> MemoryConfig:
        """The validated configuration (shared by every scoped view)."""
        return self._view.backend.config

    @property
    def user_id(self) -> str:
        return self._view.scope.user_id

    @property
    def agent_id(self) -> str | None:
        return self._view.scope.agent_id or None

    @property
    def session_id(self) -> str | None:
        return self._view.scope.session_id or None

    @property
    def path(self) -> str | None:
        """The database file, or the PostgreSQL URL it was opened with, or ``None`` in memory."""
        return self._view.backend.storage.target

    def close(self) -> None:
        """Close the file (idempotent). Scoped views share it and are closed too.
        Large lexical indexes built or changed here are saved first, so the next
        process restores them instead of rebuilding (:mod:`tiers.indexes.snapshots`)."""
        self._view.backend.close()

    @property
    def retrieval(self) -> str:
        """The retrieval method in force: ``lexical``, ``embedding`` or ``hybrid``."""
        return self._view.backend.mode

    def warm_up(self) -> None:
        """Load now what the first write or recall would otherwise load: the embedding model (or
        its ONNX twin) when retrieval uses embeddings, seconds once per process. The service calls
        it before it accepts connections, so a host behind a load balancer answers its first
        request at full speed. Nothing to do for lexical retrieval.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     mem.warm_up()
        """
        dense = self._view.backend.dense
        if dense is not None:
            dense.prepare()

    def summary(self) -> str:
        """The running summary of what left this conversation's window ("" before anything did).

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory(short_term_limit=2) as mem:
        ...     _ = mem.add_turn("I'm allergic to peanuts", "Noted")
        ...     _ = mem.add_turn("What's for dinner?", "Pasta")
        ...     mem.summary().splitlines()
        ["user: I'm allergic to peanuts", 'assistant: Noted']
        """
        found = self._view.backend.summaries.get(self._view.scope)
        return found[0] if found else ""

    # -- reading ----------------------------------------------------------------------------

    def recall(self, query: str, *, limit: int = 10, tiers: Sequence[str] | str | None = None,
               days: float | None = None, where: Mapping[str, Any] | None = None,
               as_of: datetime | str | float | None = None, diversify: bool = True) -> list[RecallHit]:
        """Federated recall over the tiers, best first; each hit explains its score.

        ``tiers`` restricts to some of ``short_term``, ``long_term``, ``entity``,
        ``episodic``; ``days`` to items from the last N days; ``where`` to items whose
        metadata has these values. Recalled facts have their access reinforced (written in a
        batch within 2 s, see :mod:`tiers.facts.access`: recall itself takes no write lock).

        ``as_of`` (a datetime, naive meaning UTC; an ISO 8601 string; POSIX seconds)
        answers what was true then: the facts valid at that moment (one superseded
        since is current then), the messages, entities and relations there were;
        ``days`` and times the question names count back from it. Looking back does not
        count as a use of the facts found.

        ``diversify`` (default): a hit that restates a better one (most of its words) is
        pushed down (``RankingConfig.diversity``, noted as ``redundancy_penalty``);
        ``diversify=False`` ranks by relevance alone, as a search does.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.remember("My favorite color is green", metadata={"topic": "taste"})
        ...     [h.text for h in mem.recall("favorite color", where={"topic": "taste"}, tiers="long_term")]
        ['My favorite color is green']

        >>> from datetime import UTC, datetime
        >>> now = [datetime(2024, 1, 1, tzinfo=UTC).timestamp()]
        >>> with UnifiedMemory(clock=lambda: now[0]) as mem:
        ...     _ = mem.remember("I live in Lisbon"); now[0] += 90 * 86400
        ...     _ = mem.remember("I live in Porto")
        ...     [h.text for h in mem.recall("where do I live?", tiers="long_term", as_of="2024-02-01")]
        ['I live in Lisbon']
        """
        check_text("query", query)
        check_limit("limit", limit)
        chosen = check_tiers("tiers", tiers)
        check_bool("diversify", diversify)
        moment = parse_when("as_of", as_of)
        since = self._since(days, until=moment)
        if where is not None and not isinstance(where, Mapping):
            raise wrong_type("where", "dict", where)
        backend = self._view.backend
        now = backend.clock()
        search_query = first_person(query, backend.graph, self._view.scope.user_id)
        vector = backend.dense.query_vector(search_query) if backend.dense is not None else None
        depth = backend.config.ranking.rerank_depth if backend.reranker is not None else 0
        hits = federated_recall(
            RecallRequest(query=search_query, scope=self._view.scope, limit=max(limit, depth), now=now, tiers=chosen,
                          since=since, where=dict(where) if where else None, mode=backend.mode, vector=vector,
                          asked=query, as_of=moment, diversify=diversify),
            (backend.facts, backend.graph, backend.window), ranking=backend.config.ranking,
            gather=functools.partial(backend.fanout.gather, concurrent=backend.storage.search == "database"
                                     and backend.storage.concurrent_reads()))
        if backend.reranker is not None:
            hits = rerank(backend.reranker, query, hits, depth=depth)
        hits = hits[:limit]
        if moment is None:  # written in a batch (tiers.facts.access)
            backend.facts.touch([h.id for h in hits if h.tier == "long_term"], now=now)
        return hits

    def _since(self, days: float | None, *, until: float | None = None) -> float | None:
        if days is None:
            return None
        if isinstance(days, bool) or not isinstance(days, int | float):
            raise wrong_type("days", "a number of days", days)
        if not days > 0:  # also NaN
            raise invalid("days", f"must be a positive number of days, got {days!r}")
        span = float(days) if days < 1e300 else float("inf")  # a huge int would overflow float()
        return (self._view.backend.clock() if until is None else until) - span * 86400

    def context(self, query: str | None = None, *, max_tokens: int | None = None,
                include_conversation: bool = True, limit: int | None = None,
                as_of: datetime | str | float | None = None) -> ContextBlock:
        """A token-budgeted memory block for the next LLM call (see :mod:`unified_memory.retrieval.context`).

        With a query, the block holds the facts, entities and past episodes relevant
        to it; without one, the most important facts and most mentioned entities.
        ``tokens <= max_tokens`` always (``context_max_tokens`` by default); ``limit``
        caps how many memories it may hold (``context.recall_limit`` by default).
        ``as_of`` (see :meth:`recall`) builds the block from what was true then: the
        facts valid then, the entities and conversation turns there were (the running
        summary, written later, is left out).

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.remember("I'm allergic to peanuts")
        ...     block = mem.context("what should I avoid eating? peanuts?", max_tokens=200)
        ...     block.tokens <= 200, "peanuts" in block.text
        (True, True)
        """
        budget = check_limit("max_tokens", max_tokens) if max_tokens is not None else self.config.context_max_tokens
        check_bool("include_conversation", include_conversation)
        if query is not None:
            check_text("query", query, allow_empty=True)
        backend = self._view.backend
        limit = check_limit("limit", limit) if limit is not None else self.config.context.recall_limit
        moment = parse_when("as_of", as_of)
        sections: dict[str, list[RecallHit]] = {"facts": [], "entities": [], "episodes": []}
        if query and query.strip():  # every tier: a relevant turn deep in the window is shown as an episode
            for hit in self.recall(query, limit=limit, as_of=moment):  # unless the conversation shows it anyway
                sections[{"long_term": "facts", "entity": "entities"}.get(hit.tier, "episodes")].append(hit)
        else:
            now = backend.clock()
            sections["facts"] = [
                RecallHit(id=f.id, tier="long_term", text=f.text, score=f.importance,
                          components={"importance": f.importance, "category": f.category},
                          metadata=f.metadata, created_at=f.updated_at)
                for f in backend.facts.list(self._view.scope, limit=limit, order="importance", now=now, as_of=moment)]
            entities = backend.graph.entities(self._view.scope, limit=limit if moment is None else None)
            if moment is not None:  # those there were then
                entities = [e for e in entities if e.first_seen.timestamp() <= moment][:limit]
            sections["entities"] = [
                RecallHit(id=e.id, tier="entity", text=describe(e, []), score=float(e.mention_count), components={"mentions": e.mention_count},
                          metadata=e.metadata, created_at=e.last_seen)
                for e in entities if not is_user_node(e)]
        conversation = self._window_until_written() if include_conversation else []
        if moment is not None:
            conversation = [m for m in conversation if m.created_at is None or m.created_at.timestamp() <= moment]
        summary = self.summary() if include_conversation and moment is None else ""
        if summary:  # what left the window, condensed, before the window (oldest first)
            conversation = [Message(role="system", name="summary of earlier turns",
                                    content=" / ".join(summary.splitlines())), *conversation]
        sections["episodes"] = [hit for hit in sections["episodes"] if informative(hit.text)]
        profile = profile_hits(self.profile(as_of=moment), query) if self.config.context.profile_share > 0 else []
        return assemble(query=query, max_tokens=budget, sections=sections, conversation=conversation,
                        count_tokens=backend.count_tokens, config=self.config.context, profile=profile)

    def profile(self, *, as_of: datetime | str | float | None = None) -> Profile:
        """What the agent should always know about the user: their current key facts, safety
        first (health, then who they are, their people, home, work, standing preferences), and
        their name when the graph knows it. Derived from the facts, so it changes when they do:
        a superseded value leaves it. ``context()`` shows it first, whatever the query
        (``context.profile_share`` of the budget). ``as_of`` (see :meth:`recall`): as it was then.
        See :mod:`unified_memory.retrieval.profile`.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_turn("Hi, I'm Ada. I'm allergic to peanuts and I love jazz.", "Noted!")
        ...     profile = mem.profile()
        >>> print(profile.text)
        - I'm allergic to peanuts
        - I'm Ada.
        - I love jazz.
        >>> profile.name, [f.category for f in profile.facts]
        ('Ada', ['health', 'identity', 'preference'])
        """
        moment = parse_when("as_of", as_of)
        backend, scope = self._view.backend, self._view.scope
        facts = backend.facts.of_categories(scope, PROFILE_CATEGORIES, limit=4 * MAX_PROFILE_FACTS,
                                            now=backend.clock(), as_of=moment)
        names = backend.graph.own_names(scope.user_id) if moment is None else []
        return build_profile(facts, name=names[0] if names else None,  # who said them: one read of names
                             said_by=lambda ids: backend.log.names_of(scope.user_id, ids))

    def _window_until_written(self) -> list[Message]:
        """:meth:`window`, read again only once something was written since (``Storage.change_mark``):
        context reads the whole window on every call. Shared between calls: context only reads it."""
        backend, scope = self._view.backend, self._view.scope
        mark = backend.storage.change_mark()
        last = backend.window_read
        if mark is not None and last is not None and last[0] == (scope, mark):
            return last[1]
        messages = self.window()
        if mark is not None:
            backend.window_read = ((scope, mark), messages)
        return messages

    def assemble_context(self, max_tokens: int = 4000, *, query: str | None = None,
                         include_conversation: bool = True) -> str:
        """``context(query, max_tokens=..., include_conversation=...).text`` (selectools' name).

        >>> from unified_memory import UnifiedMemory

        >>> UnifiedMemory().assemble_context(100)
        ''
        """
        return self.context(query, max_tokens=max_tokens, include_conversation=include_conversation).text

    # -- exploring --------------------------------------------------------------------------

    def window(self) -> list[Message]:
        """The short-term window of this conversation, oldest first."""
        return self._view.backend.window.messages(self._view.scope)

    def facts(self, *, include_archived: bool = False, include_inactive: bool = False, category: str | None = None,
              limit: int | None = None, order: Literal["time", "importance"] = "time",
              include_history: bool = False, offset: int = 0) -> list[Fact]:
        """This user's long-term facts: the active ones; with ``include_history`` also
        the superseded ones, each with when it was true (``valid_from``, ``valid_to``) and
        when the memory recorded and retired it (``recorded_at``, ``superseded_at``); with
        ``include_archived`` also those ``long_term_limit`` archived; with
        ``include_inactive`` every fact kept, whatever its status (superseded, archived, expired).
        ``offset`` skips that many first: ``limit`` facts from there are a page (see :meth:`count_facts`).

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory(long_term_limit=1) as mem:
        ...     _ = mem.remember("I keep bees", importance=0.2); _ = mem.remember("I live in Lisbon")
        ...     [f.text for f in mem.facts()], [(f.text, f.status) for f in mem.facts(include_archived=True)]
        (['I live in Lisbon'], [('I keep bees', 'archived'), ('I live in Lisbon', 'active')])
        """
        if limit is not None:
            check_limit("limit", limit)
        check_limit("offset", offset, minimum=0)
        self._check_fact_filter(include_archived, include_inactive, include_history, category)
        if not isinstance(order, str):
            raise wrong_type("order", "str", order)
        if order not in ("time", "importance"):
            raise invalid("order", f"must be 'time' or 'importance', got {order!r}")
        return self._view.backend.facts.list(self._view.scope, include_archived=include_archived,
                                             include_inactive=include_inactive, category=category, limit=limit,
                                             order=order, now=self._view.backend.clock(),
                                             include_history=include_history, offset=offset)

    def count_facts(self, *, include_archived: bool = False, include_inactive: bool = False,
                    category: str | None = None, include_history: bool = False) -> int:
        """How many facts :meth:`facts` lists with the same filters (for paging with ``offset``).

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.remember_many(["I keep bees", "I live in Lisbon", "I play the cello"])
        ...     mem.count_facts(), [f.text for f in mem.facts(limit=2, offset=2)]
        (3, ['I play the cello'])
        """
        self._check_fact_filter(include_archived, include_inactive, include_history, category)
        return self._view.backend.facts.count(self._view.scope, include_archived=include_archived,
                                              include_inactive=include_inactive, category=category,
                                              now=self._view.backend.clock(), include_history=include_history)

    @staticmethod
    def _check_fact_filter(include_archived: bool, include_inactive: bool, include_history: bool,
                           category: str | None) -> None:
        check_bool("include_archived", include_archived)
        check_bool("include_inactive", include_inactive)
        check_bool("include_history", include_history)
        check_optional_text("category", category)

    def entities(self, *, type: str | None = None, limit: int | None = None) -> list[Entity]:
        """This user's entities, most mentioned first."""
        if limit is not None:
            check_limit("limit", limit)
        check_optional_text("type", type)
        return self._view.backend.graph.entities(self._view.scope, type=type, limit=limit)

    def triples(self, entity: str | None = None) -> list[Triple]:
        """This user's relations, optionally only those touching ``entity``."""
        if entity is not None:
            check_text("entity", entity)
        return self._view.backend.graph.triples(self._view.scope, entity=entity)

    def fact_history(self, fact_id: str) -> list[Fact]:
        """The versions of a fact, oldest first: what it superseded (and what that superseded),
        the fact itself, and what superseded it, up to the current version (last, when there is
        one). Each version says when it was true (``valid_from``, ``valid_to``) and what replaced
        it (``superseded_by``). ``NotFoundError`` when this user has no fact ``fact_id``.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     _ = mem.remember("I live in Lisbon"); _ = mem.remember("I live in Berlin now")
        ...     [(f.text, f.status) for f in mem.fact_history(mem.facts()[0].id)]
        [('I live in Lisbon', 'superseded'), ('I live in Berlin now', 'active')]
        """
        from tiers.facts.listing import fact_versions

        fact_id = check_text("fact_id", fact_id)
        scope = self._view.scope
        versions = [f for f in fact_versions(self._view.backend.storage, scope, fact_id)
                    if not scope.agent_id or f.agent_id in (None, scope.agent_id)]  # what this agent sees
        if all(f.id != fact_id for f in versions):
            raise NotFoundError(f"fact_id: no fact {fact_id[:80]!r} of this user", field="fact_id")
        return versions

    def neighbors(self, entity: str, *, depth: int = 1) -> list[Triple]:
        """Relations within ``depth`` hops of ``entity`` in the graph.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_triple("user", "has_sister", "Maria"); _ = mem.add_triple("Maria", "lives_in", "Lisbon")
        ...     len(mem.neighbors("user", depth=1)), len(mem.neighbors("user", depth=2))
        (1, 2)
        """
        return self._view.backend.graph.neighbors(self._view.scope, check_text("entity", entity),
                                             depth=check_limit("depth", depth))

    def episodes(self, *, days: float | None = None, session_id: str | None = None,
                 limit: int | None = None) -> list[Episode]:
        """This user's episodic log, oldest first (optionally the last N days, one session, the last ``limit``)."""
        if limit is not None:
            check_limit("limit", limit)
        if session_id is not None:
            check_scope_id("session_id", session_id)
        return self._view.backend.log.list(self._view.scope, since=self._since(days), session_id=session_id, limit=limit)

    def stats(self) -> MemoryStats:
        """Counts of what this user's memory holds (``facts``: the active ones)."""
        backend, user = self._view.backend, self._view.scope.user_id
        storage = backend.storage
        messages = storage.execute("SELECT COUNT(*) FROM messages WHERE user_id = ?", [user]).fetchone()[0]
        pending = storage.execute(
            "SELECT COUNT(*) FROM messages WHERE user_id = ? AND promoted = 0 AND seq NOT IN "
            "(SELECT message_seq FROM \"window\")", [user]).fetchone()[0]
        window = storage.execute(
            "SELECT COUNT(*), CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM \"window\" WHERE user_id = ? AND agent_id = ? "
            "AND session_id = ?", [user, self._view.scope.agent_id, self._view.scope.session_id]).fetchone()
        facts = backend.facts.counts(user)
        entities, triples = backend.graph.counts(user)
        return MemoryStats(user_id=user, messages=messages, window_messages=window[0], window_tokens=window[1],
                           pending_promotion=pending, facts=facts.get("active", 0),
                           superseded_facts=facts.get("superseded", 0), archived_facts=facts.get("archived", 0),
                           entities=entities, triples=triples, path=storage.shown_target,
                           schema_version=SCHEMA_VERSION, search=storage.search, search_reason=storage.search_reason)

    def users(self) -> list[str]:
        """Every user with memories in this file (messages, facts of any status, entities,
        relations, summaries), sorted; read-only.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory(user_id="bob") as mem:
        ...     _ = mem.remember("I keep bees"); _ = mem.scoped(user_id="ada").add_turn("hello")
        ...     mem.users()
        ['ada', 'bob']
        """
        # the rows export and import move: one definition of "has memories"
        from tiers.storage.user_tables import users_in

        return users_in(self._view.backend.storage)
