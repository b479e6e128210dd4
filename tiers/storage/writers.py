"""The turns of this process's writers to each database file (:class:`WriterQueue`, one per
file, :func:`writer_queue`), first come first served; a forked child starts with none.
"""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path

__all__ = ["WriterQueue", "writer_queue", "fresh_writer_queues"]


class WriterQueue:
    """The turns of this process's writers to one file, first come first served.

    SQLite lets a writer wait for the file's lock by polling, with sleeps growing to
    100 ms: a writer that has waited long loses the lock, again and again, to writers
    that just arrived (they poll after 1 ms). With several connections of one process
    on a file kept busy, one of them could wait past its busy timeout although no
    transaction held the lock for that long ("database is locked"). The connections of
    a process therefore take turns here before asking SQLite for the lock; SQLite's
    waiting remains for the other processes (one connection each at a time).

    >>> queue = WriterQueue()
    >>> queue.acquire(0.1), queue.acquire(0.01)
    (True, False)
    >>> queue.release(); queue.acquire(0.01)
    True
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiting: collections.deque[threading.Event] = collections.deque()

    def acquire(self, timeout: float) -> bool:
        """Wait for this writer's turn, at most ``timeout`` seconds; whether it came."""
        with self._mutex:
            if not self._held and not self._waiting:
                self._held = True
                return True
            turn = threading.Event()
            self._waiting.append(turn)
        if turn.wait(timeout):
            return True
        with self._mutex:
            if turn.is_set():  # handed over just as the wait timed out
                return True
            self._waiting.remove(turn)
            return False

    def release(self) -> None:
        """End this writer's turn: hand it to the writer that has waited longest."""
        with self._mutex:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._held = False


_WRITER_QUEUES: dict[str, WriterQueue] = {}
_WRITER_QUEUES_LOCK = threading.Lock()


def fresh_writer_queues() -> None:
    """In a forked child: no writer of the parent will ever release its turn here."""
    global _WRITER_QUEUES, _WRITER_QUEUES_LOCK
    _WRITER_QUEUES, _WRITER_QUEUES_LOCK = {}, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=fresh_writer_queues)


def writer_queue(path: Path | str) -> WriterQueue:
    """The queue of this process's writers to the file at ``path`` (or to the database a
    ``str`` names: a PostgreSQL URL and schema)."""
    key = path if isinstance(path, str) else os.path.realpath(path)
    with _WRITER_QUEUES_LOCK:
        return _WRITER_QUEUES.setdefault(key, WriterQueue())
