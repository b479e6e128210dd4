"""The graph as a user sees it (issue 40): a relation ends when the statement that replaced it
was made, and one relation has one name."""

from __future__ import annotations

from datetime import UTC, datetime

from unified_memory import UnifiedMemory

NOW = datetime(2026, 11, 28, 23, 54, tzinfo=UTC).timestamp()  # when the program runs, long after the chat


def test_a_superseded_relation_ends_when_the_new_statement_was_made_not_when_it_was_stored():
    with UnifiedMemory(user_id="ada", retrieval="lexical", clock=lambda: NOW) as mem:
        mem.add_turn("I live in Lisbon and I work at Tidewater Labs.", "Nice!", when="2024-03-02T09:19:00Z")
        mem.add_turn("Big news: I moved to Berlin last week.", "Congratulations!", when="2024-06-10T08:05:00Z")
        lisbon = [t for t in mem.triples() if t.predicate == "lives_in" and t.object == "Lisbon"]
        assert len(lisbon) == 1 and lisbon[0].valid_to == datetime(2024, 6, 10, 8, 5, tzinfo=UTC)
        old = next(f for f in mem.facts(include_history=True) if "Lisbon" in f.text)
        assert old.valid_to == lisbon[0].valid_to  # the fact and its relation ended at the same moment
        assert [t.object for t in mem.triples() if t.predicate == "lives_in" and t.valid_to is None] == ["Berlin"]


def test_one_relation_has_one_name():
    with UnifiedMemory(user_id="ada", retrieval="lexical", clock=lambda: NOW) as mem:
        mem.add_turn("My birthday is May 3.", "Noted!")
        mem.add_turn("My favorite band is Big Thief.", "Great band.")
        predicates = sorted(t.predicate for t in mem.triples())
        assert predicates.count("birthday") == 1 and "my_birthday" not in predicates
        assert [p for p in predicates if "band" in p] == ["favorite_band"]
        mem.add_turn("My favorite band is Wilco now.", "Noted.")  # the slot is single-valued: Big Thief ends
        current = {(t.predicate, t.object) for t in mem.triples() if t.valid_to is None}
        assert ("favorite_band", "Wilco") in current and ("favorite_band", "Big Thief") not in current


def test_predicates_carry_no_my_prefix_and_a_slot_stays_single_valued():
    """"My car is a Civic", then "My car is a Golf now": the relation is ``car``, and the Golf ends the
    Civic — single-valuedness is carried by the relation (``single``), not by its name."""
    with UnifiedMemory(user_id="ada", retrieval="lexical", clock=lambda: NOW) as mem:
        mem.add_turn("My car is a Civic.", "Nice.", when="2024-03-02T09:00:00Z")
        mem.add_turn("Also remind me that my dentist appointment is on June 20.", "Sure.")
        mem.add_turn("My car is a Golf now.", "Congrats!", when="2024-05-02T09:00:00Z")
        assert not [t.predicate for t in mem.triples() if t.predicate.startswith("my_")]
        cars = {t.object: t.valid_to for t in mem.triples() if t.predicate == "car"}
        assert cars["Golf"] is None and cars["Civic"] == datetime(2024, 5, 2, 9, tzinfo=UTC)
        assert [t.object for t in mem.triples() if t.predicate == "dentist_appointment"] == ["June 20"]


def _user_nodes(mem):
    return [e for e in mem.entities() if e.name in ("user", "Ada", "Addy") or "user" in e.attributes.get("aliases", [])]


def test_the_user_and_their_name_are_one_node():
    with UnifiedMemory(user_id="ada", retrieval="lexical", clock=lambda: NOW) as mem:
        mem.add_turn("Hi, I'm Ada.", "Nice to meet you, Ada!")
        mem.add_turn("I live in Lisbon and my sister Maria lives in Porto.", "Lovely.")
        [node] = _user_nodes(mem)
        assert (node.name, node.type, node.attributes.get("aliases")) == ("Ada", "person", ["user"])
        assert {t.subject for t in mem.triples() if t.predicate in ("lives_in", "has_sister")} >= {"Ada"}
        assert "name" not in {t.predicate for t in mem.triples()}
        assert [t.id for t in mem.triples(entity="Ada")] == [t.id for t in mem.triples(entity="user")] != []
        card = next(h for h in mem.recall("who is Ada?") if h.tier == "entity")
        assert card.text.startswith("Ada (person; also: user)") and "Ada lives in Lisbon" in card.text
        assert "has sister Maria" in card.text
        assert mem.profile().name == "Ada"


def test_a_new_name_renames_the_node_and_keeps_the_old_one():
    with UnifiedMemory(user_id="ada", retrieval="lexical", clock=lambda: NOW) as mem:
        mem.add_turn("Hi, I'm Ada.", "Hello!")
        mem.add_turn("I live in Lisbon.", "Nice.")
        mem.add_turn("Please call me Addy.", "Sure, Addy!")
        [node] = _user_nodes(mem)
        assert (node.name, node.attributes["aliases"]) == ("Addy", ["user", "Ada"])
        assert [t.as_text() for t in mem.triples(entity="Ada") if t.predicate == "lives_in"] == ["Addy lives in Lisbon"]
        assert mem.profile().name == "Addy"


def test_a_graph_written_before_is_merged_on_the_next_write_naming_the_user():
    """A graph of the old shape ("user" and "Ada" two entities, ``user name Ada``) becomes one node when the
    user's name is next stated; nothing the two held is lost."""
    from tiers.records.types import ExtractedEntity, ExtractedTriple
    from tiers.storage.backend import Scope
    from unified_memory.testing import internals

    with UnifiedMemory(user_id="ada", retrieval="lexical", clock=lambda: NOW) as mem:
        graph = internals(mem).graph
        scope = Scope("ada")
        with graph.storage.atomic():  # as the old code wrote it
            graph.upsert(scope, [ExtractedEntity(name="Ada", type="person", attributes={"relation": "self"})], now=1.0)
            graph.add_triples(scope, [ExtractedTriple(subject="user", predicate="lives_in", object="Lisbon"),
                                      ExtractedTriple(subject="Maria", predicate="sister_of", object="Ada")], now=1.0)
            user = graph.storage.query("SELECT id FROM entities WHERE norm_name = 'user'")[0]["id"]
            ada = graph.storage.query("SELECT id FROM entities WHERE norm_name = 'ada'")[0]["id"]
            graph.storage.execute("INSERT INTO triples (id, user_id, agent_id, subject_id, predicate, object_id, "
                                  "created_at, updated_at) VALUES ('tri_old', 'ada', '', ?, 'name', ?, 1, 1)", [user, ada])
        assert graph.own_names("ada") == ["Ada"]  # read as before
        mem.add_turn("I'm Ada, by the way.", "Noted.")
        [node] = _user_nodes(mem)
        assert node.name == "Ada" and node.mention_count >= 3
        assert {t.as_text() for t in mem.triples()} == {"Ada lives in Lisbon", "Maria sister of Ada"}
        assert graph.own_names("ada") == ["Ada"]
