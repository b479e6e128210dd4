"""The pluggable parts the tiers call, as ``typing.Protocol`` classes: a token counter, an
embedder, a vector index, a conversation store. Public as :mod:`unified_memory.protocols`, with
the parts only the front door calls (extractor, reranker, LLM, ...).

Anything with the right shape plugs in; nothing needs to subclass us.

    >>> from tiers.records.protocols import TokenCounter
    >>> isinstance(len, TokenCounter)
    True

This module imports nothing of ours.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["TokenCounter", "Embedder", "VectorIndex", "ConversationStore"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text: any callable ``str -> int``."""

    def __call__(self, text: str, /) -> int: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape ``(n, dim)``.

    ``name`` identifies the model (it is part of the embedding cache key, so two
    models never share cached vectors).
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Any: ...


@runtime_checkable
class VectorIndex(Protocol):
    """Nearest-neighbour search by cosine similarity, in named partitions (one per
    tier and user, e.g. ``"facts/ada"``). Vectors are L2-normalised float32.

    An index is derived data: SQLite holds the vectors' source (texts and the
    embedding cache), and the memory rebuilds a partition whenever it drifts.
    ``persistent`` says whether the index keeps its content across processes
    (chroma) or must be rebuilt in every process (numpy).
    """

    @property
    def persistent(self) -> bool: ...

    def upsert(self, partition: str, ids: Sequence[str], vectors: Any) -> None: ...

    def delete(self, partition: str, ids: Sequence[str]) -> None: ...

    def search(self, partition: str, vector: Any, limit: int) -> list[tuple[str, float]]: ...

    def similarity(self, partition: str, vector: Any, ids: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of ``ids`` held (so a lexical hit that
        is not among the nearest neighbours still gets its dense score)."""
        ...

    def ids(self, partition: str) -> set[str]: ...

    def drop(self, partition: str) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class ConversationStore(Protocol):
    """Persists conversation sessions: one JSON object per ``(namespace, session_id)``.

    ``save`` overwrites; a plain list of messages is stored as ``{"messages": [...],
    "summary": None}``. ``ttl`` (seconds; ``None`` = the store's default, which may be
    "never") makes an entry expire: expired entries are never loaded or listed.
    ``load`` returns ``None`` for a missing or expired entry; ``delete`` returns
    whether something was deleted; ``list`` returns the live ids of a namespace,
    sorted. Implementations: :mod:`tiers.sessions`.
    """

    def load(self, session_id: str, *, namespace: str = "default") -> dict[str, Any] | None: ...

    def save(self, session_id: str, state: Mapping[str, Any] | Sequence[Any], *, namespace: str = "default",
             ttl: float | None = None) -> None: ...

    def delete(self, session_id: str, *, namespace: str = "default") -> bool: ...

    def list(self, *, namespace: str = "default") -> list[str]: ...
