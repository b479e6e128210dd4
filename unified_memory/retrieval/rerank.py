"""The optional reranking step: a user-supplied model re-scores the best recall hits.

Recall is LLM-free by default. A :class:`~unified_memory.protocols.Reranker` (a
cross-encoder, an LLM judge, a rules engine) sees the query and the texts of
the best ``ranking.rerank_depth`` hits and returns one score each, higher is
better; those hits are re-ordered by it (ties keep recall's order) and each
keeps its fused score in ``components["fused_score"]``.

    >>> from unified_memory import UnifiedMemory
    >>> class Shortest:
    ...     def rerank(self, query, texts):
    ...         return [-len(t) for t in texts]
    >>> with UnifiedMemory(reranker=Shortest()) as mem:
    ...     _ = mem.remember_many(["I love hiking in the Alps every summer", "I love hiking"])
    ...     [h.text for h in mem.recall("love hiking", tiers="long_term")]
    ['I love hiking', 'I love hiking in the Alps every summer']
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from unified_memory.errors import invalid
from unified_memory.protocols import Reranker
from unified_memory.types import RecallHit

__all__ = ["rerank"]


def rerank(reranker: Reranker, query: str, hits: Sequence[RecallHit], *, depth: int) -> list[RecallHit]:
    """``hits`` with the first ``depth`` re-ordered by the reranker's scores (the rest follow).

    >>> class ByLength:
    ...     def rerank(self, query, texts):
    ...         return [len(t) for t in texts]
    >>> hits = [RecallHit(id="a", tier="long_term", text="hi", score=0.9),
    ...         RecallHit(id="b", tier="long_term", text="hello", score=0.5)]
    >>> [(h.id, h.score) for h in rerank(ByLength(), "greeting", hits, depth=10)]
    [('b', 5.0), ('a', 2.0)]
    """
    head, tail = list(hits[:depth]), list(hits[depth:])
    if not head:
        return list(hits)
    scores = reranker.rerank(query, [hit.text for hit in head])
    try:
        values = [float(score) for score in scores]
    except (TypeError, ValueError) as exc:
        raise invalid("reranker", f"rerank() must return numbers, got {scores!r:.80}") from exc
    if len(values) != len(head):
        raise invalid("reranker", f"rerank() returned {len(values)} scores for {len(head)} texts")
    if not all(math.isfinite(v) for v in values):
        raise invalid("reranker", "rerank() returned a score that is not finite")
    order = sorted(range(len(head)), key=lambda i: -values[i])  # stable: ties keep recall's order
    reranked = [head[i].model_copy(update={
        "score": values[i], "components": {**head[i].components, "fused_score": head[i].score, "rerank": values[i]},
    }) for i in order]
    return reranked + tail
