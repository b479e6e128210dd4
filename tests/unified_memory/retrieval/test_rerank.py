import doctest

import pytest

import unified_memory.retrieval.rerank
from unified_memory import MemoryTypeError, MemoryValueError, Reranker, UnifiedMemory


def test_doctests():
    assert doctest.testmod(unified_memory.retrieval.rerank).failed == 0


class Prefers:
    """Scores texts containing a word high; records what it saw."""

    def __init__(self, word):
        self.word, self.seen = word, []

    def rerank(self, query, texts):
        self.seen.append((query, list(texts)))
        return [1.0 if self.word in t else 0.0 for t in texts]


def test_reranker_reorders_the_top_hits_and_keeps_the_fused_score():
    ranker = Prefers("bicycle")
    assert isinstance(ranker, Reranker)
    with UnifiedMemory(reranker=ranker, ranking={"rerank_depth": 5}) as mem:
        mem.remember_many(["I ride to work", "I ride a red bicycle to work", "I ride horses on weekends"])
        hits = mem.recall("ride to work", limit=2, tiers="long_term")
    assert hits[0].text == "I ride a red bicycle to work"
    assert hits[0].components["rerank"] == 1.0 and "fused_score" in hits[0].components
    assert len(hits) == 2
    query, texts = ranker.seen[-1]
    assert query == "ride to work" and len(texts) == 3  # depth 5 > limit 2: all candidates were offered


@pytest.mark.parametrize("bad, match", [
    (lambda q, texts: [0.0], "returned 1 scores"),
    (lambda q, texts: ["x"] * len(texts), "must return numbers"),
    (lambda q, texts: [float("nan")] * len(texts), "not finite"),
])
def test_a_misbehaving_reranker_is_named(bad, match):
    class Bad:
        rerank = staticmethod(bad)

    with UnifiedMemory(reranker=Bad()) as mem:
        mem.remember_many(["I ride to work", "I ride a bicycle"])
        with pytest.raises(MemoryValueError, match=match) as info:
            mem.recall("ride")
    assert info.value.field == "reranker"


def test_a_reranker_without_rerank_is_refused():
    with pytest.raises(MemoryTypeError, match="reranker"):
        UnifiedMemory(reranker=object())


def test_near_duplicates_lose_score_to_diversity():
    texts = ["I love hiking in the Alps", "I really love hiking in the Alps", "Cycling near Lisbon, loved it"]
    with UnifiedMemory(ranking={"diversity": 1.0}) as mem:
        mem.remember_many(texts)
        hits = mem.recall("love hiking Alps", limit=3, tiers="long_term")
        mem.config.ranking.diversity = 0.0
        plain = mem.recall("love hiking Alps", limit=3, tiers="long_term")
    by_text = {h.text: h for h in hits}
    assert by_text[texts[1]].components["redundancy_penalty"] == pytest.approx(0.5)  # Jaccard 0.75
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all("redundancy_penalty" not in h.components for h in plain)
    assert {h.text: h.score for h in plain}[texts[1]] > by_text[texts[1]].score


def test_diversify_prefers_a_new_topic_over_a_near_duplicate():
    from scoring.fusion import diversify

    terms = [frozenset({"love", "hike", "alp"}), frozenset({"realli", "love", "hike", "alp"}), frozenset({"lisbon"})]
    assert [i for i, _ in diversify([1.0, 0.95, 0.5], terms, limit=3, diversity=1.0)] == [0, 2, 1]
    assert [i for i, _ in diversify([1.0, 0.95, 0.5], terms, limit=3, diversity=0.0)] == [0, 1, 2]
    with pytest.raises(ValueError, match="diversity"):
        diversify([1.0], terms[:1], limit=1, diversity=2.0)
