"""An approximate HNSW partition (usearch), for the large partitions of
:class:`~tiers.numpy_index.NumpyVectorIndex`.

usearch (``pip install "unified-memory[embeddings]"``) holds the float32 vectors and the graph;
this class maps our string ids to its integer keys (one key per id for the partition's life, so a
replaced vector is a remove and an add of the same key) and keeps each id's insertion rank. A
search asks the graph for ``limit`` neighbours at a breadth of ``max(ef_search, limit)``,
re-scores them exactly from the stored vectors and orders them by score, then by rank (the exact
index's tie order). Deletes are usearch removals (the node stays in the graph as a route, never
returned); once removed nodes pass a third of the partition it is rebuilt from its live vectors.
Not thread-safe on its own (the index that holds it locks).

    >>> rng = np.random.default_rng(0)
    >>> vectors = rng.standard_normal((300, 8)).astype(np.float32)
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> part = HnswPartition.build([f"v{i}" for i in range(300)], vectors, np.arange(300))
    >>> part.search(vectors[7], 1)[0][0], len(part)
    ('v7', 300)
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from unified_memory.errors import DependencyError

__all__ = ["HnswPartition", "hnsw_available", "INSTALL_HINT"]

INSTALL_HINT = 'usearch is not installed: pip install "unified-memory[embeddings]" (or pip install usearch)'
_REBUILD_MIN = 1024  # rebuild once removed nodes pass max(_REBUILD_MIN, live / 2)


@functools.cache
def hnsw_available() -> bool:
    """Whether usearch can be imported (large partitions stay exact without it)."""
    try:
        _usearch()
    except DependencyError:
        return False
    return True


def _usearch() -> Any:
    try:
        from usearch.index import Index
    except ImportError as exc:
        raise DependencyError(INSTALL_HINT) from exc
    return Index


def _threads(count: int) -> int:
    """Build threads: all cores (at most 4) for a bulk add, one for a few vectors."""
    return 1 if count < 2048 else max(1, min(4, os.cpu_count() or 1))


class HnswPartition:
    """One partition as a usearch HNSW graph over inner products (cosine, for unit vectors).

    ``connectivity`` (M), ``ef_construction`` and ``ef_search`` are usearch's ``connectivity``,
    ``expansion_add`` and ``expansion_search``.
    """

    def __init__(self, dim: int, *, connectivity: int = 32, ef_construction: int = 200,
                 ef_search: int = 128) -> None:
        self.dim = dim
        self.params = {"connectivity": connectivity, "ef_construction": ef_construction, "ef_search": ef_search}
        self.graph = _usearch()(ndim=dim, metric="ip", dtype="f32", connectivity=connectivity,
                                expansion_add=ef_construction, expansion_search=ef_search)
        self.ef_search = ef_search
        self.keys: dict[str, int] = {}  # id -> usearch key
        self.names: list[str | None] = []  # usearch key -> id (None: removed)
        self.order = np.empty(0, dtype=np.int64)  # usearch key -> insertion rank (ties)
        self.next_order = 0
        self.removed = 0  # nodes removed since the graph was built

    @classmethod
    def build(cls, ids: Sequence[str], vectors: np.ndarray, orders: np.ndarray, **params: int) -> HnswPartition:
        """A partition of distinct ``ids`` with their vectors and insertion ranks."""
        part = cls(vectors.shape[1], **params)
        part._add(list(ids), np.ascontiguousarray(vectors, dtype=np.float32), np.asarray(orders, dtype=np.int64))
        return part

    @classmethod
    def restore(cls, graph: Any, names: list[str | None], order: np.ndarray, *, next_order: int, removed: int,
                params: dict[str, int]) -> HnswPartition:
        """A partition around a loaded usearch ``graph`` whose key ``k`` holds ``names[k]`` (``None``:
        removed) at rank ``order[k]`` (see :mod:`tiers.hnsw_store`)."""
        part = cls.__new__(cls)
        part.dim, part.params, part.graph, part.ef_search = int(graph.ndim), dict(params), graph, params["ef_search"]
        part.names, part.order, part.next_order, part.removed = names, order, next_order, removed
        part.keys = {name: key for key, name in enumerate(names) if name is not None}
        return part

    def __len__(self) -> int:
        return len(self.keys)

    def _add(self, ids: list[str], vectors: np.ndarray, orders: np.ndarray) -> None:
        first = len(self.names)
        keys = np.arange(first, first + len(ids), dtype=np.uint64)
        self.graph.add(keys, vectors, threads=_threads(len(ids)))
        self.names.extend(ids)
        self.keys.update(zip(ids, range(first, first + len(ids)), strict=True))
        if len(self.names) > len(self.order):  # grow by doubling: amortised O(1) per add
            order = np.empty(max(len(self.names), 2 * len(self.order)), dtype=np.int64)
            order[:first] = self.order[:first]
            self.order = order
        self.order[first:first + len(ids)] = orders
        if len(orders):
            self.next_order = max(self.next_order, int(orders.max()) + 1)

    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add distinct ids, replacing the vectors of those present (they keep their rank)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        old = [i for i, key in enumerate(ids) if key in self.keys]
        if old:
            keys = np.array([self.keys[ids[i]] for i in old], dtype=np.uint64)
            self.graph.remove(keys)
            self.graph.add(keys, vectors[old], threads=_threads(len(old)))
        if len(old) < len(ids):
            new = [i for i, key in enumerate(ids) if key not in self.keys] if old else list(range(len(ids)))
            orders = np.arange(self.next_order, self.next_order + len(new), dtype=np.int64)
            self._add([ids[i] for i in new], vectors[new], orders)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove ids (unknown ids are ignored); rebuild once removed nodes are many."""
        keys = [self.keys.pop(key) for key in ids if key in self.keys]
        if not keys:
            return
        self.graph.remove(np.array(keys, dtype=np.uint64))
        for key in keys:
            self.names[key] = None
        self.removed += len(keys)
        if self.keys and self.removed > max(_REBUILD_MIN, len(self.keys) // 2):
            self._rebuild()

    def _rebuild(self) -> None:
        ids, vectors, orders = self.export()
        fresh = HnswPartition.build(ids, vectors, orders, **self.params)
        fresh.next_order = max(fresh.next_order, self.next_order)
        fresh.ef_search = self.ef_search
        vars(self).update(vars(fresh))

    def _vectors(self, keys: Sequence[int]) -> np.ndarray:
        found = self.graph.get(np.asarray(keys, dtype=np.uint64), dtype=np.float32)
        return np.asarray(found, dtype=np.float32).reshape(len(keys), self.dim)

    def search(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` ids nearest ``vector`` found by the graph, best first, as ``(id, score)``."""
        if limit <= 0 or not self.keys:
            return []
        self.graph.expansion_search = max(self.ef_search, limit)
        keys = self.graph.search(np.ascontiguousarray(vector, dtype=np.float32), min(limit, len(self.keys)),
                                 threads=1).keys
        keys = [int(key) for key in keys if self.names[int(key)] is not None]
        if not keys:
            return []
        scores = self._vectors(keys) @ vector
        best = np.lexsort((self.order[keys], -scores))
        return [(self.names[keys[i]], float(scores[i])) for i in best]

    def similarity(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Exact cosine similarity of ``vector`` to each of ``ids`` held here (others left out)."""
        found = [(key, self.keys[key]) for key in ids if key in self.keys]
        if not found:
            return {}
        scores = self._vectors([label for _, label in found]) @ vector
        return {key: float(score) for (key, _), score in zip(found, scores, strict=True)}

    def ids(self) -> set[str]:
        """The ids held."""
        return set(self.keys)

    def export(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Live ids in rank order, their float32 vectors and ranks."""
        labels = np.fromiter(self.keys.values(), dtype=np.int64, count=len(self.keys))
        labels = labels[np.argsort(self.order[labels], kind="stable")]
        vectors = np.empty((len(labels), self.dim), dtype=np.float32)
        for start in range(0, len(labels), 65_536):
            vectors[start:start + 65_536] = self._vectors(labels[start:start + 65_536].tolist())
        return [self.names[label] for label in labels], vectors, self.order[labels]
