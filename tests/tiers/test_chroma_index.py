"""ChromaVectorIndex: embedded (a directory) and against a real ``chroma run`` server."""

from __future__ import annotations

import doctest
import re
import socket
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import free_port

chromadb = pytest.importorskip("chromadb")

from tiers.indexes import chroma_index  # noqa: E402
from tiers.indexes.chroma_index import ChromaVectorIndex, collection_name  # noqa: E402
from unified_memory.errors import (  # noqa: E402
    ClosedError,
    DependencyError,
    MemoryTypeError,
    MemoryValueError,
    StorageError,
)
from unified_memory.protocols import VectorIndex  # noqa: E402

ODD_PARTITIONS = ["facts/ada", "messages/some user id with spaces/üñí", "facts/ada ", "x", "a/b/c/d", "日本語/ユーザー"]


def unit(n: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def brute_force(ids: list[str], vectors: np.ndarray, query: np.ndarray) -> list[tuple[str, float]]:
    scores = vectors @ query
    return sorted(zip(ids, scores.tolist(), strict=True), key=lambda pair: (-pair[1], pair[0]))


# -- fixtures ------------------------------------------------------------------------


@pytest.fixture
def server_index(chroma_server):
    # A fresh prefix per test: the server is shared by the module.
    with ChromaVectorIndex.server("127.0.0.1", chroma_server, prefix=f"t{uuid.uuid4().hex[:12]}") as index:
        yield index


@pytest.fixture
def embedded_index(tmp_path):
    with ChromaVectorIndex.embedded(tmp_path / "chroma") as index:
        yield index


@pytest.fixture(params=["embedded", "server"])
def index(request):
    return request.getfixturevalue(f"{request.param}_index")


# -- behaviour, in both modes -------------------------------------------------------------


def test_is_a_persistent_vector_index(index):
    assert isinstance(index, VectorIndex)
    assert index.persistent is True


def test_upsert_search_delete_ids_drop(index):
    vectors = unit(4, dim=8)
    index.upsert("facts/ada", ["a", "b", "c", "d"], vectors)
    assert index.ids("facts/ada") == {"a", "b", "c", "d"}
    hits = index.search("facts/ada", vectors[2], 2)
    assert hits[0][0] == "c" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert len(hits) == 2 and hits[0][1] >= hits[1][1]
    index.delete("facts/ada", ["c", "nope"])
    assert index.ids("facts/ada") == {"a", "b", "d"}
    assert "c" not in [key for key, _ in index.search("facts/ada", vectors[2], 10)]
    index.upsert("facts/ada", ["a"], vectors[2:3])  # replace a's vector
    assert index.search("facts/ada", vectors[2], 1)[0][0] == "a"
    assert index.ids("facts/ada") == {"a", "b", "d"}
    index.drop("facts/ada")
    assert index.ids("facts/ada") == set()
    assert index.search("facts/ada", vectors[0], 3) == []


def test_similarity_scores_the_ids_asked_for(index):
    vectors = unit(5, dim=8, seed=3)
    index.upsert("facts/ada", ["a", "b", "c", "d", "e"], vectors)
    scores = index.similarity("facts/ada", vectors[0], ["b", "e", "nope"])
    assert set(scores) == {"b", "e"}
    for key, row in (("b", 1), ("e", 4)):
        assert scores[key] == pytest.approx(float(vectors[row] @ vectors[0]), abs=1e-5)
    assert index.similarity("facts/bob", vectors[0], ["a"]) == {}
    assert index.similarity("facts/ada", vectors[0], []) == {}


def test_missing_and_empty_partitions(index):
    query = unit(1, dim=8)[0]
    assert index.search("facts/nobody", query, 5) == []
    assert index.ids("facts/nobody") == set()
    index.delete("facts/nobody", ["x"])
    index.drop("facts/nobody")
    index.upsert("facts/nobody", [], np.zeros((0, 8), dtype=np.float32))
    assert index.ids("facts/nobody") == set()
    index.upsert("facts/emptied", ["x"], unit(1, dim=8))
    index.delete("facts/emptied", ["x"])
    assert index.search("facts/emptied", query, 5) == []


@pytest.mark.parametrize("n", [1, 7, 60, 250])
def test_ranking_matches_brute_force(index, n):
    ids = [f"m{i}" for i in range(n)]
    vectors = unit(n, dim=16, seed=n)
    index.upsert("facts/ada", ids, vectors)
    for query in unit(5, dim=16, seed=1000 + n):
        expected = brute_force(ids, vectors, query)
        limit = min(n, 10)
        got = index.search("facts/ada", query, limit)
        assert got[0][0] == expected[0][0]
        assert {key for key, _ in got} == {key for key, _ in expected[:limit]}
        assert [s for _, s in got] == pytest.approx([s for _, s in expected[:limit]], abs=1e-5)
        assert got == sorted(got, key=lambda pair: (-pair[1], pair[0]))
    # A limit above the collection size returns everything.
    assert len(index.search("facts/ada", vectors[0], n + 50)) == n


def test_ties_are_ordered_by_id(index):
    same = np.tile(unit(1, dim=8), (3, 1))
    index.upsert("facts/ada", ["c", "a", "b"], same)
    assert [key for key, _ in index.search("facts/ada", same[0], 3)] == ["a", "b", "c"]


def test_partitions_are_isolated(index):
    vectors = unit(6, dim=8)
    index.upsert("facts/ada", ["a1", "a2", "shared"], vectors[:3])
    index.upsert("facts/bob", ["b1", "b2", "shared"], vectors[3:])
    for query in vectors:
        assert {key for key, _ in index.search("facts/ada", query, 10)} <= {"a1", "a2", "shared"}
        assert {key for key, _ in index.search("facts/bob", query, 10)} <= {"b1", "b2", "shared"}
    # The same id in two partitions holds two vectors.
    assert index.search("facts/ada", vectors[2], 1) == [("shared", pytest.approx(1.0, abs=1e-5))]
    assert index.search("facts/bob", vectors[5], 1) == [("shared", pytest.approx(1.0, abs=1e-5))]
    index.delete("facts/ada", ["shared"])
    assert index.ids("facts/bob") == {"b1", "b2", "shared"}
    index.drop("facts/bob")
    assert index.ids("facts/ada") == {"a1", "a2"}


def test_odd_partition_names(index):
    vectors = unit(len(ODD_PARTITIONS), dim=8)
    for i, partition in enumerate(ODD_PARTITIONS):
        index.upsert(partition, [f"id{i}"], vectors[i : i + 1])
    for i, partition in enumerate(ODD_PARTITIONS):
        assert index.ids(partition) == {f"id{i}"}
        assert [key for key, _ in index.search(partition, vectors[0], 10)] == [f"id{i}"]


def test_batches_and_pages(index, monkeypatch):
    index._batch = 7  # chroma's real limit is thousands; exercise the batching path cheaply
    monkeypatch.setattr(chroma_index, "_PAGE", 5)
    ids = [f"k{i:02d}" for i in range(23)]
    vectors = unit(23, dim=8)
    index.upsert("facts/ada", ids, vectors)
    assert index.ids("facts/ada") == set(ids)
    index.delete("facts/ada", ids[:16])
    assert index.ids("facts/ada") == set(ids[16:])


def test_duplicate_ids_last_wins(index):
    vectors = unit(2, dim=8)
    index.upsert("facts/ada", ["a", "a"], vectors)
    assert index.ids("facts/ada") == {"a"}
    assert index.search("facts/ada", vectors[1], 1)[0][1] == pytest.approx(1.0, abs=1e-5)


def test_invalid_input_is_refused(index):
    good = unit(2, dim=8)
    with pytest.raises(MemoryValueError, match="vectors"):
        index.upsert("facts/ada", ["a"], good)  # 1 id, 2 rows
    with pytest.raises(MemoryValueError, match="vectors"):
        index.upsert("facts/ada", ["a"], good[0])  # not 2-D
    with pytest.raises(MemoryValueError, match="vectors"):
        index.upsert("facts/ada", ["a"], np.full((1, 8), np.nan, dtype=np.float32))
    with pytest.raises(MemoryValueError, match="ids"):
        index.upsert("facts/ada", ["a", ""], good)
    with pytest.raises(MemoryTypeError):
        index.upsert("facts/ada", "ab", good)
    with pytest.raises(MemoryValueError, match="partition"):
        index.upsert("", ["a"], good[:1])
    with pytest.raises(MemoryTypeError, match="partition"):
        index.search(3, good[0], 1)
    index.upsert("facts/ada", ["a"], good[:1])
    with pytest.raises(MemoryValueError, match="dimension"):
        index.upsert("facts/ada", ["b"], unit(1, dim=9))
    with pytest.raises(MemoryValueError):
        index.search("facts/ada", unit(1, dim=9)[0], 1)
    assert index.search("facts/ada", good[0], 0) == []  # as NumpyVectorIndex does
    with pytest.raises(MemoryTypeError, match="limit"):
        index.search("facts/ada", good[0], 1.5)
    assert index.search("facts/ada", good[:1], 1)[0][0] == "a"  # a (1, dim) row is one vector
    with pytest.raises(MemoryValueError, match="vector"):
        index.search("facts/ada", good, 1)  # a matrix, not one vector
    assert index.ids("facts/ada") == {"a"}


def test_closed_index_refuses_work(index):
    index.close()
    index.close()  # idempotent
    with pytest.raises(ClosedError):
        index.search("facts/ada", unit(1, dim=8)[0], 1)
    with pytest.raises(ClosedError):
        index.upsert("facts/ada", ["a"], unit(1, dim=8))


# -- embedded only --------------------------------------------------------------------


def test_embedded_content_persists_across_clients(tmp_path):
    vectors = unit(20, dim=8)
    ids = [f"p{i}" for i in range(20)]
    with ChromaVectorIndex.embedded(tmp_path / "db") as first:
        first.upsert("facts/ada", ids, vectors)
        first.upsert("messages/bob smith/ü", ["m"], vectors[:1])
    with ChromaVectorIndex.embedded(tmp_path / "db") as second:
        assert second.ids("facts/ada") == set(ids)
        assert second.ids("messages/bob smith/ü") == {"m"}
        assert second.search("facts/ada", vectors[7], 1)[0][0] == "p7"


def test_embedded_matches_a_dict_model(tmp_path):
    """Random upserts and deletes, mirrored in a dict: ids() and top-1 search agree."""
    ops = st.lists(
        st.tuples(st.sampled_from(["upsert", "delete"]), st.sampled_from(["facts/a", "facts/b c"]),
                  st.lists(st.sampled_from("pqrstu"), min_size=1, max_size=4), st.integers(0, 10_000)),
        max_size=8,
    )

    index = ChromaVectorIndex.embedded(tmp_path / "db")

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(ops)
    def run(steps):
        model: dict[str, dict[str, np.ndarray]] = {"facts/a": {}, "facts/b c": {}}
        for partition in model:
            index.drop(partition)
        for op, partition, keys, seed in steps:
            if op == "upsert":
                vectors = unit(len(keys), dim=6, seed=seed)
                index.upsert(partition, keys, vectors)
                model[partition].update(zip(keys, vectors, strict=True))
            else:
                index.delete(partition, keys)
                for key in keys:
                    model[partition].pop(key, None)
        for partition, content in model.items():
            assert index.ids(partition) == set(content)
            for vector in content.values():
                hits = index.search(partition, vector, 10)
                assert {k for k, _ in hits} == set(content)
                assert hits[0][1] == pytest.approx(1.0, abs=1e-5)
                assert np.allclose(content[hits[0][0]], vector, atol=1e-5)

    try:
        run()
    finally:
        index.close()


def test_wraps_an_existing_client_without_closing_it(tmp_path):
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(tmp_path / "own"), settings=Settings(anonymized_telemetry=False))
    index = ChromaVectorIndex(client, prefix="mine")
    index.upsert("facts/ada", ["a"], unit(1, dim=4))
    index.close()
    assert client.get_collection(collection_name("facts/ada", "mine")).count() == 1
    client.close()


def test_hnsw_settings_apply_to_new_collections(tmp_path):
    with ChromaVectorIndex.embedded(tmp_path / "db", hnsw={"ef_search": 250}) as index:
        index.upsert("facts/ada", ["a"], unit(1, dim=4))
        config = index._collection("facts/ada", False).configuration_json["hnsw"]
        assert config["ef_search"] == 250 and config["space"] == "cosine"
    with pytest.raises(MemoryValueError, match="hnsw"):
        ChromaVectorIndex.embedded(tmp_path / "db", hnsw={"space": "l2"})  # cosine is not negotiable


def test_a_foreign_collection_with_our_name_is_refused(tmp_path):
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(tmp_path / "own"), settings=Settings(anonymized_telemetry=False))
    client.create_collection(collection_name("facts/ada"), metadata={"partition": "someone else"}, embedding_function=None)
    client.create_collection(collection_name("facts/bob"), embedding_function=None)  # no metadata at all
    client.create_collection(collection_name("facts/eve"), metadata={"partition": "facts/eve"},  # an older version's
                             embedding_function=None)
    with pytest.raises(StorageError, match="belongs to partition"):
        ChromaVectorIndex(client).ids("facts/ada")
    with pytest.raises(StorageError, match="belongs to partition"):
        ChromaVectorIndex(client).ids("facts/bob")
    assert ChromaVectorIndex(client).ids("facts/eve") == set()
    client.close()


def test_collections_do_not_record_the_user_id(tmp_path):
    with ChromaVectorIndex.embedded(tmp_path / "chroma") as index:
        index.upsert("facts/ada-lovelace", ["f1"], np.ones((1, 4), dtype=np.float32))
        assert index.ids("facts/ada-lovelace") == {"f1"}
    assert not [p for p in (tmp_path / "chroma").rglob("*") if p.is_file() and b"ada-lovelace" in p.read_bytes()]


@given(st.text(min_size=1, max_size=200), st.sampled_from(["um", "a", "Prefix_16_chars_"]))
def test_collection_names_are_valid_and_distinct(partition, prefix):
    name = collection_name(partition, prefix)
    assert 3 <= len(name) <= 63
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9]", name)
    assert name == collection_name(partition, prefix)
    assert collection_name(partition + "x", prefix) != name


@pytest.mark.parametrize("prefix", ["", "-um", "um-x", "a" * 17, "ü"])
def test_bad_prefix(tmp_path, prefix):
    with pytest.raises(MemoryValueError, match="prefix"):
        ChromaVectorIndex(object(), prefix=prefix)
    with pytest.raises(MemoryValueError, match="prefix"):
        ChromaVectorIndex.embedded(tmp_path / "db", prefix=prefix)
    assert not (tmp_path / "db").exists()  # refused before chroma opened anything


def test_chromadb_is_imported_lazily_with_an_install_hint(monkeypatch):
    code = "import sys, tiers.indexes.chroma_index; assert 'chromadb' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
    monkeypatch.setitem(sys.modules, "chromadb", None)  # makes `import chromadb` fail
    with pytest.raises(DependencyError, match=r'pip install "unified-memory\[chroma\]"'):
        ChromaVectorIndex.embedded("unused")
    with pytest.raises(ImportError):  # DependencyError is an ImportError too
        ChromaVectorIndex(object())


def test_doctests_pass():
    assert doctest.testmod(chroma_index).failed == 0


# -- server only -----------------------------------------------------------------------


def test_two_clients_see_each_others_writes(chroma_server):
    prefix = f"t{uuid.uuid4().hex[:12]}"
    with ChromaVectorIndex.server(port=chroma_server, prefix=prefix) as one, \
            ChromaVectorIndex.server(port=chroma_server, prefix=prefix) as two:
        vectors = unit(3, dim=8)
        one.upsert("facts/ada", ["a", "b"], vectors[:2])
        assert two.ids("facts/ada") == {"a", "b"}
        two.upsert("facts/ada", ["c"], vectors[2:])
        assert one.search("facts/ada", vectors[2], 1)[0][0] == "c"
        two.drop("facts/ada")  # one's cached collection is now stale
        assert one.ids("facts/ada") == set()
        assert one.search("facts/ada", vectors[0], 3) == []
        one.upsert("facts/ada", ["z"], vectors[:1])  # recreated
        assert two.ids("facts/ada") == {"z"}
    with ChromaVectorIndex.server(port=chroma_server, prefix=prefix) as three:
        assert three.ids("facts/ada") == {"z"}


def test_unreachable_server_fails_fast():
    start = time.monotonic()
    with pytest.raises(StorageError, match="not reachable"):
        ChromaVectorIndex.server("127.0.0.1", free_port(), timeout=2.0)
    assert time.monotonic() - start < 5


def test_silent_server_times_out():
    """A port that accepts connections but never answers must not hang the caller."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        start = time.monotonic()
        with pytest.raises(StorageError, match="not reachable"):
            ChromaVectorIndex.server("127.0.0.1", listener.getsockname()[1], timeout=1.0)
        assert time.monotonic() - start < 5


def test_server_requests_have_a_timeout(chroma_server):
    """chroma's HTTP client waits forever by default; ours must not (checks a private attribute,
    so a chromadb upgrade that moves it shows up here)."""
    with ChromaVectorIndex.server(port=chroma_server, timeout=3.0, request_timeout=30.0) as index:
        timeout = index._client._server._session.timeout
        assert (timeout.connect, timeout.read) == (3.0, 30.0)


def test_a_query_the_server_fails_internally_is_tried_again(index, monkeypatch):
    """A Chroma server can fail a query that races another client's delete ("Error finding id"); the
    same query a moment later succeeds. A search tries it again; a lasting failure still raises."""
    import chromadb.errors

    index.upsert("facts/ada", ["a", "b"], np.eye(2, 4, dtype=np.float32))
    collection = index._collection("facts/ada", False)
    failures = [chromadb.errors.InternalError("Error executing plan: Internal error: Error finding id")]
    query = collection.query

    def flaky(*args, **kwargs):
        if failures:
            raise failures.pop()
        return query(*args, **kwargs)

    monkeypatch.setattr(collection, "query", flaky)
    assert [key for key, _ in index.search("facts/ada", np.eye(1, 4, dtype=np.float32)[0], 2)] == ["a", "b"]
    failures.extend([chromadb.errors.InternalError("still broken")] * 5)
    with pytest.raises(StorageError, match="still broken"):
        index.search("facts/ada", np.eye(1, 4, dtype=np.float32)[0], 2)
