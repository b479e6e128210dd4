"""The SQLite backend of :class:`tiers.storage.backend.Storage`: the one file every tier lives in
(or a database in memory), its connection, transactions and statements.

    >>> backend = SQLiteBackend(None)
    >>> backend.dialect.name, backend.shared
    ('sqlite', False)
    >>> backend.close()
"""

from __future__ import annotations

import contextlib
import math
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlite_utils

from scoring.errors import ClosedError, StorageError, check_path
from tiers.storage import sqlite_catalog
from tiers.storage.damage import CheckedRows, refuse_damage
from tiers.storage.dialect import SQLITE
from tiers.storage.schema import check_ownership, migrate, refuse_foreign_file
from tiers.storage.table_info import TableInfo
from tiers.storage.writers import writer_queue

__all__ = ["SQLiteBackend"]

_PAGE_CACHE_KIB = 64 * 1024  # per connection; SQLite allocates it only as pages are read
# Reads map the file instead of copying pages in: a commit by another connection (another
# process serving the same file, or this one's writer) empties a connection's page cache, and
# with the map re-reading a page is not a read() and a copy. Two service processes on one
# 100k-fact file: 422 -> 431 requests/s (benchmarks/server.py). Writes still go through write().
# 256 MiB, not more: mapped pages count in the process's RSS, and a 1 GiB map put 577 MB of file
# pages into the process that wrote 300,000 vectors (a 1M-fact lexical run peaked at 3,512 MB with
# it, 3,178 MB without; a 100k-fact file, about 72 MB lexical, is still mapped whole).
_MMAP_BYTES = 256 << 20

# The files this process has open through SQLite (resolved path -> connections). The header of a
# file is read with a plain open() only while no connection of this process has it open: closing
# any descriptor of a file drops every POSIX lock the process holds on it (SQLite's too), and a
# connection that lost its WAL read lock no longer sees other processes' commits (or worse).
_open_files: dict[str, int] = {}
_open_files_lock = threading.Lock()


def _file_key(path: Path) -> str:
    return os.path.realpath(path)


class SQLiteBackend:
    """One SQLite database (a file, or in memory when ``path`` is None).

    WAL journal, a busy timeout, foreign keys, a schema version in ``meta``.
    All access goes through one connection guarded by a re-entrant lock, so a
    ``Storage`` may be shared by threads. Writes happen inside :meth:`atomic`.
    """

    dialect = SQLITE

    def __init__(self, path: str | os.PathLike[str] | None, *, busy_timeout_ms: int = 10_000) -> None:
        self.path: Path | None = Path(check_path("path", path)) if path is not None else None
        self.location = "in memory" if self.path is None else str(self.path)
        self.shared = self.path is not None  # other connections (processes) may write it: follow their commits
        self.lock = threading.RLock()
        self.origin = uuid.uuid4().hex  # tells this connection's journal entries from others' (tiers.storage.journal)
        self._closed = False
        self._writers = writer_queue(self.path) if self.path is not None else None
        self._file_key: str | None = None
        if self.path is not None:
            try:
                key = _file_key(self.path)
                with _open_files_lock:  # counted before connecting: no header read while we connect
                    if not _open_files.get(key):  # one open here was checked already
                        refuse_foreign_file(self.path)
                    _open_files[key] = _open_files.get(key, 0) + 1
                    self._file_key = key
            except OSError as exc:  # e.g. a name too long for the file system, no permission
                raise StorageError(f"path: cannot use {str(self.path)[:200]!r}: {exc.strerror or exc}",
                                   field="path") from None
        try:
            self._connect(busy_timeout_ms)
        except BaseException:
            self._release_file()
            raise

    def _connect(self, busy_timeout_ms: int) -> None:
        if self.path is not None and bool(self.path.parent) and not self.path.parent.exists():
            raise StorageError(f"path: directory {str(self.path.parent)!r} does not exist", field="path")
        target = ":memory:" if self.path is None else str(self.path)
        try:
            conn = sqlite3.connect(target, timeout=busy_timeout_ms / 1000, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StorageError(f"path: cannot open {target!r}: {exc}", field="path") from None
        try:
            self.db = sqlite_utils.Database(conn, execute_plugins=False)
            self._configure(busy_timeout_ms)
            check_ownership(self.db, self.path)  # before the WAL switch: a file that is not ours stays untouched
            self._enable_wal()
            migrate(self.db, self.atomic, self.path)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StorageError(f"path: {target!r} is not a usable SQLite database: {exc}", field="path") from None
        except BaseException:
            conn.close()
            raise

    def _configure(self, busy_timeout_ms: int) -> None:
        self._busy_timeout_ms = int(busy_timeout_ms)
        conn = self.db.conn
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Deleted content is overwritten with zeros, so forgotten text cannot be read back from the file.
        conn.execute("PRAGMA secure_delete = ON")
        # Recall reads candidate rows by id, scattered over the file: with SQLite's default
        # 2 MiB page cache a 100k-fact file misses on most of them (about 2x slower).
        conn.execute(f"PRAGMA cache_size = -{_PAGE_CACHE_KIB}")
        if self.path is not None:
            conn.execute(f"PRAGMA mmap_size = {_MMAP_BYTES}")
        try:  # SQLite's math functions (3.35+, when built with them): retention ranks with them
            conn.execute("SELECT exp(0), ln(1)").fetchall()
        except sqlite3.OperationalError:
            conn.create_function("exp", 1, math.exp, deterministic=True)
            conn.create_function("ln", 1, math.log, deterministic=True)

    def _enable_wal(self) -> None:
        if self.path is not None:
            conn = self.db.conn
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StorageError(f"path: could not enable WAL journaling (got {mode!r})", field="path")
            conn.execute("PRAGMA synchronous = NORMAL")

    # -- access -------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this memory is closed")

    @contextlib.contextmanager
    def atomic(self) -> Iterator[sqlite_utils.Database]:
        """A transaction (a savepoint when nested): all of it commits, or none of it.

        The outermost one starts with ``BEGIN IMMEDIATE``: it takes the file's write lock
        first (waiting up to the busy timeout while another process writes), so a write
        that reads before it writes cannot fail half-way because another process
        committed in between. A lock held longer than the timeout is a :class:`StorageError`.
        The connections of this process to the same file first queue for their turn, first
        come first served (:class:`~tiers.storage.writers.WriterQueue`), so that none of them starves.
        """
        with self.lock:
            self._check_open()
            conn = self.db.conn
            if conn.in_transaction:
                with self.db.atomic():  # a savepoint
                    yield self.db
                return
            with self._writer_turn():
                try:
                    self._begin_immediate(conn)
                except sqlite3.OperationalError as exc:
                    raise self._busy(exc) from exc
                try:
                    yield self.db
                except BaseException as exc:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                        raise self._busy(exc) from exc
                    raise
                try:
                    conn.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise self._busy(exc) from exc

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, waiting up to the busy timeout for another process's write.

        SQLite's own wait sleeps 1, 2, 5, 10, 15 ms… between looks: a writer arriving while
        another process's 3 ms transaction runs waited 1 + 2 + 5 ms. Here the look is
        repeated after 0.1 ms, doubling to at most 1 ms, so the lock is taken soon after
        it is released (the other statements keep SQLite's busy timeout)."""
        if self.path is None:
            conn.execute("BEGIN IMMEDIATE")
            return
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        pause = 0.0001
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if "locked" not in str(exc) or time.monotonic() >= deadline:
                        raise
                except sqlite3.DatabaseError as exc:
                    # Seen once in hundreds of runs of tests/reliability/test_concurrency.py (threads and
                    # processes writing one file, busy timeout 0 here): BEGIN answered "no more rows
                    # available" and took no lock. Nothing was begun, so it is tried again like a busy lock.
                    if conn.in_transaction:
                        return
                    if "no more rows available" not in str(exc) or time.monotonic() >= deadline:
                        raise
                time.sleep(pause)
                pause = min(pause * 2, 0.001)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")

    @contextlib.contextmanager
    def _writer_turn(self) -> Iterator[None]:
        """This connection's turn among the process's writers to the file (see :class:`~tiers.storage.writers.WriterQueue`);
        waiting longer than the busy timeout is a :class:`StorageError`."""
        queue = self._writers
        if queue is not None and not queue.acquire(self._busy_timeout_ms / 1000):
            raise self._busy(sqlite3.OperationalError("database is locked"))
        try:
            yield
        finally:
            if queue is not None:
                queue.release()

    def _busy(self, exc: sqlite3.OperationalError) -> StorageError:
        where = "in memory" if self.path is None else str(self.path)
        return StorageError(f"path: {where} stayed locked by another writer beyond the busy timeout "
                            f"({self._busy_timeout_ms} ms), nothing was written: {exc}", field="path")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> CheckedRows:
        """Run one parameterised statement under the lock (reads, or writes inside :meth:`atomic`)."""
        with self.lock:
            self._check_open()
            try:
                cursor = self.db.execute(sql, params)
            except sqlite3.DatabaseError as exc:
                self._refuse_damage(exc)
                raise
            return CheckedRows(cursor, self._refuse_damage)

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        """Run a parameterised SELECT and return its rows as dicts."""
        with self.lock:  # the rows are fetched before another thread uses the connection
            cursor = self.execute(sql, params)
            columns = [c[0] for c in cursor.description]
            return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one parameterised statement for many rows (call inside :meth:`atomic`)."""
        with self.lock:
            self._check_open()
            try:
                self.db.conn.executemany(sql, rows)
            except sqlite3.DatabaseError as exc:
                self._refuse_damage(exc)
                raise

    def _refuse_damage(self, exc: sqlite3.DatabaseError) -> None:
        """Raise a :class:`StorageError` naming the file when ``exc`` says the file is damaged
        (a corrupt page, text that is not UTF-8); else return, and the caller re-raises
        ``exc`` (constraint and lock errors are handled by callers)."""
        refuse_damage(exc, self.path)

    def get_meta(self, key: str) -> str | None:
        """Read a value of the ``meta`` table."""
        row = self.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one ``INSERT`` of a row into a table keyed by ``seq`` and return the new row's ``seq``."""
        seq = self.execute(sql, params).lastrowid
        assert seq is not None
        return seq

    def rows_added(self, table: str, count: int) -> None:
        """Nothing to do: SQLite's plans here are fixed by ``INDEXED BY``."""

    def journal_written(self) -> None:
        """Nothing to do: other connections see a commit through ``PRAGMA data_version``."""

    def concurrent_reads(self) -> bool:
        """Never: one connection, whose statements take turns (reads run in this process's indexes)."""
        return False

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes when another connection commits."""
        return int(self.execute("PRAGMA data_version").fetchone()[0])

    def change_mark(self) -> tuple[int, int]:
        """Changes whenever anything is written to the file: another connection commits
        (``PRAGMA data_version``) or this one changes a row (``total_changes``, rolled back or not)."""
        with self.lock:
            return self.data_version(), self.db.conn.total_changes

    def journal_head(self) -> int:
        """The ``seq`` of the newest index journal entry ever written (0 before the first):
        ``index_journal`` is an ``AUTOINCREMENT`` table, whose counter never goes back."""
        row = self.execute("SELECT seq FROM sqlite_sequence WHERE name = 'index_journal'").fetchone()
        return int(row[0]) if row else 0

    def table_infos(self) -> dict[str, TableInfo]:
        """Every table with a ``user_id`` column, by name, from SQLite's catalog."""
        return sqlite_catalog.table_infos(self.execute)

    def checkpoint(self) -> tuple[int, int, int]:
        """Copy the write-ahead log into the database file and truncate it to zero bytes
        (``PRAGMA wal_checkpoint(TRUNCATE)``), so that old page images, deleted text
        included, no longer sit in the ``-wal`` file. Returns SQLite's ``(busy, log
        frames, checkpointed frames)``; ``busy`` is 1 when another connection's reader
        kept the log from being truncated. In memory: ``(0, 0, 0)``.

        >>> SQLiteBackend(None).checkpoint()
        (0, 0, 0)
        """
        with self.lock:
            self._check_open()
            if self.path is None:
                return (0, 0, 0)
            if self.db.conn.in_transaction:
                raise StorageError("checkpoint: not possible inside a transaction")
            row = self.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return (int(row[0]), int(row[1]), int(row[2]))

    def vacuum(self) -> None:
        """Rewrite the database file compactly (``VACUUM``), under this process's writer turn.

        ``secure_delete`` zeroes deleted cells and freed pages, but a page the b-tree
        rebuilds keeps stale bytes of moved cells in its unused gap; rewriting the file is
        what leaves no deleted text behind (:func:`~unified_memory.io.jsonl.forget`). In
        memory: nothing.

        >>> SQLiteBackend(None).vacuum()
        """
        with self.lock:
            self._check_open()
            if self.path is None:
                return
            if self.db.conn.in_transaction:
                raise StorageError("vacuum: not possible inside a transaction")
            with self._writer_turn():
                try:
                    self.db.conn.execute("VACUUM")
                except sqlite3.DatabaseError as exc:
                    if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
                        raise self._busy(exc) from exc
                    self._refuse_damage(exc)
                    raise

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            if self.path is not None:
                with contextlib.suppress(sqlite3.Error):
                    self.db.conn.execute("PRAGMA optimize")
            self.db.conn.close()
            self._release_file()

    def _release_file(self) -> None:
        """Uncount this connection's file (see ``_open_files``)."""
        if self._file_key is not None:
            with _open_files_lock:
                left = _open_files.get(self._file_key, 1) - 1
                if left > 0:
                    _open_files[self._file_key] = left
                else:
                    _open_files.pop(self._file_key, None)
            self._file_key = None
