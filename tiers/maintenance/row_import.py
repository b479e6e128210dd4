"""Row-level import of an export (:mod:`tiers.maintenance.row_export`) into the user-scoped tables.

:func:`parse_export` validates every line (format, kinds, columns, value types and the limits
every write path applies: JSON nesting, NUL, scope ids; :mod:`tiers.maintenance.row_parsing`);
:func:`import_rows` inserts the rows in one transaction. Every reference a row carries resolves inside its own user: a foreign key to
a stable id (a relation's ends) names a row of the same user, in the export or in this file,
else nothing is written; a row whose id another user holds gets an id of its own user
(:func:`fresh_id`), with its references, so an import answers alike whatever other users hold.

    >>> import io
    >>> from tiers.maintenance.row_export import FORMAT, FORMAT_VERSION, export_rows
    >>> from tiers.storage.backend import Storage
    >>> from tiers.storage.user_tables import user_tables
    >>> source, target = Storage(None), Storage(None)
    >>> with source.atomic():
    ...     _ = source.execute("INSERT INTO summaries (user_id, text, updated_at) VALUES ('ada', 'hi', 1.5)")
    >>> out = io.StringIO()
    >>> export_rows(source, out, users=["ada"], header={"kind": "header", "format": FORMAT,
    ...                                                 "version": FORMAT_VERSION})
    1
    >>> parsed = parse_export(out.getvalue().splitlines(), source="<memory>", tables=user_tables(target))
    >>> import_rows(target, parsed).rows, target.query("SELECT text, updated_at FROM summaries")
    (1, [{'text': 'hi', 'updated_at': 1.5}])
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tiers.maintenance.row_parsing import ParsedExport, import_error, parse_export
from tiers.storage.backend import IntegrityError, Storage, dumps
from tiers.storage.user_tables import TableInfo, quote_name, user_tables

__all__ = ["ParsedExport", "ImportResult", "parse_export", "import_rows", "fresh_id"]

# Columns holding a row's id or another row's id without a foreign key (a list of ids, as JSON, for
# the second set): a row imported as another user gets fresh ids in all of them (see fresh_id).
_ID_COLUMNS = frozenset({"id", "superseded_by", "source_message_id"})
_ID_LIST_COLUMNS = frozenset({"source_message_ids"})


@dataclass(slots=True)
class ImportResult:
    """What an import did: rows inserted (and per table), rows already present, users touched."""

    rows: int = 0
    per_table: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    users: set[str] = field(default_factory=set)


def _select_one(storage: Storage, table: TableInfo, columns: Sequence[str], values: Sequence[Any]
                ) -> dict[str, Any] | None:
    where = " AND ".join(storage.dialect.same(quote_name(c)) for c in columns)
    found = storage.query(f"SELECT * FROM {quote_name(table.name)} WHERE {where} LIMIT 1", list(values))
    return found[0] if found else None


def import_rows(storage: Storage, parsed: ParsedExport, *, user_id: str | None = None) -> ImportResult:
    """Insert a validated export's rows in one transaction; returns what was done.

    Rows already present (same identity, identical content) are skipped, so
    importing twice adds nothing; a row whose identity exists with other content is
    an error naming the line, and nothing is written. Surrogate integer keys (``seq``)
    are kept when free, else the table's new rows are renumbered after the highest
    key (in file order), and every foreign key referencing them follows. ``user_id``
    replaces every row's user; a row that belonged to another user gets fresh ids
    (:func:`fresh_id`, references included), so a copy of a user into the file it came
    from never meets the original's ids, and importing the copy again adds nothing."""
    result = ImportResult()
    source = parsed.source
    by_table: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    tables: dict[str, TableInfo] = {}
    for number, table, row in parsed.rows:
        by_table.setdefault(table.name, []).append((number, dict(row)))
        tables[table.name] = table
    present = user_tables(storage)
    order = [t.name for t in present if t.name in tables]
    surrogate_of = {t.name: t.surrogate for t in present if t.surrogate}
    remaps: dict[str, dict[Any, Any]] = {}  # table -> old surrogate -> new
    with storage.atomic():
        if user_id is not None:
            for name in order:
                for _, row in by_table[name]:
                    if row["user_id"] != user_id:
                        _rename_ids(tables[name], row, user_id)
                    row["user_id"] = user_id
        _settle_ids(storage, [(tables[name], by_table[name]) for name in order])
        _check_references(storage, source, [(tables[name], by_table[name]) for name in order], surrogate_of)
        for name in order:
            table = tables[name]
            plans: list[tuple[int, dict[str, Any], Any]] = []  # (line, row, old surrogate) of new rows
            seen: dict[tuple[Any, ...], int] = {}
            mapping = remaps.setdefault(name, {}) if table.surrogate else {}
            for number, row in by_table[name]:
                for column, target, target_column in table.references:
                    old = row.get(column)
                    if old is None or target_column != surrogate_of.get(target):
                        continue  # a reference to a stable id (text) is kept as it is
                    if old not in remaps.get(target, {}):
                        raise import_error(source, number, f"{name}.{column} = {old!r} refers to a {target} row "
                                                    "that is not in the export")
                    row[column] = remaps[target][old]
                key = tuple(row[c] for c in table.identity)
                if key in seen:
                    raise import_error(source, number, f"the same {name} row as line {seen[key]}")
                seen[key] = number
                existing = _select_one(storage, table, table.identity, key)
                if existing is None:
                    plans.append((number, row, row.get(table.surrogate) if table.surrogate else None))
                    continue
                if existing.get("user_id") != row["user_id"]:  # (ids were settled above: not reached for them)
                    raise import_error(source, number, f"{name} row conflicts with a row this memory holds", conflict=True)
                differ = [c for c in table.column_names if c != table.surrogate and existing[c] != row[c]]
                if differ:
                    raise import_error(source, number, f"{name} {dict(zip(table.identity, key, strict=True))} "
                                                f"already exists with different {', '.join(differ)}", conflict=True)
                if table.surrogate:
                    mapping[row[table.surrogate]] = existing[table.surrogate]
                result.skipped += 1
            if table.surrogate and plans:
                _number_surrogates(storage, table, plans, mapping)
            columns = table.column_names
            sql = (f"INSERT INTO {quote_name(name)} ({', '.join(map(quote_name, columns))}) "
                   f"VALUES ({', '.join('?' * len(columns))})")
            for number, row, _ in plans:
                try:
                    storage.execute(sql, [row[c] for c in columns])
                except IntegrityError:  # the engine's text names tables and columns: not for the caller
                    raise import_error(source, number, f"{name} row conflicts with a row this user already has "
                                                "(the same unique key, such as a name, under another id)",
                                conflict=True) from None
                result.rows += 1
                result.per_table[name] = result.per_table.get(name, 0) + 1
                result.users.add(row["user_id"])
            if table.surrogate and plans:
                storage.keys_written(name, table.surrogate)
            storage.rows_added(name, len(plans))
    return result


def _in_chunks(storage: Storage, sql: str, head: Sequence[Any], values: Sequence[Any]) -> list[tuple[Any, ...]]:
    """``sql`` (its last ``IN ({marks})`` filled with a chunk of ``values``) run over ``values``
    in chunks of 500, after the fixed parameters ``head``."""
    found: list[tuple[Any, ...]] = []
    for start in range(0, len(values), 500):
        part = list(values[start:start + 500])
        found += [tuple(r) for r in storage.execute(sql.format(marks=",".join("?" * len(part))),
                                                    [*head, *part]).fetchall()]
    return found


Groups = Sequence[tuple[TableInfo, list[tuple[int, dict[str, Any]]]]]


def _settle_ids(storage: Storage, groups: Groups) -> None:
    """Give a row whose ``id`` another user's row holds in this file the id :func:`fresh_id` makes
    for its own user (its references in the export follow), instead of refusing it: the answer
    is the same whether the id is taken or free, so an import tells nothing of other users."""
    renames: dict[tuple[str, str], str] = {}  # (user, old id) -> new id
    for table, rows in groups:
        if table.identity != ("id",):
            continue
        users_of: dict[str, set[str]] = {}
        for _, row in rows:
            if isinstance(row.get("id"), str):
                users_of.setdefault(row["id"], set()).add(row["user_id"])
        held = _in_chunks(storage, f"SELECT id, user_id FROM {quote_name(table.name)} WHERE id IN ({{marks}})",
                          [], sorted(users_of))
        for found_id, owner in held:
            for user in users_of.get(found_id, ()):
                if user != owner:
                    renames[(user, found_id)] = fresh_id(found_id, user)
    if not renames:
        return
    for table, rows in groups:
        for _, row in rows:
            _map_ids(table, row, functools.partial(_renamed, renames, row["user_id"]))


def _check_references(storage: Storage, source: str, groups: Groups, surrogates: Mapping[str, str]) -> None:
    """Every foreign key of a row to a stable id (a relation's ends: ``triples.subject_id`` ->
    ``entities.id``) must name a row of the same user, in the export or in this file; else the
    import is refused whole. The message is the same whether the id is another user's or
    nobody's. (References to a surrogate key are resolved within the export by the caller; ids
    without a foreign key, such as ``superseded_by``, may name rows since forgotten, and every
    read of them is scoped to the user.)"""
    exported: dict[tuple[str, str], set[Any]] = {}  # (table.column, user) -> values in the export
    for table, rows in groups:
        for column in table.column_names:
            for _, row in rows:
                exported.setdefault((f"{table.name}.{column}", row["user_id"]), set()).add(row[column])
    for table, rows in groups:
        for column, target, target_column in table.references:
            if target_column == surrogates.get(target):
                continue  # resolved within the export by import_rows
            wanted: dict[str, dict[Any, int]] = {}  # user -> value -> first line
            for number, row in rows:
                value = row.get(column)
                if value is None or value in exported.get((f"{target}.{target_column}", row["user_id"]), ()):
                    continue
                wanted.setdefault(row["user_id"], {}).setdefault(value, number)
            for user, values in wanted.items():
                held = {r[0] for r in _in_chunks(
                    storage, f"SELECT {quote_name(target_column)} FROM {quote_name(target)} "
                             f"WHERE user_id = ? AND {quote_name(target_column)} IN ({{marks}})",
                    [user], list(values))}
                missing = [(number, value) for value, number in values.items() if value not in held]
                if missing:
                    number, value = min(missing, key=lambda m: m[0])
                    raise import_error(source, number, f"{table.name}.{column} = {value!r:.80} refers to a {target} row "
                                                "that is neither in the export nor this user's")


def fresh_id(old: str, user_id: str) -> str:
    """The id of a row with id ``old`` copied to ``user_id``: the same prefix (``msg_``,
    ``fact_``, ...) and a digest of the user and the old id, so a second copy gets the same ids.

    >>> fresh_id("fact_1a2b", "bob")
    'fact_0d8ba2ca98150ff70ba0ea732bdb29c4'
    >>> fresh_id("fact_1a2b", "bob") == fresh_id("fact_1a2b", "bob") != fresh_id("fact_1a2b", "eve")
    True
    """
    head, separator, _ = old.partition("_")
    digest = hashlib.sha256(f"{user_id}\x00{old}".encode()).hexdigest()[:32]
    return f"{head}{separator}{digest}" if separator else digest


def _renamed(renames: Mapping[tuple[str, str], str], user: str, value: str) -> str:
    return renames.get((user, value), value)


def _rename_ids(table: TableInfo, row: dict[str, Any], user_id: str) -> None:
    """Give a row moving to ``user_id`` fresh ids: its own, and those it refers to (by a
    foreign key to an ``id`` column, or the columns of :data:`_ID_COLUMNS` and :data:`_ID_LIST_COLUMNS`)."""
    _map_ids(table, row, lambda value: fresh_id(value, user_id))


def _map_ids(table: TableInfo, row: dict[str, Any], rename: Callable[[str], str]) -> None:
    """Replace each id the row holds (its own, and those it refers to) by ``rename(id)``; a list of
    ids is written again only when one of them changes."""
    referring = _ID_COLUMNS | {column for column, _, target in table.references if target == "id"}
    for column in table.column_names:
        value = row[column]
        if not isinstance(value, str):
            continue
        if column in referring:
            row[column] = rename(value)
        elif column in _ID_LIST_COLUMNS:  # parse_export checked it holds a JSON list
            ids = json.loads(value)
            renamed = [rename(v) if isinstance(v, str) else v for v in ids]
            if renamed != ids:
                row[column] = dumps(renamed)


def _number_surrogates(storage: Storage, table: TableInfo, plans: list[tuple[int, dict[str, Any], Any]],
                       mapping: dict[Any, Any]) -> None:
    """Keep the new rows' surrogate keys when all are free, else renumber them after the
    highest key in file order; record old -> new in ``mapping``."""
    column, name = table.surrogate, quote_name(table.name)
    assert column is not None
    wanted = [row[column] for _, row, _ in plans]
    free = None not in wanted and len(set(wanted)) == len(wanted)
    if free:
        for chunk in range(0, len(wanted), 500):
            part = wanted[chunk:chunk + 500]
            if storage.execute(f"SELECT 1 FROM {name} WHERE {quote_name(column)} IN ({','.join('?' * len(part))}) "
                               "LIMIT 1", part).fetchone():
                free = False
                break
    if not free:
        top = storage.execute(f"SELECT COALESCE(MAX({quote_name(column)}), 0) FROM {name}").fetchone()[0]
        for offset, (_, row, _) in enumerate(plans, start=1):
            row[column] = top + offset
    for _, row, old in plans:
        if old is not None:
            mapping[old] = row[column]
