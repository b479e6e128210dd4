"""Correcting a fact (``correct``) and reading its versions (``fact_history``), issue 41: the
console's "edit a fact" is a supersession, so the old version stays as history."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import DAY, Clock
from unified_memory import ConflictError, MemoryValueError, NotFoundError, UnifiedMemory


def test_a_corrected_text_supersedes_the_old_version_which_stays_as_history(mem, clock):
    mem.add_turn("My dentist is Dr. Weiss, she is great.")
    old = next(f for f in mem.facts() if "dentist" in f.text)
    clock.advance(days=2)
    new = mem.correct(old.id, text="My dentist is Dr. Weis", importance=0.95, category="health")
    versions = mem.fact_history(old.id)
    assert [(f.id, f.status) for f in versions] == [(old.id, "superseded"), (new, "active")]
    before, after = versions
    assert before.superseded_by == new and before.valid_to is not None
    assert before.valid_to.timestamp() == pytest.approx(clock.now, abs=1)
    assert (after.text, after.importance, after.category) == ("My dentist is Dr. Weis", 0.95, "health")
    assert after.source_message_ids == old.source_message_ids  # it still came from that turn
    assert after.metadata["corrects"] == old.id
    assert mem.fact_history(new) == versions
    assert [h.text for h in mem.recall("who is my dentist?", tiers="long_term")][0] == "My dentist is Dr. Weis"
    assert [f.text for f in mem.facts() if "dentist" in f.text] == ["My dentist is Dr. Weis"]


def test_changing_only_the_importance_makes_a_new_version_not_a_reinforcement(mem):
    old = mem.remember("I drive a Honda Civic", importance=0.4)
    new = mem.correct(old, importance=0.9)
    assert new != old
    current = mem.facts()
    assert [(f.id, f.text, f.importance) for f in current] == [(new, "I drive a Honda Civic", 0.9)]
    assert [f.status for f in mem.fact_history(new)] == ["superseded", "active"]
    assert mem.count_facts(include_history=True) == 2


def test_a_correction_keeps_the_slot_so_a_later_statement_supersedes_it(mem):
    old = mem.remember("My phone number is 555-0101")
    fixed = mem.correct(old, text="My phone number is 555-0102")
    later = mem.remember("My phone number is 555-0199")
    assert [f.id for f in mem.fact_history(later)] == [old, fixed, later]
    assert [f.id for f in mem.facts()] == [later]


def test_correcting_a_slot_value_ends_the_relation_the_old_version_stated(mem):
    mem.add_turn("My car is a Civic.")
    old = next(f for f in mem.facts() if "Civic" in f.text)
    mem.correct(old.id, text="My car is a Golf.")
    live = {(t.predicate, t.object) for t in mem.triples() if t.valid_to is None}
    assert not any(obj == "Civic" for _, obj in live)
    assert any(obj == "Golf" for _, obj in live)


def test_an_archived_fact_can_be_corrected(clock):
    with UnifiedMemory(clock=clock, long_term_limit=1) as mem:
        low = mem.remember("I keep bees", importance=0.2)
        mem.remember("I live in Lisbon", importance=0.9)
        assert mem.fact_history(low)[0].status == "archived"
        new = mem.correct(low, text="I keep two hives of bees")
        assert mem.fact_history(new)[0].status == "superseded"
        assert "I keep two hives of bees" in [h.text for h in mem.recall("bees hives", tiers="long_term")]


def test_bad_corrections_name_the_field_and_write_nothing(mem):
    fact = mem.remember("I keep bees")
    replaced = mem.correct(fact, text="I keep wasps")
    before = mem.count_facts(include_inactive=True)
    with pytest.raises(ConflictError, match=replaced) as error:  # the old version: points at the current one
        mem.correct(fact, text="I keep hornets")
    assert error.value.field == "fact_id"
    with pytest.raises(NotFoundError) as missing:
        mem.correct("fact_nope", text="x")
    assert missing.value.field == "fact_id" and isinstance(missing.value, ValueError)
    with pytest.raises(MemoryValueError) as nothing:
        mem.correct(replaced)
    assert nothing.value.field == "text"
    for kwargs, field in [({"importance": 2}, "importance"), ({"text": "  "}, "text"), ({"category": 3}, "category")]:
        with pytest.raises((MemoryValueError, TypeError)) as bad:
            mem.correct(replaced, **kwargs)
        assert bad.value.field == field
    with pytest.raises(NotFoundError):
        mem.fact_history("fact_nope")
    assert mem.count_facts(include_inactive=True) == before


def test_another_users_fact_is_neither_corrected_nor_shown(mem):
    theirs = mem.scoped(user_id="bob").remember("Bob's PIN is 4711")
    with pytest.raises(NotFoundError):
        mem.correct(theirs, text="mine now")
    with pytest.raises(NotFoundError):
        mem.fact_history(theirs)
    assert [f.text for f in mem.scoped(user_id="bob").facts()] == ["Bob's PIN is 4711"]
    assert mem.facts() == []


def test_an_agent_corrects_only_what_it_sees(mem):
    shared = mem.remember("I keep bees")
    agent = mem.scoped(agent_id="helper")
    own = agent.remember("I prefer short answers")
    assert agent.fact_history(shared)[0].id == shared  # shared facts are visible to the agent
    other = mem.scoped(agent_id="other").remember("I like long answers")
    with pytest.raises(NotFoundError):
        agent.fact_history(other)
    new = agent.correct(own, text="I prefer very short answers")
    assert [f.id for f in agent.fact_history(new)] == [own, new]


def test_the_async_twins(mem):
    async def main() -> list[str | None]:
        fact = await mem.aremember("I keep bees")
        new = await mem.acorrect(fact, category="hobby")
        return [f.category for f in await mem.afact_history(new)]

    assert asyncio.run(main())[-1] == "hobby"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.sampled_from(["text", "importance", "category"]), st.integers(0, 9)),
                      min_size=1, max_size=6))
def test_any_chain_of_corrections_leaves_one_current_version_and_loses_none(steps):
    clock = Clock()
    with UnifiedMemory(clock=clock) as mem:
        first = current = mem.remember("I keep 1 hive of bees")
        for kind, n in steps:
            clock.advance(seconds=DAY / 24)
            change = {"text": {"text": f"I keep {n + 2} hives of bees"}, "importance": {"importance": n / 10},
                      "category": {"category": f"c{n}"}}[kind]
            current = mem.correct(current, **change)
        versions = mem.fact_history(first)
        assert len(versions) == len(steps) + 1  # nothing lost
        assert [f.status for f in versions] == ["superseded"] * len(steps) + ["active"]
        assert versions[-1].id == current and [f.id for f in mem.facts()] == [current]
        for older, newer in zip(versions, versions[1:], strict=False):
            assert older.superseded_by == newer.id
            assert older.valid_to is not None and older.valid_to <= newer.created_at or older.valid_to == newer.valid_from
