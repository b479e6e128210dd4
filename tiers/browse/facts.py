"""Facts as the console lists them: any statuses, a category, an importance range, a time range
(when each became true), a piece of text, four sort orders, a page; and facts over time.

    >>> from tiers.storage.backend import Storage, Scope
    >>> storage = Storage(None)
    >>> with storage.atomic():
    ...     storage.executemany("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, "
    ...                         "status) VALUES (?, 'ada', ?, ?, ?, ?, ?, ?)",
    ...                         [[f"f{i}", f"fact {i}", f"k{i}", i / 10, i * 86400, i * 86400,
    ...                           "superseded" if i == 2 else "active"] for i in range(6)])
    >>> page = browse_facts(storage, Scope("ada"), FactQuery(statuses=("active",), min_importance=0.2,
    ...                                                      sort="importance"))
    >>> [f.text for f in page.facts], page.total
    (['fact 5', 'fact 4', 'fact 3'], 3)
    >>> [f.text for f in browse_facts(storage, Scope("ada"), FactQuery(statuses=STATUSES, contains="T 2")).facts]
    ['fact 2']
    >>> [(b.start, b.count) for b in fact_timeline(storage, Scope("ada"), buckets=3)]
    [(0.0, 2), (144000.0, 2), (288000.0, 2)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tiers.facts.access import USES_JOIN
from tiers.facts.listing import VALID_FROM, _columns, row_to_fact
from tiers.records.scope import Scope
from tiers.records.types import Fact
from tiers.storage.backend import Storage

__all__ = ["FactQuery", "FactPage", "Bucket", "browse_facts", "fact_timeline", "STATUSES", "SORTS", "MAX_PAGE"]

#: Every status a stored fact can have.
STATUSES = ("active", "superseded", "archived", "expired")
#: The orders of a listing: newest or oldest stated first, most important first, last changed first.
SORTS = ("newest", "oldest", "importance", "updated")
#: The most facts one page holds.
MAX_PAGE = 500
_ORDER = {"newest": "facts.seq DESC", "oldest": "facts.seq", "importance": "importance DESC, facts.seq DESC",
          "updated": "updated_at DESC, facts.seq DESC"}


@dataclass(frozen=True)
class FactQuery:
    """Which facts, in which order, which page. ``statuses`` (any of :data:`STATUSES`; "expired":
    an active fact whose TTL passed at ``now``), ``category``, ``min_importance`` / ``max_importance``
    (inclusive), ``since`` / ``until`` (when the fact became true, as epoch seconds; ``until``
    exclusive), ``contains`` (a piece of its text, any case), ``sort`` (one of :data:`SORTS`),
    ``limit`` facts from ``offset``."""

    statuses: tuple[str, ...] = ("active",)
    category: str | None = None
    min_importance: float | None = None
    max_importance: float | None = None
    since: float | None = None
    until: float | None = None
    contains: str | None = None
    sort: Literal["newest", "oldest", "importance", "updated"] = "newest"
    limit: int = 50
    offset: int = 0
    now: float | None = None

    def where(self, storage: Storage, scope: Scope) -> tuple[str, list[Any]]:
        """``WHERE`` conditions over ``facts`` and their parameters."""
        agent_sql, params = scope.agent_clause("facts.agent_id")
        sql = f"facts.user_id = ? AND {agent_sql}"
        values: list[Any] = [scope.user_id, *params]
        stored = [s for s in self.statuses if s != "expired"]
        parts: list[str] = []
        if stored:
            parts.append(f"status IN ({', '.join('?' * len(stored))})")
            values += stored
        if "expired" in self.statuses and self.now is not None:
            parts.append("(status = 'active' AND expires_at IS NOT NULL AND expires_at <= ?)")
            values.append(self.now)
        sql += f" AND ({' OR '.join(parts)})" if parts else " AND 1 = 0"
        for condition, value in (("category = ?", self.category), ("importance >= ?", self.min_importance),
                                 ("importance <= ?", self.max_importance), (f"{VALID_FROM} >= ?", self.since),
                                 (f"{VALID_FROM} < ?", self.until)):
            if value is not None:
                sql += f" AND {condition}"
                values.append(value)
        if self.contains:
            escaped = self.contains.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            sql += f" AND text {storage.dialect.like_any_case} ? ESCAPE '\\'"
            values.append(f"%{escaped}%")
        return sql, values


@dataclass(frozen=True)
class FactPage:
    """One page of a listing and how many facts the whole listing holds."""

    facts: list[Fact]
    total: int


def browse_facts(storage: Storage, scope: Scope, query: FactQuery) -> FactPage:
    """The page of ``query`` (at most :data:`MAX_PAGE` facts) and the listing's size."""
    condition, params = query.where(storage, scope)
    limit = max(0, min(int(query.limit), MAX_PAGE))
    rows = storage.query(f"SELECT {_columns(storage.dialect)} FROM facts {USES_JOIN} WHERE {condition} "
                         f"ORDER BY {_ORDER[query.sort]} LIMIT ? OFFSET ?", [*params, limit, max(0, int(query.offset))])
    total = storage.execute(f"SELECT COUNT(*) FROM facts WHERE {condition}", params).fetchone()[0]
    return FactPage([row_to_fact(row) for row in rows], int(total))


@dataclass(frozen=True)
class Bucket:
    """Facts stated from ``start`` (epoch seconds) for ``width`` seconds."""

    start: float
    width: float
    count: int


def fact_timeline(storage: Storage, scope: Scope, *, buckets: int = 30) -> list[Bucket]:
    """When the user's facts (any status) became true, counted in ``buckets`` equal spans from the
    first to the last; empty when there are none. One pass over the user's facts: counted per hour
    in the database (at most one row per hour that holds a fact), then spread over the spans."""
    agent_sql, agent = scope.agent_clause()
    hour = (f"FLOOR({VALID_FROM} / 3600)" if storage.dialect.postgres
            else f"CAST({VALID_FROM} / 3600 AS INTEGER) - ({VALID_FROM} < 0)")  # floor, for times before 1970 too
    rows = storage.execute(f"SELECT {hour} AS h, COUNT(*), MIN({VALID_FROM}), MAX({VALID_FROM}) FROM facts "
                           f"WHERE user_id = ? AND {agent_sql} GROUP BY h", [scope.user_id, *agent]).fetchall()
    if not rows:
        return []
    low, high = min(float(r[2]) for r in rows), max(float(r[3]) for r in rows)
    buckets = max(1, int(buckets))
    width = max((high - low) / buckets, 1.0)
    counts = [0] * buckets
    if width < 2 * 3600:  # spans shorter than two hours: count each fact in its own span (a second pass)
        slot = (f"FLOOR(({VALID_FROM} - ?) / ?)" if storage.dialect.postgres
                else f"CAST(({VALID_FROM} - ?) / ? AS INTEGER)")  # the offsets are never negative
        for index, count in storage.execute(
                f"SELECT {slot} AS b, COUNT(*) FROM facts WHERE user_id = ? AND {agent_sql} GROUP BY b",
                [low, width, scope.user_id, *agent]).fetchall():
            counts[min(int(index), buckets - 1)] += int(count)  # the last fact ends the last span
    else:
        for _hour, count, first, _last in rows:  # an hour's facts go to the span of its first
            counts[min(int((float(first) - low) / width), buckets - 1)] += int(count)
    return [Bucket(low + i * width, width, counts[i]) for i in range(buckets)]
