"""Saved lexical indexes (tiers.indexes.snapshots): restored on open, replayed forward from the
journal, refused when stale or damaged, erased with what they index."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.lexical import LexicalIndex
from tiers.indexes import snapshots
from tiers.storage import journal
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory


@pytest.fixture(autouse=True)
def small_partitions(monkeypatch):
    monkeypatch.setattr(snapshots, "SNAPSHOT_MIN_DOCS", 3)


def open_memory(path):
    return UnifiedMemory(path, user_id="ada", retrieval="lexical", long_term_limit=None, clock=lambda: 1.7e9)


def answers(mem, words=("cello", "Porto", "kite", "tea", "note")):
    return {w: [(h.id, h.score) for h in mem.recall(w, limit=20, tiers="long_term")] for w in words}


def reopened_answers(path, count_fact_loads, *, expect_loads):
    """Answers of a memory opened on ``path``, checking which users it rebuilt from the store."""
    with open_memory(path) as mem:
        calls = count_fact_loads(mem)
        got = answers(mem)
        assert calls == expect_loads
    return got


def write(path, sql):
    """Run one statement on the database at ``path`` (as another program would, beside the memory)."""
    store = Storage(path)
    try:
        with store.atomic():
            store.execute(sql)
    finally:
        store.close()


def snapshot_count(path, where="TRUE"):
    store = Storage(path)
    try:
        return store.execute(f"SELECT COUNT(*) FROM index_snapshots WHERE {where}").fetchone()[0]
    finally:
        store.close()


def fresh_answers(path):
    """What a memory that rebuilds from the store answers (snapshots removed first)."""
    write(path, "DELETE FROM index_snapshots")
    with open_memory(path) as mem:
        return answers(mem)


def fill(path, n=8):
    with open_memory(path) as mem:
        for i in range(n):
            mem.remember(f"Note {i}: I play the cello and fly a kite in Porto")
        mem.recall("cello")


def test_state_round_trips_through_the_stored_format():
    index = LexicalIndex()
    index.add_many([(f"k{i}", f"text number {i} about cats and dogs") for i in range(50)])
    index.remove("k3")
    restored = LexicalIndex.from_state(snapshots.decode(*snapshots.encode(index.state())))
    for query in ("cats", "number 7", "dogs about", "nothing"):
        assert restored.search(query, 100) == index.search(query, 100)
    restored.add("k3", "cats and parrots")  # it stays writable
    assert restored.search("parrots")[0].key == "k3"


def test_reopen_restores_instead_of_rebuilding(db_path, count_fact_loads):
    fill(db_path)
    got = reopened_answers(db_path, count_fact_loads, expect_loads=[])
    assert got == fresh_answers(db_path)


def test_writes_after_the_snapshot_are_replayed(db_path, count_fact_loads):
    fill(db_path)
    with open_memory(db_path) as writer:  # never searches, so it saves nothing at close
        writer.remember("I moved to Porto with my tea set")
        writer.remember("My kite is red")
    got = reopened_answers(db_path, count_fact_loads, expect_loads=[])  # the snapshot plus two replayed entries
    assert got == fresh_answers(db_path)
    assert len(got["kite"]) == 9  # eight notes and the red kite


def test_a_reset_since_the_snapshot_means_a_rebuild(db_path, monkeypatch, count_fact_loads):
    monkeypatch.setattr(journal, "BULK_RESET", 2)
    fill(db_path)
    with UnifiedMemory(db_path, user_id="ada", retrieval="lexical", long_term_limit=None) as other:
        other.remember_many(["I fly kites", "I like tea", "Porto is lovely"])  # journals one reset
    got = reopened_answers(db_path, count_fact_loads, expect_loads=["ada"])
    assert got == fresh_answers(db_path)


def test_a_damaged_snapshot_is_ignored(db_path, count_fact_loads):
    fill(db_path)
    write(db_path, "UPDATE index_snapshots SET arrays = substr(arrays, 1, 10)")
    got = reopened_answers(db_path, count_fact_loads, expect_loads=["ada"])
    assert got == fresh_answers(db_path)


def test_forget_erases_the_users_snapshots(db_path):
    fill(db_path)
    with open_memory(db_path) as mem:
        one = mem.facts()[0].id
        mem.forget(ids=[one])
        assert snapshot_count(db_path) == 0
        mem.forget()
    assert snapshot_count(db_path, "user_id = 'ada'") == 0


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["remember", "forget", "reopen", "recall"]),
                          st.sampled_from(["cello", "Porto", "kite", "tea"]), st.integers(0, 4)),
                min_size=1, max_size=12))
def test_reopened_memories_answer_like_a_rebuild(tmp_path_factory, ops):
    path = tmp_path_factory.mktemp("snap") / "m.db"
    fill(path, n=4)
    mem = open_memory(path)
    try:
        for op, word, n in ops:
            if op == "remember":
                mem.remember(f"Note {n}: a {word} story number {n}")
            elif op == "forget":
                found = mem.recall(word, tiers="long_term", limit=1)
                if found:
                    mem.forget(ids=[found[0].id])
            elif op == "reopen":
                mem.close()
                mem = open_memory(path)
            else:
                mem.recall(word)
        got = answers(mem)
    finally:
        mem.close()
    assert got == fresh_answers(path)
