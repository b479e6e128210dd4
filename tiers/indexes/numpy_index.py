"""An in-process vector index: one float32 matrix per partition (:mod:`tiers.indexes.vector_partition`),
searched exactly; a partition of ``approximate_above`` vectors or more keeps binary codes of its
vectors (:mod:`tiers.indexes.binary_codes`) and is searched by scanning them for the ``depth`` nearest,
which are then scored exactly. Given a directory, approximate partitions are saved there and
memory-mapped when loaded (:mod:`tiers.indexes.vector_store`).

Re-exported by :mod:`tiers.indexes.vectors`. An exact search is one matrix-vector product (in
single-threaded slices) and a partial sort; it is bound by memory bandwidth: about 1.5 ms at
10,000 x 384 and 15 ms at 100,000 x 384 on a 2-core machine. A code scan reads 128 bytes per
vector instead of 1,536: about 3 ms at 300,000 (``benchmarks/binary_index.py``).

    >>> index = NumpyVectorIndex()
    >>> index.upsert("facts/ada", ["a"], np.array([[1.0, 0.0]]))
    >>> index.ids("facts/ada")
    {'a'}
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from scoring.checks import check_int, check_str_list
from scoring.errors import invalid
from tiers.indexes import vector_store
from tiers.indexes.vector_partition import Partition

__all__ = ["NumpyVectorIndex"]


class NumpyVectorIndex:
    """An in-process :class:`~tiers.records.protocols.VectorIndex`: one growable float32
    matrix per partition; scores are dot products (cosine, for the L2-normalised vectors it is
    given); ties go to the earlier inserted id. Not persistent: rebuilt in every process, or
    loaded from saved copies.

    A partition that reaches ``approximate_above`` vectors (``None``: never) is searched
    approximately: a scan of binary codes for the ``depth`` nearest, re-scored exactly (same
    scores and tie order as an exact search, over those candidates); below half that size it
    is exact again. Turning approximate encodes the partition once (about 0.6 s at 100,000 x
    384); each later write encodes its own vectors. ``similarity`` stays exact. Given a
    ``directory``, approximate partitions can be saved there (:meth:`save_partition`, called by
    :class:`tiers.indexes.vectors.PartitionedVectors` under the database's write lock) and loaded
    (:meth:`load_saved`); see :mod:`tiers.indexes.vector_store`.

    >>> index = NumpyVectorIndex()
    >>> index.upsert("facts/ada", ["a", "b"], np.array([[1, 0], [0.6, 0.8]], dtype=np.float32))
    >>> [(key, round(score, 2)) for key, score in index.search("facts/ada", np.array([1, 0]), 5)]
    [('a', 1.0), ('b', 0.6)]
    >>> index.search("facts/bob", np.array([1, 0]), 5)
    []
    """

    persistent = False

    def __init__(self, *, approximate_above: int | None = 50_000, depth: int = 2000,
                 directory: str | None = None) -> None:
        if approximate_above is not None:
            check_int("approximate_above", approximate_above, minimum=2)
        self.approximate_above = approximate_above
        self.depth = check_int("depth", depth, minimum=1)
        self._parts: dict[str, Partition] = {}
        self._lock = threading.RLock()
        self.directory = directory
        self._looked: set[str] = set()  # partitions whose saved copy was looked for
        self._changed: set[str] = set()  # approximate partitions changed since loaded or saved

    def _get(self, partition: str) -> Partition | None:
        return self._parts.get(partition)

    def _settle(self, partition: str, part: Partition) -> None:
        """Turn the partition approximate or exact by its size (exact below half the threshold)."""
        size = len(part)
        if self.approximate_above is None:
            if part.codes is not None:
                part.approximate(False)
                self._changed.add(partition)
        elif part.codes is None and size >= self.approximate_above:
            part.approximate(True)
            self._changed.add(partition)
        elif part.codes is not None and size < self.approximate_above // 2:
            part.approximate(False)
            self._changed.add(partition)

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
            if part is not None and not len(part):
                del self._parts[partition]  # empty: starts afresh (another model may have other dims)
                part = None
            if part is not None and vectors.shape[1] != part.dim:
                raise invalid("vectors", f"partition {partition!r} holds {part.dim}-dimensional "
                                         f"vectors, got {vectors.shape[1]}")
            if part is None and owned and vectors.flags.c_contiguous and vectors.flags.writeable \
                    and len(set(ids)) == len(ids):
                part = self._parts[partition] = Partition.adopt(ids, vectors)
            else:
                if part is None:
                    part = self._parts[partition] = Partition(vectors.shape[1])
                part.upsert(ids, vectors)
            if part.codes is not None:
                self._changed.add(partition)
            self._settle(partition, part)

    def delete(self, partition: str, ids: Sequence[str]) -> None:
        """Remove ids (unknown ids are ignored)."""
        ids = check_str_list("ids", ids)
        with self._lock:
            part = self._get(partition)
            if part is None:
                return
            before = len(part)
            part.delete(ids)
            if part.codes is not None and len(part) != before:
                self._changed.add(partition)
            self._settle(partition, part)

    def search(self, partition: str, vector: object, limit: int) -> list[tuple[str, float]]:
        """The ``limit`` ids most similar to ``vector``, best first, as ``(id, score)``."""
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)
        with self._lock:
            part = self._get(partition)
            if part is None or limit <= 0 or not len(part):
                return []
            if vector.shape[0] != part.dim:
                raise invalid("vector", f"expected {part.dim} dimensions, got {vector.shape[0]}")
            return part.search(vector, limit, depth=self.depth)

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
            if part is None or not any(key in part.rows for key in ids):
                return {}
            if vector.shape[0] != part.dim:
                raise invalid("vector", f"expected {part.dim} dimensions, got {vector.shape[0]}")
            return part.similarity(vector, ids)

    def ids(self, partition: str) -> set[str]:
        """The ids held in a partition."""
        with self._lock:
            part = self._get(partition)
            return set() if part is None else set(part.ids)

    def approximate(self, partition: str) -> bool:
        """Whether the partition is searched approximately (it holds binary codes)."""
        with self._lock:
            part = self._get(partition)
            return part is not None and part.codes is not None

    # -- saved partitions (tiers.indexes.vector_store) -----------------------------------------------

    def load_saved(self, partition: str, tag: str) -> int | None:
        """Load the partition's saved copy, if it is not held here yet and one was saved with
        this ``tag`` (model and kind); returns the journal position it reflects, or ``None``."""
        with self._lock:
            if self.directory is None or partition in self._parts or partition in self._looked:
                return None
            self._looked.add(partition)
            loaded = vector_store.load(self.directory, partition, tag)
            if loaded is None:
                return None
            part, head = loaded
            self._parts[partition] = part
            self._settle(partition, part)
            return head

    def saveable(self, partition: str) -> bool:
        """Whether :meth:`save_partition` has anything to do for this partition."""
        with self._lock:
            part = self._parts.get(partition)
            return self.directory is not None and (
                partition in self._changed or (part is not None and part.codes is not None))

    def save_partition(self, partition: str, head: int, tag: str) -> None:
        """Save the partition as of journal position ``head`` when it is approximate and changed
        since it was loaded or saved (unchanged: the saved copy's position moves to ``head``);
        an exact one deletes a stale saved copy. Call with the database's write lock held, the
        partition in step with the store (so a forget, which deletes saved copies inside its
        write, is never undone by a save)."""
        with self._lock:
            if self.directory is None:
                return
            part = self._parts.get(partition)
            if part is None or part.codes is None:
                if partition in self._changed:
                    vector_store.delete(self.directory, partition)
                    self._changed.discard(partition)
                return
            if partition in self._changed or not vector_store.move(self.directory, partition, head, tag):
                vector_store.save(self.directory, partition, part, head=head, tag=tag)
            self._changed.discard(partition)

    def delete_saved(self, partition: str) -> None:
        """Delete the partition's saved copy (a forget, inside its write); one held here is
        saved again later, when in step with the store."""
        with self._lock:
            if self.directory is not None:
                vector_store.delete(self.directory, partition)
                if partition in self._parts:
                    self._changed.add(partition)

    def drop(self, partition: str) -> None:
        """Forget a partition (and delete its saved copy)."""
        with self._lock:
            self._parts.pop(partition, None)
            self._changed.discard(partition)
            self._looked.add(partition)
            if self.directory is not None:
                vector_store.delete(self.directory, partition)

    def close(self) -> None:
        """Forget every partition. Saving is done before, under the database's write lock
        (:meth:`tiers.indexes.vectors.PartitionedVectors.save`)."""
        with self._lock:
            self._changed.clear()
            self._looked.clear()
            self._parts.clear()
