"""Holding a database's write lock as another process would, on either backend."""

from __future__ import annotations

from tiers.storage.backend import Storage


def hold_write_lock(storage: Storage) -> None:
    """Begin a write transaction on ``storage``'s own connection, bypassing this process's writer
    turns (as another process's connection would): SQLite's ``BEGIN IMMEDIATE``, PostgreSQL's
    advisory lock of the schema (what :meth:`Storage.atomic` takes). End it with :func:`release`."""
    if storage.dialect.postgres:
        storage.execute("BEGIN")
        storage.execute("SELECT pg_advisory_xact_lock(hashtext('unified-memory:' || current_schema()))")
    else:
        storage.backend.db.conn.execute("BEGIN IMMEDIATE")


def release(storage: Storage) -> None:
    """Commit the transaction :func:`hold_write_lock` began."""
    storage.execute("COMMIT")


def busy_timeout_ms(storage: Storage) -> int:
    """How long ``storage``'s connection waits for a lock: SQLite's busy timeout, PostgreSQL's lock_timeout."""
    if storage.dialect.postgres:
        return int(storage.execute("SELECT setting FROM pg_settings WHERE name = 'lock_timeout'").fetchone()[0])
    return int(storage.execute("PRAGMA busy_timeout").fetchone()[0])
