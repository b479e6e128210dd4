"""Several memories (as several processes would) sharing one file: each keeps its
in-memory indexes in step by replaying the others' journalled changes (tiers.storage.journal)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiers.storage import journal
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory


def open_memory(path, user="ada"):
    # A fixed clock: recency would otherwise differ between two recalls made moments apart.
    return UnifiedMemory(path, user_id=user, retrieval="lexical", long_term_limit=None, clock=lambda: 1.7e9)


def journal_rows(path, sql):
    """Rows of the file's index journal, read through the storage (a file, or its PostgreSQL database)."""
    store = Storage(path)
    try:
        return [tuple(row) for row in store.execute(sql).fetchall()]
    finally:
        store.close()


def texts(hits):
    return [h.text for h in hits]


def test_another_writer_is_caught_up_without_reloading(db_path, count_fact_loads):
    with open_memory(db_path) as a, open_memory(db_path) as b:
        a.remember("I play the cello on Sundays")
        assert texts(b.recall("cello", tiers="long_term")) == ["I play the cello on Sundays"]
        loads = count_fact_loads(b)
        a.remember("My sister plays the cello too")
        a.remember("I moved to Porto last spring")
        assert sorted(texts(b.recall("cello", tiers="long_term"))) == [
            "I play the cello on Sundays", "My sister plays the cello too"]
        assert texts(b.recall("Porto", tiers="long_term")) == ["I moved to Porto last spring"]
        assert loads == []


def test_forgotten_item_leaves_no_text_in_the_journal_and_no_hit_elsewhere(db_path):
    with open_memory(db_path) as a, open_memory(db_path) as b:
        secret = a.remember("My locker code is 4471")
        a.remember("I like the blue lockers")
        assert "My locker code is 4471" in texts(b.recall("locker code", tiers="long_term"))
        a.forget(ids=[secret])
        assert "My locker code is 4471" not in texts(b.recall("locker code", tiers="long_term"))
        assert texts(b.recall("blue lockers", tiers="long_term")) == ["I like the blue lockers"]
    rows = journal_rows(db_path, "SELECT COALESCE(text, '') FROM index_journal")
    assert not any("4471" in text for (text,) in rows)


def test_forgotten_user_is_not_named_in_the_journal(db_path):
    with open_memory(db_path, "ada@example.com") as a, open_memory(db_path, "ada@example.com") as b:
        a.remember("I am allergic to peanuts")
        assert b.recall("peanuts")
        a.forget()
        assert b.recall("peanuts") == []
    journal = journal_rows(db_path, "SELECT user_id, COALESCE(text, '') FROM index_journal")
    assert not any("ada@example.com" in user or "peanut" in text for user, text in journal)


def test_bulk_write_elsewhere_is_one_reset(db_path, count_fact_loads):
    with open_memory(db_path) as a, open_memory(db_path) as b:
        a.remember("I collect stamps")
        assert b.recall("stamps")
        loads = count_fact_loads(b)
        a.remember_many([f"note {i}: I collect maps from {i}" for i in range(1500)])
        assert len(b.recall("maps", limit=5, tiers="long_term")) == 5
        assert loads == ["ada"]  # rebuilt once, not replayed entry by entry
    count = journal_rows(db_path, "SELECT COUNT(*) FROM index_journal WHERE kind = 'facts'")[0]
    assert count[0] < 100


operations = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["remember", "forget", "recall"]),
              st.sampled_from(["cello", "Porto", "peanuts", "jazz", "tea"]), st.integers(0, 3)),
    min_size=1, max_size=14)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations)
def test_followers_answer_like_a_fresh_reader(tmp_path_factory, ops):
    """Whatever two writers interleave, each answers exactly like a memory opened afresh
    on the file (whose indexes are built from the store)."""
    path = tmp_path_factory.mktemp("shared") / "m.db"
    with open_memory(path) as a, open_memory(path) as b:
        mems = {"a": a, "b": b}
        for who, op, word, n in ops:
            mem = mems[who]
            if op == "remember":
                mem.remember(f"Note {n}: I talked about {word} with friend {n}")
            elif op == "forget":
                found = mem.recall(word, tiers="long_term", limit=1)
                if found:
                    mem.forget(ids=[found[0].id])
            else:
                mem.recall(word)
        with open_memory(path) as fresh:
            for word in ("cello", "Porto", "peanuts", "jazz", "tea", "friend"):
                expected = [(h.id, h.score) for h in fresh.recall(word, limit=20)]
                for mem in (a, b):
                    assert [(h.id, h.score) for h in mem.recall(word, limit=20)] == expected


def test_journal_stays_bounded_and_a_reader_left_behind_rebuilds(db_path, monkeypatch, count_fact_loads):
    monkeypatch.setattr(journal, "JOURNAL_KEEP", 20)
    monkeypatch.setattr(journal, "REPLAY_LIMIT", 20)
    monkeypatch.setattr(journal, "_PRUNE_CHECK_EVERY", 5)
    with open_memory(db_path) as a, open_memory(db_path) as b:
        a.remember("I collect stamps")
        assert b.recall("stamps", tiers="long_term")
        loads = count_fact_loads(b)
        for i in range(60):
            a.remember(f"Entry {i}: I bought a kite in town {i}")
        found = b.recall("kite", limit=100, tiers="long_term")
        assert len(found) == 60 and loads == ["ada"]  # too far behind: rebuilt from the store
    rows = journal_rows(db_path, "SELECT COUNT(*) FROM index_journal")[0][0]
    assert rows <= 2 * 20 + 5
