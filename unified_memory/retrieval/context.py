"""Pure, deterministic assembly of a token-budgeted memory block.

:func:`assemble` turns ranked recall hits and the short-term window into one
fenced block of text for the next LLM call::

    <memory>
    ## Facts
    - I'm allergic to peanuts
    ## Episodes
    ### 2023-06-27
    - Caroline: I'm thinking of working with trans people
    ### 2023-05-08
    - Caroline: I went to the LGBTQ support group yesterday
    - Melanie: That's cool, Caroline!
    ## Conversation
    - user: what should I cook tonight?
    </memory>

**Rendering.** Sections follow ``config.sections``; an empty section is left out,
header and all, and a block with no item at all is ``""``. Every stored item is
ONE line starting with ``"- "`` (the only other lines are the block's fence, the section headers
``## ...`` and the episodes' days ``### YYYY-MM-DD``, all made here), cleaned by :func:`clean_item` (line breaks become
``" ⏎ "``, tabs spaces, other control and bidi characters are removed, ``& < >``
are escaped as ``&amp; &lt; &gt;``), so stored text can neither forge a section
header nor open or close the block. Facts and entities show ``hit.text``; history
is marked as such: a superseded fact ends in ``(until YYYY-MM)``, the month its
validity ended, and a message that stated one in ``(no longer current)``; an
episode shows ``speaker: text``, the speaker from ``hit.components["speaker"]``, else
``["role"]`` (set by recall; left out when missing, a name cut at 40 characters), under the line
of its day ``### YYYY-MM-DD`` (``hit.created_at``, UTC): the episodes are shown by day, newest
day first (what was said last about a thing comes before what it replaced), a day's turns in the
order they were said (so a date is said once for all the turns of a day, and a conversation reads
as it went; an episode without a time comes first, under no day; ``block.hits`` follows the
order shown); a conversation message shows
``name: content`` (``role: content`` without a name; a name that is another role's
word keeps the real role beside it, ``system (user): ...``; an assistant turn with only
tool calls shows ``[tool call: name, ...]``). An item is capped at
``max_item_chars`` characters, cut with ``"…"``. Hits with empty text, empty
messages and repeated hit ids are skipped.

**Profile.** The user's key facts (:mod:`unified_memory.retrieval.profile`: health and safety
first, then who they are, their people, home, work, standing preferences) open the block under
``## Profile``, whatever the query, within ``config.profile_share`` of the budget (20% by
default) and at most ``config.profile_max_tokens`` (100), filled in order (safety first, then the
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
Item costs are measured line by line (a day's line is paid by the first episode of that day shown); because a real tokenizer is not additive,
the whole text is counted at the end and, while it exceeds ``max_tokens``, the
lowest-ranked item (the oldest message for the conversation) of the section with
the most items (ties: the later section) is dropped. So
``block.tokens == count_tokens(block.text) <= max_tokens`` for any counter.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from scoring.text import term_set
from unified_memory.config import ContextConfig
from unified_memory.errors import invalid, wrong_type
from unified_memory.retrieval.allocation import (
    Allocation,
    allocate_by_score,
    allocate_by_shares,
    fill,
    said_by,
    section_cost,
)
from unified_memory.retrieval.items import Item, day_line, forget_rendered, hit_item, message_item, said
from unified_memory.retrieval.lines import clean_item, escape_item
from unified_memory.types import ContextBlock, Message, RecallHit, SectionUsage

__all__ = ["assemble", "clean_item", "escape_item", "forget_rendered", "informative", "MAX_ITEM_CHARS",
           "HIT_SECTIONS"]

MAX_ITEM_CHARS = 2000
"""The longest an item's text may be, in characters, before it is cut with "…"."""
HIT_SECTIONS = ("facts", "entities", "episodes")
_TITLES = {"profile": "Profile", "facts": "Facts", "entities": "Entities", "episodes": "Episodes",
           "conversation": "Conversation"}


_NEVER = datetime.min  # an episode without a time: before every other


def _as_shown(name: str, items: Sequence[Item]) -> list[Item]:
    """A section's items in the order the block shows them: the conversation oldest first; the
    episodes by day, newest day first, a day's turns in the order they were said (those without a
    day first: under a day's line they would read as that day's); the others best first."""
    if name == "conversation":
        return list(reversed(items))
    if name != "episodes":
        return list(items)
    said_order = sorted(range(len(items)), key=lambda k: (
        (h.created_at.replace(tzinfo=None) if (h := items[k].hit) and h.created_at else _NEVER), k))
    return [items[k] for k in sorted(said_order, key=lambda k: items[k].day or "~", reverse=True)]  # stable


def _profile_items(profile: Sequence[RecallHit], sections: Mapping[str, Sequence[RecallHit]],
                   count: Callable[[str], int], cap: int) -> list[Item]:
    """The profile's lines in the order they are offered room: safety first; then the key facts
    the query recalled, best first (shown here, they are not repeated below: no room lost); then
    the rest in the profile's order."""
    recalled = {h.id: h.score for name in HIT_SECTIONS for h in sections.get(name, ())}
    ordered = sorted(profile, key=lambda h: (h.components.get("category") != "health",
                                             -recalled.get(h.id, float("-inf"))))
    items: list[Item] = []
    seen: set[str] = set()
    for hit in ordered:
        if hit.id not in seen and (line := hit_item("profile", hit, count, cap)) is not None:
            seen.add(hit.id)
            items.append(line)
    return items


def _render(tag: str, order: Sequence[str], chosen: Mapping[str, list[Item]]) -> str:
    lines = [f"<{tag}>"]
    for name in order:
        if items := chosen.get(name):
            lines.append(f"## {_TITLES[name]}")
            day = None
            for item in _as_shown(name, items):
                if item.day is not None and item.day != day:  # an episode's day, on its own line
                    day = item.day
                    lines.append(day_line(day))
                lines.append(item.line)
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
    profile_items = _profile_items(profile, sections, count_tokens, max_item_chars) if config.profile_share > 0 else []
    profile_header = count_tokens(f"## {_TITLES['profile']}\n")
    profile_room = min(int(available * config.profile_share), config.profile_max_tokens)
    profile_chosen, profile_used = fill(profile_items, profile_header, profile_room, count_tokens, False)
    available -= profile_used
    seen = {i.hit.id for i in profile_chosen if i.hit is not None}  # what the profile shows is not repeated
    profile_said = [said(i) for i in profile_chosen]  # (nor what it says, under another id)
    candidates: dict[str, list[Item]] = {}
    for name in order:
        items: list[Item] = []
        if name == "conversation":
            for message in reversed(conversation):  # newest first: recency is the rank
                if (found := message_item(message, count_tokens, max_item_chars)) is not None:
                    items.append(found)
        else:
            for hit in sections.get(name, ()):
                if hit.id not in seen and (item := hit_item(name, hit, count_tokens, max_item_chars)) is not None:
                    seen.add(hit.id)
                    words = said(item) if profile_said else ""
                    if not (words and any(words in other for other in profile_said)):  # the profile says it
                        items.append(item)
        if items:
            candidates[name] = items
    headers = {n: count_tokens(f"## {_TITLES[n]}\n") for n in candidates}
    demand = {n: section_cost(candidates[n], headers[n]) for n in candidates}
    ranked = [n for n in candidates if n != "conversation"]

    def allocate(room: int) -> tuple[*Allocation, dict[str, list[Item]]]:
        """(chosen, used, budgets, the candidates left: those the conversation shows are out)."""
        pool = {n: list(items) for n, items in candidates.items()}
        if query and query.strip() and config.allocation == "score" and len(ranked) > 1:
            return *allocate_by_score(pool, headers, demand, room, ranked, config, count_tokens), pool
        return *allocate_by_shares(pool, headers, demand, room, config, count_tokens), pool

    room = available
    chosen, used, budgets, candidates = allocate(room)
    # a profile line a shown memory says in full (the turn the fact came from) is said once: its
    # room goes to the memories below, if they then still show it (else the block stays as it was);
    # never a health line: safety stays at the head of the block
    redundant = [i for i in said_by(profile_chosen, [i for n in ranked for i in chosen[n]])
                 if i.hit is None or i.hit.components.get("category") != "health"]
    if redundant:
        kept = [i for i in profile_chosen if all(i is not r for r in redundant)]
        freed = profile_used - (profile_header + sum(i.cost for i in kept) if kept else 0)
        again = allocate(room + freed)
        if len(said_by(redundant, [i for n in ranked for i in again[0][n]])) == len(redundant):
            (chosen, used, budgets, candidates), profile_chosen = again, kept
            profile_used, room = profile_used - freed, room + freed
        else:
            redundant = []
    if profile_chosen:
        headers["profile"] = profile_header
        order = ("profile", *order)

    def shown(parts: Mapping[str, list[Item]]) -> dict[str, list[Item]]:
        return {"profile": profile_chosen, **parts} if profile_chosen else dict(parts)

    text = _render(tag, order, shown(chosen))
    tokens = count_tokens(text)
    shown_now = {id(i) for items in chosen.values() for i in items}
    cheapest = min((i.cost for items in candidates.values() for i in items if id(i) not in shown_now), default=None)
    if cheapest is not None and cheapest <= room + max_tokens - tokens - sum(used.values()):
        # each line's cost is rounded up on its own: the whole block costs less than its lines, and
        # the room that leaves is offered once more when a memory left out could use it (kept only
        # if the block still fits)
        more = allocate(room + max_tokens - tokens)
        bigger = _render(tag, order, shown(more[0]))
        if (sum(map(len, more[0].values())) > sum(map(len, chosen.values())) and (cost := count_tokens(bigger)) <= max_tokens
                and len(said_by(redundant, [i for n in ranked for i in more[0][n]])) == len(redundant)):
            (chosen, used, budgets, candidates), text, tokens = more, bigger, cost
    chosen = shown(chosen)
    if profile_chosen:
        used["profile"] = budgets["profile"] = profile_used
        candidates["profile"] = profile_items
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
                                tokens=section_cost(got, headers[n]) if got else 0,
                                dropped=len(candidates.get(n, ())) - len(got))
    hits = [i.hit for n in order for i in _as_shown(n, chosen.get(n, [])) if i.hit is not None]
    return ContextBlock(text=text, tokens=tokens, max_tokens=max_tokens, hits=hits, sections=usage,
                        query=query)
