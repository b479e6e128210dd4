"""Building an HNSW partition off the write path.

A partition that grows past ``approximate_above`` (or an HNSW partition with too many
tombstones) is not rebuilt inside the write that crossed the line: building 300,000 x 384
takes minutes, and the write holds the database's write lock. Instead :class:`Build` runs a
background thread that fills a new :class:`~tiers.hnsw_index.HnswPartition` from the *source*
partition, which keeps serving searches (exactly, or through its old graph) and taking writes
meanwhile. The thread copies a chunk of vectors under the index's lock, releases it, adds the
chunk to the new graph (faiss releases the GIL while adding), and repeats; ids written
meanwhile are marked *dirty* by the index (:meth:`Build.touch`) and copied again. When the
backlog is small, it is applied under the lock and the new partition replaces the source in
one step. If the source was replaced (dropped, turned exact, rebuilt) or the build cancelled
(:meth:`Build.cancel`, e.g. at close), the thread stops after its current chunk and the new
graph is discarded. The index waits for builds with
:meth:`~tiers.numpy_index.NumpyVectorIndex.wait_builds`.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable, MutableMapping
from typing import Any, Protocol

import numpy as np

from tiers.hnsw_index import HnswPartition, faiss_module

__all__ = ["Build", "Source", "CHUNK", "FINISH_UNDER_LOCK"]

_log = logging.getLogger(__name__)

#: Vectors copied and added per step (the longest a close waits for a cancelled build).
CHUNK = 4096
#: A backlog of at most this many dirty ids is applied under the lock, then the partitions swap.
FINISH_UNDER_LOCK = 1024


class Source(Protocol):
    """What a build reads from the partition it replaces."""

    next_order: int

    def snapshot(self) -> list[str]:
        """The ids held, in rank order."""
        ...

    def take(self, ids: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Of ``ids``, those held, with a copy of their vectors and their ranks."""
        ...


class Build:
    """One background build of partition ``name`` of ``parts`` (guarded by ``lock``) from
    ``source``; ``make(dim)`` returns the empty partition to fill; ``done(build, part)`` is
    called under the lock when it ends: ``part`` is the partition swapped in, or ``None``."""

    def __init__(self, name: str, source: Source, dim: int, *, parts: MutableMapping[str, Any], lock: Any,
                 make: Callable[[int], HnswPartition], done: Callable[[Build, HnswPartition | None], None]) -> None:
        self.name, self.source, self.dim = name, source, dim
        self._parts, self._lock, self._make, self._done = parts, lock, make, done
        self.pending = source.snapshot()  # ids still to copy (taken under the caller's lock)
        self.dirty: set[str] = set()
        self.cancelled = False
        self.swapped = False
        self.thread = threading.Thread(target=self._run, name=f"hnsw-build {name}", daemon=True)

    def start(self) -> Build:
        """Start the thread; returns self."""
        self.thread.start()
        return self

    def touch(self, ids: list[str]) -> None:
        """Mark ids added, replaced or removed in the source since the build started (under the lock)."""
        self.dirty.update(ids)

    def cancel(self) -> None:
        """Stop after the current chunk; the new graph is discarded."""
        self.cancelled = True

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; whether it ended."""
        self.thread.join(timeout)
        return not self.thread.is_alive()

    def _next(self) -> list[str]:
        if self.pending:
            chunk = self.pending[:CHUNK]
            del self.pending[:CHUNK]
        else:
            chunk = list(itertools.islice(self.dirty, CHUNK))
        self.dirty.difference_update(chunk)
        return chunk

    def _apply(self, part: HnswPartition, chunk: list[str], taken: tuple[list[str], np.ndarray, np.ndarray]) -> None:
        present, vectors, orders = taken
        kept = set(present)
        part.delete([key for key in chunk if key not in kept])
        if present:
            part.put(present, vectors, orders)

    def _run(self) -> None:
        try:
            faiss_module().omp_set_num_threads(max(1, min(4, os.cpu_count() or 1)))
            part = self._make(self.dim)
            part.reserve(len(self.pending))
            while True:
                with self._lock:
                    if self.cancelled or self._parts.get(self.name) is not self.source:
                        self._done(self, None)
                        return
                    if not self.pending and len(self.dirty) <= FINISH_UNDER_LOCK:
                        chunk = list(self.dirty)
                        self.dirty.clear()
                        self._apply(part, chunk, self.source.take(chunk))
                        part.next_order = max(part.next_order, self.source.next_order)
                        self._parts[self.name] = part
                        self.swapped = True
                        self._done(self, part)
                        return
                    chunk = self._next()
                    taken = self.source.take(chunk)
                self._apply(part, chunk, taken)  # outside the lock: searches and writes go on meanwhile
        except Exception:  # e.g. out of memory: the source stays in place, correct and slower
            _log.exception("building the HNSW graph of %s failed; it stays as it was", self.name)
            with self._lock:
                self.cancelled = True  # not retried by the index: it stays as it was
                self._done(self, None)
