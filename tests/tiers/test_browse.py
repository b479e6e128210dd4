"""tiers.browse (issue 41's console reads): a page of facts holds exactly the facts its filters keep,
in its order, and counts them all; facts over time count every fact once; conversations, the facts
each turn produced, and one user's rows only."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiers.browse.episodes import conversation, conversations, facts_of_messages
from tiers.browse.facts import SORTS, FactQuery, browse_facts, fact_timeline
from tiers.records.scope import Scope
from tiers.storage.backend import Storage

FACT = st.tuples(st.sampled_from(["active", "superseded", "archived"]), st.sampled_from(["health", "work", None]),
                 st.integers(0, 10), st.integers(0, 10 ** 6), st.sampled_from(["bees", "Bees 100%", "tea_pot", "x\\y"]))


def planted(facts, other_user: bool = True) -> Storage:
    storage = Storage(None)
    rows = [[f"f{i:03d}", "ada", f"{text} {i}", f"k{i}", importance / 10, when, when, status, category]
            for i, (status, category, importance, when, text) in enumerate(facts)]
    if other_user:
        rows.append(["zz", "bob", "bees of bob", "kz", 0.5, 5.0, 5.0, "active", "health"])
    with storage.atomic():
        storage.executemany("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, "
                            "status, category) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return storage


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts=st.lists(FACT, max_size=40),
       statuses=st.sets(st.sampled_from(["active", "superseded", "archived"]), min_size=1),
       category=st.sampled_from([None, "health"]), low=st.sampled_from([None, 0.3]), high=st.sampled_from([None, 0.7]),
       since=st.sampled_from([None, 2.5e5]), contains=st.sampled_from([None, "bees", "100%", "_", "\\"]),
       sort=st.sampled_from(SORTS), limit=st.integers(1, 15), offset=st.integers(0, 20))
def test_a_page_holds_exactly_what_the_filters_keep(facts, statuses, category, low, high, since, contains, sort,
                                                    limit, offset):
    storage = planted(facts)
    query = FactQuery(statuses=tuple(sorted(statuses)), category=category, min_importance=low, max_importance=high,
                      since=since, contains=contains, sort=sort, limit=limit, offset=offset)
    page = browse_facts(storage, Scope("ada"), query)
    kept = [(f"f{i:03d}", importance / 10, when) for i, (status, cat, importance, when, text) in enumerate(facts)
            if status in statuses and (category is None or cat == category)
            and (low is None or importance / 10 >= low) and (high is None or importance / 10 <= high)
            and (since is None or when >= since) and (contains is None or contains.casefold() in f"{text} {i}".casefold())]
    assert page.total == len(kept)  # the other user's row is never counted
    order = {"newest": lambda k: -int(k[0][1:]), "oldest": lambda k: int(k[0][1:]),
             "importance": lambda k: (-k[1], -int(k[0][1:])), "updated": lambda k: (-k[2], -int(k[0][1:]))}[sort]
    assert [f.id for f in page.facts] == [k[0] for k in sorted(kept, key=order)][offset:offset + limit]


@settings(max_examples=60, deadline=None)
@given(times=st.lists(st.integers(0, 4 * 10 ** 7).map(float), min_size=1, max_size=60), buckets=st.integers(1, 40))
def test_facts_over_time_count_every_fact_once(times, buckets):
    storage = planted([("active", None, 5, t, "x") for t in times], other_user=True)
    spans = fact_timeline(storage, Scope("ada"), buckets=buckets)
    assert sum(b.count for b in spans) == len(times) and len(spans) == buckets
    assert spans[0].start == pytest.approx(min(times))
    assert all(b.count >= 0 for b in spans)


def test_a_short_history_is_spread_over_the_spans():
    storage = planted([("active", None, 5, 1000.0 + minute * 60, "x") for minute in range(30)], other_user=False)
    spans = fact_timeline(storage, Scope("ada"), buckets=10)
    assert [b.count for b in spans] == [3] * 10
    assert fact_timeline(storage, Scope("bob"), buckets=10) == []


def test_conversations_and_what_each_turn_produced_are_one_users():
    storage = Storage(None)
    with storage.atomic():
        storage.executemany("INSERT INTO messages (id, user_id, session_id, role, content, created_at) VALUES "
                            "(?, ?, ?, 'user', ?, ?)", [["m1", "ada", "s1", "I keep bees", 1.0],
                                                        ["m2", "bob", "s1", "secret", 2.0]])
        storage.executemany("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, "
                            "source_message_ids) VALUES (?, ?, ?, ?, 0.5, 1, 1, ?)",
                            [["f1", "ada", "I keep bees", "k1", '["m1"]'], ["f2", "bob", "secret", "k2", '["m1"]']])
    assert [(c.session_id, c.messages) for c in conversations(storage, Scope("ada"))] == [("s1", 1)]
    assert [m.id for m in conversation(storage, Scope("ada"), "s1").messages] == ["m1"]
    assert {k: [f.id for f in v] for k, v in facts_of_messages(storage, Scope("ada"), ["m1", "m2"]).items()} == \
        {"m1": ["f1"]}  # bob's fact naming ada's message id is not ada's
