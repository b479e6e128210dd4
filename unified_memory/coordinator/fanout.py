"""Independent reads of one request, run at once where the database allows it.

A recall asks each tier for candidates (facts, the graph, the conversation), and the three
searches do not depend on each other. In this process's indexes they are CPU work that the GIL
serialises anyway; on the database search path (PostgreSQL with pgvector) they are statements
that the server runs, each on a connection of its own and a core of its own. There, running the
tiers' searches at once cuts a recall's latency to about its slowest tier: 100,000 facts,
``benchmarks/postgres_scale.py --pgvector``, see the closing figures in docs/deployment.md.

Only on the database search path, and where :meth:`tiers.storage.backend.Storage.concurrent_reads`
says so: spare connections, and the caller not inside a transaction (whose reads must see its own
writes on the main connection). Elsewhere (SQLite, PostgreSQL searched in-process: the searches
are Python work) the calls run one after the other, in the caller's thread, as before.

    >>> fanout = ReadFanout()
    >>> fanout.gather([lambda: 1, lambda: 2], concurrent=False)
    [1, 2]
    >>> fanout.gather([lambda: 1, lambda: 2], concurrent=True)
    [1, 2]
    >>> fanout.close()
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["ReadFanout"]

T = TypeVar("T")

#: Threads that run the other reads of a request (the caller runs the first itself).
WORKERS = 2


class ReadFanout:
    """A small pool of threads for the independent reads of a request (created on first use)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _executor(self) -> ThreadPoolExecutor | None:
        with self._lock:
            if self._closed:
                return None
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="unified-memory-read")
            return self._pool

    def gather(self, calls: Sequence[Callable[[], T]], *, concurrent: bool) -> list[T]:
        """The results of ``calls``, in order. With ``concurrent``, all but the first run on the
        pool while the caller runs the first; an exception of any call is raised here (after
        every call has finished, so none still reads when the caller goes on)."""
        pool = self._executor() if concurrent and len(calls) > 1 else None
        if pool is None:
            return [call() for call in calls]
        futures = [pool.submit(contextvars.copy_context().run, call) for call in calls[1:]]
        try:
            first = calls[0]()
        finally:
            for future in futures:
                future.exception()  # wait for each, whatever the first did
        return [first, *(future.result() for future in futures)]

    def close(self) -> None:
        """Stop the threads (idempotent); later calls run one after the other."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
