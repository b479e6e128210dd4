"""Row-level import of an export (:mod:`tiers.maintenance.row_export`) into the user-scoped tables.

:func:`parse_export` validates every line (format, kinds, columns, value types and the limits
every write path applies: JSON nesting, NUL, scope ids); :func:`import_rows` inserts the rows in
one transaction. Every reference a row carries resolves inside its own user: a foreign key to
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

import base64
import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scoring.errors import ConflictError, MemoryValueError
from tiers.maintenance.row_export import FORMAT, FORMAT_VERSION
from tiers.records.values import MAX_JSON_DEPTH, holds_nul, json_depth
from tiers.storage.backend import SCHEMA_VERSION, IntegrityError, Storage, dumps
from tiers.storage.schema import upgrade_row
from tiers.storage.user_tables import DERIVED_TABLES, Column, TableInfo, quote_name, user_tables

__all__ = ["ParsedExport", "ImportResult", "parse_export", "import_rows", "fresh_id"]

# Text columns that hold JSON: an import checks they parse.
# JSON text columns and the JSON type they hold.
_JSON_COLUMNS: dict[str, type | tuple[type, ...]] = {
    "metadata": dict, "attributes": dict, "source_message_ids": list, "tool_calls": list, "images": list,
    "reasoning_details": (list, dict), "value_json": dict}
# REAL columns holding POSIX seconds: read back as datetimes, so within 0001-01-01 .. 9999-12-31.
_TIME_COLUMNS = frozenset({"created_at", "updated_at", "last_accessed", "valid_from", "valid_to", "expires_at",
                           "first_seen", "last_seen", "ingested_at", "at", "recorded_at", "superseded_at"})
_TIMES = (-62135596800.0, 253402300799.0)
# Columns holding a row's id or another row's id without a foreign key (a list of ids, as JSON, for
# the second set): a row imported as another user gets fresh ids in all of them (see fresh_id).
_ID_COLUMNS = frozenset({"id", "superseded_by", "source_message_id"})
_ID_LIST_COLUMNS = frozenset({"source_message_ids"})
_INT64 = (-(2**63), 2**63 - 1)
# The scope columns: ids of at most 256 printable characters, as the public API checks them.
_SCOPE_COLUMNS = frozenset({"user_id", "agent_id", "session_id"})
_MAX_SCOPE_ID = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")




@dataclass(slots=True)
class ParsedExport:
    """A validated export: its header and its rows ``(line number, table, row)``."""

    source: str
    header: dict[str, Any]
    rows: list[tuple[int, TableInfo, dict[str, Any]]]
    users: list[str]


@dataclass(slots=True)
class ImportResult:
    """What an import did: rows inserted (and per table), rows already present, users touched."""

    rows: int = 0
    per_table: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    users: set[str] = field(default_factory=set)


def _fail(source: str, line: int | None, message: str, *, conflict: bool = False) -> MemoryValueError:
    where = f"{source}, line {line}" if line is not None else source
    return (ConflictError if conflict else MemoryValueError)(f"source: {where}: {message}", field="source")


_EMPTY_JSON: dict[Any, str] = {dict: "{}", list: "[]"}


def _check_value(column: Column, value: Any) -> Any:
    """The value to store, or raise ValueError with the reason."""
    if value is None:
        if column.notnull:
            raise ValueError("must not be null")
        return None
    if isinstance(value, dict):
        if set(value) != {"$base64"} or not isinstance(value["$base64"], str):
            raise ValueError("an object value must be {\"$base64\": ...}")
        try:
            return base64.b64decode(value["$base64"], validate=True)
        except ValueError:
            raise ValueError("is not valid base64") from None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"expected a scalar, got {type(value).__name__}")
    if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
        raise ValueError("is an integer too large for SQLite (64 bits)")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value!r}")
    if isinstance(value, str):
        try:
            if not value.isascii():  # ASCII text holds no lone surrogate: no need to encode it
                value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("is not valid unicode text (it holds a lone surrogate)") from None
        if "\x00" in value:  # refused when stored (PostgreSQL's text cannot hold one at all)
            raise ValueError("must not contain NUL characters (U+0000)")
    affinity = column.affinity
    if affinity == "INTEGER" and not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r:.60}")
    if affinity == "REAL":
        if not isinstance(value, int | float):
            raise ValueError(f"expected a number, got {type(value).__name__}")
        try:
            value = float(value)
        except OverflowError:
            raise ValueError("is a number too large") from None
        if column.name in _TIME_COLUMNS and not _TIMES[0] <= value <= _TIMES[1]:
            raise ValueError(f"must be a moment from 0001-01-01 to 9999-12-31 (POSIX seconds), got {value!r}")
        return value
    if affinity == "TEXT":
        if not isinstance(value, str):
            raise ValueError(f"expected text, got {type(value).__name__}")
        if column.name in _JSON_COLUMNS and not (value == _EMPTY_JSON.get(_JSON_COLUMNS[column.name])):
            try:  # (an empty object or array, most metadata and source lists, is valid as it is)
                decoded = json.loads(value)
            except (ValueError, RecursionError):  # RecursionError: nested too deeply
                raise ValueError("is not valid JSON text") from None
            shape = _JSON_COLUMNS[column.name]
            if not isinstance(decoded, shape) and not (decoded is None and not column.notnull):
                raise ValueError(f"must hold a JSON {'object' if shape is dict else 'array'}")
            if holds_nul(decoded):  # refused when stored: PostgreSQL cannot read it inside JSON
                raise ValueError("must not contain NUL characters (U+0000) in its JSON")
            if json_depth(decoded) > MAX_JSON_DEPTH:  # as every write refuses it: reads could not serialise it
                raise ValueError(f"nests more than {MAX_JSON_DEPTH} levels deep")
    if column.name in _SCOPE_COLUMNS and isinstance(value, str) and (len(value) > _MAX_SCOPE_ID or _CONTROL.search(value)):
        raise ValueError(f"must be at most {_MAX_SCOPE_ID} printable characters (a scope id, as every write checks)")
    return value


def parse_export(lines: Iterable[str], *, source: str, tables: Sequence[TableInfo],
                 user_id: str | None = None,
                 create: Callable[[str], TableInfo | None] | None = None) -> ParsedExport:
    """Parse and validate an export against ``tables`` (the target's, from
    :func:`user_tables`): the header's format and version, every line's kind, columns
    and value types; values of an older schema are read as this one stores them
    (:func:`tiers.storage.schema.upgrade_row`: a fact ``evicted`` then is ``archived``). Raises :class:`MemoryValueError` naming ``source`` and the line.
    ``user_id`` (a remap target) is refused for an export of several users. ``lines`` are read
    one at a time (a file or a stream is never held whole); ``create(kind)`` may create a table
    another module makes on first use and return it (else the kind is unknown)."""
    by_name = {t.name: t for t in tables if t.name not in DERIVED_TABLES}
    header: dict[str, Any] | None = None
    rows: list[tuple[int, TableInfo, dict[str, Any]]] = []
    users: list[str] = []
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise _fail(source, number, f"not valid JSON ({exc})") from None
        except RecursionError:
            raise _fail(source, number, "not valid JSON (nested too deeply)") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            raise _fail(source, number, 'expected an object with a "kind"')
        if header is None:
            header = _check_header(source, number, obj)
            users = header["users"]
            if user_id is not None and len(users) > 1:
                raise _fail(source, number, f"user_id: the export holds {len(users)} users {users}; "
                                            "remapping to one user needs a single-user export")
            continue
        kind = obj["kind"]
        if kind == "header":
            raise _fail(source, number, "a second header")
        table = by_name.get(kind)
        if table is None and create is not None and kind not in DERIVED_TABLES:
            table = create(kind)
            if table is not None:
                by_name[kind] = table
        if table is None:
            raise _fail(source, number, f"unknown kind {kind!r}; this memory holds {sorted(by_name)}")
        if set(obj) != {"kind", "row"} or not isinstance(obj["row"], dict):
            raise _fail(source, number, 'expected {"kind": ..., "row": {...}}')
        row = upgrade_row(kind, dict(obj["row"]))  # an older export's values and columns, as stored now
        names = table.column_names
        if set(row) != set(names):
            missing, extra = sorted(set(names) - set(row)), sorted(set(row) - set(names))
            raise _fail(source, number, f"columns of {kind!r} do not match the table"
                                        + (f"; missing {missing}" if missing else "")
                                        + (f"; unknown {extra}" if extra else ""))
        checked = {}
        for column in table.columns:
            try:
                checked[column.name] = _check_value(column, row[column.name])
            except ValueError as exc:
                at = f" (row {row['id']!r:.80})" if isinstance(row.get("id"), str) else ""
                raise _fail(source, number, f"{kind}.{column.name}: {exc}{at}") from None
        if checked.get("user_id") not in users:
            raise _fail(source, number, f"user_id {checked.get('user_id')!r} is not among the header's users")
        rows.append((number, table, checked))
    if header is None:
        raise _fail(source, None, "empty: no header line")
    return ParsedExport(source, header, rows, users)


def _check_header(source: str, number: int, obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("kind") != "header" or obj.get("format") != FORMAT:
        raise _fail(source, number, f'the first line must be the header {{"kind": "header", "format": "{FORMAT}", ...}}')
    version = obj.get("version")
    if version != FORMAT_VERSION:
        raise _fail(source, number, f"export format version {version!r} is not supported (this reads {FORMAT_VERSION})")
    schema = obj.get("schema_version")
    if schema is not None and (isinstance(schema, bool) or not isinstance(schema, int) or schema > SCHEMA_VERSION):
        raise _fail(source, number, f"schema_version {schema!r} is newer than this version's ({SCHEMA_VERSION}); "
                                    "upgrade the package")
    users = obj.get("users")
    if not isinstance(users, list) or not all(isinstance(u, str) and u for u in users):
        raise _fail(source, number, '"users" must be a list of user ids')
    return obj


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
                        raise _fail(source, number, f"{name}.{column} = {old!r} refers to a {target} row "
                                                    "that is not in the export")
                    row[column] = remaps[target][old]
                key = tuple(row[c] for c in table.identity)
                if key in seen:
                    raise _fail(source, number, f"the same {name} row as line {seen[key]}")
                seen[key] = number
                existing = _select_one(storage, table, table.identity, key)
                if existing is None:
                    plans.append((number, row, row.get(table.surrogate) if table.surrogate else None))
                    continue
                if existing.get("user_id") != row["user_id"]:  # (ids were settled above: not reached for them)
                    raise _fail(source, number, f"{name} row conflicts with a row this memory holds", conflict=True)
                differ = [c for c in table.column_names if c != table.surrogate and existing[c] != row[c]]
                if differ:
                    raise _fail(source, number, f"{name} {dict(zip(table.identity, key, strict=True))} "
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
                    raise _fail(source, number, f"{name} row conflicts with a row this user already has "
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
                    raise _fail(source, number, f"{table.name}.{column} = {value!r:.80} refers to a {target} row "
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
