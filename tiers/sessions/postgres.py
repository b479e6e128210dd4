"""Conversation sessions in a PostgreSQL table, shared by every process and host that opens it.

One row per namespace and session id; the same contract as the SQLite store (the injected
clock decides expiry). The primary key is ``(namespace, session_key)``, ``session_key`` being
the SHA-256 of the id: a 512-character id of 4-byte characters would not fit a btree entry
beside its namespace. PostgreSQL text holds no NUL, so ``%`` and NUL are percent-encoded in
the stored namespace and id. Needs ``pip install "unified-memory[postgres]"``; a server that
cannot be reached (or is lost) is a :class:`~scoring.errors.StorageUnavailableError`.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from scoring.errors import (
    ClosedError,
    DependencyError,
    StorageError,
    StorageUnavailableError,
    invalid,
    wrong_type,
)
from tiers.sessions._common import (
    check_clock,
    check_key,
    check_table,
    check_ttl,
    decode_state,
    encode_state,
    expires_at,
)
from tiers.storage.postgres_backend import (
    _reason,
    _server_gone,
    is_url,
    open_connection,
    redact_url,
    replace_if_lost,
)

__all__ = ["PostgresConversationStore", "encode_text"]

_COLUMNS = {"namespace", "session_key", "session_id", "state", "saved_at", "expires_at"}
_CREATE = ("CREATE TABLE IF NOT EXISTS {table} (namespace TEXT NOT NULL, session_key TEXT NOT NULL, "
           "session_id TEXT NOT NULL, state TEXT NOT NULL, saved_at DOUBLE PRECISION NOT NULL, "
           "expires_at DOUBLE PRECISION, PRIMARY KEY (namespace, session_key))")
_LIVE = "(expires_at IS NULL OR expires_at > %s)"


def encode_text(value: str) -> str:
    """A key as stored: ``%`` and NUL percent-encoded (PostgreSQL text cannot hold NUL).

    >>> encode_text("a%b\\x00c"), unquote(encode_text("a%b\\x00c")) == "a%b\\x00c"
    ('a%25b%00c', True)
    """
    return value.replace("%", "%25").replace("\x00", "%00")


def _session_key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class PostgresConversationStore:
    """A :class:`~tiers.records.protocols.ConversationStore` in a PostgreSQL table.

    ``url`` is a ``postgresql://`` URL; ``table`` (a plain SQL identifier, created in the
    URL's current schema if missing) may be shared by any number of processes and hosts.
    Thread-safe; close it (or use it as a context manager) when done.

    >>> PostgresConversationStore("postgresql://ada@db/app", table="x; DROP TABLE y")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: table: must be a SQL identifier ([A-Za-z_][A-Za-z0-9_]*, up to 63 characters), got 'x; DROP TABLE y'
    >>> store = PostgresConversationStore("postgresql://ada@db/app", default_ttl=3600)  # doctest: +SKIP
    >>> store.save("s1", [], namespace="ada"); store.list(namespace="ada")  # doctest: +SKIP
    ['s1']
    """

    def __init__(self, url: str, *, table: str = "conversation_sessions", default_ttl: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not isinstance(url, str):
            raise wrong_type("url", "a postgresql:// URL (str)", url)
        if not is_url(url):  # not echoed: a connection string that is no URL may hold a password
            raise invalid("url", "must be a postgresql:// URL (postgresql://user@host:port/database)")
        check_table(table, 63)  # PostgreSQL cuts names at 63 bytes
        self._default_ttl = check_ttl("default_ttl", default_ttl)
        self._clock = check_clock(clock)
        try:
            import psycopg
            from psycopg import sql
        except ImportError:
            raise DependencyError('store: the PostgreSQL conversation store needs psycopg 3: '
                                  'pip install "unified-memory[postgres]"', field="store") from None
        self._psycopg, self._sql, self._url, self.location = psycopg, sql, url, redact_url(url)
        self._table_name, self._table = table, None
        self._statements: dict[str, Any] = {}
        self._lock, self._closed = threading.Lock(), False
        self._conn: Any = self._connect("url")

    def _connect(self, field: str) -> Any:
        """Connect, then create the table if missing (one creator at a time) and check its shape."""
        psycopg, sql = self._psycopg, self._sql
        conn = open_connection(psycopg, self._url, self.location, field=field,
                               application_name="unified-memory sessions", timeout_s=5)
        try:
            schema = conn.execute("SELECT current_schema()").fetchone()[0]
            if schema is None:
                raise StorageError(f"{field}: {self.location} has no schema to create tables in", field=field)
            table = sql.Identifier(schema, self._table_name)
            with conn.transaction():  # concurrent creators take turns: CREATE ... IF NOT EXISTS can race
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                             [f"unified-memory:sessions:{schema}.{self._table_name}"])
                conn.execute(sql.SQL(_CREATE).format(table=table))
            columns = {row[0] for row in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                [schema, self._table_name]).fetchall()}
        except psycopg.Error as exc:
            error = StorageUnavailableError if _gone(conn, exc) else StorageError
            conn.close()
            raise error(f"store: cannot use {self.location}: {_reason(exc)}", field="store") from None
        except BaseException:
            conn.close()
            raise
        if not _COLUMNS <= columns:
            conn.close()
            raise StorageError(f"store: table {self._table_name!r} in {self.location} belongs to something else "
                               f"(columns {sorted(columns)})", field="store")
        self._table = table
        return conn

    def _execute(self, statement: str, params: Sequence[Any]) -> Any:
        """Run one parameterised statement (autocommit; lock held by the caller); a lost
        connection is replaced on the next call."""
        if self._closed:
            raise ClosedError("store: the PostgreSQL conversation store is closed", field="store")
        conn = self._conn = replace_if_lost(self._conn, lambda: self._connect("store"))
        if statement not in self._statements:
            self._statements[statement] = self._sql.SQL(statement).format(table=self._table)
        try:
            return conn.execute(self._statements[statement], list(params))
        except self._psycopg.Error as exc:
            if _gone(conn, exc):
                raise StorageUnavailableError(f"store: lost the connection to {self.location}: {_reason(exc)}",
                                              field="store") from None
            raise StorageError(f"store: PostgreSQL error on {self.location}: {_reason(exc)}",
                               field="store") from None

    def load(self, session_id: str, *, namespace: str = "default") -> dict[str, Any] | None:
        """The state saved under ``session_id``, or ``None`` if missing or expired."""
        check_key("namespace", namespace)
        key = _session_key(check_key("session_id", session_id))
        with self._lock:
            row = self._execute(f"SELECT state FROM {{table}} WHERE namespace = %s AND session_key = %s AND {_LIVE}",
                                [encode_text(namespace), key, self._clock()]).fetchone()
        return None if row is None else decode_state(row[0], f"session {session_id!r} of {self.location}")

    def save(self, session_id: str, state: Mapping[str, Any] | Sequence[Any], *, namespace: str = "default",
             ttl: float | None = None) -> None:
        """Store ``state`` (overwriting, expiry included); ``ttl`` seconds overrides the default TTL."""
        check_key("namespace", namespace)
        check_key("session_id", session_id)
        lifetime = check_ttl("ttl", ttl)
        text = encode_state(state)
        with self._lock:
            now = self._clock()
            expiry = expires_at(now, lifetime if lifetime is not None else self._default_ttl)
            self._execute("INSERT INTO {table} (namespace, session_key, session_id, state, saved_at, expires_at) "
                          "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, session_key) DO UPDATE SET "
                          "session_id = EXCLUDED.session_id, state = EXCLUDED.state, "
                          "saved_at = EXCLUDED.saved_at, expires_at = EXCLUDED.expires_at",
                          [encode_text(namespace), _session_key(session_id), encode_text(session_id), text, now,
                           expiry])

    def delete(self, session_id: str, *, namespace: str = "default") -> bool:
        """Delete a session (expired or not); ``True`` if a live one was there."""
        check_key("namespace", namespace)
        key = _session_key(check_key("session_id", session_id))
        with self._lock:
            row = self._execute(f"DELETE FROM {{table}} WHERE namespace = %s AND session_key = %s RETURNING {_LIVE}",
                                [encode_text(namespace), key, self._clock()]).fetchone()
        return bool(row and row[0])

    def list(self, *, namespace: str = "default") -> list[str]:
        """The live session ids of ``namespace``, sorted (its expired rows are removed)."""
        stored = encode_text(check_key("namespace", namespace))
        with self._lock:
            now = self._clock()
            self._execute("DELETE FROM {table} WHERE namespace = %s AND expires_at <= %s", [stored, now])
            rows = self._execute(f"SELECT session_id FROM {{table}} WHERE namespace = %s AND {_LIVE}",
                                 [stored, now]).fetchall()
        return sorted(unquote(row[0]) for row in rows)

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise :class:`~scoring.errors.ClosedError`."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    def __enter__(self) -> PostgresConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _gone(conn: Any, exc: BaseException) -> bool:
    return bool(conn.closed or conn.broken or _server_gone(exc))  # the server or the connection went away
