"""Spare connections of a PostgreSQL backend: reads of other threads while one thread holds
the main connection.

A :class:`~tiers.storage.postgres_backend.PostgresBackend` has one main connection, as a SQLite
file has one: it carries every write (in a transaction holding the writer lock) and every
read of a thread that holds it. A read of another thread would wait for it, through a
whole network round trip or a whole write. Instead it runs on a spare connection of a
pool (``psycopg_pool``), opened at the first such read and grown up to ``size``: the
read sees what was committed when it ran, as a read on another host would.

A spare is a convenience, never a new way to fail: when none can be had (the server cannot
be reached) or the one that came was cut off (the server restarted), the read goes back to
the main connection, which waits its turn, connects again or reports
:class:`~scoring.errors.StorageUnavailableError`. When every spare is busy, :meth:`SpareConnections.read`
says so (:data:`BUSY`): the caller waits for whichever comes first, a spare or the main
connection, since the main one may be held for a whole write while a spare frees in a moment.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from scoring.errors import ClosedError

__all__ = ["SpareConnections", "Fetched", "BUSY"]

_LOG = logging.getLogger(__name__)
#: Seconds a read waits for a busy spare before it looks whether the main connection is free.
SPARE_WAIT = 0.05
#: Seconds a read waits while the pool opens a new spare for it (connecting to a busy server
#: can take longer than :data:`SPARE_WAIT`, and the main connection may be held far longer).
SPARE_CONNECT_WAIT = 2.0
#: Seconds a spare stays open unused before the pool closes it.
SPARE_IDLE = 60.0


#: What :meth:`SpareConnections.read` gives when every spare is in use (none came within :data:`SPARE_WAIT`).
BUSY: Any = object()


class Fetched:
    """A statement's rows, fetched before its connection went back to the pool."""

    def __init__(self, cursor: Any) -> None:
        self.description = cursor.description
        self.rowcount = cursor.rowcount
        self._rows = cursor.fetchall() if cursor.description is not None else []
        self._next = 0

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        if self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        """The rows not fetched yet."""
        rows, self._next = self._rows[self._next:], len(self._rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class SpareConnections:
    """Up to ``size`` connections to ``url`` (autocommit, ``lock_timeout`` set), opened when
    first needed and closed after :data:`SPARE_IDLE` seconds unused. ``server_gone(exc)``
    tells a lost connection from an error of the statement."""

    def __init__(self, url: str, *, size: int, busy_timeout_ms: int,
                 server_gone: Callable[[BaseException], bool]) -> None:
        self.size = size
        self._url = url
        self._busy_timeout_ms = busy_timeout_ms
        self._server_gone = server_gone
        self._lock = threading.Lock()
        self._pool: Any = None
        self._modules: Any = None  # psycopg and psycopg_pool, imported with the pool
        self._missing = False  # psycopg_pool is not installed: every read goes to the main connection
        self._closed = False

    def read(self, statement: str, params: Sequence[Any]) -> Any:
        """The rows of one read (``statement`` in psycopg's placeholders, a :class:`Fetched`) on a
        spare connection; :data:`BUSY` when every spare is in use; ``None`` when no spare can run
        it (none can be opened, or the one that came was lost: the caller uses the main one)."""
        if self._missing:
            return None
        pool = self._pool if self._pool is not None else self._open()
        if pool is None:
            return None
        psycopg, psycopg_pool = self._modules
        try:
            growing = pool.get_stats().get("pool_size", 0) < pool.max_size  # a new spare opens for this read
            conn = pool.getconn(timeout=SPARE_CONNECT_WAIT if growing else SPARE_WAIT)
        except psycopg_pool.PoolClosed:
            raise ClosedError("this memory is closed") from None
        except psycopg_pool.PoolTimeout:
            return None if growing else BUSY
        try:
            return Fetched(conn.execute(statement, params))
        except psycopg.OperationalError as exc:
            if not (conn.broken or conn.closed or self._server_gone(exc)):
                raise
            _LOG.info("a spare connection was lost (%s): the read goes to the main connection", exc)
            return None
        finally:
            pool.putconn(conn)  # a broken one is discarded by the pool

    def _open(self) -> Any:
        with self._lock:
            if self._closed:
                raise ClosedError("this memory is closed")
            if self._pool is None and not self._missing:
                try:
                    import psycopg
                    import psycopg_pool
                except ImportError:
                    _LOG.warning("reads of several threads take turns on one connection: spare connections "
                                 "need psycopg-pool (pip install 'unified-memory[postgres]')")
                    self._missing = True
                    return None
                self._modules = (psycopg, psycopg_pool)
                timeout = self._busy_timeout_ms
                self._pool = psycopg_pool.ConnectionPool(
                    self._url, min_size=0, max_size=self.size, open=True, timeout=timeout / 1000,
                    max_idle=SPARE_IDLE, num_workers=1, name="unified-memory-spares",
                    kwargs={"autocommit": True, "application_name": "unified-memory",
                            "connect_timeout": max(1, timeout // 1000)},
                    configure=_configure(timeout))
            return self._pool

    def close(self) -> None:
        """Close every spare (idempotent); a read after it is a :class:`ClosedError`."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.close(timeout=1.0)


def _configure(lock_timeout_ms: int) -> Callable[[Any], None]:
    def configure(conn: Any) -> None:
        conn.execute(f"SET lock_timeout = {int(lock_timeout_ms)}")

    return configure
