"""The contract between the tiers and recall: typed candidates, and what recall asks a tier.

A tier turns its own rows into :class:`RecallCandidate` records — its column names,
JSON encodings and time storage stay inside the tier — and
:mod:`unified_memory.retrieval.federation` only fuses their scores. A tier recall can
ask is a :class:`RecallSource`: it names the tiers it answers for and returns the
candidates of one search (one set of BM25 scores, normalised together); the entity
graph is also a :class:`LinkedSource`, which recall follows for graph hops.

    >>> from scoring.lexical import LexicalMatch
    >>> c = RecallCandidate(id="f1", tier="long_term", text="I keep bees", lexical=LexicalMatch("f1", 1.2, 0.5, ("bee",)),
    ...                     dense=None, importance=0.6, created_at=0.0, source="m1", superseded=False,
    ...                     detail=FactDetail(status="active", category=None, confidence=1.0, valid_to=None),
    ...                     metadata_json='{"topic":"hobby"}')
    >>> c.matched_terms, c.metadata()
    (('bee',), {'topic': 'hobby'})
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from scoring.lexical import LexicalMatch
from tiers.indexes.documents import SearchMode
from tiers.records.scope import Scope
from tiers.records.types import Tier
from tiers.storage.rows import loads

__all__ = ["RecallCandidate", "FactDetail", "EntityDetail", "MessageDetail", "CandidateDetail", "CandidateQuery",
           "RecallSource", "LinkedSource", "LinkedCandidate", "HistorySource", "SearchMode"]


@dataclass(slots=True)  # not frozen: built for every candidate of every recall (5x faster)
class FactDetail:
    """What a long-term fact adds: its status (``active``, ``superseded`` or ``archived``), category,
    stored confidence (before decay), the end of its validity (seconds, or ``None``) and, for a
    fact stated again since, the last message that stated it (``restated_in``)."""

    status: str
    category: str | None
    confidence: float
    valid_to: float | None
    restated_in: str | None = None


@dataclass(slots=True)  # not frozen: built for every candidate of every recall (5x faster)
class EntityDetail:
    """What an entity adds: its name, type (``person``, ``place``, ... or a bare ``thing``)
    and how often it was mentioned."""

    name: str
    type: str
    mentions: int


@dataclass(slots=True)  # not frozen: built for every candidate of every recall (5x faster)
class MessageDetail:
    """What a logged message adds: role, speaker, session, and ``own_text`` — what the
    index holds of the message itself (it is searched together with its neighbour turns)."""

    role: str
    speaker: str | None
    session_id: str | None
    own_text: str


CandidateDetail = FactDetail | EntityDetail | MessageDetail


@dataclass(slots=True)  # not frozen: built for every candidate of every recall (5x faster)
class RecallCandidate:
    """One item a tier found for a query, with everything recall fuses.

    ``lexical`` and ``dense`` are the raw scores of each index (``None`` when that
    index did not return it); ``created_at`` is when it was stated, last seen or said
    (seconds since the epoch); ``source`` the turn it came from (a fact promoted from
    a message names the message; otherwise the item itself); ``superseded`` marks
    history (a replaced fact, an entity whose every relation ended). Stored metadata
    stays encoded until :meth:`metadata` is called: recall scores several times more
    candidates than it keeps."""

    id: str
    tier: Tier
    text: str
    lexical: LexicalMatch | None
    dense: float | None
    importance: float
    created_at: float | None
    source: str
    superseded: bool
    detail: CandidateDetail
    metadata_json: str | None = None

    @property
    def matched_terms(self) -> tuple[str, ...]:
        """The query terms the lexical index matched (none without a lexical match)."""
        return self.lexical.matched_terms if self.lexical is not None else ()

    def metadata(self) -> dict[str, Any]:
        """The stored metadata, decoded."""
        decoded: dict[str, Any] = loads(self.metadata_json, {})
        return decoded


@dataclass(frozen=True, slots=True)
class CandidateQuery:
    """What recall asks every tier: up to ``want`` candidates per index for ``text`` in
    ``scope``, live at ``now``, stated since ``since`` (seconds) and whose metadata has
    the values of ``where``; ``vector`` is the query's embedding when ``mode`` uses one.

    ``as_of`` (seconds) asks what was true then: facts valid at that moment (one
    superseded later is current then), messages and entities that existed by then,
    relations valid then; ``None``: what is true now."""

    scope: Scope
    text: str
    want: int
    now: float
    since: float | None = None
    where: dict[str, Any] | None = None
    mode: SearchMode = "lexical"
    vector: Any = None
    as_of: float | None = None


class RecallSource(Protocol):
    """A tier recall can ask (long-term facts, the entity graph, the message log through
    the window)."""

    @property
    def recall_tiers(self) -> frozenset[str]:
        """The tiers its candidates belong to (recall asks it when one is wanted)."""
        ...

    def recall_candidates(self, query: CandidateQuery) -> list[RecallCandidate]:
        """The candidates of one search, every one of them (also those of a tier not
        wanted: they are scored together), in the order the indexes returned them."""
        ...


@dataclass(frozen=True, slots=True)
class LinkedCandidate:
    """An entity one relation away from ``origin`` (``predicate`` links them)."""

    origin: str
    predicate: str
    candidate: RecallCandidate


@runtime_checkable
class LinkedSource(Protocol):
    """A source whose items link to others (the entity graph): recall follows the links
    from the items the query names (graph hops)."""

    def linked_candidates(self, query: CandidateQuery, ids: Sequence[str]) -> list[LinkedCandidate]:
        """Items one current link away from ``ids`` that pass the query's filters."""
        ...


@runtime_checkable
class HistorySource(Protocol):
    """A source whose items are replaced over time (long-term facts): recall asks what
    replaced the history it found, so the present value answers first."""

    def successors(self, query: CandidateQuery, ids: Sequence[str]) -> dict[str, RecallCandidate]:
        """For each superseded item of ``ids``: the item that holds its value now."""
        ...

    def retired_sources(self, query: CandidateQuery, sources: Sequence[str]) -> dict[str, str]:
        """Of the turn ids ``sources``: those a superseded item came from, each with that item."""
        ...
