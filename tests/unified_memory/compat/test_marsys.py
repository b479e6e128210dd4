"""The MARSYS facade: one test per feature of the seed (seeds/2-marsys-managed-memory.md)."""

from __future__ import annotations

import asyncio
import doctest
import json
from dataclasses import dataclass

import pytest

from unified_memory.compat import _marsys_conversation, _marsys_kg, marsys
from unified_memory.compat.marsys import (
    ActiveContextPolicyConfig,
    CompactionEvent,
    ConversationMemory,
    KGMemory,
    ManagedConversationMemory,
    ManagedMemoryConfig,
    MemoryManager,
    MemoryResetEvent,
    SummarizationConfig,
    ToolTruncationConfig,
)
from unified_memory.errors import ConfigError, MemoryValueError, NotFoundError, StorageError
from unified_memory.events import MemoryEvent
from unified_memory.types import Message

TOOL_CALL = {"id": "call_123", "type": "function",
             "function": {"name": "analyze_sales", "arguments": '{"quarter": "Q4"}'}}


def summary_model(messages):
    return "summary text"


def fill(memory, turns, size=5):
    for i in range(turns):
        memory.add(role="user", content=f"question {i} " * size)
        memory.add(role="assistant", content=f"answer {i} " * size)


class Bus:
    def __init__(self):
        self.events = []

    def emit(self, event):
        self.events.append(event)


def test_doctests_run():
    for module in (marsys, _marsys_conversation, _marsys_kg):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE).failed == 0


def test_add_returns_message_id():
    memory = ConversationMemory()
    mid = memory.add(role="user", content="Hello")
    assert isinstance(mid, str) and memory.retrieve_by_id(mid)["message_id"] == mid
    other = memory.add(message=Message(role="assistant", content="Hi there!"))
    assert other != mid and memory.retrieve_by_id(other)["content"] == "Hi there!"
    mine = memory.add(role="user", content="with my id", message_id="m-1")
    assert mine == "m-1"
    assert memory.add(message={"role": "user", "content": "a dict"}) in [m["message_id"] for m in memory.retrieve_all()]
    with pytest.raises(MemoryValueError):
        memory.add(role="user", content="x", message=Message(role="user", content="y"))

    @dataclass
    class MarsysMessage:  # the shape of marsys.agents.memory.Message
        role: str
        content: object = None
        message_id: str = "marsys-1"
        structured_data: dict | None = None

    assert memory.add(message=MarsysMessage("assistant", {"a": 1}, structured_data={"k": 2})) == "marsys-1"
    assert memory.retrieve_by_id("marsys-1") == {"role": "assistant", "content": {"a": 1}, "message_id": "marsys-1",
                                                 "structured_data": {"k": 2}}


def test_dict_and_list_content_round_trip():
    memory = ConversationMemory()
    mid = memory.add(role="assistant", content={"next_action": "call_tool", "args": [1, 2]},
                     structured_data={"plan": ["a", "b"]}, agent_calls=[{"agent": "Researcher"}])
    got = memory.retrieve_by_id(mid)
    assert got["content"] == {"next_action": "call_tool", "args": [1, 2]}
    assert got["structured_data"] == {"plan": ["a", "b"]} and got["agent_calls"] == [{"agent": "Researcher"}]
    parts = [{"type": "text", "text": "look at this"}]
    pid = memory.add(role="user", content=parts)
    assert memory.retrieve_by_id(pid)["content"] == parts
    llm = memory.get_messages()
    assert json.loads(llm[0]["content"]) == {"next_action": "call_tool", "args": [1, 2]}  # dicts go as JSON text
    assert llm[1]["content"] == parts  # content parts stay a list
    assert memory.conversation.get(mid).metadata["content_format"] == "json"


def test_update_changes_message():
    memory = ConversationMemory()
    mid = memory.add(role="assistant", content="draft", structured_data={"v": 1})
    memory.update(mid, content={"final": True}, structured_data={"v": 2})
    got = memory.retrieve_by_id(mid)
    assert got["content"] == {"final": True} and got["structured_data"] == {"v": 2}
    memory.update(mid, content="plain again")
    assert memory.retrieve_by_id(mid)["content"] == "plain again"
    with pytest.raises(NotFoundError):
        memory.update("nope", content="x")


def test_retrieve_all_puts_system_prompt_first():
    memory = ConversationMemory(description="You are a helpful assistant")
    fill(memory, 2)
    everything = memory.retrieve_all()
    assert everything[0] == {"role": "system", "content": "You are a helpful assistant", "message_id": "system"}
    assert [m["role"] for m in everything[1:]] == ["user", "assistant"] * 2
    assert all("message_id" in m for m in everything)
    assert [m["role"] for m in ConversationMemory().retrieve_all()] == []


def test_retrieve_recent():
    memory = ConversationMemory(description="sys")
    fill(memory, 3)
    recent = memory.retrieve_recent(n=2)
    assert [m["content"] for m in recent] == ["question 2 " * 5, "answer 2 " * 5]
    assert len(memory.retrieve_recent()) == 1 and memory.retrieve_recent(0) == []


def test_get_messages_for_llm():
    memory = ConversationMemory(description="sys")
    memory.add(role="user", content="Hello")
    assert memory.get_messages() == [{"role": "system", "content": "sys"}, {"role": "user", "content": "Hello"}]


def test_retrieve_by_id_missing_is_none():
    assert ConversationMemory().retrieve_by_id("message-uuid-here") is None


def test_retrieve_by_role():
    memory = ConversationMemory(description="sys")
    fill(memory, 4)
    users = memory.retrieve_by_role("user", n=3)
    assert [m["content"] for m in users] == [f"question {i} " * 5 for i in (1, 2, 3)]
    assert len(memory.retrieve_by_role("assistant")) == 4 and len(memory.retrieve_by_role("system")) == 1


def test_remove_by_id():
    memory = ConversationMemory()
    mid = memory.add(role="user", content="Hello")
    assert memory.remove_by_id(mid) is True
    assert memory.remove_by_id(mid) is False and memory.retrieve_all() == []


def test_reset_memory_keeps_system_prompt_and_emits_event():
    memory = ConversationMemory(description="System prompt")
    fill(memory, 2)
    bus = Bus()
    memory.set_event_context(agent_name="Researcher", event_bus=bus, session_id="run_123")
    memory.reset_memory()
    assert memory.retrieve_all() == [{"role": "system", "content": "System prompt", "message_id": "system"}]
    assert bus.events == [MemoryResetEvent(agent_name="Researcher", session_id="run_123", messages_cleared=4)]


def test_event_bus_may_be_async_or_callable():
    class AsyncBus:
        def __init__(self):
            self.events = []

        async def emit(self, event):
            self.events.append(event)

    memory = ConversationMemory()
    async_bus = AsyncBus()
    memory.set_event_context("A", async_bus, "s")
    memory.add(role="user", content="hi")
    memory.reset_memory()
    assert async_bus.events == [MemoryResetEvent("A", "s", 1)]

    async def inside_a_loop():
        memory.reset_memory()
        await asyncio.sleep(0)

    asyncio.run(inside_a_loop())
    assert len(async_bus.events) == 2
    seen = []
    memory.set_event_context("A", seen.append, None)
    memory.reset_memory()
    assert seen[0].session_id == memory.conversation.session_id
    with pytest.raises(TypeError):
        memory.set_event_context("A", 42)


def test_tool_call_example_from_the_seed():
    memory = ConversationMemory()
    memory.add(role="user", content="Analyze the quarterly sales data")
    memory.add(role="assistant", content="I'll analyze the data for you.")
    memory.add(role="assistant", content=None, tool_calls=[TOOL_CALL])
    memory.add(role="tool", content='{"total_sales": 1500000, "growth": "15%"}', tool_call_id="call_123",
               name="analyze_sales")
    llm = memory.get_messages()
    assert llm[2] == {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
    assert llm[3] == {"role": "tool", "content": '{"total_sales": 1500000, "growth": "15%"}',
                      "tool_call_id": "call_123", "name": "analyze_sales"}
    assert memory.conversation.pending_tool_calls == 0


def test_managed_threshold_and_target_formula():
    config = ManagedMemoryConfig(threshold_tokens=150000, image_token_estimate=800)
    assert config.compaction_target_tokens == 90000
    custom = ManagedMemoryConfig(threshold_tokens=120_000, active_context=ActiveContextPolicyConfig(
        mode="compaction", processor_order=["tool_truncation", "summarization", "backward_packing"],
        excluded_processors=[], min_reduction_ratio=0.25,
        tool_truncation=ToolTruncationConfig(max_tool_message_tokens=1200),
        summarization=SummarizationConfig(output_max_tokens=6000)))
    engine = custom.compaction_config()
    assert custom.compaction_target_tokens == engine.target() == 90_000
    assert engine.threshold() == 120_000 and engine.tool_truncation.max_tool_message_tokens == 1200
    with pytest.raises(ConfigError, match="threshold_tokens"):
        ManagedConversationMemory({"threshold_tokens": 0})
    with pytest.raises(ConfigError, match="unknown setting"):
        ManagedConversationMemory({"threshold": 5})


def test_managed_memory_compacts_above_threshold():
    memory = ManagedConversationMemory(ManagedMemoryConfig(threshold_tokens=200), description="sys",
                                       compaction_model=summary_model)
    fill(memory, 20)
    assert memory.conversation.tokens() <= 200
    llm = memory.get_messages()
    assert llm[0] == {"role": "system", "content": "sys"} and llm[1]["content"].endswith("summary text")


def test_reasoning_details_and_images_survive_compaction():
    policy = {"summarization": {"keep_recent_interactions": 2}, "excluded_processors": ["backward_packing"]}
    memory = ManagedConversationMemory({"threshold_tokens": 300, "active_context": policy},
                                       compaction_model=summary_model)
    fill(memory, 5)
    memory.add(role="user", content="think about it")
    mid = memory.add(role="assistant", content="thinking done",
                     reasoning_details=[{"type": "thought", "signature": "x1"}])
    memory.add(role="user", content="next " * 200)  # over the threshold: compacts
    assert memory.conversation.compactions == 1 and memory.conversation.summary == "summary text"
    assert memory.retrieve_by_id(mid)["reasoning_details"] == [{"type": "thought", "signature": "x1"}]
    assert {"role": "assistant", "content": "thinking done",
            "reasoning_details": [{"type": "thought", "signature": "x1"}]} in memory.get_messages()
    memory2 = ManagedConversationMemory({"threshold_tokens": 1200}, compaction_model=summary_model)
    fill(memory2, 30)
    memory2.add(role="user", content="look", images=["https://example.org/cat.png"])  # ~800 tokens: compacts
    assert memory2.conversation.compactions > 0
    memory2.add(role="assistant", content="a cat", reasoning_details=[{"type": "thought", "signature": "s"}])
    kept = memory2.get_messages()
    assert {"role": "user", "content": "look", "images": ["https://example.org/cat.png"]} in kept
    assert kept[-1]["reasoning_details"] == [{"type": "thought", "signature": "s"}]


def test_sliding_window_mode_keeps_raw_history():
    memory = ManagedConversationMemory({"threshold_tokens": 200, "active_context": {"mode": "sliding_window"}},
                                       compaction_model=summary_model)
    fill(memory, 20)
    assert len(memory.retrieve_all()) == 40  # nothing rewritten
    window = memory.get_messages()
    assert len(window) < 40 and window[-1]["content"] == "answer 19 " * 5
    assert memory.conversation.summary is None


def test_excluded_processors():
    memory = ManagedConversationMemory({"threshold_tokens": 200,
                                        "active_context": {"excluded_processors": ["summarization"]}},
                                       compaction_model=lambda m: pytest.fail("summarization is excluded"))
    fill(memory, 20)
    assert memory.conversation.summary is None and memory.conversation.compactions > 0
    runs = [e["processors_run"] for e in memory.conversation.get_memory_trace() if e["event"] == "compaction"]
    assert all("summarization" not in r for r in runs)


def test_compaction_events_started_completed():
    memory = ManagedConversationMemory({"threshold_tokens": 200}, compaction_model=summary_model)
    bus = Bus()
    memory.set_event_context(agent_name="Researcher", event_bus=bus, session_id="run_123")
    fill(memory, 10)
    compaction = [e for e in bus.events if isinstance(e, CompactionEvent)]
    assert [e.status for e in compaction[:2]] == ["started", "completed"]
    assert compaction[1].stats["messages_compacted"] > 0 and compaction[1].agent_name == "Researcher"
    assert compaction[1].session_id == "run_123" and compaction[1].error is None


def test_compaction_event_failed_keeps_conversation_whole():
    def broken(messages, system_prompt):
        raise RuntimeError("model down")

    memory = ManagedConversationMemory({"threshold_tokens": 200}, compact_fn=broken)
    bus = Bus()
    memory.set_event_context("Researcher", bus, "run_123")
    fill(memory, 10)
    assert len(memory.retrieve_all()) == 20 and memory.conversation.summary is None
    failed = [e for e in bus.events if isinstance(e, CompactionEvent) and e.status == "failed"]
    assert failed and "model down" in failed[0].error


def test_trim_events_are_forwarded_as_memory_events():
    memory = ConversationMemory(max_messages=2)
    bus = Bus()
    memory.set_event_context("A", bus, "s")
    fill(memory, 2)
    assert any(isinstance(e, MemoryEvent) and e.kind == "trim" for e in bus.events)


def fake_extraction_model(messages):
    return json.dumps({"facts": [], "entities": [{"name": "Eiffel Tower", "type": "place", "attributes": {}}],
                       "triples": [{"subject": "Eiffel Tower", "predicate": "located_in", "object": "Paris"}]})


def test_kg_add_fact():
    kg = KGMemory(description="Initial context")
    tid = kg.add_fact(role="user", subject="Paris", predicate="is capital of", obj="France")
    assert kg.facts() == [{"subject": "Paris", "predicate": "is_capital_of", "object": "France", "role": "user",
                           "id": tid}]
    llm = kg.get_messages()
    assert llm[0] == {"role": "system", "content": "Initial context"}
    assert llm[1] == {"role": "system", "content": "Known facts:\n- Paris is capital of France"}


def test_kg_extraction_with_a_model():
    kg = KGMemory(model=fake_extraction_model)
    mid = kg.add(role="user", content="The Eiffel Tower is in Paris.")
    assert kg.retrieve_by_id(mid)["content"] == "The Eiffel Tower is in Paris."
    assert [(f["subject"], f["predicate"], f["object"], f["role"]) for f in kg.facts()] == [
        ("Eiffel Tower", "located_in", "Paris", "user")]
    kg.add(role="assistant", content="Indeed.")  # only user messages are extracted by default
    assert len(kg.facts()) == 1


def test_kg_extraction_without_a_model():
    kg = KGMemory()
    kg.add(role="user", content="My sister Maria lives in Lisbon.")
    triples = {(f["subject"], f["predicate"], f["object"]) for f in kg.facts()}
    assert ("Maria", "lives_in", "Lisbon") in triples


@pytest.mark.parametrize("memory_type, cls", [("conversation_history", ConversationMemory),
                                              ("managed_conversation", ManagedConversationMemory),
                                              ("kg", KGMemory)])
def test_memory_manager_for_each_type(memory_type, cls):
    manager = MemoryManager(memory_type=memory_type, description="System prompt",
                            memory_config=ManagedMemoryConfig(threshold_tokens=100000)
                            if memory_type == "managed_conversation" else None,
                            model=fake_extraction_model if memory_type == "kg" else None)
    assert type(manager.memory) is cls
    manager.add(role="user", content="Hello")
    assert manager.get_messages()[0] == {"role": "system", "content": "System prompt"}
    assert manager.retrieve_recent(1)[0]["content"] == "Hello"
    with pytest.raises(AttributeError):
        _ = manager.no_such_method


def test_memory_manager_managed_uses_model_for_compaction():
    manager = MemoryManager(memory_type="managed_conversation", memory_config={"threshold_tokens": 200},
                            model=summary_model)
    fill(manager, 20)
    assert manager.conversation.summary == "summary text"


def test_memory_manager_rejects_unknown_type():
    with pytest.raises(MemoryValueError, match="memory_type.*conversation_history, managed_conversation, kg"):
        MemoryManager(memory_type="vector")


@pytest.mark.parametrize("memory_type", ["conversation_history", "managed_conversation", "kg"])
def test_save_and_load_with_additional_state(tmp_path, memory_type):
    path = tmp_path / "memory.json"
    manager = MemoryManager(memory_type=memory_type, description="System prompt")
    manager.add(role="user", content="Analyze the quarterly sales data")
    manager.add(role="assistant", content={"plan": ["fetch"]}, structured_data={"step": 1},
                reasoning_details=[{"type": "thought", "signature": "s"}])
    manager.add(role="assistant", content=None, tool_calls=[TOOL_CALL])
    manager.add(role="tool", content="{}", tool_call_id="call_123", name="analyze_sales")
    if memory_type == "kg":
        manager.add_fact(role="user", subject="Paris", predicate="is capital of", obj="France")
    before = manager.retrieve_all()
    manager.save_to_file(str(path), additional_state={"planning": {"steps": [1, 2]}})
    assert [p.name for p in tmp_path.iterdir()] == ["memory.json"]  # no temp file left
    fresh = MemoryManager(memory_type=memory_type)
    bus = Bus()
    fresh.set_event_context("A", bus, "s")
    assert fresh.load_from_file(str(path)) == {"planning": {"steps": [1, 2]}}
    assert fresh.retrieve_all() == before
    assert fresh.conversation.to_dict()["messages"] == manager.conversation.to_dict()["messages"]
    if memory_type == "kg":
        assert [f["subject"] for f in fresh.facts()] == ["Paris"]
    fresh.reset_memory()  # events still reach the bus after loading
    assert bus.events and isinstance(bus.events[-1], MemoryResetEvent)


def test_load_corrupt_file_names_file_and_line(tmp_path):
    path = tmp_path / "memory.json"
    path.write_text('{"format": "unified-memory.marsys",\n "memory_type": oops}')
    manager = MemoryManager()
    with pytest.raises(StorageError, match=r"memory\.json: not valid JSON at line 2"):
        manager.load_from_file(path)
    with pytest.raises(NotFoundError):
        manager.load_from_file(tmp_path / "missing.json")
    other = tmp_path / "other.json"
    MemoryManager(memory_type="kg").save_to_file(other)
    with pytest.raises(MemoryValueError, match="memory_type"):
        manager.load_from_file(other)
