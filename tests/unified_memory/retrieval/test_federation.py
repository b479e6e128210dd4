"""Ranking behaviour of federated recall on small fixtures: neighbours, time cues, calibration."""

from datetime import UTC, datetime, timedelta

import pytest

from unified_memory import RecallHit, UnifiedMemory

NOW = datetime(2023, 6, 15, 12, 0, tzinfo=UTC)


def at(days_ago: float) -> datetime:
    return NOW - timedelta(days=days_ago)


def memory(**overrides):
    return UnifiedMemory(clock=NOW.timestamp, **overrides)


def test_a_time_named_in_the_query_favours_items_from_then():
    with memory() as mem:
        mem.add_message("user", "I went hiking in the Alps", when=at(40))
        mem.add_message("user", "I went hiking near Lisbon", when=at(9))  # last week (Mon 5 - Sun 11 June)
        plain = mem.recall("where did I go hiking", tiers=("short_term", "episodic"))
        timed = mem.recall("where did I go hiking last week", tiers=("short_term", "episodic"))
    assert timed[0].text == "I went hiking near Lisbon"
    assert timed[0].components["time_window"] == "last week" and timed[0].components["time_match"] == 1.0
    outside = next(h for h in timed if h.text == "I went hiking in the Alps")
    assert outside.components["time_match"] == 0.0
    before = next(h for h in plain if h.text == "I went hiking in the Alps")
    assert outside.score < before.score
    assert "time_window" not in plain[0].components


def test_temporal_weight_zero_turns_time_cues_off():
    with memory(ranking={"temporal_weight": 0.0}) as mem:
        mem.add_message("user", "I went hiking in the Alps", when=at(40))
        [hit] = mem.recall("hiking in the Alps last week", tiers=("short_term", "episodic"))
    assert "time_window" not in hit.components


def test_best_match_of_a_tier_gets_full_lexical_relevance_unless_it_is_weak():
    with memory() as mem:
        mem.remember("My sister Maria lives in Lisbon")
        strong = mem.recall("Maria Lisbon", tiers="long_term")[0]
        weak = mem.recall("Maria zebra quantum violin Lisbon harbour", tiers="long_term")[0]
    assert strong.components["relevance"] == 1.0
    assert weak.components["relevance"] < 1.0


def test_reply_is_recalled_through_its_question_but_ranks_below_it():
    with memory(short_term_limit=2) as mem:
        mem.add_message("user", "Did you go to the pottery workshop?", name="Ada", when=at(3))
        mem.add_message("assistant", "Yes, it was the best afternoon!", name="Bot", when=at(3))
        mem.add_message("user", "Cooking tonight", when=at(1))
        hits = mem.recall("pottery workshop", tiers=("short_term", "episodic"))
    texts = [h.text for h in hits]
    assert texts[:2] == ["Did you go to the pottery workshop?", "Yes, it was the best afternoon!"]
    assert hits[0].components["own_match"] and not hits[1].components["own_match"]


def test_graph_hops_reach_what_no_named_entity_mentions():
    with memory() as mem:
        mem.add_triple("Biscuit", "owned_by", "Maria")
        mem.add_triple("Maria", "member_of", "Chess Club")
        mem.add_triple("Rex", "owned_by", "Tom")
        hits = mem.recall("tell me about Biscuit", tiers="entity")
        hop = next(h for h in hits if h.text.startswith("Chess Club"))
        assert hop.components["hop_from"] == "Biscuit" and hop.components["via"] == "member_of"
        assert hop.score < hits[0].score
        assert not any(h.text.startswith(("Rex", "Tom")) for h in hits)
        mem.config.ranking.hop_decay = 0.0
        assert not any(h.text.startswith("Chess Club") for h in mem.recall("tell me about Biscuit", tiers="entity"))


def test_graph_hops_stay_inside_the_user():
    with memory() as mem:
        mem.add_triple("Biscuit", "owned_by", "Maria")
        bob = mem.scoped(user_id="bob")
        bob.add_triple("Maria", "member_of", "Secret Society")
        assert not any("Secret" in h.text for h in mem.recall("tell me about Biscuit"))


def test_messages_of_the_speaker_the_query_names_rank_first():
    with memory() as mem:
        mem.add_message("user", "I started a pottery class", name="Maria", when=at(30))
        mem.add_message("user", "Cooking is fun", name="Maria", when=at(29.9))
        mem.add_message("user", "I started a pottery class too", name="Tom", when=at(20))
        mem.add_message("user", "Nice weather", name="Tom", when=at(19.9))
        hits = mem.recall("what class did Maria start?", tiers=("short_term", "episodic"))
        assert hits[0].components["speaker"] == "Maria" and hits[0].components["speaker_match"]
        tom = next(h for h in hits if h.text == "I started a pottery class too")
        assert not tom.components["speaker_match"]
        mem.config.ranking.speaker_boost = 0.0
        assert mem.recall("what class did Maria start?", tiers=("short_term", "episodic"))[0].score < hits[0].score


def test_fact_confidence_decays_unless_reinforced(clock):
    with UnifiedMemory(clock=clock) as mem:
        mem.remember("I am allergic to peanuts")
        fresh = mem.recall("peanuts", tiers="long_term")[0]
        assert fresh.components["confidence"] == 1.0
        clock.advance(days=180)
        old = mem.recall("peanuts", tiers="long_term")[0]
        assert old.components["confidence"] == pytest.approx(0.5, abs=1e-3)
        mem.config.ranking.confidence_weight = 0.0
        unweighted = mem.recall("peanuts", tiers="long_term")[0]
        assert old.score == pytest.approx(unweighted.score * (1 - 0.3 * 0.5), rel=1e-6)
        mem.config.ranking.confidence_weight = 0.3
        mem.remember("I am allergic to peanuts")  # stated again: reinforced
        assert mem.recall("peanuts", tiers="long_term")[0].components["confidence"] == 1.0
        mem.config.ranking.confidence_half_life_days = None
        clock.advance(days=3000)
        assert mem.recall("peanuts", tiers="long_term")[0].components["confidence"] == 1.0


def _moved(clock):
    from unified_memory import UnifiedMemory

    mem = UnifiedMemory(clock=clock, user_id="ada", short_term_limit=2)
    mem.add_turn("I'm Ada.", "Hi Ada!")
    mem.add_turn("I live in Lisbon.", "Nice.")
    clock.advance(days=30)
    mem.add_turn("I live in Berlin now.", "Big move!")
    mem.end_session()
    return mem


def test_the_users_own_name_in_a_question_reads_as_first_person(clock):
    with _moved(clock) as mem:
        hits = mem.recall("where does Ada live?", limit=3)
        assert hits[0].text != "I'm Ada."  # the name alone no longer wins
        assert any("Berlin" in h.text for h in hits)
        who = mem.recall("who is Ada?", limit=1)[0].text  # a name alone still counts: the user's node, named
        assert who in ("I'm Ada.", "Hi Ada!") or who.startswith("Ada (person; also: user)")


def test_a_former_home_and_its_turn_rank_below_the_current_one(clock):
    with _moved(clock) as mem:
        hits = [h for h in mem.recall("live", limit=10) if not h.text.startswith("Ada (person")]  # the user's
        lisbon = [h for h in hits if "Lisbon" in h.text]  # own card is current (it says "formerly lives in")
        assert lisbon and all(h.components["superseded"] for h in lisbon)  # the fact, its turn, the place
        # the current home ranks above every one of them (the turn keeps its own rank: evidence of the past)
        current = next(i for i, h in enumerate(hits) if "Berlin" in h.text and h.tier == "long_term")
        assert all(current < i for i, h in enumerate(hits) if "Lisbon" in h.text)


def test_hits_hold_plain_json_values_in_every_mode(clock):
    from scoring.embeddings import HashingEmbedder

    for mode in ("lexical", "embedding", "hybrid"):
        with UnifiedMemory(clock=clock, retrieval=mode, embedder=None if mode == "lexical" else HashingEmbedder(64)) as m:
            m.remember("I like green tea in Lisbon", metadata={"topic": "taste"})
            m.add_turn("Tea time with Maria in Lisbon", "nice")
            hits = m.recall("tea Lisbon")
            assert hits
            for hit in hits:
                assert type(hit.score) is float
                assert all(type(v) in (float, int, str, bool, type(None)) for v in hit.components.values())
                assert RecallHit.model_validate_json(hit.model_dump_json()) == hit


class TopicEmbedder:
    """One axis per topic word: texts on different topics are orthogonal (cosine 0, below any floor)."""

    TOPICS = ("peanuts", "jazz", "sister", "chess")
    name, dim = "topics-5", 5

    def embed(self, texts):
        import numpy as np

        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            axis = next((i for i, t in enumerate(self.TOPICS) if t in text.lower()), len(self.TOPICS))
            vectors[row, axis] = 1.0
        return vectors


@pytest.mark.parametrize("mode", ["embedding", "hybrid"])
def test_recall_does_not_pad_the_limit_with_unrelated_items(clock, mode):
    """Dense search ranks every item: those neither matching a word nor close in meaning are
    not hits (they used to fill the limit with score 0)."""
    with UnifiedMemory(clock=clock, retrieval=mode, embedder=TopicEmbedder()) as mem:
        mem.add_message("system", "You are a helpful assistant.")
        mem.remember("I'm allergic to peanuts")
        mem.remember("I love jazz")
        mem.add_turn("My sister lives in Porto", "Nice")
        hits = mem.recall("peanuts", limit=10)
        assert hits and all(h.components["relevance"] > 0 and h.score > 0 for h in hits)
        assert all("peanuts" in h.text for h in hits)
        assert mem.recall("chess", limit=10) == []  # a topic nothing is about


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_dropping_unrelated_items_changes_nothing_else(clock, monkeypatch, mode):
    """Only the zero-relevance candidates disappear: the other hits, their order and scores stay."""
    from unified_memory.retrieval import federation as recall

    with UnifiedMemory(clock=clock, retrieval=mode, embedder=TopicEmbedder()) as mem:
        mem.add_message("system", "You are a helpful assistant.")
        mem.remember("I'm allergic to peanuts")
        mem.add_turn("Peanuts are in the satay", "Noted")
        mem.add_turn("I love jazz", "Nice")
        mem.add_turn("My sister plays chess", "Fun")
        for query in ("peanuts", "jazz with my sister", "chess"):
            kept = [(h.id, h.score) for h in mem.recall(query, limit=50)]
            with monkeypatch.context() as patch:
                patch.setattr(recall, "_relevance_of", lambda hit: 1.0)
                padded = mem.recall(query, limit=50)
            assert kept == [(h.id, h.score) for h in padded if h.components["relevance"] > 0]
            assert mode == "lexical" or len(padded) > len(kept)
