"""The profile: the user's current key facts, safety first, in every context block whatever the query."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unified_memory import UnifiedMemory
from unified_memory.config import ContextConfig
from unified_memory.demo import ingest_sample
from unified_memory.retrieval.context import assemble, informative
from unified_memory.retrieval.profile import PROFILE_CATEGORIES
from unified_memory.retrieval.tokens import chars_per_token_counter
from unified_memory.types import RecallHit

# -- the demo's question (issue 40) ----------------------------------------------------------------


def test_the_demos_dinner_question_at_250_tokens_carries_the_allergy(tmp_path):
    with UnifiedMemory(tmp_path / "demo.db", user_id="ada", retrieval="lexical") as mem:
        ingest_sample(mem)
        block = mem.context("plan a dinner for Maria's visit", max_tokens=250)
    assert block.tokens <= 250
    assert "allergic to peanuts" in block.text
    lines = block.text.splitlines()
    assert lines[1] == "## Profile" and "allergic to peanuts" in lines[2]  # the profile first, safety first
    assert block.sections["profile"].items >= 1
    assert block.text.count("allergic to peanuts") == 1  # not repeated in the facts below
    episodes = block.text.partition("## Episodes")[2].partition("## ")[0]
    for line in episodes.splitlines():
        assert not line.endswith(("thanks!", ": ok", ": Thanks!"))


# -- a corpus of our own: safety facts at small budgets ------------------------------------------------

SAFETY = ["I'm allergic to peanuts", "I have type 1 diabetes and carry insulin", "I'm allergic to penicillin"]
OTHER = ["I love jazz and old films", "My sister Maria lives in Lisbon", "I work at Kestrel Robotics as an engineer",
         "I live in Porto", "My dentist appointment is on June 20", "We watched a documentary about bees",
         "The weather was lovely on Saturday", "I'm training for the Lisbon marathon", "My favourite colour is green"]
QUESTIONS = ["plan a dinner for Maria's visit", "what should I pack for the trip?", "book a restaurant for Friday",
             "suggest a weekend activity", "any ideas for a birthday present?", "what was that documentary about?",
             "", "tell me about bees"]


@pytest.fixture
def corpus(tmp_path):
    """One memory: the safety facts among everyday ones and 60 unrelated notes (built once per test,
    on the test's backend; the examples of the property share it)."""
    path = tmp_path / "corpus.db"
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:
        mem.remember_many([*OTHER[:4], *SAFETY, *OTHER[4:]])
        mem.remember_many([f"Note {i}: the {w} shop near the station sells {w} things" for i, w in
                           enumerate(["bike", "book", "tea", "lamp", "map", "kite"] * 10)])
    return path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(question=st.sampled_from(QUESTIONS), budget=st.integers(80, 600))
def test_safety_facts_are_in_every_context_from_small_budgets(corpus, question, budget):
    with UnifiedMemory(corpus, user_id="ada", retrieval="lexical") as mem:
        block = mem.context(question or None, max_tokens=budget)
    assert block.tokens <= budget
    assert any(fact in block.text for fact in SAFETY)  # a safety fact fits any budget from 80 tokens
    profile = block.text.partition("## Profile\n")[2].partition("\n## ")[0].partition("\n</")[0]
    shown = [line[2:] for line in profile.splitlines()]
    assert shown and shown[0] in SAFETY  # safety first (a later, shorter key fact may fill the room left)
    if budget >= 300:
        assert all(fact in block.text for fact in SAFETY)


def test_the_profile_changes_when_the_facts_change():
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:
        mem.remember("I'm vegetarian")
        assert [f.text for f in mem.profile().facts] == ["I'm vegetarian"]
        mem.remember("I started eating fish again, so I'm pescatarian now")
        profile = mem.profile()
        assert [f.text for f in profile.facts] == ["I started eating fish again, so I'm pescatarian now"]
        assert "vegetarian" not in mem.context("what's for dinner?", max_tokens=120).text.partition("## Facts")[0]
        gone = mem.remember("I'm allergic to shellfish")
        assert mem.profile().facts[0].text == "I'm allergic to shellfish"
        mem.forget(ids=[gone])
        assert "shellfish" not in mem.profile().text


def test_the_profile_is_the_users_own_and_as_of_a_moment():
    with UnifiedMemory(user_id="ada", retrieval="lexical", clock=lambda: 1_700_000_000.0) as mem:
        mem.add_turn("Hi, I'm Ada. I live in Lisbon.", "Hello Ada!")
        bob = mem.scoped(user_id="bob")
        bob.remember("I'm allergic to cats")
        assert mem.profile().name == "Ada"
        assert "cats" not in mem.profile().text and "Lisbon" not in bob.profile().text
        assert mem.profile(as_of="2000-01-01").facts == []
        mem.add_turn("We moved to Berlin.", "Exciting!", when=1_700_000_000.0 + 30 * 86400)
        assert [f.text for f in mem.profile().facts if "Lisbon" in f.text or "Berlin" in f.text] == [
            "We moved to Berlin."]
        then = [f.text for f in mem.profile(as_of=1_700_000_000.0 + 86400).facts]
        assert any("Lisbon" in t for t in then) and not any("Berlin" in t for t in then)  # as it was then
    with pytest.raises(ValueError, match="as_of"):
        UnifiedMemory().profile(as_of="not a date")


def test_a_zero_share_turns_the_profile_section_off():
    with UnifiedMemory(user_id="ada", retrieval="lexical", context={"profile_share": 0}) as mem:
        mem.remember("I'm allergic to peanuts")
        block = mem.context("plan a trip", max_tokens=200)
    assert "## Profile" not in block.text and "profile" not in block.sections


def test_low_information_turns_do_not_crowd_out_informative_ones():
    with UnifiedMemory(user_id="ada", retrieval="lexical", short_term_limit=2) as mem:
        for user, assistant in [("thanks!", "ok"), ("We planned the dinner for Maria on Saturday", "Great plan"),
                                ("ok", "thanks!"), ("Maria likes mushroom risotto for dinner", "Noted")] * 2:
            mem.add_turn(user, assistant)
        block = mem.context("dinner for Maria", max_tokens=400)
    episodes = block.text.partition("## Episodes\n")[2]
    assert "risotto" in episodes and "planned the dinner" in episodes
    assert not any(line.endswith((": thanks!", ": ok")) for line in episodes.splitlines())
    assert [informative(t) for t in ("thanks!", "ok", "Sure.", "Maria likes risotto")] == [False, False, False, True]


# -- the assembly: the profile's share, first place and budget --------------------------------------

def _hits(texts, prefix):
    return [RecallHit(id=f"{prefix}{i}", tier="long_term", text=t, score=float(len(texts) - i))
            for i, t in enumerate(texts)]


@settings(max_examples=150, deadline=None)
@given(profile=st.lists(st.text(min_size=1, max_size=40), max_size=6),
       facts=st.lists(st.text(min_size=1, max_size=40), max_size=6),
       budget=st.integers(1, 300), share=st.floats(0, 1), cap=st.integers(0, 200))
def test_the_profile_keeps_its_share_comes_first_and_the_budget_holds(profile, facts, budget, share, cap):
    config = ContextConfig(profile_share=share, profile_max_tokens=cap)
    profile_hits = _hits(profile, "p")
    fact_hits = [*_hits(facts, "f"), *profile_hits[:2]]  # a recalled fact may also be a profile fact
    block = assemble(query="q", max_tokens=budget, sections={"facts": fact_hits}, conversation=[],
                     count_tokens=chars_per_token_counter, config=config, profile=profile_hits)
    assert block.tokens <= budget
    available = max(budget - chars_per_token_counter("<memory>\n</memory>"), 0)
    usage = block.sections.get("profile")
    if usage is not None and usage.items:
        assert usage.tokens <= min(int(available * share), cap)
        assert block.text.splitlines()[1] == "## Profile"
    ids = [h.id for h in block.hits]
    assert len(ids) == len(set(ids))  # a fact the profile shows is not repeated below
    shown_profile = ids[:usage.items] if usage is not None else []
    assert all(i.startswith("p") for i in shown_profile)
    assert shown_profile == [h.id for h in profile_hits if h.id in shown_profile]  # in the profile's order


def test_profile_categories_put_safety_first():
    assert PROFILE_CATEGORIES[0] == "health"


# -- key facts stand alone, and say different things (session 45) -------------------------------------

def _fact(i, text, category, importance=0.8, attribute=None):
    from datetime import UTC, datetime

    from unified_memory.types import Fact

    when = datetime(2024, 1, 1, tzinfo=UTC)
    return Fact(id=f"f{i:02d}", user_id="ada", text=text, category=category, importance=importance,
                attribute=attribute, created_at=when, updated_at=when)


def test_a_key_fact_that_points_back_at_its_conversation_is_left_out():
    from unified_memory.retrieval.profile import key_facts

    facts = [_fact(1, "It's still a work in progress, but I'm doing my best.", "work"),
             _fact(2, "Caroline, they're some of my fave memories.", "preference"),
             _fact(3, "Those are my favourite shoes, honestly", "preference"),
             _fact(4, "I work at Kestrel Robotics as an engineer", "work"),
             _fact(5, "Painting landscapes is my favourite hobby", "preference"),
             _fact(6, "It makes me sick: I'm allergic to peanuts", "health", 0.9),  # health: kept as it is
             _fact(7, "That's Ada", "identity", 0.9, attribute="name")]            # a slot: kept as it is
    assert [f.id for f in key_facts(facts)] == ["f06", "f07", "f04", "f05"]


def test_ten_ways_of_saying_one_thing_do_not_fill_the_profile():
    from unified_memory.retrieval.profile import key_facts

    job = ["Losing my job as a banker pushed me to start my own dance studio",
           "Losing my job was hard", "My job as a banker was hard to lose",
           "Losing my job gave me the push to start my dance studio"]
    facts = [_fact(i, t, "work", 0.9 - i / 100) for i, t in enumerate(job)]
    facts += [_fact(10, "I'm passionate about dance and fashion", "preference"),
              _fact(11, "My sister Maria lives in Lisbon", "relationship")]
    chosen = [f.text for f in key_facts(facts)]
    assert chosen[0] == "My sister Maria lives in Lisbon"  # the categories take turns: people, work, tastes
    assert chosen[1] == job[0] and chosen[2] == "I'm passionate about dance and fashion"
    assert chosen == [chosen[0], job[0], chosen[2]]  # the other three mostly repeat the first
    allergies = [_fact(20, "I'm allergic to peanuts", "health", 0.9), _fact(21, "I'm allergic to shellfish", "health", 0.9)]
    assert len(key_facts(allergies)) == 2  # health facts are never left out for being alike


def test_the_categories_take_turns_so_a_tight_budget_shows_who_the_user_is():
    from unified_memory.retrieval.profile import key_facts

    work = [_fact(i, f"I lead the {w} team at Kestrel Robotics", "work", 0.9) for i, w in
            enumerate(("robot arm", "vision", "navigation", "battery", "gripper"))]
    others = [_fact(10, "I love jazz and old films", "preference", 0.7), _fact(11, "I'm Ada Lovelace", "identity"),
              _fact(12, "I live in Porto near the river", "location"), _fact(13, "I'm allergic to peanuts", "health", 0.6)]
    chosen = [f.id for f in key_facts([*work, *others])]
    assert chosen[:5] == ["f13", "f11", "f12", "f00", "f10"]  # safety; then one of each category, in order
    assert set(chosen[5:]) <= {f.id for f in work}
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:  # and in a tight block
        mem.remember_many([*(f.text for f in work), *(f.text for f in others)])
        profile = mem.context("hello there", max_tokens=250).text.partition("## Profile\n")[2].partition("\n## ")[0]
    assert "peanuts" in profile.splitlines()[0] and "jazz" in profile


def test_a_profile_line_a_shown_turn_says_in_full_gives_its_room_back():
    """The profile's fact and the recalled turn it came from: said once (the turn), the room the
    profile line took goes to another memory."""
    from datetime import UTC, datetime

    when = datetime(2024, 5, 1, tzinfo=UTC)
    key = RecallHit(id="p1", tier="long_term", text="Painting landscapes is my favourite hobby", score=1.0,
                    components={"category": "preference"})
    turn = RecallHit(id="e1", tier="episodic", text="Painting landscapes is my favourite hobby, and this is my latest",
                     score=0.9, created_at=when, components={"speaker": "Ada"})
    others = [RecallHit(id=f"e{i}", tier="episodic", text=f"we talked about topic number {i:02d} today", score=0.8 - i / 100,
                        created_at=when, components={"speaker": "Ada"}) for i in range(2, 12)]
    count = chars_per_token_counter
    budget = count("<memory>\n</memory>") + count("## Episodes\n") + count("### 2024-05-01\n") + sum(
        count(f"- Ada: {h.text}\n") for h in [turn, *others[:3]])
    block = assemble(query="painting", max_tokens=budget, sections={"episodes": [turn, *others]}, conversation=[],
                     count_tokens=count, config=ContextConfig(profile_share=0.5), profile=[key])
    assert "## Profile" not in block.text and "e1" in [h.id for h in block.hits]
    assert block.sections["episodes"].items == 4  # the turn and three others: the profile line's room was used
    safety = RecallHit(id="p2", tier="long_term", text="I'm allergic to peanuts, never forget", score=1.0,
                       components={"category": "health"})
    said = RecallHit(id="e0", tier="episodic", text="I'm allergic to peanuts, never forget it", score=0.95,
                     created_at=when, components={"speaker": "Ada"})
    block = assemble(query="peanuts", max_tokens=200, sections={"episodes": [said, *others]}, conversation=[],
                     count_tokens=count, config=ContextConfig(), profile=[safety])
    assert block.text.splitlines()[1:3] == ["## Profile", "- I'm allergic to peanuts, never forget"]  # health stays


def test_the_room_the_blocks_rounding_leaves_is_used():
    """Each line's cost is rounded up on its own; the whole block costs less, and what that leaves
    is offered again: the block holds an episode it would not hold counting line by line."""
    from datetime import UTC, datetime

    when = datetime(2024, 5, 1, tzinfo=UTC)
    turns = [RecallHit(id=f"e{i}", tier="episodic", text=f"turn {i:02d} x", score=1 - i / 100, created_at=when,
                       components={"speaker": "Ada"}) for i in range(30)]
    count = chars_per_token_counter
    line = count("- Ada: turn 00 x\n")  # 17 characters: 5 tokens alone, 4.25 in a block
    fixed = count("<memory>\n</memory>") + count("## Episodes\n") + count("### 2024-05-01\n")
    budget = fixed + 10 * line
    block = assemble(query="turn", max_tokens=budget, sections={"episodes": turns}, conversation=[],
                     count_tokens=count, config=ContextConfig(profile_share=0))
    assert block.tokens <= budget and block.sections["episodes"].items > 10


def test_in_a_group_conversation_each_key_fact_says_who_said_it():
    with UnifiedMemory(user_id="club", retrieval="lexical") as mem:
        mem.add_message("user", "I'm allergic to peanuts, so no satay for me.", name="Caroline")
        mem.add_message("user", "I love playing the clarinet.", name="Melanie")
        mem.add_message("user", "I love hiking in the mountains.", name="Caroline")
        profile = mem.profile()
        said = dict(zip((f.text for f in profile.facts), profile.text.splitlines(), strict=True))
        assert said["I'm allergic to peanuts, so no satay for me."].startswith("- Caroline: ")
        assert said["I love playing the clarinet."] == "- Melanie: I love playing the clarinet."
        assert set(profile.speakers.values()) == {"Caroline", "Melanie"}
        block = mem.context("what should we cook?", max_tokens=400).text
        assert "## Profile\n- Caroline: I'm allergic to peanuts" in block
    with UnifiedMemory(user_id="ada", retrieval="lexical") as mem:  # one speaker: nobody to tell apart
        mem.add_message("user", "I'm allergic to peanuts.", name="Ada")
        mem.add_message("user", "I love hiking in the mountains.", name="Ada")
        assert mem.profile().speakers == {} and mem.profile().text.startswith("- I'm allergic")
