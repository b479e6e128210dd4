"""What a memory's database holds, row by row, for the "no trace left" tests on PostgreSQL
(on SQLite those tests scan the bytes of the file, its -wal and -shm instead)."""

from __future__ import annotations

import os

from tiers.storage.backend import Storage


def rows_as_text(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Every row of every table of the PostgreSQL database the test fixture maps ``path`` to,
    each row as text (``row::text``), by table; ``{}`` for a SQLite file (scan its bytes)."""
    store = Storage(path)
    try:
        if not store.dialect.postgres:
            return {}
        tables = [row[0] for row in store.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname").fetchall()]
        return {table: [row[0] for row in store.execute(f'SELECT t::text FROM "{table}" t').fetchall()]
                for table in tables}
    finally:
        store.close()
