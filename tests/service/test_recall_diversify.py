"""``recall(..., diversify=False)``: the hits ranked by relevance alone, with no maximal marginal
relevance against restatements, on a local memory and through the service (sync and async);
the default keeps pushing restatements down."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unified_memory import MemoryTypeError, RemoteMemory, UnifiedMemory
from unified_memory.remote import wire

QUERY = "deploy status ready"
TEXTS = ["The deploy is ready.", "Ready.", "The deploy status is ready."]
NOON = 1_700_000_000.0


def memory(**options: object) -> UnifiedMemory:
    return UnifiedMemory(retrieval="lexical", extract_on_write=False, clock=lambda: NOON, **options)


def ranked(hits: list) -> list[tuple[str, float]]:
    return [(h.text, h.score) for h in hits]


def test_a_restatement_is_pushed_down_unless_diversify_is_off():
    with memory() as mem:  # three turns of a conversation
        mem.add_messages([{"role": "user", "content": text} for text in TEXTS])
        default = mem.recall(QUERY)
        plain = mem.recall(QUERY, diversify=False)
    assert [h.text for h in default] == ["The deploy status is ready.", "Ready.", "The deploy is ready."]
    assert default[2].components["redundancy_penalty"] > 0  # two of its three words are the first's
    assert [h.text for h in plain] == ["The deploy status is ready.", "The deploy is ready.", "Ready."]
    assert not any("redundancy_penalty" in h.components for h in plain)
    assert [h.score for h in plain] == sorted((h.score for h in plain), reverse=True)


WORDS = st.sampled_from(["deploy", "status", "ready", "the", "build", "green", "is"])


@settings(max_examples=25, deadline=None)
@given(texts=st.lists(st.lists(WORDS, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=8, unique=True))
def test_diversify_off_ranks_as_a_memory_without_diversity(texts):
    """Whatever the texts, ``diversify=False`` gives the hits (and scores) of a memory whose
    ``RankingConfig.diversity`` is 0, best first."""
    with memory() as mem, memory(ranking={"diversity": 0.0}) as flat:
        mem.remember_many(texts)
        flat.remember_many(texts)
        plain = mem.recall(QUERY, limit=10, tiers="long_term", diversify=False)
        expected = flat.recall(QUERY, limit=10, tiers="long_term")
    assert sorted(ranked(plain)) == sorted(ranked(expected))
    assert [h.score for h in plain] == sorted((h.score for h in plain), reverse=True)
    assert not any("redundancy_penalty" in h.components for h in plain)


def test_diversify_must_be_a_bool():
    with memory() as mem:
        for call in (lambda: mem.recall(QUERY, diversify="no"), lambda: asyncio.run(mem.arecall(QUERY, diversify=1))):
            with pytest.raises(MemoryTypeError) as caught:
                call()
            assert caught.value.field == "diversify"
    with pytest.raises(MemoryTypeError) as caught:
        wire.recall(QUERY, limit=1, tiers=None, days=None, where=None, as_of=None, diversify=None)
    assert caught.value.field == "diversify"
    # sent only when off: a service that predates the option answers the default as before
    assert "diversify" not in wire.recall(QUERY, limit=1, tiers=None, days=None, where=None, as_of=None).json
    assert wire.recall(QUERY, limit=1, tiers=None, days=None, where=None, as_of=None,
                       diversify=False).json["diversify"] is False


@pytest.mark.slow
def test_the_service_ranks_as_the_local_memory(service):
    key = service.create_key("ada")
    with RemoteMemory(service.url, key, user_id="ada") as remote:
        remote.add_messages([{"role": "user", "content": text} for text in TEXTS], extract=False)
        default = remote.recall(QUERY)
        plain = remote.recall(QUERY, diversify=False)
        also = asyncio.run(remote.arecall(QUERY, diversify=False))
    assert [h.text for h in default] == ["The deploy status is ready.", "Ready.", "The deploy is ready."]
    assert [h.text for h in plain] == [h.text for h in also] == [
        "The deploy status is ready.", "The deploy is ready.", "Ready."]
    assert not any("redundancy_penalty" in h.components for h in plain + also)
