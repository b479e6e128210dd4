from hypothesis import given, settings
from hypothesis import strategies as st

from tiers.candidates import CandidateQuery
from tiers.facts.long_term import EvictionWeights, FactInput, LongTermFacts
from tiers.storage.backend import Scope, Storage

ADA = Scope("ada")
DAY = 86400.0


def make():
    return LongTermFacts(Storage(None))


def add(facts, *items, scope=ADA, now=0.0):
    with facts.storage.atomic():
        return facts.add(scope, list(items), now=now)


def test_restating_reinforces_instead_of_duplicating():
    facts = make()
    [first] = add(facts, FactInput("I'm allergic to peanuts", 0.8))
    [again] = add(facts, FactInput("I am allergic to peanuts.", 0.6), now=DAY)
    assert again.action == "reinforced" and again.id == first.id
    [fact] = facts.list(ADA)
    assert fact.reinforcement_count == 1
    assert fact.importance > 0.8  # max of both, plus a reinforcement boost
    assert fact.updated_at.timestamp() == DAY


def test_negated_statement_is_a_different_fact():
    facts = make()
    add(facts, FactInput("I'm allergic to peanuts", 0.8), FactInput("I'm not allergic to peanuts", 0.8))
    assert len(facts.list(ADA)) == 2


def test_contradiction_supersedes_and_keeps_history():
    facts = make()
    [old] = add(facts, FactInput("I live in Lisbon", 0.8, subject="user", attribute="residence", value="Lisbon"))
    [new] = add(facts, FactInput("I moved to Porto", 0.8, subject="user", attribute="residence", value="Porto"),
                now=10 * DAY)
    assert new.superseded == (old.id,)
    history = {f.id: f for f in facts.list(ADA, include_inactive=True)}
    assert history[old.id].status == "superseded"
    assert history[old.id].valid_to.timestamp() == 10 * DAY
    assert history[old.id].superseded_by == new.id
    assert [f.id for f in facts.list(ADA)] == [new.id]
    # still searchable as history
    assert {f.row["id"] for f in facts.search(ADA, "Lisbon", 5, now=11 * DAY)} == {old.id}


def test_same_slot_same_value_reinforces():
    facts = make()
    [a] = add(facts, FactInput("I live in Lisbon", 0.8, subject="user", attribute="residence", value="Lisbon"))
    [b] = add(facts, FactInput("I'm still living in lisbon", 0.8, subject="user", attribute="residence",
                               value="lisbon"))
    assert b.action == "reinforced" and b.id == a.id


def test_supersession_within_one_batch():
    facts = make()
    writes = add(facts, FactInput("I work at Acme", 0.8, subject="user", attribute="employer", value="Acme"),
                 FactInput("I work at Globex", 0.8, subject="user", attribute="employer", value="Globex"))
    assert writes[1].superseded == (writes[0].id,)


def test_users_never_see_each_others_facts():
    facts = make()
    add(facts, FactInput("My PIN is 1234", 0.9), scope=Scope("ada"))
    add(facts, FactInput("My PIN is 9999", 0.9), scope=Scope("bob"))
    assert [f.row["text"] for f in facts.search(Scope("bob"), "PIN", 10, now=0.0)] == ["My PIN is 9999"]
    [write] = add(facts, FactInput("My PIN is 1234", 0.9), scope=Scope("bob"))
    assert write.action == "created"  # dedupe is per user


def test_agent_scope_sees_own_and_shared_facts():
    facts = make()
    add(facts, FactInput("shared fact about tea", 0.5), scope=Scope("ada"))
    add(facts, FactInput("bot one fact about tea", 0.5), scope=Scope("ada", "one"))
    add(facts, FactInput("bot two fact about tea", 0.5), scope=Scope("ada", "two"))
    seen = {f.row["text"] for f in facts.search(Scope("ada", "one"), "tea", 10, now=0.0)}
    assert seen == {"shared fact about tea", "bot one fact about tea"}
    assert len(facts.search(Scope("ada"), "tea", 10, now=0.0)) == 3


def test_ttl_expires_facts():
    facts = make()
    add(facts, FactInput("Parking spot is B12 today", 0.9, ttl_days=1))
    assert facts.search(ADA, "parking", 5, now=0.5 * DAY)
    assert facts.search(ADA, "parking", 5, now=2 * DAY) == []
    with facts.storage.atomic():
        assert len(facts.expire(ADA, now=2 * DAY)) == 1
    assert facts.list(ADA) == [] and facts.counts("ada") == {"expired": 1}


def test_the_limit_archives_unimportant_unused_old_facts_and_spares_the_new_one():
    facts = make()
    writes = add(facts, FactInput("old trivial note", 0.1), FactInput("old important fact", 0.9),
                 FactInput("used trivial note", 0.1))
    with facts.storage.atomic():
        facts.touch([writes[2].id] * 1, now=50 * DAY)
        facts.touch([writes[2].id], now=50 * DAY)
    [fresh] = add(facts, FactInput("brand new trivial note", 0.05), now=60 * DAY)
    with facts.storage.atomic():
        archived = facts.evict(ADA, limit=3, now=60 * DAY, protect={fresh.id}, weights=EvictionWeights())
    assert archived == [writes[0].id]
    assert {f.text for f in facts.list(ADA)} == {"old important fact", "used trivial note",
                                                  "brand new trivial note"}
    # archived, not deleted: listed when asked, still searched, counted apart
    kept = {f.id: f.status for f in facts.list(ADA, include_archived=True)}
    assert kept[writes[0].id] == "archived" and len(kept) == 4
    assert {f.id: f.status for f in facts.list(ADA, include_inactive=True)} == kept
    found = facts.recall_candidates(CandidateQuery(scope=ADA, text="old trivial", want=5, now=60 * DAY))
    assert writes[0].id in {c.id for c in found}
    assert next(c for c in found if c.id == writes[0].id).detail.status == "archived"
    assert facts.counts("ada") == {"active": 3, "archived": 1}


def test_an_archived_fact_restated_is_active_again_and_a_contradiction_supersedes_it():
    facts = make()
    [home] = add(facts, FactInput("I live in Lisbon", 0.2, subject="user", attribute="residence", value="Lisbon"))
    [bees] = add(facts, FactInput("I keep bees", 0.2))
    add(facts, FactInput("I play chess", 0.9), now=DAY)
    with facts.storage.atomic():
        assert set(facts.evict(ADA, limit=1, now=DAY, protect=set(), weights=EvictionWeights())) == {home.id, bees.id}
    [again] = add(facts, FactInput("I keep bees!", 0.3), now=2 * DAY)
    assert (again.id, again.action) == (bees.id, "reinforced")
    [moved] = add(facts, FactInput("I moved to Porto", 0.8, subject="user", attribute="residence", value="Porto"),
                  now=3 * DAY)
    assert moved.superseded == (home.id,)
    status = {f.text: f.status for f in facts.list(ADA, include_inactive=True)}
    assert status == {"I live in Lisbon": "superseded", "I keep bees": "active", "I play chess": "active",
                      "I moved to Porto": "active"}


def test_an_archived_fact_expires_with_its_ttl():
    facts = make()
    [code] = add(facts, FactInput("Gate code is 4471", 0.1, ttl_days=2))
    add(facts, FactInput("I play chess", 0.9))
    with facts.storage.atomic():
        assert facts.evict(ADA, limit=1, now=0.0, protect=set(), weights=EvictionWeights()) == [code.id]
        assert facts.expire(ADA, now=3 * DAY) == [code.id]
    assert facts.counts("ada") == {"active": 1, "expired": 1}
    assert facts.search(ADA, "gate code", 5, now=3 * DAY) == []


def test_protected_facts_go_last_even_when_unimportant():
    facts = make()
    writes = add(facts, *[FactInput(f"important fact {i}", 0.9) for i in range(3)])
    [fresh] = add(facts, FactInput("trivial fresh", 0.0), now=DAY)
    with facts.storage.atomic():
        archived = facts.evict(ADA, limit=3, now=DAY, protect={fresh.id}, weights=EvictionWeights())
    assert fresh.id not in archived and len(archived) == 1 and archived[0] in {w.id for w in writes}


def test_search_filters_by_metadata_and_time():
    facts = make()
    add(facts, FactInput("tea with lemon", 0.5, metadata={"topic": "drinks"}), now=0.0)
    add(facts, FactInput("tea ceremony in Kyoto", 0.5, metadata={"topic": "travel"}), now=10 * DAY)
    assert [f.row["text"] for f in facts.search(ADA, "tea", 5, where={"topic": "travel"}, now=10 * DAY)] == [
        "tea ceremony in Kyoto"]
    assert [f.row["text"] for f in facts.search(ADA, "tea", 5, since=5 * DAY, now=10 * DAY)] == [
        "tea ceremony in Kyoto"]


def test_index_is_rebuilt_from_the_store_after_reopen(tmp_path):
    path = tmp_path / "m.db"
    facts = LongTermFacts(Storage(path))
    add(facts, FactInput("I adopted a greyhound named Pixel", 0.8))
    facts.storage.close()
    reopened = LongTermFacts(Storage(path))
    assert [c.row["text"] for c in reopened.search(ADA, "greyhound", 5, now=0.0)] == [
        "I adopted a greyhound named Pixel"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 100.0), st.one_of(st.none(), st.floats(0.0, 100.0)),
                          st.integers(0, 30), st.booleans()), min_size=2, max_size=25),
       st.integers(1, 25), st.floats(1.0, 60.0))
def test_retention_archives_what_the_scoring_formula_ranks_lowest(rows, excess, half_life):
    """SQLite ranks retention (tiers.facts.long_term.retention_order) as scoring.decay defines it:
    unprotected first, then lowest importance·w_i + recency·w_r + use·w_u, then oldest."""
    import numpy as np

    from scoring.decay import recency_array

    storage = Storage(None)
    try:
        weights = EvictionWeights(half_life_days=half_life)
        now = 120 * DAY
        with storage.atomic():
            storage.executemany(
                "INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, last_accessed, "
                "access_count) VALUES (?, 'ada', ?, ?, ?, 0, ?, ?, ?)",
                [[f"f{i}", f"t{i}", f"t{i}", imp, upd * DAY, None if last is None else last * DAY, uses]
                 for i, (imp, upd, last, uses, _) in enumerate(rows)])
        protect = {f"f{i}" for i, row in enumerate(rows) if row[4]}
        facts = LongTermFacts(storage)
        limit = max(0, len(rows) - excess)
        with storage.atomic():
            archived = facts.evict(ADA, limit=limit, now=now, protect=protect, weights=weights)

        def key(i: int) -> tuple[bool, float, int]:
            imp, upd, last, uses, _ = rows[i]
            fresh = recency_array(np.array([now - max(upd, last or 0.0) * DAY]), half_life)[0]
            use = min(1.0, np.log1p(uses) / np.log1p(weights.use_saturation))
            return f"f{i}" in protect, weights.importance * imp + weights.recency * fresh + weights.use * use, i

        ranked = sorted(range(len(rows)), key=key)
        assert len(archived) == len(rows) - limit
        chosen = [int(fact_id[1:]) for fact_id in archived]
        for a, b in zip(chosen, chosen[1:], strict=False):  # in the formula's order (ulps aside)
            assert key(a)[0] < key(b)[0] or (key(a)[0] == key(b)[0] and key(a)[1] <= key(b)[1] + 1e-9)
        worst_kept = [key(i) for i in ranked if i not in chosen]
        if worst_kept and chosen:  # nothing kept ranks below something archived
            last = key(chosen[-1])
            assert all(k[0] > last[0] or (k[0] == last[0] and k[1] >= last[1] - 1e-9) for k in worst_kept)
    finally:
        storage.close()  # a PostgreSQL database per example: its connection goes now
