"""Fact history for recall: what replaced a superseded fact, and which turns stated one.

A superseded fact points forward (``superseded_by``); following the pointers ends at
the fact that holds the value now (active, or archived since). Recall asks for both
so that history never answers in place of the present: a hit that states an old
value (the fact, or the message it was promoted from) pulls its current successor
up beside it (:mod:`unified_memory.retrieval.federation`).

    >>> from tiers.storage.backend import Storage, Scope
    >>> from tiers.facts.long_term import LongTermFacts, FactInput
    >>> facts = LongTermFacts(Storage(None))
    >>> scope = Scope("ada")
    >>> with facts.storage.atomic():
    ...     [old] = facts.add(scope, [FactInput("I live in Lisbon", 0.8, subject="user", attribute="residence",
    ...                                         value="Lisbon", source_message_ids=["m1"])], now=0.0)
    ...     [new] = facts.add(scope, [FactInput("I moved to Porto", 0.8, subject="user", attribute="residence",
    ...                                         value="Porto")], now=10.0)
    >>> current_successors(facts.storage, scope, [old.id]) == {old.id: new.id}
    True
    >>> retired_sources(facts.storage, scope, ["m1", "m2"]) == {"m1": old.id}
    True
"""

from __future__ import annotations

from collections.abc import Sequence

from scoring.text import term_set
from tiers.graph.entities import EntityGraph, single_valued
from tiers.storage.backend import Scope, Storage, loads

__all__ = ["current_successors", "retired_sources", "statements", "end_stated"]

_MAX_CHAIN = 50  # a fact replaced more often than this is followed no further


def current_successors(storage: Storage, scope: Scope, ids: Sequence[str], *,
                       as_of: float | None = None) -> dict[str, str]:
    """For each superseded fact of ``ids``: the id of the fact that holds its value now
    (the end of its ``superseded_by`` chain that is not itself superseded); a fact
    whose successor is gone (forgotten, expired) has none. ``as_of`` a moment: the fact
    that held it then (a replacement that came later is not followed, nor one not yet
    true then)."""
    pending = {fact_id: fact_id for fact_id in dict.fromkeys(ids)}  # origin -> where we are in its chain
    found: dict[str, str] = {}
    for _ in range(_MAX_CHAIN):
        if not pending:
            break
        marks = ",".join("?" * len(set(pending.values())))
        rows = {row[0]: row[1:] for row in storage.execute(
            f"SELECT id, status, superseded_by, valid_from, valid_to FROM facts {storage.dialect.hint('facts_id')} "
            f"WHERE user_id = ? AND id IN ({marks})",
            [scope.user_id, *set(pending.values())]).fetchall()}
        following: dict[str, str] = {}
        for origin, at in pending.items():
            status, successor, valid_from, valid_to = rows.get(at, (None, None, None, None))
            ended = status == "superseded" and (as_of is None or (valid_to is not None and valid_to <= as_of))
            if ended and successor:
                following[origin] = successor
            elif at != origin and status in ("active", "archived", "superseded") and not ended and (
                    as_of is None or valid_from is None or valid_from <= as_of):
                found[origin] = at
        pending = following
    return found


def retired_sources(storage: Storage, scope: Scope, sources: Sequence[str], *,
                    as_of: float | None = None) -> dict[str, str]:
    """Of the message ids ``sources``: those a superseded fact of the user was first
    promoted from (the turn recall names as the fact's source), each with (one of) its
    superseded facts (``as_of``: superseded by then). An index on that first source keeps
    this a lookup however many facts were superseded."""
    wanted = list(dict.fromkeys(s for s in sources if s))
    if not wanted:
        return {}
    found: dict[str, str] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start:start + 500]
        marks = ",".join("?" * len(chunk))
        moment, moment_params = ("", []) if as_of is None else (" AND valid_to <= ?", [as_of])
        first = storage.dialect.json_first("source_message_ids")
        for fact_id, source in storage.execute(
            f"SELECT id, {first} FROM facts {storage.dialect.hint('facts_retired_source')} "
            f"WHERE user_id = ? AND status = 'superseded' AND {first} IN ({marks})"
            f"{moment} ORDER BY seq",
            [scope.user_id, *chunk, *moment_params],
        ).fetchall():
            found.setdefault(source, fact_id)
    return found


def statements(storage: Storage, scope: Scope, ids: Sequence[str]) -> list[tuple[list[str], str, float | None]]:
    """The messages each fact of ``ids`` was promoted from, with the fact's text and the end of
    its validity (for the graph to end the relations a superseded fact stated, when it ended)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    return [(loads(sources, []), text, None if valid_to is None else float(valid_to))
            for sources, text, valid_to in storage.execute(
                f"SELECT source_message_ids, text, valid_to FROM facts {storage.dialect.hint('facts_id')} "
                f"WHERE user_id = ? AND id IN ({marks})", [scope.user_id, *ids]).fetchall()]


def end_stated(graph: EntityGraph, scope: Scope, stated: Sequence[tuple[Sequence[str], str, float | None]], *,
               now: float) -> int:
    """End the live single-valued relations that superseded facts stated: for each
    ``(source message ids, fact text, valid until)`` (see :func:`statements`), those from these
    messages whose object the text names ("I drive a Civic", superseded, ends ``car Civic``),
    valid until the fact was (the time of the statement that replaced it; ``now`` when the fact
    has no end). Returns how many ended."""
    ended: dict[str, tuple[str, float]] = {}
    for sources, text, until in stated:
        if not sources:
            continue
        marks, words = ",".join("?" * len(sources)), term_set(text)
        for triple_id, predicate, object_id, name, single in graph.storage.execute(
                "SELECT t.id, t.predicate, t.object_id, o.name, t.single FROM triples t JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id "
                f"WHERE t.user_id = ? AND t.agent_id = ? AND t.valid_to IS NULL AND t.source_message_id IN ({marks})",
                [scope.user_id, scope.agent_id, *sources]).fetchall():
            if single_valued(predicate, bool(single)) and term_set(name) <= words:
                ended[triple_id] = (object_id, now if until is None else until)
    graph.storage.executemany("UPDATE triples SET valid_to = ? WHERE id = ?",
                              [[when, t] for t, (_, when) in ended.items()])
    graph.refresh(scope.user_id, {object_id for object_id, _ in ended.values()})
    return len(ended)
