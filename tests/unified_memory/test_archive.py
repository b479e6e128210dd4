"""Eviction archives, never deletes (issue 16): ``long_term_limit`` bounds the active facts;
a fact pushed out is kept, listed with ``include_archived``, and still recalled (below
active facts). Only forget, a TTL the caller set or a retention the caller turned on
removes anything."""

from __future__ import annotations

import io
import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Clock
from tiers.storage.backend import SCHEMA_VERSION
from unified_memory import MemoryConfig, UnifiedMemory
from unified_memory.config import VectorConfig
from unified_memory.testing import FakeEmbedder

PLANTS = ["fern", "basil", "orchid", "cactus", "ivy", "mint", "tomatoes", "roses", "tulips", "bonsai"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def test_the_default_limit_is_1000_active_facts():
    assert MemoryConfig().long_term_limit == 1000


def test_two_thousand_facts_over_a_limit_of_100_are_all_kept_and_still_recalled(clock):
    with UnifiedMemory(long_term_limit=100, clock=clock) as mem:
        passport = mem.remember("My passport number ends in 7731", importance=0.3)
        ids = [passport]
        for i in range(1999):
            clock.advance(seconds=60)
            ids.append(mem.remember(f"Reminder {i}: water the {PLANTS[i % 10]} on {WEEKDAYS[i % 7]}",
                                    importance=0.5))
        assert len(set(ids)) == 2000
        kept = {f.id: f.status for f in mem.facts(include_archived=True)}
        assert set(kept) == set(ids)  # nothing stored is gone
        assert len(mem.facts()) == 100 and kept[passport] == "archived"
        stats = mem.stats()
        assert (stats.facts, stats.archived_facts, stats.superseded_facts) == (100, 1900, 0)
        # the early, specific fact answers a specific question: nothing active matches it
        [best, *_] = mem.recall("what is my passport number?")
        assert (best.id, best.components["archived"], best.components["status"]) == (passport, True, "archived")
        assert "passport number ends in 7731" in mem.context("what is my passport number?", max_tokens=300).text
        # it is not current knowledge: a context about something else does not show it
        assert "passport" not in mem.context("when do I water the orchid?", max_tokens=300).text
        # the active facts that match as well come first (reminders 1922 and 1992 are active)
        hits = mem.recall("water the orchid on Friday", limit=5)
        assert [h.components["archived"] for h in hits[:2]] == [False, False]
        assert {h.text.split(":")[0] for h in hits[:2]} == {"Reminder 1922", "Reminder 1992"}


def test_an_active_fact_ranks_above_an_equally_relevant_archived_one_even_a_more_important_one(clock):
    with UnifiedMemory(long_term_limit=1, clock=clock) as mem:
        trivial = mem.remember("My locker number ends in 4420", importance=0.1)
        important = mem.remember("My locker number ends in 7731", importance=1.0)  # archives the trivial one
        assert mem.remember("My locker number ends in 4420", importance=0.1) == trivial  # active again
        assert {f.id: f.status for f in mem.facts(include_archived=True)} == {trivial: "active",
                                                                              important: "archived"}
        first, second = mem.recall("locker number", tiers="long_term")
        assert first.components["relevance"] == second.components["relevance"]
        assert (first.id, second.id) == (trivial, important)
        assert second.components["archived"] is True and first.components["archived"] is False
        assert second.components["importance"] > first.components["importance"]


def test_include_archived_and_include_inactive(clock):
    with UnifiedMemory(long_term_limit=2, clock=clock) as mem:
        mem.remember("I live in Berlin", importance=0.9)
        mem.remember("Gate code is 4471", importance=0.1, ttl_days=1)
        mem.remember("I keep bees", importance=0.2)
        mem.remember("I play chess", importance=0.95)  # archives one of the two low ones
        mem.remember("I live in Porto", importance=0.9)  # supersedes Berlin
        clock.advance(days=2)  # the gate code's TTL runs out
        mem.consolidate()

        def status(**flags):
            return {f.text: f.status for f in mem.facts(**flags)}

        assert status() == {"I play chess": "active", "I live in Porto": "active"}
        assert status(include_archived=True) == {**status(), "I keep bees": "archived"}
        everything = {**status(include_archived=True), "I live in Berlin": "superseded", "Gate code is 4471": "expired"}
        assert status(include_inactive=True) == everything  # every fact kept, archived ones included
        assert status(include_inactive=True, include_archived=True) == everything


@pytest.mark.sqlite_only  # migrates a SQLite file written by version 1 (PostgreSQL schemas start at version 3)
def test_a_file_of_schema_1_is_migrated_evicted_facts_become_archived(db_path, clock):
    with UnifiedMemory(db_path, long_term_limit=2, clock=clock) as mem:
        ids = [mem.remember(text, importance=importance) for text, importance in
               [("My passport number ends in 7731", 0.1), ("I keep bees", 0.9), ("I play chess", 0.9)]]
    # What version 1 wrote: the pushed-out fact marked 'evicted' (the same tables otherwise).
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute("UPDATE facts SET status = 'evicted' WHERE status = 'archived'")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    with UnifiedMemory(db_path, long_term_limit=2, clock=clock) as mem:
        assert mem.stats().schema_version == SCHEMA_VERSION
        assert {f.id: f.status for f in mem.facts(include_archived=True)} == {
            ids[0]: "archived", ids[1]: "active", ids[2]: "active"}
        with pytest.warns(DeprecationWarning, match="archived_facts"):  # the old name still reads
            assert (mem.stats().archived_facts, mem.stats().evicted_facts) == (1, 1)
        assert mem.recall("passport number")[0].id == ids[0]
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert conn.execute("SELECT COUNT(*) FROM facts WHERE status = 'evicted'").fetchone() == (0,)
    conn.close()
    with UnifiedMemory(db_path, long_term_limit=2, clock=clock) as mem:  # opening a current file writes nothing
        assert mem.recall("passport number")[0].id == ids[0]


def test_an_export_of_schema_1_imports_evicted_facts_as_archived(clock):
    with UnifiedMemory(long_term_limit=1, clock=clock) as mem:
        old = mem.remember("My passport number ends in 7731", importance=0.1)
        mem.remember("I keep bees", importance=0.9)
        out = io.StringIO()
        mem.export_jsonl(out)
    lines = out.getvalue().splitlines()
    header = json.loads(lines[0])
    assert header["schema_version"] == SCHEMA_VERSION
    header["schema_version"] = 1
    rows = [json.loads(line) for line in lines[1:] if line]
    for row in rows:
        if row["kind"] == "facts" and row["row"]["status"] == "archived":
            row["row"]["status"] = "evicted"
    old_export = "\n".join(json.dumps(obj) for obj in [header, *rows]) + "\n"
    with UnifiedMemory(long_term_limit=1, clock=clock) as fresh:
        assert fresh.import_jsonl(io.StringIO(old_export)) == len(rows)
        assert {f.id: f.status for f in fresh.facts(include_archived=True)}[old] == "archived"
        assert fresh.import_jsonl(io.StringIO(old_export)) == 0  # the same rows: nothing added
        assert fresh.import_jsonl(io.StringIO(out.getvalue())) == 0
        assert fresh.recall("passport number")[0].id == old


@pytest.mark.parametrize("backend", ["numpy", "chroma"])
def test_hybrid_recall_reaches_archived_facts_through_their_own_vectors(backend, tmp_path, clock):
    if backend == "chroma":
        pytest.importorskip("chromadb")
    settings = dict(retrieval="hybrid", embedder=FakeEmbedder(32), vectors=VectorConfig(backend=backend),
                    long_term_limit=1, clock=clock)
    path = tmp_path / "memory.db"
    with UnifiedMemory(path, **settings) as mem:
        old = mem.remember("My locker number ends in 7731", importance=0.9)
        mem.recall("warm up")  # every partition built, then kept in step
        new = mem.remember("My locker number ends in 4420", importance=0.1)  # archives the older one
        first, second = mem.recall("locker number", tiers="long_term")
        assert (first.id, second.id) == (new, old) and second.components["archived"] is True
        assert second.components["dense"] > 0
    with UnifiedMemory(path, **settings) as mem:  # reopened: the archive's vectors are found again
        assert [h.id for h in mem.recall("locker number", tiers="long_term")] == [new, old]


def test_forgetting_an_archived_fact_removes_it_from_recall(clock):
    with UnifiedMemory(long_term_limit=1, clock=clock) as mem:
        old = mem.remember("My passport number ends in 7731", importance=0.1)
        mem.remember("I keep bees", importance=0.9)
        assert mem.recall("passport")[0].id == old
        mem.forget(ids=[old])
        assert mem.recall("passport") == [] and mem.facts(include_inactive=True)[0].text == "I keep bees"


def test_another_connection_and_a_reindex_see_the_archive(db_path, clock):
    with UnifiedMemory(db_path, long_term_limit=1, clock=clock) as writer, \
            UnifiedMemory(db_path, long_term_limit=1, clock=clock) as reader:
        first = writer.remember("My passport number ends in 7731", importance=0.1)
        assert reader.recall("passport")[0].id == first  # the reader's indexes are built: active
        writer.remember("I keep bees", importance=0.9)  # archives the passport (journalled)
        hit = reader.recall("passport")[0]
        assert (hit.id, hit.components["archived"]) == (first, True)
        writer.remember("My passport number ends in 7731")  # restated: active again
        hit = reader.recall("passport")[0]
        assert (hit.id, hit.components["archived"]) == (first, False)
        reader.reindex()
        assert [(h.id, h.components["archived"]) for h in reader.recall("bees")] == [
            (next(f.id for f in reader.facts(include_archived=True) if f.text == "I keep bees"), True)]


# -- nothing stored is ever gone except by forget / TTL / retention ------------------------------

WORDS = ["garden", "peanuts", "Lisbon", "violin", "marathon", "sister", "Maria", "train", "jazz", "bees"]
TEXTS = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
OPERATION = st.one_of(
    st.tuples(st.just("remember"), TEXTS, st.sampled_from([None, None, 1.0])),  # ttl_days
    st.tuples(st.just("turn"), TEXTS, st.sampled_from(["I like", "I live in", "My sister loves", "I'm allergic to"])),
    st.tuples(st.just("consolidate")),
    st.tuples(st.just("end_session")),
    st.tuples(st.just("recall"), TEXTS),
    st.tuples(st.just("advance"), st.floats(0.1, 20.0)),  # days
    st.tuples(st.just("forget"), st.integers(0, 10_000)),  # one of the ids seen so far
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(OPERATION, min_size=1, max_size=30), long_term_limit=st.integers(1, 4),
       window=st.integers(1, 3), retention_days=st.sampled_from([None, None, 5.0]),
       auto_promote=st.booleans())
def test_nothing_stored_is_ever_gone_except_by_forget_ttl_or_retention(operations, long_term_limit, window,
                                                                     retention_days, auto_promote):
    clock = Clock()
    remembered: set[str] = set()
    with_ttl: set[str] = set()  # facts a TTL was given to (only they may expire)
    facts_seen: set[str] = set()
    first_seen: dict[str, int] = {}
    messages_seen: dict[str, float] = {}  # id -> when it was written
    forgotten: set[str] = set()
    with UnifiedMemory(long_term_limit=long_term_limit, short_term_limit=window, clock=clock,
                       episodic_retention_days=retention_days, auto_promote=auto_promote) as mem:
        for operation in operations:
            kind = operation[0]
            if kind == "remember":
                fact_id = mem.remember(f"I like {operation[1]}", ttl_days=operation[2])
                remembered.add(fact_id)
                if operation[2] is not None:
                    with_ttl.add(fact_id)
            elif kind == "turn":
                for message_id in mem.add_turn(f"{operation[2]} {operation[1]}", "Noted"):
                    messages_seen[message_id] = clock.now
            elif kind == "consolidate":
                mem.consolidate()
            elif kind == "end_session":
                mem.end_session()
            elif kind == "recall":
                mem.recall(operation[1])
            elif kind == "advance":
                clock.advance(days=operation[1])
            else:
                # what is there now (retention may have pruned a message), in the order written
                present = {f.id for f in mem.facts(include_inactive=True)} | {e.id for e in mem.episodes()}
                candidates = [i for i in [*sorted(facts_seen, key=first_seen.__getitem__), *messages_seen]
                              if i in present]
                if candidates:
                    chosen = candidates[operation[1] % len(candidates)]
                    before = mem.facts(include_archived=True, include_inactive=True)
                    mem.forget(ids=[chosen])
                    forgotten.add(chosen)
                    # a fact promoted only from forgotten turns derives from them: forgotten with them
                    turns = forgotten & set(messages_seen)
                    forgotten |= {f.id for f in before if f.source_message_ids and set(f.source_message_ids) <= turns}
            listed = mem.facts(include_archived=True, include_inactive=True)
            facts_seen |= remembered | {f.id for f in listed}  # extracted facts count too, once stored
            for fact in listed:  # ids are random: forget picks by when a fact was first stored
                first_seen.setdefault(fact.id, len(first_seen))
            assert facts_seen - forgotten <= {f.id for f in listed}
            # what is not current knowledge is history (superseded) or ran out of a TTL the caller set
            assert all(f.status != "expired" or f.id in with_ttl for f in listed)
            assert {f.id for f in mem.facts(include_archived=True)} == {
                f.id for f in listed if f.status in ("active", "archived")
                and (f.expires_at is None or f.expires_at.timestamp() > clock.now)}
            assert len(mem.facts()) <= long_term_limit
            episodes = {e.id for e in mem.episodes()}
            for message_id, written in messages_seen.items():
                if message_id in forgotten or message_id in episodes:
                    continue
                # gone: only when retention is on and the message is older than it
                assert retention_days is not None and written < clock.now - retention_days * 86400, message_id
        # an archived fact is still found by what it says
        for fact in mem.facts(include_archived=True):
            if fact.status == "archived" and fact.id in remembered:
                assert fact.id in {h.id for h in mem.recall(fact.text, tiers="long_term", limit=50)}


def _ordinal(n: int) -> str:
    return f"{n}" + ("th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th"))


@pytest.mark.parametrize("retrieval", ["lexical", "hybrid"])
def test_an_archived_exact_answer_outranks_active_facts_that_only_resemble_the_question(retrieval):
    """Being archived lowers a fact's score; it does not hide the only exact answer (issue 40: 300
    near-identical facts, 250 of them archived by long_term_limit=50)."""
    from scoring.embeddings import HashingEmbedder

    embedder = HashingEmbedder(384) if retrieval == "hybrid" else None
    with UnifiedMemory(user_id="ada", retrieval=retrieval, embedder=embedder, long_term_limit=50) as mem:
        mem.remember_many([f"Storage unit {n} holds the {_ordinal(n)} box of winter clothes" for n in range(1, 301)])
        statuses = {f.text: f.status for f in mem.facts(include_archived=True)}
        for n in (17, 42, 123, 250, 290):
            want = f"Storage unit {n} holds the {_ordinal(n)} box of winter clothes"
            hits = mem.recall(f"which storage unit holds the {_ordinal(n)} box?", limit=5)
            assert hits[0].text == want, (n, statuses[want], [h.text for h in hits])
        assert sum(s == "archived" for s in statuses.values()) == 250
