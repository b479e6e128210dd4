"""The conversation engine: trimming, compaction at turn boundaries, state and logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unified_memory import (
    CompactionConfig,
    ConfigError,
    Conversation,
    LLMError,
    MemoryTypeError,
    MemoryValueError,
    Message,
    NotFoundError,
    StorageError,
    UnifiedMemoryError,
)

ROOT = Path(__file__).resolve().parents[3]


def call(cid: str, name: str = "lookup") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps({"q": cid})}}


def tool_turn(conv: Conversation, turn: int, calls: int, size: int = 40) -> None:
    conv.add(role="user", content=f"question {turn} " + "x" * size)
    ids = [f"t{turn}c{i}" for i in range(calls)]
    conv.add(role="assistant", content=None, tool_calls=[call(c) for c in ids],
             reasoning_details=[{"type": "thinking", "text": f"plan {turn}", "signature": "sig"}])
    for c in ids:
        conv.add(role="tool", content=f"result {c} " + "r" * size, tool_call_id=c, name="lookup")
    conv.add(role="assistant", content=f"answer {turn}")


def assert_paired(messages: list[Message], *, allow_pending: bool) -> None:
    """Every tool result follows the assistant message that opened its call; with no
    pending calls, every call in the list has its result."""
    opened: set[str] = set()
    answered: set[str] = set()
    for m in messages:
        if m.role == "assistant":
            opened.update(m.tool_call_ids())
        if m.role == "tool":
            assert m.tool_call_id in opened, f"orphaned tool result {m.tool_call_id}"
            answered.add(m.tool_call_id)
    if not allow_pending:
        assert opened == answered, f"calls without results: {sorted(opened - answered)}"


# ---- the "Done when" property: never mid-batch, never an orphan, at any threshold -------------

turn_shapes = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 300)), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=turn_shapes, threshold=st.integers(1, 3000), keep=st.integers(0, 3),
       order=st.permutations(["tool_truncation", "summarization", "backward_packing"]),
       max_tool=st.integers(1, 200), max_messages=st.none() | st.integers(1, 30))
def test_parallel_tool_calls_never_compacted_mid_batch_nor_orphaned(turns, threshold, keep, order, max_tool,
                                                                    max_messages):
    config = CompactionConfig(token_threshold=threshold, processor_order=order,
                              summarization={"keep_recent_interactions": keep},
                              tool_truncation={"max_tool_message_tokens": max_tool})
    conv = Conversation(compaction=config, compact_fn=lambda msgs, sp: f"{len(msgs)} messages",
                        max_messages=max_messages)
    for turn, (calls, size) in enumerate(turns):
        conv.add(role="user", content=f"q{turn} " + "x" * size)
        ids = [f"t{turn}c{i}" for i in range(calls)]
        if ids:
            conv.add(role="assistant", content=None, tool_calls=[call(c) for c in ids])
            for answered, c in enumerate(ids, start=1):
                before = conv.compactions
                trimmed_before = len(conv.get_memory_trace())
                conv.add(role="tool", content=f"r{c} " + "r" * size, tool_call_id=c)
                if answered < len(ids):  # mid-batch: nothing may change but the append
                    assert conv.compactions == before
                    assert len(conv.get_memory_trace()) == trimmed_before
                    assert conv.messages()[-1].tool_call_id == c
                assert_paired(conv.context(), allow_pending=answered < len(ids))
        conv.add(role="assistant", content=f"a{turn}")
        assert conv.pending_tool_calls == 0
        assert_paired(conv.context(), allow_pending=False)
        assert conv.context()[-1].content == f"a{turn}"  # the newest turn is always kept


def test_compaction_waits_for_the_whole_parallel_batch():
    conv = Conversation(compaction={"token_threshold": 60}, compact_fn=lambda msgs, sp: "summary")
    conv.add(role="user", content="hello")
    conv.add(role="assistant", content="hi, how can I help?")
    conv.add(role="user", content="look these up " * 10)
    conv.add(role="assistant", content=None, tool_calls=[call("a"), call("b"), call("c")])
    conv.add(role="tool", content="A " * 50, tool_call_id="a")
    conv.add(role="tool", content="B " * 50, tool_call_id="b")
    assert conv.pending_tool_calls == 1 and conv.compactions == 0
    assert conv.compact() is None  # asked during the batch: deferred, not refused
    conv.add(role="tool", content="C " * 50, tool_call_id="c")
    assert conv.compactions == 1 and conv.summary == "summary"
    assert_paired(conv.context(), allow_pending=False)


def test_compaction_rewrites_memory_and_keeps_reasoning_and_images():
    conv = Conversation(compaction={"token_threshold": 300, "processor_order": ["summarization"]},
                        compact_fn=lambda msgs, sp: "earlier: " + ", ".join(m.role for m in msgs))
    for turn in range(4):
        tool_turn(conv, turn, calls=2)
    conv.add(role="user", content="what is in this picture?", images=["data:image/png;base64,AAAA"])
    assert conv.compactions >= 1
    ctx = conv.context()
    assert ctx[0].metadata.get("compaction_summary") is True
    assert ctx[-1].images == ["data:image/png;base64,AAAA"]
    kept_reasoning = [m.reasoning_details for m in ctx if m.reasoning_details]
    assert all(r[0]["signature"] == "sig" for r in kept_reasoning)
    assert_paired(ctx, allow_pending=False)


def test_custom_compact_fn_gets_messages_and_system_prompt_and_on_compact_gets_stats():
    seen, stats = [], []
    conv = Conversation(system_prompt="You are terse.", compaction={"token_threshold": 80},
                        compact_fn=lambda msgs, sp: seen.append((len(msgs), sp)) or "S",
                        on_compact=stats.append)
    for i in range(6):
        conv.add(role="user", content=f"message {i} " * 8)
    assert seen and all(sp == "You are terse." for _, sp in seen)
    assert stats[0]["messages_compacted"] >= 1 and stats[0]["tokens_after"] < stats[0]["tokens_before"]
    assert [e["event"] for e in conv.get_memory_trace()].count("compaction") == conv.compactions


def test_separate_compaction_model_writes_the_summary():
    prompts = []

    def cheap_model(messages):
        prompts.append(messages)
        return "The user asked six things."

    conv = Conversation(compaction={"token_threshold": 80}, compaction_llm=cheap_model)
    for i in range(6):
        conv.add(role="user", content=f"message {i} " * 8)
    assert conv.summary == "The user asked six things."
    assert "message 0" in prompts[0][-1]["content"]


def test_failed_compaction_keeps_everything_and_reports_failure():
    events = []

    def broken(msgs, sp):
        raise RuntimeError("model down")

    conv = Conversation(compaction={"token_threshold": 40}, compact_fn=broken)
    conv.on_event(lambda e: events.append((e.kind, e.stage, e.error)), kinds=["compact"])
    for i in range(4):
        conv.add(role="user", content=f"message {i} " * 8)
    assert len(conv) == 4 and conv.compactions == 0
    assert ("compact", "failed", "RuntimeError: model down") in events
    with pytest.raises(RuntimeError):
        conv.compact()  # asked for explicitly: the caller sees the error


def test_compaction_model_failure_is_an_llm_error():
    conv = Conversation(compaction={"token_threshold": 10_000}, compaction_llm=lambda m: "  ")
    conv.add(role="user", content="hello " * 20)
    conv.add(role="user", content="again")
    with pytest.raises(LLMError):
        conv.compact()


def test_sliding_window_mode_keeps_raw_history():
    conv = Conversation(compaction={"token_threshold": 60, "mode": "sliding_window"})
    for i in range(10):
        conv.add(role="user", content=f"message {i} " * 4)
    assert len(conv.messages()) == 10
    window = conv.context()
    assert 0 < len(window) < 10 and window[-1].content == conv.messages()[-1].content
    assert conv.tokens() <= 60


def test_threshold_from_model_window_and_safety_ratio():
    config = CompactionConfig(model="gpt-4o", safety_ratio=0.75)
    assert config.threshold() == int(128_000 * 0.75)
    assert config.target() == int(config.threshold() * 0.6)


# ---- the short-term API ------------------------------------------------------------------------

def test_add_returns_ids_and_messages_can_be_found_changed_and_removed():
    conv = Conversation()
    first = conv.add(role="user", content="hello")
    second = conv.add(Message(role="assistant", content="hi"))
    assert conv.get(first).content == "hello"
    assert conv.update(second, content="hi there").content == "hi there"
    assert [m.content for m in conv.by_role("assistant")] == ["hi there"]
    assert conv.recent(1)[0].id == second
    assert conv.remove(first).content == "hello"
    assert conv.get(first) is None
    with pytest.raises(NotFoundError):
        conv.remove(first)


def test_bad_input_names_the_field_and_adds_nothing():
    conv = Conversation()
    with pytest.raises(MemoryValueError, match=r"messages\[1\]\.role"):
        conv.add_many([{"role": "user", "content": "ok"}, {"role": "robot", "content": "no"}])
    with pytest.raises(MemoryValueError, match="content"):
        conv.add(role="user")
    with pytest.raises(MemoryTypeError, match="message"):
        conv.add(42)
    with pytest.raises(ConfigError, match="compaction.safety_ratio"):
        Conversation(compaction={"token_threshold": 10, "safety_ratio": 2})
    with pytest.raises(ConfigError, match="compaction.wat"):
        Conversation(compaction={"wat": 1})
    assert len(conv) == 0
    first = conv.add(role="user", content="a")
    with pytest.raises(MemoryValueError, match="already"):
        conv.add(role="user", content="b", id=first)
    assert len(conv) == 1
    for err in (MemoryValueError, MemoryTypeError, ConfigError):
        assert issubclass(err, UnifiedMemoryError)


def test_window_trims_whole_interactions_and_summarises_on_trim():
    conv = Conversation(max_messages=4, summarize_on_trim=True)
    for i in range(4):
        conv.add(role="user", content=f"I like colour {i}.")
        conv.add(role="assistant", content=f"Noted {i}.")
    assert [m.content for m in conv.messages()] == ["I like colour 2.", "Noted 2.", "I like colour 3.", "Noted 3."]
    assert "colour 1" in conv.summary and [m.content for m in conv.last_trimmed] == ["I like colour 1.", "Noted 1."]


def test_trim_to_recent_never_starts_on_an_orphaned_tool_result():
    conv = Conversation()
    tool_turn(conv, 0, calls=2)
    dropped = conv.trim_to_recent(2)  # the last two would be one tool result and the answer
    assert conv.messages()[0].role == "assistant" and conv.messages()[0].content == "answer 0"
    assert len(dropped) == 4
    assert_paired(conv.messages(), allow_pending=False)


def test_reset_keeps_the_system_prompt():
    conv = Conversation(system_prompt="Be brief.")
    conv.add(role="user", content="hi")
    conv.set_summary("greeting")
    assert conv.reset() == {"messages": 1, "summary": 1}
    assert [m.content for m in conv.context()] == ["Be brief."]


def test_to_dict_round_trip_is_exact_and_does_not_retrim():
    conv = Conversation(session_id="s1", system_prompt="Be brief.", max_messages=50,
                        compaction={"token_threshold": 100_000})
    tool_turn(conv, 0, calls=3)
    conv.add(role="user", content="see", images=["https://x/cat.png"])
    conv.set_summary("so far")
    data = json.loads(json.dumps(conv.to_dict()))
    data["max_messages"] = 2  # a stricter limit on restore drops nothing already held
    restored = Conversation.from_dict(data)
    assert restored.context() == conv.context()
    assert restored.to_dict()["messages"] == conv.to_dict()["messages"]


def test_branch_is_independent():
    conv = Conversation()
    conv.add(role="user", content="a")
    copy = conv.branch()
    copy.add(role="user", content="b")
    assert len(conv) == 1 and len(copy) == 2 and copy.session_id != conv.session_id


# ---- the JSONL log -----------------------------------------------------------------------------

def test_log_replays_messages_trims_compactions_and_resets(tmp_path):
    conv = Conversation(session_id="user-123", log_base_path=str(tmp_path), system_prompt="Hi",
                        compaction={"token_threshold": 200}, compact_fn=lambda m, s: "sum", max_messages=30)
    for turn in range(5):
        tool_turn(conv, turn, calls=2)
    mid = conv.add(role="user", content="to change")
    conv.update(mid, content="changed")
    restored = Conversation.restore_from_log("user-123", str(tmp_path))
    assert restored.context() == conv.context() and restored.compactions == conv.compactions
    restored.add(role="user", content="after restore")  # appends to the same log
    again = Conversation.restore_from_log("user-123", str(tmp_path))
    assert again.context() == restored.context()
    again.reset()
    assert [m.content for m in Conversation.restore_from_log("user-123", str(tmp_path)).context()] == ["Hi"]


def test_missing_or_corrupt_log_is_a_clear_error(tmp_path):
    with pytest.raises(NotFoundError, match="no log"):
        Conversation.restore_from_log("nobody", str(tmp_path))
    conv = Conversation(session_id="s", log_base_path=str(tmp_path))
    conv.add(role="user", content="a")
    conv.add(role="user", content="b")
    path = tmp_path / "s.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{not json", lines[1]]) + "\n")
    with pytest.raises(StorageError, match=r"s\.jsonl:2"):
        Conversation.restore_from_log("s", str(tmp_path))


_WRITER = textwrap.dedent("""
    import json, sys
    from unified_memory import Conversation
    conv = Conversation(session_id="killed", log_base_path=sys.argv[1], system_prompt="Be brief.",
                        compaction={"token_threshold": 400}, compact_fn=lambda m, s: f"{len(m)} earlier")
    turn = 0
    while True:
        conv.add(role="user", content=f"question {turn} " * 5)
        ids = [f"t{turn}c{i}" for i in range(turn % 3)]
        if ids:
            conv.add(role="assistant", content=None, reasoning_details=[{"type": "thinking", "text": "hmm"}],
                     tool_calls=[{"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                                 for c in ids])
            for c in ids:
                conv.add(role="tool", content=f"result {c} " * 20, tool_call_id=c)
        conv.add(role="assistant", content=f"answer {turn}", images=["https://x/%d.png" % turn])
        print(json.dumps([m.model_dump(mode="json", exclude_none=True) for m in conv.context()]), flush=True)
        turn += 1
        if turn == 40:
            sys.stdout.flush()
            import time; time.sleep(60)
""")


def test_killed_session_restores_the_same_context(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    last = None
    for _ in range(40):
        last = proc.stdout.readline()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    expected = [Message.model_validate(m) for m in json.loads(last)]
    restored = Conversation.restore_from_log("killed", str(tmp_path))
    assert restored.context() == expected
    assert restored.compactions >= 1


def test_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path):
    conv = Conversation(session_id="torn", log_base_path=str(tmp_path))
    conv.add(role="user", content="kept")
    with open(tmp_path / "torn.jsonl", "a") as fh:
        fh.write('{"v":1,"type":"message","message":{"role":"us')  # killed mid-write
    restored = Conversation.restore_from_log("torn", str(tmp_path))
    assert [m.content for m in restored.messages()] == ["kept"]
    restored.add(role="user", content="next")
    assert [m.content for m in Conversation.restore_from_log("torn", str(tmp_path)).messages()] == ["kept", "next"]


# ---- every store round-trips a session --------------------------------------------------------

def test_every_store_round_trips_a_session_with_tool_calls_images_and_reasoning(store):
    conv = Conversation(session_id="user-7", system_prompt="Be brief.", max_messages=40,
                        compaction={"token_threshold": 500}, compact_fn=lambda m, s: "earlier turns")
    for turn in range(4):
        tool_turn(conv, turn, calls=3)
    conv.add(role="user", content="what is this?", images=["data:image/png;base64,iVBORw0KGgo="])
    tool_turn(conv, 9, calls=2)
    assert conv.compactions >= 1 and conv.summary == "earlier turns"
    conv.save(store, namespace="support")
    restored = Conversation.load(store, "user-7", namespace="support")
    assert restored.context() == conv.context()
    assert restored.to_dict() == conv.to_dict()
    assert any(m.reasoning_details for m in restored.messages())
    with pytest.raises(NotFoundError):
        Conversation.load(store, "user-7")  # another namespace


def test_a_compaction_config_without_a_usable_threshold_fails_at_construction():
    with pytest.raises(ConfigError, match="model"):
        Conversation(compaction={"model": "no-such-model"})
    with pytest.raises(ConfigError, match="token_threshold"):
        Conversation(compaction={})


def test_an_oversized_newest_turn_does_not_log_empty_compactions(tmp_path):
    stats = []
    conv = Conversation(session_id="big", log_base_path=str(tmp_path), compaction={"token_threshold": 10},
                        compact_fn=lambda m, s: "sum", on_compact=stats.append)
    conv.add(role="user", content="x" * 100)
    for _ in range(3):
        conv.add(role="assistant", content="ok")
    assert conv.compactions == 0 and stats == []
    lines = (tmp_path / "big.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["message"] * 4


# ---- Alquimia strategies run on the same engine ------------------------------------------------

def test_short_term_strategy_from_json_picks_the_context():
    conv = Conversation(strategies='{"short_term": {"memory_strategy_id": "max_tokens", "memory_max_tokens": 120,'
                                   ' "conditions": ["message.role != \'tool\'"]}}')
    for turn in range(5):
        tool_turn(conv, turn, calls=1)
    ctx = conv.context()
    assert all(m.role != "tool" for m in ctx) and all(not m.tool_calls for m in ctx)
    assert ctx[-1].content == "answer 4" and sum(conv.message_tokens(m) for m in ctx) <= 120
    assert len(conv.messages()) == 20  # the strategy selects; the memory keeps everything


def test_neuralyzer_strategy_erases_beyond_the_threshold_and_the_log_replays_it(tmp_path):
    strategies = {"long_term": {"long_term_memory_id": "neuralyzer", "interaction_threshold_qty": 3,
                                "interaction_keep": 1}}
    conv = Conversation(session_id="n", log_base_path=str(tmp_path), strategies=strategies)
    for turn in range(7):
        tool_turn(conv, turn, calls=2)
        assert_paired(conv.context(), allow_pending=False)
    assert conv.compactions >= 2 and len({m.content for m in conv.messages() if m.role == "user"}) < 3
    assert Conversation.restore_from_log("n", str(tmp_path)).context() == conv.context()


def test_summarizer_strategy_uses_the_compaction_model_and_stores_facts(clock):
    from unified_memory import UnifiedMemory

    replies = iter(["Ada lives in Lisbon.", "Ada lives in Lisbon and keeps bees."] * 10)
    with UnifiedMemory(clock=clock) as mem:
        conv = Conversation(compaction_llm=lambda messages: next(replies), strategy_memory=mem,
                            strategies={"long_term": {"long_term_memory_id": "summarizer",
                                                      "interaction_threshold_qty": 2, "cod_max_loops": 1,
                                                      "store_summary_as_facts": True}})
        conv.add(role="user", content="I live in Lisbon")
        conv.add(role="assistant", content="Nice")
        conv.add(role="user", content="I keep bees")
        assert conv.summary == "Ada lives in Lisbon and keeps bees."
        assert [m.content for m in conv.messages()] == []  # interaction_keep=0
        assert [f.text for f in mem.facts()] == ["Ada lives in Lisbon and keeps bees."]
