"""Writing facts (:meth:`LongTermFacts.add <tiers.facts.long_term.LongTermFacts.add>`): each new
fact reinforces the stored fact it restates (the same key, or the same value in its subject's
slot), supersedes those it contradicts (another value in the slot, or a value it says it
replaces), or is inserted. A batch is written in one pass, its later facts finding its earlier
ones. Archived facts are current knowledge here: restated or superseded, they move back to the
current index.

    >>> from tiers.facts.long_term import LongTermFacts
    >>> from tiers.storage.backend import Storage, Scope
    >>> facts = LongTermFacts(Storage(None))
    >>> with facts.storage.atomic():
    ...     writes = facts.add(Scope("ada"), [FactInput("I love jazz", 0.6), FactInput("I LOVE jazz!", 0.6)], now=0.0)
    >>> [w.action for w in writes]
    ['created', 'reinforced']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from scoring.temporal import stated_start
from scoring.text import normalize_key, term_set
from tiers.indexes.documents import DocumentIndex
from tiers.storage.backend import Scope, Storage, dumps, loads, new_id

__all__ = ["FactWriter", "FactInput", "FactWrite", "fact_key", "CURRENT"]

# What reinforcement and slot checks need of an existing fact.
_LOOKUP_COLUMNS = "id, text, norm_key, value, status, importance, confidence, source_message_ids, expires_at"
#: Current knowledge, for restating and supersession: an archived fact restated is active again.
CURRENT = "('active', 'archived')"
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
    # A correction: the ids of the user's current facts it replaces. It is always a new fact (never a
    # reinforcement of one it matches: "the same text, importance 0.9" is a new version) and supersedes these.
    supersedes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FactWrite:
    """What happened to one input: ``created`` or ``reinforced`` (an existing fact),
    and which older facts it superseded."""

    id: str
    action: Literal["created", "reinforced"]
    superseded: tuple[str, ...] = ()


def _same_value(a: str | None, b: str | None) -> bool:
    return (a or "").strip().casefold() == (b or "").strip().casefold()



class FactWriter:
    """The write path of the facts tier: :meth:`add` and the lookups, reinforcement and
    supersession it does, over the tier's ``facts`` table and its two indexes (``index``:
    active and superseded facts, ``archive``: archived ones)."""

    def __init__(self, storage: Storage, index: DocumentIndex, archive: DocumentIndex) -> None:
        self.storage = storage
        self.index = index
        self.archive = archive

    def _unarchive(self, user_id: str, rows: Sequence[dict[str, Any]]) -> None:
        """Move archived facts (lookup rows) back to the current index (call as their status changes)."""
        moved = [(row["id"], row["text"]) for row in rows if row["status"] == "archived"]
        if moved:
            self.archive.remove(user_id, [item_id for item_id, _ in moved])
            self.index.add(user_id, moved)

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
            existing = None if item.supersedes else known.get(key)
            superseded: tuple[str, ...] = ()
            slot: list[dict[str, Any]] = []
            if existing is None and (item.subject and item.attribute or item.replaces or item.supersedes):
                flush()  # the lookups below see every fact of this batch so far
            if item.supersedes:  # a correction: the versions it replaces, and the rest of its slot
                slot = self._current_by_id(scope, item.supersedes)
                superseded = tuple(r["id"] for r in slot)
            if existing is None and item.subject and item.attribute:
                in_slot = [r for r in self._current_in_slot(scope, item.subject, item.attribute)
                           if r["id"] not in superseded]
                same = sorted((r for r in in_slot if _same_value(r["value"], item.value)),
                              key=lambda r: r["status"] != "active")  # the active one first
                if same and not item.supersedes:  # this batch's own copy when it has one (it holds its reinforcements)
                    existing = by_id.get(same[0]["id"], same[0])
                else:
                    slot = [*slot, *in_slot]
                    superseded += tuple(r["id"] for r in in_slot)
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
                f"WHERE user_id = ? AND norm_key IN ({marks}) AND agent_id = ? AND status IN {CURRENT} "
                "ORDER BY seq",
                [scope.user_id, *chunk, scope.agent_id],
            ):
                held = found.get(row["norm_key"])
                if held is None or (held["status"] != "active" and row["status"] == "active"):
                    found[row["norm_key"]] = row
        return found

    def _current_by_id(self, scope: Scope, ids: Sequence[str]) -> list[dict[str, Any]]:
        """The user's current (active or archived) facts of ``ids``, in the scope's agent."""
        marks = ",".join("?" * len(ids))
        return self.storage.query(
            f"SELECT {_LOOKUP_COLUMNS} FROM facts {self.storage.dialect.hint('facts_id')} WHERE user_id = ? "
            f"AND id IN ({marks}) AND agent_id = ? AND status IN {CURRENT} ORDER BY seq",
            [scope.user_id, *ids, scope.agent_id])

    def _current_in_slot(self, scope: Scope, subject: str, attribute: str) -> list[dict[str, Any]]:
        """The subject's current facts on ``attribute``, or on an attribute it ends, or that
        ends it, after an underscore: "number" and "mobile_number" are one slot."""
        dialect = self.storage.dialect
        return self.storage.query(
            f"SELECT {_LOOKUP_COLUMNS} FROM facts {dialect.hint('facts_slot')} WHERE user_id = ? AND subject = ? "
            f"AND attribute IS NOT NULL AND (attribute = ? OR {dialect.ends_with_part('attribute', '?')} "
            f"OR {dialect.ends_with_part('?', 'attribute')}) "
            f"AND agent_id = ? AND status IN {CURRENT} ORDER BY seq",
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
                f"AND status IN {CURRENT} AND text {self.storage.dialect.like_any_case} ? ORDER BY seq LIMIT 200",
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
