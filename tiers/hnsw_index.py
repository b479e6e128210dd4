"""An approximate HNSW partition (faiss ``IndexHNSWFlat``), for the large partitions of
:class:`~tiers.numpy_index.NumpyVectorIndex`.

faiss (``pip install "unified-memory[embeddings]"``) holds the float32 vectors and the graph; a
vector's faiss label is its position of insertion. This class maps our string ids to labels and
keeps each label's insertion rank (the exact index's tie order). faiss HNSW cannot remove a
node, so a removed or replaced id leaves a *tombstone*: its label is cleared from a bitmap of
live labels that searches pass to faiss (``IDSelectorBitmap``), and its stored vector is
overwritten with zeros, so no removed vector stays in memory or in a saved copy
(:mod:`tiers.hnsw_store`). A replaced id is a tombstone plus a new label with the same rank.
Once tombstones pass :data:`REBUILD_FRACTION` of the live vectors (and at least
:data:`REBUILD_MIN`), :meth:`needs_rebuild` says so and the owner rebuilds it from the live
vectors, off the write path (:mod:`tiers.hnsw_build`).

A search asks the graph for ``limit`` neighbours at breadth ``max(ef_search, limit)``,
re-scores them exactly from the stored vectors (numpy, as the exact index scores) and orders
them by score, then by rank. Not thread-safe on its own (the index that holds it locks).

    >>> rng = np.random.default_rng(0)
    >>> vectors = rng.standard_normal((300, 8)).astype(np.float32)
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> part = HnswPartition(8); part.put([f"v{i}" for i in range(300)], vectors, np.arange(300))
    >>> part.search(vectors[7], 1)[0][0], len(part)
    ('v7', 300)
    >>> part.delete(["v7"]); part.search(vectors[7], 1)[0][0] != "v7", float(abs(part.matrix()).sum(axis=1)[7])
    (True, 0.0)
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from unified_memory.errors import DependencyError

__all__ = ["HnswPartition", "hnsw_available", "faiss_module", "INSTALL_HINT", "REBUILD_MIN", "REBUILD_FRACTION"]

INSTALL_HINT = 'faiss is not installed: pip install "unified-memory[embeddings]" (or pip install faiss-cpu)'
#: Rebuild once tombstones pass ``max(REBUILD_MIN, REBUILD_FRACTION * live)``.
REBUILD_MIN = 1024
REBUILD_FRACTION = 0.25


@functools.cache
def hnsw_available() -> bool:
    """Whether faiss can be imported (large partitions stay exact without it)."""
    try:
        faiss_module()
    except DependencyError:
        return False
    return True


def faiss_module() -> Any:
    """The ``faiss`` module; :class:`~unified_memory.errors.DependencyError` with the install hint
    when it is missing."""
    try:
        import faiss
    except ImportError as exc:
        raise DependencyError(INSTALL_HINT) from exc
    return faiss


class HnswPartition:
    """One partition as a faiss HNSW graph over inner products (cosine, for unit vectors).

    ``connectivity`` is faiss's ``M``; ``ef_construction`` and ``ef_search`` its
    ``efConstruction`` and ``efSearch``.
    """

    def __init__(self, dim: int, *, connectivity: int = 16, ef_construction: int = 100,
                 ef_search: int = 128, graph: Any = None) -> None:
        faiss = faiss_module()
        self.dim = dim
        self.params = {"connectivity": connectivity, "ef_construction": ef_construction, "ef_search": ef_search}
        if graph is None:
            graph = faiss.IndexHNSWFlat(dim, connectivity, faiss.METRIC_INNER_PRODUCT)
            graph.hnsw.efConstruction = ef_construction
        self.graph = graph
        self.ef_search = ef_search
        self.keys: dict[str, int] = {}  # id -> faiss label
        self.names: list[str | None] = []  # faiss label -> id (None: tombstone)
        self.order = np.empty(0, dtype=np.int64)  # faiss label -> insertion rank (ties)
        self.alive = np.zeros(0, dtype=bool)  # faiss label -> live
        self.next_order = 0
        self.removed = 0  # tombstones
        self._selector: tuple[Any, np.ndarray] | None = None  # (faiss IDSelectorBitmap, its packed bits)

    @classmethod
    def restore(cls, graph: Any, names: list[str | None], order: np.ndarray, *, next_order: int,
                params: dict[str, int]) -> HnswPartition:
        """A partition around a loaded faiss ``graph`` whose label ``k`` holds ``names[k]``
        (``None``: a tombstone) at rank ``order[k]`` (see :mod:`tiers.hnsw_store`)."""
        part = cls(int(graph.d), graph=graph, **params)
        part.names, part.order = names, np.asarray(order, dtype=np.int64)
        part.alive = np.fromiter((name is not None for name in names), dtype=bool, count=len(names))
        part.keys = {name: label for label, name in enumerate(names) if name is not None}
        part.next_order, part.removed = next_order, len(names) - len(part.keys)
        return part

    def __len__(self) -> int:
        return len(self.keys)

    def matrix(self) -> np.ndarray:
        """The stored vectors, one row per label (a writable view of faiss's storage)."""
        faiss = faiss_module()
        count = int(self.graph.ntotal)
        if not count:
            return np.empty((0, self.dim), dtype=np.float32)
        flat = faiss.downcast_index(self.graph.storage)
        view: np.ndarray = faiss.rev_swig_ptr(flat.get_xb(), count * self.dim).reshape(count, self.dim)
        return view

    def reserve(self, count: int) -> None:
        """Allocate faiss's vector storage for ``count`` vectors at once. faiss grows it as a
        ``std::vector`` (doubling), and each growth holds the old and the new buffer together:
        filled by chunks up to 300,000 x 384, that is 400 MB more at the peak."""
        flat = faiss_module().downcast_index(self.graph.storage)
        codes = flat.codes
        size, wanted = int(codes.size()), int(count) * int(flat.code_size)
        if wanted > size and codes.is_owned:
            codes.resize(wanted)  # the capacity stays when it shrinks back to what is held
            codes.resize(size)

    def put(self, ids: Sequence[str], vectors: np.ndarray, orders: np.ndarray) -> None:
        """Add distinct ``ids`` with their vectors and ranks; an id held already is replaced
        (its old label becomes a tombstone). faiss releases the GIL while it adds."""
        ids = list(ids)
        if not ids:
            return
        self._bury([self.keys[key] for key in ids if key in self.keys])
        first = len(self.names)
        self.graph.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self.names.extend(ids)
        self.keys.update(zip(ids, range(first, first + len(ids)), strict=True))
        if len(self.names) > len(self.order):  # grow by doubling: amortised O(1) per add
            size = max(len(self.names), 2 * len(self.order))
            self.order = np.concatenate([self.order[:first], np.empty(size - first, dtype=np.int64)])
            self.alive = np.concatenate([self.alive[:first], np.zeros(size - first, dtype=bool)])
        self.order[first:first + len(ids)] = orders
        self.alive[first:first + len(ids)] = True
        self._selector = None
        self.next_order = max(self.next_order, int(np.max(orders)) + 1)

    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add distinct ids, replacing the vectors of those present (they keep their rank)."""
        orders = np.empty(len(ids), dtype=np.int64)
        fresh = self.next_order
        for i, key in enumerate(ids):
            label = self.keys.get(key)
            if label is None:
                orders[i], fresh = fresh, fresh + 1
            else:
                orders[i] = self.order[label]
        self.put(ids, vectors, orders)
        self.next_order = max(self.next_order, fresh)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove ids (unknown ids are ignored): tombstones, their vectors zeroed."""
        self._bury([self.keys.pop(key) for key in ids if key in self.keys])

    def _bury(self, labels: list[int]) -> None:
        if not labels:
            return
        for label in labels:
            name = self.names[label]
            if name is not None and self.keys.get(name) == label:
                del self.keys[name]
            self.names[label] = None
        self.alive[labels] = False
        self.matrix()[labels] = 0.0  # no removed vector survives here, nor in a saved copy
        self.removed += len(labels)
        self._selector = None

    def needs_rebuild(self) -> bool:
        """Whether tombstones are so many that the graph should be rebuilt from the live vectors."""
        return self.removed > max(REBUILD_MIN, REBUILD_FRACTION * len(self.keys))

    def _params(self, limit: int) -> Any:
        faiss = faiss_module()
        params = faiss.SearchParametersHNSW()
        params.efSearch = max(self.ef_search, limit)
        if self.removed:
            if self._selector is None:
                bits = np.packbits(self.alive[:len(self.names)], bitorder="little")
                self._selector = (faiss.IDSelectorBitmap(len(self.names), faiss.swig_ptr(bits)), bits)
            params.sel = self._selector[0]
        return params

    def search(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` ids nearest ``vector`` found by the graph, best first, as ``(id, score)``."""
        if limit <= 0 or not self.keys:
            return []
        vector = np.ascontiguousarray(vector, dtype=np.float32)
        count = min(limit, len(self.keys))
        labels = self.graph.search(vector[None, :], count, params=self._params(count))[1][0]
        labels = labels[labels >= 0]
        labels = labels[self.alive[labels]]
        if not len(labels):
            return []
        scores = self.matrix()[labels] @ vector
        best = np.lexsort((self.order[labels], -scores))
        return [(self.names[labels[i]], float(scores[i])) for i in best]

    def similarity(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Exact cosine similarity of ``vector`` to each of ``ids`` held here (others left out)."""
        found = [(key, self.keys[key]) for key in ids if key in self.keys]
        if not found:
            return {}
        scores = self.matrix()[[label for _, label in found]] @ vector
        return {key: float(score) for (key, _), score in zip(found, scores, strict=True)}

    def ids(self) -> set[str]:
        """The ids held."""
        return set(self.keys)

    def snapshot(self) -> list[str]:
        """The ids held, in rank order (what a rebuild starts from)."""
        labels = np.fromiter(self.keys.values(), dtype=np.int64, count=len(self.keys))
        return [self.names[label] for label in labels[np.argsort(self.order[labels], kind="stable")]]

    def take(self, ids: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Of ``ids``, those held, with a copy of their vectors and their ranks."""
        present = [key for key in ids if key in self.keys]
        labels = np.array([self.keys[key] for key in present], dtype=np.int64)
        return present, self.matrix()[labels].copy(), self.order[labels].copy()

    def export(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Live ids in rank order, their float32 vectors and ranks."""
        return self.take(self.snapshot())
