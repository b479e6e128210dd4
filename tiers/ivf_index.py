"""An approximate inverted-file (IVF) partition, for the large partitions of
:class:`~tiers.numpy_index.NumpyVectorIndex`.

A two-level coarse quantizer (:class:`scoring.clustering.Quantizer`, about
``lists_per_sqrt · sqrt(n)`` lists) groups the vectors by nearest centroid; rows are stored
sorted by list (one contiguous slice each) as bfloat16 bit patterns, half the memory of float32
and widened exactly to float32 by a shift (numpy's float16 conversion is several times slower).
A search scores the centroids, then exactly scores every row of the ``nprobe`` best lists.
Rows added after the build go to a tail (each with its list), scanned the same way; deletes
mark rows dead. The tail is packed into the lists when it outgrows 1/16 of them, dead rows are
dropped when they pass a quarter, and the quantizer is retrained when the partition has doubled
since it was trained: each amortised, never on every write. Not thread-safe on its own (the
index that holds it locks).

    >>> rng = np.random.default_rng(0)
    >>> vectors = rng.standard_normal((300, 8)).astype(np.float32)
    >>> vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    >>> part = IvfPartition.build([f"v{i}" for i in range(300)], vectors, np.arange(300), nprobe=100)
    >>> part.search(vectors[7], 1)[0][0], len(part)
    ('v7', 300)
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import cast

import numpy as np

from scoring.clustering import Quantizer

__all__ = ["IvfPartition", "to_bfloat16", "from_bfloat16"]

_CHUNK_ELEMENTS = 1 << 18  # elements per scoring slice: one BLAS thread (see tiers.numpy_index)
_SAMPLE = 65_536  # training sample of the quantizer
_BLOCK = 65_536  # rows assigned at a time (bounds the float32 scratch memory)
_HIGH = 1 if sys.byteorder == "little" else 0  # which uint16 of a float32 holds sign, exponent, mantissa top
_ROUTE_BUDGET = 2_000_000  # coarse centroids a row may join (Quantizer.assign): budget / n, 2 to 8 (at 1M,
# 4 routes build ~1.6x slower for recall@10 0.99 instead of 0.97: benchmarks/vector_index.py, clustered)
_TAIL_MIN = 4096  # the tail is packed into the lists past max(_TAIL_MIN, packed rows / 16)
_DEAD_MIN = 1024  # dead rows are dropped past max(_DEAD_MIN, rows / 4)


def to_bfloat16(vectors: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float32 rows as bfloat16 bit patterns (uint16): the high half of each float32, rounded
    (half away from zero), into ``out`` if given.

    >>> to_bfloat16(np.array([[1.0, -2.5, 1.00390625]], dtype=np.float32)).tolist()
    [[16256, 49184, 16257]]
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    out = np.empty(vectors.shape, dtype=np.uint16) if out is None else out
    for start in range(0, len(vectors), 4096):  # small temporaries: reused, no fresh pages per block
        rounded = np.ascontiguousarray(vectors[start:start + 4096]).view(np.uint32) + np.uint32(0x8000)
        out[start:start + 4096] = rounded.view(np.uint16).reshape(*rounded.shape, 2)[..., _HIGH]
    return out


def from_bfloat16(bits: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """bfloat16 bit patterns back to float32 (exact), into ``out`` if given.

    >>> from_bfloat16(to_bfloat16(np.array([[0.5, 3.0]], dtype=np.float32))).tolist()
    [[0.5, 3.0]]
    """
    if out is None:
        out = np.empty(bits.shape, dtype=np.float32)
    np.left_shift(bits, 16, out=out.view(np.uint32), dtype=np.uint32)
    return out


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """Training and assignment are many mid-sized products: on a busy 2-core machine one BLAS
    thread is 2-4x faster than OpenBLAS handing each to a second thread."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]  # installed with scikit-learn
    except ImportError:  # pragma: no cover - optional speed-up
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


class IvfPartition:
    """One partition's vectors in an inverted file: approximate top-k by dot product.

    ``orders`` are the insertion ranks that break score ties (lower first). With ``nprobe`` at
    least the number of lists, a search scores every row, so it is exact (up to the bfloat16
    rounding of the stored vectors, about 3 significant digits per component).

    >>> part = IvfPartition.build(["a", "b", "c"], np.eye(3, dtype=np.float32), np.arange(3), nprobe=8)
    >>> part.upsert(["d"], np.array([[0.0, 1.0, 0.0]], dtype=np.float32)); part.delete(["a"])
    >>> part.search(np.array([0.0, 1.0, 0.0], dtype=np.float32), 2), sorted(part.ids())
    ([('b', 1.0), ('d', 1.0)], ['b', 'c', 'd'])
    """

    def __init__(self, dim: int, *, nprobe: int, lists_per_sqrt: float = 4.0, seed: int = 0) -> None:
        self.dim, self.nprobe, self.lists_per_sqrt, self.seed = dim, nprobe, lists_per_sqrt, seed
        self.next_order = self.trained = 0
        self.routes = 2
        self.quantizer: Quantizer | None = None
        self._set_rows(np.empty((0, dim), dtype=np.uint16), np.empty(0, dtype=np.int32), [], np.empty(0, np.int64))

    @classmethod
    def build(cls, ids: Sequence[str], vectors: np.ndarray, orders: np.ndarray, *, nprobe: int,
              lists_per_sqrt: float = 4.0, seed: int = 0) -> IvfPartition:
        """A partition over distinct ``ids`` and their float32 ``vectors`` (not kept: stored as bfloat16).

        >>> IvfPartition.build(["a"], np.ones((1, 4), dtype=np.float32), np.array([5]), nprobe=1).next_order
        6
        """
        vectors = np.asarray(vectors, dtype=np.float32)
        part = cls(vectors.shape[1], nprobe=nprobe, lists_per_sqrt=lists_per_sqrt, seed=seed)
        orders = np.asarray(orders, dtype=np.int64)
        part.next_order = int(orders.max()) + 1 if len(orders) else 0
        part._train(lambda rows: vectors[rows], list(ids), orders)
        return part

    # -- storage ------------------------------------------------------------------------------------

    @property
    def _quantizer(self) -> Quantizer:
        quantizer = self.quantizer
        assert quantizer is not None  # trained by build(), before any other use
        return quantizer

    def _set_rows(self, data: np.ndarray, labels: np.ndarray, ids: list[str], orders: np.ndarray) -> None:
        """Hold ``len(ids)`` packed rows (sorted by list); ``data`` may be longer (room to append)."""
        size = len(ids)
        capacity = max(len(data), size + size // 4 + 1024)
        if len(data) < capacity:
            self.data = np.empty((capacity, self.dim), dtype=np.uint16)
            self.data[:size] = data[:size]
        else:
            self.data = data
        self.labels = np.empty(capacity, dtype=np.int32)
        self.labels[:size] = labels
        self.order = np.empty(capacity, dtype=np.int64)
        self.order[:size] = orders
        self.alive = np.zeros(capacity, dtype=bool)
        self.alive[:size] = True
        self.keys = cast(list[str | None], ids)  # the list becomes ours: a removed row's key turns None
        self.rows = {key: row for row, key in enumerate(ids)}
        self.size = self.packed = size
        lists = self.quantizer.lists if self.quantizer is not None else 0
        self.offsets = np.searchsorted(labels, np.arange(lists + 1)).astype(np.int64)
        self.dead = 0

    def _train(self, fetch: Callable[[np.ndarray], np.ndarray], ids: Sequence[str], orders: np.ndarray) -> None:
        """(Re)train the quantizer on rows ``fetch(indices) -> float32`` and pack them by list."""
        n = len(ids)
        self.routes = max(2, min(8, _ROUTE_BUDGET // max(n, 1)))
        with _one_blas_thread():
            rng = np.random.default_rng(self.seed)
            sample = np.sort(rng.choice(n, min(n, _SAMPLE), replace=False))
            lists = max(1, min(n, round(self.lists_per_sqrt * math.sqrt(n))))
            quantizer = self.quantizer = Quantizer.train(fetch(sample), lists, seed=self.seed)
            with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:  # products drop the GIL
                blocks = pool.map(lambda start: quantizer.assign(
                    fetch(np.arange(start, min(n, start + _BLOCK))), routes=self.routes), range(0, n, _BLOCK))
                labels = np.concatenate([*blocks, np.empty(0, np.int32)])
        self._pack(fetch, labels, ids, orders)

    def _pack(self, fetch: Callable[[np.ndarray], np.ndarray], labels: np.ndarray, ids: Sequence[str],
              orders: np.ndarray) -> None:
        by_list = np.argsort(labels, kind="stable")
        position = np.empty(len(ids), dtype=np.int64)
        position[by_list] = np.arange(len(ids))
        data = np.empty((len(ids) + len(ids) // 4 + 1024, self.dim), dtype=np.uint16)  # untouched tail: no RSS
        for start in range(0, len(ids), 8192):  # read in order, scatter to the lists (cheaper than a gather)
            block = np.arange(start, min(len(ids), start + 8192))
            data[position[block]] = to_bfloat16(fetch(block))
        self.trained = len(ids)
        self._set_rows(data, labels[by_list], [ids[row] for row in by_list], orders[by_list])

    def _repack(self, retrain: bool) -> None:
        """Drop dead rows and sort the tail into the lists (retraining the quantizer if asked)."""
        keep = np.flatnonzero(self.alive[:self.size])
        data, ids = self.data, self._live_keys(keep)

        def fetch(rows: np.ndarray) -> np.ndarray:
            return from_bfloat16(data[keep[rows]])

        if retrain:
            self._train(fetch, ids, self.order[keep])
        else:
            trained = self.trained
            self._pack(fetch, self.labels[keep], ids, self.order[keep])
            self.trained = trained

    def _live_keys(self, rows: np.ndarray) -> list[str]:
        """The ids of live ``rows`` (a dead row's key is ``None``; a live row's never is)."""
        keys = self.keys
        return [cast(str, keys[row]) for row in rows]

    def __len__(self) -> int:
        return len(self.rows)

    # -- writes -------------------------------------------------------------------------------------

    def upsert(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Add distinct ``ids``; an id already held gets the new vector and keeps its tie rank.

        >>> part = IvfPartition.build(["a"], np.ones((1, 2), dtype=np.float32), np.arange(1), nprobe=1)
        >>> part.upsert(["a"], np.array([[2.0, 0.0]], dtype=np.float32)); part.search(np.array([1.0, 0.0]), 3)
        [('a', 2.0)]
        """
        count = len(ids)
        labels = self._quantizer.assign(vectors, routes=self.routes)
        if self.size + count > len(self.data):
            self._grow(self.size + count)
        start = self.size
        for i, key in enumerate(ids):
            old = self.rows.get(key)
            if old is None:
                self.order[start + i] = self.next_order
                self.next_order += 1
            else:
                self.order[start + i] = self.order[old]
                self._kill(old)
            self.rows[key] = start + i
        self.keys.extend(ids)
        self.data[start:start + count] = to_bfloat16(vectors)
        self.labels[start:start + count] = labels
        self.alive[start:start + count] = True
        self.size += count
        if len(self.rows) >= 2 * self.trained:
            self._repack(retrain=True)
        elif self.size - self.packed > max(_TAIL_MIN, self.packed // 16):
            self._repack(retrain=False)

    def _grow(self, size: int) -> None:
        capacity = max(size, len(self.data) + len(self.data) // 4 + 1024)
        for name in ("data", "labels", "order", "alive"):
            old = getattr(self, name)
            new = np.zeros((capacity, *old.shape[1:]), dtype=old.dtype)
            new[:self.size] = old[:self.size]
            setattr(self, name, new)

    def _kill(self, row: int) -> None:
        self.alive[row] = False
        self.keys[row] = None
        self.dead += 1

    def delete(self, ids: Sequence[str]) -> None:
        """Remove ids (unknown ones are ignored); their rows are dropped at the next re-pack."""
        for key in ids:
            row = self.rows.pop(key, None)
            if row is not None:
                self._kill(row)
        if self.dead > max(_DEAD_MIN, self.size // 4):
            self._repack(retrain=False)

    # -- reads --------------------------------------------------------------------------------------

    def _score(self, rows: np.ndarray | slice, vector: np.ndarray, out: np.ndarray, scratch: np.ndarray) -> None:
        """Scores of stored ``rows`` (a slice, or an index array) into ``out``, in one-thread slices."""
        for start in range(0, len(out), len(scratch)):
            stop = min(len(out), start + len(scratch))
            block = self.data[rows.start + start:rows.start + stop] if isinstance(rows, slice) else \
                self.data[rows[start:stop]]
            np.matmul(from_bfloat16(block, scratch[:stop - start]), vector, out=out[start:stop])

    def _candidates(self, vector: np.ndarray, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        centroids = self._quantizer.centroids
        closeness = np.empty(len(centroids), dtype=np.float32)
        step = max(1, _CHUNK_ELEMENTS // self.dim)
        for start in range(0, len(centroids), step):
            np.matmul(centroids[start:start + step], vector, out=closeness[start:start + step])
        if nprobe < len(centroids):
            probe = np.sort(np.argpartition(-closeness, nprobe - 1)[:nprobe])
        else:
            probe = np.arange(len(centroids))
        starts, stops = self.offsets[probe], self.offsets[probe + 1]
        tail = self.packed + np.flatnonzero(np.isin(self.labels[self.packed:self.size], probe))
        total = int((stops - starts).sum()) + len(tail)
        rows, scores = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.float32)
        scratch = np.empty((step, self.dim), dtype=np.float32)
        at = 0
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
            if stop > start:
                rows[at:at + stop - start] = np.arange(start, stop)
                self._score(slice(start, stop), vector, scores[at:at + stop - start], scratch)
                at += stop - start
        rows[at:] = tail
        self._score(tail, vector, scores[at:], scratch)
        keep = self.alive[rows]
        return rows[keep], scores[keep]

    def search(self, vector: np.ndarray, limit: int, *, nprobe: int | None = None) -> list[tuple[str, float]]:
        """The best ``limit`` ``(id, score)`` among the rows of the ``nprobe`` (default: the
        partition's) lists nearest to ``vector`` (more lists when those hold fewer than ``limit``),
        best first, ties by rank."""
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        if limit <= 0 or not self.rows:
            return []
        nprobe = nprobe or self.nprobe
        while True:
            rows, scores = self._candidates(vector, nprobe)
            if len(rows) >= limit or nprobe >= self._quantizer.lists:
                break
            nprobe *= 2
        if limit < len(rows):  # keep everything tied with the limit-th score, then sort
            kth = np.partition(scores, len(rows) - limit)[len(rows) - limit]
            chosen = np.flatnonzero(scores >= kth)
            rows, scores = rows[chosen], scores[chosen]
        best = np.lexsort((self.order[rows], -scores))[:limit]
        keys = self.keys
        return [(cast(str, keys[rows[i]]), float(scores[i])) for i in best]  # live rows: never None

    def similarity(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Dot product of ``vector`` with each held id's stored vector (others are left out)."""
        found = [(key, self.rows[key]) for key in ids if key in self.rows]
        if not found:
            return {}
        scores = from_bfloat16(self.data[[row for _, row in found]]) @ np.asarray(vector, dtype=np.float32)
        return {key: float(score) for (key, _), score in zip(found, scores, strict=True)}

    def ids(self) -> set[str]:
        """The ids held."""
        return set(self.rows)

    def export(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """``(ids, float32 vectors, orders)`` of the live rows, in insertion rank order."""
        live = np.flatnonzero(self.alive[:self.size])
        live = live[np.argsort(self.order[live], kind="stable")]
        return self._live_keys(live), from_bfloat16(self.data[live]), self.order[live]
