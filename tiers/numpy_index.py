"""An exact in-process vector index: one float32 matrix per partition.

Re-exported by :mod:`tiers.vectors`. A search is one matrix-vector product (in
single-threaded slices) and a partial sort; it is bound by memory bandwidth: about
1.5 ms at 10,000 x 384 and 15 ms at 100,000 x 384 on a 2-core machine.

    >>> index = NumpyVectorIndex()
    >>> index.upsert("facts/ada", ["a"], np.array([[1.0, 0.0]]))
    >>> index.ids("facts/ada")
    {'a'}
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from scoring.checks import check_str_list
from unified_memory.errors import invalid

__all__ = ["NumpyVectorIndex"]

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

    def reserve(self, size: int) -> None:
        if size > len(self.matrix):
            capacity = max(size, 2 * len(self.matrix))
            matrix = np.empty((capacity, self.matrix.shape[1]), dtype=np.float32)
            matrix[:len(self.ids)] = self.matrix[:len(self.ids)]
            order = np.empty(capacity, dtype=np.int64)
            order[:len(self.ids)] = self.order[:len(self.ids)]
            self.matrix, self.order = matrix, order


class NumpyVectorIndex:
    """An exact in-process :class:`~unified_memory.protocols.VectorIndex`: one growable
    float32 matrix per partition; a search is one matrix-vector product and a partial
    sort. Scores are dot products (cosine, for the L2-normalised vectors it is given);
    ties go to the earlier inserted id. Not persistent: rebuilt in every process.

    >>> index = NumpyVectorIndex()
    >>> index.upsert("facts/ada", ["a", "b"], np.array([[1, 0], [0.6, 0.8]], dtype=np.float32))
    >>> [(key, round(score, 2)) for key, score in index.search("facts/ada", np.array([1, 0]), 5)]
    [('a', 1.0), ('b', 0.6)]
    >>> index.search("facts/bob", np.array([1, 0]), 5)
    []
    """

    persistent = False

    def __init__(self) -> None:
        self._parts: dict[str, _Partition] = {}
        self._lock = threading.RLock()

    def upsert(self, partition: str, ids: Sequence[str], vectors: object) -> None:
        """Add vectors, replacing those of ids already present (they keep their rank in ties)."""
        ids = check_str_list("ids", ids)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(ids):
            raise invalid("vectors", f"expected shape ({len(ids)}, dim), got {vectors.shape}")
        if not ids:
            return
        with self._lock:
            part = self._parts.get(partition)
            if part is None:
                part = self._parts[partition] = _Partition(vectors.shape[1])
            elif vectors.shape[1] != part.matrix.shape[1]:
                raise invalid("vectors", f"partition {partition!r} holds {part.matrix.shape[1]}-dimensional "
                                         f"vectors, got {vectors.shape[1]}")
            part.reserve(len(part.ids) + len(ids))
            for i, key in enumerate(ids):
                row = part.rows.get(key)
                if row is None:
                    row = part.rows[key] = len(part.ids)
                    part.ids.append(key)
                    part.order[row] = part.next_order
                    part.next_order += 1
                part.matrix[row] = vectors[i]

    def delete(self, partition: str, ids: Sequence[str]) -> None:
        """Remove ids (unknown ids are ignored)."""
        ids = check_str_list("ids", ids)
        with self._lock:
            part = self._parts.get(partition)
            if part is None:
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
            part = self._parts.get(partition)
            if part is None or limit <= 0 or not part.ids:
                return []
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
            part = self._parts.get(partition)
            if part is None:
                return {}
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
            part = self._parts.get(partition)
            return set(part.ids) if part is not None else set()

    def drop(self, partition: str) -> None:
        """Forget a partition."""
        with self._lock:
            self._parts.pop(partition, None)

    def close(self) -> None:
        """Forget every partition."""
        with self._lock:
            self._parts.clear()
