import logging
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiers.hnsw_build
import tiers.hnsw_index
import tiers.numpy_index
from tiers.hnsw_index import HnswPartition
from tiers.vectors import NumpyVectorIndex
from unified_memory.config import MemoryConfig, VectorConfig
from unified_memory.errors import ConfigError, DependencyError, MemoryTypeError, MemoryValueError


def clustered(n, dim=32, centres=40, noise=0.08, seed=0):
    rng = np.random.default_rng(seed)
    middle = rng.standard_normal((centres, dim)).astype(np.float32)
    middle /= np.linalg.norm(middle, axis=1, keepdims=True)
    data = middle[rng.integers(0, centres, n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


def unit(n, dim=16, seed=0):
    data = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


@pytest.fixture
def small_rebuilds(monkeypatch):
    monkeypatch.setattr(tiers.hnsw_index, "REBUILD_MIN", 4)


ops = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.tuples(st.integers(0, 60), st.integers(0, 500)), max_size=15)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 60), max_size=10)),
    st.tuples(st.just("wait"), st.just([])),
), max_size=25)


@settings(max_examples=100, deadline=None)
@given(ops, st.integers(0, 500), st.integers(1, 70), st.booleans())
def test_ids_round_trip_deletes_never_return_and_adds_are_found(operations, query, limit, small_rebuild):
    """Writes race the background builds (swaps, rebuilds); once they are done the graph holds
    exactly the live ids, finds each stored vector first and scores as the exact index."""
    vectors = unit(501, dim=8, seed=3)
    approx = NumpyVectorIndex(approximate_above=6, ef_search=256)
    exact = NumpyVectorIndex(approximate_above=None)
    live: dict[str, int] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tiers.hnsw_build, "CHUNK", 4)
        patch.setattr(tiers.hnsw_build, "FINISH_UNDER_LOCK", 2)
        if small_rebuild:
            patch.setattr(tiers.hnsw_index, "REBUILD_MIN", 1)
        for op, args in operations:
            if op == "wait":
                assert approx.wait_builds(60)
            for index in (approx, exact):
                if op == "upsert" and args:
                    index.upsert("p", [f"id{i}" for i, _ in args], vectors[[v for _, v in args]])
                elif op == "delete":
                    index.delete("p", [f"id{i}" for i in args])
            if op == "upsert":
                live.update((f"id{i}", v) for i, v in args)
            elif op == "delete":
                for i in args:
                    live.pop(f"id{i}", None)
        assert approx.wait_builds(60)
    assert approx.ids("p") == exact.ids("p") == set(live)
    part = approx._parts.get("p")
    if len(live) >= 6 and not small_rebuild:
        assert isinstance(part, HnswPartition)
    if isinstance(part, HnswPartition):  # tombstones hold zeros, never a removed vector
        dead = ~part.alive[:len(part.names)]
        assert not part.matrix()[dead].any()
    found = approx.search("p", vectors[query], limit)
    assert {key for key, _ in found} <= set(live)  # deleted ids never come back
    assert len(found) == min(limit, len(live))
    assert [score for _, score in found] == pytest.approx([score for _, score in exact.search("p", vectors[query],
                                                                                              limit)], abs=1e-5)
    for key, vector in live.items():  # every stored vector finds itself (or an equal vector) first
        top = approx.search("p", vectors[vector], 1)
        assert top and (top[0][0] == key or top[0][1] >= 1 - 1e-5)
    wanted = [f"id{i}" for i in range(0, 70, 3)]
    assert approx.similarity("p", vectors[query], wanted) == pytest.approx(
        exact.similarity("p", vectors[query], wanted), abs=1e-6)


def test_large_partition_switches_to_hnsw_in_the_background_and_back():
    index = NumpyVectorIndex(approximate_above=100)
    vectors = unit(150)
    index.upsert("p", [f"v{i}" for i in range(99)], vectors[:99])
    assert not isinstance(index._parts["p"], HnswPartition) and not index._builds
    index.upsert("p", [f"v{i}" for i in range(99, 150)], vectors[99:])
    assert index.wait_builds(60)
    assert isinstance(index._parts["p"], HnswPartition) and len(index.ids("p")) == 150
    index.upsert("big", [f"b{i}" for i in range(120)], unit(120, seed=1))  # exact first, then a graph
    assert index.wait_builds(60) and isinstance(index._parts["big"], HnswPartition)
    index.delete("p", [f"v{i}" for i in range(101)])  # 49 left: below half of 100, exact again
    part = index._parts["p"]
    assert not isinstance(part, HnswPartition) and sorted(part.ids) == sorted(f"v{i}" for i in range(101, 150))
    full = NumpyVectorIndex(approximate_above=None)
    full.upsert("p", [f"v{i}" for i in range(101, 150)], vectors[101:])
    assert index.search("p", vectors[120], 60) == full.search("p", vectors[120], 60)


def test_writes_during_the_build_reach_the_graph_and_searches_stay_exact(monkeypatch):
    """The build copies chunks outside the lock; adds, replacements and removals made meanwhile
    (before it started, between its chunks, after its last) are all in the graph it swaps in."""
    monkeypatch.setattr(tiers.hnsw_build, "CHUNK", 50)
    monkeypatch.setattr(tiers.hnsw_build, "FINISH_UNDER_LOCK", 10)
    data = unit(600, seed=11)
    index = NumpyVectorIndex(approximate_above=300, ef_search=400)
    exact = NumpyVectorIndex(approximate_above=None)
    started, go, calls = threading.Event(), threading.Event(), []
    real_put = HnswPartition.put

    def put(self, ids, vectors, orders):
        calls.append(len(ids))
        if len(calls) == 2:  # between two chunks: let the test write, then go on
            started.set()
            assert go.wait(30)
        real_put(self, ids, vectors, orders)

    monkeypatch.setattr(HnswPartition, "put", put)
    for target in (index, exact):
        target.upsert("p", [f"v{i}" for i in range(300)], data[:300])
    assert started.wait(30)
    assert not isinstance(index._parts["p"], HnswPartition)  # searched exactly meanwhile
    writes = [("upsert", [f"v{i}" for i in range(300, 450)], data[300:450]),  # new
              ("upsert", ["v0", "v120", "v299"], data[[500, 501, 502]]),  # replaced: copied, not copied yet
              ("delete", ["v1", "v200", "v310", "nope"], None)]
    for op, ids, vectors in writes:
        for target in (index, exact):
            target.upsert("p", ids, vectors) if op == "upsert" else target.delete("p", ids)
    assert index.search("p", data[500], 3) == exact.search("p", data[500], 3)
    go.set()
    assert index.wait_builds(60)
    part = index._parts["p"]
    assert isinstance(part, HnswPartition) and sum(calls) >= 440  # some copied twice
    assert index.ids("p") == exact.ids("p")
    for query in data[::7]:  # the same ids in the same order; scores equal but for float rounding
        found, truth = index.search("p", query, 10), exact.search("p", query, 10)
        assert [key for key, _ in found] == [key for key, _ in truth]
        assert [score for _, score in found] == pytest.approx([score for _, score in truth], abs=1e-6)
    assert index.similarity("p", data[500], ["v0", "v1"]) == pytest.approx(
        exact.similarity("p", data[500], ["v0", "v1"]), abs=1e-6)


def test_close_during_a_build_abandons_it_promptly(monkeypatch):
    monkeypatch.setattr(tiers.hnsw_build, "CHUNK", 20)
    index = NumpyVectorIndex(approximate_above=300)
    gate = threading.Event()
    real_put = HnswPartition.put

    def put(self, ids, vectors, orders):
        gate.wait(5)
        real_put(self, ids, vectors, orders)

    monkeypatch.setattr(HnswPartition, "put", put)
    index.upsert("p", [str(i) for i in range(400)], unit(400))
    build = index._builds["p"]
    threading.Timer(0.2, gate.set).start()  # the build is inside its first chunk when close cancels it
    index.close()  # waits for that chunk, then the graph is discarded
    assert not build.thread.is_alive() and not build.swapped and index.ids("p") == set()


def test_tombstones_are_zeroed_and_many_rebuild_in_the_background(small_rebuilds):
    data = clustered(800, seed=4)
    index = NumpyVectorIndex(approximate_above=200)
    index.upsert("p", [str(i) for i in range(800)], data)
    assert index.wait_builds(60)
    graph = index._parts["p"].graph
    gone = {str(i) for i in range(0, 800, 3)}
    index.delete("p", sorted(gone)[:100])  # 100 <= a quarter of 700 live: tombstones
    part = index._parts["p"]
    assert part.graph is graph and part.removed == 100 and not index._builds.get("p")
    labels = [label for label, name in enumerate(part.names) if name is None]
    assert len(labels) == 100 and not part.matrix()[labels].any()
    index.delete("p", sorted(gone)[100:])  # 267 > a quarter of 533 live: rebuilt from the live ones
    assert index.wait_builds(60)
    part = index._parts["p"]
    assert part.graph is not graph and part.removed == 0 and part.graph.ntotal == len(part) == 533
    index.delete("p", [str(i) for i in range(1, 400, 3)])
    gone |= {str(i) for i in range(1, 400, 3)}
    index.upsert("p", [str(i) for i in range(800, 900)], clustered(100, seed=5))
    assert index.wait_builds(60)
    for query in data[:40]:
        found = {key for key, _ in index.search("p", query, 200)}
        assert len(found) == 200 and not found & gone
    assert not index.ids("p") & gone and not index.similarity("p", data[0], sorted(gone))


def test_recall_at_10_on_clustered_data():
    data = clustered(6000)
    queries = clustered(50, seed=9)
    index = NumpyVectorIndex(approximate_above=1000)
    index.upsert("p", [str(i) for i in range(len(data))], data)
    assert index.wait_builds(60)
    assert isinstance(index._parts["p"], HnswPartition)
    hits = 0
    for query in queries:
        truth = set(np.argsort(-(data @ query))[:10].tolist())
        hits += len(truth & {int(key) for key, _ in index.search("p", query, 10)})
    assert hits / (10 * len(queries)) >= 0.95


def test_upsert_of_an_existing_id_replaces_its_vector_and_keeps_its_rank():
    data = unit(300, seed=6)
    index = NumpyVectorIndex(approximate_above=100)
    index.upsert("p", [f"v{i}" for i in range(300)], data)
    assert index.wait_builds(60) and isinstance(index._parts["p"], HnswPartition)
    index.upsert("p", ["v5", "v250"], [data[7], data[7]])  # v5, v7, v250 now tie: ranks 5 < 7 < 250
    assert [key for key, _ in index.search("p", data[7], 3)] == ["v5", "v7", "v250"]
    assert index.similarity("p", data[7], ["v5"]) == {"v5": pytest.approx(1.0)}
    assert "v5" not in {key for key, _ in index.search("p", data[5], 3)}  # its old vector is gone
    assert len(index.ids("p")) == 300


def test_ids_drop_similarity_and_errors_in_approximate_mode():
    data = clustered(400, seed=7)
    index = NumpyVectorIndex(approximate_above=100)
    index.upsert("p", [str(i) for i in range(400)], data)
    assert index.wait_builds(60)
    assert index.ids("p") == {str(i) for i in range(400)}
    similarity = index.similarity("p", data[3], ["3", "9", "nope"])
    assert set(similarity) == {"3", "9"}
    assert similarity["9"] == pytest.approx(float(data[3] @ data[9]), abs=1e-6)
    with pytest.raises(MemoryValueError, match="32-dimensional"):
        index.upsert("p", ["x"], [[1.0, 0.0]])
    with pytest.raises(MemoryValueError, match="vector"):
        index.search("p", [1.0, 0.0], 3)
    assert index.search("p", data[0], 0) == []
    index.drop("p")
    assert index.ids("p") == set() and index.search("p", data[0], 5) == []
    index.upsert("q", [str(i) for i in range(400)], data)
    index.close()
    assert index.ids("q") == set()


def test_concurrent_writes_and_searches():
    data = clustered(3000, seed=8)
    index = NumpyVectorIndex(approximate_above=500)
    errors = []

    def writer(offset):
        try:
            for start in range(offset, 3000, 400):
                index.upsert("p", [str(i) for i in range(start, start + 200)], data[start:start + 200])
                index.delete("p", [str(i) for i in range(start, start + 200, 10)])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def reader():
        try:
            for query in data[:200]:
                index.search("p", query, 10)
        except Exception as exc:  # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(0,)), threading.Thread(target=writer, args=(200,)),
               threading.Thread(target=reader)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and index.wait_builds(60) and isinstance(index._parts["p"], HnswPartition)
    assert index.ids("p") == {str(i) for i in range(3000) if i % 10}


def test_without_faiss_large_partitions_stay_exact_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(tiers.numpy_index, "hnsw_available", lambda: False)
    index = NumpyVectorIndex(approximate_above=50)
    data = unit(120, seed=2)
    with caplog.at_level(logging.WARNING, logger="tiers.numpy_index"):
        index.upsert("p", [str(i) for i in range(60)], data[:60])
        index.upsert("p", [str(i) for i in range(60, 120)], data[60:])
    assert not isinstance(index._parts["p"], HnswPartition)
    assert sum("faiss" in record.getMessage() for record in caplog.records) == 1  # logged once
    exact = NumpyVectorIndex(approximate_above=None)
    exact.upsert("p", [str(i) for i in range(120)], data)
    assert index.search("p", data[4], 20) == exact.search("p", data[4], 20)


def test_missing_faiss_is_a_dependency_error_with_the_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(DependencyError, match=r"unified-memory\[embeddings\]"):
        HnswPartition(8)


@pytest.mark.parametrize(("kwargs", "field", "error"), [
    ({"approximate_above": 1}, "approximate_above", MemoryValueError),
    ({"approximate_above": 2.5}, "approximate_above", MemoryTypeError),
    ({"ef_search": 0}, "ef_search", MemoryValueError),
    ({"connectivity": 1}, "connectivity", MemoryValueError),
])
def test_bad_parameters_name_the_field(kwargs, field, error):
    with pytest.raises(error) as caught:
        NumpyVectorIndex(**kwargs)
    assert caught.value.field == field


def test_vector_config_fields_reach_the_index():
    from unified_memory.retrieval.method import _vector_index

    config = MemoryConfig(vectors=VectorConfig(approximate_above=1234, ef_search=77, hnsw_m=8, ef_construction=40,
                                               nprobe=7))  # nprobe: still loads
    index = _vector_index(config, None)
    assert (index.approximate_above, index.ef_search, index.connectivity, index.ef_construction) == (1234, 77, 8, 40)
    assert index.directory is None  # in memory: nothing saved
    assert _vector_index(config, "/tmp/x/mem.db").directory == "/tmp/x/mem.db.vectors"
    assert _vector_index(config, "postgresql://u@h/db").directory is None  # PostgreSQL: in memory only
    assert _vector_index(MemoryConfig(vectors=VectorConfig(approximate_above=None)), None).approximate_above is None
    with pytest.raises(ConfigError) as caught:
        MemoryConfig.build(None, {"vectors": {"ef_search": 0}})
    assert "ef_search" in str(caught.value)


def test_a_failed_build_leaves_the_partition_exact_and_is_not_retried(monkeypatch, caplog):
    def fail(self, ids, vectors, orders):
        raise MemoryError("no room for the graph")

    monkeypatch.setattr(HnswPartition, "put", fail)
    index = NumpyVectorIndex(approximate_above=100)
    data = unit(150, seed=3)
    with caplog.at_level(logging.ERROR, logger="tiers.hnsw_build"):
        index.upsert("p", [str(i) for i in range(150)], data)
        assert index.wait_builds(30)
    assert not isinstance(index._parts["p"], HnswPartition) and not index._builds
    assert index.search("p", data[7], 1)[0][0] == "7"  # still answered, exactly
    assert sum("failed" in record.getMessage() for record in caplog.records) == 1


def test_reserve_allocates_the_graphs_vector_storage_once():
    """A build reserves faiss's storage for the partition it copies: growing it by doubling held
    the old and the new buffer together (400 MB more at 300,000 x 384); answers are the same."""
    faiss = tiers.hnsw_index.faiss_module()
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((600, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    reserved, plain = HnswPartition(8), HnswPartition(8)
    reserved.reserve(600)
    codes = faiss.downcast_index(reserved.graph.storage).codes
    start, held = codes.data(), codes.size()
    for first in range(0, 600, 100):
        for part in (reserved, plain):
            part.put([f"v{i}" for i in range(first, first + 100)], vectors[first:first + 100],
                     np.arange(first, first + 100))
    assert held == 0 and codes.data() == start and codes.size() == 600 * 8 * 4  # never moved
    assert all(reserved.search(vectors[i], 5) == plain.search(vectors[i], 5) for i in range(0, 600, 7))
    reserved.reserve(10)  # less than held: nothing changes
    assert len(reserved) == 600 and codes.data() == start


def test_a_build_reserves_the_storage_for_what_it_copies(monkeypatch):
    reserved = []
    original = HnswPartition.reserve
    monkeypatch.setattr(HnswPartition, "reserve", lambda self, count: (reserved.append(count), original(self, count)))
    index = NumpyVectorIndex(approximate_above=300)
    index.upsert("p", [f"v{i}" for i in range(320)], np.random.default_rng(0).standard_normal((320, 8)))
    assert index.wait_builds(60) and isinstance(index._parts["p"], HnswPartition) and reserved == [320]
