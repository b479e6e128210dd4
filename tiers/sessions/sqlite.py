"""Conversation sessions in a SQLite table (one row per namespace and session id).

    >>> from tiers.sessions import SQLiteConversationStore
    >>> with SQLiteConversationStore() as store:        # in memory
    ...     store.save("s1", {"messages": [], "summary": "hi"})
    ...     store.load("s1")
    {'messages': [], 'summary': 'hi'}
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlite_utils

from scoring.errors import ClosedError, StorageError, check_path, wrong_type
from tiers.sessions._common import (
    check_clock,
    check_key,
    check_table,
    check_ttl,
    decode_state,
    encode_state,
    expires_at,
)

__all__ = ["SQLiteConversationStore"]

_COLUMNS = {"namespace": str, "session_id": str, "state": str, "saved_at": float, "expires_at": float}


class SQLiteConversationStore:
    """A :class:`~tiers.records.protocols.ConversationStore` in a SQLite table.

    ``path`` is the database file (``None``: in memory); ``table`` must be a plain SQL
    identifier. Thread-safe; close it (or use it as a context manager) when done.

    >>> now = [0.0]
    >>> store = SQLiteConversationStore(default_ttl=10, clock=lambda: now[0])
    >>> store.save("s1", [])
    >>> now[0] = 10.0
    >>> store.list()
    []
    >>> SQLiteConversationStore(table="x; DROP TABLE y")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: table: must be a SQL identifier ([A-Za-z_][A-Za-z0-9_]*, up to 64 characters), got 'x; DROP TABLE y'
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, table: str = "conversation_sessions",
                 default_ttl: float | None = None, clock: Callable[[], float] = time.time) -> None:
        if path is not None and not isinstance(path, str | os.PathLike):
            raise wrong_type("path", "a str, a path or None", path)
        if path is not None:
            check_path("path", path)
        check_table(table, 64)
        self._default_ttl = check_ttl("default_ttl", default_ttl)
        self._clock = check_clock(clock)
        self._table = table
        self._where = ":memory:" if path is None else os.fspath(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(self._where, check_same_thread=False, timeout=5.0)
        except sqlite3.Error as exc:
            # the path cannot be opened (too long, a directory, no permission): the caller's argument
            raise StorageError(f"path: cannot open SQLite file {self._where[:200]!r}: {exc}", field="path") from exc
        try:
            self._db = sqlite_utils.Database(conn)
            with conn:
                self._db.table(table).create(_COLUMNS, pk=("namespace", "session_id"),
                                       not_null={"namespace", "session_id", "state", "saved_at"},
                                       if_not_exists=True)
            columns = {column.name for column in self._db[table].columns}
        except sqlite3.Error as exc:
            conn.close()
            raise StorageError(f"store: cannot use SQLite file {self._where!r}: {exc}", field="store") from exc
        if not set(_COLUMNS) <= columns:
            conn.close()
            raise StorageError(f"store: table {table!r} in {self._where!r} belongs to something else "
                               f"(columns {sorted(columns)})", field="store")
        self._conn = conn

    def _execute(self, sql: str, params: Sequence[Any]) -> sqlite3.Cursor:
        """Run one parameterised statement in its own transaction (lock held by the caller)."""
        if self._conn is None:
            raise ClosedError("store: the SQLite conversation store is closed", field="store")
        try:
            with self._conn:
                return self._db.execute(sql.format(table=f'"{self._table}"'), list(params))
        except sqlite3.Error as exc:
            raise StorageError(f"store: SQLite error on {self._where!r}: {exc}", field="store") from exc

    def load(self, session_id: str, *, namespace: str = "default") -> dict[str, Any] | None:
        """The state saved under ``session_id``, or ``None`` if missing or expired.

        >>> SQLiteConversationStore().load("nobody") is None
        True
        """
        params = [check_key("namespace", namespace), check_key("session_id", session_id)]
        with self._lock:
            row = self._execute("SELECT state FROM {table} WHERE namespace = ? AND session_id = ? "
                                "AND (expires_at IS NULL OR expires_at > ?)", [*params, self._clock()]).fetchone()
        return None if row is None else decode_state(row[0], f"session {session_id!r} of {self._where!r}")

    def save(self, session_id: str, state: Mapping[str, Any] | Sequence[Any], *, namespace: str = "default",
             ttl: float | None = None) -> None:
        """Store ``state`` (overwriting); ``ttl`` seconds overrides the default TTL.

        >>> store = SQLiteConversationStore()
        >>> store.save("s1", {"summary": "x"}, ttl=60)
        >>> store.load("s1")
        {'summary': 'x'}
        """
        params = [check_key("namespace", namespace), check_key("session_id", session_id)]
        lifetime = check_ttl("ttl", ttl)
        text = encode_state(state)
        with self._lock:
            now = self._clock()
            expiry = expires_at(now, lifetime if lifetime is not None else self._default_ttl)
            self._execute("INSERT OR REPLACE INTO {table} (namespace, session_id, state, saved_at, expires_at) "
                          "VALUES (?, ?, ?, ?, ?)", [*params, text, now, expiry])

    def delete(self, session_id: str, *, namespace: str = "default") -> bool:
        """Delete a session; ``True`` if a live one was there.

        >>> store = SQLiteConversationStore()
        >>> store.save("s1", [])
        >>> store.delete("s1"), store.delete("s1")
        (True, False)
        """
        params = [check_key("namespace", namespace), check_key("session_id", session_id)]
        with self._lock:
            now = self._clock()
            live = self._execute("DELETE FROM {table} WHERE namespace = ? AND session_id = ? "
                                 "AND (expires_at IS NULL OR expires_at > ?)", [*params, now]).rowcount
            self._execute("DELETE FROM {table} WHERE namespace = ? AND session_id = ?", params)
        return live > 0

    def list(self, *, namespace: str = "default") -> list[str]:
        """The live session ids of ``namespace``, sorted (expired rows are removed).

        >>> store = SQLiteConversationStore()
        >>> store.save("b", []); store.save("a", []); store.save("c", [], namespace="other")
        >>> store.list(), store.list(namespace="other")
        (['a', 'b'], ['c'])
        """
        check_key("namespace", namespace)
        with self._lock:
            now = self._clock()
            self._execute("DELETE FROM {table} WHERE namespace = ? AND expires_at <= ?", [namespace, now])
            rows = self._execute("SELECT session_id FROM {table} WHERE namespace = ?", [namespace]).fetchall()
        return sorted(row[0] for row in rows)

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise :class:`~scoring.errors.ClosedError`.

        >>> store = SQLiteConversationStore(); store.close(); store.close()
        """
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> SQLiteConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
