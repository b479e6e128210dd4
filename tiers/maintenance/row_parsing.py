"""Reading an export (:mod:`tiers.maintenance.row_export`) back before anything is written:
:func:`parse_export` checks every line (the header's format and version, each line's kind and
columns, value types and the limits every write path applies: JSON nesting, NUL, scope ids) and
returns the rows per line; :mod:`tiers.maintenance.row_import` writes them.

    >>> from tiers.storage.backend import Storage
    >>> from tiers.storage.user_tables import user_tables
    >>> header = '{"kind": "header", "format": "%s", "version": %d, "users": ["ada"]}' % (FORMAT, FORMAT_VERSION)
    >>> parse_export([header], source="<memory>", tables=user_tables(Storage(None))).users
    ['ada']
    >>> parse_export([header, '{"kind": "summaries"}'], source="<memory>", tables=user_tables(Storage(None)))
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: source: <memory>, line 2: expected {"kind": ..., "row": {...}}
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.errors import ConflictError, MemoryValueError
from tiers.maintenance.row_export import FORMAT, FORMAT_VERSION
from tiers.records.values import MAX_JSON_DEPTH, holds_nul, json_depth
from tiers.storage.backend import SCHEMA_VERSION
from tiers.storage.schema import merge_slot_rows, upgrade_row
from tiers.storage.user_tables import Column, TableInfo, is_derived

__all__ = ["ParsedExport", "parse_export", "import_error"]

# Text columns that hold JSON: an import checks they parse.
# JSON text columns and the JSON type they hold.
_JSON_COLUMNS: dict[str, type | tuple[type, ...]] = {
    "metadata": dict, "attributes": dict, "source_message_ids": list, "tool_calls": list, "images": list,
    "reasoning_details": (list, dict), "value_json": dict}
# REAL columns holding POSIX seconds: read back as datetimes, so within 0001-01-01 .. 9999-12-31.
_TIME_COLUMNS = frozenset({"created_at", "updated_at", "last_accessed", "valid_from", "valid_to", "expires_at",
                           "first_seen", "last_seen", "ingested_at", "at", "recorded_at", "superseded_at"})
_TIMES = (-62135596800.0, 253402300799.0)
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


def import_error(source: str, line: int | None, message: str, *, conflict: bool = False) -> MemoryValueError:
    """The error of an import: ``source`` and the line in the message, a :class:`ConflictError` for a conflict."""
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
    (:func:`tiers.storage.schema.upgrade_row`: a fact ``evicted`` then is ``archived``).
    Raises :class:`MemoryValueError` naming ``source`` and the line.
    ``user_id`` (a remap target) is refused for an export of several users. ``lines`` are read
    one at a time (a file or a stream is never held whole); ``create(kind)`` may create a table
    another module makes on first use and return it (else the kind is unknown)."""
    by_name = {t.name: t for t in tables if not is_derived(t.name)}
    header: dict[str, Any] | None = None
    rows: list[tuple[int, TableInfo, dict[str, Any]]] = []
    users: list[str] = []
    slots = False  # a relation named as schema 4 named the speaker's slots ("my_car")
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise import_error(source, number, f"not valid JSON ({exc})") from None
        except RecursionError:
            raise import_error(source, number, "not valid JSON (nested too deeply)") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
            raise import_error(source, number, 'expected an object with a "kind"')
        if header is None:
            header = _check_header(source, number, obj)
            users = header["users"]
            if user_id is not None and len(users) > 1:
                raise import_error(source, number, f"user_id: the export holds {len(users)} users {users}; "
                                            "remapping to one user needs a single-user export")
            continue
        kind = obj["kind"]
        if kind == "header":
            raise import_error(source, number, "a second header")
        table = by_name.get(kind)
        if table is None and create is not None and not is_derived(kind):
            table = create(kind)
            if table is not None:
                by_name[kind] = table
        if table is None:
            raise import_error(source, number, f"unknown kind {kind!r}; this memory holds {sorted(by_name)}")
        if set(obj) != {"kind", "row"} or not isinstance(obj["row"], dict):
            raise import_error(source, number, 'expected {"kind": ..., "row": {...}}')
        slots = slots or (kind == "triples" and str(obj["row"].get("predicate", "")).startswith("my_"))
        row = upgrade_row(kind, dict(obj["row"]))  # an older export's values and columns, as stored now
        names = table.column_names
        if set(row) != set(names):
            missing, extra = sorted(set(names) - set(row)), sorted(set(row) - set(names))
            raise import_error(source, number, f"columns of {kind!r} do not match the table"
                                        + (f"; missing {missing}" if missing else "")
                                        + (f"; unknown {extra}" if extra else ""))
        checked = {}
        for column in table.columns:
            try:
                checked[column.name] = _check_value(column, row[column.name])
            except ValueError as exc:
                at = f" (row {row['id']!r:.80})" if isinstance(row.get("id"), str) else ""
                raise import_error(source, number, f"{kind}.{column.name}: {exc}{at}") from None
        if checked.get("user_id") not in users:
            raise import_error(source, number, f"user_id {checked.get('user_id')!r} is not among the header's users")
        rows.append((number, table, checked))
    if header is None:
        raise import_error(source, None, "empty: no header line")
    if slots:  # "my_car" and "car" of the same subject and object: one relation now
        kept = {id(row) for row in merge_slot_rows([row for _, table, row in rows if table.name == "triples"])}
        rows = [(number, table, row) for number, table, row in rows if table.name != "triples" or id(row) in kept]
    return ParsedExport(source, header, rows, users)


def _check_header(source: str, number: int, obj: dict[str, Any]) -> dict[str, Any]:
    if obj.get("kind") != "header" or obj.get("format") != FORMAT:
        raise import_error(source, number, f'the first line must be the header {{"kind": "header", "format": "{FORMAT}", ...}}')
    version = obj.get("version")
    if version != FORMAT_VERSION:
        raise import_error(source, number, f"export format version {version!r} is not supported (this reads {FORMAT_VERSION})")
    schema = obj.get("schema_version")
    if schema is not None and (isinstance(schema, bool) or not isinstance(schema, int) or schema > SCHEMA_VERSION):
        raise import_error(source, number, f"schema_version {schema!r} is newer than this version's ({SCHEMA_VERSION}); "
                                    "upgrade the package")
    users = obj.get("users")
    if not isinstance(users, list) or not all(isinstance(u, str) and u for u in users):
        raise import_error(source, number, '"users" must be a list of user ids')
    return obj
