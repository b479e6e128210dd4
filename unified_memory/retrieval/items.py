"""The items of a context block: one per memory shown, with its line and what that line costs.

:mod:`unified_memory.retrieval.context` turns every recalled hit and every window message into an
:class:`Item` (:func:`hit_item`, :func:`message_item`), shares the budget between them
(:mod:`unified_memory.retrieval.allocation`) and renders the chosen ones. An item knows

- its line (``- `` and the cleaned, escaped text, :mod:`unified_memory.retrieval.lines`) and the
  line's cost in tokens;
- for an episode, the day it belongs to: episodes are shown under a line per day
  (``### 2023-05-08``), so the date is said once for all the turns of a day; ``day_cost`` is
  that line's cost, paid by the first item of the day a section shows;
- what it says (:func:`said`), to leave out a memory another shown one says in full.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from unified_memory.retrieval.lines import ESCAPES, clean_item, speaker
from unified_memory.types import Message, RecallHit

__all__ = ["Item", "hit_item", "message_item", "forget_rendered", "day_line", "said", "truncate", "score"]

_MIN_KEPT = 12  # a truncated item keeps at least this many characters of its own text
_WORDS = re.compile(r"\w+")


@dataclass(slots=True)  # not frozen: one per hit and per window message of every context (3x faster)
class Item:
    """One memory as a line of a block (see the module docstring)."""

    plain: str  # cleaned, not yet escaped
    prefix: int  # length of the "speaker: " part of plain
    line: str
    cost: int
    hit: RecallHit | None
    key: str | None = None  # the hit's id, or the conversation message's id
    day: str | None = None  # an episode's day (YYYY-MM-DD): the line it is shown under
    day_cost: int = 0  # what that day's line costs
    words: str | None = None  # what it says (:func:`said`), once asked


def score(item: Item) -> float:
    """A recalled item's recall score (every item of a recalled section has its hit)."""
    return item.hit.score if item.hit is not None else 0.0


def day_line(day: str) -> str:
    """The line an episode's day is shown on, above the turns of that day.

    >>> day_line("2023-05-08")
    '### 2023-05-08'
    """
    return f"### {day}"


def _make(prefix: str, text: str, hit: RecallHit | None, count: Callable[[str], int], cap: int,
          key: str | None = None, day: str | None = None) -> Item:
    plain = prefix + text
    if len(plain) > cap:
        plain = plain[: max(cap - 1, 1)].rstrip() + "…"
    line = "- " + (plain.translate(ESCAPES) if "&" in plain or "<" in plain or ">" in plain else plain)
    return Item(plain, len(prefix), line, count(line + "\n"), hit, key if key is not None else (hit.id if hit else None),
                day, count(day_line(day) + "\n") if day is not None else 0)


def _day(when: datetime) -> str:
    return (when.astimezone(UTC) if when.tzinfo else when).date().isoformat()


def _past(hit: RecallHit) -> str:
    """How a hit that is history says so: `` (until 2025-03)`` for a superseded fact (the
    month its validity ended), `` (no longer current)`` for a message that stated one."""
    components = hit.components
    if components.get("status") != "superseded" and components.get("superseded") is not True:
        return ""
    ended = components.get("valid_to")
    if isinstance(ended, str) and len(ended) >= 7:
        return f" (until {ended[:7]})"
    return " (no longer current)"


def hit_item(section: str, hit: RecallHit, count: Callable[[str], int], cap: int) -> Item | None:
    """The item of a recalled hit in ``section`` (``None`` when it shows nothing). An episode
    says who spoke (``hit.components["speaker"]``, else ``["role"]``) and belongs to the day of
    ``hit.created_at`` (UTC); a profile line says who when its hit names a speaker (the key facts
    of a group conversation)."""
    text = clean_item(hit.text)
    if not text:
        return None
    text += _past(hit)
    if section == "profile":
        who = hit.components.get("speaker")
        return _make(f"{speaker(who)}: " if isinstance(who, str) and clean_item(who) else "", text, hit, count, cap)
    if section != "episodes":
        return _make("", text, hit, count, cap)
    who = next((v for k in ("speaker", "role") if isinstance(v := hit.components.get(k), str)
                and clean_item(v)), None)
    role = hit.components.get("role")
    prefix = f"{speaker(who, role if isinstance(role, str) else None)}: " if who else ""
    return _make(prefix, text, hit, count, cap, day=_day(hit.created_at) if hit.created_at is not None else None)


def _message_parts(message: Message) -> tuple[str, str]:
    text = clean_item(message.content or "")
    if not text and message.tool_calls:
        names = [str(f.get("name") or "?") if isinstance(f := call.get("function"), dict) else "?"
                 for call in message.tool_calls]
        text = clean_item("[tool call: " + ", ".join(names) + "]")
    return f"{speaker(message.name or '', message.role) or message.role}: ", text


MESSAGE_ITEMS: dict[tuple[object, ...], Item] = {}  # a window message's item, for the next context
MESSAGE_ITEMS_MAX = 4096
MESSAGE_ITEM_TEXT = 8192  # a longer message is not remembered (the memory held stays small)


def message_item(message: Message, count: Callable[[str], int], cap: int) -> Item | None:
    """The conversation item of ``message`` (``None`` when it shows nothing). Context renders the
    whole window on every call: an item is remembered by everything it is made of (never a
    message with tool calls or a long one), so only new messages are cleaned and counted again."""
    content = message.content
    key = ((message.id, message.role, message.name, content, count, cap)
           if not message.tool_calls and (content is None or len(content) <= MESSAGE_ITEM_TEXT) else None)
    if key is not None:
        try:
            known = MESSAGE_ITEMS.get(key)
        except TypeError:  # a counter that cannot be a key (an object with __eq__ and no __hash__)
            key = known = None
        if known is not None:
            return known
    prefix, text = _message_parts(message)
    item = _make(prefix, text, None, count, cap, key=message.id) if text else None
    if key is not None and item is not None:
        if len(MESSAGE_ITEMS) >= MESSAGE_ITEMS_MAX:
            MESSAGE_ITEMS.clear()
        MESSAGE_ITEMS[key] = item
    return item


def forget_rendered() -> None:
    """Drop every remembered conversation line (``forget`` calls it: a line quotes a message's text)."""
    MESSAGE_ITEMS.clear()


def said(item: Item) -> str:
    """What an item says, to compare with another's: its text without the "speaker: " part,
    case-folded, words only ("" for one too short to tell: under 12 characters)."""
    if item.words is None:
        words = " ".join(_WORDS.findall(item.plain[item.prefix:].casefold()))
        item.words = words if len(words) >= 12 else ""
    return item.words


def truncate(item: Item, room: int, count: Callable[[str], int]) -> Item | None:
    """The longest head of ``item`` (cut with "…") whose line, and its day's line when it has one,
    cost at most ``room``."""
    best, low, high = None, item.prefix + _MIN_KEPT, len(item.plain) - 1
    room -= item.day_cost
    while low <= high:
        mid = (low + high) // 2
        line = "- " + (item.plain[:mid].rstrip() + "…").translate(ESCAPES)
        cost = count(line + "\n")
        if cost <= room:
            best, low = replace(item, plain=item.plain[:mid].rstrip() + "…", line=line, cost=cost, words=None), mid + 1
        else:
            high = mid - 1
    return best
