"""CrewAI's memory (unified_memory.integrations.crewai.CrewMemory) with the real crewai, offline, on
the three memories (a SQLite file, PostgreSQL, the service): what a crew asks of its memory
(save after a task, recall before the next, its agents' memory tools, ``reset``), CrewAI's
scope / category / private filters, and that only the adapter's own facts are ever forgotten.

CrewAI pins ``mcp<2`` and our server extra needs ``mcp>=2.3``: these tests run in an environment
of their own (see docs/integrations.md), where the service runs without its MCP endpoint."""

from __future__ import annotations

import copy
import threading

import pytest

pytest.importorskip("crewai", reason="needs the crewai extra (installed apart from the server extra: CrewAI pins mcp<2)")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.events.event_bus import crewai_event_bus  # noqa: E402
from crewai.events.types.memory_events import MemoryQueryCompletedEvent, MemorySaveCompletedEvent  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402
from crewai.memory.memory_scope import MemorySlice  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from unified_memory import MemoryTypeError, MemoryValueError, NotFoundError, UnifiedMemory  # noqa: E402
from unified_memory.integrations.crewai import NAME_KEY, RECORD_KEY, CrewMemory  # noqa: E402


@pytest.fixture(autouse=True)
def _crewai_offline(monkeypatch, tmp_path):
    """No telemetry, no traces, no key, CrewAI's own files in the test's folder."""
    for name, value in {"CREWAI_DISABLE_TELEMETRY": "true", "OTEL_SDK_DISABLED": "true",
                        "CREWAI_TRACING_ENABLED": "false", "CREWAI_STORAGE_DIR": str(tmp_path / "crewai")}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


class CannedLLM(BaseLLM):
    """A stand-in model: answers each call with the next canned reply, and keeps the prompts."""

    replies: list[str] = []
    prompts: list[str] = []

    def call(self, messages, tools=None, callbacks=None, available_functions=None, from_task=None,
             from_agent=None, response_model=None):
        text = messages if isinstance(messages, str) else "\n".join(str(m.get("content")) for m in messages)
        self.prompts.append(text)
        reply = self.replies.pop(0) if self.replies else "Nothing to add."
        return reply if reply.startswith("{") else f"Thought: I now know the final answer\nFinal Answer: {reply}"

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


def own_facts(store):
    return [f for f in store.facts(include_inactive=True) if (f.metadata or {}).get(NAME_KEY)]


def test_remember_stores_a_fact_of_the_user_with_crewais_fields(make_memory):
    store = make_memory()
    memory = CrewMemory(memory=store)
    record = memory.remember("We chose PostgreSQL for the billing service", scope="/project",
                             categories=["decision"], metadata={"ticket": "B-12"}, importance=0.8,
                             source="alice", agent_role="Architect")
    [fact] = store.facts()
    assert (fact.text, fact.importance, record.id, record.scope) == (
        "We chose PostgreSQL for the billing service", 0.8, fact.id, "/project")
    assert fact.metadata == {"ticket": "B-12", NAME_KEY: "crewai", RECORD_KEY: {
        "scope": "/project", "categories": ["decision"], "source": "alice", "private": False,
        "agent_role": "Architect"}}
    assert memory.remember("We chose PostgreSQL for the billing service").id == fact.id  # reinforced, not twice
    matches = memory.recall("billing service database", limit=3)
    hits = store.recall("billing service database", limit=3)
    assert [m.record.id for m in matches] == [h.id for h in hits] and matches[0].record.id == fact.id
    assert matches[0].score == pytest.approx(hits[0].score, abs=0.05) and 0 < matches[0].score <= 1.5
    found = matches[0].record
    assert (found.content, found.scope, found.categories, found.metadata, found.source) == (
        fact.text, "/project", ["decision"], {"ticket": "B-12"}, "alice")
    assert matches[0].match_reasons == ["long_term"] and "score=" in matches[0].format()


def test_recall_reads_the_whole_memory_and_a_scope_or_category_only_what_crewai_stored(make_memory):
    store = make_memory()
    store.remember("I'm allergic to peanuts")  # said elsewhere: another app, a chat
    memory = CrewMemory(memory=store)
    memory.remember("Peanut sauce recipe tested for allergens", scope="/kitchen", categories=["recipe"])
    everything = [m.record.content for m in memory.recall("peanuts allergic", limit=10)]
    assert "I'm allergic to peanuts" in everything and "Peanut sauce recipe tested for allergens" in everything
    assert [m.record.content for m in memory.recall("peanuts allergens", scope="/kitchen")] == [
        "Peanut sauce recipe tested for allergens"]
    assert [m.record.content for m in memory.scope("/kitchen").recall("peanut allergens")] == [
        "Peanut sauce recipe tested for allergens"]  # CrewAI's scoped view
    assert [m.record.content for m in memory.recall("peanuts", categories=["recipe"])] == [
        "Peanut sauce recipe tested for allergens"]
    assert memory.recall("peanuts", categories=["other"]) == [] and memory.recall("   ") == []
    memory.remember("The safe code is 4711", private=True, source="alice")
    assert "The safe code is 4711" not in [m.record.content for m in memory.recall("safe code")]
    assert "The safe code is 4711" not in [m.record.content for m in memory.recall("safe code", source="bob")]
    assert [m.record.content for m in memory.recall("safe code", source="alice")][:1] == ["The safe code is 4711"]
    assert "The safe code is 4711" in [m.record.content for m in memory.recall("safe code", include_private=True)]
    assert all(m.score >= 0.5 for m in CrewMemory(memory=store, score_threshold=0.5).recall("peanuts"))


def test_reset_and_forget_touch_only_what_this_adapter_stored(make_memory):
    store = make_memory()
    store.remember("I live in Lisbon")
    other = CrewMemory(memory=store, name="other-crew")
    other.remember("Other crew note about Lisbon")
    memory = CrewMemory(memory=store)
    memory.remember("Crew note about the Lisbon trip", scope="/trips/lisbon", categories=["travel"])
    memory.remember("Crew note about the budget", scope="/budget", categories=["money"])
    memory.remember("Crew note about the hotel", scope="/trips/porto", categories=["travel"])
    assert memory.list_scopes("/") == ["/budget", "/trips"] and memory.list_scopes("/trips") == [
        "/trips/lisbon", "/trips/porto"]
    info = memory.info("/trips")
    assert (info.record_count, info.categories, info.child_scopes) == (2, ["travel"], ["/trips/lisbon", "/trips/porto"])
    assert memory.list_categories() == {"travel": 2, "money": 1} and "/trips (2 records)" in memory.tree("/trips")
    assert memory.forget(scope="/trips/lisbon") == 1
    assert memory.forget(categories=["money"]) == 1
    assert [r.content for r in memory.list_records()] == ["Crew note about the hotel"]
    Crew(agents=[agent := Agent(role="Clerk", goal="File", backstory="A clerk.", llm=CannedLLM(model="canned"))],
         tasks=[Task(description="File it", expected_output="Filed", agent=agent)],
         memory=memory).reset_memories(command_type="memory")  # CrewAI's reset
    assert own_facts(store) == [f for f in own_facts(store) if f.metadata[NAME_KEY] == "other-crew"]
    assert sorted(f.text for f in store.facts()) == ["I live in Lisbon", "Other crew note about Lisbon"]
    assert memory.info("/").record_count == 0 and other.info("/").record_count == 1


def test_remember_many_saves_in_the_background_and_recall_waits_for_it(make_memory):
    store = make_memory()
    memory = CrewMemory(memory=store, importance=0.3)
    assert memory.remember_many(["Maria leads the data team", "The launch is on Friday"], agent_role="PM") == []
    assert {m.record.content for m in memory.recall("Maria data team launch Friday")} >= {
        "Maria leads the data team", "The launch is on Friday"}
    assert {f.importance for f in own_facts(store)} == {0.3}
    with pytest.raises(MemoryTypeError) as caught:
        memory.remember_many(["fine", 3])  # checked before anything is stored in the background
    assert caught.value.field == "contents[1]" and len(own_facts(store)) == 2
    assert CrewMemory(memory=store, read_only=True).remember("Not stored") is None
    assert len(own_facts(store)) == 2


def test_each_user_has_their_own_memory(make_memory, memory_kind):
    ada_store, bob_store = make_memory("ada"), make_memory("bob")
    ada, bob = CrewMemory(memory=ada_store), CrewMemory(memory=bob_store)
    ada.remember("I keep bees on the roof")
    assert bob.recall("bees roof") == [] and bob.info("/").record_count == 0
    bob.reset()
    assert [m.record.content for m in ada.recall("bees roof")] == ["I keep bees on the roof"]
    if memory_kind != "remote":  # a service key is for its own user; a local memory can be scoped
        as_bob = CrewMemory(memory=ada_store, user_id="bob")
        assert as_bob.memory.user_id == "bob" and as_bob.recall("bees roof") == []


def test_a_crew_saves_after_its_task_and_a_later_crew_recalls_it(make_memory):
    store = make_memory()
    memory = CrewMemory(memory=store)
    llm = CannedLLM(model="canned", replies=["The guest Ada is allergic to peanuts.",
                                             "Pasta with tomato sauce, without peanuts."])
    concierge = Agent(role="Concierge", goal="Look after the guest", backstory="A careful concierge.", llm=llm,
                      allow_delegation=False)
    with crewai_event_bus.scoped_handlers():
        seen: list[str] = []
        done = threading.Event()

        @crewai_event_bus.on(MemorySaveCompletedEvent)
        def saved(source, event):
            seen.append(event.value)
            done.set()

        @crewai_event_bus.on(MemoryQueryCompletedEvent)
        def queried(source, event):
            seen.append("query")

        note = Task(description="Note what the guest said: I'm allergic to peanuts.", expected_output="A note.",
                    agent=concierge)
        assert Crew(agents=[concierge], tasks=[note], memory=memory).kickoff().raw == (
            "The guest Ada is allergic to peanuts.")
        assert done.wait(10) and "query" in seen
    [fact] = own_facts(store)
    assert fact.text == ("Task: Note what the guest said: I'm allergic to peanuts.\n"
                         "Result: The guest Ada is allergic to peanuts.")
    assert fact.metadata[RECORD_KEY]["agent_role"] == "Concierge"
    dinner = Task(description="Suggest a dinner for the guest, mind the peanuts.", expected_output="A dinner.",
                  agent=concierge)
    assert Crew(agents=[concierge], tasks=[dinner], memory=memory).kickoff().raw == (
        "Pasta with tomato sauce, without peanuts.")
    prompt = llm.prompts[-1]
    assert "Relevant memories:" in prompt and "Result: The guest Ada is allergic to peanuts." in prompt
    assert "search_memory" in prompt and "save_to_memory" in prompt  # CrewAI's memory tools, over ours
    assert len(own_facts(store)) == 2


def test_extract_memories_keeps_the_task_and_result_or_asks_crewais_model_when_given():
    with UnifiedMemory() as store:
        raw = ("Task: Plan the offsite\nfor the team\nAgent: Planner\nExpected result: A plan.\n"
               "Result: Thought: let me think\nFinal Answer: Lisbon, 3-5 June.")
        assert CrewMemory(memory=store).extract_memories(raw) == [
            "Task: Plan the offsite\nfor the team\nResult: Lisbon, 3-5 June."]
        assert CrewMemory(memory=store).extract_memories("Input: hi\nAgent: Bot\nResult: Hello!") == [
            "Input: hi\nResult: Hello!"]
        assert CrewMemory(memory=store).extract_memories("A plain note.  ") == ["A plain note."]
        assert CrewMemory(memory=store).extract_memories(" \n") == []
        llm = CannedLLM(model="canned", replies=['{"memories": ["The offsite is in Lisbon", "It is on 3-5 June"]}'])
        assert CrewMemory(memory=store, llm=llm).extract_memories(raw) == [
            "The offsite is in Lisbon", "It is on 3-5 June"]


def test_a_copy_shares_the_memory_and_views_and_slices_go_through_the_adapter():
    with UnifiedMemory() as store:
        memory = CrewMemory(memory=store)
        copied = copy.deepcopy(memory)
        assert copied.memory is store and copied is not memory and copied.name == memory.name
        agent = Agent(role="Clerk", goal="File", backstory="A clerk.", llm=CannedLLM(model="canned"))
        crew = Crew(agents=[agent], tasks=[Task(description="File it", expected_output="Filed", agent=agent)],
                    memory=memory)
        assert crew.copy()._memory is memory  # kickoff_for_each's copies share it
        memory.scope("/team").remember("The team prefers short meetings")
        assert [r.scope for r in copied.list_records()] == ["/team"]
        view = MemorySlice(memory=memory, scopes=["/team"], read_only=True)
        assert view.remember("Not stored", scope="/team") is None
        assert [m.record.content for m in view.recall("short meetings")] == ["The team prefers short meetings"]


def test_update_and_a_vector_search_say_what_to_do_instead():
    with UnifiedMemory() as store:
        memory = CrewMemory(memory=store)
        record = memory.remember("The office is on the 4th floor")
        with pytest.raises(MemoryValueError, match="forget it and remember") as caught:
            memory.update(record.id, content="The office is on the 5th floor")
        assert caught.value.field == "record_id" and store.facts()[0].text == "The office is on the 4th floor"
        with pytest.raises(NotFoundError):
            memory.update("fact_missing", content="x")
        with pytest.raises(MemoryValueError) as caught:
            memory._storage.search([0.1, 0.2])
        assert caught.value.field == "query_embedding"


def test_bad_arguments_are_the_librarys_errors_naming_the_field():
    with UnifiedMemory() as store:
        for kwargs, error, field in [(dict(memory=3), MemoryTypeError, "memory"),
                                     (dict(), MemoryValueError, "memory"),
                                     (dict(memory=store, user_id=""), MemoryValueError, "user_id"),
                                     (dict(memory=store, name=" x"), MemoryValueError, "name"),
                                     (dict(memory=store, tiers=["facts"]), MemoryValueError, "tiers"),
                                     (dict(memory=store, score_threshold="high"), MemoryTypeError, "score_threshold"),
                                     (dict(memory=store, importance=1.5), MemoryValueError, "importance"),
                                     (dict(memory=store, read_only="maybe"), MemoryValueError, "read_only"),
                                     (dict(memory=store, storage_path="x"), MemoryValueError, "storage_path")]:
            with pytest.raises(error) as caught:
                CrewMemory(**kwargs)
            assert caught.value.field == field
        memory = CrewMemory(memory=store)
        for call, error, field in [(lambda: memory.remember(3), MemoryTypeError, "content"),
                                   (lambda: memory.remember("  "), MemoryValueError, "content"),
                                   (lambda: memory.remember("x", categories="a"), MemoryTypeError, "categories"),
                                   (lambda: memory.remember("x", metadata={NAME_KEY: 1}), MemoryValueError, "metadata"),
                                   (lambda: memory.remember("x", importance=2), MemoryValueError, "importance"),
                                   (lambda: memory.remember("x", private="yes"), MemoryTypeError, "private"),
                                   (lambda: memory.remember_many("one text"), MemoryTypeError, "contents"),
                                   (lambda: memory.recall(None), MemoryTypeError, "query"),
                                   (lambda: memory.recall("x", limit=0), MemoryValueError, "limit"),
                                   (lambda: memory.recall("x", depth="deeper"), MemoryValueError, "depth"),
                                   (lambda: memory.extract_memories(b"x"), MemoryTypeError, "content")]:
            with pytest.raises(error) as caught:
                call()
            assert caught.value.field == field
        assert store.facts() == []


_SCOPES = st.lists(st.lists(st.sampled_from(["a", "ab", "b"]), min_size=0, max_size=3).map(
    lambda parts: "/" + "/".join(parts)), min_size=1, max_size=6)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scopes=_SCOPES, prefix=st.sampled_from(["/", "/a", "/ab", "/a/b", "/a/ab"]))
def test_counts_listings_and_resets_follow_the_scope_paths(scopes, prefix):
    """Whatever the scopes: a prefix covers itself and what lies below it (``/a`` not ``/ab``), the
    child scopes are the next path parts, and a reset under a prefix forgets exactly what it covers."""
    def under(scope: str, root: str) -> bool:
        return root == "/" or scope == root or scope.startswith(root + "/")

    with UnifiedMemory() as store:
        memory = CrewMemory(memory=store)
        for i, scope in enumerate(scopes):
            memory.remember(f"note number {i} kept at {scope}", scope=scope)
        assert memory._storage.count(prefix) == sum(under(s, prefix) for s in scopes)
        children = {prefix.rstrip("/") + "/" + s[len(prefix.rstrip("/")) + 1:].split("/")[0]
                    for s in scopes if s != prefix and under(s, prefix)}
        assert memory.list_scopes(prefix) == sorted(children)
        memory.reset(scope=prefix)
        assert sorted(r.scope for r in memory.list_records()) == sorted(s for s in scopes if not under(s, prefix))


def test_the_example_crew_remembers_across_runs(capsys, example):
    """``examples/crewai_agent.py`` runs offline: Tuesday's crew plans with what Monday's noted."""
    module = example("crewai_agent")
    assert module.main(["crewai_agent.py"]) == 0
    out = capsys.readouterr().out
    assert "monday> The guest Ada is allergic to peanuts\n  Noted: The guest Ada is allergic to peanuts" in out
    assert ("tuesday> Plan a dinner for Ada: what is she allergic to?\n"
            "  From memory: The guest Ada is allergic to peanuts") in out
