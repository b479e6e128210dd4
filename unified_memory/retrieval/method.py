"""Choosing and wiring the retrieval method: lexical, embedding or hybrid.

``retrieval="auto"`` (the default) means hybrid when the embeddings extra is
installed (sentence-transformers and the bundled all-MiniLM-L6-v2 model), and
lexical otherwise. Dense retrieval needs an :class:`~unified_memory.protocols.Embedder`
and a :class:`~unified_memory.protocols.VectorIndex`: an exact numpy index by
default, or chromadb (embedded beside the SQLite file, or a server).

    >>> resolve_mode("lexical", embedder=None)
    'lexical'
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from threading import Lock
from typing import Any

from scoring.embeddings import default_embedder, embeddings_available
from tiers.indexes.documents import DocumentIndex
from tiers.storage.backend import DriverError, Storage
from tiers.storage.postgres_backend import is_url
from unified_memory.config import MemoryConfig
from unified_memory.errors import ConfigError, DependencyError, UnifiedMemoryError
from unified_memory.protocols import Embedder, VectorIndex

__all__ = ["Dense", "resolve_mode", "setup_dense", "shared_default_embedder"]

_LOG = logging.getLogger(__name__)

_SHARED_LOCK = Lock()
_SHARED: dict[str, Embedder] = {}


def shared_default_embedder() -> Embedder | None:
    """The bundled embedder, one per process: every memory opened without an
    ``embedder=`` shares it, so the model loads once."""
    with _SHARED_LOCK:
        if "default" not in _SHARED:
            embedder = default_embedder()
            if embedder is None:
                return None
            _SHARED["default"] = embedder
        return _SHARED["default"]


def resolve_mode(retrieval: str, *, embedder: Embedder | None) -> str:
    """The retrieval method in force: ``auto`` becomes hybrid when an embedder is available.

    >>> resolve_mode("auto", embedder=None) in ("lexical", "hybrid")
    True
    """
    if retrieval != "auto":
        return retrieval
    if embedder is not None:
        return "hybrid"
    return "hybrid" if embeddings_available() else "lexical"


@dataclass
class Dense:
    """The dense half of retrieval, shared by the tiers of one memory file."""

    embedder: Embedder
    index: VectorIndex | None  # None: the vectors are in the database (pgvector)
    cache: Any
    partitions: dict[str, Any]

    def query_vector(self, query: str) -> Any:
        """The query's embedding (recent queries are remembered by the cache)."""
        return self.cache.query_vector(query)

    def rebuild(self, user_ids: list[str]) -> int:
        """Rebuild every tier's partitions of these users from SQLite; returns how many."""
        for partitions in self.partitions.values():
            partitions.rebuild_all(user_ids)
        return len(user_ids) * len(self.partitions)

    def prepare(self) -> None:
        """Let the embedder get ready before a write takes the lock (an embedder with a
        ``prepare()`` method loads its model there, once, rather than inside the transaction)."""
        prepare = getattr(self.embedder, "prepare", None)
        if callable(prepare):
            prepare()

    @contextlib.contextmanager
    def defer(self) -> Iterator[None]:
        """Embed what a write adds in one batch per tier when the write ends (see
        :meth:`tiers.indexes.vectors.PartitionedVectors.defer`)."""
        with contextlib.ExitStack() as stack:
            for partitions in self.partitions.values():
                stack.enter_context(partitions.defer())
            yield

    def close(self) -> None:
        """Save what the vector index keeps on disk (inside a write: see
        :meth:`tiers.indexes.vectors.PartitionedVectors.save`), then close it. A save that fails is
        logged: the next process rebuilds instead."""
        try:
            for partitions in self.partitions.values():
                partitions.save()
        except (OSError, RuntimeError, MemoryError, UnifiedMemoryError, DriverError) as exc:
            _LOG.warning("close: vector index not saved: %s", exc)
        if self.index is not None:
            self.index.close()


def _vector_index(config: MemoryConfig, path: str | os.PathLike[str] | None) -> VectorIndex:
    settings = config.vectors
    if settings.backend == "numpy":
        from tiers.indexes.vectors import NumpyVectorIndex

        directory = f"{Path(path)}.vectors" if path is not None and not is_url(path) and str(path) != ":memory:" else None
        return NumpyVectorIndex(approximate_above=settings.approximate_above, depth=settings.scan_depth,
                                directory=directory)
    from tiers.indexes.chroma_index import ChromaVectorIndex

    hnsw = {"ef_search": settings.chroma_ef_search}
    if settings.chroma_host:
        return ChromaVectorIndex.server(settings.chroma_host, settings.chroma_port, ssl=settings.chroma_ssl,
                                        hnsw=hnsw, prefix=settings.chroma_prefix)
    if path is not None and is_url(path) and not settings.chroma_path:
        raise ConfigError("vectors.chroma_host: a memory on PostgreSQL is shared by hosts: give the Chroma "
                          "server they share (chroma_host), or a chroma_path of this host", field="vectors.chroma_host")
    location = settings.chroma_path or (f"{Path(path)}.chroma" if path is not None else None)
    if location is None:
        raise ConfigError("vectors.chroma_path: an in-memory memory (path=None) needs a chroma_path or a "
                          "chroma_host for the chroma backend", field="vectors.chroma_path")
    return ChromaVectorIndex.embedded(location, hnsw=hnsw, prefix=settings.chroma_prefix)


def setup_dense(
    config: MemoryConfig,
    storage: Storage,
    indexes: list[DocumentIndex],
    *,
    path: str | os.PathLike[str] | None,
    embedder: Embedder | None,
    vector_index: VectorIndex | None,
) -> tuple[str, Dense | None]:
    """Resolve the retrieval mode and, when it is dense, attach dense partitions to
    each tier's documents. Returns ``(mode, dense)``."""
    mode = resolve_mode(config.retrieval, embedder=embedder)
    if mode == "lexical":
        return mode, None
    if embedder is None:
        embedder = shared_default_embedder()
    if embedder is None:
        raise DependencyError(
            f"retrieval: {mode!r} needs an embedder: pip install torch==2.13.0 then "
            f"pip install 'unified-memory[embeddings]', or pass embedder=...", field="retrieval")
    from tiers.indexes.embedding_cache import EmbeddingCache
    from tiers.indexes.vectors import PartitionedVectors

    cache = EmbeddingCache(storage, embedder)
    partitions: dict[str, Any] = {}
    if storage.search == "database" and vector_index is None and config.vectors.backend == "numpy":
        from tiers.indexes.db_vectors import DatabaseVectors  # pgvector: the vectors are tables too

        for documents in indexes:
            partitions[documents.kind] = DatabaseVectors(storage, documents.loader, cache, documents.kind,
                                                         parts=documents.parts)
            documents.attach_dense(partitions[documents.kind])
        return mode, Dense(embedder, None, cache, partitions)
    index = vector_index if vector_index is not None else _vector_index(config, path)
    for documents in indexes:
        partitions[documents.kind] = PartitionedVectors(storage, documents.loader, cache, index, documents.kind,
                                                          parts=documents.parts)
        documents.attach_dense(partitions[documents.kind])
    return mode, Dense(embedder, index, cache, partitions)
