"""An in-process vector index: one float32 matrix per partition, exact; large partitions
(``approximate_above`` vectors and more) switch to an approximate HNSW graph
(:class:`tiers.hnsw_index.HnswPartition`, usearch).

Re-exported by :mod:`tiers.vectors`. An exact search is one matrix-vector product (in
single-threaded slices) and a partial sort; it is bound by memory bandwidth: about
1.5 ms at 10,000 x 384 and 15 ms at 100,000 x 384 on a 2-core machine. An approximate
search walks the graph at breadth ``ef_search`` (``benchmarks/ann_index.py``).

    >>> index = NumpyVectorIndex()
    >>> index.upsert("facts/ada", ["a"], np.array([[1.0, 0.0]]))
    >>> index.ids("facts/ada")
    {'a'}
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

from scoring.checks import check_int, check_str_list
from tiers import hnsw_store
from tiers.hnsw_index import INSTALL_HINT, HnswPartition, hnsw_available
from unified_memory.errors import invalid

__all__ = ["NumpyVectorIndex"]

_log = logging.getLogger(__name__)

# Scores are computed in slices of at most this many matrix elements. OpenBLAS hands a
# larger matrix-vector product to a second thread, and on a busy 2-core machine that
# hand-off alone costs ~8 ms per call; one thread is as fast here (the product is
# memory-bound) and its latency stays predictable.
_CHUNK_ELEMENTS = 1 << 18


class _Partition:
    __slots__ = ("matrix", "order", "ids", "rows", "next_order")

    def __init__(self, dim: int) -> None:
        self.matrix = np.empty((16, dim), dtype=np.float32)
        self.order = np.empty(16, dtype=np.int64)  # insertion sequence, for ties
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.next_order = 0

    def __len__(self) -> int:
        return len(self.ids)

    def reserve(self, size: int) -> None:
        if size > len(self.matrix):
            capacity = max(size, 2 * len(self.matrix))
            matrix = np.empty((capacity, self.matrix.shape[1]), dtype=np.float32)
            matrix[:len(self.ids)] = self.matrix[:len(self.ids)]
            order = np.empty(capacity, dtype=np.int64)
            order[:len(self.ids)] = self.order[:len(self.ids)]
            self.matrix, self.order = matrix, order


def _dim(part: _Partition | HnswPartition) -> int:
    return part.dim if isinstance(part, HnswPartition) else part.matrix.shape[1]


def _exact(part: HnswPartition) -> _Partition:
    """An exact partition holding what an HNSW partition holds (same tie ranks)."""
    ids, vectors, orders = part.export()
    exact = _Partition(part.dim)
    exact.reserve(len(ids))
    exact.matrix[:len(ids)], exact.order[:len(ids)] = vectors, orders
    exact.ids, exact.rows = ids, {key: row for row, key in enumerate(ids)}
    exact.next_order = part.next_order
    return exact


class NumpyVectorIndex:
    """An in-process :class:`~unified_memory.protocols.VectorIndex`: one growable float32
    matrix per partition; a search is one matrix-vector product and a partial sort. Scores
    are dot products (cosine, for the L2-normalised vectors it is given); ties go to the
    earlier inserted id. Not persistent: rebuilt in every process.

    A partition that reaches ``approximate_above`` vectors (``None``: never) becomes an HNSW
    graph (usearch; ``connectivity``, ``ef_construction``, ``ef_search``) searched approximately,
    its results re-scored exactly and tie-ordered as here; it turns exact again below half that
    size. ``similarity`` stays exact. Without usearch installed, every partition stays exact
    (correct, slower; logged once). Given a ``directory``, HNSW partitions built or changed
    here are saved there at :meth:`close` and loaded on first use (:mod:`tiers.hnsw_store`).

    >>> index = NumpyVectorIndex()
    >>> index.upsert("facts/ada", ["a", "b"], np.array([[1, 0], [0.6, 0.8]], dtype=np.float32))
    >>> [(key, round(score, 2)) for key, score in index.search("facts/ada", np.array([1, 0]), 5)]
    [('a', 1.0), ('b', 0.6)]
    >>> index.search("facts/bob", np.array([1, 0]), 5)
    []
    """

    persistent = False

    def __init__(self, *, approximate_above: int | None = 100_000, ef_search: int = 128,
                 connectivity: int = 32, ef_construction: int = 200,
                 directory: str | None = None) -> None:
        if approximate_above is not None:
            check_int("approximate_above", approximate_above, minimum=2)
        self.approximate_above = approximate_above
        self.ef_search = check_int("ef_search", ef_search, minimum=1)
        self.connectivity = check_int("connectivity", connectivity, minimum=2)
        self.ef_construction = check_int("ef_construction", ef_construction, minimum=1)
        self._parts: dict[str, _Partition | HnswPartition] = {}
        self._lock = threading.RLock()
        self._warned = False
        self.directory = directory
        self._looked: set[str] = set()  # partitions whose saved copy was looked for
        self._changed: set[str] = set()  # HNSW partitions built or changed here: saved at close

    def _get(self, partition: str) -> _Partition | HnswPartition | None:
        part = self._parts.get(partition)
        if part is None and self.directory is not None and partition not in self._looked:
            self._looked.add(partition)
            if hnsw_available():
                part = hnsw_store.load(self.directory, partition)
                if part is not None:
                    self._parts[partition] = part
        return part

    def _wants_approximate(self, size: int) -> bool:
        if self.approximate_above is None or size < self.approximate_above:
            return False
        if hnsw_available():
            return True
        if not self._warned:
            self._warned = True
            _log.warning("a vector partition holds %d vectors, past approximate_above=%d: it stays exact "
                         "(slower searches) because %s", size, self.approximate_above, INSTALL_HINT)
        return False

    def _approximate(self, ids: list[str], vectors: np.ndarray, orders: np.ndarray) -> HnswPartition:
        return HnswPartition.build(ids, vectors, orders, connectivity=self.connectivity,
                                   ef_construction=self.ef_construction, ef_search=self.ef_search)

    def upsert(self, partition: str, ids: Sequence[str], vectors: object) -> None:
        """Add vectors, replacing those of ids already present (they keep their rank in ties)."""
        ids = check_str_list("ids", ids)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(ids):
            raise invalid("vectors", f"expected shape ({len(ids)}, dim), got {vectors.shape}")
        if not ids:
            return
        with self._lock:
            part = self._get(partition)
            if part is not None and not len(part):  # empty: starts afresh (another model may have other dims)
                del self._parts[partition]
                part = None
            if part is not None and vectors.shape[1] != _dim(part):
                raise invalid("vectors", f"partition {partition!r} holds {_dim(part)}-dimensional "
                                         f"vectors, got {vectors.shape[1]}")
            if isinstance(part, HnswPartition) or (
                    (part is None or not part.ids) and self._wants_approximate(len(ids))):  # straight to HNSW
                last = {key: i for i, key in enumerate(ids)}  # a repeated id: its last vector, first rank
                if len(last) < len(ids):
                    ids, vectors = list(last), vectors[list(last.values())]
                self._changed.add(partition)
                if isinstance(part, HnswPartition):
                    part.upsert(ids, vectors)
                else:
                    first = part.next_order if part is not None else 0
                    self._parts[partition] = self._approximate(ids, vectors, np.arange(first, first + len(ids)))
                return
            if part is None:
                part = self._parts[partition] = _Partition(vectors.shape[1])
            part.reserve(len(part.ids) + len(ids))
            for i, key in enumerate(ids):
                row = part.rows.get(key)
                if row is None:
                    row = part.rows[key] = len(part.ids)
                    part.ids.append(key)
                    part.order[row] = part.next_order
                    part.next_order += 1
                part.matrix[row] = vectors[i]
            if self._wants_approximate(len(part.ids)):
                size = len(part.ids)
                hnsw = self._approximate(part.ids, part.matrix[:size], part.order[:size])
                hnsw.next_order = max(hnsw.next_order, part.next_order)
                self._parts[partition] = hnsw
                self._changed.add(partition)

    def delete(self, partition: str, ids: Sequence[str]) -> None:
        """Remove ids (unknown ids are ignored)."""
        ids = check_str_list("ids", ids)
        with self._lock:
            part = self._get(partition)
            if part is None:
                return
            if isinstance(part, HnswPartition):
                self._changed.add(partition)
                part.delete(ids)
                if self.approximate_above is not None and len(part) < self.approximate_above // 2:  # small again: exact
                    self._parts[partition] = _exact(part)
                return
            for key in ids:
                row = part.rows.pop(key, None)
                if row is None:
                    continue
                last = len(part.ids) - 1
                moved = part.ids.pop()
                if row != last:  # move the last row into the hole
                    part.ids[row] = moved
                    part.rows[moved] = row
                    part.matrix[row] = part.matrix[last]
                    part.order[row] = part.order[last]

    def search(self, partition: str, vector: object, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` ids most similar to ``vector``, best first, as ``(id, score)``."""
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        with self._lock:
            part = self._get(partition)
            if part is None or limit <= 0 or not len(part):
                return []
            if vector.shape[0] != _dim(part):
                raise invalid("vector", f"expected {_dim(part)} dimensions, got {vector.shape[0]}")
            if isinstance(part, HnswPartition):
                part.ef_search = self.ef_search
                return part.search(vector, limit)
            size = len(part.ids)
            if vector.shape[0] != part.matrix.shape[1]:
                raise invalid("vector", f"expected {part.matrix.shape[1]} dimensions, got {vector.shape[0]}")
            scores = np.empty(size, dtype=np.float32)
            step = max(1, _CHUNK_ELEMENTS // len(vector))
            for start in range(0, size, step):
                stop = min(size, start + step)
                np.matmul(part.matrix[start:stop], vector, out=scores[start:stop])
            if limit < size:  # keep everything tied with the limit-th score, then sort
                kth = np.partition(scores, size - limit)[size - limit]
                rows = np.flatnonzero(scores >= kth)
            else:
                rows = np.arange(size)
            best = rows[np.lexsort((part.order[rows], -scores[rows]))][:limit]
            return [(part.ids[row], float(scores[row])) for row in best]

    def similarity(self, partition: str, vector: object, ids: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of ``ids`` held in the partition (others are left out).

        >>> index = NumpyVectorIndex(); index.upsert("p", ["a"], np.array([[1.0, 0.0]]))
        >>> index.similarity("p", np.array([0.6, 0.8]), ["a", "zz"])
        {'a': 0.6000000238418579}
        """
        ids = check_str_list("ids", ids)
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        with self._lock:
            part = self._get(partition)
            if part is None:
                return {}
            if isinstance(part, HnswPartition):
                if vector.shape[0] != part.dim and any(key in part.keys for key in ids):
                    raise invalid("vector", f"expected {part.dim} dimensions, got {vector.shape[0]}")
                return part.similarity(vector, ids)
            rows = [(key, part.rows[key]) for key in ids if key in part.rows]
            if not rows:
                return {}
            if vector.shape[0] != part.matrix.shape[1]:
                raise invalid("vector", f"expected {part.matrix.shape[1]} dimensions, got {vector.shape[0]}")
            scores = part.matrix[[row for _, row in rows]] @ vector
            return {key: float(score) for (key, _), score in zip(rows, scores, strict=True)}

    def ids(self, partition: str) -> set[str]:
        """The ids held in a partition."""
        with self._lock:
            part = self._get(partition)
            if part is None:
                return set()
            return part.ids() if isinstance(part, HnswPartition) else set(part.ids)

    def drop(self, partition: str) -> None:
        """Forget a partition (and delete its saved copy)."""
        with self._lock:
            self._parts.pop(partition, None)
            self._changed.discard(partition)
            self._looked.add(partition)
            if self.directory is not None:
                hnsw_store.delete(self.directory, partition)

    def close(self) -> None:
        """Save the HNSW partitions built or changed here (given a ``directory``), then forget
        every partition. A save that fails is logged: the next process rebuilds instead."""
        with self._lock:
            directory = self.directory
            for partition in sorted(self._changed):
                part = self._parts.get(partition)
                if directory is None:
                    break
                try:
                    if isinstance(part, HnswPartition):
                        hnsw_store.save(directory, partition, part)
                    else:  # exact again (or dropped): a saved graph would only be stale
                        hnsw_store.delete(directory, partition)
                except OSError as exc:
                    _log.warning("could not save the vector index of %s in %s: %s", partition, self.directory, exc)
            self._changed.clear()
            self._looked.clear()
            self._parts.clear()
