"""The database search path (issue 39): on PostgreSQL with pgvector, BM25 and vectors are tables
written with the rows, so any host answers any user at once and holds nothing per user.

The server is the suite's PostgreSQL with pgvector (tests/pgvector_server.py); the fallback is
checked on Debian's PostgreSQL 15, which has no pgvector."""

from __future__ import annotations

import logging
import math
import threading
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoring.embeddings import HashingEmbedder
from scoring.lexical import LexicalIndex
from tiers.indexes.db_vectors import DatabaseVectors, literal
from tiers.indexes.embedding_cache import EmbeddingCache
from tiers.indexes.sql_lexical import DatabaseLexical
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory
from unified_memory.errors import ConfigError, UnifiedMemoryError
from unified_memory.testing import internals

WORDS = ["peanut", "allergy", "lisbon", "maria", "sister", "bees", "garden", "jazz", "dentist", "june", "tea",
         "running", "marathon", "the", "of", "cats", "living", "porto", "Allergic", "peanuts"]
texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=10).map(" ".join)
keys = st.sampled_from([f"d{i}" for i in range(8)])
operations = st.lists(st.one_of(st.tuples(st.just("add"), keys, texts), st.tuples(st.just("remove"), keys)),
                      min_size=1, max_size=25)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)


@pytest.fixture
def storage(pgvector_url):
    """A storage for the indexes alone: their loaders stand for the tiers' tables, so every user
    they are asked about holds something (the tables themselves stay empty)."""
    store = Storage(pgvector_url, search="database")
    store.has_user = lambda user_id: True  # type: ignore[method-assign]
    try:
        yield store
    finally:
        store.close()


def same_ranking(got, want) -> None:
    """The same documents with the same scores; documents may swap only where their scores tie."""
    assert sorted(m.key for m in got) == sorted(m.key for m in want)
    for mine, theirs in zip(got, want, strict=True):
        assert math.isclose(mine.score, theirs.score, rel_tol=1e-9, abs_tol=1e-12)
        assert math.isclose(mine.relevance, theirs.relevance, rel_tol=1e-9, abs_tol=1e-12)
    by_key = {m.key: m for m in want}
    for mine in got:
        assert mine.matched_terms == by_key[mine.key].matched_terms


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations, asked=st.lists(queries, min_size=1, max_size=4), limit=st.sampled_from([None, 1, 3, 50]))
def test_bm25_in_sql_ranks_as_the_in_process_index_does(storage, ops, asked, limit):
    user = uuid.uuid4().hex  # a user of its own per example: nothing to clean between them
    rows: dict[str, str] = {}  # the tier's rows, which a fill reads
    sql = DatabaseLexical(storage, lambda _user: list(rows.items()), kind="facts")
    mine = LexicalIndex()
    for step, op in enumerate(ops):
        if step == len(ops) // 2:
            sql.search(user, "peanut")  # the first search fills from the rows; later writes change the tables
        with storage.atomic():
            if op[0] == "add":
                rows.pop(op[1], None)
                rows[op[1]] = op[2]
                sql.add(user, [(op[1], op[2])])
                mine.add(op[1], op[2])
            else:
                rows.pop(op[1], None)
                sql.remove(user, [op[1]])
                mine.remove(op[1])
    for query in asked:
        same_ranking(sql.search(user, query, limit), mine.search(query, limit))
        named = ["d1", "d3", "gone"]
        same_ranking(sql.search(user, query, limit, keys=named), mine.search(query, limit, keys=named))
    sql.fill(user)  # (the queries may all have been stopwords: nothing searched, nothing filled yet)
    stats = storage.execute("SELECT docs, total_length FROM search_stats WHERE user_id = ? AND kind = 'facts'",
                            [user]).fetchone()
    assert (stats[0] if stats is not None else 0) == len(mine)  # no row: nothing was ever there to index
    # no term is kept that no document holds, and every count is the number of documents holding it
    held = dict(storage.execute("SELECT term, df FROM search_terms WHERE user_id = ?", [user]).fetchall())
    counted = dict(storage.execute("SELECT term, count(*) FROM search_postings WHERE user_id = ? GROUP BY term",
                                   [user]).fetchall())
    assert held == counted


def test_a_user_is_filled_from_the_rows_once_and_other_users_stay_apart(storage):
    rows = {"ada": [("a1", "I keep bees"), ("a2", "bees and honey")], "bob": [("b1", "bees everywhere")]}
    calls = []

    def loader(user):
        calls.append(user)
        return rows[user]

    sql = DatabaseLexical(storage, loader, kind="facts")
    assert [m.key for m in sql.search("ada", "bees")] == ["a1", "a2"]
    assert [m.key for m in sql.search("ada", "honey")] == ["a2"]
    assert [m.key for m in sql.search("bob", "bees")] == ["b1"]
    other_host = DatabaseLexical(storage, loader, kind="facts")
    assert [m.key for m in other_host.search("ada", "bees")] == ["a1", "a2"]
    assert calls == ["ada", "bob"]  # filled once each, for every host


def test_a_search_of_a_filled_tier_is_one_statement(storage, monkeypatch):
    """Totals, document frequencies, idf and scores come back in one round trip; the matched
    terms and the query's upper bound (``relevance``) are those the in-process index gives."""
    rows = {"a1": "I keep bees in the garden", "a2": "bees and honey", "a3": "jazz in june"}
    sql = DatabaseLexical(storage, lambda _user: list(rows.items()), kind="facts")
    sql.fill("ada")
    mine = LexicalIndex()
    for key, text in rows.items():
        mine.add(key, text)
    sent = []
    execute = storage.execute
    monkeypatch.setattr(storage, "execute", lambda sql_text, params=(): sent.append(sql_text) or execute(sql_text, params))
    for query in ("bees garden", "honey marathon", "lisbon", "jazz june bees"):
        sent.clear()
        same_ranking(sql.search("ada", query), mine.search(query))
        assert len(sent) == 1, query
    sent.clear()
    assert sql.search("ada", "the of") == []  # nothing but stopwords: no statement at all
    assert sent == []


def test_the_vectors_of_a_user_who_has_nothing_are_searched_in_two_reads(storage, monkeypatch):
    """Is the tier filled (no), does the user hold anything (no): nothing more is asked, nothing
    written."""
    cache = EmbeddingCache(storage, HashingEmbedder(64))
    dense = DatabaseVectors(storage, lambda _user: [], cache, "facts")
    dense.ensure("someone-else")  # the model's table exists: what follows is the search alone
    monkeypatch.setattr(storage, "has_user", lambda user_id: False)
    sent = []
    execute = storage.execute
    monkeypatch.setattr(storage, "execute", lambda sql_text, params=(): sent.append(sql_text) or execute(sql_text, params))
    assert dense.search("nobody", cache.query_vector("bees"), 5) == []
    assert len(sent) == 1  # the filled-and-nearest query; has_user is the second read
    assert storage.execute("SELECT count(*) FROM search_filled WHERE user_id = 'nobody'").fetchone()[0] == 0


def test_a_user_who_has_nothing_is_searched_without_the_write_lock(pgvector_url, monkeypatch):
    """A recall of a user with nothing stored (new, or forgotten) only reads: it takes no write
    lock (which would queue it behind every writer) and leaves no row naming the user."""
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="hybrid", embedder=HashingEmbedder(64)) as mem:
        mem.remember("I keep bees")
        storage = internals(mem).storage
        locked = []
        atomic = storage.backend.atomic
        monkeypatch.setattr(storage.backend, "atomic", lambda: locked.append(1) or atomic())
        newcomer = mem.scoped(user_id="nobody-yet")
        for _ in range(2):
            assert newcomer.recall("bees") == []
            assert newcomer.context("bees").text.count("bees") == 0
        assert locked == []
        for table in ("search_stats", "search_filled", "search_docs"):
            assert storage.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'nobody-yet'").fetchone()[0] == 0
        assert [h.text for h in mem.recall("bees")] == ["I keep bees"]  # ada's first search fills her tiers
        assert locked


def test_vectors_in_the_database_find_the_exact_neighbours(storage, monkeypatch):
    cache = EmbeddingCache(storage, HashingEmbedder(64))
    docs = {f"d{i}": " ".join(WORDS[(i * 7) % len(WORDS):][:3] + WORDS[: i % 5]) for i in range(40)}
    dense = DatabaseVectors(storage, lambda user: docs.items() if user == "ada" else [], cache, "facts")
    matrix = cache.vectors("ada", list(docs.values()))
    for query in ("peanut allergy", "maria in lisbon", "running a marathon"):
        vector = cache.query_vector(query)
        exact = sorted(zip(docs, (matrix @ vector).tolist(), strict=True), key=lambda pair: -pair[1])[:5]
        found = dense.search("ada", vector, 5)
        assert [pair[0] for pair in found] == [pair[0] for pair in exact] or np.allclose(
            [s for _, s in found], [s for _, s in exact], atol=1e-6)
        assert np.allclose([s for _, s in found], [s for _, s in exact], atol=1e-5)
        similar = dense.similarity("ada", vector, ["d1", "d2", "missing"])
        assert set(similar) == {"d1", "d2"}
        assert math.isclose(similar["d1"], float(matrix[1] @ vector), abs_tol=1e-5)
    monkeypatch.setattr("tiers.indexes.db_vectors.EXACT_UP_TO", 0)  # the HNSW index, with its iterative scan
    vector = cache.query_vector("peanut allergy")
    exact = sorted(zip(docs, (matrix @ vector).tolist(), strict=True), key=lambda pair: -pair[1])[:5]
    assert {key for key, _ in dense.search("ada", vector, 5)} == {key for key, _ in exact}
    assert dense.search("bob", vector, 5) == []
    table = dense.table  # ada's rows joined the partial HNSW index, which can answer the query
    assert storage.execute(f"SELECT count(*) FROM {table} WHERE approximate").fetchone()[0] == len(docs)
    with storage.atomic():  # 40 rows: the planner rightly sorts them; without sorting it must use the index
        storage.execute("SET LOCAL enable_sort = off")
        plan = "\n".join(r[0] for r in storage.execute(
            f"EXPLAIN SELECT id FROM {table} WHERE approximate AND user_id = 'ada' AND kind = 'facts' "
            f"ORDER BY embedding <=> '{literal(vector)}'::vector LIMIT 5").fetchall())
    assert f"{table}_hnsw" in plan
    dense.add("ada", [("d99", "peanut allergy again")])  # a large tier's new rows join the index too
    assert storage.execute(f"SELECT approximate FROM {table} WHERE id = 'd99'").fetchone()[0] is True


def test_a_write_on_one_host_is_found_by_another_at_once_and_neither_keeps_an_index(pgvector_url):
    embedder = HashingEmbedder(128)
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="hybrid", embedder=embedder) as host_a, \
            UnifiedMemory(pgvector_url, user_id="ada", retrieval="hybrid", embedder=embedder) as host_b:
        assert host_b.recall("bees") == []
        host_a.remember("I keep bees in the garden")
        assert [h.text for h in host_b.recall("bees", limit=1)] == ["I keep bees in the garden"]
        fact = host_a.remember("My dentist appointment is on June 20")
        assert [h.text for h in host_b.recall("dentist", limit=1)] == ["My dentist appointment is on June 20"]
        host_b.forget(ids=[fact])
        assert host_a.recall("dentist appointment") == []
        for host in (host_a, host_b):
            assert host.stats().search == "database"
            inner = internals(host)
            for documents in (inner.facts.index, inner.log.index, inner.graph.index):
                assert isinstance(documents.lexical, DatabaseLexical)
                assert isinstance(documents.dense, DatabaseVectors)


def test_a_new_users_writes_are_indexed_as_they_commit(pgvector_url):
    """A new user's first write fills the tiers' search rows with what it writes: a bulk import on
    one host leaves nothing for another host's first recall to index (no loader runs there)."""
    embedder = HashingEmbedder(64)
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="hybrid", embedder=embedder) as host_a:
        host_a.remember_many([f"Storage unit {i} holds box {i}" for i in range(30)] + ["I keep bees in the garden"])
        host_a.add_turn("We moved to Porto last spring.")
        storage = internals(host_a).storage
        table = internals(host_a).facts.index.dense.table
        kinds = {row[0] for row in storage.execute("SELECT kind FROM search_stats WHERE user_id = 'ada'").fetchall()}
        assert {"facts", "messages"} <= kinds
        facts = host_a.stats().facts  # the import's 31, and what the turn taught
        assert facts >= 31
        assert storage.execute("SELECT docs FROM search_stats WHERE user_id = 'ada' AND kind = 'facts'"
                               ).fetchone()[0] == facts
        assert storage.execute(f"SELECT count(*) FROM {table} WHERE user_id = 'ada' AND kind = 'facts'"
                               ).fetchone()[0] == facts
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="hybrid", embedder=embedder) as host_b:
        loads = []
        for documents in (internals(host_b).facts.index, internals(host_b).log.index):
            for index in (documents.lexical, documents.dense):
                loader = index.loader
                index.loader = lambda user, _load=loader: loads.append(user) or _load(user)
        assert [h.text for h in host_b.recall("bees garden", limit=1)] == ["I keep bees in the garden"]
        assert "Porto" in host_b.context("where did we move?").text
        assert loads == []


def test_the_write_that_outgrows_exact_search_moves_the_tier_into_the_hnsw_index(pgvector_url, monkeypatch):
    monkeypatch.setattr("tiers.indexes.db_vectors.EXACT_UP_TO", 5)
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="hybrid", embedder=HashingEmbedder(64)) as mem:
        storage = internals(mem).storage
        table = internals(mem).facts.index.dense.table

        def approximate() -> list[bool]:
            return [row[0] for row in storage.execute(
                f"SELECT DISTINCT approximate FROM {table} WHERE user_id = 'ada' AND kind = 'facts'").fetchall()]

        mem.remember_many([f"Storage unit {i} holds box {i}" for i in range(5)])
        assert approximate() == [False]
        mem.remember("My sister Maria plays the violin")  # the sixth: past the line, no search yet
        assert approximate() == [True]
        assert storage.execute("SELECT approximate FROM search_filled WHERE user_id = 'ada' AND kind = 'facts'"
                               ).fetchone()[0] is True
        mem.remember("My cousin keeps bees")
        assert approximate() == [True]
        assert [h.text for h in mem.recall("who plays the violin?", limit=1)] == ["My sister Maria plays the violin"]


def test_a_recall_searches_the_tiers_at_once_and_finds_what_one_after_the_other_finds(pgvector_url, monkeypatch):
    """On the database path a recall's three tier searches run at once, each on its own
    connection (the server's cores work in parallel), with the same hits as sequential runs;
    inside a transaction (reads that must see its writes) they stay on the caller's thread."""
    from tiers.facts.long_term import LongTermFacts
    from tiers.graph.entities import EntityGraph
    from tiers.short_term import ShortTermWindow

    threads: dict[str, set[int]] = {}
    for cls in (LongTermFacts, EntityGraph, ShortTermWindow):
        original = cls.recall_candidates

        def spy(self, *args, _original=original, _name=cls.__name__, **kwargs):
            threads.setdefault(_name, set()).add(threading.get_ident())
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "recall_candidates", spy)
    questions = ["who plays the cello?", "where do we live?", "bees", "what about Maria's garden"]
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="hybrid", embedder=HashingEmbedder(64),
                       clock=lambda: 1_750_000_000.0) as mem:  # one moment: the same recency every time
        mem.remember_many(["My sister Maria plays the cello", "I keep bees in the garden", "We live in Porto",
                           "Maria's garden has roses"])
        mem.add_turn("We moved to Porto last spring.", "Lovely city.")
        together = []
        for question in questions:
            threads.clear()
            together.append([(h.id, h.score) for h in mem.recall(question)])
            assert len(threads) == 3
            assert threads["LongTermFacts"] == {threading.get_ident()}  # the caller searches the first itself
            # the others on the fan-out's threads meanwhile (one thread may take both, one after the
            # other, when the first is done before the second is handed over)
            assert threading.get_ident() not in threads["EntityGraph"] | threads["ShortTermWindow"]
        threads.clear()
        storage = internals(mem).storage
        with storage.atomic():
            assert storage.concurrent_reads() is False
            inside = [[(h.id, h.score) for h in mem.recall(q)] for q in questions]
        assert set.union(*threads.values()) == {threading.get_ident()}
        internals(mem).fanout.close()  # from now on, one after the other
        apart = [[(h.id, h.score) for h in mem.recall(q)] for q in questions]
    assert together == inside == apart
    assert all(together)


def test_forget_leaves_no_term_and_no_vector_behind(pgvector_url):
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="hybrid", embedder=HashingEmbedder(64)) as mem:
        keep = mem.remember("I keep bees")
        gone = mem.remember("My zyxwvut code is in the drawer")
        assert [h.id for h in mem.recall("zyxwvut", limit=1)] == [gone]
        mem.forget(ids=[gone])
        storage = internals(mem).storage
        table = internals(mem).facts.index.dense.table
        assert storage.execute("SELECT count(*) FROM search_postings WHERE term LIKE 'zyxwvut%'").fetchone()[0] == 0
        assert storage.execute("SELECT count(*) FROM search_terms WHERE term LIKE 'zyxwvut%'").fetchone()[0] == 0
        for name in ("search_docs", "search_postings", table):
            assert storage.execute(f"SELECT count(*) FROM {name} WHERE id = ?", [gone]).fetchone()[0] == 0
        assert storage.execute(f"SELECT count(*) FROM {table} WHERE id = ?", [keep]).fetchone()[0] == 1
        mem.forget(user_id="ada")
        for name in ("search_docs", "search_postings", "search_terms", "search_stats", "search_filled", table):
            assert storage.execute(f"SELECT count(*) FROM {name} WHERE user_id = 'ada'").fetchone()[0] == 0


def test_the_same_answers_as_a_sqlite_file(pgvector_url, tmp_path):
    from tests.conftest import Clock

    said = [("Hi, I'm Ada. I'm allergic to peanuts.", "Noted."), ("My sister Maria lives in Lisbon.", "Lovely."),
            ("I started running, training for the Lisbon marathon.", "Great!"), ("Remember my allergy.", "Sure.")]
    answers = []
    for target in (tmp_path / "memory.db", pgvector_url):
        with UnifiedMemory(target, user_id="ada", retrieval="lexical", clock=Clock()) as mem:
            for user, assistant in said:
                mem.add_turn(user, assistant)
            mem.remember("Ada prefers short answers", importance=0.8)
            answers.append([[(h.tier, h.text, round(h.score, 9)) for h in mem.recall(q, limit=6)]
                            for q in ("peanut allergy", "where does Maria live", "marathon", "short answers")])
    assert answers[0] == answers[1]


def test_an_existing_memory_gains_the_tables_and_reindex_rebuilds_them(pgvector_url):
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="lexical", search="in_process") as old:
        old.remember("I keep bees")
        assert old.stats().search == "in-process"
        storage = internals(old).storage
        assert storage.execute("SELECT to_regclass('search_postings')").fetchone()[0] is None
    with UnifiedMemory(pgvector_url, user_id="ada", retrieval="lexical") as new:
        assert new.stats().search == "database"
        assert [h.text for h in new.recall("bees")] == ["I keep bees"]
        storage = internals(new).storage
        storage.execute("DELETE FROM search_postings")  # damaged: reindex rebuilds from the rows
        assert new.recall("bees") == []
        assert new.reindex() == 1
        assert [h.text for h in new.recall("bees")] == ["I keep bees"]


def test_without_pgvector_it_searches_in_process_and_says_why_once(pg_url, caplog):
    caplog.set_level(logging.WARNING, logger="unified_memory")
    for _ in range(2):
        with UnifiedMemory(pg_url, user_id="ada", retrieval="lexical") as mem:
            mem.remember("I keep bees")
            stats = mem.stats()
            assert stats.search == "in-process" and "pgvector" in stats.search_reason
            assert [h.text for h in mem.recall("bees")] == ["I keep bees"]
    assert sum("pgvector" in r.getMessage() for r in caplog.records) == 1
    with pytest.raises(ConfigError) as refused:
        UnifiedMemory(pg_url, search="database")
    assert refused.value.field == "search" and "pgvector" in str(refused.value)


def test_a_sqlite_file_searches_in_process_and_refuses_the_database_path(tmp_path):
    with UnifiedMemory(tmp_path / "m.db") as mem:
        assert mem.stats().search == "in-process"
    with pytest.raises(ConfigError) as refused:
        UnifiedMemory(tmp_path / "m.db", search="database")
    assert isinstance(refused.value, (UnifiedMemoryError, ValueError)) and refused.value.field == "search"
    with pytest.raises(ConfigError) as refused:
        UnifiedMemory(tmp_path / "m.db", search="cloud")
    assert "search" in str(refused.value)


def test_migrate_into_the_database_path_fills_the_search_tables(pgvector_url, tmp_path):
    from unified_memory.io.migrate import migrate_database

    source = tmp_path / "memory.db"
    with UnifiedMemory(source, user_id="ada", retrieval="lexical") as mem:
        mem.remember("I keep bees")
        mem.scoped(user_id="bob").remember("Bob plays jazz")
    seen = []
    report = migrate_database(source, pgvector_url, progress=lambda done, total: seen.append((done, total)))
    assert report.verified and report.indexed_users == 2 and seen == [(1, 2), (2, 2)]
    with UnifiedMemory(pgvector_url, user_id="bob", retrieval="lexical") as mem:
        storage = internals(mem).storage
        filled = storage.execute("SELECT user_id, docs FROM search_stats WHERE kind = 'facts' ORDER BY user_id").fetchall()
        assert [tuple(row) for row in filled] == [("ada", 1), ("bob", 1)]
        assert [h.text for h in mem.recall("jazz")] == ["Bob plays jazz"]


def test_the_cli_says_which_search_path(pgvector_url, pg_url):
    import json
    import subprocess
    import sys

    for url, expected in ((pgvector_url, "database"), (pg_url, "in-process")):
        with UnifiedMemory(url, retrieval="lexical") as mem:
            mem.remember("I keep bees")
        done = subprocess.run([sys.executable, "-m", "unified_memory", "--db", url, "--json", "stats"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["search"] == expected
