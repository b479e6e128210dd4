"""unified_memory.testing.internals (issue 38): what is under a memory, for tests that must look there.

Each part is the memory's own live object (what the API wrote is there, what is planted there
the API reads), shared by its scoped views; anything but a UnifiedMemory is refused.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiers.episodic import EpisodicLog
from tiers.facts.long_term import LongTermFacts
from tiers.graph.entities import EntityGraph
from tiers.maintenance.ingested import IngestedKeys
from tiers.short_term import ShortTermWindow
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory
from unified_memory.errors import MemoryTypeError
from unified_memory.extraction.summarizers import ExtractiveSummarizer
from unified_memory.testing import FakeEmbedder, MemoryInternals, internals


def test_the_parts_are_the_memorys_own(clock):
    with UnifiedMemory(user_id="ada", clock=clock, retrieval="lexical", short_term_limit=2) as mem:
        fact = mem.remember("I keep bees on the roof")
        mem.add_turn("I live in Lisbon", "Nice!")
        inner = internals(mem)
        assert isinstance(inner, MemoryInternals) and isinstance(inner.storage, Storage)
        stored = sorted(r[0] for r in inner.storage.execute("SELECT id FROM facts WHERE user_id = ?", ["ada"]).fetchall())
        assert fact in stored and stored == sorted(f.id for f in mem.facts())  # what the API wrote
        assert isinstance(inner.facts, LongTermFacts) and isinstance(inner.log, EpisodicLog)
        assert isinstance(inner.graph, EntityGraph) and isinstance(inner.window, ShortTermWindow)
        assert inner.window.messages(inner.scope) == mem.window()
        assert (inner.scope.user_id, inner.scope.agent_id, inner.scope.session_id) == ("ada", "", "")
        assert inner.dense is None  # lexical retrieval: no vectors
        assert isinstance(inner.ingested, IngestedKeys) and inner.ingested.count() == 0


def test_a_row_planted_through_the_storage_is_one_the_memory_reads(clock):
    with UnifiedMemory(user_id="ada", clock=clock, retrieval="lexical") as mem:
        mem.remember("I keep bees")
        storage = internals(mem).storage
        with storage.atomic():
            storage.execute("UPDATE facts SET importance = 0.125 WHERE user_id = 'ada'")
        assert [f.importance for f in mem.facts()] == [0.125]


def test_scoped_views_share_the_parts_and_keep_their_scope(clock):
    with UnifiedMemory(user_id="ada", clock=clock, retrieval="lexical") as mem:
        ada, bob = internals(mem), internals(mem.scoped(user_id="bob", session_id="s1"))
        assert bob.storage is ada.storage and bob.facts is ada.facts and bob.window is ada.window
        assert (bob.scope.user_id, bob.scope.session_id) == ("bob", "s1")
        assert ada.scope.user_id == "ada"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=st.sampled_from(["ada", "bob", "zoe-1"]), agent=st.sampled_from([None, "helper"]),
       session=st.sampled_from([None, "s1", "s-2"]))
def test_the_scope_is_the_views(user, agent, session):
    with UnifiedMemory(retrieval="lexical") as mem:
        view = mem.scoped(user_id=user, agent_id=agent, session_id=session)
        scope = internals(view).scope
        assert (scope.user_id, scope.agent_id or None, scope.session_id or None) == (
            view.user_id, view.agent_id, view.session_id)


def test_the_vectors_are_the_ones_recall_searches(clock):
    with UnifiedMemory(user_id="ada", clock=clock, retrieval="hybrid", embedder=FakeEmbedder()) as mem:
        fact = mem.remember("The spare key is under the blue flowerpot")
        assert mem.recall("spare key flowerpot", tiers="long_term")[0].id == fact
        dense = internals(mem).dense
        assert dense is not None and "facts" in dense.partitions
        assert any(key.startswith(fact) for key in dense.index.ids("facts/ada"))


def test_the_summarizer_is_the_one_plugged_in_and_its_memory_is_readable(clock):
    own = ExtractiveSummarizer()
    with UnifiedMemory(clock=clock, retrieval="lexical", short_term_limit=2, summarizer=own) as mem:
        assert internals(mem).summarizer is own
        mem.add_turn("My locker code is 4711", "Noted.")
        mem.add_turn("Thanks!", "Anytime.")  # the first turn leaves the window: summarised
        assert "4711" in mem.summary() and mem.summary() in own.remembered
        mem.forget()
        assert own.remembered == []
    with UnifiedMemory(retrieval="lexical") as mem:
        assert isinstance(internals(mem).summarizer, ExtractiveSummarizer)  # the default


def test_the_ingested_keys_are_the_ones_ingest_records(clock, tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps([{"role": "user", "content": "I keep bees"}, {"role": "assistant", "content": "Nice"}]))
    with UnifiedMemory(user_id="ada", clock=clock, retrieval="lexical") as mem:
        assert mem.ingest(path).messages_added == 2
        assert internals(mem).ingested.count("ada") == 2 and internals(mem).ingested.count("bob") == 0


@pytest.mark.parametrize("not_a_memory", [None, "memory.db", object(), MemoryInternals])
def test_anything_but_a_memory_is_refused(not_a_memory):
    with pytest.raises(MemoryTypeError, match="^memory: expected UnifiedMemory") as caught:
        internals(not_a_memory)
    assert caught.value.field == "memory"
