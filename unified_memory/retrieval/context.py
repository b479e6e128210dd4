"""Pure, deterministic assembly of a token-budgeted memory block.

:func:`assemble` turns ranked recall hits and the short-term window into one
fenced block of text for the next LLM call::

    <memory>
    ## Facts
    - I'm allergic to peanuts
    ## Episodes
    - [2023-05-08] Caroline: I went to the LGBTQ support group yesterday
    ## Conversation
    - user: what should I cook tonight?
    </memory>

**Rendering.** Sections follow ``config.sections``; an empty section is left out,
header and all, and a block with no item at all is ``""``. Every stored item is
ONE line starting with ``"- "``, cleaned by :func:`clean_item` (line breaks become
``" ⏎ "``, tabs spaces, other control and bidi characters are removed, ``& < >``
are escaped as ``&amp; &lt; &gt;``), so stored text can neither forge a section
header nor open or close the block. Facts and entities show ``hit.text``; history
is marked as such: a superseded fact ends in ``(until YYYY-MM)``, the month its
validity ended, and a message that stated one in ``(no longer current)``; an
episode shows ``[YYYY-MM-DD] speaker: text`` from ``hit.created_at`` (UTC) and the
speaker from ``hit.components["speaker"]``, else ``["role"]`` (set by recall)
(each part left out when missing, a name cut at 40 characters); a conversation message shows
``name: content`` (``role: content`` without a name; a name that is another role's
word keeps the real role beside it, ``system (user): ...``; an assistant turn with only
tool calls shows ``[tool call: name, ...]``). An item is capped at
``max_item_chars`` characters, cut with ``"…"``. Hits with empty text, empty
messages and repeated hit ids are skipped.

**Profile.** The user's key facts (:mod:`unified_memory.retrieval.profile`: health and safety
first, then who they are, their people, home, work, standing preferences) open the block under
``## Profile``, whatever the query, within ``config.profile_share`` of the budget (20% by
default) and at most ``config.profile_max_tokens`` (150), filled in order (safety first, then the
key facts the query recalled, best first, then the rest); the rest of the budget, and what the
profile leaves unused, goes to the sections below, which do not repeat a fact the profile shows
(nor its words under another id). The final trimming takes from the profile last.

**Budget.** With a query and ``config.allocation == "score"`` (the default), the
recalled sections (facts, entities, episodes) share one budget, filled greedily by
recall score across them, so the best memories get in whatever their tier (a memory whose
words a shown one holds in full is left out, and one that holds a shown one's words replaces it:
a fact and the turn it came from are said once); the
conversation keeps its water-filled share (below) against them, and what it leaves
unused goes to them (their ``SectionUsage.budget`` is what each used). Otherwise
``max_tokens`` minus the ``<memory>`` frame is shared between the
non-empty sections by ``config.shares`` (a section's header is paid from its own
share). Shares are water-filled: a section whose whole content needs less than
its share takes only what it needs and the rest is re-shared among the others,
until stable. Each section is then filled greedily in rank order (a hit that does
not fit is skipped, a later smaller one may still fit; the conversation keeps the
most recent messages, contiguous, shown oldest first). When the first-ranked item
alone exceeds its section's room it is truncated with ``"…"`` instead of dropped
(if at least a few characters fit). Finally the room still unused is offered to
the sections that left items out, in ``config.sections`` order (waterfall).
``SectionUsage.budget`` is the room a section was last filled against (header
included): its water-filled share, or its use plus the room then unused when
the waterfall gave it more; ``tokens`` is its line-by-line cost.
Item costs are measured line by line; because a real tokenizer is not additive,
the whole text is counted at the end and, while it exceeds ``max_tokens``, the
lowest-ranked item (the oldest message for the conversation) of the section with
the most items (ties: the later section) is dropped. So
``block.tokens == count_tokens(block.text) <= max_tokens`` for any counter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from scoring.text import term_set
from unified_memory.config import ContextConfig
from unified_memory.errors import invalid, wrong_type
from unified_memory.retrieval.lines import ESCAPES, clean_item, escape_item, speaker
from unified_memory.types import ContextBlock, Message, RecallHit, SectionUsage

__all__ = ["assemble", "clean_item", "escape_item", "informative", "MAX_ITEM_CHARS", "HIT_SECTIONS"]

MAX_ITEM_CHARS = 2000
"""The longest an item's text may be, in characters, before it is cut with "…"."""
HIT_SECTIONS = ("facts", "entities", "episodes")
_TITLES = {"profile": "Profile", "facts": "Facts", "entities": "Entities", "episodes": "Episodes",
           "conversation": "Conversation"}
_MIN_KEPT = 12  # a truncated item keeps at least this many characters of its own text


@dataclass(slots=True)  # not frozen: one per hit and per window message of every context (3x faster)
class _Item:
    plain: str  # cleaned, not yet escaped
    prefix: int  # length of the "[date] speaker: " part of plain
    line: str
    cost: int
    hit: RecallHit | None
    key: str | None = None  # the hit's id, or the conversation message's id


def _score(item: _Item) -> float:
    """A recalled item's recall score (every item of a recalled section has its hit)."""
    return item.hit.score if item.hit is not None else 0.0


def _item(prefix: str, text: str, hit: RecallHit | None, count: Callable[[str], int], cap: int,
          key: str | None = None) -> _Item:
    plain = prefix + text
    if len(plain) > cap:
        plain = plain[: max(cap - 1, 1)].rstrip() + "…"
    line = "- " + (plain.translate(ESCAPES) if "&" in plain or "<" in plain or ">" in plain else plain)
    return _Item(plain, len(prefix), line, count(line + "\n"), hit, key if key is not None else (hit.id if hit else None))


_MESSAGE_ITEMS: dict[tuple[object, ...], _Item] = {}  # a window message's item, for the next context
_MESSAGE_ITEMS_MAX = 4096
_MESSAGE_ITEM_TEXT = 8192  # a longer message is not remembered (the memory held stays small)


def _message_item(message: Message, count: Callable[[str], int], cap: int) -> _Item | None:
    """The conversation item of ``message`` (``None`` when it shows nothing). Context renders the
    whole window on every call: an item is remembered by everything it is made of (never a
    message with tool calls or a long one), so only new messages are cleaned and counted again."""
    content = message.content
    key = ((message.id, message.role, message.name, content, count, cap)
           if not message.tool_calls and (content is None or len(content) <= _MESSAGE_ITEM_TEXT) else None)
    if key is not None:
        try:
            known = _MESSAGE_ITEMS.get(key)
        except TypeError:  # a counter that cannot be a key (an object with __eq__ and no __hash__)
            key = known = None
        if known is not None:
            return known
    prefix, text = _message_parts(message)
    item = _item(prefix, text, None, count, cap, key=message.id) if text else None
    if key is not None and item is not None:
        if len(_MESSAGE_ITEMS) >= _MESSAGE_ITEMS_MAX:
            _MESSAGE_ITEMS.clear()
        _MESSAGE_ITEMS[key] = item
    return item


def forget_rendered() -> None:
    """Drop every remembered conversation line (``forget`` calls it: a line quotes a message's text)."""
    _MESSAGE_ITEMS.clear()


def _not_shown(items: list[_Item], shown: set[str]) -> list[_Item]:
    """``items`` without those the conversation section already shows (a recalled turn of the window)."""
    return [i for i in items if i.key not in shown] if shown else items


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


def _hit_parts(section: str, hit: RecallHit) -> tuple[str, str]:
    text = clean_item(hit.text)
    text = text + _past(hit) if text else text
    if not text or section != "episodes":
        return "", text
    prefix = f"[{_day(hit.created_at)}] " if hit.created_at is not None else ""
    who = next((v for k in ("speaker", "role") if isinstance(v := hit.components.get(k), str)
                and clean_item(v)), None)
    role = hit.components.get("role")
    return prefix + (f"{speaker(who, role if isinstance(role, str) else None)}: " if who else ""), text


def _message_parts(message: Message) -> tuple[str, str]:
    text = clean_item(message.content or "")
    if not text and message.tool_calls:
        names = [str(f.get("name") or "?") if isinstance(f := call.get("function"), dict) else "?"
                 for call in message.tool_calls]
        text = clean_item("[tool call: " + ", ".join(names) + "]")
    return f"{speaker(message.name or '', message.role) or message.role}: ", text


def _truncate(item: _Item, room: int, count: Callable[[str], int]) -> _Item | None:
    """The longest head of ``item`` (cut with "…") whose line costs at most ``room``."""
    best, low, high = None, item.prefix + _MIN_KEPT, len(item.plain) - 1
    while low <= high:
        mid = (low + high) // 2
        line = "- " + (item.plain[:mid].rstrip() + "…").translate(ESCAPES)
        cost = count(line + "\n")
        if cost <= room:
            best, low = replace(item, plain=item.plain[:mid].rstrip() + "…", line=line, cost=cost), mid + 1
        else:
            high = mid - 1
    return best


def _fill(items: list[_Item], header: int, budget: int, count: Callable[[str], int],
          contiguous: bool) -> tuple[list[_Item], int]:
    """Greedy by rank within ``budget`` (header included); returns (chosen, tokens used)."""
    room, chosen, used = budget - header, [], 0
    for i, item in enumerate(items):
        if i == 0 and item.cost > room:
            item = _truncate(item, room, count) or item
        if used + item.cost <= room:
            chosen.append(item)
            used += item.cost
        elif contiguous:
            break
    return chosen, (header + used if chosen else 0)


def _water_fill(available: int, demand: dict[str, int], weights: dict[str, float]) -> dict[str, int]:
    budgets: dict[str, int] = {}
    open_, remaining = list(demand), float(available)
    while open_:
        total = sum(weights[n] for n in open_)
        share = {n: remaining * (weights[n] / total if total > 0 else 1 / len(open_)) for n in open_}
        satisfied = [n for n in open_ if demand[n] <= share[n]]
        if not satisfied:
            budgets.update((n, int(share[n])) for n in open_)
            break
        for n in satisfied:
            budgets[n] = demand[n]
            remaining -= demand[n]
            open_.remove(n)
    return budgets


def _allocate_by_shares(candidates: dict[str, list[_Item]], headers: dict[str, int], demand: dict[str, int],
                        available: int, config: ContextConfig, count: Callable[[str], int],
                        ) -> tuple[dict[str, list[_Item]], dict[str, int], dict[str, int]]:
    """Each section filled by rank within its water-filled share, then the waterfall."""
    budgets = _water_fill(available, demand, {n: config.shares.get(n, 0.0) for n in candidates})
    chosen: dict[str, list[_Item]] = {}
    used: dict[str, int] = {}
    for n in sorted(candidates, key=lambda n: n != "conversation"):  # the conversation first: what it shows
        if n != "conversation":                                       # is not repeated by the recalled sections
            candidates[n] = _not_shown(candidates[n], {i.key for i in chosen.get("conversation", ()) if i.key})
        chosen[n], used[n] = _fill(candidates[n], headers[n], budgets[n], count, n == "conversation")
    for n in candidates:  # waterfall: room left unused goes to sections that left items out
        spare = available - sum(used.values())
        if used[n] < demand[n] and used[n] + spare > budgets[n]:
            budgets[n] = used[n] + spare
            chosen[n], used[n] = _fill(candidates[n], headers[n], budgets[n], count, n == "conversation")
    shown = {i.key for i in chosen.get("conversation", ()) if i.key}  # the conversation may have grown
    for n in candidates:
        if n != "conversation" and len(kept := _not_shown(chosen[n], shown)) < len(chosen[n]):
            chosen[n], used[n] = kept, (headers[n] + sum(i.cost for i in kept) if kept else 0)
    return chosen, used, budgets


def _said(item: _Item) -> str:
    """What an item says, to compare with another's: its text without the "[date] speaker: " part,
    case-folded, words only ("" for one too short to tell: under 12 characters)."""
    said = " ".join(re.findall(r"\w+", item.plain[item.prefix:].casefold()))
    return said if len(said) >= 12 else ""


def _allocate_by_score(candidates: dict[str, list[_Item]], headers: dict[str, int], demand: dict[str, int],
                       available: int, ranked: list[str], config: ContextConfig, count: Callable[[str], int],
                       shown_elsewhere: Sequence[_Item] = ()) -> tuple[dict[str, list[_Item]], dict[str, int], dict[str, int]]:
    """The recalled sections share one budget, filled by recall score across them (so the
    best memories get in whichever section they belong to); the conversation keeps its share.
    An item whose words another shown item (or ``shown_elsewhere``: the profile) holds in full is
    left out, and one that holds a shown item's words in full replaces it (a turn and the fact
    promoted from it are said once), so the budget goes to memories not yet in the block."""
    group = {"recalled": sum(demand[n] for n in ranked)}
    weights = {"recalled": sum(config.shares.get(n, 0.0) for n in ranked)}
    if "conversation" in candidates:
        group["conversation"] = demand["conversation"]
        weights["conversation"] = config.shares.get("conversation", 0.0)
    shares = _water_fill(available, group, weights)
    chosen: dict[str, list[_Item]] = {n: [] for n in candidates}
    used: dict[str, int] = dict.fromkeys(candidates, 0)
    budgets: dict[str, int] = {}
    if "conversation" in candidates:
        budgets["conversation"] = shares["conversation"]
        chosen["conversation"], used["conversation"] = _fill(
            candidates["conversation"], headers["conversation"], shares["conversation"], count, True)
    room = available - used.get("conversation", 0)  # the conversation's unused share is not lost
    shown = {i.key for i in chosen.get("conversation", ()) if i.key}
    for n in ranked:
        candidates[n] = _not_shown(candidates[n], shown)
    merged = sorted(((item, n, rank) for n in ranked for rank, item in enumerate(candidates[n])),
                    key=lambda entry: (-_score(entry[0]), ranked.index(entry[1]), entry[2]))
    spent = 0
    on_show = [_said(i) for i in shown_elsewhere]  # the profile's lines: what the block says anyway
    says = {id(item): _said(item) for item, _, _ in merged}  # once per item, not once per comparison
    for item, n, _ in merged:
        said = says[id(item)]
        if said and any(said in other for other in on_show):
            continue  # says nothing the block does not (a fact whose turn is shown, a profile fact)
        cost = item.cost + (0 if chosen[n] else headers[n])
        if spent + cost <= room:
            for m in ranked:  # what this says in full (a fact of this very turn) gives its room back
                for old in [o for o in chosen[m] if said and says[id(o)] and says[id(o)] in said]:
                    chosen[m].remove(old)
                    freed = old.cost + (0 if chosen[m] else headers[m])
                    used[m] -= freed
                    spent -= freed
            cost = item.cost + (0 if chosen[n] else headers[n])
            chosen[n].append(item)
            used[n] += cost
            spent += cost
            on_show.append(said)
    for n in ranked:
        budgets[n] = used[n]
    return chosen, used, budgets


def _render(tag: str, order: Sequence[str], chosen: Mapping[str, list[_Item]]) -> str:
    lines = [f"<{tag}>"]
    for name in order:
        items = chosen.get(name) or []
        if items:
            lines.append(f"## {_TITLES[name]}")
            lines.extend(i.line for i in (reversed(items) if name == "conversation" else items))
    return "\n".join([*lines, f"</{tag}>"])


#: A message with fewer distinct content terms than this ("thanks!", "ok", "Sure.") tells an agent
#: nothing out of its conversation: context() leaves it out of the episodes.
MIN_CONTENT_TERMS = 2


def informative(text: str) -> bool:
    """Whether a past message says something on its own: at least :data:`MIN_CONTENT_TERMS`
    distinct terms that are not stopwords (as the lexical index analyses text).

    >>> [informative(t) for t in ("thanks!", "ok", "Of course. How many guests?", "I'm allergic to peanuts")]
    [False, False, True, True]
    """
    return len(term_set(text)) >= MIN_CONTENT_TERMS


def assemble(*, query: str | None, max_tokens: int, sections: Mapping[str, Sequence[RecallHit]],
             conversation: Sequence[Message], count_tokens: Callable[[str], int],
             config: ContextConfig, max_item_chars: int = MAX_ITEM_CHARS,
             profile: Sequence[RecallHit] = ()) -> ContextBlock:
    """Assemble a fenced memory block that fits ``max_tokens`` (see the module docstring).

    ``sections`` maps ``"facts"``, ``"entities"``, ``"episodes"`` to hits already
    ranked best first; ``conversation`` is the short-term window, oldest first.
    ``profile``: the user's key facts in order (:mod:`unified_memory.retrieval.profile`), shown
    first under ``## Profile`` within ``config.profile_share`` of the budget, filled in order
    (the first that fit stay); those shown are not repeated in the other sections.

    >>> from datetime import UTC, datetime
    >>> from unified_memory.config import ContextConfig
    >>> from unified_memory.retrieval.tokens import chars_per_token_counter
    >>> fact = RecallHit(id="f1", tier="long_term", text="I'm allergic to peanuts", score=0.9)
    >>> block = assemble(query="dinner?", max_tokens=100, sections={"facts": [fact]},
    ...                  conversation=[Message(role="user", content="what can I cook?")],
    ...                  count_tokens=chars_per_token_counter, config=ContextConfig())
    >>> print(block.text)
    <memory>
    ## Facts
    - I'm allergic to peanuts
    ## Conversation
    - user: what can I cook?
    </memory>
    >>> block.tokens, [h.id for h in block.hits], block.sections["facts"].items
    (24, ['f1'], 1)
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise wrong_type("max_tokens", "int", max_tokens)
    if max_tokens < 1:
        raise invalid("max_tokens", f"must be at least 1, got {max_tokens}")
    if isinstance(max_item_chars, bool) or not isinstance(max_item_chars, int) or max_item_chars < 2:
        raise invalid("max_item_chars", f"must be an int of at least 2, got {max_item_chars!r}")
    unknown = sorted(set(sections) - set(HIT_SECTIONS))
    if unknown:
        raise invalid("sections", f"unknown sections {unknown}; expected some of {list(HIT_SECTIONS)} "
                                  "(the window goes in `conversation`)")
    tag, order = config.header, tuple(config.sections)
    available = max(max_tokens - count_tokens(f"<{tag}>\n</{tag}>"), 0)
    seen: set[str] = set()
    profile_items: list[_Item] = []
    recalled = {h.id: h.score for name in HIT_SECTIONS for h in sections.get(name, ())}
    # safety first; then the key facts this query recalled, best first (shown here, they are not
    # repeated below: no room lost); then the rest in the profile's order
    profile = sorted(profile, key=lambda h: (h.components.get("category") != "health",
                                             -recalled.get(h.id, float("-inf"))))
    for hit in profile if config.profile_share > 0 else ():
        prefix, text = _hit_parts("facts", hit)
        if text and hit.id not in seen:
            seen.add(hit.id)
            profile_items.append(_item(prefix, text, hit, count_tokens, max_item_chars))
    profile_header = count_tokens(f"## {_TITLES['profile']}\n")
    profile_room = min(int(available * config.profile_share), config.profile_max_tokens)
    profile_chosen, profile_used = _fill(profile_items, profile_header, profile_room, count_tokens, False)
    available -= profile_used
    seen = {i.hit.id for i in profile_chosen if i.hit is not None}  # what the profile shows is not repeated
    profile_said = [_said(i) for i in profile_chosen]  # (nor what it says, under another id)
    candidates: dict[str, list[_Item]] = {}
    for name in order:
        items: list[_Item] = []
        if name == "conversation":
            for message in reversed(conversation):  # newest first: recency is the rank
                if (found := _message_item(message, count_tokens, max_item_chars)) is not None:
                    items.append(found)
        else:
            for hit in sections.get(name, ()):
                prefix, text = _hit_parts(name, hit)
                if text and hit.id not in seen:
                    seen.add(hit.id)
                    item = _item(prefix, text, hit, count_tokens, max_item_chars)
                    said = _said(item) if profile_said else ""
                    if not (said and any(said in other for other in profile_said)):  # the profile says it
                        items.append(item)
        if items:
            candidates[name] = items
    headers = {n: count_tokens(f"## {_TITLES[n]}\n") for n in candidates}
    demand = {n: headers[n] + sum(i.cost for i in candidates[n]) for n in candidates}
    ranked = [n for n in candidates if n != "conversation"]
    if query and query.strip() and config.allocation == "score" and len(ranked) > 1:
        chosen, used, budgets = _allocate_by_score(candidates, headers, demand, available, ranked, config,
                                                   count_tokens, profile_chosen)
    else:
        chosen, used, budgets = _allocate_by_shares(candidates, headers, demand, available, config, count_tokens)
    if profile_chosen:
        chosen = {"profile": profile_chosen, **chosen}
        used["profile"], budgets["profile"], headers["profile"] = profile_used, profile_used, profile_header
        candidates["profile"] = profile_items
        order = ("profile", *order)
    text = _render(tag, order, chosen)
    tokens = count_tokens(text)
    while tokens > max_tokens and any(chosen.values()):
        # ties: the later section; the profile last of all (what the agent must always know)
        others = [n for n in chosen if n != "profile" and chosen[n]] or ["profile"]
        victim = max(reversed(others), key=lambda n: len(chosen[n]))
        chosen[victim].pop()
        text = _render(tag, order, chosen)
        tokens = count_tokens(text)
    if not any(chosen.values()):
        text, tokens = "", 0
    usage = {}
    for n in order:
        got = chosen.get(n, [])
        usage[n] = SectionUsage(name=n, budget=budgets.get(n, 0), items=len(got),
                                tokens=headers[n] + sum(i.cost for i in got) if got else 0,
                                dropped=len(candidates.get(n, ())) - len(got))
    hits = [i.hit for n in order for i in chosen.get(n, []) if i.hit is not None]
    return ContextBlock(text=text, tokens=tokens, max_tokens=max_tokens, hits=hits, sections=usage,
                        query=query)
