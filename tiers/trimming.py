"""Trimming rules of a short-term window: which leading messages of a conversation must leave it.

Pure logic over ``Sequence[Message]`` (oldest first); storage is the caller's job.

* **Interactions.** An interaction is a user message and everything up to the next
  user message; messages before the first user message form a leading unit.
  Trimming removes whole interactions from the front, never part of one.
* **Tool calls.** An assistant message opens one call per ``tool_calls`` entry
  (entries without ``"id"`` open anonymous calls). A ``tool`` message closes the
  open call named by its ``tool_call_id``; with no ``tool_call_id`` it closes the
  oldest open call; with an id that is not open it closes the oldest anonymous call,
  or nothing if there is none. A call is *pending* while open. Nothing is trimmed while any call is pending, and
  a cut never separates a tool result from the assistant message that opened it.
* **Pinned system messages.** ``system`` messages are never trimmed and count
  against neither ``max_messages`` nor ``max_tokens``; they keep their position.
* **Cuts.** A cut at index ``i`` drops the non-system messages of ``messages[:i]``.
  Valid cuts are user messages with no call open just before them.
* **Overflow.** If even the newest interaction exceeds the limits, it stays whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Literal, Protocol

from scoring.errors import invalid, wrong_type
from tiers.records.protocols import TokenCounter
from tiers.records.types import Message

__all__ = [
    "TrimPlan",
    "TrimReason",
    "WindowItem",
    "cut_points",
    "interaction_units",
    "track_open_calls",
    "message_token_counts",
    "pending_tool_calls",
    "plan_trim",
    "split_interactions",
]

class WindowItem(Protocol):
    """What the trimming rules read of a message: any object with these attributes
    (a :class:`Message`, or a lighter row the storage layer builds)."""

    @property
    def role(self) -> str: ...

    @property
    def tool_calls(self) -> list[dict[str, Any]] | None: ...

    @property
    def tool_call_id(self) -> str | None: ...


TrimReason = Literal["within_limits", "tool_calls_pending", "fits", "over_limits"]


@dataclass(frozen=True, slots=True)
class TrimPlan:
    """What :func:`plan_trim` decided.

    ``cut``: the window now starts at this index (``0``: nothing dropped);
    ``drop``: the indices to remove, ascending (the non-system ones before ``cut``);
    ``reason``: ``within_limits`` (nothing must go), ``tool_calls_pending`` (over the
    limits but calls are open, so nothing is dropped yet), ``fits`` (dropped just
    enough to fit) or ``over_limits`` (dropped all that may go and still over the
    limits: the newest interaction alone is too large).

    >>> plan = TrimPlan(cut=2, drop=(0, 1), reason="fits")
    >>> kept, dropped = plan.apply([Message(role="user", content=c) for c in "abc"])
    >>> [m.content for m in kept], [m.content for m in dropped]
    (['c'], ['a', 'b'])
    """

    cut: int
    drop: tuple[int, ...]
    reason: TrimReason

    def apply(self, messages: Sequence[Message]) -> tuple[list[Message], list[Message]]:
        """Split ``messages`` into ``(kept, dropped)``, both in their original order."""
        gone = set(self.drop)
        kept = [m for i, m in enumerate(messages) if i not in gone]
        return kept, [messages[i] for i in self.drop]


def track_open_calls(open_calls: list[str | None], message: WindowItem) -> None:
    """Update ``open_calls`` (oldest first; ``None`` is an anonymous call) for one more
    message, by the rules of the module docstring. Keep the list to follow a growing
    conversation without rescanning it.

    >>> calls = []
    >>> track_open_calls(calls, Message(role="assistant", tool_calls=[{"id": "a"}, {"id": "b"}]))
    >>> track_open_calls(calls, Message(role="tool", content="ok", tool_call_id="a")); calls
    ['b']
    """
    role = message.role
    if role == "assistant":
        calls = message.tool_calls
        if calls:
            open_calls.extend(None if c.get("id") is None else str(c.get("id")) for c in calls)
    elif role == "tool" and open_calls:
        tid = message.tool_call_id
        if tid is None:
            open_calls.pop(0)
        elif tid in open_calls:
            open_calls.remove(tid)
        elif None in open_calls:  # ids only on the results: answers an anonymous call
            open_calls.remove(None)


def _open_before(messages: Sequence[WindowItem]) -> list[int]:
    """``counts[i]``: how many calls are open just before ``messages[i]`` (length n+1)."""
    counts = [0] * (len(messages) + 1)
    open_calls: list[str | None] = []
    for i, m in enumerate(messages, 1):
        role = m.role
        # only an assistant's calls open, and only a tool result with calls open closes one
        if (role == "assistant" and m.tool_calls) or (role == "tool" and open_calls):
            track_open_calls(open_calls, m)
        counts[i] = len(open_calls)
    return counts


def pending_tool_calls(messages: Sequence[WindowItem]) -> int:
    """How many tool calls are still open after the last message.

    >>> call = Message(role="assistant", tool_calls=[{"id": "a"}, {"id": "b"}])
    >>> pending_tool_calls([Message(role="user", content="hi"), call,
    ...                     Message(role="tool", content="ok", tool_call_id="b")])
    1
    """
    return _open_before(messages)[-1]


def cut_points(messages: Sequence[WindowItem]) -> list[int]:
    """The indices where the window may start, ascending.

    ``i`` is a cut point when ``messages[i]`` is a user message and no tool call
    opened before ``i`` is still open at ``i``. Cutting at ``i`` drops the non-system
    messages of ``messages[:i]``. ``0`` is listed only when ``messages[0]`` is a user
    message; not trimming at all is always allowed and needs no cut point.

    >>> msgs = [Message(role="user", content="q1"), Message(role="assistant", tool_calls=[{"id": "c"}]),
    ...         Message(role="user", content="q2"), Message(role="tool", content="r", tool_call_id="c"),
    ...         Message(role="user", content="q3")]
    >>> cut_points(msgs)
    [0, 4]
    """
    return _cuts(messages, _open_before(messages))


def _cuts(messages: Sequence[WindowItem], counts: Sequence[int]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == "user" and counts[i] == 0]


def split_interactions(messages: Sequence[Message]) -> list[list[Message]]:
    """Group messages into interactions: each user message starts a new group.

    Messages before the first user message form a leading group of their own;
    system messages stay in the group where they occur.

    >>> roles = ["assistant", "user", "assistant", "user", "system"]
    >>> [[m.role for m in g] for g in split_interactions([Message(role=r) for r in roles])]
    [['assistant'], ['user', 'assistant'], ['user', 'system']]
    """
    groups: list[list[Message]] = []
    for m in messages:
        if m.role == "user" or not groups:
            groups.append([])
        groups[-1].append(m)
    return groups


def message_token_counts(messages: Sequence[Message], count_tokens: TokenCounter) -> list[int]:
    """``count_tokens(m.text())`` for each message, aligned with ``messages``.

    Compute it once per message and keep it: :func:`plan_trim` takes these counts.

    >>> message_token_counts([Message(role="user", content="a b c")], lambda t: len(t.split()))
    [3]
    """
    return [count_tokens(m.text()) for m in messages]


def _check_limit(field: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(field, "int", value)
    if value < 1:
        raise invalid(field, f"must be at least 1, got {value}")


def plan_trim(
    messages: Sequence[WindowItem],
    *,
    max_messages: int,
    max_tokens: int | None = None,
    token_counts: Sequence[int] | None = None,
) -> TrimPlan:
    """Decide which leading messages leave the window (see the module docstring).

    Limits apply to the non-system messages from the cut on. ``token_counts`` (one
    per message, e.g. from :func:`message_token_counts`) is required with
    ``max_tokens``. When over a limit and no call is pending, the plan cuts at the
    smallest valid cut that satisfies both limits, else at the largest valid cut.

    >>> msgs = [Message(role="system", content="be brief")] + [
    ...     Message(role=r, content=f"{r} {i}") for i in range(3) for r in ("user", "assistant")]
    >>> plan_trim(msgs, max_messages=4)
    TrimPlan(cut=3, drop=(1, 2), reason='fits')
    """
    _check_limit("max_messages", max_messages)
    _check_limit("max_tokens", max_tokens)
    n = len(messages)
    if max_tokens is not None and token_counts is None:
        raise invalid("token_counts", "required when max_tokens is set")
    if token_counts is not None:
        if len(token_counts) != n:
            raise invalid("token_counts", f"needs one count per message ({n}), got {len(token_counts)}")
        if any(t < 0 for t in token_counts):
            raise invalid("token_counts", "counts must be >= 0")
    # suffix totals over non-system messages: msgs_from[i], toks_from[i] cover messages[i:]
    counted = [m.role != "system" for m in messages]
    msgs_from = list(accumulate(reversed(counted), initial=0))[::-1]
    toks_from = ([0] * (n + 1) if token_counts is None else list(accumulate(
        (t if c else 0 for t, c in zip(reversed(token_counts), reversed(counted), strict=True)), initial=0))[::-1])

    def fits(cut: int) -> bool:
        return msgs_from[cut] <= max_messages and (max_tokens is None or toks_from[cut] <= max_tokens)

    def plan(cut: int, reason: TrimReason) -> TrimPlan:
        return TrimPlan(cut, tuple(i for i in range(cut) if counted[i]), reason)

    if fits(0):
        return plan(0, "within_limits")
    counts = _open_before(messages)
    if counts[-1]:
        return plan(0, "tool_calls_pending")
    cuts = _cuts(messages, counts)
    for cut in cuts:
        if fits(cut):
            return plan(cut, "fits")
    return plan(cuts[-1] if cuts else 0, "over_limits")


def interaction_units(messages: Sequence[Message]) -> list[list[int]]:
    """The indices of the non-system messages of each unit, oldest unit first.

    >>> roles = ["system", "user", "assistant", "user", "system", "assistant"]
    >>> interaction_units([Message(role=r) for r in roles])
    [[1, 2], [3, 5]]
    """
    positions = [i for i, m in enumerate(messages) if m.role != "system"]
    rest = [messages[i] for i in positions]
    cuts = set(cut_points(rest))
    units: list[list[int]] = []
    start = 0
    for group in split_interactions(rest):
        indices = positions[start:start + len(group)]
        if units and start not in cuts:
            units[-1].extend(indices)  # starts while a call is open: part of the previous unit
        else:
            units.append(indices)
        start += len(group)
    return units
