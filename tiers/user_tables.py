"""Which tables hold a user's data: discovered from ``sqlite_master`` and ``PRAGMA table_info`` /
``foreign_key_list`` / ``index_list`` (so a table added later by another module is covered), ordered
so that a table comes after the tables its foreign keys reference. Export, import
(:mod:`tiers.row_export`) and deletion (:mod:`tiers.deletion`) all work from this list.

    >>> from tiers.storage import Storage
    >>> [t.name for t in export_tables(Storage(None))][:3]
    ['messages', 'window', 'facts']
"""

from __future__ import annotations

from dataclasses import dataclass

from tiers.storage import Storage

__all__ = ["Column", "TableInfo", "DERIVED_TABLES", "user_tables", "export_tables", "users_in", "quote_name"]

#: Tables derived from the others (rebuilt on demand): deleted with their user, never exported.
DERIVED_TABLES = frozenset({"embeddings", "index_journal", "index_snapshots"})
# Preferred order of the known tables (foreign keys still come first).
_PREFERRED = ("messages", "window", "facts", "entities", "triples", "summaries")


@dataclass(frozen=True, slots=True)
class Column:
    """One column: name, SQLite type affinity, NOT NULL, position in the primary key (0: none)."""

    name: str
    affinity: str  # INTEGER, REAL, TEXT, BLOB, NUMERIC
    notnull: bool
    pk: int


@dataclass(frozen=True, slots=True)
class TableInfo:
    """What export, import and deletion need to know about one user-scoped table.

    ``surrogate`` is an ``INTEGER PRIMARY KEY`` (rowid alias) that no foreign key
    defines: it may be renumbered on import, and references to it follow.
    ``identity`` are the columns that say "this is the same row" (the unique ``id``,
    else the primary key, else another unique index, else every column).
    ``references`` are the foreign keys: ``(column, table, referenced column)``.
    """

    name: str
    columns: tuple[Column, ...]
    references: tuple[tuple[str, str, str], ...]
    surrogate: str | None
    identity: tuple[str, ...]
    without_rowid: bool

    @property
    def column_names(self) -> list[str]:
        """The columns in table order."""
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        """The column called ``name``."""
        return next(c for c in self.columns if c.name == name)


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


def quote_name(name: str) -> str:
    """A table or column name (from ``sqlite_master``, never a caller's value) quoted for SQL text.

    >>> quote_name('odd"name')
    '"odd""name"'
    """
    return '"' + name.replace('"', '""') + '"'


def _table_info(storage: Storage, name: str, sql: str) -> TableInfo:
    q = quote_name(name)
    columns = tuple(Column(row[1], _affinity(row[2] or ""), bool(row[3]), int(row[5]))
                    for row in storage.execute(f"PRAGMA table_info({q})").fetchall())
    pk = sorted((c for c in columns if c.pk), key=lambda c: c.pk)
    references = []
    for row in storage.execute(f"PRAGMA foreign_key_list({q})").fetchall():
        target, source, to = row[2], row[3], row[4]
        if to is None:  # references the target's primary key
            target_pk = [r[1] for r in storage.execute(f"PRAGMA table_info({quote_name(target)})").fetchall() if r[5]]
            to = target_pk[0] if len(target_pk) == 1 else None
        if to is not None:
            references.append((source, target, to))
    fk_columns = {source for source, _, _ in references}
    without_rowid = "WITHOUT ROWID" in " ".join(sql.upper().split())
    # Only a column declared exactly "INTEGER PRIMARY KEY" is an alias of the rowid.
    alias = (pk[0].name if len(pk) == 1 and not without_rowid
             and _declared(storage, name, pk[0].name) == "INTEGER" else None)
    surrogate = alias if alias is not None and alias not in fk_columns else None
    uniques: list[tuple[str, ...]] = []
    for row in storage.execute(f"PRAGMA index_list({q})").fetchall():
        index_name, unique, partial = row[1], row[2], row[4] if len(row) > 4 else 0
        if unique and not partial:
            cols = tuple(r[2] for r in storage.execute(f"PRAGMA index_info({quote_name(index_name)})").fetchall())
            if cols and None not in cols:
                uniques.append(cols)
    names = [c.name for c in columns]
    if ("id",) in uniques:
        identity: tuple[str, ...] = ("id",)
    elif pk and not (len(pk) == 1 and pk[0].name == surrogate):
        identity = tuple(c.name for c in pk)
    elif uniques:
        identity = uniques[0]
    else:
        identity = tuple(n for n in names if n != surrogate)
    return TableInfo(name, columns, tuple(references), surrogate, identity, without_rowid)


def _declared(storage: Storage, table: str, column: str) -> str:
    for row in storage.execute(f"PRAGMA table_info({quote_name(table)})").fetchall():
        if row[1] == column:
            return str(row[2] or "").upper()
    return ""


def user_tables(storage: Storage) -> list[TableInfo]:
    """Every table with a ``user_id`` column, referenced tables before the tables
    referencing them (known tables in a fixed order, others by name).

    >>> from tiers.storage import Storage
    >>> [t.name for t in user_tables(Storage(None))]
    ['messages', 'window', 'facts', 'entities', 'triples', 'summaries', 'keyed_items', 'embeddings',
     'index_journal', 'index_snapshots']
    """
    rows = storage.execute(
        "SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).fetchall()
    infos = {}
    for name, sql in rows:
        columns = {r[1] for r in storage.execute(f"PRAGMA table_info({quote_name(name)})").fetchall()}
        if "user_id" in columns:
            infos[name] = _table_info(storage, name, sql)
    rank = {name: i for i, name in enumerate(_PREFERRED)}
    pending = sorted(infos, key=lambda n: (n in DERIVED_TABLES, rank.get(n, len(rank)), n))
    ordered: list[str] = []
    while pending:
        ready = next((n for n in pending if all(t in ordered or t == n or t not in infos
                                                for _, t, _ in infos[n].references)), pending[0])
        ordered.append(ready)
        pending.remove(ready)
    return [infos[n] for n in ordered]


def export_tables(storage: Storage) -> list[TableInfo]:
    """The user-scoped tables that are exported (all but :data:`DERIVED_TABLES`).

    >>> from tiers.storage import Storage
    >>> "embeddings" in [t.name for t in export_tables(Storage(None))]
    False
    """
    return [t for t in user_tables(storage) if t.name not in DERIVED_TABLES]


def users_in(storage: Storage) -> list[str]:
    """Every user with a row in an exported table, sorted.

    >>> from tiers.storage import Storage
    >>> users_in(Storage(None))
    []
    """
    found: set[str] = set()
    for table in export_tables(storage):
        found.update(r[0] for r in storage.execute(f"SELECT DISTINCT user_id FROM {quote_name(table.name)}"))
    return sorted(found)
