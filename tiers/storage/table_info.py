"""What export, import and deletion know of one table: its columns, keys and references,
as each backend's catalog describes it (:meth:`tiers.storage.backend.Storage.table_infos`).

    >>> Column("seq", "INTEGER", True, 1)
    Column(name='seq', affinity='INTEGER', notnull=True, pk=1)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Column", "TableInfo", "quote_name", "identity_of"]


def quote_name(name: str) -> str:
    """A table or column name (from the catalog, never a caller's value) quoted for SQL text.

    >>> quote_name('odd"name')
    '"odd""name"'
    """
    return '"' + name.replace('"', '""') + '"'


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


def identity_of(columns: tuple[Column, ...], surrogate: str | None,
                uniques: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The columns that say "this is the same row", by the same rule on every backend: the
    unique ``id``, else the primary key (unless it is the surrogate), else the first unique
    index, else every column but the surrogate.

    >>> identity_of((Column("seq", "INTEGER", False, 1), Column("id", "TEXT", True, 0)), "seq", [("id",)])
    ('id',)
    """
    pk = sorted((c for c in columns if c.pk), key=lambda c: c.pk)
    if ("id",) in uniques:
        return ("id",)
    if pk and not (len(pk) == 1 and pk[0].name == surrogate):
        return tuple(c.name for c in pk)
    if uniques:
        return uniques[0]
    return tuple(c.name for c in columns if c.name != surrogate)

