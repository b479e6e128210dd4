"""``remember_many`` stores a batch as set-based work (one key lookup, inserts in one
statement between lookups, entity documents refreshed once): the outcome must be the
one of remembering the same items one by one — same facts, reinforcements,
supersessions, entities, relations and entity documents.

Restatements within the batch are compared too: a value an earlier item of the batch
superseded, restated, is current again (it used to reinforce the superseded fact), and a
fact reinforced twice in the batch, once through its slot and once by its text, is boosted
twice (the batch's copy used to miss the first boost)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.conftest import T0
from unified_memory import UnifiedMemory
from unified_memory.testing import internals

# Restated (reinforced), updated (a slot's new value supersedes the old), retired ("sold"),
# related (entities and triples) and plain facts.
PLACES = ["Lisbon", "Porto", "Berlin"]
CARS = ["Honda Civic", "Toyota Prius", "Mazda 3"]
TEMPLATES = [
    "I live in {place}", "I moved to {place}", "My car is a {car}", "I drive a {car}",
    "I sold the {car}", "My sister Maria lives in {place}", "I work at Acme in {place}",
    "I'm allergic to peanuts", "I am allergic to peanuts.", "My dentist is Dr. Lopes",
    "I like jazz on Sunday mornings", "We have {n} cats", "I play the violin", "I'm dating Mei",
]
item = st.tuples(st.sampled_from(TEMPLATES), st.sampled_from(PLACES), st.sampled_from(CARS),
                 st.sampled_from(["two", "three"]), st.sampled_from([None, 0.3, 0.9]))


def _spec(template: str, place: str, car: str, n: str, importance: float | None) -> Any:
    text = template.format(place=place, car=car, n=n)
    return text if importance is None else {"text": text, "importance": importance}


def _state(mem: UnifiedMemory) -> dict[str, Any]:
    facts = mem.facts(include_inactive=True)  # ids are random, and break ties of the order: compare texts
    text = {f.id: (f.text, f.status) for f in facts}
    store = internals(mem).storage
    return {
        "facts": sorted((f.text, f.status, f.importance, f.category, f.subject, f.attribute, f.value,
                         f.reinforcement_count, str(f.valid_to), text.get(f.superseded_by or ""), f.created_at)
                        for f in facts),
        "entities": sorted((e.name, e.type, sorted(e.attributes.items()), e.mention_count)
                           for e in mem.entities()),
        "triples": sorted((t.as_text(), t.valid_to is None) for t in mem.triples()),
        "documents": sorted((row[0], row[1], row[2]) for row in store.execute(
            "SELECT name, description, doc FROM entities WHERE user_id = ?", ["default"]).fetchall()),
        "recall": sorted(h.text for h in mem.recall("where do I live and what do I drive", limit=20)),
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(item, min_size=1, max_size=25), before=st.lists(item, max_size=5))
def test_remember_many_equals_one_by_one(batch, before):
    kept = [(*x, i < len(before)) for i, x in enumerate([*before, *batch])]
    before, specs = [x[:5] for x in kept if x[5]], [_spec(*x[:5]) for x in kept if not x[5]]
    assume(specs)
    states = []
    for bulk in (True, False):
        with UnifiedMemory(clock=lambda: T0) as mem:
            for spec in before:  # what the file already knows
                mem.remember_many([_spec(*spec)])
            if bulk:
                ids = mem.remember_many(specs)
            else:
                ids = [mem.remember(s) if isinstance(s, str) else mem.remember(**s) for s in specs]
            texts = {fact.id: (fact.text, fact.status) for fact in mem.facts(include_inactive=True)}
            states.append((_state(mem), [texts[i] for i in ids]))
    assert states[0] == states[1]


def test_a_value_superseded_earlier_in_the_batch_is_current_again_when_restated():
    texts = ["I live in Lisbon", "I live in Porto", "I live in Lisbon"]
    outcomes = []
    for bulk in (True, False):
        with UnifiedMemory(clock=lambda: T0) as mem:
            ids = mem.remember_many(texts) if bulk else [mem.remember(t) for t in texts]
            facts = {f.id: f for f in mem.facts(include_inactive=True)}
            outcomes.append(sorted((f.text, f.status, f.reinforcement_count) for f in facts.values()))
            assert facts[ids[2]].status == "active" and facts[ids[2]].text == "I live in Lisbon"
            assert ids[2] != ids[0]  # a new current fact, not the superseded one reinforced
    assert outcomes[0] == outcomes[1] == [("I live in Lisbon", "active", 0), ("I live in Lisbon", "superseded", 0),
                                          ("I live in Porto", "superseded", 0)]


def test_a_fact_reinforced_through_its_slot_then_by_its_text_is_boosted_twice():
    texts = ["I work at Acme in Porto", "I work at Acme in Lisbon", "I work at Acme in Porto"]
    outcomes = []
    for bulk in (True, False):
        with UnifiedMemory(clock=lambda: T0) as mem:
            mem.remember_many(texts) if bulk else [mem.remember(t) for t in texts]
            outcomes.append([(f.text, f.reinforcement_count, round(f.importance, 6)) for f in mem.facts()])
    assert outcomes[0] == outcomes[1] and outcomes[0][0][1] == 2
