"""Listing a user's facts: the filters of ``facts()`` as SQL, a page of them (``LIMIT`` /
``OFFSET`` in the database, not slices of every fact), and how many there are.

    >>> from tiers.storage.backend import Storage, Scope
    >>> storage = Storage(None)
    >>> with storage.atomic():
    ...     storage.executemany("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at) "
    ...                         "VALUES (?, 'ada', ?, ?, 0.5, ?, ?)", [[f"f{i}", f"fact {i}", f"k{i}", i, i]
    ...                                                                 for i in range(5)])
    >>> [f.text for f in list_facts(storage, Scope("ada"), FactFilter(), limit=2, offset=2)]
    ['fact 2', 'fact 3']
    >>> count_facts(storage, Scope("ada"), FactFilter())
    5
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from tiers.facts.access import ACCESS_COUNT, USES_JOIN, last_accessed
from tiers.records.scope import Scope
from tiers.records.types import Fact, trusted_record, utc_from_timestamp
from tiers.storage.backend import Storage
from tiers.storage.dialect import Dialect
from tiers.storage.rows import loads

__all__ = ["FactFilter", "list_facts", "count_facts", "VALID_FROM", "row_to_fact", "fact_versions", "MAX_VERSIONS"]

#: When a fact became true (rows of old files may lack ``valid_from``: they were true when stated).
VALID_FROM = "COALESCE(valid_from, created_at)"



@cache
def _columns(dialect: Dialect) -> str:
    return ("facts.seq AS seq, id, user_id, agent_id, session_id, text, norm_key, subject, attribute, value, importance, "
            f"category, confidence, status, created_at, updated_at, {last_accessed(dialect)} AS last_accessed, "
            f"{ACCESS_COUNT} AS access_count, "
            "reinforcement_count, valid_from, valid_to, superseded_by, expires_at, source, source_message_ids, metadata, "
            "recorded_at, superseded_at")


@dataclass(frozen=True)
class FactFilter:
    """Which facts a listing holds: the active ones; the superseded ones too with
    ``include_history``, the archived ones with ``include_archived``; every fact whatever
    its status with ``include_inactive``; not expired at ``now`` (when given); of
    ``category`` (or of any of ``categories``); ``as_of``: those valid then (a fact superseded
    since among them)."""

    include_archived: bool = False
    include_inactive: bool = False
    category: str | None = None
    now: float | None = None
    include_history: bool = False
    as_of: float | None = None
    categories: tuple[str, ...] | None = None

    def sql(self, scope: Scope) -> tuple[str, list[Any]]:
        """``WHERE`` conditions (and their parameters) over the ``facts`` table."""
        agent_sql, agent_params = scope.agent_clause()
        sql = f"user_id = ? AND {agent_sql}"
        params: list[Any] = [scope.user_id, *agent_params]
        include_history = self.include_history
        if self.as_of is not None:
            include_history = True
            sql += f" AND {VALID_FROM} <= ? AND (valid_to IS NULL OR valid_to > ?)"
            params += [self.as_of, self.as_of]
        if not self.include_inactive:
            statuses = ["active", *(["archived"] if self.include_archived else []),
                        *(["superseded"] if include_history else [])]
            sql += f" AND status IN ({', '.join('?' * len(statuses))})"
            params += statuses
            if self.now is not None:
                sql += " AND (expires_at IS NULL OR expires_at > ?)"
                params.append(self.now)
        if self.category is not None:
            sql += " AND category = ?"
            params.append(self.category)
        if self.categories is not None:
            sql += f" AND category IN ({', '.join('?' * len(self.categories))})" if self.categories else " AND 1 = 0"
            params += list(self.categories)
        return sql, params


def list_facts(storage: Storage, scope: Scope, where: FactFilter, *, order: Literal["time", "importance"] = "time",
               limit: int | None = None, offset: int = 0) -> list[Fact]:
    """The facts ``where`` keeps, oldest first (``order="time"``) or most important first;
    ``limit`` of them from ``offset``."""
    condition, params = where.sql(scope)
    sql = f"SELECT {_columns(storage.dialect)} FROM facts {USES_JOIN} WHERE {condition}"
    sql += " ORDER BY importance DESC, facts.seq" if order == "importance" else " ORDER BY facts.seq"
    if limit is not None:
        sql += " LIMIT ?"
        params += [int(limit)]
    if offset:  # SQLite takes OFFSET only after a LIMIT: without one, the limit is "no limit"
        sql += " OFFSET ?" if limit is not None or storage.dialect.postgres else " LIMIT -1 OFFSET ?"
        params += [int(offset)]
    return [row_to_fact(row) for row in storage.query(sql, params)]


def count_facts(storage: Storage, scope: Scope, where: FactFilter) -> int:
    """How many facts ``where`` keeps."""
    condition, params = where.sql(scope)
    return int(storage.execute(f"SELECT COUNT(*) FROM facts WHERE {condition}", params).fetchone()[0])


def row_to_fact(row: dict[str, Any]) -> Fact:
    """The record of a stored row (rows were validated on the way in)."""
    return trusted_record(Fact,
        id=row["id"], text=row["text"], importance=row["importance"], category=row["category"],
        confidence=row["confidence"], subject=row["subject"], attribute=row["attribute"], value=row["value"],
        status=row["status"], created_at=utc_from_timestamp(row["created_at"]),
        updated_at=utc_from_timestamp(row["updated_at"]), last_accessed=utc_from_timestamp(row["last_accessed"]),
        access_count=row["access_count"], reinforcement_count=row["reinforcement_count"],
        valid_from=utc_from_timestamp(row["valid_from"]), valid_to=utc_from_timestamp(row["valid_to"]),
        superseded_by=row["superseded_by"], expires_at=utc_from_timestamp(row["expires_at"]),
        source=row["source"], source_message_ids=loads(row["source_message_ids"], []),
        metadata=loads(row["metadata"], {}), user_id=row["user_id"], agent_id=row["agent_id"] or None,
        session_id=row["session_id"] or None, recorded_at=utc_from_timestamp(row["recorded_at"]),
        superseded_at=utc_from_timestamp(row["superseded_at"]),
    )


#: How many versions :func:`fact_versions` follows (a chain longer than this is cut, oldest first).
MAX_VERSIONS = 200


def fact_versions(storage: Storage, scope: Scope, fact_id: str) -> list[Fact]:
    """The versions of one fact, oldest first: the facts it superseded (and what they superseded),
    the fact, and the facts that superseded it, to the current one. Empty when the user has no
    fact ``fact_id``. Each step is one indexed lookup of the user's rows (``facts_id``,
    ``facts_superseded_by``); at most :data:`MAX_VERSIONS` facts.

    >>> storage = Storage(None)
    >>> with storage.atomic():
    ...     storage.executemany("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, "
    ...                         "status, superseded_by) VALUES (?, 'ada', ?, ?, 0.5, ?, ?, ?, ?)",
    ...                         [["f1", "I live in Lisbon", "k1", 1, 1, "superseded", "f2"],
    ...                          ["f2", "I live in Porto", "k2", 2, 2, "superseded", "f3"],
    ...                          ["f3", "I live in Berlin", "k3", 3, 3, "active", None]])
    >>> [f.text for f in fact_versions(storage, Scope("ada"), "f2")]
    ['I live in Lisbon', 'I live in Porto', 'I live in Berlin']
    >>> fact_versions(storage, Scope("bob"), "f2")
    []
    """
    columns = _columns(storage.dialect)
    by_id = f"SELECT {columns} FROM facts {USES_JOIN} WHERE facts.user_id = ? AND id = ?"
    rows = storage.query(by_id, [scope.user_id, fact_id])
    if not rows:
        return []
    seen = {rows[0]["id"]: rows[0]}
    frontier = [fact_id]
    while frontier and len(seen) < MAX_VERSIONS:  # back: what each version superseded
        marks = ",".join("?" * len(frontier))
        older = storage.query(f"SELECT {columns} FROM facts {USES_JOIN} WHERE facts.user_id = ? "
                              f"AND superseded_by IN ({marks}) ORDER BY facts.seq", [scope.user_id, *frontier])
        frontier = [row["id"] for row in older if row["id"] not in seen][:MAX_VERSIONS - len(seen)]
        seen.update((row["id"], row) for row in older if row["id"] in frontier)
    ahead = rows[0]["superseded_by"]
    while ahead and ahead not in seen and len(seen) < MAX_VERSIONS:  # forward: what replaced it, to the current
        newer = storage.query(by_id, [scope.user_id, ahead])
        if not newer:
            break
        seen[ahead] = newer[0]
        ahead = newer[0]["superseded_by"]
    ordered = sorted(seen.values(), key=lambda row: (row["valid_from"] if row["valid_from"] is not None
                                                      else row["created_at"], row["seq"]))
    return [row_to_fact(row) for row in ordered]
