"""What goes into rows and selects them: fresh ids, JSON columns, metadata and recall filters.

Every value a filter compares is a parameter, never spliced into the SQL.
"""

from __future__ import annotations

import json
import os
from typing import Any

from scoring.errors import invalid, wrong_type
from tiers.records.scope import Scope
from tiers.storage.dialect import SQLITE, Dialect

__all__ = ["new_id", "dumps", "loads", "metadata_where", "recall_filter"]


def new_id(prefix: str) -> str:
    """A fresh unique id with a readable prefix.

    >>> import uuid
    >>> new_id("fact").startswith("fact_"), uuid.UUID(new_id("fact")[5:]).version
    (True, 4)
    """
    # uuid.uuid4().hex without the UUID object: 16 random bytes, version 4 and the RFC 4122 variant set
    bits = int.from_bytes(os.urandom(16), "big") & _KEEP | _SET
    return f"{prefix}_{bits:032x}"


_KEEP = ~((0xF000 << 64) | (0xC000 << 48))
_SET = (0x4000 << 64) | (0x8000 << 48)


def dumps(value: Any) -> str:
    """JSON-encode a stored value (compact, strict: no NaN).

    >>> dumps({"a": 1}), dumps({}), dumps([])
    ('{"a":1}', '{}', '[]')
    """
    if not value and type(value) in _EMPTY:  # most metadata and source lists: no encoder for them
        return _EMPTY[type(value)]
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


_EMPTY: dict[type, str] = {dict: "{}", list: "[]"}


def loads(text: str | None, default: Any = None) -> Any:
    """Decode a stored JSON value; ``None`` gives ``default``.

    >>> loads('[1, 2]'), loads(None, {})
    ([1, 2], {})
    """
    if text is None:
        return default
    if text == "{}":  # most stored metadata (and no source messages): a new empty value, no parse
        return {}
    if text == "[]":
        return []
    return json.loads(text)


def metadata_where(where: dict[str, Any] | None, column: str = "metadata",
                   dialect: Dialect = SQLITE) -> tuple[str, list[Any]]:
    """SQL (and params) keeping rows whose JSON ``column`` has every ``key: value`` of ``where``.

    Values must be JSON scalars (str, int, float, bool or None; None also matches a
    missing key); keys and values are
    passed as parameters, never spliced into the SQL.

    >>> metadata_where({"topic": "food"})
    ("(json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?)", ['$."topic"', '$."topic"', 'food'])
    """
    if not where:
        return "TRUE", []
    if not isinstance(where, dict):
        raise wrong_type("where", "dict", where)
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in where.items():
        if not isinstance(key, str) or not key or '"' in key or "\\" in key:
            raise invalid("where", f"keys must be non-empty strings without quotes or backslashes, got {key!r}")
        if value is not None and not isinstance(value, str | int | float):  # bool is an int
            raise wrong_type(f"where[{key!r}]", "str, int, float, bool or None", value)
        clause, values = dialect.metadata_equals(column, key, value)
        clauses.append(clause)
        params += values
    return " AND ".join(clauses), params


def recall_filter(scope: Scope, *, where: dict[str, Any] | None, since: float | None,
                  time_column: str, until: float | None = None,
                  until_column: str | None = None, dialect: Dialect = SQLITE) -> tuple[str, list[Any]]:
    """SQL (and params) for what a recall may see: the scope's user and agent, the
    metadata equalities of ``where``, ``time_column >= since`` when given, and what
    existed by ``until`` (recall ``as_of``: ``until_column <= until``, by default
    ``time_column``) when given.

    >>> recall_filter(Scope("ada"), where=None, since=5.0, time_column="created_at")
    ('user_id = ? AND TRUE AND TRUE AND created_at >= ?', ['ada', 5.0])
    >>> recall_filter(Scope("ada"), where=None, since=None, time_column="created_at", until=9.0)
    ('user_id = ? AND TRUE AND TRUE AND created_at <= ?', ['ada', 9.0])
    """
    agent_sql, agent_params = scope.agent_clause()
    where_sql, where_params = metadata_where(where, dialect=dialect)
    sql = f"user_id = ? AND {agent_sql} AND {where_sql}"
    params: list[Any] = [scope.user_id, *agent_params, *where_params]
    if since is not None:
        sql += f" AND {time_column} >= ?"
        params.append(since)
    if until is not None:
        sql += f" AND {until_column or time_column} <= ?"
        params.append(until)
    return sql, params
