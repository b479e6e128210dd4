import hashlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiers.indexes.vectors import EmbeddingCache, NumpyVectorIndex, PartitionedVectors, content_hash
from tiers.storage import journal
from tiers.storage.backend import Storage
from tiers.storage.journal import IndexJournal
from unified_memory.errors import MemoryTypeError, MemoryValueError
from unified_memory.protocols import VectorIndex
from unified_memory.testing import FakeEmbedder


def test_content_hash_is_sha256_of_utf8():
    assert content_hash("café") == hashlib.sha256("café".encode()).hexdigest()
    assert content_hash("a") != content_hash("a ")
    with pytest.raises(MemoryTypeError):
        content_hash(b"bytes")


# -- EmbeddingCache -----------------------------------------------------------------------------


def stored_rows(store):
    return store.query("SELECT user_id, model, dim, length(vector) AS size FROM embeddings ORDER BY user_id")


def test_cache_embeds_each_distinct_text_once_in_one_batch():
    store, emb = Storage(None), FakeEmbedder(16)
    cache = EmbeddingCache(store, emb)
    texts = ["peanut allergy", "lives in Lisbon", "peanut allergy", "likes jazz"]
    vectors = cache.vectors("ada", texts)
    assert emb.calls == 1 and emb.texts == ["peanut allergy", "lives in Lisbon", "likes jazz"]
    assert np.array_equal(vectors, emb.embed(texts))  # in order, duplicates included
    assert (cache.embedded, cache.cache_hits, cache.embed_calls) == (3, 0, 1)
    assert len(stored_rows(store)) == 3 and stored_rows(store)[0]["size"] == 16 * 4


def test_cache_never_re_embeds_a_known_text():
    store, emb = Storage(None), FakeEmbedder(16)
    cache = EmbeddingCache(store, emb)
    first = cache.vectors("ada", ["a peanut", "jazz"])
    again = cache.vectors("ada", ["jazz", "a peanut", "new text"])
    assert emb.texts == ["a peanut", "jazz", "new text"]
    assert np.array_equal(again[:2], first[::-1])
    assert cache.cache_hits == 2
    assert cache.vectors("ada", []).shape == (0, 16)


def test_cache_survives_a_restart_without_re_embedding(db_path):
    store = Storage(db_path)
    before = EmbeddingCache(store, FakeEmbedder(16)).vectors("ada", ["peanut allergy", "jazz"])
    store.close()
    store, emb = Storage(db_path), FakeEmbedder(16)
    cache = EmbeddingCache(store, emb)
    after = cache.vectors("ada", ["jazz", "peanut allergy"])
    assert emb.calls == 0 and cache.embedded == 0 and cache.cache_hits == 2
    assert np.array_equal(after, before[::-1]) and after.dtype == np.float32


@pytest.mark.parametrize("scan_from", [2, 10_000])  # one range scan, or lookups by key
def test_cache_reads_back_exactly_what_it_stored(monkeypatch, scan_from):
    import tiers.indexes.embedding_cache

    monkeypatch.setattr(tiers.indexes.embedding_cache, "_SCAN_FROM", scan_from)
    store, emb = Storage(None), FakeEmbedder(16)
    texts = [f"note {i} about jazz" for i in range(40)]
    first = EmbeddingCache(store, emb).vectors("ada", texts)
    EmbeddingCache(store, FakeEmbedder(16, name="other")).vectors("ada", texts[:5])
    EmbeddingCache(store, emb).vectors("bob", ["only bob"])
    cache = EmbeddingCache(store, emb)
    again = cache.vectors("ada", [*texts[::-1], "new"])
    assert np.array_equal(again[:40], first[::-1]) and cache.embedded == 1 and cache.cache_hits == 40


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([f"text {i}" for i in range(12)]), max_size=30),
       st.lists(st.sampled_from([f"text {i}" for i in range(12)]), max_size=8), st.sampled_from([1, 10_000]),
       st.sampled_from([2, 8192]))
def test_cache_vectors_equal_the_embedders_whatever_was_cached(texts, cached, scan_from, embed_slice):
    """Found rows, missing rows and repeated texts all land in their place, from one fresh array,
    the missing texts embedded in slices of ``_EMBED_SLICE``."""
    import tiers.indexes.embedding_cache

    old_scan, old_slice = tiers.indexes.embedding_cache._SCAN_FROM, tiers.indexes.embedding_cache._EMBED_SLICE
    tiers.indexes.embedding_cache._SCAN_FROM, tiers.indexes.embedding_cache._EMBED_SLICE = scan_from, embed_slice
    try:
        store, emb = Storage(None), FakeEmbedder(16)
        cache = EmbeddingCache(store, emb)
        cache.vectors("ada", cached)
        got = cache.vectors("ada", texts)
        assert got.dtype == np.float32 and got.shape == (len(texts), 16)
        assert np.array_equal(got, emb.embed(texts))
        assert cache.embedded == len(set(cached) | set(texts))
        new = len(set(texts) - set(cached))
        assert cache.embed_calls == -(-len(set(cached)) // embed_slice) + -(-new // embed_slice)
        got[:] = 0  # the caller's own array: writing it changes nothing cached
        assert np.array_equal(cache.vectors("ada", texts), emb.embed(texts))
    finally:
        tiers.indexes.embedding_cache._SCAN_FROM, tiers.indexes.embedding_cache._EMBED_SLICE = old_scan, old_slice


def test_a_first_load_keeps_one_copy_of_the_vectors():
    """The vectors read for a new partition become its matrix (at 300,000 x 384 a copy is 460 MB)."""
    index = NumpyVectorIndex()
    vectors = np.eye(4, dtype=np.float32)
    index.upsert("p", ["a", "b", "c", "d"], vectors, owned=True)
    assert index._parts["p"].matrix is vectors
    assert index.search("p", vectors[2], 2) == [("c", 1.0), ("a", 0.0)]
    index.upsert("p", ["e"], np.ones((1, 4), dtype=np.float32), owned=True)  # not new: copied in
    assert [key for key, _ in index.search("p", np.ones(4, dtype=np.float32), 5)] == ["e", "a", "b", "c", "d"]
    copied = NumpyVectorIndex()
    copied.upsert("q", ["a", "b"], vectors[:2])  # not handed over: copied
    assert copied._parts["q"].matrix is not vectors


def test_cache_keys_by_user_and_model():
    store = Storage(None)
    one, other = FakeEmbedder(16, name="m1"), FakeEmbedder(16, name="m2")
    EmbeddingCache(store, one).vectors("ada", ["jazz"])
    EmbeddingCache(store, one).vectors("bob", ["jazz"])
    EmbeddingCache(store, other).vectors("ada", ["jazz"])
    assert one.calls == 2 and other.calls == 1
    assert {(r["user_id"], r["model"]) for r in stored_rows(store)} == {("ada", "m1"), ("bob", "m1"), ("ada", "m2")}


def test_cache_re_embeds_when_the_stored_dim_does_not_match():
    store = Storage(None)
    EmbeddingCache(store, FakeEmbedder(16, name="model")).vectors("ada", ["jazz"])
    wider = FakeEmbedder(32, name="model")
    vectors = EmbeddingCache(store, wider).vectors("ada", ["jazz"])
    assert wider.calls == 1 and vectors.shape == (1, 32)
    assert [(r["dim"], r["size"]) for r in stored_rows(store)] == [(32, 128)]
    with store.atomic():  # a truncated blob is treated as missing too
        store.execute("UPDATE embeddings SET vector = ?", [b"\x00" * 8])
    assert np.array_equal(EmbeddingCache(store, wider).vectors("ada", ["jazz"]), vectors)
    assert wider.calls == 2


def test_cache_delete_user_and_prune():
    store = Storage(None)
    cache = EmbeddingCache(store, FakeEmbedder(8))
    cache.vectors("ada", ["a peanut", "jazz", "Lisbon"])
    cache.vectors("bob", ["jazz"])
    assert cache.prune("ada", keep=["jazz"]) == 2
    assert cache.delete_user("ada") == 1
    assert [r["user_id"] for r in stored_rows(store)] == ["bob"]


def test_cache_inside_a_transaction_rolls_back_with_it():
    store, emb = Storage(None), FakeEmbedder(8)
    cache = EmbeddingCache(store, emb)
    with pytest.raises(RuntimeError), store.atomic():
        cache.vectors("ada", ["jazz"])
        raise RuntimeError("boom")
    assert stored_rows(store) == []
    with store.atomic():
        cache.vectors("ada", ["jazz"])
    assert len(stored_rows(store)) == 1 and emb.calls == 2


def test_cache_rejects_an_embedder_returning_the_wrong_shape():
    class Broken(FakeEmbedder):
        def embed(self, texts):
            return super().embed(texts)[:, :4]

    with pytest.raises(MemoryValueError, match="embedder"):
        EmbeddingCache(Storage(None), Broken(8)).vectors("ada", ["jazz"])


def test_query_vectors_are_remembered_in_memory_not_stored():
    store, emb = Storage(None), FakeEmbedder(8)
    cache = EmbeddingCache(store, emb, query_cache_size=2)
    q = cache.query_vector("where is Maria?")
    assert q.shape == (8,) and np.array_equal(cache.query_vector("where is Maria?"), q)
    assert emb.calls == 1 and stored_rows(store) == []
    cache.query_vector("b")
    cache.query_vector("c")
    cache.query_vector("where is Maria?")
    assert emb.calls == 4  # evicted


# -- NumpyVectorIndex --------------------------------------------------------------------------------


def test_numpy_index_basics():
    index = NumpyVectorIndex()
    assert isinstance(index, VectorIndex) and index.persistent is False
    index.upsert("p", ["a", "b", "c"], np.eye(3, dtype=np.float32))
    assert index.search("p", [0, 1, 0], 2)[0] == ("b", 1.0)
    index.upsert("p", ["a"], [[0, 1, 0]])  # replaces
    assert [key for key, _ in index.search("p", [0, 1, 0], 2)] == ["a", "b"]  # tie: a was inserted first
    index.delete("p", ["a", "zzz"])
    assert index.ids("p") == {"b", "c"} and index.ids("other") == set()
    assert index.search("p", [1, 0, 0], 0) == [] and index.search("nope", [1, 0, 0], 3) == []
    index.drop("p")
    assert index.ids("p") == set()
    index.upsert("q", ["x"], [[1, 0]])
    index.close()
    assert index.search("q", [1, 0], 1) == []


def test_numpy_index_rejects_bad_shapes():
    index = NumpyVectorIndex()
    index.upsert("p", ["a"], [[1, 0, 0]])
    with pytest.raises(MemoryValueError, match="3-dimensional"):
        index.upsert("p", ["b"], [[1, 0]])
    with pytest.raises(MemoryValueError, match="vectors"):
        index.upsert("p", ["b", "c"], [[1, 0, 0]])
    with pytest.raises(MemoryValueError, match="vector"):
        index.search("p", [1, 0], 1)
    with pytest.raises(MemoryTypeError):
        index.upsert("p", "abc", [[1, 0, 0]])


def test_numpy_index_scores_large_partitions_in_slices(monkeypatch):
    import tiers.indexes.vector_partition

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((1000, 8)).astype(np.float32)
    query = rng.standard_normal(8).astype(np.float32)
    index = NumpyVectorIndex()
    index.upsert("p", [f"id{i}" for i in range(1000)], vectors)
    monkeypatch.setattr(tiers.indexes.vector_partition, "_CHUNK_ELEMENTS", 8 * 37)  # 37 rows per slice
    found = index.search("p", query, 1000)
    exact = vectors.astype(np.float64) @ query.astype(np.float64)
    assert [key for key, _ in found[:20]] == [f"id{i}" for i in np.argsort(-exact)[:20]]
    assert np.allclose([score for _, score in found], np.sort(exact)[::-1], atol=1e-5)
    approximate = NumpyVectorIndex(approximate_above=10, depth=300)  # the re-scoring of the scanned rows too
    approximate.upsert("p", [f"id{i}" for i in range(1000)], vectors)
    found = approximate.search("p", query, 20)
    assert len(found) == 20 and all(score == pytest.approx(float(exact[int(key[2:])]), abs=1e-5) for key, score in found)


ops = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.tuples(st.integers(0, 40), st.lists(st.integers(-2, 2), min_size=3,
                                                                                  max_size=3)), max_size=12)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 40), max_size=8)),
), max_size=25)


@settings(max_examples=150, deadline=None)
@given(ops, st.lists(st.integers(-2, 2), min_size=3, max_size=3), st.integers(0, 45))
def test_numpy_index_search_equals_brute_force(operations, query, limit):
    index, model = NumpyVectorIndex(), {}  # dict keeps insertion order; re-assigning keeps the slot
    for n, (op, args) in enumerate(operations):
        if op == "upsert" and args:
            index.upsert("p", [f"id{i}" for i, _ in args], np.array([v for _, v in args], dtype=np.float32),
                         owned=n % 2 == 0)  # handed over or not, the same answers
            for i, v in args:
                model[f"id{i}"] = v
        elif op == "delete":
            index.delete("p", [f"id{i}" for i in args])
            for i in args:
                model.pop(f"id{i}", None)
    order = {key: n for n, key in enumerate(model)}
    expected = sorted(((key, float(np.dot(v, query))) for key, v in model.items()),
                      key=lambda item: (-item[1], order[item[0]]))[:limit]
    assert index.search("p", query, limit) == expected
    assert index.ids("p") == set(model)


# -- PartitionedVectors ---------------------------------------------------------------------------------


class Docs:
    """A loader over a docs table in the store, counting its calls."""

    def __init__(self, store):
        self.store = store
        self.calls = 0
        with store.atomic():
            store.execute("CREATE TABLE IF NOT EXISTS docs (user_id TEXT, id TEXT PRIMARY KEY, text TEXT)")

    def put(self, user_id, item_id, text):  # journalled, as tiers.indexes.documents.DocumentIndex writes do
        with self.store.atomic():
            self.store.execute("INSERT INTO docs VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET user_id = excluded.user_id, text = excluded.text", [user_id, item_id, text])
            IndexJournal(self.store, "facts").put(user_id, [(item_id, text)])

    def delete(self, item_id):
        with self.store.atomic():
            [(user_id,)] = self.store.execute("SELECT user_id FROM docs WHERE id = ?", [item_id]).fetchall()
            self.store.execute("DELETE FROM docs WHERE id = ?", [item_id])
            IndexJournal(self.store, "facts").delete(user_id, [item_id])

    def __call__(self, user_id):
        self.calls += 1
        return [(r["id"], r["text"]) for r in self.store.query("SELECT id, text FROM docs WHERE user_id = ?",
                                                                [user_id])]


class PersistentIndex(NumpyVectorIndex):
    """A numpy index that claims to persist (like chroma), counting writes."""

    persistent = True

    def __init__(self):
        super().__init__()
        self.upserted = []

    def upsert(self, partition, ids, vectors):
        self.upserted.extend(ids)
        super().upsert(partition, ids, vectors)


def make(store, index=None, emb=None, kind="facts"):
    docs = Docs(store)
    cache = EmbeddingCache(store, emb or FakeEmbedder(64))
    return docs, PartitionedVectors(store, docs, cache, index or NumpyVectorIndex(), kind)


def top(dense, user, query, limit=3):
    return [key for key, _ in dense.search(user, dense.cache.query_vector(query), limit)]


def test_partition_is_built_once_from_the_store_on_first_search():
    store = Storage(None)
    docs, dense = make(store)
    docs.put("ada", "f1", "allergic to peanuts")
    docs.put("ada", "f2", "my sister Maria lives in Lisbon")
    assert dense.partition("ada") == "facts/ada"
    assert top(dense, "ada", "peanut allergy", 1) == ["f1"]
    assert top(dense, "ada", "Maria in Lisbon", 1) == ["f2"]
    assert docs.calls == 1
    hits = dense.search("ada", dense.cache.query_vector("peanut allergy"), 5)
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5) and hits[0][1] > hits[1][1]


def test_add_and_remove_keep_a_loaded_partition_in_step():
    store, emb = Storage(None), FakeEmbedder(64)
    docs, dense = make(store, emb=emb)
    dense.add("ada", [("f1", "loves jazz")])  # not loaded yet: embedded into the cache, the partition left
    assert emb.calls == 1 and dense.index.ids("facts/ada") == set()
    docs.put("ada", "f1", "loves jazz")
    dense.ensure("ada")  # built from the store, its vector read from the cache
    assert emb.calls == 1 and len(dense.index.ids("facts/ada")) == 1
    docs.put("ada", "f2", "allergic to peanuts")
    dense.add("ada", [("f2", "allergic to peanuts")])
    assert top(dense, "ada", "peanut", 1) == ["f2"]
    emb.reset()
    dense.add("ada", [("f2", "allergic to peanuts")])  # unchanged: nothing to do
    assert emb.calls == 0
    dense.add("ada", [("f2", "moved to Berlin")])  # changed text replaces the old vector
    assert top(dense, "ada", "Berlin", 1) == ["f2"] and len(dense.index.ids("facts/ada")) == 2
    dense.remove("ada", ["f2", "unknown"])
    assert top(dense, "ada", "Berlin") == ["f1"]


def test_partitions_never_cross_users():
    store = Storage(None)
    docs, dense = make(store)
    docs.put("ada", "a1", "allergic to peanuts")
    docs.put("bob", "b1", "allergic to peanuts")
    docs.put("bob", "b2", "peanut butter")
    assert top(dense, "ada", "peanuts", 10) == ["a1"]
    assert set(top(dense, "bob", "peanuts", 10)) == {"b1", "b2"}
    assert top(dense, "carol", "peanuts", 10) == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["ada", "bob", "cy"]), st.sampled_from(["jazz", "peanut", "Lisbon"])),
                max_size=15), st.sampled_from(["jazz", "peanut", "Lisbon", "x"]))
def test_search_only_returns_the_users_own_ids(items, query):
    store = Storage(None)
    try:
        docs, dense = make(store)
        owner = {}
        for n, (user, text) in enumerate(items):
            docs.put(user, f"d{n}", text)
            owner[f"d{n}"] = user
        for user in ("ada", "bob", "cy"):
            found = top(dense, user, query, 50)
            assert sorted(found) == sorted(k for k, u in owner.items() if u == user)
    finally:
        store.close()  # a PostgreSQL database per example: its connection goes now


def test_commit_by_another_connection_is_replayed_from_the_journal(db_path):
    store, other = Storage(db_path), Storage(db_path)
    docs, dense = make(store)
    docs.put("ada", "f1", "loves jazz")
    assert top(dense, "ada", "jazz") == ["f1"]
    Docs(other).put("ada", "f2", "jazz concert in Lisbon")
    Docs(other).delete("f1")
    assert top(dense, "ada", "jazz") == ["f2"]
    assert docs.calls == 1  # caught up without reloading the user's documents


def test_a_follower_too_far_behind_rechecks_against_the_store(db_path, monkeypatch):
    monkeypatch.setattr(journal, "REPLAY_LIMIT", 1)
    store, other = Storage(db_path), Storage(db_path)
    docs, dense = make(store)
    docs.put("ada", "f1", "loves jazz")
    assert top(dense, "ada", "jazz") == ["f1"]
    Docs(other).put("ada", "f2", "jazz concert in Lisbon")
    Docs(other).put("ada", "f3", "more jazz")
    assert sorted(top(dense, "ada", "jazz")) == ["f1", "f2", "f3"]
    assert docs.calls == 2


def test_persistent_index_is_reused_across_restarts_without_re_embedding(db_path):
    index = PersistentIndex()  # survives "processes"
    store = Storage(db_path)
    docs, dense = make(store, index)
    docs.put("ada", "f1", "loves jazz")
    docs.put("ada", "f2", "allergic to peanuts")
    dense.ensure("ada")
    store.close()
    store, emb = Storage(db_path), FakeEmbedder(64)
    index.upserted.clear()
    _, dense = make(store, index, emb)
    assert top(dense, "ada", "jazz", 1) == ["f1"]
    assert index.upserted == [] and emb.texts == ["jazz"]  # only the query was embedded


def test_persistent_index_drift_is_detected_and_repaired(db_path):
    index = PersistentIndex()
    store = Storage(db_path)
    docs, dense = make(store, index)
    for n, text in enumerate(["loves jazz", "allergic to peanuts", "lives in Lisbon"]):
        docs.put("ada", f"f{n}", text)
    dense.ensure("ada")
    # behind its back: an entry lost, a stray added, and a text changed in the store only
    index.delete("facts/ada", [k for k in index.ids("facts/ada") if k.startswith("f0|")])
    index.upsert("facts/ada", ["ghost|0000"], np.ones((1, 64), dtype=np.float32) / 8)
    docs.put("ada", "f2", "moved to Berlin")
    index.upserted.clear()
    _, fresh = make(store, index)  # a new process
    assert sorted(top(fresh, "ada", "jazz", 10)) == ["f0", "f1", "f2"]
    assert top(fresh, "ada", "Berlin", 1) == ["f2"]
    assert len(index.ids("facts/ada")) == 3 and sorted(k.split("|")[0] for k in index.upserted) == ["f0", "f2"]


def test_writes_to_a_persistent_index_before_any_search_are_kept():
    index = PersistentIndex()
    store = Storage(None)
    docs, dense = make(store, index)
    docs.put("ada", "f1", "loves jazz")
    dense.add("ada", [("f1", "loves jazz")])
    assert {k.split("|")[0] for k in index.ids("facts/ada")} == {"f1"}
    docs.delete("f1")
    dense.invalidate()
    dense.remove("ada", ["f1"])
    assert index.ids("facts/ada") == set()


def test_rebuild_invalidate_and_drop():
    store, emb = Storage(None), FakeEmbedder(64)
    docs, dense = make(store, emb=emb)
    docs.put("ada", "f1", "loves jazz")
    docs.put("bob", "b1", "loves jazz")
    dense.rebuild_all(["ada", "bob"])
    assert emb.calls == 2  # one per user
    dense.rebuild("ada")
    assert emb.calls == 2 and docs.calls == 3  # rebuilt from the store, vectors from the cache
    dense.invalidate("ada")
    assert top(dense, "ada", "jazz") == ["f1"] and docs.calls == 4
    dense.drop("ada")
    assert dense.index.ids("facts/ada") == set()
    assert top(dense, "ada", "jazz") == ["f1"]  # rebuilt on next use


def test_kind_is_validated():
    with pytest.raises(MemoryValueError, match="kind"):
        make(Storage(None), kind="facts/x")


def test_parts_are_embedded_once_each_and_summed():
    from tiers.indexes.neighbors import PART_SEP, split_parts

    store, emb = Storage(None), FakeEmbedder(16)
    cache = EmbeddingCache(store, emb)
    doc = PART_SEP.join(["loved it", "loved it", "did you like Paris"])
    dense = PartitionedVectors(store, lambda user: [("m1", doc)], cache, NumpyVectorIndex(), "messages",
                               parts=split_parts)
    dense.ensure("ada")
    assert cache.embedded == 2  # two distinct parts
    parts = cache.vectors("ada", ["loved it", "did you like Paris"])
    expected = 2 * parts[0] + parts[1]
    expected /= np.linalg.norm(expected)
    [(key, cosine)] = dense.search("ada", expected, 1)
    assert key == "m1" and cosine == pytest.approx(1.0, abs=1e-5)


def test_numpy_similarity_matches_search_scores():
    index = NumpyVectorIndex()
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index.upsert("p", [f"k{i}" for i in range(6)], vectors)
    searched = dict(index.search("p", vectors[0], 6))
    assert index.similarity("p", vectors[0], ["k5", "k2", "missing"]) == pytest.approx(
        {"k5": searched["k5"], "k2": searched["k2"]})
    assert index.similarity("other", vectors[0], ["k1"]) == {}


def test_lexical_hits_beyond_the_nearest_neighbours_get_their_dense_score():
    from tiers.indexes.documents import DocumentIndex

    store, emb = Storage(None), FakeEmbedder(16)
    docs = [(f"d{i}", f"filler words number {i}") for i in range(40)] + [("target", "zebra stripes")]
    index = DocumentIndex(store, lambda user: docs, kind="facts")
    cache = EmbeddingCache(store, emb)
    index.attach_dense(PartitionedVectors(store, index.loader, cache, NumpyVectorIndex(), "facts"))
    store.execute("CREATE TABLE notes (id TEXT, user_id TEXT)")
    store.execute("CREATE UNIQUE INDEX notes_id ON notes(id)")
    store.executemany("INSERT INTO notes VALUES (?, 'ada')", [[key] for key, _ in docs])
    found = index.search("ada", "zebra", 1, table="notes", columns="id", filter_sql="user_id = ?",
                         filter_params=["ada"], vector=cache.query_vector("filler words number 3"), mode="hybrid")
    target = next(c for c in found if c.id == "target")
    assert target.lexical is not None and target.dense is not None
    assert target.dense == pytest.approx(float(cache.query_vector("filler words number 3") @ cache.vectors(
        "ada", ["zebra stripes"])[0]), abs=1e-5)
