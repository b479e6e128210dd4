"""The user-scoped tables of a PostgreSQL schema, read from its catalog, described as
:mod:`tiers.storage.user_tables` describes the SQLite tables of the same schema (docs/design/postgresql-survey.md,
section 3): the same :class:`~tiers.storage.user_tables.TableInfo` for the same DDL, so export, import
and deletion work from one description on both backends. A test keeps the two equal for
:data:`tiers.storage.schema.SCHEMA` and :data:`tiers.storage.pg_schema.SCHEMA_PG` (the drift guard).

Where PostgreSQL and SQLite differ, the description follows SQLite's reading of our DDL:

- ``affinity``: bigint/integer/smallint are ``INTEGER``, double precision/real ``REAL``,
  text/varchar/char ``TEXT``, bytea ``BLOB``, anything else ``NUMERIC``;
- ``notnull``: in SQLite a ``PRIMARY KEY`` does not make its columns NOT NULL (our schema
  declares NOT NULL on the columns of composite keys only), while PostgreSQL marks every key
  column NOT NULL and keeps no trace of a declaration. So a single-column primary key reads
  as nullable (as SQLite's rowid alias, where NULL means "assign one"), a composite key's
  columns as NOT NULL;
- ``surrogate``: a single-column primary key that is an identity column (SQLite's rowid
  alias) and that no foreign key of the table uses;
- ``identity``: ``("id",)`` when a unique index is exactly ``id``; else a primary key that is
  not the surrogate; else the first other unique index (neither partial nor on an expression),
  newest first as SQLite's ``PRAGMA index_list`` lists them (constraints of the
  ``CREATE TABLE`` last, the later declared first); else every column but the surrogate;
- ``references`` are listed as SQLite's ``PRAGMA foreign_key_list`` does: the later declared
  foreign key first;
- ``without_rowid`` is always false.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiers.storage.table_info import Column, TableInfo, identity_of

if TYPE_CHECKING:
    import psycopg

__all__ = ["affinity", "table_columns", "table_infos"]

_AFFINITY = {"bigint": "INTEGER", "integer": "INTEGER", "smallint": "INTEGER",
             "double precision": "REAL", "real": "REAL",
             "text": "TEXT", "character varying": "TEXT", "character": "TEXT",
             "bytea": "BLOB"}

# Every ordinary table of the current schema, with the catalog's facts about each column.
_COLUMNS = """
SELECT c.relname, a.attname, format_type(a.atttypid, NULL), a.attnotnull, a.attidentity::text,
       COALESCE((SELECT k.ord FROM unnest(pk.indkey) WITH ORDINALITY AS k(attnum, ord)
                 WHERE k.attnum = a.attnum AND k.ord <= pk.indnkeyatts), 0) AS pk_position,
       COALESCE(pk.indnkeyatts, 0) AS pk_columns
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
ORDER BY c.relname, a.attnum
"""

# Foreign keys: (table, column, target table, target column), later declared first, then column order.
_REFERENCES = """
SELECT c.relname, a.attname, f.relname, fa.attname
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_class f ON f.oid = con.confrelid
CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(attnum, fattnum, ord)
JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
JOIN pg_attribute fa ON fa.attrelid = con.confrelid AND fa.attnum = k.fattnum
WHERE n.nspname = current_schema() AND con.contype = 'f'
ORDER BY c.relname, con.oid DESC, k.ord
"""

# Unique indexes other than the primary key, neither partial nor on an expression, newest first.
_UNIQUES = """
SELECT c.relname,
       ARRAY(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.ord <= i.indnkeyatts ORDER BY k.ord)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND i.indisunique AND NOT i.indisprimary AND i.indisvalid
  AND i.indpred IS NULL AND i.indexprs IS NULL
ORDER BY c.relname, i.indexrelid DESC
"""


def affinity(type_name: str) -> str:
    """SQLite's type affinity of a PostgreSQL type (as ``format_type`` spells it).

    >>> [affinity(t) for t in ("bigint", "double precision", "text", "bytea", "boolean")]
    ['INTEGER', 'REAL', 'TEXT', 'BLOB', 'NUMERIC']
    """
    return _AFFINITY.get(type_name, "NUMERIC")


def table_columns(conn: psycopg.Connection[Any]) -> dict[str, tuple[Column, ...]]:
    """Every ordinary table of the current schema (by name) and its columns in table order,
    described as ``PRAGMA table_info`` would describe them (see the module's notes)."""
    return {name: tuple(column for column, _ in described) for name, described in _columns(conn).items()}


def _columns(conn: psycopg.Connection[Any]) -> dict[str, list[tuple[Column, bool]]]:
    """Per table: each column and whether it is an identity column."""
    found: dict[str, list[tuple[Column, bool]]] = {}
    for table, name, type_name, notnull, identity, position, key_size in conn.execute(_COLUMNS).fetchall():
        notnull = bool(notnull) and not (position and key_size == 1)  # a lone key column: SQLite's NULL rule
        found.setdefault(table, []).append((Column(name, affinity(type_name), notnull, int(position)),
                                            identity in ("a", "d")))
    return found


def table_infos(conn: psycopg.Connection[Any]) -> dict[str, TableInfo]:
    """A :class:`~tiers.storage.user_tables.TableInfo` for every ordinary table of the current schema
    that has a ``user_id`` column, by name (in name order; :func:`tiers.storage.user_tables.user_tables`
    orders them for export)."""
    columns = {name: described for name, described in _columns(conn).items()
               if any(column.name == "user_id" for column, _ in described)}
    references: dict[str, list[tuple[str, str, str]]] = {}
    for table, source, target, to in conn.execute(_REFERENCES).fetchall():
        references.setdefault(table, []).append((source, target, to))
    uniques: dict[str, list[tuple[str, ...]]] = {}
    for table, names in conn.execute(_UNIQUES).fetchall():
        uniques.setdefault(table, []).append(tuple(names))
    return {name: _info(name, described, tuple(references.get(name, ())), uniques.get(name, []))
            for name, described in sorted(columns.items())}


def _info(name: str, described: list[tuple[Column, bool]], references: tuple[tuple[str, str, str], ...],
          uniques: list[tuple[str, ...]]) -> TableInfo:
    """The rules of :func:`tiers.storage.user_tables` applied to one table's catalog facts."""
    columns = tuple(column for column, _ in described)
    pk = sorted((c for c in columns if c.pk), key=lambda c: c.pk)
    generated = {column.name for column, is_identity in described if is_identity}
    fk_columns = {source for source, _, _ in references}
    surrogate = pk[0].name if len(pk) == 1 and pk[0].name in generated and pk[0].name not in fk_columns else None
    return TableInfo(name, columns, references, surrogate, identity_of(columns, surrogate, uniques),
                     without_rowid=False)
