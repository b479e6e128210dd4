"""The compaction pipeline: processors, configs, compact(), select_window(), and its invariants."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from unified_memory.conversation.compaction import (
    SUMMARY_HEADER,
    CompactionConfig,
    CompactionResult,
    CompactionStats,
    SummarizationConfig,
    ToolTruncationConfig,
    cap_text,
    compact,
    interaction_units,
    pack_backward,
    select_window,
    summarize_older,
    summary_message,
    truncate_tool_results,
)
from unified_memory.errors import ConfigError, MemoryTypeError, MemoryValueError
from unified_memory.retrieval.tokens import chars_per_token_counter as chars
from unified_memory.retrieval.tokens import message_tokens
from unified_memory.types import Message


def user(text: str, **kw) -> Message:
    return Message(role="user", content=text, **kw)


def assistant(text: str | None = None, calls: list[str] | None = None, **kw) -> Message:
    tool_calls = ([{"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}} for c in calls]
                  if calls else None)
    return Message(role="assistant", content=text, tool_calls=tool_calls, **kw)


def tool(call_id: str, text: str, **kw) -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id, name="f", **kw)


def system(text: str, **kw) -> Message:
    return Message(role="system", content=text, **kw)


def mt(m: Message, estimate: int = 800) -> int:
    return message_tokens(m, chars, image_token_estimate=estimate)


def contents(msgs: list[Message]) -> list[str | None]:
    return [m.content for m in msgs]


def snapshot(msgs: list[Message]) -> list[dict]:
    return [m.model_dump() for m in msgs]


# ---------------------------------------------------------------- configs


def test_config_defaults_and_target_formula():
    cfg = CompactionConfig(token_threshold=1000)
    assert cfg.threshold() == 1000
    assert cfg.target() == 600  # 1000 * (1 - 0.4)
    assert CompactionConfig(token_threshold=1000, min_reduction_ratio=0.0).target() == 1000
    assert CompactionConfig(token_threshold=1, min_reduction_ratio=0.9).target() == 1  # at least 1
    assert cfg.processors() == ["tool_truncation", "summarization", "backward_packing"]
    assert cfg.tool_truncation.max_tool_message_tokens == 50_000
    assert cfg.summarization == SummarizationConfig(output_max_tokens=6000, keep_recent_interactions=1)
    assert cfg.mode == "compaction" and cfg.image_token_estimate == 800


def test_threshold_from_model_and_safety_ratio():
    assert CompactionConfig(model="gpt-4o").threshold() == 96_000
    assert CompactionConfig(model="openai/gpt-4o", safety_ratio=0.5).threshold() == 64_000
    assert CompactionConfig(model="gpt-4o", safety_ratio=0.5).target() == int(64_000 * 0.6)
    # an explicit threshold wins over the model
    assert CompactionConfig(model="gpt-4o", token_threshold=500).threshold() == 500


def test_threshold_errors_name_the_field():
    with pytest.raises(ConfigError) as info:
        CompactionConfig().threshold()
    assert info.value.field == "token_threshold"
    assert "model" in str(info.value)
    with pytest.raises(MemoryValueError) as info:
        CompactionConfig(model="no-such-model-zz").target()
    assert info.value.field == "model"
    assert "token_threshold" in str(info.value)


@pytest.mark.parametrize("bad", [
    {"token_threshold": 0},
    {"safety_ratio": 0},
    {"safety_ratio": 1.5},
    {"min_reduction_ratio": 1.0},
    {"min_reduction_ratio": -0.1},
    {"processor_order": ["summarization", "summarization"]},
    {"processor_order": ["nope"]},
    {"excluded_processors": ["nope"]},
    {"mode": "other"},
    {"image_token_estimate": -1},
    {"tool_truncation": {"max_tool_message_tokens": 0}},
    {"summarization": {"output_max_tokens": 0}},
    {"summarization": {"keep_recent_interactions": -1}},
    {"unknown_field": 1},
])
def test_config_validation(bad):
    with pytest.raises(ConfigError) as info:  # a ValueError, like pydantic's ValidationError
        CompactionConfig(**bad)
    assert info.value.field.split(".")[0] in bad


def test_processors_honour_order_and_exclusions():
    cfg = CompactionConfig(processor_order=["backward_packing", "tool_truncation"],
                           excluded_processors=["tool_truncation", "summarization"])
    assert cfg.processors() == ["backward_packing"]
    assert ToolTruncationConfig(max_tool_message_tokens=5).max_tool_message_tokens == 5


# ---------------------------------------------------------------- tool truncation


def test_truncate_tool_results_cuts_only_oversized_tool_messages():
    big = tool("c1", "lorem ipsum " * 100, images=["img.png"], reasoning_details=[{"k": "v"}],
               metadata={"src": "web"}, id="t1")
    small = tool("c2", "short", id="t2")
    long_user = user("x" * 1000)
    msgs = [long_user, big, small]
    before = snapshot(msgs)
    out, n = truncate_tool_results(msgs, max_tokens=30, count_tokens=chars)
    assert n == 1
    assert snapshot(msgs) == before  # input untouched
    assert out[0] is long_user and out[2] is small
    cut = out[1]
    assert chars(cut.content) <= 30
    assert "tool result truncated" in cut.content and "of 300 tokens kept" in cut.content
    head = cut.content.split("\n…[")[0]
    assert big.content.startswith(head) and head
    assert (cut.tool_call_id, cut.name, cut.id, cut.images, cut.reasoning_details) == \
           ("c1", "f", "t1", ["img.png"], [{"k": "v"}])
    assert cut.metadata == {"src": "web", "truncated_from_tokens": 300}
    # already within the limit: a second pass changes nothing
    again, n2 = truncate_tool_results(out, max_tokens=30, count_tokens=chars)
    assert n2 == 0 and again[1] is cut


def test_truncation_reports_kept_tokens_exactly():
    out, _ = truncate_tool_results([tool("c", "abcd" * 200)], max_tokens=40, count_tokens=chars)
    head, marker = out[0].content.split("\n…[")
    assert f"{chars(head)} of 200 tokens kept" in marker


@pytest.mark.parametrize("max_tokens", [1, 2, 5, 8, 13])
@pytest.mark.parametrize("counter", [
    chars,
    lambda t: len(t.split()),
    lambda t: (len(t) * 7919) % 13 + len(t) // 10,  # not monotone in the length
])
def test_truncated_content_always_fits(max_tokens, counter):
    text = "alpha beta gamma delta " * 50
    if counter(text) <= max_tokens:
        pytest.skip("fits already")
    out, n = truncate_tool_results([tool("c", text)], max_tokens=max_tokens, count_tokens=counter)
    assert n == 1
    assert counter(out[0].content) <= max_tokens


# ---------------------------------------------------------------- summarization


def conversation() -> list[Message]:
    return [
        system("rules", id="s0"),
        user("first question", id="u1"), assistant("first answer", id="a1"),
        user("second question", id="u2"), assistant(calls=["c1", "c2"], id="a2"),
        tool("c1", "r1", id="t1"), tool("c2", "r2", id="t2"), assistant("second answer", id="a3"),
        system("mid rules", id="s1"),
        user("third question", id="u3"), assistant("third answer", id="a4"),
    ]


def test_summarize_older_keeps_recent_and_system_messages_in_place():
    msgs = conversation()
    before = snapshot(msgs)
    seen = []

    def fake(older, prompt):
        seen.append(([m.id for m in older], prompt))
        return "they talked"

    kept, summary, n = summarize_older(msgs, keep_recent_interactions=1, summarize=fake, system_prompt="SP",
                                       output_max_tokens=100, count_tokens=chars)
    assert [m.id for m in kept] == ["s0", "s1", "u3", "a4"]
    assert summary == "they talked" and n == 7
    assert seen == [(["u1", "a1", "u2", "a2", "t1", "t2", "a3"], "SP")]
    assert snapshot(msgs) == before
    assert all(k is msgs[[m.id for m in msgs].index(k.id)] for k in kept)  # kept ones are untouched


def test_summarize_older_passes_the_previous_summary_first():
    received = []
    summarize_older(conversation(), keep_recent_interactions=2, summarize=lambda o, p: received.append(o) or "s",
                    previous_summary="old stuff", output_max_tokens=100, count_tokens=chars)
    first = received[0][0]
    assert first.role == "user" and first.content == SUMMARY_HEADER + "old stuff"
    assert [m.id for m in received[0][1:]] == ["u1", "a1"]


def test_summarize_older_with_nothing_older_is_a_no_op():
    msgs = conversation()
    called = []
    kept, summary, n = summarize_older(msgs, keep_recent_interactions=3, summarize=lambda o, p: called.append(1),
                                       output_max_tokens=10, count_tokens=chars)
    assert kept == msgs and summary is None and n == 0 and not called
    assert summarize_older([], keep_recent_interactions=0, summarize=lambda o, p: "x",
                           output_max_tokens=10, count_tokens=chars) == ([], None, 0)


def test_summarize_older_keep_zero_summarizes_everything_unless_a_call_is_pending():
    msgs = conversation()
    kept, summary, n = summarize_older(msgs, keep_recent_interactions=0, summarize=lambda o, p: "all",
                                       output_max_tokens=10, count_tokens=chars)
    assert [m.id for m in kept] == ["s0", "s1"] and n == 9
    pending = msgs + [user("q4", id="u4"), assistant(calls=["c9", "c10"], id="a9"), tool("c9", "r", id="t9")]
    kept, _, n = summarize_older(pending, keep_recent_interactions=0, summarize=lambda o, p: "all",
                                 output_max_tokens=10, count_tokens=chars)
    assert [m.id for m in kept] == ["s0", "s1", "u4", "a9", "t9"] and n == 9


def test_summary_is_capped_at_a_word_boundary():
    long = "word " * 500
    _, summary, _ = summarize_older(conversation(), keep_recent_interactions=1, summarize=lambda o, p: long,
                                    output_max_tokens=10, count_tokens=chars)
    assert chars(summary) <= 10
    assert summary.split() and all(w == "word" for w in summary.split())
    assert cap_text("abcdefghijklmnop", 2, chars) == "abcdefgh"  # no space: hard cut
    assert cap_text("fits", 5, chars) == "fits"


def test_summarize_errors():
    with pytest.raises(MemoryTypeError) as info:
        summarize_older(conversation(), keep_recent_interactions=1, summarize=lambda o, p: 42,
                        output_max_tokens=10, count_tokens=chars)
    assert info.value.field == "compact_fn"

    class Boom(RuntimeError):
        pass

    def boom(older, prompt):
        raise Boom("llm down")

    with pytest.raises(Boom):
        summarize_older(conversation(), keep_recent_interactions=1, summarize=boom,
                        output_max_tokens=10, count_tokens=chars)


def test_summary_message_shape():
    m = summary_message("abc")
    assert m.role == "user" and m.content == "[Summary of the earlier conversation]\nabc"
    assert m.metadata == {"compaction_summary": True}


# ---------------------------------------------------------------- backward packing


def test_interaction_units_merge_across_an_open_call():
    msgs = [user("q1"), assistant(calls=["c"]), user("interjection"), tool("c", "r"), user("q2")]
    assert interaction_units(msgs) == [[0, 1, 2, 3], [4]]
    assert interaction_units([system("s")]) == []
    assert interaction_units([assistant("hello"), user("q")]) == [[0], [1]]


def test_pack_backward_keeps_system_then_newest_units():
    msgs = [system("s" * 8), user("a" * 36), assistant("b" * 36), user("c" * 36), assistant("d" * 36),
            user("e" * 16)]
    # tokens: system 6, each 36-char message 13, last 8
    assert contents(pack_backward(msgs, budget=6 + 8 + 26, count_tokens=chars)) == \
        ["s" * 8, "c" * 36, "d" * 36, "e" * 16]
    assert contents(pack_backward(msgs, budget=6 + 8 + 25, count_tokens=chars)) == ["s" * 8, "e" * 16]
    assert pack_backward(msgs, budget=10 ** 6, count_tokens=chars) == msgs
    # the newest unit stays even when alone over budget
    assert contents(pack_backward(msgs, budget=0, count_tokens=chars)) == ["s" * 8, "e" * 16]
    assert pack_backward([], budget=5, count_tokens=chars) == []


def test_pack_backward_stops_at_the_first_unit_that_does_not_fit():
    msgs = [user("tiny"), user("x" * 400), user("last")]
    assert contents(pack_backward(msgs, budget=20, count_tokens=chars)) == ["last"]


def test_pack_backward_counts_images():
    msgs = [user("old"), user("new", images=["a.png"])]
    assert contents(pack_backward(msgs, budget=808, count_tokens=chars)) == ["new"]
    assert len(pack_backward(msgs, budget=808, count_tokens=chars, image_token_estimate=10)) == 2


def test_pack_backward_keeps_a_pending_call_whole():
    msgs = [user("q1"), assistant("a" * 100), user("q2"), assistant(calls=["c1", "c2"]), tool("c1", "r" * 400)]
    out = pack_backward(msgs, budget=1, count_tokens=chars)
    assert contents(out) == ["q2", None, "r" * 400]


# ---------------------------------------------------------------- compact


def hand_made() -> list[Message]:
    return [system("s" * 8, id="s0"),
            user("a" * 36, id="u1"), assistant("b" * 36, id="a1"),
            user("c" * 36, id="u2"), assistant(calls=["c1"], id="a2"), tool("c1", "r" * 400, id="t1"),
            assistant("d" * 36, id="a3"),
            user("e" * 16, id="u3")]


def test_compact_stats_on_a_hand_made_example():
    msgs = hand_made()
    before = snapshot(msgs)
    calls = []

    def fake(older, prompt):
        calls.append(([m.id for m in older], [m.content for m in older][:1], prompt))
        return "short summary"

    cfg = CompactionConfig(token_threshold=100, min_reduction_ratio=0.5,
                           tool_truncation=ToolTruncationConfig(max_tool_message_tokens=20))
    result = compact(msgs, config=cfg, count_tokens=chars, summarize=fake, system_prompt="p" * 20,
                     previous_summary="old facts")
    assert isinstance(result, CompactionResult)
    assert snapshot(msgs) == before
    assert [m.id for m in result.messages] == ["s0", "u3"]
    assert result.summary == "short summary"
    assert calls == [([None, "u1", "a1", "u2", "a2", "t1", "a3"],
                      [SUMMARY_HEADER + "old facts"], "p" * 20)]
    s = result.stats
    prev = mt(summary_message("old facts"))
    new = mt(summary_message("short summary"))
    assert s.tokens_before == 5 + prev + sum(mt(m) for m in msgs)
    assert s.tokens_after == 5 + new + 6 + 8
    assert (s.threshold, s.target, s.mode) == (100, 50, "compaction")
    assert (s.messages_before, s.messages_after, s.messages_compacted, s.messages_truncated) == (8, 2, 6, 1)
    assert s.processors_run == ["tool_truncation", "summarization"]
    assert s.summary_tokens == new
    d = s.as_dict()
    assert isinstance(d, dict) and d["messages_compacted"] == 6 and d["processors_run"] == s.processors_run
    assert isinstance(s, CompactionStats)


def test_compact_does_nothing_under_target():
    msgs = hand_made()
    result = compact(msgs, config=CompactionConfig(token_threshold=10_000),
                     summarize=lambda o, p: pytest.fail("must not be called"))
    assert result.messages == msgs and result.summary is None
    assert result.stats.processors_run == [] and result.stats.messages_compacted == 0
    assert result.stats.tokens_before == result.stats.tokens_after


def test_compact_stops_as_soon_as_under_target():
    msgs = hand_made()
    # truncating the 104-token tool result is enough for this target
    total = sum(mt(m) for m in msgs)
    cfg = CompactionConfig(token_threshold=total - 60, min_reduction_ratio=0.0,
                           tool_truncation=ToolTruncationConfig(max_tool_message_tokens=20))
    result = compact(msgs, config=cfg, summarize=lambda o, p: pytest.fail("must not be called"))
    assert result.stats.processors_run == ["tool_truncation"]
    assert len(result.messages) == len(msgs) and result.summary is None
    assert result.stats.tokens_after <= result.stats.target


def test_compact_honours_processor_order_and_exclusions():
    msgs = hand_made()
    cfg = CompactionConfig(token_threshold=60, processor_order=["backward_packing", "summarization"])
    result = compact(msgs, config=cfg, summarize=lambda o, p: "s")
    assert result.stats.processors_run == ["backward_packing"]
    assert [m.id for m in result.messages] == ["s0", "u3"] and result.summary is None
    cfg = CompactionConfig(token_threshold=60, excluded_processors=["summarization", "tool_truncation"])
    result = compact(msgs, config=cfg, summarize=lambda o, p: pytest.fail("excluded"))
    assert result.stats.processors_run == ["backward_packing"]
    cfg = CompactionConfig(token_threshold=60, excluded_processors=["backward_packing"],
                           tool_truncation=ToolTruncationConfig(max_tool_message_tokens=5))
    result = compact(msgs, config=cfg)  # no summarize: summarization is skipped, nothing recorded
    assert result.stats.processors_run == ["tool_truncation"]
    assert len(result.messages) == len(msgs) and result.stats.messages_truncated == 1


def test_compact_packing_accounts_for_the_summary_message():
    msgs = hand_made()
    big = "z " * 200  # 100 tokens of summary
    cfg = CompactionConfig(token_threshold=130, min_reduction_ratio=0.0,
                           summarization=SummarizationConfig(keep_recent_interactions=2))
    result = compact(msgs, config=cfg, summarize=lambda o, p: big)
    assert result.stats.processors_run == ["tool_truncation", "summarization", "backward_packing"]
    assert result.stats.tokens_after == sum(mt(m) for m in result.messages) + mt(summary_message(result.summary))
    assert result.stats.tokens_after <= 130
    assert all(m.metadata.get("compaction_summary") is None for m in result.messages)


def test_compact_keep_zero_still_keeps_the_latest_turn():
    cfg = CompactionConfig(token_threshold=40, summarization=SummarizationConfig(keep_recent_interactions=0))
    result = compact(hand_made(), config=cfg, summarize=lambda o, p: "s")
    assert [m.id for m in result.messages] == ["s0", "u3"]


def test_sliding_window_mode_never_summarizes_or_truncates():
    msgs = hand_made()
    cfg = CompactionConfig(token_threshold=60, mode="sliding_window",
                           tool_truncation=ToolTruncationConfig(max_tool_message_tokens=1))
    result = compact(msgs, config=cfg, summarize=lambda o, p: pytest.fail("no summarizing"))
    assert result.stats.processors_run == ["backward_packing"] and result.summary is None
    assert [m.id for m in result.messages] == ["s0", "u3"]
    assert result.stats.mode == "sliding_window" and result.stats.messages_truncated == 0


def test_select_window_packs_to_the_threshold():
    msgs = hand_made()
    cfg = CompactionConfig(token_threshold=6 + 8 + 13 + 1)
    assert [m.id for m in select_window(msgs, config=cfg, count_tokens=chars)] == ["s0", "u3"]
    assert select_window(msgs, config=CompactionConfig(token_threshold=10 ** 6)) == msgs
    # the system prompt counts against the threshold
    big = CompactionConfig(token_threshold=sum(mt(m) for m in msgs))
    assert select_window(msgs, config=big) == msgs
    assert len(select_window(msgs, config=big, system_prompt="p" * 8)) < len(msgs)


def test_compact_preserves_images_reasoning_and_pairing():
    reasoning = [{"type": "reasoning.encrypted", "data": "ßig\u2028nature", "nested": {"a": [1, 2.5, None]}}]
    msgs = [user("old " * 300, id="u0"), assistant("old answer", id="a0"),
            user("look", images=["data:image/png;base64,iVBORw0KGgo=", "https://x/y.png"], id="u1"),
            assistant(calls=["k1", "k2"], reasoning_details=reasoning, id="a1"),
            tool("k1", "result one " * 200, id="t1"), tool("k2", "two", id="t2", images=["r.png"]),
            assistant("done", reasoning_details=reasoning, id="a2")]
    cfg = CompactionConfig(token_threshold=2500, tool_truncation=ToolTruncationConfig(max_tool_message_tokens=50))
    result = compact(msgs, config=cfg, summarize=lambda o, p: "s")
    by_id = {m.id: m for m in result.messages}
    assert list(by_id) == ["u1", "a1", "t1", "t2", "a2"]
    for m in result.messages:
        orig = next(o for o in msgs if o.id == m.id)
        assert m.images == orig.images and m.reasoning_details == orig.reasoning_details
        assert m.model_dump_json(include={"images", "reasoning_details", "tool_calls", "tool_call_id"}) == \
            orig.model_dump_json(include={"images", "reasoning_details", "tool_calls", "tool_call_id"})
    assert by_id["t1"].metadata["truncated_from_tokens"] == 550


def test_compact_argument_types():
    with pytest.raises(MemoryTypeError):
        compact([], config={"token_threshold": 5})  # type: ignore[arg-type]
    with pytest.raises(MemoryTypeError) as info:
        compact([], config=CompactionConfig(token_threshold=5), summarize="nope")  # type: ignore[arg-type]
    assert info.value.field == "compact_fn"


def test_compact_propagates_summarizer_errors():
    def boom(older, prompt):
        raise TimeoutError("slow")

    with pytest.raises(TimeoutError):
        compact(hand_made(), config=CompactionConfig(token_threshold=40), summarize=boom)


def test_compact_with_pending_calls_protects_the_open_unit():
    msgs = hand_made() + [assistant(calls=["p1", "p2"], id="ap"), tool("p1", "x" * 4000, id="tp")]
    cfg = CompactionConfig(token_threshold=50, summarization=SummarizationConfig(keep_recent_interactions=0))
    result = compact(msgs, config=cfg, summarize=lambda o, p: "s")
    assert [m.id for m in result.messages] == ["s0", "u3", "ap", "tp"]
    assert result.stats.messages_truncated == 0 and result.messages[-1].content == "x" * 4000


# ---------------------------------------------------------------- properties

PROCESSORS = ["tool_truncation", "summarization", "backward_packing"]


@st.composite
def conversations(draw):
    counter = iter(range(10 ** 6))

    def text(max_len: int = 300) -> str:
        n = draw(st.integers(0, max_len))
        return " ".join(["w"] * (n // 2))

    msgs: list[Message] = []
    interactions: list[list[str]] = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.integers(0, 4)) == 0:
            msgs.append(system(text(60), id=f"s{next(counter)}"))
        ids: list[str] = []
        images = draw(st.sampled_from([None, ["a.png"], ["b.png", "data:image/png;base64,AAAA"]]))
        msgs.append(user(text(), id=f"m{next(counter)}", images=images))
        ids.append(msgs[-1].id)
        for _round in range(draw(st.integers(0, 3))):
            calls = [f"c{next(counter)}" for _ in range(draw(st.integers(0, 3)))]
            reasoning = draw(st.sampled_from([None, [{"type": "thought", "sig": "Zm9v"}]]))
            msgs.append(assistant(text(60) or None, calls=calls or None, reasoning_details=reasoning,
                                  id=f"m{next(counter)}"))
            ids.append(msgs[-1].id)
            for c in calls:
                msgs.append(tool(c, text(1500), id=f"m{next(counter)}"))
                ids.append(msgs[-1].id)
        if draw(st.booleans()):
            msgs.append(assistant(text(), id=f"m{next(counter)}"))
            ids.append(msgs[-1].id)
        interactions.append(ids)
    if draw(st.integers(0, 4)) == 0:  # a pending parallel call at the end (only some results arrived)
        calls = [f"c{next(counter)}" for _ in range(draw(st.integers(1, 3)))]
        msgs.append(assistant(None, calls=calls, id=f"m{next(counter)}"))
        interactions[-1].append(msgs[-1].id)
        for c in calls[:draw(st.integers(0, len(calls) - 1))]:
            msgs.append(tool(c, text(1500), id=f"m{next(counter)}"))
            interactions[-1].append(msgs[-1].id)
    return msgs, interactions


configs = st.builds(
    lambda threshold, ratio, order, excluded, max_tool, out_max, keep, estimate, mode: CompactionConfig(
        token_threshold=threshold, min_reduction_ratio=ratio, processor_order=order,
        excluded_processors=excluded, mode=mode, image_token_estimate=estimate,
        tool_truncation=ToolTruncationConfig(max_tool_message_tokens=max_tool),
        summarization=SummarizationConfig(output_max_tokens=out_max, keep_recent_interactions=keep)),
    st.integers(1, 5000), st.floats(0.0, 0.9), st.permutations(PROCESSORS),
    st.lists(st.sampled_from(PROCESSORS), max_size=2, unique=True), st.integers(1, 400),
    st.integers(1, 200), st.integers(0, 3), st.sampled_from([0, 85, 800]),
    st.sampled_from(["compaction", "compaction", "compaction", "sliding_window"]),
)


def fake_summarize(older: list[Message], prompt: str | None) -> str:
    return f"prompt={prompt!r} " + " ".join(m.id or "previous" for m in older)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), configs, st.sampled_from([None, "You are terse."]),
       st.sampled_from([None, "earlier: the user likes jazz"]), st.sampled_from([True, True, True, False]))
def test_compact_invariants(conv, cfg, system_prompt, previous_summary, with_summarizer):
    msgs, interactions = conv
    frozen_list = list(msgs)
    before = snapshot(msgs)
    result = compact(msgs, config=cfg, count_tokens=chars,
                     summarize=fake_summarize if with_summarizer else None,
                     system_prompt=system_prompt, previous_summary=previous_summary)
    out = result.messages
    est = cfg.image_token_estimate
    originals = {m.id: m for m in msgs}

    # (e) the input is never mutated
    assert msgs == frozen_list and all(a is b for a, b in zip(msgs, frozen_list, strict=True))
    assert snapshot(msgs) == before

    # the output is an order-preserving subsequence of the input
    in_ids = [m.id for m in msgs]
    positions = [in_ids.index(m.id) for m in out]
    assert positions == sorted(positions) and len(set(positions)) == len(positions)

    # (a) tool results and their calls stay together
    out_calls = {c["id"]: m.id for m in out for c in (m.tool_calls or [])}
    for m in out:
        if m.role == "tool":
            assert m.tool_call_id in out_calls
    in_results = {m.tool_call_id for m in msgs if m.role == "tool"}
    out_results = {m.tool_call_id for m in out if m.role == "tool"}
    for call_id in out_calls:
        assert (call_id in in_results) == (call_id in out_results)

    # (b) every system message is kept
    assert [m.id for m in msgs if m.role == "system"] == [m.id for m in out if m.role == "system"]

    # (c) the newest interaction is kept verbatim (tool results may be truncated)
    out_by_id = {m.id: m for m in out}
    for mid in interactions[-1]:
        assert mid in out_by_id
    for m in out:
        orig = originals[m.id]
        assert m.images == orig.images and m.reasoning_details == orig.reasoning_details
        assert (m.tool_calls, m.tool_call_id, m.role, m.name) == \
               (orig.tool_calls, orig.tool_call_id, orig.role, orig.name)
        if m.content != orig.content:
            assert m.role == "tool" and m.metadata["truncated_from_tokens"] == chars(orig.content)
            assert chars(m.content) <= cfg.tool_truncation.max_tool_message_tokens
            assert orig.content.startswith(m.content.split("\n…[")[0])
            assert cfg.mode == "compaction" and "tool_truncation" in cfg.processors()

    # the stats add up
    s = result.stats
    shown = result.summary if result.summary is not None else previous_summary
    summary_tokens = mt(summary_message(shown), est) if shown else 0
    prompt_tokens = chars(system_prompt) if system_prompt else 0
    assert s.summary_tokens == summary_tokens
    assert s.tokens_after == prompt_tokens + summary_tokens + sum(mt(m, est) for m in out)
    assert s.tokens_before == prompt_tokens + (mt(summary_message(previous_summary), est) if previous_summary
                                               else 0) + sum(mt(m, est) for m in msgs)
    assert (s.messages_before, s.messages_after, s.messages_compacted) == (len(msgs), len(out), len(msgs) - len(out))
    assert s.threshold == cfg.token_threshold and s.target == cfg.target()
    if result.summary is not None:
        assert with_summarizer and cfg.mode == "compaction"
        assert chars(result.summary) <= cfg.summarization.output_max_tokens
    if s.tokens_before <= s.target:
        assert out == msgs and s.processors_run == []
    if cfg.mode == "sliding_window":
        assert s.processors_run in ([], ["backward_packing"]) and s.messages_truncated == 0

    # (d) under target whenever packing runs and the newest interaction alone fits
    packs = cfg.mode == "sliding_window" or "backward_packing" in cfg.processors()
    newest = sum(mt(out_by_id[mid], est) for mid in interactions[-1])
    systems = sum(mt(m, est) for m in out if m.role == "system")
    if packs and newest + systems + prompt_tokens + summary_tokens <= s.target:
        assert s.tokens_after <= s.target
        event("(d) applies")
    event(f"processors_run={s.processors_run}")
    event(f"compacted={bool(s.messages_compacted)} summarizer={with_summarizer}")
