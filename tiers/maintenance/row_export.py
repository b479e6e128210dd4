"""Row-level export over the user-scoped tables (importing is :mod:`tiers.maintenance.row_import`).

Every table with a ``user_id`` column is user data (:mod:`tiers.storage.user_tables` finds them,
in foreign-key order). Derived tables (:data:`~tiers.storage.user_tables.DERIVED_TABLES`: the
embedding cache, the index journal and snapshots) are never exported: they are rebuilt
from the rest. Deleting rows is :mod:`tiers.maintenance.deletion`.

The export format is JSON Lines: a header, then ``{"kind": <table>, "row": {...}}``
per row, values exactly as stored (REAL as JSON floats, which round-trip exactly;
JSON text columns kept as text; a BLOB as ``{"$base64": ...}``).

    >>> import io
    >>> from tiers.storage.backend import Storage
    >>> source = Storage(None)
    >>> with source.atomic():
    ...     _ = source.execute("INSERT INTO summaries (user_id, text, updated_at) VALUES ('ada', 'hi', 1.5)")
    >>> out = io.StringIO()
    >>> export_rows(source, out, users=["ada"], header={"kind": "header", "format": FORMAT,
    ...                                                 "version": FORMAT_VERSION})
    1
    >>> out.getvalue().splitlines()[1]
    '{"kind":"summaries","row":{"user_id":"ada","agent_id":"","session_id":"","text":"hi","messages":0,"updated_at":1.5}}'

This module holds no coordinator logic: which indexes to invalidate after an import
is :mod:`unified_memory.io.jsonl`'s business.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from scoring.errors import StorageError
from tiers.storage.backend import Storage
from tiers.storage.user_tables import export_tables, quote_name, users_in

__all__ = ["FORMAT", "FORMAT_VERSION", "export_rows"]

FORMAT = "unified-memory.export"
FORMAT_VERSION = 1


# -- export --------------------------------------------------------------------------------


_PLAIN = frozenset({str, int, type(None)})


def _encode(value: Any) -> Any:
    if type(value) in _PLAIN:
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, float) and not math.isfinite(value):
        raise StorageError(f"export: a stored value is not a finite number ({value!r})")
    return value


# Characters str.splitlines() breaks on that JSON leaves raw: escaped, so any line reader works.
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def _line(obj: Mapping[str, Any]) -> str:
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_LINE_BREAKS) + "\n"


def export_rows(storage: Storage, out: TextIO, *, users: Sequence[str] | None,
                header: Mapping[str, Any]) -> int:
    """Write ``header`` (its ``users`` set to the users exported) and every row of the
    exported tables for ``users`` (every user when ``None``) as JSON lines to ``out``,
    in one read transaction; returns the number of row lines."""
    count = 0
    with storage.atomic():  # one snapshot of the file
        out.write(_line({**header, "users": list(users) if users is not None else users_in(storage)}))
        for table in export_tables(storage):
            names = table.column_names
            keys = [c.name for c in sorted((c for c in table.columns if c.pk), key=lambda c: c.pk)]
            # In the order rows were stored: the rowid (or its alias); PostgreSQL has none,
            # and its tables are ordered by their surrogate key, else their primary key.
            order = ", ".join(map(quote_name, keys or table.identity)) \
                if table.without_rowid or storage.dialect.postgres else "rowid"
            sql = f"SELECT {', '.join(map(quote_name, names))} FROM {quote_name(table.name)}"
            params: list[Any] = []
            if users is not None:
                sql += f" WHERE user_id IN ({','.join('?' * len(users))})"
                params = list(users)
            for row in storage.execute(f"{sql} ORDER BY {order}", params):
                out.write(_line({"kind": table.name,
                                 "row": {n: _encode(v) for n, v in zip(names, row, strict=True)}}))
                count += 1
    return count
