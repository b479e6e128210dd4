from tiers.graph.entities import EntityGraph, entity_importance, norm_name
from tiers.storage.backend import Scope, Storage
from unified_memory.types import ExtractedEntity, ExtractedTriple

ADA = Scope("ada")


def graph_with(*triples, scope=ADA):
    graph = EntityGraph(Storage(None))
    with graph.storage.atomic():
        graph.add_triples(scope, [ExtractedTriple(subject=s, predicate=p, object=o) for s, p, o in triples], now=0.0)
    return graph


def test_triples_create_endpoints_and_restating_reinforces():
    graph = graph_with(("user", "has_sister", "Maria"), ("Maria", "lives_in", "Lisbon"))
    with graph.storage.atomic():
        graph.add_triples(ADA, [ExtractedTriple(subject="maria", predicate="lives in", object="LISBON")], now=5.0)
    assert [t.as_text() for t in graph.triples(ADA)] == ["user has sister Maria", "Maria lives in Lisbon"]
    assert {e.name for e in graph.entities(ADA)} == {"user", "Maria", "Lisbon"}


def test_entities_merge_mentions_and_attributes():
    graph = EntityGraph(Storage(None))
    with graph.storage.atomic():
        graph.upsert(ADA, [ExtractedEntity(name="Maria", type="person", attributes={"relation": "sister"})], now=0.0)
        graph.upsert(ADA, [ExtractedEntity(name="maria", attributes={"job": "nurse"})], now=9.0)
    [maria] = graph.entities(ADA)
    assert maria.mention_count == 2 and maria.type == "person"
    assert maria.attributes == {"relation": "sister", "job": "nurse"}
    assert maria.last_seen.timestamp() == 9.0


def test_neighbors_by_depth():
    graph = graph_with(("user", "has_sister", "Maria"), ("Maria", "lives_in", "Lisbon"),
                       ("Lisbon", "located_in", "Portugal"))
    assert [t.as_text() for t in graph.neighbors(ADA, "user", depth=1)] == ["user has sister Maria"]
    assert len(graph.neighbors(ADA, "user", depth=2)) == 2
    assert len(graph.neighbors(ADA, "user", depth=3)) == 3
    assert graph.neighbors(ADA, "nobody", depth=3) == []


def test_search_finds_entity_through_its_relations():
    graph = graph_with(("user", "has_sister", "Maria"), ("Maria", "lives_in", "Lisbon"))
    found = graph.search(ADA, "where does my sister live", 5)
    assert found[0][0].row["name"] == "Maria"
    assert "Maria lives in Lisbon" in found[0][1]


def test_graph_is_per_user():
    graph = graph_with(("user", "has_sister", "Maria"))
    assert graph.search(Scope("bob"), "sister", 5) == []
    assert graph.neighbors(Scope("bob"), "user", depth=2) == []


def test_helpers():
    assert norm_name(" Maria  Silva ") == "maria silva"
    assert entity_importance(1) < entity_importance(4) <= 1.0


def test_single_valued_relations_end_the_previous_one():
    graph = graph_with(("user", "lives_in", "Lisbon"), ("user", "likes", "jazz"))
    with graph.storage.atomic():
        graph.add_triples(ADA, [ExtractedTriple(subject="user", predicate="lives_in", object="Berlin"),
                                ExtractedTriple(subject="user", predicate="likes", object="tea")], now=9.0)
    state = {t.as_text(): t.valid_to for t in graph.triples(ADA)}
    assert state["user lives in Lisbon"].timestamp() == 9.0
    assert state["user lives in Berlin"] is None
    assert state["user likes jazz"] is None and state["user likes tea"] is None  # likes is many-valued
    [(_, lisbon)] = [r for r in graph.search(ADA, "Lisbon", 5) if r[0].row["name"] == "Lisbon"]
    assert lisbon == "Lisbon (thing): user formerly lives in Lisbon"
    # moving back revives the old relation and ends the other
    with graph.storage.atomic():
        graph.add_triples(ADA, [ExtractedTriple(subject="user", predicate="lives_in", object="Lisbon")], now=20.0)
    state = {t.as_text(): t.valid_to for t in graph.triples(ADA)}
    assert state["user lives in Lisbon"] is None and state["user lives in Berlin"].timestamp() == 20.0
