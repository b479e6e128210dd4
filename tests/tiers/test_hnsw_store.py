import numpy as np
import pytest

from scoring.embeddings import HashingEmbedder
from tiers import hnsw_store
from tiers.hnsw_index import HnswPartition
from tiers.vectors import NumpyVectorIndex
from unified_memory import UnifiedMemory
from unified_memory.config import VectorConfig


def unit(n, dim=16, seed=0):
    data = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def files(folder):
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def test_a_changed_partition_is_saved_at_close_and_loaded_at_first_use(tmp_path):
    folder, data = tmp_path / "db.vectors", unit(400)
    index = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    index.upsert("facts/ada", [f"v{i}" for i in range(400)], data)
    index.delete("facts/ada", ["v3", "v4"])
    index.upsert("facts/small", ["s"], data[:1])  # exact: never saved
    before = [index.search("facts/ada", query, 10) for query in data[:20]]
    index.close()
    assert len(files(folder)) == 3  # manifest, graph, ids
    again = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    assert isinstance(again._get("facts/ada"), HnswPartition)
    assert [again.search("facts/ada", query, 10) for query in data[:20]] == before
    assert again.ids("facts/ada") == {f"v{i}" for i in range(400)} - {"v3", "v4"} and again.ids("facts/small") == set()
    again.upsert("facts/ada", ["v3", "new"], data[:2])  # a loaded graph takes writes; ranks continue
    assert again.search("facts/ada", data[0], 2) == [("v0", pytest.approx(1.0)), ("v3", pytest.approx(1.0))]
    again.close()
    third = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    assert {"v3", "new"} <= third.ids("facts/ada") and len(files(folder)) == 3  # old generation removed


def test_damaged_or_partial_files_are_deleted_and_the_partition_is_empty(tmp_path):
    folder, data = tmp_path / "db.vectors", unit(200)
    index = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    index.upsert("p", [str(i) for i in range(200)], data)
    index.close()
    graph = next(folder.glob("*.usearch"))
    graph.write_bytes(graph.read_bytes()[:1000])  # truncated
    assert hnsw_store.load(folder, "p") is None and files(folder) == []
    index = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    index.upsert("p", [str(i) for i in range(200)], data)
    index.close()
    (folder / "stray.tmp").write_text("x")
    next(folder.glob("*.ids.json")).write_text("{not json")
    assert NumpyVectorIndex(approximate_above=100, directory=str(folder)).ids("p") == set()
    assert files(folder) == ["stray.tmp"]


def test_a_crash_before_the_manifest_keeps_the_previous_save(tmp_path):
    folder, data = tmp_path / "db.vectors", unit(200)
    index = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    index.upsert("p", [str(i) for i in range(200)], data)
    index.close()
    stem = next(folder.glob("*.usearch")).name.split(".")[0]
    (folder / f"{stem}.feedbeef0000.usearch").write_bytes(b"half written")  # a newer save, cut short
    assert len(hnsw_store.load(folder, "p")) == 200


def test_drop_and_a_return_to_exact_delete_the_saved_graph(tmp_path):
    folder, data = tmp_path / "db.vectors", unit(200)
    index = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    index.upsert("p", [str(i) for i in range(200)], data)
    index.upsert("q", [str(i) for i in range(200)], data)
    index.close()
    index = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    index.drop("p")
    index.delete("q", [str(i) for i in range(160)])  # 40 left: exact again
    index.close()
    assert files(folder) == []


@pytest.mark.sqlite_only
def test_reopening_uses_the_saved_graph_and_the_store_corrects_it(tmp_path):
    path = tmp_path / "mem.db"
    settings = {"retrieval": "embedding", "embedder": HashingEmbedder(64),
                "vectors": VectorConfig(approximate_above=50)}
    facts = [f"my friend number {i} collects rare stamps from city {i}" for i in range(80)]
    with UnifiedMemory(path, **settings) as mem:
        ids = [mem.remember(text) for text in facts]
        assert ids[7] in [hit.id for hit in mem.recall(facts[7], limit=5)]
    assert len(files(tmp_path / "mem.db.vectors")) == 3
    with UnifiedMemory(path, retrieval="lexical") as mem:  # a change the saved graph does not know
        mem.forget(ids=[ids[7]])
    with UnifiedMemory(path, **settings) as mem:
        found = [hit.id for hit in mem.recall(facts[7], limit=80)]
        assert ids[7] not in found and ids[8] in found
        assert ids[9] in [hit.id for hit in mem.recall(facts[9], limit=5)]
