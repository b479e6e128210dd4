"""Make scores from different tiers comparable and combine them into one.

Each tier's lexical index reports ``relevance`` in [0, 1] (raw BM25 divided by
the query's upper bound), so a fact, an entity and a message that match the
query equally well start equal. :func:`fuse` then weighs in importance, recency,
the tier and whether the item was superseded::

    score = relevance × (base + w_imp·importance + w_rec·recency) / (base + w_imp + w_rec)
            × tier_weight × (superseded_penalty if superseded else 1)

Relevance multiplies, so an important but irrelevant memory never outranks a
relevant one, and a low-importance fact still surfaces when it is what the
query asks about.

    >>> s = fuse(relevance=1.0, importance=1.0, recency=1.0, tier_weight=1.0,
    ...          base=0.6, importance_weight=0.25, recency_weight=0.15)
    >>> s.score
    1.0
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scoring.decay import halved

__all__ = ["FusedScore", "fuse", "Fuser", "dense_relevance", "hybrid_relevance", "lexical_scale", "diversify"]


@dataclass(slots=True)  # not frozen: built for every candidate of every recall (5x faster)
class FusedScore:
    """A final score with the parts it was made of (goes into ``RecallHit.components``)."""

    score: float
    relevance: float
    importance: float
    recency: float
    tier_weight: float
    superseded: bool

    def components(self) -> dict[str, float | bool]:
        """The parts as a plain dict.

        >>> fuse(relevance=0.5, importance=0.0, recency=0.0, tier_weight=1.0).components()["relevance"]
        0.5
        """
        return {
            "relevance": round(self.relevance, 6),
            "importance": round(self.importance, 6),
            "recency": round(self.recency, 6),
            "tier_weight": self.tier_weight,
            "superseded": self.superseded,
        }


def fuse(
    *,
    relevance: float,
    importance: float,
    recency: float,
    tier_weight: float,
    superseded: bool = False,
    base: float = 0.6,
    importance_weight: float = 0.25,
    recency_weight: float = 0.15,
    superseded_penalty: float = 0.5,
) -> FusedScore:
    """Combine one candidate's parts into its final score (see the module docstring).

    >>> fuse(relevance=1.0, importance=0.0, recency=0.0, tier_weight=1.0).score
    0.6
    >>> fuse(relevance=1.0, importance=1.0, recency=1.0, tier_weight=1.0, superseded=True).score
    0.5
    """
    return Fuser(base, importance_weight, recency_weight, superseded_penalty, half_life_days=1.0)(
        relevance, importance, recency, tier_weight, superseded)


class Fuser:
    """:func:`fuse` with its weights bound and the recency of a time, for scoring many
    candidates (recall fuses every candidate it finds): the same arithmetic, called
    positionally. ``recency`` is :func:`scoring.decay.recency` with ``half_life_days``.

    >>> fuser = Fuser(0.6, 0.25, 0.15, 0.5, half_life_days=30.0)
    >>> fuser(1.0, 0.0, 0.0, 1.0).score, round(fuser.recency(30 * 86400.0), 6)
    (0.6, 0.5)
    """

    __slots__ = ("base", "importance_weight", "recency_weight", "superseded_penalty", "total", "half_life_days")

    def __init__(self, base: float, importance_weight: float, recency_weight: float, superseded_penalty: float,
                 *, half_life_days: float) -> None:
        self.base, self.importance_weight, self.recency_weight = base, importance_weight, recency_weight
        self.superseded_penalty, self.half_life_days = superseded_penalty, half_life_days
        self.total = base + importance_weight + recency_weight

    def recency(self, age_seconds: float) -> float:
        """:func:`scoring.decay.recency` of an age with this half-life (future times: age 0)."""
        return halved(age_seconds, self.half_life_days)

    def __call__(self, relevance: float, importance: float, recency: float, tier_weight: float,
                 superseded: bool = False) -> FusedScore:
        """:func:`fuse` of these parts."""
        relevance = min(1.0, max(0.0, relevance))
        importance = min(1.0, max(0.0, importance))
        recency = min(1.0, max(0.0, recency))
        blend = (self.base + self.importance_weight * importance + self.recency_weight * recency) / self.total
        score = relevance * blend * tier_weight
        if superseded:
            score *= self.superseded_penalty
        return FusedScore(score, relevance, importance, recency, tier_weight, superseded)


def dense_relevance(similarity: float, *, floor: float, ceiling: float) -> float:
    """Map a cosine similarity onto [0, 1]: ``floor`` and below (unrelated texts) give 0,
    ``ceiling`` and above (paraphrases) give 1, linear in between.

    >>> dense_relevance(0.5, floor=0.25, ceiling=0.75)
    0.5
    >>> dense_relevance(0.1, floor=0.2, ceiling=0.8)
    0.0
    """
    return min(1.0, max(0.0, (similarity - floor) / (ceiling - floor)))


def hybrid_relevance(lexical: float, dense: float, *, lexical_weight: float) -> float:
    """Blend lexical relevance (BM25 over its upper bound) and dense relevance, both in [0, 1].

    >>> hybrid_relevance(0.5, 1.0, lexical_weight=0.5)
    0.75
    """
    return lexical_weight * lexical + (1.0 - lexical_weight) * dense


def lexical_scale(matches: Iterable[tuple[float, float]], *, floor: float) -> float:
    """What a tier's BM25 scores for one query are divided by to give lexical relevance:
    the best score among ``matches`` (``(score, relevance)`` pairs, relevance = score over
    the query's upper bound), but at least ``floor`` times that upper bound.

    Dividing by the best score calibrates each query (BM25 magnitudes vary a lot with
    the query's words); the floor keeps a tier whose best match is weak from claiming
    full relevance. 0.0 when nothing matched.

    >>> lexical_scale([(4.0, 0.5), (2.0, 0.25)], floor=0.25)
    4.0
    >>> lexical_scale([(1.0, 0.1)], floor=0.25)
    2.5
    """
    best, bound = 0.0, 0.0
    for score, relevance in matches:
        best = max(best, score)
        if relevance > 0:
            bound = max(bound, score / relevance)
    return max(best, floor * bound)


def diversify(scores: Sequence[float], terms: Sequence[frozenset[str]], *, limit: int,
              diversity: float, overlap: float = 0.5) -> list[tuple[int, float]]:
    """Maximal marginal relevance against near-duplicates: pick ``limit`` items greedily,
    each time the one with the best ``score × (1 - diversity × redundancy)``. Redundancy
    is 0 up to a Jaccard overlap of ``terms`` of ``overlap`` with an item already picked
    and rises linearly to 1 at identical terms, so items on the same topic are left
    alone and only restatements are pushed down. Returns ``(index, adjusted score)`` in
    pick order; ``diversity=0`` keeps the order of ``scores`` (ties: lower index).

    >>> same, other = frozenset({"peanut", "allergi"}), frozenset({"lisbon"})
    >>> [i for i, _ in diversify([0.9, 0.85, 0.5], [same, same, other], limit=2, diversity=0.5)]
    [0, 2]
    """
    if not 0.0 <= diversity <= 1.0:
        raise ValueError(f"diversity: must be in [0, 1], got {diversity!r}")
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"overlap: must be in [0, 1), got {overlap!r}")
    # Lazy greedy: an item's adjusted score only falls as picks accumulate, so a heap of
    # possibly stale scores finds the best item by refreshing only those that reach the
    # top (against the picks made since they were scored). Same picks as the eager loop.
    # Each item's terms are a bit set (one bit per distinct term): shared terms are an AND
    # and a bit count, about twice as fast as intersecting frozensets.
    # Built on first use: the items that never reach the top (most of a large pool) need none,
    # so ``terms[i]`` is read only then (``terms`` may compute them on demand).
    bits: dict[str, int] = {}
    masks: list[int | None] = [None] * len(scores)
    sizes = [0] * len(scores)

    def mask_of(i: int) -> int:
        mask = masks[i]
        if mask is None:
            mask = 0
            mine = terms[i]
            for term in mine:
                bit = bits.get(term)
                if bit is None:
                    bit = bits[term] = 1 << len(bits)
                mask |= bit
            masks[i], sizes[i] = mask, len(mine)
        return mask

    redundancy = [0.0] * len(scores)
    seen = [0] * len(scores)  # how many picks each item's redundancy accounts for
    heap = [(-score, i) for i, score in enumerate(scores)]
    heapq.heapify(heap)
    picked: list[tuple[int, float]] = []
    picked_terms: list[tuple[int, int]] = []  # (mask, size) of each pick, in pick order
    while heap and len(picked) < limit:
        _, i = heapq.heappop(heap)
        if seen[i] < len(picked):
            mine, size, worst = mask_of(i), sizes[i], redundancy[i]
            for other, other_size in picked_terms[seen[i]:]:
                shared = (mine & other).bit_count()
                if shared:  # Jaccard = shared / union, with the union counted from the sizes
                    excess = shared / (size + other_size - shared) - overlap
                    if excess > 0 and excess / (1.0 - overlap) > worst:
                        worst = excess / (1.0 - overlap)
            redundancy[i] = worst
            seen[i] = len(picked)
            heapq.heappush(heap, (-(scores[i] * (1.0 - diversity * redundancy[i])), i))
            continue
        picked.append((i, scores[i] * (1.0 - diversity * redundancy[i])))
        picked_terms.append((mask_of(i), sizes[i]))
    return picked
