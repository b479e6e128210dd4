"""The few pieces of SQL that SQLite and PostgreSQL spell differently, one method each.

Every statement of the tiers is written once, in the SQL both databases share (with
``?`` placeholders; the PostgreSQL connection maps them to its ``%s``). Where the two
differ, the statement asks ``storage.dialect`` for the piece: an index hint, the larger
of two values, a value inside a JSON column, the elements of a JSON array, a suffix
test, a case-blind match. Each piece is chosen here, by name, never rewritten from
another dialect's text.

    >>> SQLITE.greatest("a", "b"), POSTGRESQL.greatest("a", "b")
    ('MAX(a, b)', 'GREATEST(a, b)')
    >>> POSTGRESQL.json_text("attributes", "relation")
    "(attributes::jsonb ->> 'relation')"
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Dialect", "SQLITE", "POSTGRESQL"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """The SQL pieces of one database (:data:`SQLITE` or :data:`POSTGRESQL`)."""

    name: str

    @property
    def postgres(self) -> bool:
        """Whether this is PostgreSQL's."""
        return self.name == "postgresql"

    def hint(self, index: str) -> str:
        """``INDEXED BY index`` on SQLite, whose planner sometimes picks a worse index;
        nothing on PostgreSQL, which plans by its statistics.

        >>> SQLITE.hint("facts_id"), POSTGRESQL.hint("facts_id")
        ('INDEXED BY facts_id', '')
        """
        return "" if self.postgres else f"INDEXED BY {index}"

    def greatest(self, a: str, b: str) -> str:
        """The larger of two expressions (neither NULL where it is used)."""
        return f"GREATEST({a}, {b})" if self.postgres else f"MAX({a}, {b})"

    def least(self, a: str, b: str) -> str:
        """The smaller of two expressions (neither NULL where it is used).

        >>> SQLITE.least("1.0", "x")
        'MIN(1.0, x)'
        """
        return f"LEAST({a}, {b})" if self.postgres else f"MIN({a}, {b})"

    def exp(self, x: str) -> str:
        """``exp(x)`` for ``x <= 0``; PostgreSQL raises on underflow where SQLite gives 0,
        so there the argument is clamped first (``exp(-345)`` is 1e-150: 0 to any score, and
        a weight times it cannot underflow either).

        >>> POSTGRESQL.exp("x")
        'exp(GREATEST(x, -345.0))'
        """
        return f"exp(GREATEST({x}, -345.0))" if self.postgres else f"exp({x})"

    def flush_tiny(self, x: str) -> str:
        """``x`` (an expression without ``?``), as a factor of a product: PostgreSQL raises where
        a product of floats underflows (SQLite gives 0), so there an ``x`` below 1e-150 counts as 0.

        >>> SQLITE.flush_tiny("importance"), POSTGRESQL.flush_tiny("importance")
        ('importance', '(CASE WHEN abs(importance) < 1e-150 THEN 0.0 ELSE importance END)')
        """
        return f"(CASE WHEN abs({x}) < 1e-150 THEN 0.0 ELSE {x} END)" if self.postgres else x

    def json_text(self, column: str, key: str) -> str:
        """The text of member ``key`` (a constant of our code) of the JSON object in ``column``.

        >>> SQLITE.json_text("attributes", "relation")
        "json_extract(attributes, '$.relation')"
        """
        if self.postgres:
            return f"({column}::jsonb ->> '{key}')"
        return f"json_extract({column}, '$.{key}')"

    def json_first(self, column: str) -> str:
        """The first element (as text) of the JSON array in ``column``.

        >>> SQLITE.json_first("ids"), POSTGRESQL.json_first("ids")
        ("json_extract(ids, '$[0]')", '(ids::jsonb ->> 0)')
        """
        return f"({column}::jsonb ->> 0)" if self.postgres else f"json_extract({column}, '$[0]')"

    def json_values(self, array: str, alias: str) -> str:
        """A table (for ``FROM``) of the text elements of the JSON array ``array`` (an expression
        or ``?``), one row each in column ``alias.value``.

        >>> POSTGRESQL.json_values("?", "j")
        'jsonb_array_elements_text((?)::jsonb) AS j(value)'
        """
        if self.postgres:
            return f"jsonb_array_elements_text(({array})::jsonb) AS {alias}(value)"
        return f"json_each({array}) AS {alias}"

    def ends_with_part(self, whole: str, part: str) -> str:
        """Whether ``whole`` ends with ``'_' || part`` (``part`` a column or ``?``; each ``?``
        is used twice, in order: pass its value twice).

        >>> SQLITE.ends_with_part("attribute", "?")
        "substr(attribute, -length(?) - 1) = '_' || ?"
        """
        if self.postgres:
            return f"right({whole}, length({part}) + 1) = '_' || {part}"
        return f"substr({whole}, -length({part}) - 1) = '_' || {part}"

    @property
    def key_param(self) -> str:
        """A ``?`` standing for a key in a table of values (``VALUES (?)``, compared with a key
        column): on PostgreSQL it takes the keys' binary collation, or no index of theirs is used.

        >>> SQLITE.key_param, POSTGRESQL.key_param
        ('?', '(? COLLATE "C")')
        """
        return '(? COLLATE "C")' if self.postgres else "?"

    @property
    def like_any_case(self) -> str:
        """``LIKE`` that ignores letter case (SQLite's ``LIKE`` does, for ASCII).

        >>> SQLITE.like_any_case, POSTGRESQL.like_any_case
        ('LIKE', 'ILIKE')
        """
        return "ILIKE" if self.postgres else "LIKE"

    def same(self, column: str) -> str:
        """``column`` equal to a ``?`` parameter, NULL equal to NULL.

        >>> SQLITE.same('"a"'), POSTGRESQL.same('"a"')
        ('"a" IS ?', '"a" IS NOT DISTINCT FROM ?')
        """
        return f"{column} IS NOT DISTINCT FROM ?" if self.postgres else f"{column} IS ?"

    def metadata_equals(self, column: str, key: str, value: Any) -> tuple[str, list[Any]]:
        """SQL (and params) keeping rows whose JSON object ``column`` holds ``key: value``
        (a JSON scalar, already checked; ``None`` also matches a missing key). A number
        matches a number of the same value (``1`` matches ``1.0``), never a string or a
        boolean. ``key`` goes in as a parameter.

        >>> POSTGRESQL.metadata_equals("metadata", "topic", "food")
        ('(metadata::jsonb -> ?) = ?::jsonb', ['topic', '"food"'])
        """
        if self.postgres:
            if value is None:
                return f"COALESCE(jsonb_typeof({column}::jsonb -> ?), 'null') = 'null'", [key]
            if isinstance(value, float) and not math.isfinite(value):
                return "FALSE", []  # JSON holds no NaN or infinity: nothing matches (as on SQLite)
            return f"({column}::jsonb -> ?) = ?::jsonb", [key, json.dumps(value)]
        path = f'$."{key}"'
        if value is None:
            return f"COALESCE(json_type({column}, ?), 'null') = 'null'", [path]
        if isinstance(value, bool):
            return f"json_type({column}, ?) = ?", [path, "true" if value else "false"]
        if isinstance(value, int | float):
            return f"(json_type({column}, ?) IN ('integer', 'real') AND json_extract({column}, ?) = ?)", [path, path, value]
        return f"(json_type({column}, ?) = 'text' AND json_extract({column}, ?) = ?)", [path, path, value]


SQLITE = Dialect("sqlite")
POSTGRESQL = Dialect("postgresql")
