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
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from scoring.lexical import LexicalMatch
from scoring.temporal import stated_start
from scoring.text import normalize_key, term_set
from tiers.candidates import CandidateQuery, FactDetail, RecallCandidate
from tiers.facts.access import ACCESS_COUNT, USES_JOIN, AccessLog, last_accessed
from tiers.facts.history import current_successors, retired_sources
from tiers.facts.listing import VALID_FROM, FactFilter, count_facts, list_facts
from tiers.indexes.documents import Candidate, DocumentIndex, SearchMode
from tiers.records.types import Fact
from tiers.storage.backend import Scope, Storage, dumps, loads, new_id, recall_filter
from tiers.storage.dialect import SQLITE, Dialect

__all__ = ["LongTermFacts", "FactInput", "FactWrite", "EvictionWeights", "fact_key"]

#: What recall reads of each candidate (fewer columns read measurably faster).
_SEARCH_COLUMNS = ("id, text, importance, category, confidence, status, updated_at, valid_to, "
                   "source_message_ids, metadata")
#: What recall ``as_of`` a moment reads besides: when each fact became true and was first stated.
_AS_OF_COLUMNS = f"{_SEARCH_COLUMNS}, valid_from, created_at"
# What reinforcement and slot checks need of an existing fact.
_LOOKUP_COLUMNS = "id, text, norm_key, value, status, importance, confidence, source_message_ids, expires_at"
#: What :attr:`LongTermFacts.index` holds (archived facts are in :attr:`LongTermFacts.archive`).
_INDEXED = "('active', 'superseded')"
#: Current knowledge, for restating and supersession: an archived fact restated is active again.
_CURRENT = "('active', 'archived')"
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
    # (the fact is valid from then, or from the start its text states: scoring.temporal.stated_start)
    replaces: tuple[str, ...] = ()  # values it says are no longer current (see ExtractedFact.replaces)


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


def _same_value(a: str | None, b: str | None) -> bool:
    return (a or "").strip().casefold() == (b or "").strip().casefold()


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

    def _unarchive(self, user_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Move archived facts (lookup rows) back to the current index (call as their status changes)."""
        moved = [(row["id"], row["text"]) for row in rows if row["status"] == "archived"]
        if moved:
            self.archive.remove(user_id, [item_id for item_id, _ in moved])
            self.index.add(user_id, moved)

    # -- writes (call inside storage.atomic()) -------------------------------------------

    def add(self, scope: Scope, inputs: Sequence[FactInput], *, now: float) -> list[FactWrite]:
        """Store facts: reinforce known ones (an archived one is active again), supersede
        contradicted ones (archived ones too), insert the rest."""
        keys = [fact_key(item.text) for item in inputs]
        known = self._current_by_key(scope, set(keys))
        by_id = {row["id"]: row for row in known.values()}  # the batch's copies, by fact id
        writes: list[FactWrite] = []
        new_rows: list[list[Any]] = []
        pending: list[list[Any]] = []  # inserted in one statement before the next read or update

        def flush() -> None:
            if pending:
                self._insert(pending)
                pending.clear()

        for item, key in zip(inputs, keys, strict=True):
            existing = known.get(key)
            superseded: tuple[str, ...] = ()
            slot: list[dict[str, Any]] = []
            if existing is None and (item.subject and item.attribute or item.replaces):
                flush()  # the lookups below see every fact of this batch so far
            if existing is None and item.subject and item.attribute:
                slot = self._current_in_slot(scope, item.subject, item.attribute)
                same = sorted((r for r in slot if _same_value(r["value"], item.value)),
                              key=lambda r: r["status"] != "active")  # the active one first
                if same:  # this batch's own copy when it has one (it holds the batch's reinforcements)
                    existing = by_id.get(same[0]["id"], same[0])
                else:
                    superseded = tuple(r["id"] for r in slot)
            if existing is None and item.replaces:
                named = self._named(scope, item)
                superseded += tuple(r["id"] for r in named if r["id"] not in superseded)
                slot = [*slot, *named] if superseded else slot
                if item.attribute is None and len({(r["subject"], r["attribute"]) for r in named}) == 1 \
                        and named[0]["attribute"]:  # "I sold the Civic ...": the Civic's slot, for later updates
                    item = replace(item, subject=named[0]["subject"], attribute=named[0]["attribute"])
            if existing is not None:
                flush()  # it may be a fact of this batch
                self._reinforce(scope.user_id, existing, item, now)
                writes.append(FactWrite(existing["id"], "reinforced"))
                continue
            fact_id = new_id("fact")
            stated = item.valid_from if item.valid_from is not None else now
            start = stated_start(item.text, now=stated)
            valid_from = start if start is not None else stated
            if superseded:  # true until the new fact became true (not before it began itself)
                self.storage.executemany(
                    "UPDATE facts SET status = 'superseded', "
                    f"valid_to = {self.storage.dialect.greatest('?', 'COALESCE(valid_from, created_at)')}, "
                    "superseded_by = ?, superseded_at = ? WHERE id = ?",
                    [[valid_from, fact_id, now, old] for old in superseded])
                self._unarchive(scope.user_id, slot)  # history: searched with the current facts
                for old in superseded:  # no longer current: a later restatement is a new fact, as one by one
                    gone = by_id.pop(old, None)
                    if gone is not None and known.get(gone["norm_key"]) is gone:
                        del known[gone["norm_key"]]
            expires = now + item.ttl_days * 86400 if item.ttl_days is not None else None
            row = [fact_id, scope.user_id, scope.agent_id, scope.session_id, item.text, key, item.subject,
                   item.attribute, item.value, float(item.importance), item.category, float(item.confidence),
                   stated, stated, valid_from, expires, item.source, dumps(item.source_message_ids),
                   dumps(item.metadata), now]
            new_rows.append(row)
            pending.append(row)  # later inputs find it by key in ``known``, by slot after a flush
            known[key] = {"id": fact_id, "text": item.text, "norm_key": key, "value": item.value, "status": "active",
                          "importance": item.importance,
                          "confidence": item.confidence, "source_message_ids": dumps(item.source_message_ids),
                          "expires_at": expires}
            by_id[fact_id] = known[key]
            writes.append(FactWrite(fact_id, "created", superseded))
        flush()
        self.index.add(scope.user_id, [(row[0], row[4]) for row in new_rows])
        return writes

    def _insert(self, rows: list[list[Any]]) -> None:
        self.storage.executemany(
            "INSERT INTO facts (id, user_id, agent_id, session_id, text, norm_key, subject, attribute, value, "
            "importance, category, confidence, created_at, updated_at, valid_from, expires_at, source, "
            "source_message_ids, metadata, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
            "?)",
            rows)
        self.storage.rows_added("facts", len(rows))

    def _current_by_key(self, scope: Scope, keys: set[str]) -> dict[str, dict[str, Any]]:
        """The active or archived fact of each key (the active one when a file holds both)."""
        found: dict[str, dict[str, Any]] = {}
        ordered = sorted(keys)
        for start in range(0, len(ordered), 500):
            chunk = ordered[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.storage.query(
                f"SELECT {_LOOKUP_COLUMNS} FROM facts {self.storage.dialect.hint('facts_key')} "
                f"WHERE user_id = ? AND norm_key IN ({marks}) AND agent_id = ? AND status IN {_CURRENT} "
                "ORDER BY seq",
                [scope.user_id, *chunk, scope.agent_id],
            ):
                held = found.get(row["norm_key"])
                if held is None or (held["status"] != "active" and row["status"] == "active"):
                    found[row["norm_key"]] = row
        return found

    def _current_in_slot(self, scope: Scope, subject: str, attribute: str) -> list[dict[str, Any]]:
        """The subject's current facts on ``attribute``, or on an attribute it ends, or that
        ends it, after an underscore: "number" and "mobile_number" are one slot."""
        dialect = self.storage.dialect
        return self.storage.query(
            f"SELECT {_LOOKUP_COLUMNS} FROM facts {dialect.hint('facts_slot')} WHERE user_id = ? AND subject = ? "
            f"AND attribute IS NOT NULL AND (attribute = ? OR {dialect.ends_with_part('attribute', '?')} "
            f"OR {dialect.ends_with_part('?', 'attribute')}) "
            f"AND agent_id = ? AND status IN {_CURRENT} ORDER BY seq",
            [scope.user_id, subject, attribute, attribute, attribute, attribute, scope.agent_id])

    def _named(self, scope: Scope, item: FactInput) -> list[dict[str, Any]]:
        """The current facts that name one of ``item.replaces`` (every word of it, stemmed) and
        are about the same subject (or about no one named, or about the person the phrase
        names): "I sold the Civic" retires "I drive a Honda Civic". Facts of the same message
        are left alone ("I'm no longer at Acme - I joined Initech" is cut in two)."""
        found: dict[str, dict[str, Any]] = {}
        own = set(item.source_message_ids)
        for phrase in item.replaces:
            terms = term_set(phrase)
            if not terms:
                continue
            probe = max(terms, key=len)[:4].replace("\\", "").replace("%", "").replace("_", "")
            for row in self.storage.query(
                f"SELECT {_LOOKUP_COLUMNS}, subject, attribute FROM facts WHERE user_id = ? AND agent_id = ? "
                f"AND status IN {_CURRENT} AND text {self.storage.dialect.like_any_case} ? ORDER BY seq LIMIT 200",
                [scope.user_id, scope.agent_id, f"%{probe}%"],
            ):
                about = row["subject"]
                if (row["id"] in found or own & set(loads(row["source_message_ids"], []))
                        or not terms <= term_set(row["text"])
                        or about not in (None, "user", item.subject) and about not in terms):
                    continue
                found[row["id"]] = row
        return list(found.values())

    def _reinforce(self, user_id: str, row: dict[str, Any], item: FactInput, now: float) -> None:
        sources = loads(row["source_message_ids"], [])
        sources += [s for s in item.source_message_ids if s not in sources]
        importance = min(1.0, max(float(row["importance"]), item.importance) + _REINFORCE_BOOST)
        expires = row["expires_at"]
        if expires is not None:  # a restated fact with a TTL lives on from now
            expires = now + item.ttl_days * 86400 if item.ttl_days is not None else None
        self.storage.execute(
            "UPDATE facts SET status = CASE status WHEN 'archived' THEN 'active' ELSE status END, "
            "reinforcement_count = reinforcement_count + 1, "
            f"updated_at = {self.storage.dialect.greatest('updated_at', '?')}, "
            "importance = ?, confidence = ?, source_message_ids = ?, expires_at = ? "
            "WHERE id = ?",
            [item.valid_from if item.valid_from is not None else now, importance, max(float(row["confidence"]), item.confidence), dumps(sources), expires, row["id"]])
        self._unarchive(user_id, [row])  # restated: current knowledge again
        row.update(status="active" if row["status"] == "archived" else row["status"], importance=importance,
                   source_message_ids=dumps(sources), expires_at=expires)

    def expire(self, scope: Scope, *, now: float) -> list[str]:
        """Mark facts whose TTL ran out (active or archived) as ``expired`` and unindex them."""
        rows = self.storage.execute(
            f"SELECT id, status FROM facts {self.storage.dialect.hint('facts_expiry')} WHERE user_id = ? AND expires_at IS NOT NULL "
            f"AND expires_at <= ? AND status IN {_CURRENT}", [scope.user_id, now]).fetchall()
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
