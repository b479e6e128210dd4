"""The coordinator end to end: writes, promotion, recall, context, persistence, errors."""

from __future__ import annotations

import pytest

from tests.conftest import Clock
from unified_memory import (
    ConfigError,
    ContextBlock,
    MemoryTypeError,
    MemoryValueError,
    Message,
    RecallHit,
    UnifiedMemory,
    UnifiedMemoryError,
)


def chat(mem: UnifiedMemory, *lines: str) -> None:
    for line in lines:
        mem.add_turn(line, "Got it.")


# -- promotion ---------------------------------------------------------------------------------


def test_aged_out_turns_are_promoted_to_facts_and_graph(clock):
    with UnifiedMemory(short_term_limit=2, clock=clock, extract_on_write=False) as mem:
        chat(mem, "My sister Maria lives in Lisbon", "I'm allergic to peanuts", "lol ok")
        texts = {f.text for f in mem.facts()}
        assert "I'm allergic to peanuts" in texts
        assert "My sister Maria lives in Lisbon" in texts
        assert all("lol" not in t for t in texts)  # small talk stays in the log only
        assert {"Maria", "Lisbon"} <= {e.name for e in mem.entities()}
        assert "Maria lives in Lisbon" in [t.as_text() for t in mem.triples()]
        # the last turn is still in the window, not yet promoted
        assert [m.content for m in mem.window()] == ["lol ok", "Got it."]


def test_promoted_fact_carries_the_turn_metadata_and_time(clock):
    with UnifiedMemory(short_term_limit=2, clock=clock, extract_on_write=False) as mem:
        mem.add_turn("I work at Acme as an engineer", "Cool", metadata={"channel": "slack"},
                     when="2023-05-08T10:00:00Z")
        chat(mem, "next")
        [fact] = [f for f in mem.facts() if "Acme" in f.text]
        assert fact.metadata == {"channel": "slack"}
        assert fact.valid_from.isoformat().startswith("2023-05-08")
        assert fact.source == "promotion" and fact.source_message_ids
        [hit] = mem.recall("Acme", tiers=["long_term"], where={"channel": "slack"})
        assert hit.metadata == {"channel": "slack"}


def test_auto_promote_off_waits_for_consolidate(clock):
    with UnifiedMemory(short_term_limit=2, auto_promote=False, clock=clock) as mem:
        chat(mem, "I live in Lisbon", "I'm vegan")
        assert mem.facts() == [] and mem.stats().pending_promotion == 2
        assert mem.consolidate() == 2
        assert {f.text for f in mem.facts()} == {"I live in Lisbon"}
        assert mem.consolidate() == 0


def test_promotion_is_idempotent_across_restarts(db_path, clock):
    with UnifiedMemory(db_path, short_term_limit=2, auto_promote=False, clock=clock) as mem:
        chat(mem, "I'm allergic to shellfish", "filler")
    with UnifiedMemory(db_path, short_term_limit=2, auto_promote=False, clock=clock) as mem:
        assert mem.consolidate() == 2
    with UnifiedMemory(db_path, short_term_limit=2, clock=clock) as mem:
        assert mem.consolidate() == 0
        chat(mem, "more filler")
        facts = mem.facts()
        assert [f.text for f in facts] == ["I'm allergic to shellfish"]
        assert facts[0].reinforcement_count == 0


def test_contradiction_supersedes_older_fact_and_ranks_it_below(mem, clock):
    old = mem.remember("I live in Lisbon")
    clock.advance(days=30)
    new = mem.remember("I live in Berlin")
    assert [f.id for f in mem.facts()] == [new]
    history = {f.id: f for f in mem.facts(include_inactive=True)}
    assert history[old].status == "superseded" and history[old].valid_to is not None
    hits = mem.recall("where do I live", tiers=["long_term"])
    assert [h.id for h in hits] == [new, old]
    assert hits[1].components["superseded"] is True


def test_custom_importance_scorer_is_used(clock):
    with UnifiedMemory(short_term_limit=2, importance_scorer=lambda text: 1.0 if "zebra" in text else 0.0,
                       clock=clock) as mem:
        chat(mem, "I saw a zebra", "My name is Ada")
        chat(mem, "x")
        assert [f.text for f in mem.facts()] == ["I saw a zebra"]


# -- long-term -----------------------------------------------------------------------------------


def test_remember_reinforces_and_returns_same_id(mem):
    first = mem.remember("My favorite color is green")
    assert mem.remember("My favorite color is green.") == first
    assert mem.facts()[0].reinforcement_count >= 1


def test_remember_options(mem, clock):
    fact_id = mem.remember("Gate code is 4471", importance=0.2, category="access", metadata={"site": "home"},
                           ttl_days=2)
    [fact] = mem.facts()
    assert (fact.id, fact.importance, fact.category, fact.metadata) == (fact_id, 0.2, "access", {"site": "home"})
    clock.advance(days=3)
    assert mem.recall("gate code") == []
    assert mem.facts() == []


def test_long_term_limit_archives_but_spares_the_fact_just_written(clock):
    with UnifiedMemory(long_term_limit=5, clock=clock) as mem:
        written = mem.remember_many([{"text": f"important fact number {i}", "importance": 0.9} for i in range(5)])
        clock.advance(days=1)
        fresh = mem.remember("trivial remark about socks", importance=0.0)
        assert len(mem.facts()) == 5
        assert fresh in {f.id for f in mem.facts()}
        stats = mem.stats()
        assert (stats.facts, stats.archived_facts) == (5, 1)
        assert {f.id for f in mem.facts(include_archived=True)} == {*written, fresh}  # archived, not deleted


def test_low_importance_fact_is_recallable_among_many_important_ones(clock):
    with UnifiedMemory(long_term_limit=None, clock=clock) as mem:
        mem.remember_many([{"text": f"Important project deadline {i} for the quarterly report", "importance": 1.0}
                           for i in range(300)])
        mem.remember("I own a blue bicycle", importance=0.05)
        assert mem.recall("bicycle")[0].text == "I own a blue bicycle"


def test_remember_many_is_one_transaction(mem):
    with pytest.raises(MemoryValueError, match=r"texts_or_facts\[1\]"):
        mem.remember_many(["fine fact", "   "])
    assert mem.facts() == []


# -- recall ----------------------------------------------------------------------------------------


def test_recall_is_federated_and_explains_scores(clock):
    with UnifiedMemory(short_term_limit=4, clock=clock) as mem:
        chat(mem, "My sister Maria lives in Lisbon", "We hiked near Lisbon last spring")
        chat(mem, "Lisbon trams are yellow")
        hits = mem.recall("Lisbon", limit=10)
        tiers = {h.tier for h in hits}
        assert {"long_term", "entity", "short_term"} <= tiers
        # the aged-out turn is represented by the fact promoted from it (one hit per source turn)...
        assert "My sister Maria lives in Lisbon" in {h.text for h in hits if h.tier == "long_term"}
        assert "My sister Maria lives in Lisbon" not in {h.text for h in hits if h.tier == "episodic"}
        # ...and is still there when asked for by tier
        episodic = mem.recall("Lisbon", tiers="episodic")
        assert episodic[0].text == "My sister Maria lives in Lisbon" and episodic[0].components["own_match"]
        # the reply after it is found through its neighbour, and says so
        assert all(not h.components["own_match"] for h in episodic[1:])
        for hit in hits:
            assert isinstance(hit, RecallHit)
            assert {"relevance", "importance", "recency", "tier_weight", "bm25"} <= set(hit.components)
            assert 0 < hit.components["relevance"] <= 1
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        # a message is either in the window (short_term) or not (episodic), never both
        assert len({h.id for h in hits}) == len(hits)


def test_recall_filters(clock):
    with UnifiedMemory(clock=clock) as mem:
        mem.add_turn("The garden party was lovely", metadata={"topic": "social"})
        clock.advance(days=10)
        mem.add_turn("The garden needs watering", metadata={"topic": "chores"})
        assert {h.text for h in mem.recall("garden", tiers="short_term")} == {
            "The garden party was lovely", "The garden needs watering"}
        assert [h.text for h in mem.recall("garden", days=5)] == ["The garden needs watering"]
        assert [h.text for h in mem.recall("garden", where={"topic": "social"})] == ["The garden party was lovely"]
        assert mem.recall("garden", tiers=["long_term"]) == []


def test_recall_reinforces_access(mem):
    mem.remember("I play the cello")
    mem.recall("cello")
    mem.recall("cello")
    [fact] = mem.facts()
    assert fact.access_count == 2 and fact.last_accessed is not None


def test_recall_never_crosses_users(db_path, clock):
    with UnifiedMemory(db_path, user_id="ada", clock=clock) as ada:
        ada.remember("My password hint is the name of my first cat")
        ada.add_turn("my cat Whiskers", "cute")
        bob = ada.scoped(user_id="bob")
        bob.remember("I like cats")
        hits = bob.recall("cat password hint whiskers")
        assert "I like cats" in {h.text for h in hits}
        assert not any("password" in h.text or "Whiskers" in h.text for h in hits)
        assert bob.context("cat password").text.count("password") == 0
        assert all(f.user_id == "bob" for f in bob.facts())


def test_scoped_session_has_its_own_window(mem):
    mem.add_turn("hello from session one")
    other = mem.scoped(session_id="two")
    other.add_turn("hello from session two")
    assert [m.content for m in mem.window()] == ["hello from session one"]
    assert [m.content for m in other.window()] == ["hello from session two"]
    # but episodic recall spans the user's sessions
    tiers = {h.text: h.tier for h in mem.recall("session")}
    assert tiers == {"hello from session one": "short_term", "hello from session two": "episodic"}


# -- context -------------------------------------------------------------------------------------


def test_context_is_query_aware_and_within_budget(clock):
    with UnifiedMemory(short_term_limit=4, clock=clock) as mem:
        chat(mem, "I'm allergic to peanuts", "My sister Maria lives in Lisbon", "I love jazz music")
        chat(mem, "What's for dinner?")
        block = mem.context("any food allergies?", max_tokens=300)
        assert isinstance(block, ContextBlock)
        assert block.tokens <= 300 and block.tokens == mem.count_tokens(block.text)
        assert "peanuts" in block.text
        assert "dinner" in block.text  # the conversation section
        for hit in block.hits:
            assert hit.text.replace("<", "&lt;") in block.text or hit.text in block.text
        assert mem.assemble_context(300, query="any food allergies?") == block.text


def test_context_without_conversation_and_without_query(mem):
    mem.remember("I'm allergic to peanuts")
    mem.add_turn("hello there")
    assert "hello there" not in mem.context("peanuts", include_conversation=False).text
    block = mem.context()
    assert "peanuts" in block.text and "hello there" in block.text


def test_context_tiny_budget_never_overflows(mem):
    chat(mem, *[f"I like topic number {i} very much" for i in range(30)])
    for budget in (1, 5, 20, 50):
        block = mem.context("topic", max_tokens=budget)
        assert block.tokens <= budget


# -- persistence ---------------------------------------------------------------------------------


def test_reopen_restores_every_tier(db_path, clock):
    with UnifiedMemory(db_path, short_term_limit=2, clock=clock) as mem:
        chat(mem, "My sister Maria lives in Lisbon", "I'm allergic to peanuts")
        before = (mem.window(), mem.facts(), mem.entities(), mem.triples(), mem.episodes())
    with UnifiedMemory(db_path, short_term_limit=2, clock=clock) as mem:
        after = (mem.window(), mem.facts(), mem.entities(), mem.triples(), mem.episodes())
        assert after == before
        assert mem.recall("peanuts")[0].text == "I'm allergic to peanuts"


def test_clear_keeps_long_term_unless_asked(mem):
    mem.remember("I live in Lisbon")
    mem.add_turn("hello")
    mem.clear()
    assert mem.window() == [] and mem.episodes() == [] and len(mem.facts()) == 1
    mem.clear(include_long_term=True)
    assert mem.facts() == [] and mem.entities() == []


def test_tool_messages_round_trip(mem):
    ids = mem.add_messages([
        {"role": "user", "content": "weather?"},
        Message(role="assistant", tool_calls=[{"id": "c1", "type": "function",
                                                "function": {"name": "weather", "arguments": "{}"}}]),
        {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "weather"},
    ])
    assert len(ids) == 3
    window = mem.window()
    assert window[1].tool_call_ids() == ["c1"] and window[2].tool_call_id == "c1"


# -- errors --------------------------------------------------------------------------------------


@pytest.mark.parametrize("call, field, kind", [
    (lambda m: m.add_message("robot", "hi"), "message.role", MemoryValueError),
    (lambda m: m.add_message("user", None), "message.content", MemoryValueError),
    (lambda m: m.add_turn(42), "user", MemoryTypeError),
    (lambda m: m.add_turn("hi", when="yesterday"), "when", MemoryValueError),
    (lambda m: m.add_turn("hi", metadata={"x": object()}), "metadata", MemoryValueError),
    (lambda m: m.remember("x", importance=2), "importance", MemoryValueError),
    (lambda m: m.remember("x", ttl_days=0), "ttl_days", MemoryValueError),
    (lambda m: m.remember_many(["y", {"text": "x", "importance": 2}]), "texts_or_facts[1].importance",
     MemoryValueError),
    (lambda m: m.recall(""), "query", MemoryValueError),
    (lambda m: m.recall("a\x00b"), "query", MemoryValueError),
    (lambda m: m.recall("x", limit=0), "limit", MemoryValueError),
    (lambda m: m.recall("x", tiers=["cache"]), "tiers", MemoryValueError),
    (lambda m: m.recall("x", days=-1), "days", MemoryValueError),
    (lambda m: m.recall("x", where=[1]), "where", MemoryTypeError),
    (lambda m: m.context("x", max_tokens=0), "max_tokens", MemoryValueError),
    (lambda m: m.add_triple("a", "", "b"), "predicate", MemoryValueError),
    (lambda m: m.scoped(user_id=""), "user_id", MemoryValueError),
])
def test_bad_input_names_the_field(mem, call, field, kind):
    with pytest.raises(kind) as info:
        call(mem)
    assert isinstance(info.value, UnifiedMemoryError)
    assert info.value.field == field
    assert str(info.value).startswith(field)


def test_bad_message_in_batch_writes_nothing(mem):
    with pytest.raises(MemoryValueError, match=r"messages\[1\].role"):
        mem.add_messages([{"role": "user", "content": "ok"}, {"role": "bot", "content": "no"}])
    assert mem.episodes() == [] and mem.window() == []


def test_bad_config_names_the_field():
    with pytest.raises(ConfigError) as info:
        UnifiedMemory(importance_threshold=1.5)
    assert info.value.field == "importance_threshold"
    with pytest.raises(ConfigError, match="short_term_limt: unknown setting"):
        UnifiedMemory(short_term_limt=3)
    with pytest.raises(ConfigError, match="retrieval"):
        UnifiedMemory(retrieval="magic")


def test_failed_write_leaves_store_and_index_consistent(clock):
    calls = {"n": 0}

    def flaky_scorer(text: str) -> float:
        calls["n"] += 1
        if "explode" in text:
            raise RuntimeError("scorer failed")
        return 0.9

    with UnifiedMemory(short_term_limit=1, importance_scorer=flaky_scorer, clock=clock,
                       extract_on_write=False) as mem:
        mem.add_turn("I live in Lisbon")
        with pytest.raises(RuntimeError):
            mem.remember_many(["I have a dog named Rex", "please explode"])
        assert [f.text for f in mem.facts()] == []
        assert mem.recall("Rex") == []


def test_closed_memory_refuses_work():
    mem = UnifiedMemory()
    mem.close()
    with pytest.raises(UnifiedMemoryError):
        mem.recall("x")


def test_clock_moves_recency(clock):
    own = Clock(clock.now)
    with UnifiedMemory(clock=own) as mem:
        mem.remember("I went to Rome")
        fresh = mem.recall("Rome")[0].components["recency"]
        own.advance(days=60)
        stale = mem.recall("Rome")[0].components["recency"]
        assert fresh > stale > 0


def test_a_query_naming_an_entity_finds_that_entity_first(mem):
    mem.add_triple("user", "has_sister", "Maria")
    mem.add_triple("Maria", "lives_in", "Porto")
    mem.add_triple("Maria", "works_at", "Porto Hospital")
    mem.remember("My sister Maria is a nurse", importance=0.5)
    entity_hits = mem.recall("who is Maria?", tiers="entity")
    assert entity_hits[0].components["entity"] == "Maria"
    assert entity_hits[0].components["name_match"] is True


def test_remember_does_not_promote_when_auto_promote_is_off(clock):
    with UnifiedMemory(short_term_limit=1, auto_promote=False, long_term_limit=2, clock=clock) as mem:
        chat(mem, "I live in Lisbon", "filler")
        mem.remember("I like tea")
        assert [f.text for f in mem.facts()] == ["I like tea"]
        assert mem.stats().pending_promotion >= 2
        # but the long-term limit still applies to direct writes
        mem.remember_many(["I like coffee", "I like cocoa"])
        assert len(mem.facts()) == 2


def test_episodic_retention_prunes_old_promoted_messages(clock):
    with UnifiedMemory(short_term_limit=2, episodic_retention_days=30, clock=clock) as mem:
        chat(mem, "I adopted a cat named Miso")
        clock.advance(days=40)
        chat(mem, "hello again", "and again")
        episodes = [e.content for e in mem.episodes()]
        assert "I adopted a cat named Miso" not in episodes  # pruned from the log...
        assert any("Miso" in f.text for f in mem.facts())     # ...after it was promoted
        assert [e.content for e in mem.episodes(days=1)] == ["hello again", "Got it.", "and again", "Got it."]


def test_atomic_groups_writes_all_or_nothing():
    with UnifiedMemory() as mem:
        seen = []
        mem.on_event(seen.append)
        with pytest.raises(RuntimeError):
            with mem.atomic():
                mem.add_turn("I live in Lisbon", "Nice")
                mem.remember("I keep bees")
                mem.add_triple("Maria", "lives_in", "Porto")
                raise RuntimeError("changed my mind")
        assert (mem.facts(), mem.triples(), mem.episodes(), mem.window()) == ([], [], [], [])
        assert "completed" not in [e.stage for e in seen]  # started, then failed: never completed
        assert {e.kind for e in seen if e.stage == "failed"} == {e.kind for e in seen if e.stage == "started"}
        assert mem.recall("Lisbon") == [] and mem.recall("bees") == []  # the indexes followed the rollback
        seen.clear()
        with mem.atomic():
            mem.remember("I keep bees")
            mem.add_triple("Maria", "lives_in", "Porto")
            mem.add_turn("Hello there", "Hi")  # a promote event, held until the block commits
            assert "completed" not in [e.stage for e in seen]  # delivered when the outer block commits
        assert "completed" in [e.stage for e in seen]
        assert [f.text for f in mem.facts()] == ["I keep bees"]
        assert [t.as_text() for t in mem.triples()] == ["Maria lives in Porto"]


def test_a_fact_dict_with_unknown_keys_of_several_types_is_refused_naming_them_all():
    """Keys that do not sort together (an int beside strings) once escaped as a raw TypeError."""
    with UnifiedMemory() as mem:
        with pytest.raises(MemoryValueError, match=r"texts_or_facts\[0\]: unknown keys \['1', 'colour'\]"):
            mem.remember_many([{"text": "I keep bees", 1: "x", "colour": "y"}])
        assert mem.facts() == []


@pytest.mark.parametrize("metadata", [{"k": "a\x00b"}, {"k\x00": 1}, {"k": ["ok", {"deep": "\x00"}]}])
def test_nul_in_metadata_is_refused_naming_the_field_and_nothing_is_written(metadata):
    """PostgreSQL cannot read a NUL inside JSON (a filter on the row would fail): refused on both backends."""
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:
        for write in (lambda: mem.remember("I like tea", metadata=metadata),
                      lambda: mem.add_turn("I like tea", metadata=metadata),
                      lambda: mem.add_message("user", "I like tea", metadata=metadata)):
            with pytest.raises(MemoryValueError, match="metadata.*NUL"):
                write()
        assert mem.facts() == [] and mem.episodes() == []
        mem.remember("I like tea", metadata={"k": "a b"})
        assert [h.metadata for h in mem.recall("tea", where={"k": "a b"}) if h.tier == "long_term"] == [{"k": "a b"}]
