"""The numpy vector index's approximate mode: binary codes scanned, then exact re-scoring
(tiers.indexes.binary_codes, tiers.indexes.vector_partition, tiers.indexes.numpy_index)."""

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiers.indexes import binary_codes
from tiers.indexes.vectors import NumpyVectorIndex
from unified_memory.config import MemoryConfig, VectorConfig
from unified_memory.errors import ConfigError, MemoryTypeError, MemoryValueError


def clustered(n, dim=32, centres=40, noise=0.08, seed=0):
    rng = np.random.default_rng(seed)
    middle = rng.standard_normal((centres, dim)).astype(np.float32)
    middle /= np.linalg.norm(middle, axis=1, keepdims=True)
    data = middle[rng.integers(0, centres, n)] + noise * rng.standard_normal((n, dim)).astype(np.float32)
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


def unit(n, dim=16, seed=0):
    data = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


ops = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.tuples(st.integers(0, 60), st.integers(0, 500)), max_size=15)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 60), max_size=10)),
), max_size=25)


@settings(max_examples=150, deadline=None)
@given(ops, st.integers(0, 500), st.integers(1, 70), st.integers(1, 80))
def test_after_any_writes_codes_match_their_rows_and_the_scan_rescores_exactly(operations, query, limit, depth):
    """Upserts (repeated ids, replacements), deletes and the switches both ways keep every code
    equal to its row's; a scan at least as deep as the partition gives the exact search's answer,
    a shallower one a subset of the live ids scored exactly, in score-then-rank order."""
    vectors = unit(501, dim=8, seed=3)
    approx = NumpyVectorIndex(approximate_above=6, depth=depth)
    exact = NumpyVectorIndex(approximate_above=None)
    live: dict[str, int] = {}
    for op, args in operations:
        for index in (approx, exact):
            if op == "upsert" and args:
                index.upsert("p", [f"id{i}" for i, _ in args], vectors[[v for _, v in args]])
            elif op == "delete":
                index.delete("p", [f"id{i}" for i in args])
        if op == "upsert":
            live.update((f"id{i}", v) for i, v in args)
        else:
            for i in args:
                live.pop(f"id{i}", None)
    assert approx.ids("p") == exact.ids("p") == set(live)
    part = approx._parts.get("p")
    if part is None:
        return
    size = len(part)
    if size >= 6:
        assert approx.approximate("p")
    elif size < 3:
        assert not approx.approximate("p")
    if part.codes is not None:
        assert np.array_equal(part.codes[:size], binary_codes.encode(part.matrix[:size]))
        held = {key: part.matrix[row] for key, row in part.rows.items()}
        assert all(np.array_equal(held[key], vectors[v]) for key, v in live.items())
    found = approx.search("p", vectors[query], limit)
    truth = exact.search("p", vectors[query], limit)
    if part.codes is None or max(depth, limit) >= size:
        assert found == truth
    else:
        assert {key for key, _ in found} <= set(live) and len(found) == min(limit, size)
        assert all(score == pytest.approx(float(vectors[live[key]] @ vectors[query]), abs=1e-6) for key, score in found)
        ranks = {key: part.order[part.rows[key]] for key in live}
        assert found == sorted(found, key=lambda hit: (-hit[1], ranks[hit[0]]))
    for key, vector in live.items():  # every stored vector finds itself (or an equal vector) first
        top = approx.search("p", vectors[vector], 1)
        assert top and (top[0][0] == key or top[0][1] >= 1 - 1e-5)


def test_a_partition_turns_approximate_at_the_threshold_and_exact_below_half():
    index = NumpyVectorIndex(approximate_above=100)
    vectors = unit(150)
    index.upsert("p", [f"v{i}" for i in range(99)], vectors[:99])
    assert not index.approximate("p")
    index.upsert("p", [f"v{i}" for i in range(99, 150)], vectors[99:])
    assert index.approximate("p") and len(index.ids("p")) == 150
    index.upsert("big", [f"b{i}" for i in range(120)], unit(120, seed=1), owned=True)  # adopted, then encoded
    assert index.approximate("big")
    index.delete("p", [f"v{i}" for i in range(60)])  # 90 left: above half, still approximate
    assert index.approximate("p")
    index.delete("p", [f"v{i}" for i in range(60, 101)])  # 49 left: below half of 100, exact again
    part = index._parts["p"]
    assert part.codes is None and sorted(part.ids) == sorted(f"v{i}" for i in range(101, 150))
    full = NumpyVectorIndex(approximate_above=None)
    full.upsert("p", [f"v{i}" for i in range(101, 150)], vectors[101:])
    assert index.search("p", vectors[120], 60) == full.search("p", vectors[120], 60)


def test_recall_at_10_on_clustered_data():
    data = clustered(6000)
    queries = clustered(50, seed=9)
    index = NumpyVectorIndex(approximate_above=1000, depth=300)
    index.upsert("p", [str(i) for i in range(len(data))], data)
    assert index.approximate("p")
    hits = 0
    for query in queries:
        truth = set(np.argsort(-(data @ query))[:10].tolist())
        hits += len(truth & {int(key) for key, _ in index.search("p", query, 10)})
    assert hits / (10 * len(queries)) >= 0.95


def test_a_rare_fact_in_a_crowd_of_near_matches_is_found():
    """The failure that retired the HNSW graph: thousands of stored vectors nearly as close to the
    question as the one fact that answers it (cosine ~0.55 against 0.6). The scan of every code
    keeps the answer among the candidates the exact scores then rank first."""
    rng = np.random.default_rng(4)
    dim, crowd = 64, 20_000
    query = unit(1, dim, seed=5)[0]
    noise = unit(crowd, dim, seed=6)
    noise -= np.outer(noise @ query, query)
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    cosines = rng.uniform(0.50, 0.57, crowd).astype(np.float32)[:, None]
    data = (cosines * query + np.sqrt(1 - cosines ** 2) * noise).astype(np.float32)
    index = NumpyVectorIndex(approximate_above=1000, depth=2000)
    index.upsert("p", [f"c{i}" for i in range(crowd)], data)
    needle = 0.60 * query + 0.80 * unit(1, dim, seed=7)[0] * 1.0
    needle -= (needle @ query - 0.60) * query
    needle /= np.linalg.norm(needle)
    index.upsert("p", ["needle"], needle[None, :])
    assert index.approximate("p")
    exact = NumpyVectorIndex(approximate_above=None)
    exact.upsert("p", [f"c{i}" for i in range(crowd)] + ["needle"], np.vstack([data, needle[None, :]]))
    assert exact.search("p", query, 1)[0][0] == "needle"
    assert index.search("p", query, 1)[0][0] == "needle"


def test_faiss_and_numpy_scans_agree_on_the_distances_they_keep():
    codes = binary_codes.encode(clustered(3000, dim=48, seed=2))
    code = binary_codes.encode(clustered(1, dim=48, seed=3))[0]
    distance = binary_codes.distances(codes, code)
    assert np.array_equal(distance, [sum(bin(int(x)).count("1") for x in row ^ code) for row in codes[:50]] + list(
        distance[50:]))
    by_numpy = binary_codes.nearest(codes, code, 200, use_faiss=False)
    by_faiss = binary_codes.nearest(codes, code, 200)
    assert len(by_numpy) == len(by_faiss) == 200 and len(set(by_faiss.tolist())) == 200
    assert sorted(distance[by_numpy]) == sorted(distance[by_faiss])  # same distances (ties may differ)
    assert distance[by_faiss].max() <= np.sort(distance)[199]
    odd = codes[:, :13]  # not whole 64-bit words: the table path
    assert np.array_equal(binary_codes.distances(odd, code[:13]),
                          [sum(bin(int(x)).count("1") for x in row ^ code[:13]) for row in odd])


def test_upsert_of_an_existing_id_replaces_its_vector_and_code_and_keeps_its_rank():
    data = unit(300, seed=6)
    index = NumpyVectorIndex(approximate_above=100, depth=20)
    index.upsert("p", [f"v{i}" for i in range(300)], data)
    index.upsert("p", ["v5", "v250"], [data[7], data[7]])  # v5, v7, v250 now tie: ranks 5 < 7 < 250
    assert [key for key, _ in index.search("p", data[7], 3)] == ["v5", "v7", "v250"]
    assert index.similarity("p", data[7], ["v5"]) == {"v5": pytest.approx(1.0)}
    assert "v5" not in {key for key, _ in index.search("p", data[5], 3)}  # its old vector is gone
    assert len(index.ids("p")) == 300


def test_ids_drop_similarity_and_errors_in_approximate_mode():
    data = clustered(400, seed=7)
    index = NumpyVectorIndex(approximate_above=100)
    index.upsert("p", [str(i) for i in range(400)], data)
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
    index = NumpyVectorIndex(approximate_above=500, depth=100)
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
    assert not errors and index.approximate("p")
    assert index.ids("p") == {str(i) for i in range(3000) if i % 10}
    part = index._parts["p"]
    assert np.array_equal(part.codes[:len(part)], binary_codes.encode(part.matrix[:len(part)]))


def test_without_faiss_the_scan_runs_in_numpy(monkeypatch):
    monkeypatch.setattr(binary_codes, "faiss_or_none", lambda: None)
    data = clustered(2000, seed=12)
    index = NumpyVectorIndex(approximate_above=500, depth=2000)
    exact = NumpyVectorIndex(approximate_above=None)
    for each in (index, exact):
        each.upsert("p", [str(i) for i in range(2000)], data)
    assert index.approximate("p")
    assert index.search("p", data[4], 20) == exact.search("p", data[4], 20)  # depth >= size: exact


@pytest.mark.parametrize(("kwargs", "field", "error"), [
    ({"approximate_above": 1}, "approximate_above", MemoryValueError),
    ({"approximate_above": 2.5}, "approximate_above", MemoryTypeError),
    ({"depth": 0}, "depth", MemoryValueError),
])
def test_bad_parameters_name_the_field(kwargs, field, error):
    with pytest.raises(error) as caught:
        NumpyVectorIndex(**kwargs)
    assert caught.value.field == field


def test_vector_config_fields_reach_the_index():
    from unified_memory.retrieval.method import _vector_index

    config = MemoryConfig(vectors=VectorConfig(approximate_above=1234, scan_depth=77, ef_search=9, hnsw_m=8,
                                               nprobe=7))  # the retired knobs still load
    index = _vector_index(config, None)
    assert (index.approximate_above, index.depth) == (1234, 77)
    assert index.directory is None  # in memory: nothing saved
    assert _vector_index(config, "/tmp/x/mem.db").directory == "/tmp/x/mem.db.vectors"
    assert _vector_index(config, "postgresql://u@h/db").directory is None  # PostgreSQL: in memory only
    assert _vector_index(MemoryConfig(vectors=VectorConfig(approximate_above=None)), None).approximate_above is None
    with pytest.raises(ConfigError) as caught:
        MemoryConfig.build(None, {"vectors": {"scan_depth": 0}})
    assert "scan_depth" in str(caught.value)


def test_the_faiss_scan_runs_on_one_thread_and_leaves_the_callers_setting_alone():
    faiss = binary_codes.faiss_or_none()
    if faiss is None:
        pytest.skip("faiss is not installed")
    codes = binary_codes.encode(clustered(5000, seed=13))
    seen = []
    real = faiss.knn_hamming

    def spy(*args, **kwargs):
        seen.append(faiss.omp_get_max_threads())
        return real(*args, **kwargs)

    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(3)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(faiss, "knn_hamming", spy)
            rows = binary_codes.nearest(codes, codes[42], 100)
        assert seen == [1] and 42 in rows.tolist()
        assert faiss.omp_get_max_threads() == 3  # restored
    finally:
        faiss.omp_set_num_threads(before)


@pytest.mark.parametrize("approximate_above", [None, 2])
def test_a_removed_vector_does_not_stay_in_memory(approximate_above):
    data = unit(40, seed=14)
    index = NumpyVectorIndex(approximate_above=approximate_above)
    index.upsert("p", [f"v{i}" for i in range(40)], data)
    index.delete("p", ["v39", "v3"])  # the last row, then one moved into
    part = index._parts["p"]
    held = part.matrix.tobytes()
    assert data[39].tobytes() not in held and data[3].tobytes() not in held
    assert data[38].tobytes() in held and index.ids("p") == {f"v{i}" for i in range(40)} - {"v3", "v39"}
