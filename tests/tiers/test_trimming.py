"""Tests of the short-term window logic (tiers/trimming.py)."""

from __future__ import annotations

import doctest
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tiers.trimming as window_module
from tiers.trimming import (
    TrimPlan,
    cut_points,
    message_token_counts,
    pending_tool_calls,
    plan_trim,
    split_interactions,
)
from unified_memory.errors import MemoryTypeError, MemoryValueError
from unified_memory.types import Message


def words(text: str) -> int:
    return len(text.split())


def U(text: str = "hi") -> Message:
    return Message(role="user", content=text)


def A(text: str = "ok", calls: list[str | None] | None = None) -> Message:
    tool_calls = None if calls is None else [{} if c is None else {"id": c} for c in calls]
    return Message(role="assistant", content=text, tool_calls=tool_calls)


def T(call_id: str | None, text: str = "result") -> Message:
    return Message(role="tool", content=text, tool_call_id=call_id)


def S(text: str = "be brief") -> Message:
    return Message(role="system", content=text)


# --------------------------------------------------------------------------- generator


@dataclass
class Conversation:
    messages: list[Message]
    opener: dict[int, int]  # tool message index -> index of the assistant message that opened it
    pending_after: list[int]  # open calls after each message (ground truth)


@st.composite
def conversations(draw: st.DrawFn, sloppy: bool = False) -> Conversation:
    """Valid conversations; ``sloppy`` lets a user speak while calls are still open."""
    messages: list[Message] = []
    opener: dict[int, int] = {}
    pending_after: list[int] = []
    open_calls: list[tuple[str | None, int]] = []  # (id or None if anonymous, opener index), oldest first
    next_id = 0
    for _ in range(draw(st.integers(0, 40))):
        kinds = ["assistant", "call", "system"]
        if not open_calls or sloppy:
            kinds.append("user")
        if open_calls:
            kinds += ["result"] * 3
        kind = draw(st.sampled_from(kinds))
        text = " ".join(["w"] * draw(st.integers(0, 6)))
        if kind == "user":
            messages.append(U(text))
        elif kind == "system":
            messages.append(S(text))
        elif kind == "assistant":
            messages.append(A(text))
        elif kind == "call":
            anonymous = draw(st.integers(0, 4)) == 0
            ids: list[str | None] = []
            for _ in range(draw(st.integers(1, 3))):
                ids.append(None if anonymous else f"c{next_id}")
                next_id += 1
            open_calls += [(i, len(messages)) for i in ids]
            messages.append(A(text, calls=ids))
        else:  # a result: any id'd call (out of order), or the oldest call without naming it
            j = draw(st.integers(0, len(open_calls) - 1))
            call_id, opened_by = open_calls[j]
            if call_id is None or (j == 0 and draw(st.booleans())):
                j, (call_id, opened_by) = 0, open_calls[0]
                call_id = None
            opener[len(messages)] = opened_by
            del open_calls[j]
            messages.append(T(call_id, text))
        pending_after.append(len(open_calls))
    return Conversation(messages, opener, pending_after)


limits = st.tuples(st.integers(1, 8), st.none() | st.integers(1, 30))


def check_run(conv: Conversation, max_messages: int, max_tokens: int | None, sloppy: bool) -> None:
    msgs = conv.messages
    tokens = message_token_counts(msgs, words)
    window: list[int] = []  # original indices, in order
    trimmed: list[int] = []
    for step in range(len(msgs)):
        window.append(step)
        view = [msgs[j] for j in window]
        pending = pending_tool_calls(view)
        assert pending == conv.pending_after[step]
        plan = plan_trim(view, max_messages=max_messages, max_tokens=max_tokens,
                         token_counts=[tokens[j] for j in window])
        # the plan picked the smallest valid cut that fits
        for c in cut_points(view):
            if c < plan.cut and plan.reason == "fits":
                kept = [j for j in window[c:] if msgs[j].role != "system"]
                assert len(kept) > max_messages or (max_tokens is not None and
                                                    sum(tokens[j] for j in kept) > max_tokens)
        dropped = [window[k] for k in plan.drop]
        if pending:  # (3) no trim while calls are pending
            assert dropped == []
        if dropped:  # (5) whole interactions: the trimmed prefix ends right before a user message
            assert msgs[window[plan.cut]].role == "user"
            assert all(msgs[j].role == "system" for j in window[:plan.cut] if j not in dropped)
        kept_view, dropped_view = plan.apply(view)
        assert dropped_view == [msgs[j] for j in dropped]
        trimmed += dropped
        window = [j for j in window if j not in set(dropped)]
        assert kept_view == [msgs[j] for j in window]
        # (1) nothing lost, order kept, pinned system messages never trimmed
        assert sorted(trimmed + window) == list(range(step + 1))
        assert trimmed == sorted(trimmed) and window == sorted(window)
        assert all(msgs[j].role != "system" for j in trimmed)
        body = [j for j in window if msgs[j].role != "system"]
        assert not trimmed or not body or max(trimmed) < min(body)
        # (2) no tool result without the assistant message that opened it
        for j in window:
            if j in conv.opener:
                assert conv.opener[j] in window
        # (4) within limits, or as small as whole interactions allow
        if not pending:
            fits = len(body) <= max_messages and (max_tokens is None or
                                                  sum(tokens[j] for j in body) <= max_tokens)
            if not sloppy:
                assert fits or len(split_interactions([msgs[j] for j in body])) == 1
            view = [msgs[j] for j in window]
            first_body = next((k for k, m in enumerate(view) if m.role != "system"), len(view))
            assert fits or not [c for c in cut_points(view) if c > first_body]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(conversations(), limits)
def test_window_invariants(conv: Conversation, lim: tuple[int, int | None]) -> None:
    check_run(conv, *lim, sloppy=False)


@settings(max_examples=150, deadline=None)
@given(conversations(sloppy=True), limits)
def test_window_invariants_when_user_interrupts_pending_calls(
        conv: Conversation, lim: tuple[int, int | None]) -> None:
    check_run(conv, *lim, sloppy=True)


@given(conversations(sloppy=True))
def test_split_interactions_partitions_in_order(conv: Conversation) -> None:
    groups = split_interactions(conv.messages)
    assert [m for g in groups for m in g] == conv.messages
    assert all(g and (k == 0 or g[0].role == "user") for k, g in enumerate(groups))
    assert all(m.role != "user" for g in groups for m in g[1:])


# --------------------------------------------------------------------------- examples


def run(messages: list[Message], **limits: int) -> list[Message]:
    """Append one by one, trimming after each append; return the final window."""
    win: list[Message] = []
    for m in messages:
        win.append(m)
        counts = message_token_counts(win, words) if "max_tokens" in limits else None
        win, _ = plan_trim(win, token_counts=counts, **limits).apply(win)
    return win


def test_sliding_window_keeps_latest_interactions() -> None:
    # selectools' example: a 10-message conversation in a smaller window keeps the newest turns
    convo = [m for i in range(5) for m in (U(f"Message {i}"), A(f"Reply {i}"))]
    assert [m.content for m in run(convo, max_messages=4)] == ["Message 3", "Reply 3", "Message 4", "Reply 4"]
    # an odd limit never splits an interaction: 3 would cut into "Message 3"/"Reply 3"
    assert [m.content for m in run(convo, max_messages=3)] == ["Message 4", "Reply 4"]


def test_tool_pair_leaves_with_its_results() -> None:
    convo = [U("weather?"), A("", calls=["c1", "c2"]), T("c2", "rain"), T("c1", "sun"), A("mixed"),
             U("thanks"), A("welcome")]
    assert plan_trim(convo[:3], max_messages=1) == TrimPlan(0, (), "tool_calls_pending")
    assert plan_trim(convo[:5], max_messages=1) == TrimPlan(0, (), "over_limits")
    assert plan_trim(convo[:6], max_messages=1) == TrimPlan(5, (0, 1, 2, 3, 4), "fits")
    assert run(convo, max_messages=1) == convo[5:]


def test_pending_calls_block_trimming_until_answered() -> None:
    convo = [U("a"), A("b"), U("c"), A("", calls=["x"])]
    assert pending_tool_calls(convo) == 1
    assert plan_trim(convo, max_messages=2).reason == "tool_calls_pending"
    done = convo + [T("x")]
    assert plan_trim(done, max_messages=2) == TrimPlan(2, (0, 1), "over_limits")
    assert plan_trim(done, max_messages=3) == TrimPlan(2, (0, 1), "fits")


def test_system_messages_are_pinned_and_not_counted() -> None:
    convo = [S(), U("1"), A("1"), S("mid"), U("2"), A("2")]
    plan = plan_trim(convo, max_messages=2)
    assert plan == TrimPlan(4, (1, 2), "fits")
    assert plan.apply(convo)[0] == [convo[0], convo[3], convo[4], convo[5]]
    assert plan_trim([S(), S(), U(), A()], max_messages=2).reason == "within_limits"


def test_leading_unit_before_first_user_is_trimmed_whole() -> None:
    convo = [A("welcome"), A("", calls=["g"]), T("g"), U("q"), A("r")]
    assert split_interactions(convo) == [convo[:3], convo[3:]]
    assert plan_trim(convo, max_messages=2) == TrimPlan(3, (0, 1, 2), "fits")


def test_token_limit() -> None:
    convo = [U("one two three"), A("four five"), U("six"), A("seven eight nine ten")]
    counts = message_token_counts(convo, words)
    assert counts == [3, 2, 1, 4]
    assert plan_trim(convo, max_messages=10, max_tokens=10, token_counts=counts).reason == "within_limits"
    assert plan_trim(convo, max_messages=10, max_tokens=5, token_counts=counts) == TrimPlan(2, (0, 1), "fits")
    assert plan_trim(convo, max_messages=10, max_tokens=4, token_counts=counts).reason == "over_limits"


def test_anonymous_calls_are_counted() -> None:
    assert pending_tool_calls([U(), A(calls=[None, None])]) == 2
    assert pending_tool_calls([U(), A(calls=[None, None]), T(None)]) == 1
    assert pending_tool_calls([U(), A(calls=[None, None]), T("late-id"), T(None)]) == 0


def test_results_answer_by_id_and_unknown_results_answer_nothing() -> None:
    convo = [U(), A(calls=["a", "b"]), T("b")]
    assert pending_tool_calls(convo) == 1
    assert pending_tool_calls(convo + [T("zzz")]) == 1  # answers no open call
    assert pending_tool_calls(convo + [T(None)]) == 0  # answers the oldest open call, "a"
    assert pending_tool_calls([T("orphan"), U()]) == 0


def test_cut_points_skip_users_inside_open_calls() -> None:
    convo = [U("1"), A(calls=["c"]), U("2"), T("c"), U("3")]
    assert cut_points(convo) == [0, 4]
    assert cut_points([A(), U()]) == [1]
    assert cut_points([]) == [] and split_interactions([]) == [] and pending_tool_calls([]) == 0
    assert plan_trim([], max_messages=1) == TrimPlan(0, (), "within_limits")


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"max_messages": 0}, MemoryValueError, "max_messages"),
        ({"max_messages": 1, "max_tokens": 0}, MemoryValueError, "max_tokens"),
        ({"max_messages": True}, MemoryTypeError, "max_messages"),
        ({"max_messages": 1, "max_tokens": 5}, MemoryValueError, "token_counts"),
        ({"max_messages": 1, "max_tokens": 5, "token_counts": [1]}, MemoryValueError, "token_counts"),
        ({"max_messages": 1, "token_counts": [1, -1]}, MemoryValueError, "token_counts"),
    ],
)
def test_validation(kwargs: dict, error: type[Exception], field: str) -> None:
    with pytest.raises(error) as info:
        plan_trim([U(), A()], **kwargs)
    assert info.value.field == field


def test_doctests() -> None:
    result = doctest.testmod(window_module)
    assert result.attempted > 0 and result.failed == 0


def _reference_plan(messages: list[Message], *, max_messages: int, max_tokens: int | None,
                    token_counts: list[int] | None) -> TrimPlan:
    """plan_trim as first written: one message at a time, every message through
    track_open_calls (the fast paths of plan_trim must decide the same)."""
    n = len(messages)
    msgs_from, toks_from = [0] * (n + 1), [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        counted = messages[i].role != "system"
        msgs_from[i] = msgs_from[i + 1] + counted
        toks_from[i] = toks_from[i + 1] + (token_counts[i] if counted and token_counts is not None else 0)

    def fits(cut: int) -> bool:
        return msgs_from[cut] <= max_messages and (max_tokens is None or toks_from[cut] <= max_tokens)

    def plan(cut: int, reason: str) -> TrimPlan:
        return TrimPlan(cut, tuple(i for i in range(cut) if messages[i].role != "system"), reason)  # type: ignore[arg-type]

    if fits(0):
        return plan(0, "within_limits")
    open_calls: list[str | None] = []
    counts = [0]
    for m in messages:
        window_module.track_open_calls(open_calls, m)
        counts.append(len(open_calls))
    if counts[-1]:
        return plan(0, "tool_calls_pending")
    cuts = [i for i, m in enumerate(messages) if m.role == "user" and counts[i] == 0]
    for cut in cuts:
        if fits(cut):
            return plan(cut, "fits")
    return plan(cuts[-1] if cuts else 0, "over_limits")


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(conversations(sloppy=True), limits, st.data())
def test_plan_is_the_reference_plan(conv: Conversation, lim: tuple[int, int | None], data: st.DataObject) -> None:
    max_messages, max_tokens = lim
    msgs = conv.messages
    counts = data.draw(st.lists(st.integers(0, 9), min_size=len(msgs), max_size=len(msgs)))
    for prefix in range(len(msgs) + 1):
        window, tokens = msgs[:prefix], counts[:prefix]
        for given_counts in (tokens, None):
            bound = max_tokens if given_counts is not None else None
            assert plan_trim(window, max_messages=max_messages, max_tokens=bound, token_counts=given_counts) == \
                _reference_plan(window, max_messages=max_messages, max_tokens=bound, token_counts=given_counts)
        assert pending_tool_calls(window) == conv.pending_after[prefix - 1] if prefix else True
