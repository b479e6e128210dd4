"""The PostgreSQL backend of :class:`tiers.storage.backend.Storage`: a database (and schema) on a
PostgreSQL 15+ server, named by a ``postgresql://`` URL, shared by every process and host
that opens it.

One main connection (psycopg 3, autocommit) per ``Storage``, as SQLite has one per file,
and up to ``pool_size - 1`` spares (:mod:`tiers.storage.pg_spares`) on which other threads read
while one thread holds the main one. Reads are single statements, each seeing what was
committed when it ran. Writes run in
:meth:`PostgresBackend.atomic`: a transaction that first takes an advisory lock of the
schema, so writers take turns as they do on a SQLite file, and a write that reads before it
writes (a fact reinforced rather than stored twice) never races another host's. Their turn
order is also their commit order, which lets every host follow the index journal by its
sequence (:mod:`tiers.storage.journal`).

A lost connection (the server restarted, the network cut) is a
:class:`~scoring.errors.StorageUnavailableError`, never the driver's own error; the
transaction it cut rolled back, and the next call connects again.

    >>> is_url("postgresql://ada@db/memory"), redact_url("postgresql://ada:pw@db/memory")
    (True, 'postgresql://ada:***@db/memory')
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from scoring.errors import (
    ClosedError,
    ConstraintError,
    DependencyError,
    StorageError,
    StorageUnavailableError,
)
from tiers.storage.dialect import POSTGRESQL
from tiers.storage.pg_listener import JournalListener, channel_of, listener_for, release
from tiers.storage.pg_spares import BUSY, SPARE_WAIT, SpareConnections
from tiers.storage.table_info import TableInfo
from tiers.storage.writers import writer_queue

__all__ = ["PostgresBackend", "is_url", "redact_url", "displayed"]

_LOG = logging.getLogger(__name__)
_URL_SCHEMES = ("postgresql://", "postgres://")
_INSTALL_HINT = "PostgreSQL needs psycopg 3: pip install 'unified-memory[postgres]'"
# The placeholders of our statements (``?``) as psycopg's (``%s``), per statement text.
_STATEMENTS: dict[str, str] = {}
_STATEMENTS_KEPT = 8192
#: The client probes a silent server the same way (unless the URL says otherwise): a call never
#: waits for hours on a server host that died.
_CLIENT_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
#: Rows added to a table (by bulk writes, since its last ``ANALYZE``) that refresh its statistics.
_ANALYZE_AFTER = 500


def is_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL database (a ``postgresql://`` URL) rather than a file.

    >>> is_url("postgres://ada@db:5432/memory"), is_url("memory.db"), is_url(None)
    (True, False, False)
    """
    return isinstance(target, str) and target.startswith(_URL_SCHEMES)


def redact_url(url: str) -> str:
    """A database URL fit for messages and ``stats()``: without its password.

    >>> redact_url("postgresql://ada:s3cret@db:5432/memory")
    'postgresql://ada:***@db:5432/memory'
    >>> redact_url("postgresql://ada@db/memory?sslmode=require")
    'postgresql://ada@db/memory?sslmode=require'
    """
    scheme, _, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    auth, at, host = authority.rpartition("@")
    if at and ":" in auth:
        authority = f"{auth.split(':', 1)[0]}:***@{host}"
    query = tail.partition("?")
    if "password=" in query[2]:  # a password given as a parameter
        params = "&".join("password=***" if p.startswith("password=") else p for p in query[2].split("&"))
        tail = f"{query[0]}?{params}"
    return f"{scheme}://{authority}{slash}{tail}"


def displayed(target: str | os.PathLike[str]) -> str:
    """A database as messages show it: a file's path, or a URL without its password.

    >>> displayed("postgresql://ada:pw@db/memory"), displayed("memory.db")
    ('postgresql://ada:***@db/memory', 'memory.db')
    """
    return redact_url(str(target)) if is_url(target) else os.fspath(target)


def psycopg_statement(sql: str) -> str:
    """One of our statements (``?`` placeholders) with psycopg's placeholders (``%s``; a
    literal ``%`` doubled). This is the placeholder style of the driver, not a translation of
    the SQL: our statements hold no ``?`` or ``%`` inside string literals.

    >>> psycopg_statement("SELECT id FROM facts WHERE user_id = ? AND text LIKE '%x'")
    "SELECT id FROM facts WHERE user_id = %s AND text LIKE '%%x'"
    """
    found = _STATEMENTS.get(sql)
    if found is None:
        found = sql.replace("%", "%%").replace("?", "%s")
        if len(_STATEMENTS) >= _STATEMENTS_KEPT:
            _STATEMENTS.clear()
        _STATEMENTS[sql] = found
    return found


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise DependencyError(_INSTALL_HINT) from None
    return psycopg


class PostgresBackend:
    """One PostgreSQL database (its schema on the search path, ``public`` by default),
    reached through one main connection guarded by a re-entrant lock (and, for reads of
    threads that do not hold it, ``pool_size - 1`` spares)."""

    dialect = POSTGRESQL
    path: Path | None = None  # not a file
    shared = True  # other processes and hosts write it: their commits are followed

    def __init__(self, url: str, *, busy_timeout_ms: int = 10_000, pool_size: int = 4,
                 search: str = "auto") -> None:
        self._psycopg = _driver()
        #: ``auto``: search in the database when the server has pgvector; ``in_process``: never.
        self._search = search
        #: Why this memory searches in-process (``None``: it searches in the database).
        self.search_reason: str | None = "search: in_process was asked for"
        # Reads of other threads while one holds the connection (:mod:`tiers.storage.pg_spares`).
        self._spares = SpareConnections(url, size=int(pool_size) - 1, busy_timeout_ms=int(busy_timeout_ms),
                                        server_gone=_server_gone) if pool_size > 1 else None
        self.url = url
        self.location = redact_url(url)
        self.lock = threading.RLock()
        self._in_transaction: int | None = None  # the thread inside atomic(), if any
        self.origin = uuid.uuid4().hex  # tells this connection's journal entries from others' (tiers.storage.journal)
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._closed = False
        self._conn: Any = None
        self._lock_key = 0
        self._journalled = False  # the open transaction wrote to the index journal: notify at commit
        self._added: dict[str, int] = {}  # rows added per table since its statistics were refreshed
        self._stale: set[str] = set()  # tables to ANALYZE after the open transaction commits
        self._listener: JournalListener | None = None
        self._conn = self._connect()
        self._key = f"{url}#{self._schema}"
        self._channel = channel_of(self._lock_key)
        self._writers = writer_queue(self._key)

    # -- the connection --------------------------------------------------------------------

    def _connect(self) -> Any:
        """Open a connection, check the server, create or check the schema; returns it."""
        from tiers.storage.pg_schema import prepare_schema

        psycopg = self._psycopg
        conn = open_connection(psycopg, self.url, self.location, field="path", application_name="unified-memory",
                               timeout_s=max(1, self._busy_timeout_ms // 1000))
        try:
            # The server probes an idle client after 10 s: a host that died holding the writer lock
            # (no FIN sent) loses its session, and the lock, within ~25 s rather than hours.
            self._schema, self._lock_key = conn.execute(
                "SELECT current_schema(), hashtext('unified-memory:' || current_schema()), "
                "set_config('lock_timeout', %s, false), set_config('tcp_keepalives_idle', '10', false), "
                "set_config('tcp_keepalives_interval', '5', false), set_config('tcp_keepalives_count', '3', false)",
                [str(self._busy_timeout_ms)]).fetchone()[:2]
            if self._schema is None:
                raise StorageError(f"path: {self.location} has no schema to create tables in "
                                   "(none on the search path exists)", field="path")
            prepare_schema(conn, self.location)
            if self._search != "in_process":
                from tiers.storage.pg_search_schema import prepare_search

                self.search_reason = prepare_search(conn, self.location)
        except psycopg.OperationalError as exc:
            conn.close()
            raise StorageUnavailableError(f"path: lost {self.location} while opening it: {_reason(exc)}",
                                          field="path") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _connection(self) -> Any:
        """The open connection; a lost one is replaced (the server is back) or a
        :class:`StorageUnavailableError` (it is not)."""
        if self._closed:
            raise ClosedError("this memory is closed")
        self._conn = replace_if_lost(self._conn, self._connect)
        return self._conn

    def _failure(self, exc: Exception, *, committing: bool = False) -> StorageError:
        """Our error for one of the driver's (the caller raises it from ``None``). ``committing``:
        the connection failed while the commit was sent, so whether it took effect is unknown."""
        errors = self._psycopg.errors
        if isinstance(exc, errors.LockNotAvailable):
            return StorageError(f"path: {self.location} stayed locked by another writer beyond the busy timeout "
                                f"({self._busy_timeout_ms} ms), nothing was written", field="path")
        if isinstance(exc, self._psycopg.IntegrityError):
            return ConstraintError(f"path: {_reason(exc)}", field="path")
        conn = self._conn
        if isinstance(exc, self._psycopg.OperationalError) and (conn is None or conn.closed or conn.broken
                                                                or _server_gone(exc)):
            if committing:
                return StorageUnavailableError(
                    f"path: lost the connection to {self.location} while committing: the write may or may not "
                    f"have been stored (look before writing it again): {_reason(exc)}", field="path")
            return StorageUnavailableError(f"path: lost the connection to {self.location}, nothing of this "
                                           f"call was written: {_reason(exc)}", field="path")
        # Anything else (a value the server refuses, a statement it cannot run): ours, never the driver's.
        return StorageError(f"path: {self.location} refused the statement: {_reason(exc)}", field="path")

    # -- access ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """A transaction (a savepoint when nested) holding the schema's writer lock: all of
        it commits, or none of it."""
        psycopg = self._psycopg
        with self.lock:
            conn = self._connection()
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                with conn.transaction():  # a savepoint
                    yield
                return
            if not self._writers.acquire(self._busy_timeout_ms / 1000):
                raise StorageError(f"path: {self.location}: this process's other writers held it beyond the busy "
                                   f"timeout ({self._busy_timeout_ms} ms), nothing was written", field="path")
            self._journalled = False
            committing = False
            self._in_transaction = threading.get_ident()
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", [self._lock_key])
                    yield
                    if self._journalled:  # delivered at commit, to the listeners of every host
                        conn.execute("SELECT pg_notify(%s, '')", [self._channel])
                    committing = True
                committing = False
                if self._journalled and self._listener is not None:
                    self._listener.bump()  # this process's other connections: at once
                self._analyze(conn)
            except psycopg.Error as exc:
                raise self._failure(exc, committing=committing) from None
            finally:
                self._in_transaction = None
                self._journalled = False
                self._stale.clear()
                self._writers.release()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one parameterised statement; returns its rows (fetched, or to fetch)."""
        lock = self.lock
        if not lock.acquire(blocking=False):
            if self._spares is not None and _reads_only(sql):
                rows = self._read_aside(self._spares, sql, params)  # else it holds the lock now
                if rows is not None:
                    return rows
            else:
                lock.acquire()
        try:
            conn = self._connection()
            try:
                return conn.execute(psycopg_statement(sql), params)
            except self._psycopg.Error as exc:
                raise self._failure(exc) from None
        finally:
            lock.release()

    def _read_aside(self, spares: SpareConnections, sql: str, params: Sequence[Any]) -> Any:
        """A read of a thread while another holds the main connection: on a spare, or on the main
        connection if it frees first (all spares busy), for up to the busy timeout, then on the
        main one in its turn. Returns the rows, or ``None`` once this thread holds :attr:`lock`."""
        statement = psycopg_statement(sql)
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        while True:
            try:
                rows = spares.read(statement, params)
            except self._psycopg.Error as exc:
                raise self._failure(exc) from None
            if rows is not None and rows is not BUSY:
                return rows
            if rows is None or time.monotonic() >= deadline:  # no spare to be had: the main one, in turn
                self.lock.acquire()
                return None
            if self.lock.acquire(timeout=SPARE_WAIT):
                return None

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run a parameterised SELECT and return its rows as dicts."""
        cursor = self.execute(sql, params)
        columns = [c.name for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one parameterised statement for many rows (pipelined; call inside :meth:`atomic`)."""
        if not rows:
            return
        with self.lock:
            conn = self._connection()
            try:
                with conn.cursor() as cursor:
                    cursor.executemany(psycopg_statement(sql), rows)
            except self._psycopg.Error as exc:
                raise self._failure(exc) from None

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one ``INSERT`` of a row keyed by ``seq`` and return the new ``seq``."""
        return int(self.execute(f"{sql} RETURNING seq", params).fetchone()[0])

    def get_meta(self, key: str) -> str | None:
        """Read a value of the ``meta`` table."""
        row = self.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def rows_added(self, table: str, count: int) -> None:
        """Count rows a bulk write added; past :data:`_ANALYZE_AFTER` since the last refresh,
        the table's planner statistics are refreshed after the commit."""
        total = self._added.get(table, 0) + count
        self._added[table] = total
        if total >= _ANALYZE_AFTER:
            self._stale.add(table)

    def _analyze(self, conn: Any) -> None:
        """``ANALYZE`` the tables bulk writes filled (after the commit, outside the writer lock's
        transaction): the server's own autovacuum would, a minute or more later."""
        stale, self._stale = sorted(self._stale), set()
        for table in stale:
            try:  # the write has committed: a failure here only leaves the statistics to autovacuum
                conn.execute(f'ANALYZE "{table}"')
            except self._psycopg.Error as exc:
                _LOG.warning("ANALYZE %s after a bulk write failed: %s", table, _reason(exc))
                return
            self._added[table] = 0

    def journal_written(self) -> None:
        """The open transaction wrote to the index journal: the followers are told at its commit."""
        self._journalled = True

    def change_mark(self) -> None:
        """``None``: another host's writes are not all heard of here, so nothing is remembered between reads."""
        return None

    def concurrent_reads(self) -> bool:
        """Whether reads of several threads may run at once now, each on a connection of its own:
        there are spares, and the calling thread is not inside a transaction (whose reads must
        see its own writes, on the main connection)."""
        return self._spares is not None and self._in_transaction != threading.get_ident()

    def data_version(self) -> int:
        """How many times this process heard that a change of the index journal was committed,
        by any host (:mod:`tiers.storage.pg_listener`): no round trip to the server."""
        listener = self._listener
        if listener is None:
            listener = self._listener = listener_for(self._key, self.url, self._channel, self._psycopg)
        return listener.version

    def journal_head(self) -> int:
        """The ``seq`` of the newest committed index journal entry (0 before the first). Writers
        commit in the order they took the writer lock, so no entry commits below it later."""
        return int(self.execute("SELECT COALESCE(MAX(seq), 0) FROM index_journal").fetchone()[0])

    def table_infos(self) -> dict[str, TableInfo]:
        """Every table of the schema with a ``user_id`` column, by name."""
        from tiers.storage.pg_catalog import table_infos

        with self.lock:
            return table_infos(self._connection())

    def checkpoint(self) -> tuple[int, int, int]:
        """Nothing to do: PostgreSQL manages its write-ahead log itself."""
        with self.lock:
            self._connection()
            return (0, 0, 0)

    def vacuum(self) -> None:
        """Rewrite every table of the schema (``VACUUM (FULL, ANALYZE)``), so that deleted
        rows leave no dead tuples in the tables and their indexes, nor samples in the
        planner's statistics. The server's write-ahead log, its archives, replicas and
        backups keep what they hold (docs/deployment.md)."""
        with self.lock:
            conn = self._connection()
            if conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
                raise StorageError("vacuum: not possible inside a transaction")
            tables = [row[0] for row in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname").fetchall()]
            if not self._writers.acquire(self._busy_timeout_ms / 1000):
                raise StorageError(f"path: {self.location} stayed locked beyond the busy timeout", field="path")
            try:
                for table in tables:
                    conn.execute(f'VACUUM (FULL, ANALYZE) "{table}"')
            except self._psycopg.Error as exc:
                raise self._failure(exc) from None
            finally:
                self._writers.release()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            if self._listener is not None:
                release(self._key, self._listener)
                self._listener = None
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
            if self._spares is not None:
                self._spares.close()


_WRITES = re.compile(r"\b(INSERT|UPDATE|DELETE|MERGE|TRUNCATE|CREATE|DROP|ALTER|LOCK|SET|NOTIFY)\b", re.IGNORECASE)


def _reads_only(sql: str) -> bool:
    """Whether a statement only reads, so a spare connection may run it outside any transaction:
    a ``SELECT``, or a ``WITH`` query none of whose parts writes (the statements are ours and carry
    no values, so a verb in their text is a verb).

    >>> _reads_only("SELECT 1"), _reads_only("WITH s AS (SELECT 1) SELECT * FROM s")
    (True, True)
    >>> _reads_only("WITH d AS (DELETE FROM t RETURNING id) SELECT count(*) FROM d")
    False
    """
    head = sql.lstrip()[:6].upper()
    return head == "SELECT" or (head[:4] == "WITH" and _WRITES.search(sql) is None)


def open_connection(psycopg: Any, url: str, location: str, *, field: str, application_name: str,
                    timeout_s: int) -> Any:
    """A new autocommit connection to ``url`` (TCP keepalives on, unless the URL sets them), or
    our error naming ``field``: :class:`StorageUnavailableError` when the server cannot be
    reached, :class:`StorageError` for a URL it cannot use. ``location`` is the URL to show."""
    try:
        given = psycopg.conninfo.conninfo_to_dict(url)
        return psycopg.connect(url, autocommit=True, connect_timeout=timeout_s, application_name=application_name,
                               **{k: v for k, v in _CLIENT_KEEPALIVES.items() if k not in given})
    except psycopg.OperationalError as exc:
        raise StorageUnavailableError(f"{field}: cannot connect to {location}: {_reason(exc)}", field=field) from None
    except psycopg.Error as exc:  # a malformed URL
        raise StorageError(f"{field}: {location} is not a usable PostgreSQL URL: {_reason(exc)}",
                           field=field) from None


def replace_if_lost(conn: Any, connect: Callable[[], Any]) -> Any:
    """``conn`` while it is open and sound; else (none yet, closed, broken) it is closed
    quietly and ``connect()`` gives the connection to use (its error raised as it is)."""
    if conn is not None and not conn.closed and not conn.broken:
        return conn
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()
    return connect()


def _reason(exc: BaseException) -> str:
    """The first line of a driver error (the server's message, without its context lines)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def _server_gone(exc: BaseException) -> bool:
    """Whether the error says the server went away (admin shutdown, crash, cannot connect now)."""
    state = getattr(exc, "sqlstate", None) or ""
    return state.startswith(("08", "57P"))
