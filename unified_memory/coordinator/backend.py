"""What every scoped view of one memory file shares: the storage, the tiers and the plug-ins.

:func:`open_backend` checks the plug-ins, opens the file and builds the tiers; a
file refused while they open is closed again (with its ``-wal`` / ``-shm``).

    >>> from unified_memory.config import MemoryConfig
    >>> backend = open_backend(None, MemoryConfig())
    >>> backend.mode, backend.storage.path
    ('lexical', None)
    >>> backend.close()
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scoring.importance import HeuristicImportanceScorer
from tiers.episodic import EpisodicLog
from tiers.facts.long_term import LongTermFacts
from tiers.graph.entities import ENTITY_LENGTH_NORMALISATION, EntityGraph
from tiers.graph.upkeep import refresh_stale_cards, refresh_user
from tiers.indexes.documents import DocumentIndex
from tiers.items.keyed_items import KeyedItems, Ranking
from tiers.short_term import ShortTermWindow
from tiers.storage.backend import DriverError, Storage
from tiers.summaries import ConversationSummaries
from unified_memory.config import MemoryConfig
from unified_memory.coordinator.fanout import ReadFanout
from unified_memory.coordinator.window_tail import WindowTail
from unified_memory.errors import StorageError, wrong_type
from unified_memory.events import EventBus
from unified_memory.extraction.promotion import Promoter
from unified_memory.extraction.rules import RuleExtractor
from unified_memory.extraction.summarizers import ExtractiveSummarizer
from unified_memory.privacy.redaction import Scrubber, make_scrubber
from unified_memory.protocols import (
    Embedder,
    Extractor,
    ImportanceScorer,
    Reranker,
    Summarizer,
    TokenCounter,
    VectorIndex,
)
from unified_memory.retrieval.method import Dense, setup_dense
from unified_memory.retrieval.tokens import make_token_counter
from unified_memory.types import Message

__all__ = ["Backend", "Plugins", "open_backend"]

_LOG = logging.getLogger(__name__)


@dataclass(slots=True)
class Plugins:
    """What a caller may plug in; ``None`` takes the default."""

    importance_scorer: Callable[[str], float] | None = None
    extractor: Extractor | None = None
    token_counter: Callable[[str], int] | None = None
    clock: Callable[[], float] | None = None
    embedder: Embedder | None = None
    vector_index: VectorIndex | None = None
    reranker: Reranker | None = None
    summarizer: Summarizer | None = None
    redactor: Callable[[str], str] | None = None

    def check(self) -> None:
        """Each plug-in has the shape it needs; the error names the keyword."""
        callables: tuple[tuple[str, object], ...] = (
            ("importance_scorer", self.importance_scorer), ("token_counter", self.token_counter), ("clock", self.clock))
        for name, value in callables:
            if value is not None and not callable(value):
                raise wrong_type(name, "callable", value)
        plugins: tuple[tuple[str, object, str, str], ...] = (
                ("extractor", self.extractor, "extract", "object with an extract(message, context=...) method"),
                ("embedder", self.embedder, "embed", "Embedder (name, dim, embed(texts))"),
                ("vector_index", self.vector_index, "search", "VectorIndex"),
                ("reranker", self.reranker, "rerank", "object with a rerank(query, texts) method"),
                ("summarizer", self.summarizer, "summarize", "object with a summarize(previous, messages) method"))
        for name, value, method, shape in plugins:
            if value is not None and not callable(getattr(value, method, None)):
                raise wrong_type(name, shape, value)


@dataclass(slots=True)
class Backend:
    """The storage, the tiers and the plug-ins of one memory file."""

    storage: Storage
    config: MemoryConfig
    log: EpisodicLog
    window: ShortTermWindow
    facts: LongTermFacts
    graph: EntityGraph
    promoter: Promoter
    extractor: Extractor
    scorer: ImportanceScorer
    count_tokens: TokenCounter
    clock: Callable[[], float]
    mode: str
    dense: Dense | None
    reranker: Reranker | None
    events: EventBus
    summaries: ConversationSummaries
    summarizer: Summarizer
    scrub: Scrubber
    items: KeyedItems
    #: The last window context read: ((scope, Storage.change_mark()), messages), reused until a write.
    window_read: tuple[Any, list[Message]] | None = field(default=None)
    #: The newest window messages of the conversation written last (an extractor's context), kept until a write.
    window_tail: WindowTail = field(default_factory=WindowTail)
    #: Held by a write (:meth:`~unified_memory.coordinator.view.MemoryView.write`) from its first event held
    #: to its events delivered: the bus keeps one stack of held events, so writes of threads take turns.
    writing: threading.RLock = field(default_factory=threading.RLock)
    #: Runs a recall's tier searches at once where the database allows it (:mod:`.fanout`).
    fanout: ReadFanout = field(default_factory=ReadFanout)

    @property
    def indexes(self) -> tuple[DocumentIndex, ...]:
        """The searchable documents of the episodic log, the facts (current and archived) and the graph."""
        return self.log.index, *self.facts.indexes, self.graph.index

    def check_drift(self, user_id: str) -> None:
        """Compare a persistent vector index with the store for ``user_id``; rebuild what drifted."""
        if self.dense is not None:
            for partitions in self.dense.partitions.values():
                partitions.ensure(user_id)

    def reindex(self, users: list[str], *, progress: Callable[[int, int], Any] | None = None) -> None:
        """Rebuild the lexical indexes (and the vectors, when dense retrieval is on) of ``users``,
        and the entities' cards they index (derived again from the relations). On the database
        search path the tables are rebuilt from the rows now, user by user."""
        if self.storage.search == "database":
            for done, user in enumerate(users, start=1):
                with self.storage.atomic():
                    refresh_user(self.graph, user)  # the entities' cards, derived again from their relations
                    for documents in self.indexes:
                        documents.reset(user)
                        documents.fill(user)
                if progress is not None:
                    progress(done, len(users))
            return
        for user in users:
            with self.storage.atomic():
                refresh_user(self.graph, user)  # the entities' cards, derived again from their relations
        for documents in self.indexes:
            for user in users:
                documents.lexical.invalidate(user)
        if self.dense is not None:
            with self.storage.atomic():
                self.dense.rebuild(users)
        if progress is not None:
            progress(len(users), len(users))

    def close(self) -> None:
        """Save large lexical indexes (so the next process restores them), then close (idempotent)."""
        if not self.storage.closed:
            try:
                self.facts.uses.flush()
            except (StorageError, DriverError) as exc:  # e.g. locked by a writer past the timeout
                _LOG.warning("close: the uses of %d recalled facts not saved: %s", self.facts.uses.pending, exc)
            try:
                for documents in (*self.facts.indexes, self.graph.index, self.log.index):
                    documents.save_snapshots()
            except (StorageError, DriverError) as exc:  # e.g. locked by a writer: the next open rebuilds
                _LOG.warning("close: index snapshots not saved: %s", exc)
            if self.dense is not None:
                self.dense.close()
        self.fanout.close()
        self.storage.close()


def _item_ranking(config: MemoryConfig) -> Ranking:
    """How keyed items rank for a query: the memory's BM25 parameters, fusion weights and half-life."""
    ranking = config.ranking
    return Ranking(k1=ranking.bm25_k1, b=ranking.bm25_b, base=ranking.base, recency_weight=ranking.recency_weight,
                   half_life_days=ranking.recency_half_life_days, lexical_weight=ranking.lexical_weight,
                   dense_floor=ranking.dense_floor, dense_ceiling=ranking.ceiling("hybrid"))


def open_backend(path: str | os.PathLike[str] | None, config: MemoryConfig,
                 plugins: Plugins | None = None) -> Backend:
    """Open ``path`` (``None``: in memory) and build every tier over it."""
    plugins = plugins or Plugins()
    plugins.check()
    scrub = make_scrubber(plugins.redactor, redact_secrets=config.redact_secrets)
    scorer = plugins.importance_scorer or HeuristicImportanceScorer()
    count_tokens = plugins.token_counter or make_token_counter(config.token_counter, config.tiktoken_encoding)
    storage = Storage(path, pool_size=config.pool_size, search=config.search)
    try:  # a file refused while the tiers open must not stay open (nor keep its -wal / -shm)
        k1, b = config.ranking.bm25_k1, config.ranking.bm25_b
        log = EpisodicLog(storage, k1=k1, b=b, neighbor_turns=config.ranking.neighbor_turns,
                          neighbor_gap_seconds=60.0 * config.ranking.neighbor_gap_minutes)
        facts = LongTermFacts(storage, k1=k1, b=b)
        graph = EntityGraph(storage, k1=k1, b=min(b, ENTITY_LENGTH_NORMALISATION))
        extractor = plugins.extractor or RuleExtractor(scorer)
        mode, dense = setup_dense(config, storage, [log.index, *facts.indexes, graph.index], path=path,
                                  embedder=plugins.embedder, vector_index=plugins.vector_index)
        try:  # after an upgrade: the entities' cards as relations now read (derived data: never fatal)
            refresh_stale_cards(graph)
        except (StorageError, DriverError) as exc:  # a read-only file, a writer holding the lock: a later open
            _LOG.warning("open: the entities' cards are still to be derived again: %s", exc)
        return Backend(
            storage=storage, config=config, log=log,
            window=ShortTermWindow(log, max_messages=config.short_term_limit,
                                   max_tokens=config.short_term_max_tokens),
            facts=facts, graph=graph,
            promoter=Promoter(log, facts, graph, extractor=extractor, scorer=scorer,
                              threshold=config.importance_threshold, roles=config.promote_roles),
            extractor=extractor, scorer=scorer, count_tokens=count_tokens, clock=plugins.clock or time.time,
            mode=mode, dense=dense, reranker=plugins.reranker, events=EventBus(),
            summaries=ConversationSummaries(storage), summarizer=plugins.summarizer or ExtractiveSummarizer(
                scorer=scorer if plugins.importance_scorer is None else None),  # the default: one scorer, one cache
            scrub=scrub, items=KeyedItems(storage, _item_ranking(config)),
        )
    except BaseException:
        storage.close()
        raise
