"""Long-term facts: importance-scored, reinforced when restated, superseded when contradicted.

* Re-stating a fact (same normalised wording, or the same value for the same
  subject and attribute) reinforces the stored fact instead of adding a copy.
* A fact with a different value for the same subject and attribute ("I live in
  Porto" after "I live in Lisbon") supersedes the old one: the old fact stays as
  history with ``valid_to`` set and ranks below (see ``RankingConfig``).
* ``long_term_limit`` evicts the active facts with the lowest blend of importance,
  recency and use (``EvictionConfig``); facts written by the current call go last.

    >>> from tiers.storage import Storage, Scope
    >>> facts = LongTermFacts(Storage(None))
    >>> scope = Scope("ada")
    >>> with facts.storage.atomic():
    ...     first = facts.add(scope, [FactInput("I live in Lisbon", 0.8, subject="user",
    ...                                         attribute="residence", value="Lisbon")], now=0.0)
    ...     second = facts.add(scope, [FactInput("I moved to Porto", 0.8, subject="user",
    ...                                          attribute="residence", value="Porto")], now=10.0)
    >>> [f.status for f in facts.list(scope, include_inactive=True)]
    ['superseded', 'active']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from scoring.decay import recency_array
from scoring.text import normalize_key
from tiers.candidates import CandidateQuery, FactDetail, RecallCandidate
from tiers.documents import Candidate, DocumentIndex, SearchMode
from tiers.storage import Scope, Storage, dumps, loads, new_id, recall_filter
from unified_memory.types import Fact, utc_from_timestamp

__all__ = ["LongTermFacts", "FactInput", "FactWrite", "EvictionWeights", "fact_key"]

_COLUMNS = (
    "seq, id, user_id, agent_id, session_id, text, norm_key, subject, attribute, value, importance, "
    "category, confidence, status, created_at, updated_at, last_accessed, access_count, "
    "reinforcement_count, valid_from, valid_to, superseded_by, expires_at, source, source_message_ids, metadata"
)
#: What recall reads of each candidate (fewer columns read measurably faster).
_SEARCH_COLUMNS = ("id, text, importance, category, confidence, status, updated_at, valid_to, "
                   "source_message_ids, metadata")
# What reinforcement and slot checks need of an existing fact.
_LOOKUP_COLUMNS = "id, norm_key, value, importance, confidence, source_message_ids, expires_at"
_REINFORCE_BOOST = 0.05


def fact_key(text: str) -> str:
    """The key facts are deduplicated by (the ``norm_key`` column): the normalised words,
    or the text itself, case-folded, when it has none.

    >>> fact_key("I'm allergic to peanuts!") == fact_key("i am allergic to peanuts")
    True
    """
    return normalize_key(text) or text.strip().casefold()


@dataclass(slots=True)
class FactInput:
    """A fact to store (already past the importance filter)."""

    text: str
    importance: float
    category: str | None = None
    confidence: float = 1.0
    subject: str | None = None
    attribute: str | None = None
    value: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    ttl_days: float | None = None
    source: str = "remember"
    source_message_ids: list[str] = field(default_factory=list)
    valid_from: float | None = None  # when it was said; created/updated times follow it (default: now)


@dataclass(frozen=True, slots=True)
class FactWrite:
    """What happened to one input: ``created`` or ``reinforced`` (an existing fact),
    and which older facts it superseded."""

    id: str
    action: Literal["created", "reinforced"]
    superseded: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class EvictionWeights:
    """See ``unified_memory.config.EvictionConfig``."""

    importance: float = 0.5
    recency: float = 0.3
    use: float = 0.2
    half_life_days: float = 30.0
    use_saturation: int = 10


def _row_to_fact(row: dict[str, Any]) -> Fact:
    return Fact.model_construct(  # stored rows were validated on the way in
        id=row["id"], text=row["text"], importance=row["importance"], category=row["category"],
        confidence=row["confidence"], subject=row["subject"], attribute=row["attribute"], value=row["value"],
        status=row["status"], created_at=utc_from_timestamp(row["created_at"]),
        updated_at=utc_from_timestamp(row["updated_at"]), last_accessed=utc_from_timestamp(row["last_accessed"]),
        access_count=row["access_count"], reinforcement_count=row["reinforcement_count"],
        valid_from=utc_from_timestamp(row["valid_from"]), valid_to=utc_from_timestamp(row["valid_to"]),
        superseded_by=row["superseded_by"], expires_at=utc_from_timestamp(row["expires_at"]),
        source=row["source"], source_message_ids=loads(row["source_message_ids"], []),
        metadata=loads(row["metadata"], {}), user_id=row["user_id"], agent_id=row["agent_id"] or None,
        session_id=row["session_id"] or None,
    )


def _fact_candidate(found: Candidate) -> RecallCandidate:
    row = found.row
    sources = loads(row["source_message_ids"], [])
    return RecallCandidate(
        id=row["id"], tier="long_term", text=row["text"], lexical=found.lexical, dense=found.dense,
        importance=row["importance"], created_at=row["updated_at"], source=sources[0] if sources else row["id"],
        superseded=row["status"] == "superseded", metadata_json=row["metadata"],
        detail=FactDetail(status=row["status"], category=row["category"], confidence=row["confidence"],
                          valid_to=row["valid_to"]))


def _same_value(a: str | None, b: str | None) -> bool:
    return (a or "").strip().casefold() == (b or "").strip().casefold()


class LongTermFacts:
    """The ``facts`` table and its per-user lexical index (active and superseded facts)."""

    recall_tiers: frozenset[str] = frozenset({"long_term"})  # what recall_candidates returns

    def __init__(self, storage: Storage, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.storage = storage
        self.index = DocumentIndex(storage, self._load_documents, kind="facts", k1=k1, b=b)

    def _load_documents(self, user_id: str) -> list[tuple[str, str]]:
        rows = self.storage.execute(
            "SELECT id, text FROM facts WHERE user_id = ? AND status IN ('active', 'superseded') ORDER BY seq",
            [user_id]).fetchall()
        return [(row[0], row[1]) for row in rows]

    # -- writes (call inside storage.atomic()) -------------------------------------------

    def add(self, scope: Scope, inputs: Sequence[FactInput], *, now: float) -> list[FactWrite]:
        """Store facts: reinforce known ones, supersede contradicted ones, insert the rest."""
        keys = [fact_key(item.text) for item in inputs]
        known = self._active_by_key(scope, set(keys))
        writes: list[FactWrite] = []
        new_rows: list[list[Any]] = []
        for item, key in zip(inputs, keys, strict=True):
            existing = known.get(key)
            superseded: tuple[str, ...] = ()
            if existing is None and item.subject and item.attribute:
                slot = self._active_in_slot(scope, item.subject, item.attribute)
                same = [r for r in slot if _same_value(r["value"], item.value)]
                if same:
                    existing = same[0]
                else:
                    superseded = tuple(r["id"] for r in slot)
            if existing is not None:
                self._reinforce(existing, item, now)
                writes.append(FactWrite(existing["id"], "reinforced"))
                continue
            fact_id = new_id("fact")
            stated = item.valid_from if item.valid_from is not None else now
            if superseded:
                self.storage.executemany(
                    "UPDATE facts SET status = 'superseded', valid_to = ?, superseded_by = ? WHERE id = ?",
                    [[stated, fact_id, old] for old in superseded])
            expires = now + item.ttl_days * 86400 if item.ttl_days is not None else None
            row = [fact_id, scope.user_id, scope.agent_id, scope.session_id, item.text, key, item.subject,
                   item.attribute, item.value, float(item.importance), item.category, float(item.confidence),
                   stated, stated, stated, expires, item.source, dumps(item.source_message_ids),
                   dumps(item.metadata)]
            new_rows.append(row)
            # Flush so a later input of this batch sees this fact (slot and key lookups).
            self._insert([row])
            known[key] = {"id": fact_id, "norm_key": key, "value": item.value, "importance": item.importance,
                          "confidence": item.confidence, "source_message_ids": dumps(item.source_message_ids),
                          "expires_at": expires}
            writes.append(FactWrite(fact_id, "created", superseded))
        self.index.add(scope.user_id, [(row[0], row[4]) for row in new_rows])
        return writes

    def _insert(self, rows: list[list[Any]]) -> None:
        self.storage.executemany(
            "INSERT INTO facts (id, user_id, agent_id, session_id, text, norm_key, subject, attribute, value, "
            "importance, category, confidence, created_at, updated_at, valid_from, expires_at, source, "
            "source_message_ids, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows)

    def _active_by_key(self, scope: Scope, keys: set[str]) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        ordered = sorted(keys)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.storage.query(
                f"SELECT {_LOOKUP_COLUMNS} FROM facts INDEXED BY facts_key "
                f"WHERE user_id = ? AND norm_key IN ({marks}) AND agent_id = ? AND status = 'active'",
                [scope.user_id, *chunk, scope.agent_id],
            ):
                found.setdefault(row["norm_key"], row)
        return found

    def _active_in_slot(self, scope: Scope, subject: str, attribute: str) -> list[dict[str, Any]]:
        return self.storage.query(
            f"SELECT {_LOOKUP_COLUMNS} FROM facts INDEXED BY facts_slot WHERE user_id = ? AND subject = ? "
            "AND attribute = ? AND attribute IS NOT NULL AND agent_id = ? AND status = 'active' ORDER BY seq",
            [scope.user_id, subject, attribute, scope.agent_id])

    def _reinforce(self, row: dict[str, Any], item: FactInput, now: float) -> None:
        sources = loads(row["source_message_ids"], [])
        sources += [s for s in item.source_message_ids if s not in sources]
        importance = min(1.0, max(float(row["importance"]), item.importance) + _REINFORCE_BOOST)
        expires = row["expires_at"]
        if expires is not None:  # a restated fact with a TTL lives on from now
            expires = now + item.ttl_days * 86400 if item.ttl_days is not None else None
        self.storage.execute(
            "UPDATE facts SET reinforcement_count = reinforcement_count + 1, updated_at = MAX(updated_at, ?), "
            "importance = ?, confidence = ?, source_message_ids = ?, expires_at = ? WHERE id = ?",
            [item.valid_from if item.valid_from is not None else now, importance, max(float(row["confidence"]), item.confidence), dumps(sources), expires, row["id"]])
        row.update(importance=importance, source_message_ids=dumps(sources), expires_at=expires)

    def expire(self, scope: Scope, *, now: float) -> list[str]:
        """Mark facts whose TTL ran out as ``expired`` and unindex them."""
        ids = [r[0] for r in self.storage.execute(
            "SELECT id FROM facts INDEXED BY facts_expiry WHERE user_id = ? AND expires_at IS NOT NULL "
            "AND expires_at <= ? AND status = 'active'", [scope.user_id, now]).fetchall()]
        self._set_status(scope.user_id, ids, "expired")
        return ids

    def evict(self, scope: Scope, *, limit: int, now: float, protect: set[str],
              weights: EvictionWeights) -> list[str]:
        """Evict the lowest-retention active facts of the user beyond ``limit``.

        Retention = ``importance·w_i + recency·w_r + use·w_u``, recency decaying from the
        later of the last statement and the last recall. ``protect`` ids go last.
        """
        count = self.storage.execute(
            "SELECT COUNT(*) FROM facts WHERE user_id = ? AND status = 'active'", [scope.user_id]).fetchone()[0]
        excess = int(count) - limit
        if excess <= 0:
            return []
        rows = self.storage.execute(
            "SELECT id, importance, MAX(updated_at, COALESCE(last_accessed, 0)), access_count, seq FROM facts "
            "WHERE user_id = ? AND status = 'active'", [scope.user_id]).fetchall()
        ids = [r[0] for r in rows]
        importance = np.array([r[1] for r in rows], dtype=np.float64)
        fresh = recency_array(now - np.array([r[2] for r in rows], dtype=np.float64), weights.half_life_days)
        use = np.minimum(1.0, np.log1p(np.array([r[3] for r in rows], dtype=np.float64))
                         / np.log1p(weights.use_saturation))
        retention = weights.importance * importance + weights.recency * fresh + weights.use * use
        protected = np.array([i in protect for i in ids], dtype=np.float64)
        seq = np.array([r[4] for r in rows], dtype=np.float64)
        order = np.lexsort((seq, retention, protected))  # unprotected first, lowest retention, oldest
        victims = [ids[i] for i in order[:excess]]
        self._set_status(scope.user_id, victims, "evicted")
        return victims

    def _set_status(self, user_id: str, ids: Sequence[str], status: str) -> None:
        if ids:
            self.storage.executemany("UPDATE facts SET status = ? WHERE id = ?", [[status, i] for i in ids])
            self.index.remove(user_id, ids)

    def touch(self, ids: Sequence[str], *, now: float) -> None:
        """Reinforce access: one more use, last accessed now."""
        if ids:
            self.storage.executemany(
                "UPDATE facts SET access_count = access_count + 1, last_accessed = ? WHERE id = ?",
                [[now, i] for i in ids])

    def delete_scope(self, scope: Scope) -> int:
        """Delete the user's facts (only that agent's own when the scope has an agent)."""
        agent_sql, params = ("agent_id = ?", [scope.agent_id]) if scope.agent_id else ("1", [])
        cursor = self.storage.execute(f"DELETE FROM facts WHERE user_id = ? AND {agent_sql}",
                                      [scope.user_id, *params])
        self.index.reset(scope.user_id)
        return cursor.rowcount

    # -- reads ----------------------------------------------------------------------------

    def search(self, scope: Scope, query: str, want: int, *, since: float | None = None,
               where: dict[str, Any] | None = None, now: float, vector: Any = None,
               mode: SearchMode = "lexical") -> list[Candidate]:
        """Candidates among the user's live facts (active or superseded, not expired)
        that pass the filters. ``since`` applies to the last time the fact was stated.

        Each candidate's ``row`` holds the columns recall needs (JSON ones still encoded);
        :meth:`recall_candidates` turns them into typed candidates, so no column name
        leaves this tier."""
        sql, params = recall_filter(scope, where=where, since=since, time_column="updated_at")
        sql += " AND status IN ('active', 'superseded') AND (expires_at IS NULL OR expires_at > ?)"
        found = self.index.search(scope.user_id, query, want, table="facts", columns=_SEARCH_COLUMNS, filter_sql=sql,
                                  filter_params=[*params, now], vector=vector, mode=mode)
        return found

    def recall_candidates(self, query: CandidateQuery) -> list[RecallCandidate]:
        """:meth:`search` as recall's typed candidates (see :mod:`tiers.candidates`): a fact
        dates from when it was last stated, comes from the first message it was promoted
        from, and is history once superseded."""
        found = self.search(query.scope, query.text, query.want, since=query.since, where=query.where,
                            now=query.now, vector=query.vector, mode=query.mode)
        return [_fact_candidate(c) for c in found]

    def list(self, scope: Scope, *, include_inactive: bool = False, category: str | None = None,
             limit: int | None = None, order: Literal["time", "importance"] = "time",
             now: float | None = None) -> list[Fact]:
        """The user's facts (active only unless ``include_inactive``), by time or importance."""
        agent_sql, agent_params = scope.agent_clause()
        sql = f"SELECT {_COLUMNS} FROM facts WHERE user_id = ? AND {agent_sql}"
        params: list[Any] = [scope.user_id, *agent_params]
        if not include_inactive:
            sql += " AND status = 'active'"
            if now is not None:
                sql += " AND (expires_at IS NULL OR expires_at > ?)"
                params.append(now)
        if category is not None:
            sql += " AND category = ?"
            params.append(category)
        sql += " ORDER BY importance DESC, seq" if order == "importance" else " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_row_to_fact(row) for row in self.storage.query(sql, params)]

    def counts(self, user_id: str) -> dict[str, int]:
        """How many of the user's facts are in each status."""
        rows = self.storage.execute(
            "SELECT status, COUNT(*) FROM facts WHERE user_id = ? GROUP BY status", [user_id]).fetchall()
        return {row[0]: int(row[1]) for row in rows}
