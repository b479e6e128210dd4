"""lauren-ai's ShortTermMemory and conversation store, as documented in its seed page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from unified_memory import MemoryTypeError, MemoryValueError
from unified_memory.compat.lauren import ConversationStore, InMemoryConversationStore, ShortTermMemory


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict


@dataclass
class Completion:
    content: str | None
    tool_calls: list[Any] = field(default_factory=list)


@dataclass
class ToolResult:
    tool_call_id: str
    content: Any
    name: str = "lookup"
    is_error: bool = False


def chat(memory: ShortTermMemory, turns: int) -> None:
    for i in range(turns):
        memory.add_user(f"question {i} " * 10)
        memory.add_assistant(Completion(content=None, tool_calls=[ToolCall(f"c{i}", "lookup", {"q": i})]))
        memory.add_tool_result(ToolResult(f"c{i}", {"answer": i}))
        memory.add_assistant(Completion(content=f"answer {i}"))


def test_add_user_assistant_and_tool_result_from_objects_and_dicts():
    memory = ShortTermMemory()
    memory.add_user("Hello, how are you?")
    memory.add_assistant(Completion(content=None, tool_calls=[ToolCall("c1", "weather", {"city": "Oslo"})]))
    memory.add_tool_result(ToolResult("c1", {"temp": 3}, name="weather", is_error=True))
    memory.add_assistant({"role": "assistant", "content": "It is 3 degrees."})
    memory.add_tool_result({"role": "tool", "tool_call_id": "x", "content": "late"})
    user, call, result, answer, _ = memory.messages()
    assert user.content == "Hello, how are you?"
    assert call.tool_calls[0]["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}
    assert (result.tool_call_id, result.content, result.metadata) == ("c1", '{"temp": 3}', {"is_error": True})
    assert answer.content == "It is 3 degrees."


def test_add_user_accepts_content_blocks_with_images():
    memory = ShortTermMemory()
    memory.add_user([{"type": "text", "text": "What is this?"},
                     {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}}])
    message = memory.messages()[0]
    assert message.content == "What is this?" and message.images == ["data:image/jpeg;base64,AAAA"]


def test_messages_returns_a_trimmed_copy_and_trim_to_fit_mutates():
    memory = ShortTermMemory(max_tokens=60)
    chat(memory, 5)
    trimmed = memory.messages()
    assert len(trimmed) < 20 and trimmed[-1].content == "answer 4"
    assert len(memory.conversation) == 20  # messages() did not change the buffer
    memory.trim_to_fit(60)
    assert [m.id for m in memory.conversation.messages()] == [m.id for m in trimmed]


def test_messages_to_summarize_then_set_summary_and_trim_to_recent():
    memory = ShortTermMemory()
    chat(memory, 3)
    older = memory.messages_to_summarize(keep_recent=4)
    assert [m.content for m in older][:1] == ["question 0 " * 10] and len(older) == 8
    memory.set_summary("The user asked two questions.")
    memory.trim_to_recent(keep_recent=4)
    assert len(memory.conversation) == 4 and memory.summary == "The user asked two questions."


def test_snapshot_restore_carries_the_summary_and_accepts_legacy_lists():
    memory = ShortTermMemory()
    chat(memory, 2)
    memory.set_summary("earlier")
    snap = memory.snapshot()
    snap["messages"].append({"role": "user", "content": "mutating the snapshot"})
    restored = ShortTermMemory()
    restored.restore(memory.snapshot())
    assert restored.snapshot() == memory.snapshot() and restored.summary == "earlier"
    legacy = ShortTermMemory()
    legacy.restore([{"role": "user", "content": "old format"}])
    assert [m.content for m in legacy.messages()] == ["old format"] and legacy.summary is None


def test_restore_of_a_bad_snapshot_changes_nothing():
    memory = ShortTermMemory()
    memory.add_user("keep me")
    with pytest.raises(MemoryValueError, match=r"messages\[1\]\.role"):
        memory.restore({"messages": [{"role": "user", "content": "ok"}, {"role": "bot", "content": "x"}]})
    with pytest.raises(MemoryTypeError, match="data"):
        memory.restore("nope")
    assert [m.content for m in memory.messages()] == ["keep me"]


def test_clear_and_bad_limits():
    memory = ShortTermMemory()
    memory.add_user("x")
    memory.clear()
    assert memory.messages() == []
    with pytest.raises(MemoryValueError, match="max_tokens"):
        ShortTermMemory(max_tokens=0)


def test_in_memory_conversation_store_saves_snapshots():
    store = InMemoryConversationStore()
    assert isinstance(store, ConversationStore)
    memory = ShortTermMemory()
    chat(memory, 1)
    store.save("session-abc", memory.snapshot())
    store.save("legacy", [{"role": "user", "content": "hi"}])
    assert store.list_conversations() == ["legacy", "session-abc"]
    assert store.load("legacy") == {"messages": [{"role": "user", "content": "hi"}], "summary": None}
    restored = ShortTermMemory()
    restored.restore(store.load("session-abc"))
    assert restored.snapshot() == memory.snapshot()
    store.delete("session-abc")
    store.clear()
    assert store.list_conversations() == []
