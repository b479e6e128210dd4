"""UnifiedMemory compacts its conversation window at 70% of context_max_tokens."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from unified_memory import UnifiedMemory


def test_window_compacts_at_seventy_percent_of_context_max_tokens(clock):
    with UnifiedMemory(clock=clock, context_max_tokens=400) as mem:
        events = []
        mem.on_event(lambda e: events.append((e.stage, dict(e.counts))), kinds=["compact"])
        for i in range(30):
            mem.add_turn(f"I adopted a cat called Whisker{i} last spring", "Lovely")
        done = [counts for stage, counts in events if stage == "completed"]
        assert done, "never compacted"
        first = done[0]
        assert first["threshold"] == 280 and first["target"] == 168
        assert first["tokens_before"] > 280 and first["tokens_after"] <= 168 and first["messages_compacted"] > 0
        assert mem.stats().window_messages < 60
        assert "Whisker0" in mem.summary()  # what was compacted was summarised
        assert any("Whisker0" in f.text for f in mem.facts())  # ... and promoted


def test_compaction_off_keeps_the_window_to_its_limits(clock):
    with UnifiedMemory(clock=clock, context_max_tokens=400, compaction_ratio=None) as mem:
        for i in range(30):
            mem.add_turn(f"I adopted a cat called Whisker{i} last spring", "Lovely")
        assert len(mem.window()) == 60


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=10), st.integers(60, 600))
def test_never_compacts_mid_tool_batch(calls_per_turn, budget):
    with UnifiedMemory(context_max_tokens=budget) as mem:
        for turn, calls in enumerate(calls_per_turn):
            mem.add_message("user", f"please look up item {turn} " * 3)
            ids = [f"{turn}-{i}" for i in range(calls)]
            if ids:
                mem.add_messages([{"role": "assistant", "content": None,
                                   "tool_calls": [{"id": c, "type": "function",
                                                   "function": {"name": "f", "arguments": "{}"}} for c in ids]}])
                for c in ids:
                    before = len(mem.window())
                    mem.add_messages([{"role": "tool", "content": f"result {c} " * 20, "tool_call_id": c}])
                    if c != ids[-1]:
                        assert len(mem.window()) == before + 1  # mid-batch: nothing left the window
            mem.add_message("assistant", f"done {turn}")
            window = mem.window()
            opened = {c for m in window for c in m.tool_call_ids()}
            assert all(m.tool_call_id in opened for m in window if m.role == "tool")
