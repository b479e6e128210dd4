"""Federated recall: ask every tier, make the scores comparable, keep the best.

Each tier returns lexical candidates with ``relevance`` in [0, 1] (BM25 over the
query's upper bound, see :mod:`scoring.lexical`); :func:`scoring.fusion.fuse`
weighs in importance, recency, the tier and supersession. Messages in the
asking conversation's window are ``short_term`` hits, other logged messages
``episodic`` ones, so one message is never reported twice.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.remember("I am allergic to peanuts")
    ...     [(hit.tier, hit.text) for hit in mem.recall("peanuts")]
    [('long_term', 'I am allergic to peanuts'), ('entity', 'peanuts (thing): user allergic to peanuts')]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scoring.decay import recency
from scoring.fusion import fuse
from scoring.text import analyze
from tiers.entities import EntityGraph, entity_importance
from tiers.episodic import EpisodicLog
from tiers.long_term import LongTermFacts
from tiers.short_term import ShortTermWindow
from tiers.storage import Scope
from unified_memory.config import RankingConfig
from unified_memory.types import TIERS, RecallHit, utc_from_timestamp

__all__ = ["federated_recall", "TIER_ORDER"]

TIER_ORDER = {tier: position for position, tier in enumerate(("long_term", "entity", "short_term", "episodic"))}


def _hit(tier: str, item_id: str, text: str, *, relevance: float, raw: float, matched: Sequence[str],
         importance: float, stamp: float | None, now: float, ranking: RankingConfig, superseded: bool = False,
         metadata: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The fields of one :class:`RecallHit` (built only for the hits that are kept)."""
    fresh = recency(age_seconds=now - stamp, half_life_days=ranking.recency_half_life_days) if stamp else 0.0
    # BM25 sums can differ in the last bits between an index built incrementally and one
    # rebuilt from the store; rounding keeps scores (and so ties) stable across reopening.
    fused = fuse(relevance=round(relevance, 12), importance=importance, recency=fresh,
                 tier_weight=ranking.tier_weights.get(tier, 1.0), superseded=superseded, base=ranking.base,
                 importance_weight=ranking.importance_weight, recency_weight=ranking.recency_weight,
                 superseded_penalty=ranking.superseded_penalty)
    components: dict[str, Any] = {**fused.components(), "bm25": round(raw, 6), "matched": " ".join(matched)}
    components.update(extra)
    return {"id": item_id, "tier": tier, "text": text, "score": round(fused.score, 9), "components": components,
            "metadata": metadata, "created_at": utc_from_timestamp(stamp)}


def federated_recall(
    *,
    query: str,
    scope: Scope,
    limit: int,
    tiers: Sequence[str] = TIERS,
    since: float | None,
    where: dict[str, Any] | None,
    now: float,
    ranking: RankingConfig,
    facts: LongTermFacts,
    graph: EntityGraph,
    log: EpisodicLog,
    window: ShortTermWindow,
) -> list[RecallHit]:
    """The ``limit`` best hits for ``query`` over ``tiers``, best first (ties: tier, then id)."""
    want = limit + max(10, limit // 2)  # candidates per tier: importance and recency may reorder them
    hits: list[dict[str, Any]] = []
    if "long_term" in tiers:
        for match, fact in facts.search(scope, query, want, since=since, where=where, now=now):
            hits.append(_hit(
                "long_term", fact.id, fact.text, relevance=match.relevance, raw=match.score,
                matched=match.matched_terms, importance=fact.importance, stamp=fact.updated_at.timestamp(),
                now=now, ranking=ranking, superseded=fact.status == "superseded", metadata=fact.metadata,
                extra={"status": fact.status, "category": fact.category,
                       "valid_to": fact.valid_to.isoformat() if fact.valid_to else None}))
    if "entity" in tiers:
        for match, entity, description in graph.search(scope, query, want, since=since, where=where):
            # A query naming a person, place or organisation asks about it; a bare "thing"
            # (an attribute value such as "peanuts") gets no boost over the fact it came from.
            name_terms = set(analyze(entity.name)) if entity.type != "thing" else set()
            named = bool(name_terms) and name_terms <= set(match.matched_terms)
            hit = _hit(
                "entity", entity.id, description, relevance=match.relevance, raw=match.score,
                matched=match.matched_terms, importance=entity_importance(entity.mention_count),
                stamp=entity.last_seen.timestamp(), now=now, ranking=ranking, metadata=entity.metadata,
                extra={"entity": entity.name, "type": entity.type, "mentions": entity.mention_count,
                       "name_match": named})
            if named:  # the query names this entity: stronger evidence than a word in its relations
                hit["score"] = round(hit["score"] * ranking.entity_name_boost, 9)
            hits.append(hit)
    if "short_term" in tiers or "episodic" in tiers:
        found = log.search(scope, query, want, since=since, where=where)
        window_seqs = window.contains(scope, [logged.seq for _, logged, _ in found])
        for match, logged, importance in found:
            tier = "short_term" if logged.seq in window_seqs else "episodic"
            if tier not in tiers:
                continue
            message = logged.message
            hits.append(_hit(
                tier, logged.id, message.text(), relevance=match.relevance, raw=match.score,
                matched=match.matched_terms, importance=importance,
                stamp=message.created_at.timestamp() if message.created_at else None, now=now,
                ranking=ranking, metadata=message.metadata,
                extra={"role": message.role, "speaker": message.name, "session_id": message.session_id}))
    hits.sort(key=lambda h: (-h["score"], TIER_ORDER[h["tier"]], h["id"]))
    return [RecallHit(**fields) for fields in hits[:limit]]
