"""The Motus facade: one test per feature of the seed (seeds/1-motus-compaction-memory.md)."""

from __future__ import annotations

import asyncio
import doctest
import json

import pytest

from unified_memory.compat import _common, motus
from unified_memory.compat.motus import (
    BaseMemory,
    BasicMemory,
    CompactionBase,
    CompactionMemory,
    CompactionMemoryConfig,
    CompactionSessionState,
    create_memory,
)
from unified_memory.errors import ConfigError, MemoryValueError


def run(coro):
    return asyncio.run(coro)


def add(memory, **fields):
    return run(memory.add_message(**fields))


def call(call_id, name="lookup"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def chat(memory, turns, size=5):
    for i in range(turns):
        add(memory, role="user", content=f"question {i} " * size)
        add(memory, role="assistant", content=f"answer {i} " * size)


def test_doctests_run():
    for module in (motus, _common):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE).failed == 0


def test_basic_memory_grows_unbounded():
    memory = create_memory("basic")
    assert isinstance(memory, BasicMemory)
    chat(memory, 200, size=20)
    assert len(memory.messages) == 400
    assert run(memory.compact()) is None
    assert len(run(memory.get_context())) == 400
    assert memory.get_memory_trace() == []


def test_compact_memory_auto_compacts_at_threshold():
    memory = create_memory("compact", config={"token_threshold": 200}, compact_fn=lambda msgs, sp: "summary text")
    chat(memory, 20)
    assert memory.estimate_tokens() <= 200
    context = run(memory.get_context())
    assert context[0]["content"].endswith("summary text")  # the continuation message
    assert context[-1] == {"role": "assistant", "content": "answer 19 " * 5}


def test_compaction_defers_until_parallel_tool_batch_complete():
    seen = []
    memory = CompactionMemory({"token_threshold": 100}, compact_fn=lambda msgs, sp: "summary text",
                              on_compact=seen.append)
    chat(memory, 1)
    add(memory, role="user", content="look up three things")
    add(memory, role="assistant", content=None, tool_calls=[call("a"), call("b"), call("c")])
    assert memory.conversation.pending_tool_calls == 3
    add(memory, role="tool", content="result a " * 60, tool_call_id="a")
    add(memory, role="tool", content="result b " * 60, tool_call_id="b")
    assert seen == [] and run(memory.compact()) is None  # deferred: one result still missing
    assert memory.conversation.pending_tool_calls == 1
    add(memory, role="tool", content="result c", tool_call_id="c")
    assert len(seen) == 1  # fired once the batch was complete
    ids = {m.tool_call_id for m in memory.messages if m.role == "tool"}
    calls = {c["id"] for m in memory.messages for c in (m.tool_calls or [])}
    assert ids == calls == {"a", "b", "c"}  # never separated from their call


def test_on_compact_stats_messages_compacted():
    seen = []
    memory = CompactionMemory({"token_threshold": 10_000}, compact_fn=lambda msgs, sp: "summary text",
                              on_compact=lambda stats: seen.append(f"Compacted {stats['messages_compacted']} messages"))
    chat(memory, 10, size=50)
    stats = run(memory.compact())
    assert stats["messages_compacted"] > 0
    assert seen == [f"Compacted {stats['messages_compacted']} messages"]


def test_custom_compact_fn_receives_messages_and_system_prompt():
    received = []

    def my_compaction(messages, system_prompt):
        received.append(([m.content for m in messages], system_prompt))
        return f"Summary: {len(messages)} messages processed"

    memory = CompactionMemory(compact_fn=my_compaction, system_prompt="You are terse.")
    chat(memory, 3)
    run(memory.compact())
    (contents, prompt), = received
    assert prompt == "You are terse." and contents[0] == "question 0 " * 5
    assert memory.conversation.summary == f"Summary: {len(contents)} messages processed"


def test_separate_compaction_model_is_used():
    calls = []

    def cheap_model(messages):
        calls.append(messages)
        return "summary text"

    memory = CompactionMemory({"token_threshold": 200}, llm=cheap_model)
    chat(memory, 20)
    assert calls and memory.conversation.summary == "summary text"
    other = []
    memory.set_model(lambda messages: other.append(messages) or "from the new model")
    chat(memory, 20)
    assert other and memory.conversation.summary == "from the new model"


def test_safety_ratio_threshold_from_model_window():
    cfg = CompactionMemoryConfig(compact_model_name="claude-haiku-4-5-20251001", safety_ratio=0.75)
    assert cfg.compaction_config().threshold() == 150_000
    agent = CompactionMemoryConfig(model_name="gpt-4o", compact_model_name="claude-haiku-4-5-20251001")
    assert agent.compaction_config().threshold() == 96_000  # the agent's model decides the window
    assert CompactionMemoryConfig(token_threshold=500, model_name="gpt-4o").compaction_config().threshold() == 500
    memory = CompactionMemory()  # no threshold, no model: waits for the agent's model
    assert memory.conversation.compaction is None
    memory.set_model_name("gpt-4o")
    assert memory.conversation.compaction.threshold() == 96_000
    with pytest.raises(ConfigError, match="model"):
        CompactionMemory({"model_name": "no-such-model"})
    with pytest.raises(ConfigError, match="safety_ratio"):
        CompactionMemory({"safety_ratio": 0})
    with pytest.raises(ConfigError, match="unknown setting"):
        CompactionMemory({"threshold": 5})


def test_session_id_defaults_to_a_uuid():
    assert CompactionMemoryConfig().session_id != CompactionMemoryConfig().session_id
    assert CompactionMemory({"session_id": "user-123"}).session_id == "user-123"


def test_max_tool_result_tokens_truncates_tool_results():
    memory = CompactionMemory({"max_tool_result_tokens": 20, "token_threshold": 100_000})
    add(memory, role="user", content="fetch")
    add(memory, role="assistant", content=None, tool_calls=[call("c1")])
    add(memory, role="tool", content="word " * 400, tool_call_id="c1")
    tool = memory.messages[-1]
    assert memory.conversation.count_tokens(tool.content) <= 20
    assert tool.metadata["truncated_from_tokens"] == 500 and tool.tool_call_id == "c1"


def test_restore_from_log_continues_same_session(tmp_path):
    memory = CompactionMemory({"session_id": "user-123", "log_base_path": str(tmp_path), "token_threshold": 200},
                              compact_fn=lambda msgs, sp: "summary text", system_prompt="Be brief.")
    chat(memory, 20)
    assert memory.conversation.compactions > 0
    context = run(memory.get_context())
    restored = CompactionMemory.restore_from_log(session_id="user-123", log_base_path=str(tmp_path),
                                                 compact_fn=lambda msgs, sp: "summary text")
    assert restored.session_id == "user-123"
    assert run(restored.get_context()) == context
    add(restored, role="user", content="and now?")
    again = CompactionMemory.restore_from_log("user-123", str(tmp_path))
    assert [m.content for m in again.messages][-1] == "and now?"  # appended to the same log
    assert len(list(tmp_path.iterdir())) == 1


def test_session_state_round_trip():
    memory = CompactionMemory({"token_threshold": 200}, compact_fn=lambda msgs, sp: "summary text",
                              system_prompt="Be brief.")
    chat(memory, 20)
    add(memory, role="assistant", content="look", reasoning_details=[{"type": "thought", "text": "hmm"}],
        images=["data:image/png;base64,AAAA"])
    state = memory.get_session_state()
    assert state.system_prompt == "Be brief." and state.session_id == memory.session_id
    assert state.log_base_path is None and state.messages == memory.messages
    data = json.loads(json.dumps(state.to_dict()))
    restored_state = CompactionSessionState.from_dict(data)
    assert restored_state == state
    restored = CompactionMemory.from_session_state(restored_state, compact_fn=lambda msgs, sp: "summary text")
    assert run(restored.get_context()) == run(memory.get_context())
    assert restored.conversation.compaction.threshold() == 200


def test_custom_memory_subclass():
    class MyMemory(BaseMemory):
        async def compact(self, **kwargs):
            del self._messages[:-2]
            return {"kept": 2}

        def reset(self):
            count = len(self._messages)
            self._messages.clear()
            return {"messages": count}

    with pytest.raises(TypeError):
        BaseMemory()
    memory = MyMemory(system_prompt="You help.")
    chat(memory, 3)
    assert memory.estimate_tokens() > 0
    assert run(memory.compact()) == {"kept": 2}
    assert [m["content"] for m in run(memory.get_context())] == ["You help.", "question 2 " * 5, "answer 2 " * 5]
    big = memory.truncate_tool_result({"role": "tool", "content": "x " * 1000, "tool_call_id": "c"}, max_tokens=10)
    assert memory.conversation.count_tokens(big.content) <= 10
    assert memory.reset() == {"messages": 2} and memory.messages == []


def test_compaction_base_subclass_gets_auto_compaction():
    class Mine(CompactionBase):
        pass

    from unified_memory.conversation.engine import Conversation

    memory = Mine(conversation=Conversation(compaction={"token_threshold": 200},
                                            compact_fn=lambda msgs, sp: "summary text"))
    chat(memory, 20)
    assert memory.conversation.summary == "summary text"


def test_reset_returns_counts():
    basic = BasicMemory(system_prompt="Be brief.")
    chat(basic, 2)
    assert basic.reset() == {"messages": 4} and basic.system_prompt == "Be brief."
    compacting = CompactionMemory({"token_threshold": 200}, compact_fn=lambda msgs, sp: "summary text")
    chat(compacting, 20)
    counts = compacting.reset()
    assert counts["summary"] == 1 and counts["messages"] > 0
    assert run(compacting.get_context()) == []


def test_get_memory_trace_lists_compactions():
    memory = CompactionMemory({"token_threshold": 200}, compact_fn=lambda msgs, sp: "summary text")
    chat(memory, 20)
    trace = memory.get_memory_trace()
    compactions = [e for e in trace if e["event"] == "compaction"]
    assert len(compactions) == memory.conversation.compactions > 0
    assert {"tokens_before", "tokens_after", "messages_compacted"} <= set(compactions[0])


def test_get_context_is_openai_style():
    memory = BasicMemory()
    add(memory, role="user", content="hi", images=["https://example.org/cat.png"])
    add(memory, role="assistant", content=None, tool_calls=[call("c1")],
        reasoning_details=[{"type": "reasoning.text", "text": "check"}])
    add(memory, role="tool", content="ok", tool_call_id="c1", name="lookup")
    assert run(memory.get_context()) == [
        {"role": "user", "content": "hi", "images": ["https://example.org/cat.png"]},
        {"role": "assistant", "content": None, "tool_calls": [call("c1")],
         "reasoning_details": [{"type": "reasoning.text", "text": "check"}]},
        {"role": "tool", "content": "ok", "name": "lookup", "tool_call_id": "c1"},
    ]


def test_create_memory_rejects_unknown_type():
    with pytest.raises(MemoryValueError, match="memory_type.*basic, compact"):
        create_memory("background")
