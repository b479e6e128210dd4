"""One partition of :class:`~tiers.indexes.numpy_index.NumpyVectorIndex`: a growable float32 matrix
of vectors, their string ids and insertion ranks (for ties), and — once the partition is large
enough to be searched approximately — a row-aligned matrix of binary codes
(:mod:`tiers.indexes.binary_codes`).

A search is exact (one matrix-vector product in single-threaded slices, then a partial sort) or,
with codes, an exhaustive Hamming scan for the ``depth`` nearest codes whose vectors are then
scored exactly. Either way scores are dot products and ties go to the earlier inserted id. Not
thread-safe on its own (the index that holds it locks).

    >>> part = Partition(2)
    >>> part.upsert(["a", "b"], np.array([[1, 0], [0.6, 0.8]], dtype=np.float32))
    >>> [(key, round(score, 2)) for key, score in part.search(np.array([1, 0], dtype=np.float32), 5)]
    [('a', 1.0), ('b', 0.6)]
    >>> part.approximate(True); part.search(np.array([0, 1], dtype=np.float32), 1, depth=1)[0][0]
    'b'
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tiers.indexes import binary_codes

__all__ = ["Partition"]

# Scores are computed in slices of at most this many matrix elements. OpenBLAS hands a
# larger matrix-vector product to a second thread, and on a busy 2-core machine that
# hand-off alone costs ~8 ms per call; one thread is as fast here (the product is
# memory-bound) and its latency stays predictable.
_CHUNK_ELEMENTS = 1 << 18


def _grown(array: np.ndarray, capacity: int, size: int) -> np.ndarray:
    grown = np.empty((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[:size] = array[:size]
    return grown


class Partition:
    """Vectors of one partition; ``codes`` is ``None`` while it is searched exactly."""

    __slots__ = ("matrix", "order", "ids", "rows", "next_order", "codes")

    def __init__(self, dim: int) -> None:
        self.matrix = np.empty((16, dim), dtype=np.float32)
        self.order = np.empty(16, dtype=np.int64)  # insertion sequence, for ties
        self.ids: list[str] = []
        self.rows: dict[str, int] = {}
        self.next_order = 0
        self.codes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    @classmethod
    def adopt(cls, ids: list[str], vectors: np.ndarray, order: np.ndarray | None = None, *,
              next_order: int | None = None, codes: np.ndarray | None = None) -> Partition:
        """A partition of distinct ``ids`` whose matrix is ``vectors`` itself (no copy; a loaded
        partition's may be memory-mapped), ranked by ``order`` (default: as listed)."""
        part = cls(vectors.shape[1])
        part.matrix = vectors
        part.order = np.arange(len(ids), dtype=np.int64) if order is None else order
        part.ids, part.rows = list(ids), {key: row for row, key in enumerate(ids)}
        part.next_order = len(ids) if next_order is None else next_order
        part.codes = codes
        return part

    def reserve(self, size: int) -> None:
        """Room for ``size`` vectors (a memory-mapped matrix is copied into memory when it grows)."""
        if size > len(self.matrix):
            # doubling while small; by a quarter once large (a 300k x 384 matrix is 460 MB)
            capacity = max(size, 2 * len(self.matrix) if len(self.matrix) < 65_536 else len(self.matrix) * 5 // 4)
            held = len(self.ids)
            self.matrix, self.order = _grown(self.matrix, capacity, held), _grown(self.order, capacity, held)
            if self.codes is not None:
                self.codes = _grown(self.codes, capacity, held)

    def approximate(self, on: bool) -> None:
        """Keep binary codes of every vector and search them (``on``), or drop them."""
        if not on:
            self.codes = None
        elif self.codes is None:
            codes = np.empty((len(self.matrix), binary_codes.BITS // 8), dtype=np.uint8)
            codes[:len(self.ids)] = binary_codes.encode(self.matrix[:len(self.ids)])
            self.codes = codes

    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add vectors, replacing those of ids already present (they keep their rank). An id
        given twice gets its last vector and the rank of its first place."""
        last = {key: i for i, key in enumerate(ids)}
        if len(last) < len(ids):
            ids, vectors = list(last), vectors[list(last.values())]
        self.reserve(len(self.ids) + len(ids))
        written = np.empty(len(ids), dtype=np.int64)
        for i, key in enumerate(ids):
            row = self.rows.get(key)
            if row is None:
                row = self.rows[key] = len(self.ids)
                self.ids.append(key)
                self.order[row] = self.next_order
                self.next_order += 1
            written[i] = row
        self.matrix[written] = vectors
        if self.codes is not None:
            self.codes[written] = binary_codes.encode(vectors)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove ids (unknown ids are ignored); the last row moves into each hole and the row it
        leaves is zeroed, so no removed vector stays in memory (nor in a saved copy)."""
        for key in ids:
            row = self.rows.pop(key, None)
            if row is None:
                continue
            last = len(self.ids) - 1
            moved = self.ids.pop()
            if row != last:
                self.ids[row] = moved
                self.rows[moved] = row
                self.matrix[row] = self.matrix[last]
                self.order[row] = self.order[last]
                if self.codes is not None:
                    self.codes[row] = self.codes[last]
            self.matrix[last] = 0.0

    def _scores(self, vector: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Scores of every held vector, or of those in ``rows``, a slice at a time (one thread)."""
        size = len(self.ids) if rows is None else len(rows)
        scores = np.empty(size, dtype=np.float32)
        step = max(1, _CHUNK_ELEMENTS // len(vector))
        for start in range(0, size, step):
            stop = min(size, start + step)
            block = self.matrix[start:stop] if rows is None else self.matrix[rows[start:stop]]
            np.matmul(block, vector, out=scores[start:stop])
        return scores

    def search(self, vector: np.ndarray, limit: int, *, depth: int = 2000) -> list[tuple[str, float]]:
        """The ``limit`` ids most similar to ``vector``, best first, as ``(id, score)``: exact, or
        with codes the best of the ``max(depth, limit)`` nearest codes."""
        size = len(self.ids)
        if limit <= 0 or not size:
            return []
        if self.codes is not None and max(depth, limit) < size:
            code = binary_codes.encode(vector[None, :])[0]
            rows = np.sort(binary_codes.nearest(self.codes[:size], code, max(depth, limit)))  # in file order
            scores = self._scores(vector, rows)
            best = np.lexsort((self.order[rows], -scores))[:limit]
            return [(self.ids[rows[i]], float(scores[i])) for i in best]
        scores = self._scores(vector)
        if limit < size:  # keep everything tied with the limit-th score, then sort
            kth = np.partition(scores, size - limit)[size - limit]
            candidates = np.flatnonzero(scores >= kth)
        else:
            candidates = np.arange(size)
        top = candidates[np.lexsort((self.order[candidates], -scores[candidates]))][:limit]
        return [(self.ids[row], float(scores[row])) for row in top]

    def similarity(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of ``ids`` held here (others left out)."""
        found = [(key, self.rows[key]) for key in ids if key in self.rows]
        if not found:
            return {}
        scores = self.matrix[[row for _, row in found]] @ vector
        return {key: float(score) for (key, _), score in zip(found, scores, strict=True)}
