"""The database every tier lives in, whichever it is: the seam the tiers talk to.

:class:`Storage` opens a SQLite file (or a database in memory), or a PostgreSQL database
given by its URL, and hands every statement to that backend
(:class:`~tiers.storage.sqlite_backend.SQLiteBackend`, :class:`~tiers.storage.postgres_backend.PostgresBackend`).
Statements are written once, in the SQL both share, with ``?`` placeholders; the few
pieces the two spell differently come from :attr:`Storage.dialect` (:mod:`tiers.storage.dialect`).
The rest lives beside it: the tables and their version in :mod:`tiers.storage.schema`, a damaged
file in :mod:`tiers.storage.damage`, the process's writer turns in :mod:`tiers.storage.writers`, scopes in
:mod:`tiers.records.scope`, ids, JSON columns and filters in :mod:`tiers.storage.rows` (re-exported here).

The database is the source of truth; every index is derived from it and can be rebuilt.
A database that is not ours (or is newer than this code) is refused, never overwritten.

    >>> from tiers.storage.backend import Storage
    >>> store = Storage(None)            # in memory
    >>> with store.atomic():
    ...     _ = store.execute("INSERT INTO meta(key, value) VALUES (?, ?)", ["greeting", "hi"])
    >>> store.get_meta("greeting")
    'hi'
    >>> store.close()
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from scoring.errors import ConfigError, ConstraintError
from tiers.records.scope import NO_SCOPE, Scope
from tiers.storage.damage import is_damage  # noqa: F401  (still importable from here)
from tiers.storage.dialect import Dialect
from tiers.storage.postgres_backend import PostgresBackend, is_url, redact_url
from tiers.storage.rows import dumps, loads, metadata_where, new_id, recall_filter
from tiers.storage.schema import SCHEMA_VERSION
from tiers.storage.sqlite_backend import SQLiteBackend
from tiers.storage.table_info import TableInfo

__all__ = ["Storage", "Backend", "Rows", "Scope", "SCHEMA_VERSION", "new_id", "dumps", "loads", "NO_SCOPE",
           "metadata_where", "recall_filter", "is_url", "redact_url"]

#: The database drivers' errors, for callers above the storage (one name whatever the backend):
#: any error (SQLite's; the PostgreSQL backend raises our StorageError subclasses instead), and a
#: broken constraint (SQLite's and ours). Not in ``__all__``: the drivers' classes have no docstrings.
DriverError = sqlite3.Error
IntegrityError = (sqlite3.IntegrityError, ConstraintError)


class Rows(Protocol):
    """What a statement returns: its rows to fetch, and how many rows it changed."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Any: ...


class Backend(Protocol):
    """One database behind :class:`Storage` (SQLite or PostgreSQL): what the facade hands on."""

    dialect: Dialect
    location: str
    shared: bool
    origin: str
    path: Path | None
    lock: Any

    @property
    def closed(self) -> bool: ...

    def atomic(self) -> AbstractContextManager[Any]: ...

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Rows: ...

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int: ...

    def get_meta(self, key: str) -> str | None: ...

    def concurrent_reads(self) -> bool: ...

    def data_version(self) -> int: ...

    def change_mark(self) -> Any: ...

    def journal_written(self) -> None: ...

    def rows_added(self, table: str, count: int) -> None: ...

    def journal_head(self) -> int: ...

    def table_infos(self) -> dict[str, TableInfo]: ...

    def checkpoint(self) -> tuple[int, int, int]: ...

    def vacuum(self) -> None: ...

    def close(self) -> None: ...


_FELL_BACK: set[str] = set()


def _log_fallback_once(location: str, reason: str) -> None:
    """Say once per process and database why a memory on PostgreSQL searches in-process."""
    if location not in _FELL_BACK:
        _FELL_BACK.add(location)
        logging.getLogger("unified_memory").warning("%s", reason)


class Storage:
    """The memory's database: a SQLite file (in memory when ``target`` is None) or a
    PostgreSQL database (``target`` a ``postgresql://`` URL).

    A SQLite file: WAL journal, a busy timeout, foreign keys. PostgreSQL: writers serialised
    by an advisory lock (as SQLite's file lock serialises them). Both: a schema version in
    ``meta``; access through one connection guarded by a re-entrant lock, so a ``Storage``
    may be shared by threads; writes inside :meth:`atomic`. On PostgreSQL, reads of threads
    that do not hold that lock run on up to ``pool_size - 1`` spare connections
    (:mod:`tiers.storage.pg_spares`); a SQLite file ignores ``pool_size``.
    """

    def __init__(self, target: str | os.PathLike[str] | None, *, busy_timeout_ms: int = 10_000,
                 pool_size: int = 4, search: str = "auto") -> None:
        if search not in ("auto", "in_process", "database"):
            raise ConfigError(f"search: must be 'auto', 'database' or 'in_process', got {search!r}", field="search")
        backend: Backend
        if is_url(target):
            backend = PostgresBackend(str(target), busy_timeout_ms=busy_timeout_ms, pool_size=pool_size,
                                      search="in_process" if search == "in_process" else "auto")
        else:
            backend = SQLiteBackend(target, busy_timeout_ms=busy_timeout_ms)
        # A SQLite file has no reason attribute: it always searches in-process.
        reason: str | None = getattr(backend, "search_reason", "search: a SQLite file searches in-process")
        if search == "in_process":
            reason = reason or "search: in_process was asked for"
        if search == "database" and reason is not None:
            backend.close()
            raise ConfigError(f"search: 'database' needs PostgreSQL with pgvector; {reason}", field="search")
        self.backend = backend
        #: Where recall finds its candidates: ``"database"`` (PostgreSQL with pgvector: BM25 and
        #: vectors in tables, docs/design/pg-search.md) or ``"in-process"`` (indexes in this process).
        self.search: str = "in-process" if reason is not None else "database"
        #: Why it searches in-process (``None`` when it searches in the database).
        self.search_reason: str | None = reason
        if reason is not None and is_url(target) and search == "auto":
            _log_fallback_once(backend.location, reason)
        self.dialect: Dialect = backend.dialect
        #: The SQLite file (``None``: in memory, or a PostgreSQL database).
        self.path: Path | None = backend.path
        #: Where the data is, for messages: a file, "in memory", or the URL without its password.
        self.location: str = backend.location
        #: What it was opened with (a file's path or the URL; ``None`` in memory), and the same to show
        #: (a URL without its password).
        url = str(target) if is_url(target) else None
        self.target: str | None = url if url is not None else (None if backend.path is None else str(backend.path))
        self.shown_target: str | None = backend.location if url is not None else self.target
        #: Whether other connections (processes, hosts) may write it too: their commits are followed.
        self.shared: bool = backend.shared
        #: Tells this connection's journal entries from others' (:mod:`tiers.storage.journal`).
        self.origin: str = backend.origin
        #: Held by every statement; tiers hold it too while they change their in-memory indexes.
        self.lock = backend.lock
        # The statements, handed straight to the backend (no call of ours in between).
        self.execute = backend.execute
        self.query = backend.query
        self.executemany = backend.executemany

    def atomic(self) -> AbstractContextManager[Any]:
        """A transaction (a savepoint when nested): all of it commits, or none of it. The
        outermost one first takes the database's write lock (waiting up to the busy timeout),
        so a write that reads before it writes cannot fail half-way because another process
        committed in between; a lock held longer is a :class:`~scoring.errors.StorageError`."""
        return self.backend.atomic()

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one ``INSERT`` of a row keyed by ``seq`` and return the new ``seq``."""
        return self.backend.insert(sql, params)

    def concurrent_reads(self) -> bool:
        """Whether reads of several threads may run at once now, each on its own connection
        (PostgreSQL with ``pool_size`` above 1, outside a transaction of the calling thread).

        >>> Storage(None).concurrent_reads()
        False
        """
        return self.backend.concurrent_reads()

    def get_meta(self, key: str) -> str | None:
        """Read a value of the ``meta`` table."""
        return self.backend.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        """Write a value of the ``meta`` table (inside :meth:`atomic`)."""
        self.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                     "ON CONFLICT (key) DO UPDATE SET value = excluded.value", [key, value])

    def keys_written(self, table: str, column: str) -> None:
        """After rows were inserted with explicit values of ``table``'s generated key ``column``
        (import, migration): the next generated key comes after the highest. PostgreSQL's
        identity sequence does not look at the rows; SQLite's rowid does (nothing to do)."""
        if self.dialect.postgres:
            self.execute(f'SELECT setval(pg_get_serial_sequence(?, ?), '
                         f'(SELECT COALESCE(MAX("{column}"), 0) + 1 FROM "{table}"), false)', [table, column])

    def data_version(self) -> int:
        """A number that changes when another connection commits (what the journal follows)."""
        return self.backend.data_version()

    def change_mark(self) -> Any:
        """A value that changes whenever anything is written (by this connection or another), to keep
        what was read until then; ``None`` when the backend cannot tell (then keep nothing)."""
        return self.backend.change_mark()

    def rows_added(self, table: str, count: int) -> None:
        """Say that the open transaction added ``count`` rows to ``table`` (a bulk write):
        PostgreSQL refreshes the table's planner statistics after the commit once many rows
        came since (a plan made for an empty table scans a user's rows to find ten by id)."""
        self.backend.rows_added(table, count)

    def journal_written(self) -> None:
        """Say that the open transaction wrote to the index journal (PostgreSQL tells the
        other hosts at its commit)."""
        self.backend.journal_written()

    def journal_head(self) -> int:
        """The position of the newest index journal entry ever written (0 before the first)."""
        return self.backend.journal_head()

    def has_user(self, user_id: str) -> bool:
        """Whether the user holds a message, a fact or an entity (the records everything else of
        a user hangs from). A derived index marks an empty tier of such a user filled; it leaves no
        row naming a user who has nothing (never seen, or forgotten).

        >>> Storage(None).has_user("ada")
        False
        """
        return bool(self.execute(
            "SELECT EXISTS (SELECT 1 FROM messages WHERE user_id = ?) OR EXISTS (SELECT 1 FROM facts WHERE user_id = ?) "
            "OR EXISTS (SELECT 1 FROM entities WHERE user_id = ?)", [user_id, user_id, user_id]).fetchone()[0])

    def table_infos(self) -> dict[str, TableInfo]:
        """Every table with a ``user_id`` column, by name, from the database's catalog."""
        return self.backend.table_infos()

    def checkpoint(self) -> tuple[int, int, int]:
        """SQLite: copy the write-ahead log into the file and truncate it (``PRAGMA
        wal_checkpoint(TRUNCATE)``); returns ``(busy, log frames, checkpointed frames)``.
        In memory and on PostgreSQL: ``(0, 0, 0)``.

        >>> Storage(None).checkpoint()
        (0, 0, 0)
        """
        return self.backend.checkpoint()

    def vacuum(self) -> None:
        """Rewrite the stored tables compactly, so that no deleted text is left in their
        pages (:func:`~unified_memory.io.jsonl.forget`). In memory: nothing.

        >>> Storage(None).vacuum()
        """
        self.backend.vacuum()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.backend.closed

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self.backend.close()
