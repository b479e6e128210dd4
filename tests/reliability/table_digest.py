"""What "nothing half-written" is checked against: a digest of every table of a memory's database.

A bad-input test takes the digests before a call and again after the call raised; they must be
equal. The database is read through a connection of the test's own (never the memory's), so an
uncommitted write of the memory cannot hide a difference:

* SQLite: the file opened read-only; each table's rows are sorted and hashed here.
* PostgreSQL: the server hashes each table's rows (their text form, sorted) in **one** statement
  for all tables, after one that lists them; a read-only, repeatable-read connection kept for the
  test. Reading every table row by row through the driver, with a new connection per digest,
  was four fifths of the time of the fuzz tests on PostgreSQL.

The two backends' digests differ in form; a test compares digests of one database only.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path
from typing import Any


def reader(target: Path | str) -> Any:
    """A connection of this process's own that reads ``target`` (a SQLite file, or a PostgreSQL URL) and never writes."""
    if not isinstance(target, str) or "://" not in target:
        return sqlite3.connect(f"file:{os.fspath(target)}?mode=ro", uri=True, isolation_level=None)
    import psycopg

    conn = psycopg.connect(target, autocommit=True)
    conn.isolation_level, conn.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
    return conn


def rows_digest(rows: list[Any]) -> str:
    """The sha256 of ``rows`` in any order (their ``repr`` sorted), with their count."""
    digest = hashlib.sha256()
    texts = sorted(repr(row) for row in rows)
    digest.update(f"{len(texts)}:".encode())
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def table_digests(conn: Any) -> dict[str, str]:
    """``{table: digest}`` of every table ``conn`` (from :func:`reader`) sees, read in one snapshot."""
    if isinstance(conn, sqlite3.Connection):
        conn.execute("BEGIN")
        try:
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            return {name: rows_digest(conn.execute(f'SELECT * FROM "{name}"').fetchall()) for name in tables}
        finally:
            conn.execute("COMMIT")
    from psycopg import sql

    with conn.transaction():
        tables = [r[0] for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname")]
        if not tables:
            return {}
        per_table = sql.SQL(" UNION ALL ").join(
            sql.SQL("SELECT {name}, count(*) || ':' || md5(coalesce(string_agg(t::text, E'\\x1e' "
                    "ORDER BY t::text COLLATE \"C\"), '')) FROM {table} t").format(
                name=sql.Literal(name), table=sql.Identifier(name))
            for name in tables)
        return dict(conn.execute(per_table).fetchall())
