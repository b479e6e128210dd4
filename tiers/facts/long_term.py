"""Long-term facts: importance-scored, reinforced when restated, superseded when contradicted.

* Re-stating a fact (same normalised wording, or the same value for the same
  subject and attribute) reinforces the stored fact instead of adding a copy.
* A fact with a different value for the same subject and attribute ("I live in
  Porto" after "I live in Lisbon") supersedes the old one: the old fact stays as
  history with ``valid_to`` set and ranks below (see ``RankingConfig``).
* ``long_term_limit`` bounds the *active* facts: beyond it, those with the lowest blend
  of importance, recency and use (``EvictionConfig``) are archived — kept, listed with
  ``include_archived``, still searched, in an index of their own (recall ranks them
  below active facts); facts written by the current call go last. Restating an
  archived fact makes it active again.
* Facts are bi-temporal: ``valid_from`` / ``valid_to`` say when a fact was true (from
  when it was said, or the start it states: "since March 2024", see
  :func:`scoring.temporal.stated_start`, until the statement that replaced it), and
  ``recorded_at`` / ``superseded_at`` when the memory stored and retired it. Recall
  ``as_of`` a moment sees the facts valid then.

Writes (restating, superseding, inserting) are :mod:`tiers.facts.writes`; listing is
:mod:`tiers.facts.listing`, history :mod:`tiers.facts.history`.

    >>> from tiers.storage.backend import Storage, Scope
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

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from scoring.lexical import LexicalMatch
from tiers.candidates import CandidateQuery, FactDetail, RecallCandidate
from tiers.facts.access import ACCESS_COUNT, USES_JOIN, AccessLog, last_accessed
from tiers.facts.history import current_successors, retired_sources
from tiers.facts.listing import VALID_FROM, FactFilter, count_facts, list_facts
from tiers.facts.writes import CURRENT, FactInput, FactWrite, FactWriter
from tiers.indexes.documents import Candidate, DocumentIndex, SearchMode
from tiers.records.types import Fact
from tiers.storage.backend import Scope, Storage, loads, recall_filter
from tiers.storage.dialect import SQLITE, Dialect

__all__ = ["LongTermFacts", "FactInput", "EvictionWeights"]

#: What recall reads of each candidate (fewer columns read measurably faster).
_SEARCH_COLUMNS = ("id, text, importance, category, confidence, status, updated_at, valid_to, "
                   "source_message_ids, metadata")
#: What recall ``as_of`` a moment reads besides: when each fact became true and was first stated.
_AS_OF_COLUMNS = f"{_SEARCH_COLUMNS}, valid_from, created_at"
#: What :attr:`LongTermFacts.index` holds (archived facts are in :attr:`LongTermFacts.archive`).
_INDEXED = "('active', 'superseded')"


@dataclass(frozen=True, slots=True)
class EvictionWeights:
    """See ``unified_memory.config.EvictionConfig``."""

    importance: float = 0.5
    recency: float = 0.3
    use: float = 0.2
    half_life_days: float = 30.0
    use_saturation: int = 10


def _fact_candidate(found: Candidate, as_of: float | None = None) -> RecallCandidate:
    """A found fact as recall's candidate; ``as_of``: as it stood then (a fact superseded
    since was current, and dates from when it was last stated by then, as far as known)."""
    row = found.row
    sources = loads(row["source_message_ids"], [])
    status, valid_to, stamp = row["status"], row["valid_to"], row["updated_at"]
    if as_of is not None:
        if status == "superseded" and (valid_to is None or valid_to > as_of):
            status, valid_to = "active", None
        stamp = min(row["created_at"] if stamp > as_of else stamp, as_of)
    return RecallCandidate(
        id=row["id"], tier="long_term", text=row["text"], lexical=found.lexical, dense=found.dense,
        importance=row["importance"], created_at=stamp, source=sources[0] if sources else row["id"],
        superseded=status == "superseded", metadata_json=row["metadata"],
        detail=FactDetail(status=status, category=row["category"], confidence=row["confidence"],
                          valid_to=valid_to, restated_in=sources[-1] if len(sources) > 1 else None))


def retention_order(*, now: float, weights: EvictionWeights, protect: set[str],
                    dialect: Dialect = SQLITE) -> tuple[str, list[Any]]:
    """``ORDER BY`` terms (over ``facts`` joined to its uses, :data:`~tiers.facts.access.USES_JOIN`)
    and their parameters that put first the facts retention archives first: unprotected ones,
    then lowest retention ``importance·w_i + recency·w_r + use·w_u`` (recency and use as
    :func:`scoring.decay.recency_array` and :func:`scoring.decay.usage` define them, recency from
    the later of the last statement and the last recall), then the oldest."""
    decay = -math.log(2.0) / (86400.0 * weights.half_life_days)  # recency = exp(decay · age in seconds)
    d = dialect
    stamp = d.greatest("updated_at", f"COALESCE({last_accessed(d)}, 0)")
    recency = d.exp(f"? * {d.greatest(f'? - {stamp}', '0')}")
    order = (f"facts.id IN (SELECT protected.value FROM {d.json_values('?', 'protected')}), "
             f"? * {d.flush_tiny('importance')} + ? * {recency} + ? * {d.least('1.0', f'ln(1 + {ACCESS_COUNT}) / ?')}, "
             "facts.seq")
    return order, [json.dumps(sorted(protect)), weights.importance, weights.recency, decay, now, weights.use,
                   math.log1p(weights.use_saturation)]


class LongTermFacts:
    """The ``facts`` table and its per-user indexes: ``index`` holds the active and
    superseded facts, ``archive`` the archived ones (searched apart, so that however
    many archived facts there are, searching the current ones costs what it did)."""

    recall_tiers: frozenset[str] = frozenset({"long_term"})  # what recall_candidates returns

    def __init__(self, storage: Storage, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.storage = storage
        self.index = DocumentIndex(storage, self._load_documents, kind="facts", k1=k1, b=b)
        self.archive = DocumentIndex(storage, self._load_archived, kind="archived_facts", k1=k1, b=b)
        self.uses = AccessLog(storage)  # recall's reinforcement, written in batches
        self.writes = FactWriter(storage, self.index, self.archive)  # add's lookups, reinforcement, supersession

    @property
    def indexes(self) -> tuple[DocumentIndex, DocumentIndex]:
        """Both indexes of the facts: the current ones and the archived ones."""
        return self.index, self.archive

    def _load_documents(self, user_id: str) -> list[tuple[str, str]]:
        rows = self.storage.execute(
            f"SELECT id, text FROM facts WHERE user_id = ? AND status IN {_INDEXED} ORDER BY seq",
            [user_id]).fetchall()
        return [(row[0], row[1]) for row in rows]

    def _load_archived(self, user_id: str) -> list[tuple[str, str]]:
        rows = self.storage.execute(
            "SELECT id, text FROM facts WHERE user_id = ? AND status = 'archived' ORDER BY seq", [user_id]).fetchall()
        return [(row[0], row[1]) for row in rows]

    def _has_archived(self, user_id: str) -> bool:
        return self.storage.execute(f"SELECT 1 FROM facts {self.storage.dialect.hint('facts_status')} WHERE user_id = ? "
                                    "AND status = 'archived' LIMIT 1", [user_id]).fetchone() is not None

    # -- writes (call inside storage.atomic()) -------------------------------------------

    def add(self, scope: Scope, inputs: Sequence[FactInput], *, now: float) -> list[FactWrite]:
        """Store facts: reinforce known ones (an archived one is active again), supersede
        contradicted ones (archived ones too), insert the rest (see :mod:`tiers.facts.writes`)."""
        return self.writes.add(scope, inputs, now=now)

    def expire(self, scope: Scope, *, now: float) -> list[str]:
        """Mark facts whose TTL ran out (active or archived) as ``expired`` and unindex them."""
        rows = self.storage.execute(
            f"SELECT id, status FROM facts {self.storage.dialect.hint('facts_expiry')} WHERE user_id = ? AND expires_at IS NOT NULL "
            f"AND expires_at <= ? AND status IN {CURRENT}", [scope.user_id, now]).fetchall()
        ids = [r[0] for r in rows]
        if ids:
            self.storage.executemany("UPDATE facts SET status = 'expired' WHERE id = ?", [[i] for i in ids])
            self.index.remove(scope.user_id, [r[0] for r in rows if r[1] == "active"])
            self.archive.remove(scope.user_id, [r[0] for r in rows if r[1] == "archived"])
        return ids

    def evict(self, scope: Scope, *, limit: int, now: float, protect: set[str],
              weights: EvictionWeights) -> list[str]:
        """Archive the lowest-retention active facts of the user beyond ``limit``; returns their ids.

        Retention = ``importance·w_i + recency·w_r + use·w_u``, recency decaying from the
        later of the last statement and the last recall. ``protect`` ids go last. An
        archived fact is kept and moves to :attr:`archive` (recall ranks it below active facts).
        """
        count = self.storage.execute(
            "SELECT COUNT(*) FROM facts WHERE user_id = ? AND status = 'active'", [scope.user_id]).fetchone()[0]
        excess = int(count) - limit
        if excess <= 0:
            return []
        self.uses.write_pending()  # retention weighs the uses
        # Ranked by SQLite (this runs for every write past the limit; reading the user's rows into
        # Python cost 5% of a busy service's time): :func:`retention_order` says how.
        order, params = retention_order(now=now, weights=weights, protect=protect, dialect=self.storage.dialect)
        rows = self.storage.execute(
            f"SELECT facts.seq, facts.id, facts.text FROM facts {USES_JOIN} "
            f"WHERE user_id = ? AND status = 'active' ORDER BY {order} LIMIT ?",
            [scope.user_id, *params, excess]).fetchall()
        victims = [r[1] for r in rows]
        self.storage.executemany("UPDATE facts SET status = 'archived' WHERE seq = ?", [[r[0]] for r in rows])
        self.index.remove(scope.user_id, victims)
        self.archive.add(scope.user_id, [(r[1], r[2]) for r in rows])
        return victims

    def touch(self, ids: Sequence[str], *, now: float) -> None:
        """Reinforce access: one more use, last accessed now (written in a batch, see :mod:`tiers.facts.access`)."""
        self.uses.note(ids, now=now)

    def delete_scope(self, scope: Scope) -> int:
        """Delete the user's facts (only that agent's own when the scope has an agent)."""
        agent_sql, params = ("agent_id = ?", [scope.agent_id]) if scope.agent_id else ("TRUE", [])
        cursor = self.storage.execute(f"DELETE FROM facts WHERE user_id = ? AND {agent_sql}",
                                      [scope.user_id, *params])
        self.index.reset(scope.user_id)
        self.archive.reset(scope.user_id)
        return cursor.rowcount

    # -- reads ----------------------------------------------------------------------------

    def search(self, scope: Scope, query: str, want: int, *, since: float | None = None,
               where: dict[str, Any] | None = None, now: float, vector: Any = None,
               mode: SearchMode = "lexical", as_of: float | None = None) -> list[Candidate]:
        """Candidates among the user's live facts (active, superseded or archived, not
        expired) that pass the filters. ``since`` applies to the last time the fact was stated.

        Up to ``want`` current facts (active or superseded) from :attr:`index` and, when
        the user has archived facts, up to ``want`` from :attr:`archive`: however many
        archived facts match, the best current ones are candidates. An archived fact's
        BM25 score is restated in the current index's units (the same share of the
        query's upper bound), so the two compare.

        Each candidate's ``row`` holds the columns recall needs (JSON ones still encoded);
        :meth:`recall_candidates` turns them into typed candidates, so no column name
        leaves this tier. ``as_of``: only facts that had become true by then (whatever
        followed), their rows with ``valid_from`` and ``created_at`` too."""
        sql, params = recall_filter(scope, where=where, since=since, time_column="updated_at", until=as_of,
                                    until_column=VALID_FROM, dialect=self.storage.dialect)
        columns = _SEARCH_COLUMNS if as_of is None else _AS_OF_COLUMNS
        sql += " AND (expires_at IS NULL OR expires_at > ?)"
        params = [*params, now]
        found = self.index.search(scope.user_id, query, want, table="facts", columns=columns,
                                  filter_sql=f"{sql} AND status IN {_INDEXED}", filter_params=params, vector=vector,
                                  mode=mode)
        if not self._has_archived(scope.user_id):
            return found
        archived = self.archive.search(scope.user_id, query, want, table="facts", columns=columns,
                                       filter_sql=f"{sql} AND status = 'archived'", filter_params=params,
                                       vector=vector, mode=mode)
        bound = next((c.lexical.score / c.lexical.relevance for c in found
                      if c.lexical is not None and c.lexical.relevance > 0), None)
        if bound is not None:
            archived = [c if (m := c.lexical) is None else replace(
                c, lexical=LexicalMatch(m.key, m.relevance * bound, m.relevance, m.matched_terms)) for c in archived]
        return found + archived

    def recall_candidates(self, query: CandidateQuery) -> list[RecallCandidate]:
        """:meth:`search` as recall's typed candidates (see :mod:`tiers.candidates`): a fact
        dates from when it was last stated, comes from the first message it was promoted
        from, and is history once superseded (an archived one says so in its detail) —
        or, ``as_of`` a moment, once superseded by then."""
        found = self.search(query.scope, query.text, query.want, since=query.since, where=query.where,
                            now=query.now, vector=query.vector, mode=query.mode, as_of=query.as_of)
        return [_fact_candidate(c, query.as_of) for c in found]

    def successors(self, query: CandidateQuery, ids: Sequence[str]) -> dict[str, RecallCandidate]:
        """For each superseded fact of ``ids``, the fact that holds its value now (see
        :mod:`tiers.facts.history`), as a candidate no index scored."""
        chain = current_successors(self.storage, query.scope, ids, as_of=query.as_of)
        if not chain:
            return {}
        marks = ",".join("?" * len(set(chain.values())))
        rows = {row["id"]: row for row in self.storage.query(
            f"SELECT {_AS_OF_COLUMNS} FROM facts {self.storage.dialect.hint('facts_id')} WHERE user_id = ? AND id IN ({marks})",
            [query.scope.user_id, *set(chain.values())])}
        return {old: _fact_candidate(Candidate(new, rows[new], None, None), query.as_of)
                for old, new in chain.items() if new in rows}

    def retired_sources(self, query: CandidateQuery, sources: Sequence[str]) -> dict[str, str]:
        """Of the message ids ``sources``, those a superseded fact came from, with that fact."""
        return retired_sources(self.storage, query.scope, sources, as_of=query.as_of)

    def of_categories(self, scope: Scope, categories: Sequence[str], *, limit: int, now: float | None = None,
                      as_of: float | None = None) -> list[Fact]:
        """The user's current facts (valid ``as_of``, when given) of these categories, most important
        first: what a profile is made of. The pending recall counts are not written first, as
        :meth:`list` writes them: a profile shows no counts, and a context should not write."""
        where = FactFilter(categories=tuple(categories), now=now, as_of=as_of)
        return list_facts(self.storage, scope, where, order="importance", limit=limit)

    def list(self, scope: Scope, *, include_archived: bool = False, include_inactive: bool = False,
             category: str | None = None, limit: int | None = None, order: Literal["time", "importance"] = "time",
             now: float | None = None, include_history: bool = False, as_of: float | None = None,
             offset: int = 0) -> list[Fact]:
        """The user's facts, by time or importance (see :mod:`tiers.facts.listing`): the
        active ones, the superseded ones too with ``include_history``, and the archived ones
        with ``include_archived``; every fact whatever its status with ``include_inactive``.
        ``as_of``: only those valid then (a fact superseded since among them). ``offset``:
        skip that many first (a page of ``limit`` from there)."""
        self.uses.flush()  # the records show the uses
        where = FactFilter(include_archived=include_archived, include_inactive=include_inactive, category=category,
                           now=now, include_history=include_history, as_of=as_of)
        return list_facts(self.storage, scope, where, order=order, limit=limit, offset=offset)

    def count(self, scope: Scope, *, include_archived: bool = False, include_inactive: bool = False,
              category: str | None = None, now: float | None = None, include_history: bool = False) -> int:
        """How many facts :meth:`list` gives with the same filters (no limit)."""
        where = FactFilter(include_archived=include_archived, include_inactive=include_inactive, category=category,
                           now=now, include_history=include_history)
        return count_facts(self.storage, scope, where)

    def counts(self, user_id: str) -> dict[str, int]:
        """How many of the user's facts are in each status."""
        rows = self.storage.execute(
            "SELECT status, COUNT(*) FROM facts WHERE user_id = ? GROUP BY status", [user_id]).fetchall()
        return {row[0]: int(row[1]) for row in rows}
