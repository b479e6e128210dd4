"""Property tests over the public API: scoping, persistence round trips, budgets."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import T0
from unified_memory import UnifiedMemory

USERS = ["ada", "bob", "cy"]
WORDS = ["garden", "peanuts", "Lisbon", "violin", "marathon", "sister", "Maria", "train", "jazz", "allergic"]
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Each operation writes text tagged with its user's secret marker ("zq<user>"), so a
# leak shows up as another user's marker in what a user reads back.
op = st.tuples(
    st.sampled_from(["turn", "remember", "triple", "message"]),
    st.sampled_from(USERS),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
)


def marker(user: str) -> str:
    return f"zq{user}"


def apply(mem: UnifiedMemory, kind: str, user: str, words: list[str]) -> None:
    view = mem.scoped(user_id=user)
    text = f"{' '.join(words)} {marker(user)}"
    if kind == "turn":
        view.add_turn(f"My {text}", f"Noted {marker(user)}")
    elif kind == "remember":
        view.remember(f"I like {text}")
    elif kind == "triple":
        view.add_triple(f"{words[0]} {marker(user)}", "related_to", words[-1])
    else:
        view.add_message("user", f"I'm allergic to {text}", name=user.title())


def visible_text(view: UnifiedMemory, query: str) -> str:
    parts = [h.text for h in view.recall(query, limit=50)]
    parts.append(view.context(query, max_tokens=400).text)
    parts.append(view.context(None, max_tokens=400).text)
    parts += [f.text for f in view.facts(include_inactive=True)]
    parts += [e.name for e in view.entities()] + [t.as_text() for t in view.triples()]
    parts += [e.content or "" for e in view.episodes()] + [m.content or "" for m in view.window()]
    return "\n".join(parts)


@SETTINGS
@given(ops=st.lists(op, min_size=1, max_size=25), limit=st.integers(1, 6))
def test_no_user_ever_sees_another_users_items(ops, limit):
    with UnifiedMemory(short_term_limit=limit) as mem:
        for kind, user, words in ops:
            apply(mem, kind, user, words)
        query = " ".join(WORDS + [marker(u) for u in USERS])
        for user in USERS:
            seen = visible_text(mem.scoped(user_id=user), query)
            for other in USERS:
                if other != user:
                    assert marker(other) not in seen


@SETTINGS
@given(ops=st.lists(op, min_size=1, max_size=15), limit=st.integers(1, 5))
def test_reopening_restores_every_tier(ops, limit):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.db"
        with UnifiedMemory(path, short_term_limit=limit, clock=lambda: T0) as mem:
            for kind, user, words in ops:
                apply(mem, kind, user, words)
            before = {u: _snapshot(mem.scoped(user_id=u)) for u in USERS}
        with UnifiedMemory(path, short_term_limit=limit, clock=lambda: T0) as mem:
            after = {u: _snapshot(mem.scoped(user_id=u)) for u in USERS}
    for user in USERS:
        (window, facts, *rest), ranking = before[user]
        (window_after, facts_after, *rest_after), ranking_after = after[user]
        assert (window_after, rest_after) == (window, rest)
        assert [i for i, _ in ranking_after] == [i for i, _ in ranking]
        assert [s for _, s in ranking_after] == pytest.approx([s for _, s in ranking], abs=1e-9)
        # the only change: the first snapshot's recall counted as one access
        assert [f.model_copy(update={"access_count": 0, "last_accessed": None}) for f in facts_after] == [
            f.model_copy(update={"access_count": 0, "last_accessed": None}) for f in facts]


def _snapshot(view: UnifiedMemory):
    # Listing first: recall reinforces access counts, which the listing shows.
    listed = (view.window(), view.facts(include_inactive=True), view.entities(), view.triples(), view.episodes())
    return listed, [(h.id, h.score) for h in view.recall(" ".join(WORDS), limit=20)]


@SETTINGS
@given(ops=st.lists(op, min_size=0, max_size=20), budget=st.integers(1, 600),
       query=st.one_of(st.none(), st.text(st.characters(exclude_characters="\x00"), max_size=40),
                       st.sampled_from(WORDS)),
       conversation=st.booleans())
def test_context_never_exceeds_its_budget_and_is_deterministic(ops, budget, query, conversation):
    with UnifiedMemory(short_term_limit=4, clock=lambda: T0) as mem:
        for kind, _user, words in ops:
            apply(mem, kind, "ada", words)
        view = mem.scoped(user_id="ada")
        first = view.context(query, max_tokens=budget, include_conversation=conversation)
        second = view.context(query, max_tokens=budget, include_conversation=conversation)
        assert first.tokens == view.count_tokens(first.text) <= budget
        assert first.text == second.text
        assert [h.id for h in first.hits] == [h.id for h in second.hits]


def test_a_second_connection_sees_writes_of_the_first(tmp_path):
    path = tmp_path / "shared.db"
    with UnifiedMemory(path) as writer, UnifiedMemory(path) as reader:
        writer.remember("I keep bees on the roof")
        assert [h.text for h in reader.recall("bees", tiers="long_term")] == ["I keep bees on the roof"]
        writer.remember("The bees make heather honey")
        assert len(reader.recall("bees", tiers="long_term")) == 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["hobby", "work", None]), min_size=0, max_size=12), st.integers(1, 5),
       st.sampled_from(["time", "importance"]), st.sampled_from([None, "hobby"]))
def test_facts_pages_are_the_listing_cut_in_pages(categories, size, order, category):
    """Paging with ``offset`` / ``limit`` gives the whole listing, in order, each fact once;
    ``count_facts`` is its length."""
    with UnifiedMemory() as mem:
        for i, cat in enumerate(categories):
            mem.remember(f"Note {i} about the garden shed", category=cat, importance=round((i % 4) / 4 + 0.1, 2))
        every = mem.facts(order=order, category=category)
        pages, offset = [], 0
        while page := mem.facts(order=order, category=category, limit=size, offset=offset):
            pages.append(page)
            offset += size
        assert [f for page in pages for f in page] == every
        assert mem.count_facts(category=category) == len(every)
