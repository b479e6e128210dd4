"""Each tier turns its own rows into typed recall candidates (tiers.candidates)."""

import itertools

from tiers.candidates import (
    CandidateQuery,
    EntityDetail,
    FactDetail,
    LinkedCandidate,
    LinkedSource,
    MessageDetail,
    RecallCandidate,
)
from tiers.episodic import EpisodicLog
from tiers.facts.long_term import FactInput, LongTermFacts
from tiers.graph.entities import EntityGraph, entity_importance
from tiers.short_term import ShortTermWindow
from tiers.storage.backend import Scope, Storage
from unified_memory.types import ExtractedTriple, Message

ADA = Scope("ada", session_id="s1")
DAY = 86400.0


def ask(text: str, *, now: float = 20 * DAY, **filters) -> CandidateQuery:
    return CandidateQuery(scope=ADA, text=text, want=10, now=now, **filters)


def test_facts_become_candidates_dated_when_stated_from_their_source_turn():
    facts = LongTermFacts(Storage(None))
    with facts.storage.atomic():
        [old] = facts.add(ADA, [FactInput("I live in Lisbon", 0.8, category="home", subject="user",
                                          attribute="residence", value="Lisbon", source_message_ids=["msg_1"],
                                          metadata={"topic": "home"})], now=DAY)
        [new] = facts.add(ADA, [FactInput("I moved to Porto from Lisbon", 0.7, subject="user", attribute="residence",
                                          value="Porto")], now=10 * DAY)
    found = {c.id: c for c in facts.recall_candidates(ask("Lisbon"))}
    assert set(found) == {old.id, new.id} and facts.recall_tiers == {"long_term"}
    stale, current = found[old.id], found[new.id]
    assert isinstance(stale, RecallCandidate) and stale.tier == "long_term" and stale.text == "I live in Lisbon"
    assert stale.source == "msg_1" and current.source == new.id  # the turn it came from, else itself
    assert stale.superseded and not current.superseded
    assert stale.detail == FactDetail(status="superseded", category="home", confidence=1.0, valid_to=10 * DAY)
    assert stale.created_at == DAY and stale.importance == 0.8
    assert stale.metadata() == {"topic": "home"} and current.metadata() == {}
    assert stale.lexical is not None and stale.matched_terms == ("lisbon",) and stale.dense is None
    assert facts.recall_candidates(ask("Lisbon", since=5 * DAY)) == [found[new.id]]


def test_entities_become_candidates_read_as_their_description():
    graph = EntityGraph(Storage(None))
    with graph.storage.atomic():
        graph.add_triples(ADA, [ExtractedTriple(subject="user", predicate="lives_in", object="Lisbon"),
                                ExtractedTriple(subject="Maria", predicate="works_at", object="Acme")], now=DAY)
        graph.add_triples(ADA, [ExtractedTriple(subject="user", predicate="lives_in", object="Porto")], now=2 * DAY)
    found = {c.detail.name: c for c in graph.recall_candidates(ask("Lisbon Maria"))
             if isinstance(c.detail, EntityDetail)}
    assert {"Lisbon", "Maria"} <= set(found) and graph.recall_tiers == {"entity"}
    lisbon, maria = found["Lisbon"], found["Maria"]
    assert lisbon.tier == "entity" and lisbon.text == "Lisbon (thing): user formerly lives in Lisbon"
    assert lisbon.superseded and not maria.superseded  # every relation of Lisbon has ended
    assert maria.detail == EntityDetail(name="Maria", type="thing", mentions=1)
    assert maria.importance == entity_importance(1) and maria.created_at == DAY and maria.source == maria.id


def test_the_graph_links_entities_for_hops():
    graph = EntityGraph(Storage(None))
    with graph.storage.atomic():
        graph.add_triples(ADA, [ExtractedTriple(subject="Biscuit", predicate="owned_by", object="Maria"),
                                ExtractedTriple(subject="Maria", predicate="works_at", object="Acme")], now=DAY)
    assert isinstance(graph, LinkedSource)
    [biscuit] = [c for c in graph.recall_candidates(ask("Biscuit")) if c.text.startswith("Biscuit")]
    [linked] = graph.linked_candidates(ask("Biscuit"), [biscuit.id])
    assert isinstance(linked, LinkedCandidate) and linked.origin == biscuit.id and linked.predicate == "owned_by"
    assert linked.candidate.detail == EntityDetail(name="Maria", type="thing", mentions=1)
    assert linked.candidate.text == "Maria (thing): Maria works at Acme; Biscuit owned by Maria"
    assert linked.candidate.lexical is None and linked.candidate.dense is None
    assert graph.linked_candidates(ask("Biscuit"), []) == []


def test_messages_in_the_window_are_short_term_the_others_episodic():
    log = EpisodicLog(Storage(None), neighbor_turns=0)
    window = ShortTermWindow(log, max_messages=1)
    with log.storage.atomic():
        logged = log.append(ADA, [Message(role="user", content="I went hiking", name="Ada", metadata={"n": 0}),
                                  Message(role="assistant", content="Hiking where?"),
                                  Message(role="user", content="Hiking in the Alps")],
                            now=5 * DAY + 0.1234567, importances=[0.5, 0.25, 0.5])
        window.extend(ADA, logged, token_counts=[3, 3, 3])
    found = {c.id: c for c in window.recall_candidates(ask("hiking"))}
    said, latest = found[logged[0].id], found[logged[2].id]
    assert (said.tier, latest.tier) == ("episodic", "short_term")
    assert window.recall_tiers == {"short_term", "episodic"}
    assert said.detail == MessageDetail(role="user", speaker="Ada", session_id="s1", own_text="Ada: I went hiking")
    assert said.text == "I went hiking" and said.importance == 0.5 and said.source == said.id
    assert said.metadata() == {"n": 0} and not said.superseded
    assert said.created_at == logged[0].message.created_at.timestamp()  # the time a Message holds (microseconds)
    assert log.recall_candidates(ask("hiking"), window=lambda scope, seqs: set()) and all(
        c.tier == "episodic" for c in log.recall_candidates(ask("hiking"), window=lambda scope, seqs: set()))


def test_graph_hops_follow_the_newest_relations_of_a_busy_entity():
    """An entity in many relations, as subject and as object: the hop reaches the entities of
    its newest relations first, however they split between the two directions."""
    graph = EntityGraph(Storage(None))
    for i in range(30):  # one relation a day, Lisbon its subject every third time
        triple = (ExtractedTriple(subject="Lisbon", predicate="near", object=f"Town{i}") if i % 3 == 0 else
                  ExtractedTriple(subject=f"Person{i}", predicate="lives_in", object="Lisbon"))
        with graph.storage.atomic():
            graph.add_triples(ADA, [triple], now=DAY + i)
    with graph.storage.atomic():  # the newest: between the two entities asked about (neither is reached by it)
        graph.add_triples(ADA, [ExtractedTriple(subject="Lisbon", predicate="near", object="Porto")], now=2 * DAY)
    ids = {c.detail.name: c.id for c in graph.recall_candidates(ask("Lisbon Porto"))}
    for limit in (1, 2, 3, 5, 40):
        linked = graph.linked_candidates(ask("Lisbon"), [ids["Lisbon"], ids["Porto"]], limit=limit)
        names = [f"Town{i}" if i % 3 == 0 else f"Person{i}" for i in range(29, -1, -1)]
        assert [entry.candidate.detail.name for entry in linked] == names[:limit]
        assert {entry.origin for entry in linked} == {ids["Lisbon"]}


def test_graph_hops_skip_the_entities_the_filter_drops_and_reach_further():
    """A hop reads the rows of the first ``limit`` linked entities, and of the others only when some
    of those fail the query's filter: either way the newest ``limit`` that pass."""
    graph = EntityGraph(Storage(None))
    for i in range(30):  # Friend0 first seen first ...
        with graph.storage.atomic():
            graph.add_triples(ADA, [ExtractedTriple(subject=f"Friend{i}", predicate="likes", object="Tea")], now=DAY + i)
    for i in range(29, -1, -1):  # ... and linked to Lisbon last: the newest relations are of those seen first
        with graph.storage.atomic():
            graph.add_triples(ADA, [ExtractedTriple(subject=f"Friend{i}", predicate="lives_in", object="Lisbon")],
                              now=2 * DAY + 30 - i)
    [lisbon] = [c.id for c in graph.recall_candidates(CandidateQuery(scope=ADA, text="Lisbon", want=50, now=20 * DAY))
                if c.detail.name == "Lisbon"]
    for limit, seen in itertools.product((1, 3, 4, 5, 8, 14, 15, 40), (2, 15)):  # Friend2 on, Friend15 on
        linked = graph.linked_candidates(ask("Lisbon", since=DAY + seen), [lisbon], limit=limit)
        assert [entry.candidate.detail.name for entry in linked] == [  # of the newest 4 x limit relations
            f"Friend{i}" for i in range(seen, min(30, 4 * limit))][:limit]
        everyone = graph.linked_candidates(ask("Lisbon"), [lisbon], limit=limit)
        assert [entry.candidate.detail.name for entry in everyone] == [f"Friend{i}" for i in range(30)][:limit]
