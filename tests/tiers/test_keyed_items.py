"""Keyed items (tiers.items.keyed_items and the memory's put_item / get_item / search_items / ...): round trip,
overwrite, delete, isolation of namespaces and users, TTL with an injected clock, filters, ranking,
namespace listing, and that forget / export / import cover them."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiers.items.checks import matches
from tiers.items.keyed_items import KeyedItems
from tiers.storage.backend import Storage
from unified_memory import MemoryTypeError, MemoryValueError, StoredItem, UnifiedMemory


@pytest.fixture
def mem(clock):
    with UnifiedMemory(user_id="ada", clock=clock) as memory:
        yield memory


def test_round_trip_overwrite_and_delete(mem, clock):
    mem.put_item(("notes", "home"), "n1", {"text": "I keep bees", "tags": ("a", "b"), "n": 1.5, "nested": {"x": None}})
    item = mem.get_item(("notes", "home"), "n1")
    assert isinstance(item, StoredItem)
    assert item.namespace == ("notes", "home") and item.key == "n1"
    assert item.value == {"text": "I keep bees", "tags": ["a", "b"], "n": 1.5, "nested": {"x": None}}
    assert item.created_at == item.updated_at and item.score is None
    clock.advance(seconds=60 * 5)
    mem.put_item(["notes", "home"], "n1", {"text": "I keep wasps"})
    again = mem.get_item(("notes", "home"), "n1")
    assert again.value == {"text": "I keep wasps"}
    assert again.created_at == item.created_at and (again.updated_at - item.updated_at).total_seconds() == 300
    assert mem.delete_item(("notes", "home"), "n1") is True
    assert mem.get_item(("notes", "home"), "n1") is None
    assert mem.delete_item(("notes", "home"), "n1") is False


def test_a_namespace_sees_only_its_own_subtree_and_user(mem):
    mem.put_item(("a",), "k", {"v": 1})
    mem.put_item(("a", "b"), "k", {"v": 2})
    mem.put_item(("ab",), "k", {"v": 3})
    mem.put_item(("a-",), "k", {"v": 4})
    mem.scoped(user_id="bob").put_item(("a",), "k", {"v": 5})
    assert sorted(i.value["v"] for i in mem.search_items(("a",))) == [1, 2]
    assert [i.value["v"] for i in mem.search_items(("a", "b"))] == [2]
    assert sorted(i.value["v"] for i in mem.search_items(())) == [1, 2, 3, 4]
    assert [i.value["v"] for i in mem.scoped(user_id="bob").search_items(())] == [5]
    assert mem.get_item(("a",), "k").value == {"v": 1}


LABELS = st.sampled_from(["a", "b", "ab", "a-b", "*", "x y", "é"])
NAMESPACES = st.lists(LABELS, min_size=1, max_size=3).map(tuple)


@settings(max_examples=60, deadline=None)
@given(writes=st.lists(st.tuples(st.sampled_from(["ada", "bob"]), NAMESPACES, st.sampled_from(["k1", "k2"]),
                                 st.integers(0, 9)), max_size=12),
       prefix=st.lists(LABELS, max_size=2).map(tuple), user=st.sampled_from(["ada", "bob"]))
def test_search_returns_exactly_the_users_items_under_the_prefix(writes, prefix, user):
    items = KeyedItems(Storage(None))
    try:
        model: dict[tuple, int] = {}
        for i, (who, namespace, key, value) in enumerate(writes):
            items.put(who, namespace, key, {"v": value}, now=float(i))
            model[(who, namespace, key)] = value
        found = items.search(user, prefix, limit=100, now=100.0)
        expected = {(ns, key): v for (who, ns, key), v in model.items() if who == user and ns[:len(prefix)] == prefix}
        assert {(row.namespace, row.key): row.value["v"] for row in found} == expected
        assert len(found) == len(expected)
        for (who, ns, key), v in model.items():
            other = "bob" if who == "ada" else "ada"
            assert items.get(who, ns, key, now=100.0).value == {"v": v}
            if (other, ns, key) not in model:
                assert items.get(other, ns, key, now=100.0) is None
    finally:
        items.storage.close()  # a PostgreSQL database per example: its connection goes now


def test_ttl_expires_and_reads_refresh_it(mem, clock):
    mem.put_item(("s",), "short", {"t": "x"}, ttl=10)
    mem.put_item(("s",), "kept", {"t": "y"})
    clock.advance(seconds=60 * 8)
    assert mem.get_item(("s",), "short") is not None  # refreshed: now expires 10 minutes from here
    clock.advance(seconds=60 * 8)
    assert mem.get_item(("s",), "short", refresh_ttl=False) is not None
    clock.advance(seconds=60 * 3)  # 11 minutes after the refresh
    assert mem.get_item(("s",), "short") is None
    assert [i.key for i in mem.search_items(("s",))] == ["kept"]
    assert mem.item_namespaces() == [("s",)]
    mem.put_item(("gone",), "g", {"t": "z"}, ttl=1)
    clock.advance(seconds=60 * 2)
    assert mem.item_namespaces() == [("s",)]
    mem.put_item(("s",), "other", {"t": "w"})  # a write sweeps the expired rows
    assert mem.export_jsonl(out := io.StringIO()) > 0 and '"short"' not in out.getvalue()


def test_search_refreshes_the_ttl_of_what_it_returns(mem, clock):
    mem.put_item(("s",), "a", {"t": "x"}, ttl=10)
    mem.put_item(("s",), "b", {"t": "y"}, ttl=10)
    clock.advance(seconds=60 * 9)
    assert len(mem.search_items(("s",), filter={"t": "x"})) == 1
    clock.advance(seconds=60 * 9)
    assert [i.key for i in mem.search_items(("s",), refresh_ttl=False)] == ["a"]


@pytest.mark.parametrize("wanted, keys", [
    ({"kind": "todo"}, ["t1", "t2"]),
    ({"kind": "todo", "n": 2}, ["t2"]),
    ({"n": {"$eq": 1}}, ["t1"]),
    ({"n": {"$ne": 1}}, ["t2", "t3"]),
    ({"n": {"$gt": 1}}, ["t2", "t3"]),
    ({"n": {"$gte": 2}}, ["t2", "t3"]),
    ({"n": {"$lt": 3}}, ["t1", "t2"]),
    ({"n": {"$lte": 1}}, ["t1"]),
    ({"n": {"$gt": 1, "$lt": 3}}, ["t2"]),
    ({"meta": {"owner": "ada"}}, ["t1"]),
    ({"tags": ["a", "b"]}, ["t3"]),
    ({"missing": None}, ["t1", "t2", "t3"]),
    ({"kind": "nothing"}, []),
])
def test_filters(mem, wanted, keys):
    mem.put_item(("f",), "t1", {"kind": "todo", "n": 1, "meta": {"owner": "ada", "x": 1}})
    mem.put_item(("f",), "t2", {"kind": "todo", "n": 2, "meta": {"owner": "bob"}})
    mem.put_item(("f",), "t3", {"kind": "note", "n": 3, "tags": ["a", "b"]})
    assert sorted(i.key for i in mem.search_items(("f",), filter=wanted)) == keys


def test_filter_operators_compare_like_kinds_only():
    assert matches({"n": "b"}, {"n": {"$gt": "a"}}) and not matches({"n": "b"}, {"n": {"$gt": 1}})
    assert not matches({"n": True}, {"n": 1}) and matches({"n": 1.0}, {"n": 1})
    assert not matches({"n": None}, {"n": {"$lt": 5}})


def test_a_query_ranks_what_it_matches_first_with_scores(mem, clock):
    mem.put_item(("m",), "bees", {"text": "I keep bees in the garden"})
    clock.advance(seconds=60 * 1)
    mem.put_item(("m",), "jazz", {"text": "I like jazz"})
    clock.advance(seconds=60 * 1)
    mem.put_item(("m",), "other", {"text": "Standup at nine"})
    mem.put_item(("m",), "hidden", {"text": "bees bees"}, index=False)
    mem.put_item(("m",), "titled", {"title": "about bees", "body": "nothing"}, index=["body"])
    found = mem.search_items(("m",), query="where are my bees?")
    assert found[0].key == "bees" and found[0].score is not None and found[0].score > 0
    # a lexical memory scores by BM25 relevance: 0.0 for what the query misses, None for nothing indexed
    assert {i.key: i.score for i in found[1:]} == {"jazz": 0.0, "other": 0.0, "hidden": None, "titled": 0.0}
    assert found[0].ranking is not None and found[0].ranking["fused"] > 0 and found[0].ranking["dense"] is None
    assert [i.key for i in mem.search_items(("m",), query="jazz bees", limit=2)] in (["bees", "jazz"], ["jazz", "bees"])
    page = mem.search_items(("m",), query="bees", offset=1, limit=2)
    assert [(i.key, i.score) for i in page] == [("titled", 0.0), ("hidden", None)]  # then newest first
    assert [i.key for i in mem.search_items(("m",))][:2] == ["titled", "hidden"]  # no query: newest first
    assert all(i.score is None and i.ranking is None for i in mem.search_items(("m",)))


def test_vectors_score_each_item_by_its_closest_field(mem):
    """With ``query_vector``, an item's score is the cosine similarity of its closest stored vector;
    the order is the fused rank (BM25 + that similarity + recency), and items the query reaches
    neither way follow, closest first."""
    mem.put_item(("v",), "a", {"title": "alpha", "body": "first"}, vectors=[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    mem.put_item(("v",), "b", {"title": "beta"}, vectors=[[0.6, 0.8, 0.0]])
    mem.put_item(("v",), "c", {"title": "gamma"}, index=False, vectors=[[0.0, 1.0, 0.0]])  # index=False: no vectors
    mem.put_item(("v",), "d", {"title": "delta"})  # indexed text, no vectors
    found = {i.key: i for i in mem.search_items(("v",), query="zzz", query_vector=[0.0, 1.0, 0.0])}
    assert found["a"].score == pytest.approx(1.0) and found["b"].score == pytest.approx(0.8)
    assert found["c"].score is None  # nothing indexed
    assert found["d"].score == 0.0 and found["d"].ranking["dense"] is None  # no vectors: its BM25 relevance
    assert [i.key for i in mem.search_items(("v",), query="zzz", query_vector=[0.0, 1.0, 0.0])][:2] == ["a", "b"]
    assert [i.key for i in mem.search_items(("v",), query="zzz", query_vector=[1.0, 0.1, 0.0])][:2] == ["a", "b"]
    closest = mem.search_items(("v",), query="zzz", query_vector=[0.6, 0.8, 0.0])[0]
    assert closest.key == "b" and closest.score == pytest.approx(1.0)
    # vectors of another length (another embedder) are not compared
    assert {i.ranking["dense"] for i in mem.search_items(("v",), query="beta", query_vector=[1.0, 0.0])} == {None}
    mem.put_item(("v",), "a", {"title": "alpha"})  # a put without vectors drops the old ones
    assert mem.search_items(("v",), query="alpha", query_vector=[1.0, 0.0, 0.0])[0].ranking["dense"] is None


@settings(max_examples=25, deadline=None)
@given(st.lists(st.lists(st.floats(-10, 10, allow_nan=False, width=32), min_size=3, max_size=3), min_size=1,
                max_size=6),
       st.lists(st.floats(-10, 10, allow_nan=False, width=32), min_size=3, max_size=3))
def test_the_score_is_the_best_cosine_of_the_stored_vectors(vectors, query):
    import numpy as np
    with UnifiedMemory(user_id="ada") as memory:
        memory.put_item(("p",), "k", {"text": "x"}, vectors=vectors)
        [item] = memory.search_items(("p",), query="q", query_vector=query)
    rows, wanted = np.asarray(vectors, dtype=np.float32).astype(float), np.asarray(query, dtype=np.float32).astype(float)
    norms = np.linalg.norm(rows, axis=1) * (np.linalg.norm(wanted) or 1.0)
    expected = max(rows @ wanted / np.where(norms > 0, norms, 1.0))
    assert item.score == pytest.approx(expected, abs=1e-5)
    assert -1.0 - 1e-6 <= item.score <= 1.0 + 1e-6


def test_non_finite_numbers_in_filters_compare_as_python_does(mem):
    mem.put_item(("f",), "a", {"price": 3.5})
    mem.put_item(("f",), "b", {"price": -2})
    mem.put_item(("f",), "c", {"price": "free"})
    inf, nan = float("inf"), float("nan")
    assert sorted(i.key for i in mem.search_items(("f",), filter={"price": {"$lt": inf}})) == ["a", "b"]
    assert sorted(i.key for i in mem.search_items(("f",), filter={"price": {"$gt": -inf}})) == ["a", "b"]
    assert [i.key for i in mem.search_items(("f",), filter={"price": nan})] == []
    assert sorted(i.key for i in mem.search_items(("f",), filter={"price": {"$ne": nan}})) == ["a", "b", "c"]


def test_a_filter_key_may_be_a_dotted_path_and_an_index_path_may_count_from_the_end(mem):
    mem.put_item(("d",), "n", {"user": {"access-level": "nested"}, "tags": ["x", "last one"]}, index=["tags[-1]"])
    mem.put_item(("d",), "k", {"user.access-level": "literal"}, index=["$"])
    assert [i.key for i in mem.search_items(("d",), filter={"user.access-level": "nested"})] == ["n"]
    assert [i.key for i in mem.search_items(("d",), filter={"user.access-level": "literal"})] == ["k"]
    assert [(i.key, i.score > 0) for i in mem.search_items(("d",), query="last")][0] == ("n", True)
    assert [i.score for i in mem.search_items(("d",), query="x", filter={"user.access-level": "nested"})] == [0.0]


def test_list_namespaces(mem):
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("b", "c"), ("users", "ada", "prefs")]:
        mem.put_item(ns, "k", {"v": 1})
    assert mem.item_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("b", "c"),
                                     ("users", "ada", "prefs")]
    assert mem.item_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "x")]
    assert mem.item_namespaces(prefix=("a", "*", "c")) == [("a", "b", "c")]
    assert mem.item_namespaces(prefix=("*", "c")) == [("b", "c")]
    assert mem.item_namespaces(suffix=("c",)) == [("a", "b", "c"), ("b", "c")]
    assert mem.item_namespaces(suffix=("*", "prefs")) == [("users", "ada", "prefs")]
    assert mem.item_namespaces(prefix=("a",), suffix=("d",)) == [("a", "b", "d")]
    assert mem.item_namespaces(max_depth=1) == [("a",), ("b",), ("users",)]
    assert mem.item_namespaces(max_depth=2, limit=2, offset=1) == [("a", "x"), ("b", "c")]
    assert mem.scoped(user_id="bob").item_namespaces() == []


@pytest.mark.parametrize("call, field, error", [
    (lambda m: m.put_item(("a.b",), "k", {}), "namespace[0]", MemoryValueError),
    (lambda m: m.put_item(("",), "k", {}), "namespace[0]", MemoryValueError),
    (lambda m: m.put_item(("a\x00",), "k", {}), "namespace[0]", MemoryValueError),
    (lambda m: m.put_item((), "k", {}), "namespace", MemoryValueError),
    (lambda m: m.put_item("abc", "k", {}), "namespace", MemoryTypeError),
    (lambda m: m.put_item(("a",), "", {}), "key", MemoryValueError),
    (lambda m: m.put_item(("a",), "k", None), "value", MemoryTypeError),
    (lambda m: m.put_item(("a",), "k", {"x": float("nan")}), "value", MemoryValueError),
    (lambda m: m.put_item(("a",), "k", {1: "x"}), "value", MemoryValueError),
    (lambda m: m.put_item(("a",), "k", {}, ttl=0), "ttl", MemoryValueError),
    (lambda m: m.put_item(("a",), "k", {}, index="title"), "index", MemoryTypeError),
    (lambda m: m.search_items(("a",), filter={"n": {"$in": [1]}}), "filter.n", MemoryValueError),
    (lambda m: m.search_items(("a",), limit=0), "limit", MemoryValueError),
    (lambda m: m.item_namespaces(max_depth=0), "max_depth", MemoryValueError),
    (lambda m: m.put_item(("a",), "k", {}, vectors=[[1.0], [1.0, 2.0]]), "vectors[1]", MemoryValueError),
    (lambda m: m.put_item(("a",), "k", {}, vectors=[[1.0, float("inf")]]), "vectors[0][1]", MemoryValueError),
    (lambda m: m.put_item(("a",), "k", {}, vectors=[["1"]]), "vectors[0][0]", MemoryTypeError),
    (lambda m: m.put_item(("a",), "k", {}, vectors=[[]]), "vectors[0]", MemoryValueError),
    (lambda m: m.put_item(("a",), "k", {}, vectors="abc"), "vectors", MemoryTypeError),
    (lambda m: m.put_item(("a",), "k", {}, vectors=[[0.0]] * 1025), "vectors", MemoryValueError),
    (lambda m: m.search_items(("a",), query="q", query_vector=[float("nan")]), "query_vector[0]", MemoryValueError),
    (lambda m: m.search_items(("a",), query="q", query_vector=[1.0], distance_type="hamming"), "distance_type",
     MemoryValueError),
])
def test_bad_input_names_the_field_and_writes_nothing(mem, call, field, error):
    mem.put_item(("a",), "k", {"v": 1})
    with pytest.raises(error) as caught:
        call(mem)
    assert caught.value.field == field
    assert [i.value for i in mem.search_items(())] == [{"v": 1}]


def test_forget_export_and_import_cover_items(tmp_path, clock):
    with UnifiedMemory(tmp_path / "a.db", user_id="ada", clock=clock) as mem:
        mem.put_item(("notes",), "n1", {"text": "I keep bees"}, ttl=60)
        mem.put_item(("notes", "x"), "n2", {"text": "jazz"})
        mem.scoped(user_id="bob").put_item(("notes",), "b", {"text": "bob's"})
        assert "ada" in mem.users() and "bob" in mem.users()
        out = io.StringIO()
        assert mem.export_jsonl(out) == 2
        with UnifiedMemory(tmp_path / "b.db", user_id="ada", clock=clock) as other:
            assert other.import_jsonl(io.StringIO(out.getvalue())) == 2
            assert other.import_jsonl(io.StringIO(out.getvalue())) == 0  # nothing twice
            assert [i.model_dump() for i in other.search_items(())] == [i.model_dump() for i in mem.search_items(())]
            assert other.import_jsonl(io.StringIO(out.getvalue()), user_id="cy") == 2
            assert other.scoped(user_id="cy").get_item(("notes",), "n1").value == {"text": "I keep bees"}
        gone = mem.forget(user_id="ada")
        assert gone["keyed_items"] == 2
        assert mem.search_items(()) == [] and mem.item_namespaces() == []
        assert mem.scoped(user_id="bob").get_item(("notes",), "b") is not None


@pytest.mark.sqlite_only
def test_a_schema_3_file_gains_the_vectors_column_and_keeps_its_items(tmp_path):
    import sqlite3

    from tiers.storage.backend import SCHEMA_VERSION

    path = tmp_path / "old.db"
    with UnifiedMemory(path, user_id="ada") as memory:
        memory.put_item(("notes",), "n1", {"text": "I keep bees"})
    conn = sqlite3.connect(path)  # what schema 3 wrote: no vectors column
    with conn:
        conn.execute("ALTER TABLE keyed_items DROP COLUMN vectors")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()
    with UnifiedMemory(path, user_id="ada") as memory:
        assert memory.stats().schema_version == SCHEMA_VERSION == 5
        assert memory.get_item(("notes",), "n1").value == {"text": "I keep bees"}
        memory.put_item(("notes",), "n2", {"text": "jazz"}, vectors=[[0.0, 1.0]])
        assert memory.search_items(("notes",), query="music", query_vector=[0.0, 1.0])[0].key == "n2"
