"""A batch's graph writes (:class:`tiers.graph.batch.GraphBatch`: lookups per batch, one statement
per table and kind of change) leave exactly the rows the item-by-item calls
(:meth:`EntityGraph.upsert`, :meth:`EntityGraph.add_triples`) leave: every column of every entity and
relation (counts, merged attributes, types, sightings, validity, what superseded what, metadata,
insertion order), the same ids returned and the same entities reported as touched, over random
sequences of calls on a graph that already holds rows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiers.graph.batch import GraphBatch
from tiers.graph.entities import EntityGraph
from tiers.storage.backend import Scope, Storage
from unified_memory.types import ExtractedEntity, ExtractedTriple

ADA = Scope("ada")
NAMES = ["user", "Maria", "maria", "Lisbon", "Porto", " New  York", "new york", "Ada"]
PREDICATES = ["lives_in", "car", "likes", "has_sister", "name"]  # single-valued ones (by name or stated single) end the others
entity = st.builds(lambda n, t, a: ExtractedEntity(name=n, type=t, attributes=a), st.sampled_from(NAMES),
                   st.sampled_from(["thing", "person", "place", "animal"]),
                   st.dictionaries(st.sampled_from(["relation", "job", "species"]), st.sampled_from(["a", "b", "self"]),
                                   max_size=2))
triple = st.builds(lambda s, p, o, c, one: ExtractedTriple(subject=s, predicate=p, object=o, confidence=c, single=one),
                   st.sampled_from(NAMES), st.sampled_from(PREDICATES), st.sampled_from(NAMES),
                   st.sampled_from([0.5, 0.8, 1.0]), st.booleans())
call = st.tuples(st.lists(entity, max_size=2), st.lists(triple, max_size=3), st.sampled_from([5.0, 3.0, 9.0]),
                 st.sampled_from([None, {"k": 1}, {}]), st.sampled_from([None, "msg_1"]))


def _rows(graph: EntityGraph) -> dict[str, Any]:
    store = graph.storage
    names = dict(store.execute("SELECT id, norm_name FROM entities").fetchall())
    triples = store.query("SELECT * FROM triples ORDER BY seq")
    keys = {t["id"]: (names[t["subject_id"]], t["predicate"], names[t["object_id"]]) for t in triples}
    entities = [{k: v for k, v in row.items() if k not in ("seq", "id")}
                for row in store.query("SELECT * FROM entities ORDER BY seq")]
    relations = [{**{k: v for k, v in row.items() if k not in ("seq", "id", "subject_id", "object_id")},
                  "key": keys[row["id"]], "superseded_by": keys.get(row["superseded_by"])} for row in triples]
    return {"entities": entities, "triples": relations}


def _run(before: list[Any], calls: list[Any], batched: bool) -> tuple[dict[str, Any], list[Any]]:
    graph = EntityGraph(Storage(None))
    try:
        return _write(graph, before, calls, batched)
    finally:
        graph.storage.close()


def _write(graph: EntityGraph, before: list[Any], calls: list[Any], batched: bool) -> tuple[dict[str, Any], list[Any]]:
    said: list[Any] = []
    with graph.storage.atomic():
        for entities, triples, now, metadata, source in before:  # what the graph already holds
            graph.upsert(ADA, entities, now=now, metadata=metadata, reindex=False)
            graph.add_triples(ADA, triples, now=now, metadata=metadata, source_message_id=source, touched=set())
        batch = GraphBatch(graph, ADA)
        if batched:
            batch.preload(e.name for entities, *_ in calls for e in entities)
        for entities, triples, now, metadata, source in calls:
            touched: set[str] = set()
            if batched:
                upserted = batch.upsert(entities, now=now, metadata=metadata)
                ids = batch.add_triples(triples, now=now, metadata=metadata, source_message_id=source, touched=touched)
            else:
                upserted = graph.upsert(ADA, entities, now=now, metadata=metadata, reindex=False)
                ids = graph.add_triples(ADA, triples, now=now, metadata=metadata, source_message_id=source,
                                        touched=touched)
            said.append((upserted, ids, touched))
        batch.flush()
    names = dict(graph.storage.execute("SELECT id, norm_name FROM entities").fetchall())
    keys = {row[0]: (names[row[1]], row[2], names[row[3]]) for row in graph.storage.execute(
        "SELECT id, subject_id, predicate, object_id FROM triples").fetchall()}
    # (an id may be gone: an entity the user's node took in when the user said their name, and its relations)
    readable = [({k: names.get(v, "gone") for k, v in upserted.items()},
                 [keys.get(i) or ("named", names.get(i, "gone")) for i in ids], sorted(names.get(t, "gone") for t in touched))
                for upserted, ids, touched in said]
    return _rows(graph), readable


@pytest.mark.slow
@pytest.mark.sqlite_only  # many examples; a database each (below, fewer on both backends)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(call, max_size=4), calls=st.lists(call, min_size=1, max_size=8))
def test_a_batch_writes_what_the_calls_one_by_one_write(before, calls):
    assert _run(before, calls, batched=True) == _run(before, calls, batched=False)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(call, max_size=4), calls=st.lists(call, min_size=1, max_size=8))
def test_a_batch_writes_what_the_calls_one_by_one_write_on_each_backend(before, calls):
    assert _run(before, calls, batched=True) == _run(before, calls, batched=False)


def test_a_relation_ended_then_stated_again_in_one_batch_is_current_and_counted():
    lisbon = ExtractedTriple(subject="user", predicate="lives_in", object="Lisbon")
    porto = ExtractedTriple(subject="user", predicate="lives_in", object="Porto")
    before = [([], [lisbon], 1.0, None, None)]
    calls = [([], [porto], 2.0, None, None), ([], [lisbon], 3.0, {"k": 1}, "msg_1")]
    rows, _ = _run(before, calls, batched=True)
    assert rows == _run(before, calls, batched=False)[0]
    state = {t["key"][2]: (t["valid_to"], t["superseded_by"], t["mention_count"], t["updated_at"]) for t in rows["triples"]}
    assert state == {"lisbon": (None, None, 2, 3.0), "porto": (3.0, ("user", "lives_in", "lisbon"), 1, 2.0)}


def test_nothing_is_written_before_the_flush():
    graph = EntityGraph(Storage(None))
    try:
        with graph.storage.atomic():
            batch = GraphBatch(graph, ADA)
            batch.add_triples([ExtractedTriple(subject="user", predicate="likes", object="jazz")], now=1.0,
                              metadata=None, source_message_id=None, touched=set())
            assert graph.storage.execute("SELECT COUNT(*) FROM triples").fetchone()[0] == 0
            batch.flush()
            assert graph.storage.execute("SELECT COUNT(*) FROM triples").fetchone()[0] == 1
    finally:
        graph.storage.close()


def test_only_current_relations_are_ended_and_the_last_mention_dates_a_relation():
    def lives(place: str) -> ExtractedTriple:
        return ExtractedTriple(subject="user", predicate="lives_in", object=place)

    calls = [([], [lives("Lisbon")], 5.0, None, None), ([], [lives("Porto")], 6.0, None, None),
             ([], [lives("Berlin")], 7.0, None, None), ([], [lives("Porto")], 2.0, None, None)]
    rows, _ = _run([], calls, batched=True)
    assert rows == _run([], calls, batched=False)[0]
    state = {t["key"][2]: (t["valid_to"], t["superseded_by"], t["updated_at"]) for t in rows["triples"]}
    assert state == {"lisbon": (6.0, ("user", "lives_in", "porto"), 5.0), "porto": (None, None, 2.0),
                     "berlin": (2.0, ("user", "lives_in", "porto"), 7.0)}


slot = st.builds(lambda s, p, o: ExtractedTriple(subject=s, predicate=p, object=o, single=True),
                 st.sampled_from(["user", "Maria"]), st.sampled_from(["car", "gp", "favorite_band"]),
                 st.sampled_from(["Civic", "Golf", "Dr Lee", "Wilco"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(st.lists(slot, max_size=3), max_size=3), calls=st.lists(st.lists(slot, max_size=3), max_size=5))
def test_single_relations_have_at_most_one_live_object_per_subject_and_predicate(before, calls):
    """However the speaker's slots are stated (item by item or in a batch), each holds at most one live
    object: single-valuedness travels with the relation (``ExtractedTriple.single``), not its name."""
    wrap = [([], t, 1.0 + n, None, None) for n, t in enumerate(before)]
    for batched in (True, False):
        rows, _ = _run(wrap, [([], t, 9.0 + n, None, None) for n, t in enumerate(calls)], batched=batched)
        live = [t["key"][:2] for t in rows["triples"] if t["valid_to"] is None]
        assert len(live) == len(set(live))
        assert all(t["single"] == 1 for t in rows["triples"])
