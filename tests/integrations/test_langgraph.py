"""unified_memory.integrations.langgraph.MemoryStore with the real langgraph, offline: what LangGraph
asks of a store (put / get / delete / search / list_namespaces / batch of mixed ops / TTL / filters,
infinities included / offset and limit / namespace validation / ``index=`` semantic search with
per-field vectors and cosine scores), sync and async, on a SQLite file, on PostgreSQL and through the
service (``make_memory``), a compiled graph using the store, two users' keys, and the example."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra")

from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.runtime import Runtime  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from unified_memory import MemoryTypeError, MemoryValueError, UnifiedMemory  # noqa: E402
from unified_memory.integrations.langgraph import MemoryStore  # noqa: E402


@pytest.fixture
def memory(clock):
    """A local memory on a controllable clock (TTL, user labels)."""
    with UnifiedMemory(user_id="ada", clock=clock) as mem:
        yield mem


@pytest.fixture
def store(make_memory) -> MemoryStore:
    """A store over each kind of memory: a SQLite file, PostgreSQL, the service."""
    return MemoryStore(make_memory("ada"))


def test_put_get_overwrite_delete(store):
    store.put(("docs", "a"), "k1", {"text": "hello", "n": 1})
    item = store.get(("docs", "a"), "k1")
    assert isinstance(item, Item) and item.value == {"text": "hello", "n": 1}
    assert item.namespace == ("docs", "a") and item.key == "k1" and item.created_at.tzinfo is not None
    store.put(("docs", "a"), "k1", {"text": "bye"})
    assert store.get(("docs", "a"), "k1").value == {"text": "bye"}
    assert store.get(("docs",), "k1") is None and store.get(("docs", "a"), "nope") is None
    store.delete(("docs", "a"), "k1")
    assert store.get(("docs", "a"), "k1") is None
    store.delete(("docs", "a"), "k1")  # deleting what is not there is fine


def test_search_prefix_filter_offset_limit(store):
    for i in range(6):
        store.put(("docs", "x" if i % 2 else "y"), f"k{i}", {"i": i, "kind": "even" if i % 2 == 0 else "odd"})
    store.put(("other",), "z", {"i": 99})
    everything = store.search(("docs",), limit=100)
    assert all(isinstance(i, SearchItem) for i in everything)
    assert [i.key for i in everything] == ["k5", "k4", "k3", "k2", "k1", "k0"]  # newest first (same clock: by write)
    assert [i.key for i in store.search(("docs", "x"))] == ["k5", "k3", "k1"]
    assert [i.key for i in store.search(("docs",), filter={"kind": "even"})] == ["k4", "k2", "k0"]
    assert [i.key for i in store.search(("docs",), filter={"i": {"$gte": 2, "$lt": 5}})] == ["k4", "k3", "k2"]
    assert [i.key for i in store.search(("docs",), filter={"i": {"$ne": 3}}, limit=2, offset=1)] == ["k4", "k2"]
    assert len(store.search((), limit=100)) == 7
    assert store.search(("docs",), limit=0) == []


def test_a_query_ranks_matches_first_with_scores(store):
    store.put(("mem",), "food", {"text": "I'm allergic to peanuts"})
    store.put(("mem",), "city", {"text": "My sister lives in Lisbon"})
    store.put(("mem",), "title", {"title": "peanuts", "body": "nothing here"}, index=["body"])
    store.put(("mem",), "hidden", {"text": "peanuts"}, index=False)
    found = store.search(("mem",), query="what am I allergic to? peanuts")
    assert found[0].key == "food" and found[0].score is not None and found[0].score > 0
    # without embeddings: BM25 relevance, 0.0 for what the query misses, None for what is not indexed
    assert {i.key: i.score for i in found[1:]} == {"city": 0.0, "title": 0.0, "hidden": None}
    assert all(i.score is None for i in store.search(("mem",)))  # no query: no scores


class LetterEmbeddings:
    """A LangChain-style embeddings object, offline and deterministic: counts of letters and of
    letter pairs, hashed into ``dims`` buckets. Texts that share letters point the same way."""

    def __init__(self, dims: int = 64) -> None:
        self.dims, self.calls = dims, 0

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        text = text.lower()
        for gram in [*text, *(text[i:i + 2] for i in range(len(text) - 1))]:
            vector[sum(map(ord, gram)) * 31 % self.dims] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._one(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return self.embed_query(text)


def _cosine(a: list[float], b: list[float]) -> float:
    import math
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


def test_index_config_embeds_each_field_and_scores_by_the_closest(make_memory):
    embeddings = LetterEmbeddings()
    store = MemoryStore(make_memory("ada"), index={"dims": 64, "embed": embeddings, "fields": ["title", "tags[*]"]})
    assert store.index_config["dims"] == 64 and store.index_config["embed"] is embeddings
    store.batch([PutOp(("docs",), "a", {"title": "zebra crossing", "tags": ["xylophone", "quartz"], "body": "kiwi"}),
                 PutOp(("docs",), "b", {"title": "kiwi orchard", "tags": ["apple"]})])
    assert embeddings.calls == 1  # one call for the whole batch
    found = {i.key: i.score for i in store.search(("docs",), query="quartz")}
    query = embeddings.embed_query("quartz")
    best_a = max(_cosine(query, embeddings.embed_query(t)) for t in ["zebra crossing", "xylophone", "quartz"])
    best_b = max(_cosine(query, embeddings.embed_query(t)) for t in ["kiwi orchard", "apple"])
    assert found == pytest.approx({"a": best_a, "b": best_b}, abs=1e-5) and found["a"] == pytest.approx(1.0)
    # "body" is not an indexed field: "kiwi" finds b (its title), not a (its body)
    assert store.search(("docs",), query="kiwi")[0].key == "b"
    # every returned item has a float score with a query, None without
    assert all(isinstance(i.score, float) for i in store.search(("docs",), query="anything"))
    assert all(i.score is None for i in store.search(("docs",)))


def test_index_per_put_fields_and_index_false(make_memory):
    store = MemoryStore(make_memory("ada"), index={"dims": 64, "embed": LetterEmbeddings(), "fields": ["nope"]})
    store.put(("d",), "first", {"a": "alpha", "b": "bravo"}, index=["a"])
    store.put(("d",), "last", {"items": ["one", "two", "zulu"]}, index=["items[-1]"])
    store.put(("d",), "off", {"a": "alpha"}, index=False)
    store.put(("d",), "none", {"a": "alpha"})  # the store's fields: nothing there to index
    scores = {i.key: i.score for i in store.search(("d",), query="alpha")}
    assert scores["first"] == pytest.approx(1.0) and scores["off"] is None and scores["none"] is None
    assert store.search(("d",), query="zulu")[0].key == "last"
    assert store.search(("d",), query="bravo")[0].score < 1.0  # "b" was not indexed for "first"


def test_index_async_and_whole_value_default(make_memory):
    store = MemoryStore(make_memory("ada"), index={"dims": 64, "embed": LetterEmbeddings()})  # fields: ["$"]

    async def main() -> list[SearchItem]:
        await store.aput(("a",), "k1", {"text": "honey bees", "n": 1})
        await store.aput(("a",), "k2", {"text": "jazz music", "n": 2})
        return await store.asearch(("a",), query="bees", filter={"n": {"$lt": float("inf")}})

    found = asyncio.run(main())
    assert [i.key for i in found] == ["k1", "k2"] and found[0].score > found[1].score


@pytest.mark.parametrize("distance_type", ["cosine", "inner_product", "l2"])
def test_distance_types_score_as_postgres_store_does(make_memory, distance_type):
    """``index={"distance_type": ...}``: the cosine similarity, the dot product, or minus the
    Euclidean distance of the closest field (PostgresStore's scores), the closest item first."""
    letters = LetterEmbeddings(dims=16)
    store = MemoryStore(make_memory("ada"), index={"dims": 16, "embed": letters, "fields": ["text"],
                                                   "distance_type": distance_type})
    store.put(("d",), "near", {"text": "otters"})
    store.put(("d",), "far", {"text": "jazz"})
    found = store.search(("d",), query="otters swim")
    query, near = letters.embed_query("otters swim"), letters.embed_query("otters")
    expected = {"cosine": _cosine(query, near), "inner_product": sum(a * b for a, b in zip(query, near, strict=True)),
                "l2": -sum((a - b) ** 2 for a, b in zip(query, near, strict=True)) ** 0.5}[distance_type]
    assert found[0].key == "near" and found[0].score == pytest.approx(expected, rel=1e-4)
    assert found[0].score > found[1].score


def test_filters_take_infinities_and_nan(store):
    store.put(("f",), "a", {"price": 3.5})
    store.put(("f",), "b", {"price": -2})
    inf, nan = float("inf"), float("nan")
    assert sorted(i.key for i in store.search(("f",), filter={"price": {"$lt": inf}})) == ["a", "b"]
    assert sorted(i.key for i in store.search(("f",), filter={"price": {"$gt": -inf, "$lt": 0}})) == ["b"]
    assert store.search(("f",), filter={"price": nan}) == []


def test_a_function_or_an_embedder_of_ours_embeds_too(make_memory):
    letters = LetterEmbeddings(dims=16)
    as_function = MemoryStore(make_memory("ada"), index={"dims": 16, "embed": letters.embed_documents,
                                                                   "fields": ["text"]})
    as_function.put(("f",), "k", {"text": "otters"})
    assert as_function.search(("f",), query="otters")[0].score == pytest.approx(1.0)

    class Ours:  # the Embedder protocol: name, dim, embed(texts) -> (n, dim)
        name, dim = "letters", 16

        def embed(self, texts):
            import numpy as np
            return np.asarray(letters.embed_documents(list(texts)), dtype=np.float32)

    ours = MemoryStore(make_memory("bob"), index={"embed": Ours(), "fields": ["text"]})  # dims from the embedder
    assert ours.index_config["dims"] == 16
    ours.put(("f",), "k", {"text": "otters"})
    assert ours.search(("f",), query="otters")[0].score == pytest.approx(1.0)


@pytest.mark.parametrize("index, field, error", [
    ({"dims": 4}, "index.embed", MemoryValueError),
    ({"dims": 0, "embed": LetterEmbeddings()}, "index.dims", MemoryTypeError),
    ({"dims": 4, "embed": LetterEmbeddings(), "bogus": 1}, "index", MemoryValueError),
    ({"dims": 4, "embed": LetterEmbeddings(), "fields": "title"}, None, None),  # a str is one path
    ({"dims": 4, "embed": LetterEmbeddings(), "fields": [3]}, "index.fields[0]", MemoryTypeError),
    ({"dims": 4, "embed": LetterEmbeddings(), "distance_type": "hamming"}, "index.distance_type", MemoryValueError),
    ("dims=4", "index", MemoryTypeError),
])
def test_bad_index_configs_name_the_field(memory, index, field, error):
    if error is None:
        MemoryStore(memory, index=index)
        return
    with pytest.raises(error) as caught:
        MemoryStore(memory, index=index)
    assert caught.value.field == field


def test_vectors_of_the_wrong_length_are_refused_and_nothing_is_written(memory):
    store = MemoryStore(memory, index={"dims": 8, "embed": LetterEmbeddings(dims=64)})
    with pytest.raises(MemoryValueError) as caught:
        store.put(("x",), "k", {"text": "hello"})
    assert caught.value.field == "index.dims" and store.get(("x",), "k") is None


def test_list_namespaces(store):
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f",), ("users", "ada", "prefs")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("f",), ("users", "ada", "prefs")]
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert store.list_namespaces(prefix=("a", "*", "d")) == [("a", "b", "d")]
    assert store.list_namespaces(suffix=("prefs",)) == [("users", "ada", "prefs")]
    assert store.list_namespaces(prefix=("a",), suffix=("c",)) == [("a", "b", "c")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("f",), ("users", "ada")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e")]


def test_batch_of_mixed_ops_reads_before_its_puts(store):
    store.put(("b",), "old", {"v": 0})
    results = store.batch([
        PutOp(("b",), "k", {"v": 1}),
        GetOp(("b",), "k"),
        GetOp(("b",), "old"),
        SearchOp(("b",), limit=10),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("b",)),)),
        PutOp(("b",), "k", {"v": 2}),
        PutOp(("b",), "old", None),
    ])
    assert results[0] is None and results[1] is None and results[5] is None and results[6] is None
    assert results[2].value == {"v": 0} and [i.key for i in results[3]] == ["old"] and results[4] == [("b",)]
    assert store.get(("b",), "k").value == {"v": 2} and store.get(("b",), "old") is None


def test_async_twins(store):
    async def main() -> None:
        await store.aput(("as",), "k", {"text": "async bees"})
        assert (await store.aget(("as",), "k")).value == {"text": "async bees"}
        assert [i.key for i in await store.asearch(("as",), query="bees")] == ["k"]
        assert await store.alist_namespaces() == [("as",)]
        results = await store.abatch([GetOp(("as",), "k"), PutOp(("as",), "k", None)])
        assert results[0].key == "k" and await store.aget(("as",), "k") is None

    asyncio.run(main())


def test_ttl_expires_and_reads_refresh(memory, clock):
    store = MemoryStore(memory, ttl={"default_ttl": 10, "refresh_on_read": True})
    assert store.supports_ttl and store.ttl_config["default_ttl"] == 10
    store.put(("t",), "default", {"v": 1})
    store.put(("t",), "short", {"v": 2}, ttl=1)
    store.put(("t",), "forever", {"v": 3}, ttl=None)
    clock.advance(seconds=5 * 60)
    assert store.get(("t",), "short") is None
    assert store.get(("t",), "default") is not None  # refreshed: 10 more minutes
    clock.advance(seconds=8 * 60)
    assert store.get(("t",), "default", refresh_ttl=False) is not None
    clock.advance(seconds=3 * 60)
    assert [i.key for i in store.search(("t",))] == ["forever"]
    assert store.list_namespaces() == [("t",)]


def test_namespaces_are_validated(store):
    for bad in [("a.b",), ("",), ("a", "")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([GetOp(("a.b",), "k")])
    with pytest.raises(InvalidNamespaceError):
        store.search(("x.y",))
    with pytest.raises(MemoryTypeError) as caught:
        store.put(("a",), "k", "not a dict")  # type: ignore[arg-type]
    assert caught.value.field == "value"
    with pytest.raises(MemoryValueError) as caught:
        store.search(("a",), filter={"n": {"$in": [1]}})
    assert caught.value.field == "filter.n"
    with pytest.raises(MemoryTypeError):
        MemoryStore(object())
    with pytest.raises(MemoryValueError):
        MemoryStore(store.memory, ttl={"bogus": 1})


def test_user_label_puts_each_namespace_in_its_users_memory(memory):
    store = MemoryStore(memory, user_label=1)
    store.put(("memories", "ada"), "m1", {"text": "Ada keeps bees"})
    store.put(("memories", "bob"), "m1", {"text": "Bob keeps wasps"})
    assert [i.value["text"] for i in memory.search_items(())] == ["Ada keeps bees"]
    assert [i.value["text"] for i in memory.scoped(user_id="bob").search_items(())] == ["Bob keeps wasps"]
    assert store.get(("memories", "bob"), "m1").value == {"text": "Bob keeps wasps"}
    assert [i.namespace for i in store.search(("memories", "ada"))] == [("memories", "ada")]
    both = store.search(("memories",), query="who keeps bees?")
    assert [i.namespace for i in both] == [("memories", "ada"), ("memories", "bob")] and both[0].score
    assert store.list_namespaces() == [("memories", "ada"), ("memories", "bob")]
    assert store.list_namespaces(prefix=("memories", "bob")) == [("memories", "bob")]
    with pytest.raises(MemoryValueError) as caught:
        store.put(("memories",), "k", {"v": 1})
    assert caught.value.field == "namespace"
    assert memory.forget(user_id="bob")["keyed_items"] == 1 and store.list_namespaces() == [("memories", "ada")]


class State(TypedDict):
    said: Annotated[list[str], operator.add]
    answer: str


def test_a_graph_writes_and_searches_through_the_store(memory):
    """A compiled graph with store=MemoryStore: one node remembers what the user said, another answers
    from store.search (no model: the answer is the best match)."""

    def remember(state: State, runtime: Runtime) -> dict:
        for text in state["said"]:
            if not text.endswith("?"):
                runtime.store.put(("memories", "ada"), text, {"text": text})
        return {}

    def answer(state: State, runtime: Runtime) -> dict:
        found = runtime.store.search(("memories", "ada"), query=state["said"][-1], limit=1)
        return {"answer": found[0].value["text"] if found and found[0].score else "I don't know"}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    graph = builder.compile(store=MemoryStore(memory, user_label=1))
    graph.invoke({"said": ["I'm allergic to peanuts", "My sister lives in Lisbon"], "answer": ""})
    out = graph.invoke({"said": ["Where does my sister live?"], "answer": ""})
    assert out["answer"] == "My sister lives in Lisbon"
    assert len(memory.search_items(("memories",), limit=100)) == 2


@pytest.mark.slow
def test_through_the_service_with_two_users(tmp_path):
    pytest.importorskip("fastapi", reason="the service needs the server extra")
    from langgraph.store.base import BaseStore  # noqa: F401

    from unified_memory import PermissionDeniedError, RemoteMemory
    from unified_memory.service.background import ServiceProcess

    with ServiceProcess(tmp_path / "memory.db") as service:
        ada_key, bob_key = service.create_key("ada"), service.create_key("bob")
        with RemoteMemory(service.url, ada_key, user_id="ada", timeout=30) as ada, \
                RemoteMemory(service.url, bob_key, user_id="bob", timeout=30) as bob:
            ada_store, bob_store = MemoryStore(ada), MemoryStore(bob)
            ada_store.put(("notes",), "n", {"text": "Ada keeps bees"}, ttl=60)
            bob_store.put(("notes",), "n", {"text": "Bob keeps wasps"})
            assert ada_store.get(("notes",), "n").value == {"text": "Ada keeps bees"}
            assert [i.value["text"] for i in bob_store.search((), query="bees")] == ["Bob keeps wasps"]
            assert asyncio.run(ada_store.asearch(("notes",), query="bees"))[0].score
            assert ada_store.list_namespaces() == bob_store.list_namespaces() == [("notes",)]
            labelled = MemoryStore(ada, user_label=1)
            labelled.put(("memories", "ada"), "m", {"text": "hi"})
            assert labelled.list_namespaces(prefix=("memories",)) == [("memories", "ada")]
            with pytest.raises(PermissionDeniedError):
                labelled.get(("memories", "bob"), "m")
            ada_store.delete(("notes",), "n")
            assert ada_store.get(("notes",), "n") is None and bob_store.get(("notes",), "n") is not None


def test_the_example_agent_remembers_across_days(capsys, example):
    """``examples/langgraph_agent.py`` runs offline: Tuesday's answers come from Monday's memories."""
    module = example("langgraph_agent")
    assert module.main(["langgraph_agent.py"]) == 0
    out = capsys.readouterr().out
    assert "tuesday> What am I allergic to?\n  From memory: I'm allergic to peanuts" in out
    assert "tuesday> Where does my sister live?\n  From memory: My sister Maria lives in Lisbon" in out


@pytest.mark.slow
@pytest.mark.embeddings
def test_a_hybrid_memory_ranks_a_paraphrase_by_meaning():
    """With an embedder, search(query=...) finds an item that shares no word with the query."""
    pytest.importorskip("sentence_transformers")
    with UnifiedMemory(user_id="ada") as mem:
        assert mem.retrieval == "hybrid"
        store = MemoryStore(mem)
        store.put(("memories",), "m1", {"text": "I'm allergic to peanuts"})
        store.put(("memories",), "m2", {"text": "I love jazz music"})
        store.put(("memories",), "m3", {"text": "My sister Maria lives in Lisbon"})
        found = store.search(("memories",), query="which food must I avoid?")
        assert found[0].key == "m1" and found[0].score is not None and found[0].score > 0
        assert all(item.score is None or item.score <= found[0].score for item in found)
