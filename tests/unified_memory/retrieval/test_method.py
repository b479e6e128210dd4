"""Retrieval methods through the public API: lexical, embedding, hybrid, vector backends."""

from __future__ import annotations

import pytest

from unified_memory import DependencyError, MemoryValueError, UnifiedMemory
from unified_memory.config import VectorConfig
from unified_memory.testing import FakeEmbedder, HashingEmbedder, internals


@pytest.mark.slow
@pytest.mark.embeddings
def test_paraphrase_is_found_with_the_default_install():
    pytest.importorskip("sentence_transformers")
    with UnifiedMemory() as mem:
        assert mem.retrieval == "hybrid"
        mem.remember("I'm allergic to peanuts")
        mem.remember("I love jazz music")
        mem.remember("My sister Maria lives in Lisbon")
        hits = mem.recall("which food must I avoid?", tiers="long_term")
        assert hits[0].text == "I'm allergic to peanuts"
        assert hits[0].components["dense"] > 0 and hits[0].components["lexical"] == 0.0


def test_auto_is_lexical_without_the_extra():
    with UnifiedMemory() as mem:  # the test fixture hides the extra
        assert mem.retrieval == "lexical"


def test_dense_retrieval_needs_an_embedder(monkeypatch):
    import unified_memory.retrieval.method as retrieval

    monkeypatch.setattr(retrieval, "shared_default_embedder", lambda: None)
    with pytest.raises(DependencyError) as info:
        UnifiedMemory(retrieval="hybrid")
    assert info.value.field == "retrieval"


@pytest.mark.parametrize("mode", ["embedding", "hybrid"])
def test_modes_explain_their_scores(mode):
    with UnifiedMemory(retrieval=mode, embedder=FakeEmbedder()) as mem:
        mem.remember("The violin lessons are on Tuesday")
        mem.add_turn("I practised violin scales today", "Great")
        hits = mem.recall("violin lessons")
        assert hits and mem.retrieval == mode
        for hit in hits:
            assert {"dense", "cosine", "lexical", "relevance"} <= set(hit.components)
        if mode == "embedding":
            assert all(h.components["relevance"] == h.components["dense"] for h in hits)


def test_an_explicit_embedder_makes_auto_hybrid():
    with UnifiedMemory(embedder=FakeEmbedder()) as mem:
        assert mem.retrieval == "hybrid"


def test_restart_and_duplicates_never_re_embed(tmp_path):
    path = tmp_path / "m.db"
    embedder = FakeEmbedder()
    with UnifiedMemory(path, retrieval="hybrid", embedder=embedder) as mem:
        mem.remember("I keep bees on the roof")
        mem.scoped(user_id="bob").remember("I keep bees on the roof")
        mem.recall("bees")
    stored = len(embedder.texts)
    with UnifiedMemory(path, retrieval="hybrid", embedder=embedder) as mem:
        assert mem.recall("bees", tiers="long_term")[0].text == "I keep bees on the roof"
    # reopening rebuilt the index from the cache: only the repeated query was new text
    assert [t for t in embedder.texts[stored:] if t != "bees"] == []


def test_users_never_see_each_others_vectors():
    with UnifiedMemory(retrieval="embedding", embedder=FakeEmbedder()) as mem:
        mem.remember("My bank PIN is 1234")
        bob = mem.scoped(user_id="bob")
        bob.remember("I like hiking")
        assert all("PIN" not in h.text for h in bob.recall("bank PIN number", limit=20))


def test_chroma_backend_detects_drift_and_reindexes(tmp_path):
    pytest.importorskip("chromadb")
    path = tmp_path / "m.db"
    settings = {"retrieval": "embedding", "vectors": VectorConfig(backend="chroma")}
    with UnifiedMemory(path, embedder=FakeEmbedder(), **settings) as mem:
        fact = mem.remember("The spare key is under the blue flowerpot")
        assert mem.recall("spare key flowerpot", tiers="long_term")[0].id == fact
        dense = internals(mem).dense
        index = dense.index
        partition = dense.partitions["facts"].partition(mem.user_id)
        index.delete(partition, list(index.ids(partition)))  # the index drifts behind our back
    assert (tmp_path / "m.db.chroma").is_dir()
    with UnifiedMemory(path, embedder=FakeEmbedder(), **settings) as mem:  # opening detects the drift
        assert [h.id for h in mem.recall("spare key flowerpot", tiers="long_term")] == [fact]
        assert mem.reindex() == 1
        assert [h.id for h in mem.recall("spare key flowerpot", tiers="long_term")] == [fact]


def test_chroma_in_memory_needs_a_location():
    pytest.importorskip("chromadb")
    from unified_memory import ConfigError

    with pytest.raises(ConfigError, match="vectors.chroma_path"):
        UnifiedMemory(retrieval="embedding", embedder=FakeEmbedder(), vectors=VectorConfig(backend="chroma"))


@pytest.mark.parametrize("backend", ["numpy", "chroma"])
def test_a_bulk_write_embeds_once_per_tier_even_with_a_built_index(backend, tmp_path):
    pytest.importorskip("chromadb") if backend == "chroma" else None
    emb = FakeEmbedder(32)
    path = tmp_path / "mem.db"
    with UnifiedMemory(path, retrieval="hybrid", embedder=emb, vectors=VectorConfig(backend=backend)) as mem:
        mem.recall("warm up")  # every partition is built and kept in step from now on
        emb.reset()
        cities = ["Lisbon", "Porto", "Bergen", "Turin", "Dakar", "Leeds", "Rome", "Oslo"]
        hobbies = ["kayaking", "pottery", "chess", "jazz", "climbing"]
        names = ["Ana", "Ben", "Carla", "Dev", "Eli", "Fay", "Gus", "Hana"]
        mem.remember_many([f"My neighbour {names[i % 8]} just moved to {cities[(i * 3) % 8]} and loves "
                           f"{hobbies[i % 5]}" for i in range(40)]
                          + [f"I met Person{i} at the Museum{i} in Lisbon" for i in range(40)])
        assert len(mem.entities()) > 10
        assert emb.calls <= 3  # facts and entities: one batch each, not one call per entity
        assert len(emb.texts) == len(set(emb.texts))  # nothing embedded twice
        emb.reset()
        mem.add_messages([{"role": "user", "content": f"Turn {i} about gardening"} for i in range(30)])
        assert emb.calls <= 3
        hit = mem.recall("Person7 Museum7", tiers="long_term")[0]
        assert hit.text == "I met Person7 at the Museum7 in Lisbon" and hit.components["dense"] > 0


@pytest.mark.parametrize("before_recall", [True, False])
def test_a_write_embeds_what_it_adds_whether_or_not_the_index_is_built(tmp_path, before_recall):
    """The vectors of written texts are made by the write, also before this process's first recall
    (the partition is built from the store then): that recall embeds only its query, and a new
    process finds every vector in the cache."""
    emb, path = FakeEmbedder(32), tmp_path / "mem.db"
    with UnifiedMemory(path, retrieval="hybrid", embedder=emb) as mem:
        if not before_recall:
            mem.recall("warm up")
        mem.remember_many(_template_facts(30))
        mem.add_turn("I started pottery classes", "Nice!")
        written = set(emb.texts)
        facts = {f.text for f in mem.facts()}
        assert len(facts) == 30 and facts <= written
        assert "I started pottery classes" in written  # the turn's parts
        assert emb.calls <= 6  # one batch per tier and write
        emb.reset()
        hits = mem.recall("who restores lamps in Kyoto?", limit=3, tiers="long_term")
        assert hits
        assert emb.texts == ["who restores lamps in Kyoto?"]  # the query, nothing written
    other = FakeEmbedder(32)
    with UnifiedMemory(path, retrieval="hybrid", embedder=other) as again:
        assert again.recall("pottery", limit=1)[0].text == "I started pottery classes"
        assert other.texts == ["pottery"]


def test_an_embedder_failing_before_the_first_recall_writes_nothing():
    """Before any recall, as after it: an embedder error inside a write rolls the write back."""
    class Failing(FakeEmbedder):
        fail = False

        def embed(self, texts):
            if self.fail:
                raise RuntimeError("model unavailable")
            return super().embed(texts)

    emb = Failing(32)
    with UnifiedMemory(retrieval="hybrid", embedder=emb) as mem:
        emb.fail = True
        with pytest.raises(RuntimeError, match="model unavailable"):
            mem.remember("I keep bees")
        emb.fail = False
        assert mem.facts() == [] and mem.recall("bees") == []
        mem.remember("I keep bees")
        assert mem.recall("bees", tiers="long_term")[0].text == "I keep bees"


def test_a_failed_write_leaves_no_vectors_behind():
    emb = FakeEmbedder(32)
    with UnifiedMemory(retrieval="hybrid", embedder=emb) as mem:
        mem.remember("I keep bees")
        mem.recall("bees")
        with pytest.raises(MemoryValueError):
            mem.remember_many(["I grow tomatoes", "   "])  # the second item is refused: nothing is written
        assert [h.text for h in mem.recall("tomatoes", tiers="long_term")
                if "tomatoes" in h.text] == []
        mem.remember("I grow tomatoes")
        assert mem.recall("tomatoes", tiers="long_term")[0].text == "I grow tomatoes"


def _template_facts(n: int) -> list[str]:
    """Facts from one template, so that many are paraphrase-close under feature hashing."""
    people = ["dentist", "coach", "neighbour", "boss", "teacher", "cousin"]
    verbs = ["collects", "teaches", "restores", "imports", "hates", "likes", "studies"]
    kinds = ["digital", "ceramic", "electric", "Japanese", "organic", "vintage", "tiny", "wooden"]
    things = ["chess sets", "cheeses", "lamps", "sculptures", "orchids", "teapots", "telescopes"]
    cities = ["Porto", "Quito", "Kyoto", "Austin", "Turin", "Hanoi", "Oslo", "Perth", "Leeds", "Cusco"]
    times = ["every summer", "after work", "for charity", "when travelling", "on Sunday mornings"]
    return [f"My {people[i % 6]} {verbs[i * 3 % 7]} {kinds[i * 3 % 8]} {things[i * 5 % 7]} "
            f"in {cities[i * 11 % 10]} {times[i * 13 % 5]} (note {i})" for i in range(n)]


@pytest.mark.parametrize(("ceiling", "all_first"), [(None, True), (0.7, False)])
def test_embedding_only_recall_puts_a_restated_text_first(ceiling, all_first):
    # Embedding-only retrieval has nothing but the cosine to tell a stored text from its paraphrases:
    # by default its ceiling is 1.0, so the closer text always ranks higher. Capped at hybrid's 0.7,
    # every close paraphrase counts as a full match and importance or recency decide instead.
    facts = _template_facts(3000)
    with UnifiedMemory(retrieval="embedding", embedder=HashingEmbedder(384), long_term_limit=None,
                       ranking={"dense_ceiling": ceiling}) as mem:
        ids = mem.remember_many(facts)
        first = [mem.recall(facts[i], limit=1, tiers="long_term")[0].id == ids[i] for i in range(0, 3000, 10)]
    assert all(first) is all_first
