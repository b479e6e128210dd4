"""Federated recall: ask every tier, make the scores comparable, keep the best.

1. Each tier returns candidates from its lexical (BM25) and, in hybrid mode, dense
   index; every candidate gets both scores. A message is indexed together with
   its neighbour turns (:mod:`tiers.indexes.neighbors`); one whose own words miss the
   query keeps ``neighbor_match_weight`` of its lexical part.
2. Lexical relevance is BM25 over the tier's best score for the query (at least
   ``lexical_norm_floor`` × the query's upper bound, :func:`scoring.fusion.lexical_scale`),
   blended with dense relevance (``lexical_weight``).
3. :func:`scoring.fusion.fuse` weighs in importance, recency, the tier and
   supersession; a fact's confidence weighs in, and an archived fact (pushed out of
   the active facts by ``long_term_limit``) keeps ``archived_penalty`` of its score;
   an entity the query names is boosted, and entities up to two relations from it
   are recalled at ``hop_decay`` per hop (graph hops).
4. A time named in the query ("last week", "in May 2023", :mod:`scoring.temporal`)
   lowers items from outside it by up to ``temporal_weight``.
5. Candidates with no relevance (no word of the query matched, and the meaning is no
   closer than ``dense_floor``) are dropped: fewer than ``limit`` hits rather than padding.
6. One hit per source turn, then maximal marginal relevance (``diversity``; not if ``diversify=False``).

Messages in the asking conversation's window are ``short_term`` hits, other
logged messages ``episodic`` ones, so one message is never reported twice.
Every hit's ``components`` say how its score was made. Steps 1-3, a tier's candidates
scored as hits, are :mod:`unified_memory.retrieval.hit_scoring`; the rest is here.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.remember("I am allergic to peanuts")
    ...     [(hit.tier, hit.text) for hit in mem.recall("peanuts")]
    [('long_term', 'I am allergic to peanuts'), ('entity', 'peanuts (thing): user allergic to peanuts')]
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, cast

from scoring.fusion import diversify
from scoring.temporal import TimeWindow, temporal_cue, time_affinity
from scoring.text import term_set, without_terms
from tiers.candidates import (
    CandidateQuery,
    EntityDetail,
    FactDetail,
    HistorySource,
    LinkedSource,
    RecallCandidate,
    RecallSource,
    SearchMode,
)
from tiers.graph.entities import EntityGraph
from tiers.records.scope import Scope
from unified_memory.config import RankingConfig
from unified_memory.retrieval.hit_scoring import Fusion, Hit, components, lexical_divisor
from unified_memory.types import TIERS, RecallHit, trusted_record, utc_from_timestamp

#: Runs independent searches and returns their results in order (see :mod:`unified_memory.coordinator.fanout`).
Gather = Callable[[Sequence[Callable[[], list[RecallCandidate]]]], list[list[RecallCandidate]]]

__all__ = ["federated_recall", "RecallRequest", "first_person", "TIER_ORDER"]

TIER_ORDER = {tier: position for position, tier in enumerate(("long_term", "entity", "short_term", "episodic"))}


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """One recall: the ``limit`` best hits for ``query`` in ``scope`` over ``tiers``.

    ``asked`` is the question as the caller wrote it when ``query`` is a rewrite of it
    (see :func:`first_person`): speakers and times named are read from it. ``since``
    (seconds) and ``where`` (metadata values) filter what the tiers return; ``mode`` is
    the retrieval method (``lexical``, ``embedding`` or ``hybrid``) and ``vector`` the
    query's embedding when the mode uses one. ``as_of`` (seconds) asks what was true
    then (see :class:`~tiers.candidates.CandidateQuery`): the tiers return what stood
    then, and recency and times named in the question count from it. ``diversify=False``: by score alone."""

    query: str
    scope: Scope
    limit: int
    now: float
    tiers: Collection[str] = TIERS
    since: float | None = None
    where: dict[str, Any] | None = None
    mode: str = "lexical"
    vector: Any = None
    asked: str | None = None
    as_of: float | None = None
    diversify: bool = True

    @property
    def moment(self) -> float:
        """The time the answer is for: ``as_of``, else ``now``."""
        return self.now if self.as_of is None else self.as_of


_SEARCH_MODES: dict[str, SearchMode] = {"lexical": "lexical", "embedding": "embedding", "hybrid": "hybrid"}


def first_person(query: str, graph: EntityGraph, user_id: str) -> str:
    """The query with the user's own name read as "I": "where does Ada live now?" asks
    where *I* live, and memories say "I moved to Berlin", not "Ada moved to Berlin"
    (left as is, the name only pulls in whatever happens to contain it).

    >>> from tiers.storage.backend import Storage, Scope
    >>> from unified_memory.types import ExtractedTriple
    >>> graph = EntityGraph(Storage(None))
    >>> with graph.storage.atomic():
    ...     _ = graph.add_triples(Scope("u1"), [ExtractedTriple(subject="user", predicate="name", object="Ada")],
    ...                           now=0.0)
    >>> first_person("Where does Ada live now?", graph, "u1")
    'where does i live now?'
    """
    own: frozenset[str] = frozenset().union(*(term_set(name) for name in graph.own_names(user_id)))
    return without_terms(query, own, replacement="I") if own else query


def federated_recall(request: RecallRequest, sources: Sequence[RecallSource], *,
                     ranking: RankingConfig, gather: Gather | None = None) -> list[RecallHit]:
    """The ``request.limit`` best hits over the tiers of ``sources`` that the request
    wants, best first (ties: tier, then id). Each source returns typed candidates (see
    :mod:`tiers.candidates`); the BM25 scores of one source's search are normalised
    together; a source that links items (the entity graph) is followed for graph hops.
    ``gather`` runs the sources' searches (calls that do not depend on each other) and
    returns their results in order: at once, where the storage allows it; by default one
    after the other."""
    wanted, limit, diversity = frozenset(request.tiers), request.limit, ranking.diversity * request.diversify
    mode = _SEARCH_MODES.get(request.mode)
    if mode is None:
        raise ValueError(f"mode: expected one of {sorted(_SEARCH_MODES)}, got {request.mode!r}")
    query = CandidateQuery(scope=request.scope, text=request.query,
                           want=limit + max(10, limit // 2),  # importance and recency may reorder them
                           now=request.now, since=request.since, where=request.where, mode=mode,
                           vector=request.vector, as_of=request.as_of)
    fusion = Fusion(ranking, query=request.query, asked=request.asked or request.query, now=request.moment,
                    mode=request.mode)
    hits: list[Hit] = []
    links: LinkedSource | None = None
    asked = [source for source in sources if source.recall_tiers & wanted]
    searches = [functools.partial(source.recall_candidates, query) for source in asked]
    results = gather(searches) if gather is not None else [search() for search in searches]
    for source, found in zip(asked, results, strict=True):
        scale = lexical_divisor(found, ranking)
        hits.extend(fusion.hit(candidate, scale) for candidate in found if candidate.tier in wanted)
        if links is None and _is(source, LinkedSource):
            links = cast(LinkedSource, source)
    if links is not None and ranking.hop_decay > 0:
        hits.extend(_hops(hits, links, query, decay=ranking.hop_decay))
    history = cast(HistorySource | None, next((s for s in sources if _is(s, HistorySource)), None))
    if history is not None:
        hits.extend(_forward(hits, history, query, ranking, wanted))
    else:  # no history to ask: a turn whose superseded fact is among the hits ranks like it
        stale = {h.source for h in hits if h.tier == "long_term" and h.notes.get("status") == "superseded"}
        for hit in hits:
            if hit.tier in ("episodic", "short_term") and hit.source in stale:
                hit.score = round(hit.score * ranking.superseded_penalty, 9)
    window_named = temporal_cue(request.asked or request.query, now=request.moment).window
    if window_named is not None and ranking.temporal_weight > 0:
        for hit in hits:
            _weigh_time(hit, window_named, ranking)
    # nothing of the query matched: not a hit (unless it holds the value of history that matched)
    hits = [hit for hit in hits if _relevance_of(hit) > 0 or "successor_of" in hit.notes]
    hits.sort(key=lambda h: (-h.score, TIER_ORDER[h.tier], h.id))
    return [_recall_hit(hit) for hit in _diverse(_one_per_source(hits), limit, diversity)]


_KINDS: dict[tuple[type, type], bool] = {}


def _is(source: object, protocol: type) -> bool:
    """``isinstance(source, protocol)`` for a runtime-checkable protocol, remembered per class
    (the check looks up every method of the protocol: some 10 us, five times a recall)."""
    key = (type(source), protocol)
    found = _KINDS.get(key)
    if found is None:
        found = _KINDS[key] = isinstance(source, protocol)
    return found


def _forward(hits: list[Hit], history: HistorySource, query: CandidateQuery, ranking: RankingConfig,
             wanted: frozenset[str]) -> list[Hit]:
    """History points forward. A superseded fact ranks as history (``superseded_penalty``)
    and a message it was promoted from ("I live in Lisbon", before the move) is marked as
    such (``superseded``; it keeps its rank: it is the evidence of what was true then); the
    fact that holds the value now ranks above either (at least the score the old fact had
    before its penalty): whenever the past matches the query, the present answers first.
    Returns the successors that were not hits yet (each marked ``successor_of``)."""
    stale = [(h, h.id) for h in hits if h.tier == "long_term" and h.notes.get("status") == "superseded"]
    messages = [h for h in hits if h.tier in ("episodic", "short_term")]
    retired = history.retired_sources(query, [h.source for h in messages]) if messages else {}
    stale += [(h, retired[h.source]) for h in messages if h.source in retired]
    if not stale:
        return []
    successors = history.successors(query, list(dict.fromkeys(fact_id for _, fact_id in stale)))
    by_id = {h.id: h for h in hits if h.tier == "long_term"}
    added: list[Hit] = []
    penalty = ranking.superseded_penalty
    for hit, fact_id in stale:
        if hit.tier == "long_term":
            before = hit.score / penalty if penalty > 0 else hit.score
        else:  # the turn stays where it ranks (it is the evidence of what was true then), marked as history
            before = hit.score + 1e-9
            hit.notes.update(superseded=True, superseded_fact=fact_id)
        successor = successors.get(fact_id)
        if successor is None or "long_term" not in wanted:
            continue
        current = by_id.get(successor.id)
        if current is None:
            detail = successor.detail
            current = by_id[successor.id] = Hit(
                id=successor.id, tier="long_term", text=successor.text, score=0.0,
                notes={"status": detail.status if isinstance(detail, FactDetail) else None,
                       "relevance": _relevance_of(hit), "superseded": False},
                metadata=successor.metadata, created_at=successor.created_at, source=successor.source)
            added.append(current)
        if current.score < before:
            current.score = round(before, 9)
            current.notes["successor_of"] = fact_id
    # A successor speaks for its turn: "I no longer live in Utrecht; home is Antwerp" was cut
    # in two facts, and the one holding the value is kept over its sibling (one hit per turn),
    # also when the sibling was first stated earlier (the turn restated it).
    best: dict[str, float] = {}
    for hit in hits:
        for turn in (hit.source, hit.restated_in) if hit.restated_in else (hit.source,):
            best[turn] = max(best.get(turn, 0.0), hit.score)
    for current in by_id.values():
        if "successor_of" in current.notes and best.get(current.source, 0.0) >= current.score:
            current.score = round(best[current.source] + 1e-9, 9)
    return added


def _relevance_of(hit: Hit) -> float:
    """A candidate's relevance: its own, or for a graph hop the named entity's it was reached from.
    Zero when neither its words nor its meaning (above ``dense_floor``) matched the query: dense
    search ranks every item, so without this the unrelated ones would pad the results at score 0."""
    if hit.scored is not None:
        return hit.scored.fused.relevance
    relevance = hit.notes.get("relevance", 0.0)
    return float(relevance) if isinstance(relevance, int | float) else 0.0


def _recall_hit(hit: Hit) -> RecallHit:
    """The record of one kept hit: its components built, stored metadata decoded, its
    time made a datetime — for the hits kept, not every candidate scored."""
    if not math.isfinite(hit.score):  # the one check validation would add to what is built here
        raise ValueError(f"score: recall computed a non-finite score for {hit.id!r}")
    return trusted_record(RecallHit, id=hit.id, tier=hit.tier, text=hit.text, score=hit.score,
                                     components=components(hit), metadata=hit.metadata(),
                                     created_at=utc_from_timestamp(hit.created_at))


class _Terms(Sequence[frozenset[str]]):
    """The term sets of the hits' texts, each analysed when diversify first reads it (most
    of a deep pool never reaches the top, so its texts need no analysis)."""

    __slots__ = ("_hits",)

    def __init__(self, hits: list[Hit]) -> None:
        self._hits = hits

    def __len__(self) -> int:
        return len(self._hits)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [term_set(h.text) for h in self._hits[index]]
        return term_set(self._hits[index].text)


def _diverse(hits: list[Hit], limit: int, diversity: float) -> list[Hit]:
    """The top ``limit`` after maximal marginal relevance over the best ``3 × limit``:
    near-duplicate texts do not crowd the top (see :func:`scoring.fusion.diversify`)."""
    if diversity <= 0 or len(hits) <= 1:
        return hits[:limit]
    pool = hits[:3 * limit]
    picked = diversify([h.score for h in pool], _Terms(pool), limit=limit, diversity=diversity)
    out = []
    for index, adjusted in picked:
        hit = pool[index]
        if adjusted != hit.score:
            hit.notes["redundancy_penalty"] = round(1.0 - adjusted / hit.score, 6) if hit.score else 0.0
            hit.score = round(adjusted, 9)
        out.append(hit)
    return out


def _hops(hits: list[Hit], links: LinkedSource, query: CandidateQuery, *, decay: float, sources: int = 3,
          depth: int = 2) -> list[Hit]:
    """Graph hops for multi-hop questions: entities up to ``depth`` relations away from the
    (up to ``sources``) best entities the query names, at ``decay ** hops`` times their score.
    An entity's own document already holds its relations, so the second hop is the one that
    reaches what no document of a named entity mentions ("where does the owner of Biscuit
    work?": Biscuit → Maria → Acme Corp)."""
    named = sorted((h for h in hits if h.mentioned), key=lambda h: -h.score)[:sources]
    have = {h.id for h in hits if h.tier == "entity"}
    reached = {h.id: h for h in named}  # entity id -> the named hit it was reached from
    frontier, factor, out = list(reached), 1.0, []
    for _ in range(depth):
        if not frontier:
            break
        factor *= decay
        following = []
        for linked in links.linked_candidates(query, frontier):
            entity = linked.candidate
            if entity.id in reached:
                continue
            source = reached[entity.id] = reached[linked.origin]
            following.append(entity.id)
            if entity.id in have or not isinstance(entity.detail, EntityDetail):
                continue
            have.add(entity.id)
            detail = entity.detail
            out.append(Hit(id=entity.id, tier="entity", text=entity.text, score=round(source.score * factor, 9),
                           notes={**components(source), "name_match": False, "entity": detail.name,
                                  "type": detail.type, "mentions": detail.mentions,
                                  "hop_from": source.notes["entity"], "via": linked.predicate},
                           metadata=entity.metadata, created_at=entity.created_at, source=entity.id))
        frontier = following
    return out


def _weigh_time(hit: Hit, window: TimeWindow, ranking: RankingConfig) -> None:
    """The query names a time: facts and messages from outside it lose up to
    ``temporal_weight`` of their score (entities describe no single moment)."""
    if hit.tier == "entity" or hit.created_at is None:
        return
    affinity = time_affinity(hit.created_at, window, tolerance_days=ranking.temporal_tolerance_days)
    hit.score = round(hit.score * (1.0 - ranking.temporal_weight * (1.0 - affinity)), 9)
    hit.notes.update(time_window=window.phrase, time_match=round(affinity, 6))


def _one_per_source(hits: list[Hit]) -> list[Hit]:
    """Diversity: facts promoted from one turn say what the turn says, so only the best
    of a turn and the facts derived from it is kept (the others would crowd the top-k)."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.source not in seen:
            seen.add(hit.source)
            kept.append(hit)
    return kept
