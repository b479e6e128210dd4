"""SQLite's catalog (``sqlite_master``, ``PRAGMA table_info`` / ``foreign_key_list`` /
``index_list``) read into :class:`~tiers.storage.table_info.TableInfo`: the tables holding a
user's data, for export, import and deletion (:mod:`tiers.storage.user_tables`).

    >>> import sqlite3
    >>> conn = sqlite3.connect(":memory:")
    >>> _ = conn.execute("CREATE TABLE notes (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, user_id TEXT)")
    >>> info = table_infos(conn.execute)["notes"]
    >>> info.surrogate, info.identity
    ('seq', ('id',))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tiers.storage.table_info import Column, TableInfo, identity_of, quote_name

__all__ = ["table_infos"]

Execute = Callable[..., Any]


def table_infos(execute: Execute) -> dict[str, TableInfo]:
    """Every table with a ``user_id`` column, by name (``execute`` runs a statement and
    returns a cursor)."""
    rows = execute(
        "SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    infos = {}
    for name, sql in rows:
        columns = {r[1] for r in execute(f"PRAGMA table_info({quote_name(name)})").fetchall()}
        if "user_id" in columns:
            infos[name] = _table_info(execute, name, sql)
    return infos


def _affinity(declared: str) -> str:
    """SQLite's type affinity rules (https://sqlite.org/datatype3.html, 3.1)."""
    kind = declared.upper()
    if "INT" in kind:
        return "INTEGER"
    if "CHAR" in kind or "CLOB" in kind or "TEXT" in kind:
        return "TEXT"
    if not kind or "BLOB" in kind:
        return "BLOB"
    if "REAL" in kind or "FLOA" in kind or "DOUB" in kind:
        return "REAL"
    return "NUMERIC"


def _table_info(execute: Execute, name: str, sql: str) -> TableInfo:
    q = quote_name(name)
    columns = tuple(Column(row[1], _affinity(row[2] or ""), bool(row[3]), int(row[5]))
                    for row in execute(f"PRAGMA table_info({q})").fetchall())
    pk = sorted((c for c in columns if c.pk), key=lambda c: c.pk)
    references = []
    for row in execute(f"PRAGMA foreign_key_list({q})").fetchall():
        target, source, to = row[2], row[3], row[4]
        if to is None:  # references the target's primary key
            target_pk = [r[1] for r in execute(f"PRAGMA table_info({quote_name(target)})").fetchall() if r[5]]
            to = target_pk[0] if len(target_pk) == 1 else None
        if to is not None:
            references.append((source, target, to))
    fk_columns = {source for source, _, _ in references}
    without_rowid = "WITHOUT ROWID" in " ".join(sql.upper().split())
    # Only a column declared exactly "INTEGER PRIMARY KEY" is an alias of the rowid.
    alias = (pk[0].name if len(pk) == 1 and not without_rowid
             and _declared(execute, name, pk[0].name) == "INTEGER" else None)
    surrogate = alias if alias is not None and alias not in fk_columns else None
    uniques: list[tuple[str, ...]] = []
    for row in execute(f"PRAGMA index_list({q})").fetchall():
        index_name, unique, partial = row[1], row[2], row[4] if len(row) > 4 else 0
        if unique and not partial:
            cols = tuple(r[2] for r in execute(f"PRAGMA index_info({quote_name(index_name)})").fetchall())
            if cols and None not in cols:
                uniques.append(cols)
    return TableInfo(name, columns, tuple(references), surrogate, identity_of(columns, surrogate, uniques),
                     without_rowid)


def _declared(execute: Execute, table: str, column: str) -> str:
    for row in execute(f"PRAGMA table_info({quote_name(table)})").fetchall():
        if row[1] == column:
            return str(row[2] or "").upper()
    return ""


