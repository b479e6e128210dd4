"""Sharing a context block's budget between its sections (see :mod:`unified_memory.retrieval.context`
for the rules): by recall score across the recalled sections (:func:`allocate_by_score`), or by
water-filled shares (:func:`allocate_by_shares`); :func:`fill` fills one section greedily by rank.

Costs are those of the lines a section shows: its header, its items' lines, and for episodes one
line per day shown (:func:`cost_of_adding`, :func:`section_cost`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from unified_memory.config import ContextConfig
from unified_memory.retrieval.items import Item, said, score, truncate

__all__ = ["Allocation", "allocate_by_score", "allocate_by_shares", "cost_of_adding", "fill", "said_by",
           "section_cost"]

Allocation = tuple[dict[str, list[Item]], dict[str, int], dict[str, int]]
"""(the items chosen per section, the tokens each uses, the room each was filled against)"""


def cost_of_adding(item: Item, shown: Sequence[Item], header: int, days: Mapping[str, int]) -> int:
    """What showing ``item`` after ``shown`` (its section's items so far, ``days``: how many of
    them each day holds) costs: its line, the section's header when it is the first, its day's
    line when it is the first of its day."""
    cost = item.cost + (0 if shown else header)
    if item.day is not None and not days.get(item.day):
        cost += item.day_cost
    return cost


def section_cost(items: Sequence[Item], header: int) -> int:
    """What a section showing ``items`` costs, line by line (0 for none)."""
    if not items:
        return 0
    days = {i.day: i.day_cost for i in items if i.day is not None}
    return header + sum(i.cost for i in items) + sum(days.values())


def fill(items: list[Item], header: int, budget: int, count: Callable[[str], int],
         contiguous: bool) -> tuple[list[Item], int]:
    """Greedy by rank within ``budget`` (header included); returns (chosen, tokens used). The
    first item alone too long for the room is cut to fit; ``contiguous`` stops at the first item
    that does not fit (the conversation keeps the most recent messages, without a gap)."""
    chosen: list[Item] = []
    days: Counter[str] = Counter()
    used = 0
    for i, item in enumerate(items):
        cost = cost_of_adding(item, chosen, header, days)
        if i == 0 and cost > budget:
            item = truncate(item, budget - header, count) or item
            cost = cost_of_adding(item, chosen, header, days)
        if used + cost <= budget:
            chosen.append(item)
            used += cost
            if item.day is not None:
                days[item.day] += 1
        elif contiguous:
            break
    return chosen, used


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


def _not_shown(items: list[Item], shown: set[str]) -> list[Item]:
    """``items`` without those the conversation section already shows (a recalled turn of the window)."""
    return [i for i in items if i.key not in shown] if shown else items


def allocate_by_shares(candidates: dict[str, list[Item]], headers: dict[str, int], demand: dict[str, int],
                       available: int, config: ContextConfig, count: Callable[[str], int]) -> Allocation:
    """Each section filled by rank within its water-filled share, then the waterfall. Narrows
    ``candidates`` to the memories the conversation section does not show."""
    budgets = _water_fill(available, demand, {n: config.shares.get(n, 0.0) for n in candidates})
    chosen: dict[str, list[Item]] = {}
    used: dict[str, int] = {}
    for n in sorted(candidates, key=lambda n: n != "conversation"):  # the conversation first: what it shows
        if n != "conversation":                                       # is not repeated by the recalled sections
            candidates[n] = _not_shown(candidates[n], {i.key for i in chosen.get("conversation", ()) if i.key})
        chosen[n], used[n] = fill(candidates[n], headers[n], budgets[n], count, n == "conversation")
    for n in candidates:  # waterfall: room left unused goes to sections that left items out
        spare = available - sum(used.values())
        if used[n] < demand[n] and used[n] + spare > budgets[n]:
            budgets[n] = used[n] + spare
            chosen[n], used[n] = fill(candidates[n], headers[n], budgets[n], count, n == "conversation")
    shown = {i.key for i in chosen.get("conversation", ()) if i.key}  # the conversation may have grown
    for n in candidates:
        if n != "conversation" and len(kept := _not_shown(chosen[n], shown)) < len(chosen[n]):
            chosen[n], used[n] = kept, section_cost(kept, headers[n])
    return chosen, used, budgets


def said_by(items: Sequence[Item], shown: Sequence[Item]) -> list[Item]:
    """The ``items`` whose words one of ``shown`` holds in full."""
    if not items or not shown:
        return []
    says = [words for i in shown if (words := said(i))]
    return [i for i in items if (words := said(i)) and any(words in other for other in says)]


def allocate_by_score(candidates: dict[str, list[Item]], headers: dict[str, int], demand: dict[str, int],
                      available: int, ranked: list[str], config: ContextConfig, count: Callable[[str], int],
                      ) -> Allocation:
    """The recalled sections share one budget, filled by recall score across them (so the
    best memories get in whichever section they belong to); the conversation keeps its share.
    An item whose words another shown item holds in full is left out (what the profile says is
    out of ``candidates`` already), and one that holds a shown item's words in full replaces it (a turn and the fact
    promoted from it are said once), so the budget goes to memories not yet in the block.
    Narrows ``candidates`` to the memories the conversation section does not show."""
    group = {"recalled": sum(demand[n] for n in ranked)}
    weights = {"recalled": sum(config.shares.get(n, 0.0) for n in ranked)}
    if "conversation" in candidates:
        group["conversation"] = demand["conversation"]
        weights["conversation"] = config.shares.get("conversation", 0.0)
    shares = _water_fill(available, group, weights)
    chosen: dict[str, list[Item]] = {n: [] for n in candidates}
    used: dict[str, int] = dict.fromkeys(candidates, 0)
    budgets: dict[str, int] = {}
    if "conversation" in candidates:
        budgets["conversation"] = shares["conversation"]
        chosen["conversation"], used["conversation"] = fill(
            candidates["conversation"], headers["conversation"], shares["conversation"], count, True)
    room = available - used.get("conversation", 0)  # the conversation's unused share is not lost
    shown = {i.key for i in chosen.get("conversation", ()) if i.key}
    for n in ranked:
        candidates[n] = _not_shown(candidates[n], shown)
    merged = sorted(((item, n, rank) for n in ranked for rank, item in enumerate(candidates[n])),
                    key=lambda entry: (-score(entry[0]), ranked.index(entry[1]), entry[2]))
    spent = 0
    days: dict[str, Counter[str]] = {n: Counter() for n in ranked}  # how many items of each day a section shows
    # what the block says so far, one "\0" before each item's words (words never hold it, so
    # ``words in on_show`` is "some shown item holds these words")
    on_show = ""
    says = {id(item): said(item) for item, _, _ in merged}  # once per item, not once per comparison
    for item, n, _ in merged:
        words = says[id(item)]
        if words and words in on_show:
            continue  # says nothing the block does not (a fact whose turn is shown)
        if spent + cost_of_adding(item, chosen[n], headers[n], days[n]) <= room:
            for m in ranked if words else ():  # what this says in full (a fact of this very turn) gives its room back
                gone = [o for o in chosen[m] if says[id(o)] and says[id(o)] in words]
                if gone:
                    chosen[m] = [o for o in chosen[m] if all(o is not g for g in gone)]
                    days[m].subtract(o.day for o in gone if o.day is not None)
                    spent -= used[m] - (now := section_cost(chosen[m], headers[m]))
                    used[m] = now
            cost = cost_of_adding(item, chosen[n], headers[n], days[n])
            chosen[n].append(item)
            if item.day is not None:
                days[n][item.day] += 1
            used[n] += cost
            spent += cost
            on_show += "\0" + words
    for n in ranked:
        budgets[n] = used[n]
    return chosen, used, budgets
