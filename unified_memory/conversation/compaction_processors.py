"""The processors of the compaction pipeline: pure functions over a list of messages.

None of them mutates its input: a changed message is a new :class:`Message` made with
``model_copy(update=...)``; unchanged messages are returned as they are.

*Units.* Messages are grouped into interactions with
:func:`tiers.trimming.split_interactions` (a user message and what follows it), over the
non-system messages; an interaction that starts while a tool call is still open (not a
:func:`tiers.trimming.cut_points` cut) is merged into the one before, so a unit never
separates a tool call from its results. Any open (pending) call therefore sits in the
newest unit, which the processors never drop or summarize. System messages are never
dropped or summarized and keep their position.

    >>> from unified_memory.conversation.compaction_processors import pack_backward
    >>> from unified_memory.retrieval.tokens import chars_per_token_counter
    >>> msgs = [Message(role="user", content="x" * 400), Message(role="assistant", content="ok"),
    ...         Message(role="user", content="hi")]
    >>> [m.content for m in pack_backward(msgs, budget=50, count_tokens=chars_per_token_counter)]
    ['hi']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tiers.trimming import interaction_units, pending_tool_calls
from unified_memory.errors import wrong_type
from unified_memory.retrieval.tokens import message_tokens
from unified_memory.types import Message

__all__ = [
    "SUMMARY_HEADER",
    "cap_text",
    "interaction_units",
    "pack_backward",
    "summarize_older",
    "summary_message",
    "truncate_tool_results",
]

SUMMARY_HEADER = "[Summary of the earlier conversation]\n"

Summarize = Callable[[list[Message], str | None], str]


def summary_message(summary: str) -> Message:
    """The continuation message that stands for the compacted part of a conversation.

    >>> m = summary_message("The user lives in Lisbon.")
    >>> m.role, m.content.splitlines(), m.metadata
    ('user', ['[Summary of the earlier conversation]', 'The user lives in Lisbon.'], {'compaction_summary': True})
    """
    return Message(role="user", content=SUMMARY_HEADER + summary, metadata={"compaction_summary": True})


def _fit_prefix(text: str, fits: Callable[[str], bool]) -> str:
    """The longest prefix of ``text`` that ``fits`` by binary search, verified (fits must hold for '')."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(text[:mid]):
            lo = mid
        else:
            hi = mid - 1
    while lo > 0 and not fits(text[:lo]):  # count_tokens may be non-monotone: back off until it fits
        lo //= 2
    return text[:lo]


def cap_text(text: str, max_tokens: int, count_tokens: Callable[[str], int]) -> str:
    """``text`` itself if it fits ``max_tokens``, else its longest prefix that does, cut at a word boundary.

    >>> from unified_memory.retrieval.tokens import chars_per_token_counter
    >>> cap_text("alpha beta gamma delta", 3, chars_per_token_counter)
    'alpha beta'
    """
    if count_tokens(text) <= max_tokens:
        return text
    head = _fit_prefix(text, lambda t: count_tokens(t) <= max_tokens)
    if len(head) < len(text) and not text[len(head)].isspace():
        cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
        if cut > 0 and count_tokens(head[:cut].rstrip()) <= max_tokens:
            head = head[:cut]
    stripped = head.rstrip()
    return stripped if count_tokens(stripped) <= max_tokens else head


def _truncated(message: Message, max_tokens: int, original: int,
               count_tokens: Callable[[str], int]) -> Message:
    text = message.content or ""
    content = text[:0]
    for style in ("long", "short", "none"):
        def marker(head: str, style: str = style) -> str:
            if style == "long":
                return f"\n…[tool result truncated: {count_tokens(head)} of {original} tokens kept]"
            return "\n…[tool result truncated]" if style == "short" else ""
        if count_tokens(marker("")) > max_tokens:
            continue
        def fits(h: str, marker: Callable[[str], str] = marker) -> bool:
            return count_tokens(h + marker(h)) <= max_tokens

        head = _fit_prefix(text, fits)
        content = head + marker(head)
        break
    metadata = {**message.metadata, "truncated_from_tokens": original}
    return message.model_copy(update={"content": content, "metadata": metadata})


def truncate_tool_results(messages: Sequence[Message], *, max_tokens: int,
                          count_tokens: Callable[[str], int]) -> tuple[list[Message], int]:
    """Cut every ``tool`` message whose content exceeds ``max_tokens`` to fit, keeping its head.

    A marker ``…[tool result truncated: N of M tokens kept]`` ends the cut content (a
    shorter one, or none, when ``max_tokens`` is too small for it) and
    ``metadata["truncated_from_tokens"]`` is ``M``; every other field is kept. Returns
    the new list and how many messages were truncated.

    >>> from unified_memory.retrieval.tokens import chars_per_token_counter
    >>> msgs = [Message(role="tool", content="word " * 100, tool_call_id="c1")]
    >>> out, n = truncate_tool_results(msgs, max_tokens=20, count_tokens=chars_per_token_counter)
    >>> n, out[0].tool_call_id, chars_per_token_counter(out[0].content) <= 20, out[0].metadata
    (1, 'c1', True, {'truncated_from_tokens': 125})
    """
    out: list[Message] = []
    count = 0
    for m in messages:
        if m.role == "tool" and m.content:
            tokens = count_tokens(m.content)
            if tokens > max_tokens:
                out.append(_truncated(m, max_tokens, tokens, count_tokens))
                count += 1
                continue
        out.append(m)
    return out, count


def summarize_older(messages: Sequence[Message], *, keep_recent_interactions: int,
                    summarize: Summarize, system_prompt: str | None = None,
                    previous_summary: str | None = None, output_max_tokens: int,
                    count_tokens: Callable[[str], int]) -> tuple[list[Message], str | None, int]:
    """Fold all but the newest ``keep_recent_interactions`` units into one summary.

    ``summarize(older, system_prompt)`` is called once; ``older`` starts with the
    previous summary (as :func:`summary_message` text, role ``user``) when there is one.
    The summary is capped to ``output_max_tokens`` at a word boundary. The newest unit is
    kept even with ``keep_recent_interactions=0`` when it has a pending tool call.
    Returns ``(kept messages, new summary, number of messages summarized)``; with nothing
    older it returns the messages unchanged, ``None`` and ``0``. A non-``str`` summary
    raises :class:`~unified_memory.errors.MemoryTypeError` naming ``compact_fn``;
    an exception of ``summarize`` propagates unchanged.

    >>> from unified_memory.retrieval.tokens import chars_per_token_counter
    >>> msgs = [Message(role="system", content="be brief")] + [
    ...     Message(role=r, content=f"{r} {i}") for i in range(3) for r in ("user", "assistant")]
    >>> kept, summary, n = summarize_older(msgs, keep_recent_interactions=1,
    ...     summarize=lambda older, prompt: f"{len(older)} messages", output_max_tokens=100,
    ...     count_tokens=chars_per_token_counter)
    >>> [m.content for m in kept], summary, n
    (['be brief', 'user 2', 'assistant 2'], '4 messages', 4)
    """
    units = interaction_units(messages)
    keep = keep_recent_interactions
    if keep == 0 and units and pending_tool_calls(messages):
        keep = 1
    older_units = units[:len(units) - keep] if keep else units
    older = sorted(i for unit in older_units for i in unit)
    if not older:
        return list(messages), None, 0
    inputs = [Message(role="user", content=SUMMARY_HEADER + previous_summary)] if previous_summary else []
    inputs += [messages[i] for i in older]
    summary = summarize(inputs, system_prompt)
    if not isinstance(summary, str):
        raise wrong_type("compact_fn", "str", summary)
    summary = cap_text(summary, output_max_tokens, count_tokens)
    gone = set(older)
    return [m for i, m in enumerate(messages) if i not in gone], summary, len(older)


def pack_backward(messages: Sequence[Message], *, budget: int, count_tokens: Callable[[str], int],
                  image_token_estimate: int = 800) -> list[Message]:
    """Keep system messages, then whole units from the newest back while the total fits ``budget``.

    Totals use :func:`~unified_memory.retrieval.tokens.message_tokens`. The newest unit is always
    kept, even alone over budget; packing stops at the first older unit that does not fit.

    >>> from unified_memory.retrieval.tokens import chars_per_token_counter
    >>> msgs = [Message(role="user", content="a" * 40), Message(role="user", content="b" * 40),
    ...         Message(role="system", content="rules"), Message(role="user", content="c" * 400)]
    >>> [m.role for m in pack_backward(msgs, budget=10, count_tokens=chars_per_token_counter)]
    ['system', 'user']
    """
    def tokens(i: int) -> int:
        return message_tokens(messages[i], count_tokens, image_token_estimate=image_token_estimate)

    total = sum(tokens(i) for i, m in enumerate(messages) if m.role == "system")
    kept: set[int] = set()
    for n, unit in enumerate(reversed(interaction_units(messages))):
        size = sum(tokens(i) for i in unit)
        if n > 0 and total + size > budget:
            break
        total += size
        kept.update(unit)
    return [m for i, m in enumerate(messages) if m.role == "system" or i in kept]
