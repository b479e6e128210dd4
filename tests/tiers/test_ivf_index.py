import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiers.ivf_index
from scoring.clustering import Quantizer, nearest_centroid, spherical_kmeans
from tiers.ivf_index import IvfPartition, from_bfloat16, to_bfloat16
from tiers.vectors import NumpyVectorIndex
from unified_memory.config import MemoryConfig, VectorConfig
from unified_memory.errors import ConfigError, MemoryTypeError, MemoryValueError


def clustered(n, dim=32, centres=40, noise=0.08, seed=0):
    rng = np.random.default_rng(seed)
    middle = rng.standard_normal((centres, dim)).astype(np.float32)
    middle /= np.linalg.norm(middle, axis=1, keepdims=True)
    data = middle[rng.integers(0, centres, n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


def exact_bf16(n, dim=16, seed=0):
    """Vectors of eighths in [-1, 1]: exact in bfloat16, so approximate storage scores them exactly."""
    return (np.random.default_rng(seed).integers(-8, 9, (n, dim)) / 8).astype(np.float32)


@pytest.fixture
def small_thresholds(monkeypatch):
    monkeypatch.setattr(tiers.ivf_index, "_TAIL_MIN", 3)
    monkeypatch.setattr(tiers.ivf_index, "_DEAD_MIN", 2)


ops = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.tuples(st.integers(0, 60), st.lists(st.integers(-2, 2), min_size=3,
                                                                                  max_size=3)), max_size=15)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 60), max_size=10)),
), max_size=25)


@settings(max_examples=120, deadline=None)
@given(ops, st.lists(st.integers(-2, 2), min_size=3, max_size=3), st.integers(0, 65), st.booleans())
def test_probing_every_list_equals_the_exact_index(operations, query, limit, small_repacks):
    approx = NumpyVectorIndex(approximate_above=6, nprobe=10_000)
    exact = NumpyVectorIndex(approximate_above=None)
    with pytest.MonkeyPatch.context() as patch:
        if small_repacks:
            patch.setattr(tiers.ivf_index, "_TAIL_MIN", 2)
            patch.setattr(tiers.ivf_index, "_DEAD_MIN", 1)
        for op, args in operations:
            for index in (approx, exact):
                if op == "upsert" and args:
                    index.upsert("p", [f"id{i}" for i, _ in args], np.array([v for _, v in args], dtype=np.float32))
                elif op == "delete":
                    index.delete("p", [f"id{i}" for i in args])
    assert approx.search("p", query, limit) == exact.search("p", query, limit)
    assert approx.ids("p") == exact.ids("p")
    wanted = [f"id{i}" for i in range(0, 70, 3)]
    assert approx.similarity("p", query, wanted) == exact.similarity("p", query, wanted)


def test_large_partition_switches_to_ivf_and_back():
    index = NumpyVectorIndex(approximate_above=100, nprobe=4)
    vectors = exact_bf16(150)
    index.upsert("p", [f"v{i}" for i in range(99)], vectors[:99])
    assert not isinstance(index._parts["p"], IvfPartition)
    index.upsert("p", [f"v{i}" for i in range(99, 150)], vectors[99:])
    assert isinstance(index._parts["p"], IvfPartition) and len(index.ids("p")) == 150
    index.upsert("big", [f"b{i}" for i in range(120)], exact_bf16(120, seed=1))  # straight to IVF
    assert isinstance(index._parts["big"], IvfPartition)
    index.delete("p", [f"v{i}" for i in range(101)])  # 49 left: below half of 100, exact again
    part = index._parts["p"]
    assert not isinstance(part, IvfPartition) and part.ids == [f"v{i}" for i in range(101, 150)]
    full = NumpyVectorIndex(approximate_above=None)
    full.upsert("p", [f"v{i}" for i in range(101, 150)], vectors[101:])
    assert index.search("p", vectors[120], 60) == full.search("p", vectors[120], 60)


def test_all_lists_after_upserts_and_deletes_equal_exact(small_thresholds):
    vectors = exact_bf16(3000, seed=2)
    approx = NumpyVectorIndex(approximate_above=500, nprobe=100_000)
    exact = NumpyVectorIndex(approximate_above=None)
    rng = np.random.default_rng(3)
    for index in (approx, exact):
        index.upsert("p", [f"v{i}" for i in range(1000)], vectors[:1000])
    for step in range(20):  # appends, replacements of live ids, deletes, retrains
        new = rng.integers(0, 3000, 60)
        gone = rng.integers(0, 3000, 30)
        batch = vectors[rng.permutation(new)] if step % 2 else vectors[new]  # odd steps: new vectors for old ids
        for index in (approx, exact):
            index.upsert("p", [f"v{i}" for i in new], batch)
            index.delete("p", [f"v{i}" for i in gone])
    for query in vectors[:30]:
        assert approx.search("p", query, 40) == exact.search("p", query, 40)
    assert approx.ids("p") == exact.ids("p")


def test_recall_at_10_on_clustered_data():
    data = clustered(6000)
    queries = clustered(50, seed=9)
    index = NumpyVectorIndex(approximate_above=1000)
    index.upsert("p", [str(i) for i in range(len(data))], data)
    part = index._parts["p"]
    assert isinstance(part, IvfPartition) and part.quantizer.lists > index.nprobe
    hits = 0
    for query in queries:
        truth = set(np.argsort(-(data @ query))[:10].tolist())
        hits += len(truth & {int(key) for key, _ in index.search("p", query, 10)})
    assert hits / (10 * len(queries)) >= 0.9


def test_deleted_ids_never_come_back(small_thresholds):
    data = clustered(800, seed=4)
    index = NumpyVectorIndex(approximate_above=200, nprobe=3)
    index.upsert("p", [str(i) for i in range(800)], data)
    gone = {str(i) for i in range(0, 800, 3)}
    index.delete("p", sorted(gone))
    index.upsert("p", [str(i) for i in range(800, 900)], clustered(100, seed=5))  # repacks the tail
    for query in data[:40]:
        found = {key for key, _ in index.search("p", query, 200)}
        assert len(found) == 200 and not found & gone
    assert not index.ids("p") & gone and not index.similarity("p", data[0], sorted(gone))


def test_upsert_of_an_existing_id_replaces_its_vector_and_keeps_its_rank():
    data = exact_bf16(300, seed=6)
    index = NumpyVectorIndex(approximate_above=100, nprobe=100_000)
    index.upsert("p", [f"v{i}" for i in range(300)], data)
    index.upsert("p", ["v5", "v250"], [data[7], data[7]])  # v5, v7, v250 now tie: ranks 5 < 7 < 250
    top = index.search("p", data[7], 3)
    assert [key for key, _ in top] == ["v5", "v7", "v250"]
    assert index.similarity("p", data[7], ["v5"]) == {"v5": pytest.approx(float(data[7] @ data[7]))}
    assert len(index.ids("p")) == 300


def test_ids_drop_similarity_and_errors_in_approximate_mode():
    data = clustered(400, seed=7)
    index = NumpyVectorIndex(approximate_above=100)
    index.upsert("p", [str(i) for i in range(400)], data)
    assert index.ids("p") == {str(i) for i in range(400)}
    similarity = index.similarity("p", data[3], ["3", "9", "nope"])
    assert set(similarity) == {"3", "9"}
    assert similarity["9"] == pytest.approx(float(data[3] @ data[9]), abs=1e-2)
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
    index = NumpyVectorIndex(approximate_above=500, nprobe=8)
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
    assert not errors
    assert index.ids("p") == {str(i) for i in range(3000) if i % 10}


@pytest.mark.parametrize(("kwargs", "field", "error"), [
    ({"approximate_above": 1}, "approximate_above", MemoryValueError),
    ({"approximate_above": 2.5}, "approximate_above", MemoryTypeError),
    ({"nprobe": 0}, "nprobe", MemoryValueError),
    ({"lists_per_sqrt": 0}, "lists_per_sqrt", MemoryValueError),
])
def test_bad_parameters_name_the_field(kwargs, field, error):
    with pytest.raises(error) as caught:
        NumpyVectorIndex(**kwargs)
    assert caught.value.field == field


def test_vector_config_fields_reach_the_index():
    from unified_memory.retrieval.method import _vector_index

    config = MemoryConfig(vectors=VectorConfig(approximate_above=1234, nprobe=7))
    index = _vector_index(config, None)
    assert (index.approximate_above, index.nprobe) == (1234, 7)
    assert _vector_index(MemoryConfig(vectors=VectorConfig(approximate_above=None)), None).approximate_above is None
    with pytest.raises(ConfigError) as caught:
        MemoryConfig.build(None, {"vectors": {"nprobe": 0}})
    assert "nprobe" in str(caught.value)


def test_bfloat16_round_trip_and_quantizer_basics():
    values = np.array([[1.0, -2.5, 0.1, 3e-8]], dtype=np.float32)
    back = from_bfloat16(to_bfloat16(values))
    assert np.allclose(back, values, rtol=2 ** -8) and back[0, 0] == 1.0
    data = clustered(500, dim=8, centres=5, noise=0.02, seed=1)
    quantizer = Quantizer.train(data, lists=5, seed=2)
    assert np.array_equal(quantizer.assign(data, routes=5), nearest_centroid(data, quantizer.centroids))
    again = Quantizer.train(data, lists=5, seed=2)
    assert np.array_equal(quantizer.centroids, again.centroids)  # seeded: deterministic
    assert spherical_kmeans(data, 3).shape == (3, 8)
    with pytest.raises(MemoryValueError):
        spherical_kmeans(np.empty((0, 4)), 2)
