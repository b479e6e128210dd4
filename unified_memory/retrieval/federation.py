"""Federated recall: ask every tier, make the scores comparable, keep the best.

1. Each tier returns candidates from its lexical (BM25) and, in hybrid mode, dense
   index; every candidate gets both scores. A message is indexed together with
   its neighbour turns (:mod:`tiers.neighbors`); one whose own words miss the
   query keeps ``neighbor_match_weight`` of its lexical part.
2. Lexical relevance is BM25 over the tier's best score for the query (at least
   ``lexical_norm_floor`` × the query's upper bound, :func:`scoring.fusion.lexical_scale`),
   blended with dense relevance (``lexical_weight``).
3. :func:`scoring.fusion.fuse` weighs in importance, recency, the tier and
   supersession; an entity the query names is boosted, and entities up to two
   relations from it are recalled at ``hop_decay`` per hop (graph hops).
4. A time named in the query ("last week", "in May 2023", :mod:`scoring.temporal`)
   lowers items from outside it by up to ``temporal_weight``.
5. Candidates with no relevance (no word of the query matched, and the meaning is no
   closer than ``dense_floor``) are dropped: fewer than ``limit`` hits rather than padding.
6. One hit per source turn, then maximal marginal relevance (``diversity``).

Messages in the asking conversation's window are ``short_term`` hits, other
logged messages ``episodic`` ones, so one message is never reported twice.
Every hit's ``components`` say how its score was made.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.remember("I am allergic to peanuts")
    ...     [(hit.tier, hit.text) for hit in mem.recall("peanuts")]
    [('long_term', 'I am allergic to peanuts'), ('entity', 'peanuts (thing): user allergic to peanuts')]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from scoring.decay import decayed_confidence, recency
from scoring.fusion import dense_relevance, diversify, fuse, hybrid_relevance, lexical_scale
from scoring.temporal import TimeWindow, temporal_cue, time_affinity
from scoring.text import analyze, term_set, without_terms
from tiers.documents import Candidate
from tiers.entities import EntityGraph, entity_importance
from tiers.episodic import EpisodicLog, index_text
from tiers.long_term import LongTermFacts
from tiers.short_term import ShortTermWindow
from tiers.storage import Scope, loads
from unified_memory.config import RankingConfig
from unified_memory.types import TIERS, RecallHit, utc_from_timestamp

__all__ = ["federated_recall", "first_person", "TIER_ORDER"]

TIER_ORDER = {tier: position for position, tier in enumerate(("long_term", "entity", "short_term", "episodic"))}


def _scale(candidates: Iterable[Candidate], ranking: RankingConfig) -> float:
    """The divisor of one tier's BM25 scores for this query (see :func:`scoring.fusion.lexical_scale`)."""
    return lexical_scale(((c.lexical.score, c.lexical.relevance) for c in candidates if c.lexical),
                         floor=ranking.lexical_norm_floor)


def _relevance(candidate: Candidate, scale: float, mode: str, ranking: RankingConfig,
               weight: float = 1.0, *, parts: dict[str, Any] | None = None) -> float:
    """One candidate's relevance in [0, 1] from its lexical and dense scores; ``weight``
    multiplies the lexical part. ``parts``, when given, receives how it was made."""
    match = candidate.lexical
    lexical = weight * match.score / scale if match is not None and scale > 0 else 0.0
    if parts is not None:
        parts.update(bm25=round(match.score, 6) if match else 0.0,
                     matched=" ".join(match.matched_terms) if match else "")
    if mode == "lexical":
        return lexical
    similarity = candidate.dense
    dense = (dense_relevance(similarity, floor=ranking.dense_floor, ceiling=ranking.dense_ceiling)
             if similarity is not None else 0.0)
    if parts is not None:
        parts.update(lexical=round(lexical, 6), dense=round(dense, 6),
                     cosine=round(similarity, 6) if similarity is not None else None)
    if mode == "embedding":
        return dense
    return hybrid_relevance(lexical, dense, lexical_weight=ranking.lexical_weight)


def _hit(tier: str, item_id: str, text: str, candidate: Candidate, *, scale: float, mode: str, importance: float,
         stamp: float | None, now: float, ranking: RankingConfig, superseded: bool = False,
         metadata: dict[str, Any] | str | None, extra: dict[str, Any], source: str | None = None,
         lexical_weight: float = 1.0) -> dict[str, Any]:
    """The fields of one :class:`RecallHit`. Recall scores several times more candidates
    than it keeps, so ``components`` holds only ``extra`` (and later notes) until the
    hit is kept; ``_base`` rebuilds the score's parts then (:func:`_components`)."""
    relevance = _relevance(candidate, scale, mode, ranking, lexical_weight)
    fresh = recency(age_seconds=now - stamp, half_life_days=ranking.recency_half_life_days) if stamp else 0.0
    # BM25 sums can differ in the last bits between an index built incrementally and one
    # rebuilt from the store; rounding keeps scores (and so ties) stable across reopening.
    fused = fuse(relevance=round(relevance, 12), importance=importance, recency=fresh,
                 tier_weight=ranking.tier_weights.get(tier, 1.0), superseded=superseded, base=ranking.base,
                 importance_weight=ranking.importance_weight, recency_weight=ranking.recency_weight,
                 superseded_penalty=ranking.superseded_penalty)
    return {"id": item_id, "tier": tier, "text": text, "score": round(fused.score, 9), "components": extra,
            "metadata": metadata, "created_at": stamp, "_source": source or item_id,
            "_base": (fused, candidate, scale, mode, ranking, lexical_weight)}


def _components(hit: dict[str, Any]) -> dict[str, Any]:
    """All of a hit's score components: the fused parts, how relevance was made, then
    the tier's own fields and any notes added since (time match, redundancy)."""
    base = hit.get("_base")
    if base is None:
        return hit["components"]
    fused, candidate, scale, mode, ranking, weight = base
    parts: dict[str, Any] = {}
    _relevance(candidate, scale, mode, ranking, weight, parts=parts)
    return {**fused.components(), **parts, **hit["components"]}


def first_person(query: str, graph: EntityGraph, user_id: str) -> str:
    """The query with the user's own name read as "I": "where does Ada live now?" asks
    where *I* live, and memories say "I moved to Berlin", not "Ada moved to Berlin"
    (left as is, the name only pulls in whatever happens to contain it).

    >>> from tiers.storage import Storage, Scope
    >>> from unified_memory.types import ExtractedTriple
    >>> graph = EntityGraph(Storage(None))
    >>> with graph.storage.atomic():
    ...     _ = graph.add_triples(Scope("u1"), [ExtractedTriple(subject="user", predicate="name", object="Ada")],
    ...                           now=0.0)
    >>> first_person("Where does Ada live now?", graph, "u1")
    'where does i live now?'
    """
    own = frozenset().union(*(term_set(name) for name in graph.own_names(user_id)))
    return without_terms(query, own, replacement="I") if own else query


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
    mode: str = "lexical",
    vector: Any = None,
    asked: str | None = None,
) -> list[RecallHit]:
    """The ``limit`` best hits for ``query`` over ``tiers``, best first (ties: tier, then id).

    ``asked`` is the question as the caller wrote it when ``query`` is a rewrite of it
    (see :func:`first_person`): speakers and times named are read from it.

    ``mode`` is the retrieval method (``lexical``, ``embedding`` or ``hybrid``);
    ``vector`` the query's embedding when the mode uses one.
    """
    want = limit + max(10, limit // 2)  # candidates per tier: importance and recency may reorder them
    search = {"since": since, "where": where, "vector": vector, "mode": mode}
    asked = asked or query
    hits: list[dict[str, Any]] = []
    if "long_term" in tiers:
        found_facts = facts.search(scope, query, want, now=now, **search)
        scale = _scale(found_facts, ranking)
        for candidate in found_facts:
            row = candidate.row
            stated = row["updated_at"]
            confidence = decayed_confidence(row["confidence"], age_seconds=max(0.0, now - stated),
                                            half_life_days=ranking.confidence_half_life_days)
            sources = loads(row["source_message_ids"], [])
            valid_to = row["valid_to"]
            hit = _hit(
                "long_term", row["id"], row["text"], candidate, scale=scale, mode=mode, importance=row["importance"],
                source=sources[0] if sources else row["id"], stamp=stated, now=now, ranking=ranking,
                superseded=row["status"] == "superseded", metadata=row["metadata"],
                extra={"status": row["status"], "category": row["category"],
                       "valid_to": utc_from_timestamp(valid_to).isoformat() if valid_to is not None else None,
                       "confidence": round(confidence, 6)})
            # Unconfirmed for long, a fact is less sure (reinforcing it restores confidence).
            hit["score"] = round(hit["score"] * (1.0 - ranking.confidence_weight * (1.0 - confidence)), 9)
            hits.append(hit)
    if "entity" in tiers:
        found_entities = graph.search(scope, query, want, **search)
        scale = _scale((c for c, _ in found_entities), ranking)
        former = graph.ended_only([c.id for c, _ in found_entities])
        for candidate, description in found_entities:
            row = candidate.row
            # A query naming a person, place or organisation asks about it; a bare "thing"
            # (an attribute value such as "peanuts") gets no boost over the fact it came from.
            name_terms = term_set(row["name"])
            matched = set(candidate.lexical.matched_terms) if candidate.lexical else set()
            mentioned = bool(name_terms) and name_terms <= matched
            named = mentioned and row["type"] != "thing"
            hit = _hit(
                "entity", row["id"], description, candidate, scale=scale, mode=mode,
                importance=entity_importance(row["mention_count"]), stamp=row["last_seen"], now=now,
                ranking=ranking, metadata=row["metadata"], superseded=row["id"] in former,
                extra={"entity": row["name"], "type": row["type"], "mentions": row["mention_count"],
                       "name_match": named})
            if named:  # the query names this entity: stronger evidence than a word in its relations
                hit["score"] = round(hit["score"] * ranking.entity_name_boost, 9)
            hit["_mentioned"] = mentioned
            hits.append(hit)
        if ranking.hop_decay > 0:
            hits.extend(_hops(hits, graph, scope, since=since, where=where, decay=ranking.hop_decay))
    if "short_term" in tiers or "episodic" in tiers:
        found = log.search(scope, query, want, **search)
        window_seqs = window.contains(scope, [logged.seq for _, logged in found])
        scale = _scale((c for c, _ in found), ranking)
        query_terms, asked_terms = set(analyze(query)), set(analyze(asked))
        for candidate, logged in found:
            tier = "short_term" if logged.seq in window_seqs else "episodic"
            if tier not in tiers:
                continue
            message = logged.message
            # A message is indexed with its neighbour turns (tiers.neighbors): one whose own
            # words miss the query matched through them, which is weaker evidence.
            own_match = bool(query_terms & term_set(index_text(message.name, message.content)))
            speaker_terms = term_set(message.name) if message.name else frozenset()
            spoken_by_named = bool(speaker_terms) and speaker_terms <= asked_terms
            hit = _hit(
                tier, logged.id, message.text(), candidate, scale=scale, mode=mode, importance=float(candidate.row["importance"]),
                stamp=message.created_at.timestamp() if message.created_at else None, now=now,
                ranking=ranking, metadata=message.metadata,
                lexical_weight=1.0 if own_match else ranking.neighbor_match_weight,
                extra={"role": message.role, "speaker": message.name, "session_id": message.session_id,
                       "own_match": own_match, "speaker_match": spoken_by_named})
            if spoken_by_named:  # a question about a person: what they said is the likeliest evidence
                hit["score"] = round(hit["score"] * (1.0 + ranking.speaker_boost), 9)
            hits.append(hit)
    # A turn whose fact was superseded ("I live in Lisbon", before the move) is history
    # too: its messages rank like the fact, so they cannot bring the stale answer back.
    stale = {h["_source"] for h in hits if h["tier"] == "long_term" and h["components"].get("status") == "superseded"}
    for hit in hits:
        if hit["tier"] in ("episodic", "short_term") and hit["_source"] in stale:
            hit["score"] = round(hit["score"] * ranking.superseded_penalty, 9)
    window_named = temporal_cue(asked, now=now).window
    if window_named is not None and ranking.temporal_weight > 0:
        for hit in hits:
            _weigh_time(hit, window_named, ranking)
    hits = [hit for hit in hits if _relevance_of(hit) > 0]  # nothing of the query matched: not a hit
    hits.sort(key=lambda h: (-h["score"], TIER_ORDER[h["tier"]], h["id"]))
    return [_recall_hit(fields) for fields in _diverse(_one_per_source(hits), limit, ranking.diversity)]


def _relevance_of(hit: dict[str, Any]) -> float:
    """A candidate's relevance: its own, or for a graph hop the named entity's it was reached from.
    Zero when neither its words nor its meaning (above ``dense_floor``) matched the query: dense
    search ranks every item, so without this the unrelated ones would pad the results at score 0."""
    base = hit.get("_base")
    return base[0].relevance if base is not None else float(hit["components"].get("relevance", 0.0))


def _recall_hit(fields: dict[str, Any]) -> RecallHit:
    """The record of one kept hit: its components built, stored metadata (still JSON)
    decoded, its time made a datetime — for the hits kept, not every candidate scored."""
    fields["components"] = _components(fields)
    fields.pop("_base", None)
    if isinstance(fields["metadata"], str) or fields["metadata"] is None:
        fields["metadata"] = loads(fields["metadata"], {})
    if isinstance(fields["created_at"], float | int):
        fields["created_at"] = utc_from_timestamp(fields["created_at"])
    if not math.isfinite(fields["score"]):  # the one check validation would add to what is built here
        raise ValueError(f"score: recall computed a non-finite score for {fields['id']!r}")
    return RecallHit.model_construct(**fields)


def _diverse(hits: list[dict[str, Any]], limit: int, diversity: float) -> list[dict[str, Any]]:
    """The top ``limit`` after maximal marginal relevance over the best ``3 × limit``:
    near-duplicate texts do not crowd the top (see :func:`scoring.fusion.diversify`)."""
    if diversity <= 0 or len(hits) <= 1:
        return hits[:limit]
    pool = hits[:3 * limit]
    picked = diversify([h["score"] for h in pool], [term_set(h["text"]) for h in pool], limit=limit,
                       diversity=diversity)
    out = []
    for index, adjusted in picked:
        hit = pool[index]
        if adjusted != hit["score"]:
            hit["components"]["redundancy_penalty"] = round(1.0 - adjusted / hit["score"], 6) if hit["score"] else 0.0
            hit["score"] = round(adjusted, 9)
        out.append(hit)
    return out


def _hops(hits: list[dict[str, Any]], graph: EntityGraph, scope: Scope, *, since: float | None,
          where: dict[str, Any] | None, decay: float, sources: int = 3, depth: int = 2) -> list[dict[str, Any]]:
    """Graph hops for multi-hop questions: entities up to ``depth`` relations away from the
    (up to ``sources``) best entities the query names, at ``decay ** hops`` times their score.
    An entity's own document already holds its relations, so the second hop is the one that
    reaches what no document of a named entity mentions ("where does the owner of Biscuit
    work?": Biscuit → Maria → Acme Corp)."""
    named = sorted((h for h in hits if h.get("_mentioned")),
                   key=lambda h: -h["score"])[:sources]
    have = {h["id"] for h in hits if h["tier"] == "entity"}
    reached = {h["id"]: h for h in named}  # entity id -> the named hit it was reached from
    frontier, factor, out = list(reached), 1.0, []
    for _ in range(depth):
        if not frontier:
            break
        factor *= decay
        following = []
        for origin, predicate, entity, description in graph.linked(scope, frontier, since=since, where=where):
            if entity.id in reached:
                continue
            source = reached[entity.id] = reached[origin]
            following.append(entity.id)
            if entity.id in have:
                continue
            have.add(entity.id)
            out.append({"id": entity.id, "tier": "entity", "text": description,
                        "score": round(source["score"] * factor, 9),
                        "components": {**_components(source), "name_match": False, "entity": entity.name,
                                       "type": entity.type, "mentions": entity.mention_count,
                                       "hop_from": source["components"]["entity"], "via": predicate},
                        "metadata": entity.metadata, "created_at": entity.last_seen, "_source": entity.id})
        frontier = following
    return out


def _weigh_time(hit: dict[str, Any], window: TimeWindow, ranking: RankingConfig) -> None:
    """The query names a time: facts and messages from outside it lose up to
    ``temporal_weight`` of their score (entities describe no single moment)."""
    if hit["tier"] == "entity" or hit["created_at"] is None:
        return
    stamp = hit["created_at"]
    affinity = time_affinity(stamp if isinstance(stamp, float | int) else stamp.timestamp(), window, tolerance_days=ranking.temporal_tolerance_days)
    hit["score"] = round(hit["score"] * (1.0 - ranking.temporal_weight * (1.0 - affinity)), 9)
    hit["components"].update(time_window=window.phrase, time_match=round(affinity, 6))


def _one_per_source(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Diversity: facts promoted from one turn say what the turn says, so only the best
    of a turn and the facts derived from it is kept (the others would crowd the top-k)."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        source = hit.pop("_source")
        hit.pop("_mentioned", None)
        if source not in seen:
            seen.add(source)
            kept.append(hit)
    return kept
