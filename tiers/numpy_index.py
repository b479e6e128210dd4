"""An in-process vector index: one float32 matrix per partition, exact; large partitions
(``approximate_above`` vectors and more) switch to an approximate HNSW graph
(:class:`tiers.hnsw_index.HnswPartition`, faiss), built in the background (:mod:`tiers.hnsw_build`)
and, given a directory, saved there (:mod:`tiers.hnsw_store`).

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
import time
from collections.abc import Sequence

import numpy as np

from scoring.checks import check_int, check_str_list
from tiers import hnsw_store
from tiers.hnsw_build import Build
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
            # doubling while small; by a quarter once large (a 300k x 384 matrix is 460 MB)
            capacity = max(size, 2 * len(self.matrix) if len(self.matrix) < 65_536 else len(self.matrix) * 5 // 4)
            matrix = np.empty((capacity, self.matrix.shape[1]), dtype=np.float32)
            matrix[:len(self.ids)] = self.matrix[:len(self.ids)]
            order = np.empty(capacity, dtype=np.int64)
            order[:len(self.ids)] = self.order[:len(self.ids)]
            self.matrix, self.order = matrix, order

    @classmethod
    def adopt(cls, ids: list[str], vectors: np.ndarray) -> _Partition:
        """A partition of distinct ``ids`` whose matrix is ``vectors`` itself (no copy), ranked in order."""
        part = cls(vectors.shape[1])
        part.matrix, part.order = vectors, np.arange(len(ids), dtype=np.int64)
        part.ids, part.rows = list(ids), {key: row for row, key in enumerate(ids)}
        part.next_order = len(ids)
        return part

    def snapshot(self) -> list[str]:
        """The ids held, in rank order."""
        size = len(self.ids)
        return [self.ids[row] for row in np.argsort(self.order[:size], kind="stable")]

    def take(self, ids: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Of ``ids``, those held, with a copy of their vectors and their ranks."""
        present = [key for key in ids if key in self.rows]
        rows = np.array([self.rows[key] for key in present], dtype=np.int64)
        return present, self.matrix[rows], self.order[rows]


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
    earlier inserted id. Not persistent: rebuilt in every process, or loaded from saved copies.

    A partition that reaches ``approximate_above`` vectors (``None``: never) becomes an HNSW
    graph (faiss; ``connectivity``, ``ef_construction``, ``ef_search``) searched approximately,
    its results re-scored exactly and tie-ordered as here; it turns exact again below half that
    size. The graph is built by a background thread (:mod:`tiers.hnsw_build`) while the partition
    stays exact; :meth:`wait_builds` waits for it. ``similarity`` stays exact. Without faiss
    installed, every partition stays exact (correct, slower; logged once). Given a ``directory``,
    HNSW partitions can be saved there (:meth:`save_partition`, called by
    :class:`tiers.vectors.PartitionedVectors` under the database's write lock) and loaded
    (:meth:`load_saved`); see :mod:`tiers.hnsw_store`.

    >>> index = NumpyVectorIndex()
    >>> index.upsert("facts/ada", ["a", "b"], np.array([[1, 0], [0.6, 0.8]], dtype=np.float32))
    >>> [(key, round(score, 2)) for key, score in index.search("facts/ada", np.array([1, 0]), 5)]
    [('a', 1.0), ('b', 0.6)]
    >>> index.search("facts/bob", np.array([1, 0]), 5)
    []
    """

    persistent = False

    def __init__(self, *, approximate_above: int | None = 100_000, ef_search: int = 128,
                 connectivity: int = 16, ef_construction: int = 100,
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
        self._builds: dict[str, Build] = {}
        self._looked: set[str] = set()  # partitions whose saved copy was looked for
        self._changed: set[str] = set()  # HNSW partitions built or changed since loaded or saved

    def _get(self, partition: str) -> _Partition | HnswPartition | None:
        return self._parts.get(partition)

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

    def _new_hnsw(self, dim: int) -> HnswPartition:
        return HnswPartition(dim, connectivity=self.connectivity, ef_construction=self.ef_construction,
                             ef_search=self.ef_search)

    def _building(self, partition: str) -> Build | None:
        build = self._builds.get(partition)
        return build if build is not None and build.thread.is_alive() else None

    def _start_build(self, partition: str, source: _Partition | HnswPartition) -> None:
        if self._building(partition) is None:
            self._builds[partition] = Build(partition, source, _dim(source), parts=self._parts, lock=self._lock,
                                            make=self._new_hnsw, done=self._built).start()

    def _built(self, build: Build, part: HnswPartition | None) -> None:
        """A build ended (under the lock, in its thread): ``part`` swapped in, or ``None``."""
        if self._builds.get(build.name) is build:
            del self._builds[build.name]
        if part is not None:
            self._changed.add(build.name)
        if build.cancelled:
            return
        current = self._parts.get(build.name)  # replaced meanwhile, or many tombstones since: again
        if isinstance(current, HnswPartition) and current.needs_rebuild() or (
                isinstance(current, _Partition) and self._wants_approximate(len(current.ids))):
            self._start_build(build.name, current)

    def _touch(self, partition: str, ids: list[str]) -> None:
        build = self._builds.get(partition)
        if build is not None:
            build.touch(ids)

    def upsert(self, partition: str, ids: Sequence[str], vectors: object, *, owned: bool = False) -> None:
        """Add vectors, replacing those of ids already present (they keep their rank in ties).

        ``owned``: the caller hands ``vectors`` over (a float32 array nobody else holds): a new
        partition of distinct ids keeps that array as its matrix instead of copying it (the first
        load of 300,000 vectors then holds one 460 MB copy, not two)."""
        ids = check_str_list("ids", ids)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(ids):
            raise invalid("vectors", f"expected shape ({len(ids)}, dim), got {vectors.shape}")
        if not ids:
            return
        with self._lock:
            part = self._get(partition)
            if part is not None and not len(part) and self._building(partition) is None:
                del self._parts[partition]  # empty: starts afresh (another model may have other dims)
                part = None
            if part is not None and vectors.shape[1] != _dim(part):
                raise invalid("vectors", f"partition {partition!r} holds {_dim(part)}-dimensional "
                                         f"vectors, got {vectors.shape[1]}")
            self._touch(partition, ids)
            if isinstance(part, HnswPartition):
                last = {key: i for i, key in enumerate(ids)}  # a repeated id: its last vector, first rank
                if len(last) < len(ids):
                    ids, vectors = list(last), vectors[list(last.values())]
                self._changed.add(partition)
                part.upsert(ids, vectors)
                if part.needs_rebuild():
                    self._start_build(partition, part)
                return
            if part is None and owned and vectors.flags.c_contiguous and vectors.flags.writeable \
                    and len(set(ids)) == len(ids):
                part = self._parts[partition] = _Partition.adopt(ids, vectors)
                if self._wants_approximate(len(part.ids)):
                    self._start_build(partition, part)
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
                self._start_build(partition, part)

    def delete(self, partition: str, ids: Sequence[str]) -> None:
        """Remove ids (unknown ids are ignored)."""
        ids = check_str_list("ids", ids)
        with self._lock:
            part = self._get(partition)
            if part is None:
                return
            self._touch(partition, ids)
            if isinstance(part, HnswPartition):
                self._changed.add(partition)
                part.delete(ids)
                if self.approximate_above is not None and len(part) < self.approximate_above // 2:  # small again: exact
                    self._parts[partition] = _exact(part)
                elif part.needs_rebuild():
                    self._start_build(partition, part)
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

    def wait_builds(self, timeout: float | None = None) -> bool:
        """Wait until no HNSW graph is being built (``timeout`` seconds at most); whether none is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                builds = [build for build in self._builds.values() if build.thread.is_alive()]
            if not builds:
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            builds[0].join(left)

    # -- saved partitions (tiers.hnsw_store) -------------------------------------------------

    def load_saved(self, partition: str, tag: str) -> int | None:
        """Load the partition's saved copy, if it is not held here yet and one was saved with
        this ``tag`` (model and kind); returns the journal position it reflects, or ``None``."""
        with self._lock:
            if self.directory is None or partition in self._parts or partition in self._looked \
                    or not hnsw_available():
                return None
            self._looked.add(partition)
            loaded = hnsw_store.load(self.directory, partition, tag)
            if loaded is None:
                return None
            part, head = loaded
            part.ef_search = self.ef_search
            self._parts[partition] = part
            if part.needs_rebuild():
                self._start_build(partition, part)
            return head

    def saveable(self, partition: str) -> bool:
        """Whether :meth:`save_partition` has anything to do for this partition."""
        with self._lock:
            return self.directory is not None and (
                partition in self._changed or isinstance(self._parts.get(partition), HnswPartition))

    def save_partition(self, partition: str, head: int, tag: str) -> None:
        """Save the partition as of journal position ``head`` when it is an HNSW graph changed
        since it was loaded or saved (unchanged: the saved copy's position moves to ``head``);
        an exact one deletes a stale saved copy. Call with the database's write lock held, the
        partition in step with the store (so a forget, which deletes saved copies inside its
        write, is never undone by a save)."""
        with self._lock:
            if self.directory is None:
                return
            part = self._parts.get(partition)
            if not isinstance(part, HnswPartition):
                if partition in self._changed:
                    hnsw_store.delete(self.directory, partition)
                    self._changed.discard(partition)
                return
            if partition in self._changed or not hnsw_store.move(self.directory, partition, head, tag):
                hnsw_store.save(self.directory, partition, part, head=head, tag=tag)
            self._changed.discard(partition)

    def delete_saved(self, partition: str) -> None:
        """Delete the partition's saved copy (a forget, inside its write); one held here is
        saved again later, when in step with the store."""
        with self._lock:
            if self.directory is not None:
                hnsw_store.delete(self.directory, partition)
                if partition in self._parts:
                    self._changed.add(partition)

    def drop(self, partition: str) -> None:
        """Forget a partition (and delete its saved copy)."""
        with self._lock:
            build = self._builds.pop(partition, None)
            if build is not None:
                build.cancel()
            self._parts.pop(partition, None)
            self._changed.discard(partition)
            self._looked.add(partition)
            if self.directory is not None:
                hnsw_store.delete(self.directory, partition)

    def close(self) -> None:
        """Stop the builds in progress (each stops after its current chunk: seconds at most)
        and forget every partition. Saving is done before, under the database's write lock
        (:meth:`tiers.vectors.PartitionedVectors.save`)."""
        with self._lock:
            builds = list(self._builds.values())
            for build in builds:
                build.cancel()
        for build in builds:
            build.join()
        with self._lock:
            self._builds.clear()
            self._changed.clear()
            self._looked.clear()
            self._parts.clear()
