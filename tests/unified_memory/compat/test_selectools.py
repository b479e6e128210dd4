"""selectools' ConversationMemory, as documented in its seed page (and safer at the edges)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from unified_memory import MemoryValueError
from unified_memory.compat.selectools import ConversationMemory, Message, Role


def test_sliding_window_keeps_the_last_messages():
    memory = ConversationMemory(max_messages=3)
    for i in range(5):
        memory.add(Message(role=Role.USER, content=f"Message {i}"))
    history = memory.get_history()
    assert [m.content for m in history] == ["Message 2", "Message 3", "Message 4"]
    assert [m.content for m in memory.get_recent(2)] == ["Message 3", "Message 4"]


def test_max_tokens_limit():
    memory = ConversationMemory(max_messages=100, max_tokens=30)
    for i in range(10):
        memory.add(Message(role="user", content=f"message number {i} " * 3))
    assert sum(memory.conversation.message_tokens(m) for m in memory.get_history()) <= 30
    assert memory.get_history()[-1].content.startswith("message number 9")


def test_tool_pair_aware_trimming_never_starts_with_a_tool_result():
    memory = ConversationMemory(max_messages=3)
    memory.add(Message(role="user", content="weather?"))
    memory.add(Message(role="assistant", tool_calls=[{"id": "c1", "function": {"name": "w", "arguments": "{}"}}]))
    memory.add(Message(role="tool", content="sunny", tool_call_id="c1"))
    memory.add(Message(role="assistant", content="It is sunny."))
    memory.add(Message(role="user", content="thanks"))
    assert [m.role for m in memory.get_history()] == ["user"]  # whole interactions leave
    assert memory.last_trimmed[0].content == "weather?"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=15), st.integers(1, 12))
def test_no_orphaned_tool_result_at_any_limit(calls_per_turn, limit):
    memory = ConversationMemory(max_messages=limit)
    for turn, calls in enumerate(calls_per_turn):
        memory.add(Message(role="user", content=f"q{turn}"))
        ids = [f"{turn}-{i}" for i in range(calls)]
        if ids:
            memory.add(Message(role="assistant", tool_calls=[{"id": c} for c in ids]))
            memory.add_many([Message(role="tool", content="r", tool_call_id=c) for c in ids])
        memory.add(Message(role="assistant", content=f"a{turn}"))
        history = memory.get_history()
        opened = {c for m in history for c in m.tool_call_ids()}
        assert all(m.tool_call_id in opened for m in history if m.role == "tool")
        assert history[-1].content == f"a{turn}"


def test_summarize_on_trim_and_summary_survives_to_dict():
    memory = ConversationMemory(max_messages=2, summarize_on_trim=True)
    memory.add_many([Message(role="user", content="My name is Alice."), Message(role="assistant", content="Hi!"),
                     Message(role="user", content="What's 2+2?"), Message(role="assistant", content="4")])
    assert "Alice" in memory.summary
    restored = ConversationMemory.from_dict(json.loads(json.dumps(memory.to_dict())))
    assert restored.summary == memory.summary
    assert restored.get_history() == memory.get_history()


def test_from_dict_does_not_retrim_and_accepts_the_plain_selectools_shape():
    memory = ConversationMemory(max_messages=50)
    for i in range(10):
        memory.add(Message(role="user", content=f"m{i}"))
    data = memory.to_dict()
    data["max_messages"] = 3
    data.pop("state")  # the shape selectools itself writes
    data["messages"].insert(0, {"role": "tool", "content": "orphan", "tool_call_id": "gone"})
    restored = ConversationMemory.from_dict(data)
    assert [m.content for m in restored.get_history()] == [f"m{i}" for i in range(10)]
    assert restored.max_messages == 3


def test_branch_is_independent_and_clear_empties():
    memory = ConversationMemory()
    memory.add(Message(role="user", content="shared"))
    branch = memory.branch()
    branch.add(Message(role="user", content="only in the branch"))
    assert len(memory) == 1 and len(branch) == 2
    memory.clear()
    assert memory.get_history() == [] and len(branch) == 2


def test_limits_are_validated():
    with pytest.raises(MemoryValueError, match="max_messages"):
        ConversationMemory(max_messages=0)
    with pytest.raises(MemoryValueError, match="max_tokens"):
        ConversationMemory(max_tokens=0)
    with pytest.raises(MemoryValueError, match="n"):
        ConversationMemory().get_recent(0)


def test_trims_are_reported_to_observers_with_removed_remaining_and_reason():
    memory = ConversationMemory(max_messages=2)
    seen = []
    memory.conversation.on_event(lambda e: seen.append(e.counts["messages"]), kinds=["trim"])
    for i in range(4):
        memory.add(Message(role="user", content=f"m{i}"))
    trims = [e for e in memory.conversation.get_memory_trace() if e["event"] == "trim"]
    assert seen == [1, 1]
    assert [(t["messages_removed"], t["messages_remaining"], t["reason"]) for t in trims] == \
        [(1, 2, "enforce_limits"), (1, 2, "enforce_limits")]
