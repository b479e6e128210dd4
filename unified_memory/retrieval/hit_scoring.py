"""How recall scores a tier's candidates: relevance from their lexical (BM25) and dense
scores, fused with importance, recency, the tier and supersession (:class:`scoring.fusion.Fuser`),
and the rules of each kind of item — a fact's confidence and archival, an entity the query
names, a message matched only through its neighbour turns or spoken by a person the question
names. A :class:`Hit` keeps how its score was made; :func:`components` rebuilds the parts for
the hits recall keeps (:mod:`unified_memory.retrieval.federation` asks the tiers and ranks).

    >>> from tiers.candidates import FactDetail, LexicalMatch, RecallCandidate
    >>> fact = FactDetail(status="active", category="fact", confidence=1.0, valid_to=None)
    >>> candidate = RecallCandidate(id="f1", tier="long_term", text="I live in Lisbon",
    ...                             lexical=LexicalMatch("f1", 2.0, 1.0, ("lisbon",)), dense=None,
    ...                             importance=0.5, created_at=0.0, source="m1", superseded=False, detail=fact)
    >>> fusion = Fusion(RankingConfig(), query="Lisbon", asked="Lisbon", now=0.0, mode="lexical")
    >>> hit = fusion.hit(candidate, lexical_divisor([candidate], RankingConfig()))
    >>> components(hit)["bm25"], components(hit)["status"]
    (2.0, 'active')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from scoring.fusion import FusedScore, Fuser, dense_relevance, hybrid_relevance, lexical_scale
from scoring.text import analyze, term_set
from tiers.candidates import EntityDetail, FactDetail, MessageDetail, RecallCandidate
from unified_memory.config import RankingConfig
from unified_memory.types import Tier, utc_from_timestamp

__all__ = ["Component", "Scored", "Hit", "lexical_divisor", "candidate_relevance", "components", "Fusion"]

#: A value of :attr:`RecallHit.components`.
Component = float | int | str | bool | None


@dataclass(slots=True)  # not frozen: built for every candidate of every recall (5x faster)
class Scored:
    """How a scored candidate's score was made, to rebuild its components once it is kept."""

    fused: FusedScore
    candidate: RecallCandidate
    scale: float
    mode: str
    ranking: RankingConfig
    lexical_weight: float


@dataclass(slots=True)
class Hit:
    """A hit while recall ranks it. ``notes`` holds the tier's own fields and notes added
    later (time match, redundancy); the score's parts are rebuilt from ``scored`` only
    for the hits kept (:func:`components`). ``source`` is the turn it came from (one hit
    per turn is kept); ``mentioned``: an entity whose whole name the query holds."""

    id: str
    tier: Tier
    text: str
    score: float
    notes: dict[str, Component]
    metadata: Callable[[], dict[str, Any]]
    created_at: float | None
    source: str
    scored: Scored | None = None
    mentioned: bool = False
    restated_in: str | None = None  # a fact stated again: the last turn that did


def lexical_divisor(candidates: Iterable[RecallCandidate], ranking: RankingConfig) -> float:
    """The divisor of one tier's BM25 scores for this query (see :func:`scoring.fusion.lexical_scale`)."""
    return lexical_scale(((c.lexical.score, c.lexical.relevance) for c in candidates if c.lexical),
                         floor=ranking.lexical_norm_floor)


def candidate_relevance(candidate: RecallCandidate, scale: float, mode: str, ranking: RankingConfig,
               weight: float = 1.0, *, parts: dict[str, Component] | None = None) -> float:
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
    dense = (dense_relevance(similarity, floor=ranking.dense_floor, ceiling=ranking.ceiling(mode))
             if similarity is not None else 0.0)
    if parts is not None:
        parts.update(lexical=round(lexical, 6), dense=round(dense, 6),
                     cosine=round(similarity, 6) if similarity is not None else None)
    if mode == "embedding":
        return dense
    return hybrid_relevance(lexical, dense, lexical_weight=ranking.lexical_weight)


def components(hit: Hit) -> dict[str, Component]:
    """All of a hit's score components: the fused parts, how relevance was made, then
    the tier's own fields and any notes added since (time match, redundancy)."""
    scored = hit.scored
    if scored is None:
        return hit.notes
    parts: dict[str, Component] = {}
    candidate_relevance(scored.candidate, scored.scale, scored.mode, scored.ranking, scored.lexical_weight, parts=parts)
    return {**scored.fused.components(), **parts, **hit.notes}


class Fusion:
    """How one recall turns each tier's candidates into hits (a method per kind of
    candidate: the scoring rules that belong to a tier's items)."""

    def __init__(self, ranking: RankingConfig, *, query: str, asked: str, now: float, mode: str) -> None:
        self.ranking = ranking
        self.now = now
        self.mode = mode
        self.query_terms, self.asked_terms = set(analyze(query)), set(analyze(asked))
        self.fuser = Fuser(ranking.base, ranking.importance_weight, ranking.recency_weight, ranking.superseded_penalty,
                           half_life_days=ranking.recency_half_life_days)
        self.tier_weights = ranking.tier_weights
        half_life = ranking.confidence_half_life_days
        self.confidence_decay = None if half_life is None else Fuser(0.0, 0.0, 0.0, 1.0, half_life_days=half_life)

    def hit(self, candidate: RecallCandidate, scale: float) -> Hit:
        detail = candidate.detail
        if isinstance(detail, FactDetail):
            return self.fact(candidate, detail, scale)
        if isinstance(detail, EntityDetail):
            return self.entity(candidate, detail, scale)
        return self.message(candidate, detail, scale)

    def _scored(self, candidate: RecallCandidate, scale: float, notes: dict[str, Component],
                lexical_weight: float = 1.0) -> Hit:
        """A scored candidate. Recall scores several times more candidates than it keeps, so
        ``notes`` holds only the tier's fields (and later notes) until the hit is kept;
        ``scored`` rebuilds the score's parts then (:func:`components`)."""
        match = candidate.lexical
        if self.mode == "lexical":  # what candidate_relevance gives, without its call
            relevance = lexical_weight * match.score / scale if match is not None and scale > 0 else 0.0
        else:
            relevance = candidate_relevance(candidate, scale, self.mode, self.ranking, lexical_weight)
        stamp = candidate.created_at
        fuser = self.fuser
        # BM25 sums can differ in the last bits between an index built incrementally and one
        # rebuilt from the store; rounding keeps scores (and so ties) stable across reopening.
        fused = fuser(round(relevance, 12), candidate.importance, fuser.recency(self.now - stamp) if stamp else 0.0,
                      self.tier_weights.get(candidate.tier, 1.0), candidate.superseded)
        return Hit(candidate.id, candidate.tier, candidate.text, round(fused.score, 9), notes, candidate.metadata,
                   stamp, candidate.source, Scored(fused, candidate, scale, self.mode, self.ranking, lexical_weight))

    def fact(self, candidate: RecallCandidate, detail: FactDetail, scale: float) -> Hit:
        ranking = self.ranking
        stated = candidate.created_at if candidate.created_at is not None else self.now
        decay = self.confidence_decay  # decayed_confidence, its half-life bound
        confidence = (detail.confidence if decay is None else
                      detail.confidence * decay.recency(max(0.0, self.now - stated)))
        valid_to = utc_from_timestamp(detail.valid_to)
        archived = detail.status == "archived"
        hit = self._scored(candidate, scale, {
            "status": detail.status, "category": detail.category,
            "valid_to": valid_to.isoformat() if valid_to is not None else None,
            "confidence": round(confidence, 6), "archived": archived})
        # Unconfirmed for long, a fact is less sure (reinforcing it restores confidence);
        # an archived fact answers when nothing current does, below any comparable active one.
        factor = 1.0 - ranking.confidence_weight * (1.0 - confidence)
        if archived:
            factor *= ranking.archived_penalty
        hit.score = round(hit.score * factor, 9)
        hit.restated_in = detail.restated_in
        return hit

    def entity(self, candidate: RecallCandidate, detail: EntityDetail, scale: float) -> Hit:
        # A query naming a person, place or organisation asks about it; a bare "thing"
        # (an attribute value such as "peanuts") gets no boost over the fact it came from.
        name_terms = term_set(detail.name)
        mentioned = bool(name_terms) and name_terms.issubset(candidate.matched_terms)
        named = mentioned and detail.type != "thing"
        hit = self._scored(candidate, scale, {"entity": detail.name, "type": detail.type,
                                              "mentions": detail.mentions, "name_match": named})
        if named:  # the query names this entity: stronger evidence than a word in its relations
            hit.score = round(hit.score * self.ranking.entity_name_boost, 9)
        hit.mentioned = mentioned
        return hit

    def message(self, candidate: RecallCandidate, detail: MessageDetail, scale: float) -> Hit:
        # A message is indexed with its neighbour turns (tiers.indexes.neighbors): one whose own
        # words miss the query matched through them, which is weaker evidence.
        own_match = bool(self.query_terms & term_set(detail.own_text))
        speaker_terms = term_set(detail.speaker) if detail.speaker else frozenset()
        spoken_by_named = bool(speaker_terms) and speaker_terms <= self.asked_terms
        hit = self._scored(candidate, scale, {
            "role": detail.role, "speaker": detail.speaker, "session_id": detail.session_id,
            "own_match": own_match, "speaker_match": spoken_by_named},
            lexical_weight=1.0 if own_match else self.ranking.neighbor_match_weight)
        if spoken_by_named:  # a question about a person: what they said is the likeliest evidence
            hit.score = round(hit.score * (1.0 + self.ranking.speaker_boost), 9)
        return hit
