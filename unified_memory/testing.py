"""Helpers for testing code that uses unified-memory (no model, no network).

:class:`FakeEmbedder` is a deterministic embedder that records its use;
:func:`internals` shows what is under a memory (its storage, vectors and tiers) to a
test that must look there, e.g. to count rows, plant a damaged one or watch an index.
Both are for tests (yours too), never for production code: what :func:`internals`
reaches is the library's own machinery, and may change between releases.

    >>> emb = FakeEmbedder(dim=16)
    >>> emb.embed(["hello", "hello there"]).shape, emb.calls, emb.texts
    ((2, 16), 1, ['hello', 'hello there'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from scoring.embeddings import HashingEmbedder
from tiers.maintenance.ingested import IngestedKeys
from unified_memory.errors import wrong_type

if TYPE_CHECKING:
    from tiers.episodic import EpisodicLog
    from tiers.facts.long_term import LongTermFacts
    from tiers.graph.entities import EntityGraph
    from tiers.records.scope import Scope
    from tiers.short_term import ShortTermWindow
    from tiers.storage.backend import Storage
    from unified_memory.coordinator.fanout import ReadFanout
    from unified_memory.coordinator.view import MemoryView
    from unified_memory.memory import UnifiedMemory
    from unified_memory.protocols import Summarizer
    from unified_memory.retrieval.method import Dense

__all__ = ["FakeEmbedder", "MemoryInternals", "internals"]


class FakeEmbedder:
    """A deterministic :class:`~unified_memory.protocols.Embedder` that records its use.

    Vectors come from :class:`~scoring.embeddings.HashingEmbedder` (texts sharing
    words are close). ``calls`` counts :meth:`embed` calls, ``texts`` lists every
    text embedded, in order; :meth:`reset` clears both.

    >>> emb = FakeEmbedder()
    >>> _ = emb.embed(["a peanut"]); _ = emb.embed([])
    >>> emb.name, emb.dim, emb.calls, len(emb.texts)
    ('fake-32', 32, 2, 1)
    """

    def __init__(self, dim: int = 32, *, name: str | None = None) -> None:
        self._inner = HashingEmbedder(dim, name=name or f"fake-{dim}")
        self.calls = 0
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        """The embedder's name (part of the embedding cache key)."""
        return self._inner.name

    @property
    def dim(self) -> int:
        """Vector size."""
        return self._inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts (float32, L2-normalised) and record the call."""
        vectors = self._inner.embed(texts)
        self.calls += 1
        self.texts.extend(texts)
        return vectors

    def reset(self) -> None:
        """Forget the recorded calls."""
        self.calls = 0
        self.texts.clear()


class MemoryInternals:
    """What is under one :class:`~unified_memory.UnifiedMemory`, for tests (see :func:`internals`).

    Each attribute is the memory's own live object, shared by its scoped views: a row
    planted through :attr:`storage` is one the memory reads, an index watched through
    :attr:`dense` is the one recall searches. Look, count, plant; do not build on it.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:
    ...     _ = mem.remember("I keep bees")
    ...     inner = internals(mem)
    ...     inner.storage.execute("SELECT COUNT(*) FROM facts").fetchone()[0], inner.scope.user_id, inner.dense
    (1, 'ada', None)
    """

    __slots__ = ("_view",)

    def __init__(self, view: MemoryView) -> None:
        self._view = view

    @property
    def storage(self) -> Storage:
        """The database connection: raw SQL (``execute``, ``query``), ``atomic()`` (to plant a
        row no public path writes), ``checkpoint()``, ``dialect``, and ``backend``, the driver's
        own (a PostgreSQL ``url``; a SQLite ``db.conn``)."""
        return self._view.backend.storage

    @property
    def dense(self) -> Dense | None:
        """The vectors, or ``None`` when retrieval is lexical: ``index`` (the vector index),
        ``partitions`` (per tier: ``"facts"``, ...) and ``cache`` (embeddings, recent queries)."""
        return self._view.backend.dense

    @property
    def facts(self) -> LongTermFacts:
        """The long-term facts tier (its lexical index: ``facts.index.lexical``)."""
        return self._view.backend.facts

    @property
    def log(self) -> EpisodicLog:
        """The episodic log of messages (its lexical index: ``log.index.lexical``)."""
        return self._view.backend.log

    @property
    def graph(self) -> EntityGraph:
        """The entity graph (its lexical index: ``graph.index.lexical``)."""
        return self._view.backend.graph

    @property
    def window(self) -> ShortTermWindow:
        """The short-term window (``window.messages(scope, last=n)`` reads it from the store)."""
        return self._view.backend.window

    @property
    def fanout(self) -> ReadFanout:
        """The threads that run a recall's tier searches at once on the database search path
        (``fanout.close()``: one after the other from then on)."""
        return self._view.backend.fanout

    @property
    def scope(self) -> Scope:
        """This memory's user, agent and session (``""`` for none), as the tiers take them."""
        return self._view.scope

    @property
    def summarizer(self) -> Summarizer:
        """The summarizer of the running summaries (the one passed as ``summarizer=``, or the
        default :class:`~unified_memory.extraction.summarizers.ExtractiveSummarizer`)."""
        return self._view.backend.summarizer

    @property
    def ingested(self) -> IngestedKeys:
        """The keys of the chat-log messages ingesting recorded (:mod:`tiers.maintenance.ingested`)."""
        return IngestedKeys(self._view.backend.storage)


def internals(memory: UnifiedMemory) -> MemoryInternals:
    """What is under ``memory`` (a :class:`~unified_memory.UnifiedMemory` or a scoped view of
    one): its storage, vectors, tiers and plug-ins, for tests (yours too) that must look there.
    Not for production code; a :class:`~unified_memory.RemoteMemory`'s are in the service.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory(retrieval="lexical") as mem:
    ...     bob = internals(mem.scoped(user_id="bob"))
    ...     bob.scope.user_id, bob.storage is internals(mem).storage
    ('bob', True)
    >>> internals("memory.db")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryTypeError: memory: expected UnifiedMemory, got str
    """
    from unified_memory.memory import UnifiedMemory as Memory  # here: importing this module stays light

    if not isinstance(memory, Memory):
        raise wrong_type("memory", "UnifiedMemory", memory)
    return MemoryInternals(memory.view)
