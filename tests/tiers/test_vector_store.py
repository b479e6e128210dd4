import json

import numpy as np
import pytest

from scoring.embeddings import HashingEmbedder
from tiers.indexes import vector_store
from tiers.indexes.vector_partition import Partition
from tiers.indexes.vectors import NumpyVectorIndex
from unified_memory import UnifiedMemory
from unified_memory.config import VectorConfig
from unified_memory.testing import internals


def unit(n, dim=16, seed=0):
    data = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


def files(folder):
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def built(folder, n=400, name="facts/ada", seed=0):
    index = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    data = unit(n, seed=seed)
    index.upsert(name, [f"v{i}" for i in range(n)], data)
    assert index.approximate(name)
    return index, data


def test_a_partition_is_saved_with_its_journal_position_and_loaded_as_it_was(tmp_path):
    folder = tmp_path / "db.vectors"
    index, data = built(folder)
    index.delete("facts/ada", ["v3", "v4"])
    index.upsert("facts/small", ["s"], data[:1])  # exact: never saved
    before = [index.search("facts/ada", query, 10) for query in data[:20]]
    index.save_partition("facts/ada", 42, "tag")
    index.save_partition("facts/small", 42, "tag")
    index.close()
    assert len(files(folder)) == 4  # manifest, vectors, codes, ids
    again = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    assert again.load_saved("facts/ada", "tag") == 42 and again.load_saved("facts/ada", "tag") is None  # once
    assert again.load_saved("facts/small", "tag") is None
    assert again.approximate("facts/ada")
    assert isinstance(again._parts["facts/ada"].matrix, np.memmap)  # mapped, not read
    assert [again.search("facts/ada", query, 10) for query in data[:20]] == before
    assert again.ids("facts/ada") == {f"v{i}" for i in range(400)} - {"v3", "v4"}
    again.upsert("facts/ada", ["v3", "new"], data[:2])  # a loaded graph takes writes; ranks continue
    assert again.search("facts/ada", data[0], 2) == [("v0", pytest.approx(1.0)), ("v3", pytest.approx(1.0))]
    again.save_partition("facts/ada", 50, "tag")
    again.close()
    third = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    assert third.load_saved("facts/ada", "tag") == 50
    assert {"v3", "new"} <= third.ids("facts/ada") and len(files(folder)) == 4  # old generation removed
    third.save_partition("facts/ada", 60, "tag")  # unchanged: only the manifest's position moves
    assert vector_store.load(folder, "facts/ada", "tag")[1] == 60


def test_a_saved_file_holds_no_removed_vector(tmp_path):
    folder = tmp_path / "db.vectors"
    index, data = built(folder, n=300)
    index.delete("facts/ada", ["v7"])
    index.upsert("facts/ada", ["v8"], data[:1])  # replaced: the old vector goes too
    index.save_partition("facts/ada", 1, "tag")
    raw = b"".join(path.read_bytes() for path in folder.iterdir())
    assert data[7].tobytes() not in raw and data[8].tobytes() not in raw and data[9].tobytes() in raw


@pytest.mark.parametrize("damage", ["truncate", "garbage", "ids", "manifest", "tag", "format", "count"])
def test_damaged_foreign_or_partial_files_are_deleted_and_never_raise(tmp_path, damage):
    folder = tmp_path / "db.vectors"
    index, _ = built(folder, n=200)
    index.save_partition("facts/ada", 3, "tag")
    graph, ids = next(folder.glob("*.f32")), next(folder.glob("*.ids.json"))
    manifest = next(path for path in folder.glob("*.json") if not path.name.endswith(".ids.json"))
    (folder / "stray.tmp").write_text("x")
    if damage == "truncate":
        graph.write_bytes(graph.read_bytes()[:1000])
    elif damage == "garbage":
        graph.write_bytes(b"\x00" * graph.stat().st_size)
    elif damage == "ids":
        ids.write_text("{not json")
    elif damage == "manifest":
        manifest.write_text("[" * 100_000)
    elif damage == "format":
        manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "format": 99}))
    elif damage == "count":
        state = json.loads(ids.read_text())
        state["ids"][0] = state["ids"][1]
        ids.write_text(json.dumps(state))
    tag = "another model" if damage == "tag" else "tag"
    again = NumpyVectorIndex(approximate_above=100, directory=str(folder))
    assert again.load_saved("facts/ada", tag) is None and again.ids("facts/ada") == set()
    assert files(folder) == ["stray.tmp"]


def test_a_crash_before_the_manifest_keeps_the_previous_save(tmp_path):
    folder = tmp_path / "db.vectors"
    index, _ = built(folder, n=200)
    index.save_partition("facts/ada", 3, "tag")
    stem = next(folder.glob("*.f32")).name.split(".")[0]
    (folder / f"{stem}.feedbeef0000.f32").write_bytes(b"half written")  # a newer save, cut short
    (folder / f"{stem}.feedbeef0000.codes.0a0b0c0d.tmp").write_bytes(b"half written")
    assert len(vector_store.load(folder, "facts/ada", "tag")[0]) == 200
    vector_store.delete(folder, "facts/ada")  # a forget deletes the leftovers too
    assert files(folder) == []


def test_drop_a_return_to_exact_and_delete_saved_remove_the_files(tmp_path):
    folder = tmp_path / "db.vectors"
    index, data = built(folder, n=200)
    index.upsert("facts/bo", [str(i) for i in range(200)], data)
    for name in ("facts/ada", "facts/bo"):
        index.save_partition(name, 1, "tag")
    assert len(files(folder)) == 8
    index.drop("facts/ada")
    index.delete("facts/bo", [str(i) for i in range(160)])  # 40 left: exact again
    index.save_partition("facts/bo", 2, "tag")
    assert files(folder) == []
    index.upsert("facts/cy", [str(i) for i in range(200)], data)
    index.save_partition("facts/cy", 1, "tag")
    index.delete_saved("facts/cy")
    assert files(folder) == []
    index.save_partition("facts/cy", 2, "tag")  # held here, in step: saved again
    assert len(files(folder)) == 4


def settings():
    return {"retrieval": "embedding", "embedder": HashingEmbedder(384), "vectors": VectorConfig(approximate_above=50)}


def wait(mem):
    assert internals(mem).dense.index.approximate("facts/default")


@pytest.mark.sqlite_only
def test_reopening_uses_the_saved_vectors_and_replays_the_journal(tmp_path, monkeypatch):
    path = tmp_path / "mem.db"
    facts = [f"my friend number {i} collects rare stamps from city {i}" for i in range(80)]
    with UnifiedMemory(path, **settings()) as mem:
        ids = [mem.remember(text) for text in facts]
        assert ids[7] in [hit.id for hit in mem.recall(facts[7], limit=5)]  # built from the store here
        wait(mem)
    assert len(files(tmp_path / "mem.db.vectors")) == 4
    with UnifiedMemory(path, retrieval="lexical") as mem:  # changes the saved graph does not hold
        extra = mem.remember("my neighbour repairs old bicycles on sundays")
        mem.remember("my friend number 9 moved to Porto")
    loads = []
    real = vector_store.load
    monkeypatch.setattr(vector_store, "load", lambda *args: loads.append(real(*args)) or loads[-1])
    encodes = []
    monkeypatch.setattr(Partition, "approximate", lambda part, on: encodes.append(on))
    with UnifiedMemory(path, **settings()) as mem:
        dense = internals(mem).dense
        assert mem.recall("neighbour repairs old bicycles", limit=1)[0].id == extra
        assert loads and loads[0] is not None and dense.index.approximate("facts/default")  # loaded, not rebuilt
        assert True not in encodes  # its codes were loaded too, not computed again
        facts_vectors = dense.partitions["facts"]
        in_store = {item_id: facts_vectors._key(item_id, text) for item_id, text in facts_vectors.loader("default")}
        assert dense.index.ids("facts/default") == set(in_store.values())  # the journal replayed: in step
        assert facts_vectors._keys["default"] == in_store
        assert ids[9] in [hit.id for hit in mem.recall(facts[9], limit=5)]


@pytest.mark.sqlite_only
def test_a_reset_since_the_saved_position_discards_it(tmp_path, monkeypatch):
    path = tmp_path / "mem.db"
    facts = [f"my friend number {i} collects rare stamps from city {i}" for i in range(80)]
    with UnifiedMemory(path, **settings()) as mem:
        mem.remember_many(facts[:60])
        mem.recall(facts[0])
        wait(mem)
    monkeypatch.setattr("tiers.storage.journal.BULK_RESET", 5)  # a bulk write journals one reset
    with UnifiedMemory(path, retrieval="lexical") as mem:
        mem.remember_many(facts[60:])
    loads = []
    real = vector_store.load
    monkeypatch.setattr(vector_store, "load", lambda *args: loads.append(real(*args)) or loads[-1])
    with UnifiedMemory(path, **settings()) as mem:
        assert mem.recall(facts[70], limit=3)[0].text == facts[70]
        assert loads and loads[0] is not None  # read, then dropped: a reset was journalled since
        assert files(tmp_path / "mem.db.vectors") == []
        wait(mem)
    assert len(files(tmp_path / "mem.db.vectors")) == 4  # the rebuilt one, saved at close


@pytest.mark.sqlite_only
@pytest.mark.parametrize("whole_user", [False, True])
def test_forget_deletes_the_saved_vectors_before_it_returns(tmp_path, whole_user):
    path, folder = tmp_path / "mem.db", tmp_path / "mem.db.vectors"
    facts = [f"my friend number {i} collects rare stamps from city {i}" for i in range(80)]
    facts[7] = "my grandmother grew purple tomatoes in her greenhouse"
    with UnifiedMemory(path, **settings()) as mem:
        ids = [mem.remember(text) for text in facts]
        mem.recall(facts[0])
        wait(mem)
    vectors = HashingEmbedder(384).embed(facts).astype(np.float32)
    vector = vectors[7].tobytes()
    assert sum(row.tobytes() == vector for row in vectors) == 1, "the test needs a vector of its own"
    assert any(vector in p.read_bytes() for p in folder.iterdir())
    with UnifiedMemory(path, **settings()) as mem:
        mem.recall(facts[7])  # loaded in this process too
        mem.forget() if whole_user else mem.forget(ids=[ids[7]])
        assert files(folder) == []  # before the memory closes
        assert ids[7] not in [hit.id for hit in mem.recall(facts[7], limit=80)]
    assert not any(vector in p.read_bytes() for p in folder.iterdir()) if folder.exists() else True
    if not whole_user:
        assert len(files(folder)) == 4  # saved again at close, without it
        with UnifiedMemory(path, **settings()) as mem:
            assert ids[7] not in [hit.id for hit in mem.recall(facts[7], limit=80)]
            assert ids[8] in [hit.id for hit in mem.recall(facts[8], limit=5)]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("damage", ["vectors", "codes", "pruned journal", "other model"])
def test_a_damaged_stale_or_foreign_saved_partition_is_rebuilt_without_an_error(tmp_path, damage):
    import sqlite3

    path, folder = tmp_path / "mem.db", tmp_path / "mem.db.vectors"
    facts = [f"my friend number {i} collects rare stamps from city {i}" for i in range(80)]
    with UnifiedMemory(path, **settings()) as mem:
        ids = mem.remember_many(facts)
        mem.recall(facts[0])
        wait(mem)
    assert len(files(folder)) == 4
    options = settings()
    if damage in ("vectors", "codes"):  # same size, other bytes: the sampled codes disagree
        saved = next(folder.glob("*.f32" if damage == "vectors" else "*.codes"))
        saved.write_bytes(bytes(255 - byte for byte in saved.read_bytes()))
    elif damage == "pruned journal":  # the journal no longer reaches back to the saved position
        with sqlite3.connect(path) as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('index_journal_pruned_through', '999999')")
    else:
        options["embedder"] = HashingEmbedder(384, name="another-model")  # same dimensions, another model
    with UnifiedMemory(path, **options) as mem:
        assert ids[9] in [hit.id for hit in mem.recall(facts[9], limit=5)]
        assert files(folder) == []  # not used: deleted, the partition built from the store
        wait(mem)
    assert len(files(folder)) == 4  # saved again at close


@pytest.mark.sqlite_only
def test_saved_files_are_written_and_deleted_only_inside_a_write_transaction(tmp_path, monkeypatch):
    """Saving holds the database's write lock (so it is serialised with forgets), and a forget
    deletes the saved files before its transaction commits."""
    path = tmp_path / "mem.db"
    facts = [f"my friend number {i} collects rare stamps from city {i}" for i in range(80)]
    seen = []
    mem = UnifiedMemory(path, **settings())
    conn = internals(mem).storage.backend.db.conn

    def spy(real, what):
        def call(*args, **kwargs):
            seen.append((what, conn.in_transaction))
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(vector_store, "save", spy(vector_store.save, "save"))
    monkeypatch.setattr(vector_store, "delete", spy(vector_store.delete, "delete"))
    try:
        ids = mem.remember_many(facts)
        mem.recall(facts[0])
        wait(mem)
        internals(mem).dense.partitions["facts"].save()  # as at close
        mem.forget(ids=[ids[3]])
    finally:
        mem.close()
    assert ("save", True) in seen and ("delete", True) in seen
    assert all(inside for _, inside in seen), seen
