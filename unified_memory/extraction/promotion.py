"""Promotion: what leaves the short-term window becomes long-term knowledge.

Each due message of a promoted role goes through the extractor; its proposed
facts pass the importance filter (the extractor's importance, else the pluggable
scorer) into long-term memory, which reinforces what it knows and supersedes what
is contradicted; entities and triples go to the graph. The messages are marked
promoted in the same transaction, so promotion happens once, across restarts too.

    >>> from tiers.storage.backend import Storage, Scope
    >>> from tiers.episodic import EpisodicLog
    >>> from tiers.facts.long_term import LongTermFacts
    >>> from tiers.graph.entities import EntityGraph
    >>> from unified_memory.extraction.rules import RuleExtractor
    >>> from unified_memory.types import Message
    >>> store = Storage(None)
    >>> log, facts, graph = EpisodicLog(store), LongTermFacts(store), EntityGraph(store)
    >>> promoter = Promoter(log, facts, graph, extractor=RuleExtractor(), scorer=lambda t: 0.9,
    ...                     threshold=0.7, roles=("user",))
    >>> with store.atomic():
    ...     _ = log.append(Scope("ada"), [Message(role="user", content="I live in Lisbon")], now=0.0,
    ...                    importances=[0.9])
    ...     report = promoter.promote(Scope("ada"), log.due_for_promotion(Scope("ada")), now=1.0,
    ...                               source="promotion")
    >>> report.messages, [f.text for f in facts.list(Scope("ada"))]
    (1, ['I live in Lisbon'])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tiers.episodic import EpisodicLog, LoggedMessage
from tiers.facts.history import end_stated, statements
from tiers.facts.long_term import LongTermFacts
from tiers.facts.writes import FactInput, fact_key
from tiers.graph.batch import GraphBatch
from tiers.graph.entities import EntityGraph
from tiers.storage.backend import Scope
from unified_memory.protocols import Extractor
from unified_memory.types import ExtractedFact, Extraction, Message

__all__ = ["Promoter", "PromotionReport", "Proposal", "Extracted", "fact_inputs", "CONTEXT_MESSAGES"]

CONTEXT_MESSAGES = 4
"""How many preceding messages an extractor sees with each message it extracts from."""


@dataclass(slots=True)
class PromotionReport:
    """What one promotion run did."""

    messages: int = 0
    facts_created: list[str] = field(default_factory=list)
    facts_reinforced: list[str] = field(default_factory=list)
    facts_superseded: list[str] = field(default_factory=list)
    entities: int = 0
    triples: int = 0


def fact_inputs(extracted: Sequence[ExtractedFact], *, scorer: Callable[[str], float], threshold: float,
                message: Message | None, source: str, metadata: dict[str, Any] | None = None,
                ttl_days: float | None = None) -> list[FactInput]:
    """The proposed facts that clear ``threshold``, as long-term inputs carrying the
    source turn's id, time and metadata (or the given ``metadata``). A fact one message states
    again ("I like tea, tea, tea, ...") is one statement: it is proposed once, so a 100 KB
    message of repeats costs one write, not one reinforcement per repeat.

    >>> [f.text for f in fact_inputs([ExtractedFact(text="I'm Ada", importance=0.9)],
    ...                               scorer=lambda t: 0.0, threshold=0.7, message=None, source="remember")]
    ["I'm Ada"]
    """
    at = message.created_at.timestamp() if message is not None and message.created_at else None
    if metadata is None:
        metadata = dict(message.metadata) if message is not None else {}
    sources = [message.id] if message is not None and message.id else []
    out: list[FactInput] = []
    seen: set[tuple[Any, ...]] = set()
    for fact in extracted:
        said = (fact_key(fact.text), fact.subject, fact.attribute, fact.value, tuple(fact.replaces))
        if said in seen:
            continue
        importance = fact.importance if fact.importance is not None else float(scorer(fact.text))
        if importance < threshold:
            continue
        seen.add(said)
        out.append(FactInput(
            text=fact.text, importance=min(1.0, max(0.0, importance)), category=fact.category,
            confidence=fact.confidence, subject=fact.subject, attribute=fact.attribute, value=fact.value,
            metadata=dict(metadata), ttl_days=ttl_days, source=source, source_message_ids=list(sources),
            valid_from=at, replaces=tuple(fact.replaces),
        ))
    return out


@dataclass(slots=True)
class Proposal:
    """One extraction to store, with the message it came from (if any) and options:
    ``metadata`` (default: the message's) and ``ttl_days`` for its facts. A correction
    (:meth:`UnifiedMemory.correct <unified_memory.UnifiedMemory.correct>`) names the facts its first
    fact ``supersedes`` and the turns it keeps as its ``sources``."""

    extraction: Extraction
    message: Message | None = None
    metadata: dict[str, Any] | None = None
    ttl_days: float | None = None
    supersedes: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


@dataclass(slots=True)
class Extracted:
    """What the extractor made of some messages ahead of the write that stores them (outside its
    lock): one extraction per message of a promoted role with content, in order, or the error
    the extractor raised (raised again where the write would have called it)."""

    extractions: list[Extraction]
    error: Exception | None = None

    def take(self) -> list[Extraction]:
        """The extractions, or the extractor's error raised."""
        if self.error is not None:
            raise self.error
        return self.extractions


class Promoter:
    """Promotes logged messages of one scope into facts, entities and triples (call
    inside ``storage.atomic()``; the memory passes the messages due for promotion)."""

    def __init__(self, log: EpisodicLog, facts: LongTermFacts, graph: EntityGraph, *, extractor: Extractor,
                 scorer: Callable[[str], float], threshold: float, roles: Sequence[str]) -> None:
        self.log = log
        self.facts = facts
        self.graph = graph
        self.extractor = extractor
        self.scorer = scorer
        self.threshold = threshold
        self.roles = tuple(roles)

    def promote(self, scope: Scope, logged: Sequence[LoggedMessage], *, now: float,
                source: str, extractor: Extractor | None = None,
                context: Sequence[Message] = (), marked: bool = False,
                extracted: Extracted | None = None) -> PromotionReport:
        """Extract from these logged messages (those of a promoted role) and store what is
        found; mark them promoted so leaving the window later does not extract them again.
        ``extractor`` replaces the memory's own for these messages. Each message is
        extracted with the messages before it as context: ``context`` (what preceded these
        in the conversation), then the earlier ones of ``logged``, at most
        :data:`CONTEXT_MESSAGES` of them (so "Lisbon" answering "Where do you live?" is
        understood). ``marked``: the messages were logged already marked promoted (in
        this transaction), so they are not marked again. ``extracted``: what :meth:`ahead`
        made of these messages with this ``context`` before the transaction (then the
        extractor is not called again here)."""
        report = PromotionReport(messages=len(logged))
        if not logged:
            return report
        messages = [m.message for m in logged]
        extractions = (extracted.take() if extracted is not None
                       else self.extract(messages, context=context, extractor=extractor))
        promoted = [message for message in messages if message.role in self.roles and message.content]
        proposals = [Proposal(extraction, message=message)
                     for extraction, message in zip(extractions, promoted, strict=True)]
        self.store(scope, proposals, now=now, report=report, source=source)
        if not marked:
            self.log.mark_promoted([m.seq for m in logged])
        return report

    def extract(self, messages: Sequence[Message], *, context: Sequence[Message] = (),
                extractor: Extractor | None = None) -> list[Extraction]:
        """What ``extractor`` (the memory's own by default) makes of each message of a promoted role
        with content, given the messages before it: ``context``, then the earlier ones of
        ``messages``, at most :data:`CONTEXT_MESSAGES` of them. Pure: reads and writes nothing."""
        extractor = extractor or self.extractor
        history = [*context, *messages]
        offset = len(context)
        return [extractor.extract(message, context=history[max(0, at - CONTEXT_MESSAGES):at])
                for at, message in enumerate(history[offset:], start=offset)
                if message.role in self.roles and message.content]

    def ahead(self, messages: Sequence[Message], *, context: Sequence[Message] = (),
              extractor: Extractor | None = None) -> Extracted:
        """:meth:`extract` run before the write that stores ``messages`` (as they will be logged),
        so that the write holds its lock for less; an error of the extractor is kept, to be
        raised where the write extracts (see :class:`Extracted`)."""
        try:
            return Extracted(self.extract(messages, context=context, extractor=extractor))
        except Exception as exc:  # noqa: BLE001 - raised again inside the write, as without the head start
            return Extracted([], exc)

    def store(self, scope: Scope, proposals: Sequence[Proposal], *, now: float, report: PromotionReport,
              source: str, threshold: float | None = None) -> list[list[str]]:
        """Write extractions: the facts over the threshold in one batch (so duplicates
        within it reinforce each other), then all entities and triples. Returns, per
        proposal, the ids of its facts (created or reinforced)."""
        limit = self.threshold if threshold is None else threshold
        batches = [fact_inputs(p.extraction.facts, scorer=self.scorer, threshold=limit, message=p.message,
                               source=source, metadata=p.metadata, ttl_days=p.ttl_days) for p in proposals]
        for p, batch in zip(proposals, batches, strict=True):
            if p.supersedes and batch:
                batch[0] = replace(batch[0], supersedes=p.supersedes, source_message_ids=list(p.sources))
        flat = [item for batch in batches for item in batch]
        written = self.facts.add(scope, flat, now=now) if flat else []
        retired = [old for write in written for old in write.superseded]
        if retired:  # what the old facts stated in the graph ("car Civic") ends with them
            end_stated(self.graph, scope, statements(self.facts.storage, scope, retired), now=now)
        for write in written:
            (report.facts_created if write.action == "created" else report.facts_reinforced).append(write.id)
            report.facts_superseded.extend(write.superseded)
        ids: list[list[str]] = []
        position = 0
        touched: set[str] = set()  # entities whose documents are refreshed once, at the end
        graph = GraphBatch(self.graph, scope)  # the batch's entity and relation writes, set-based
        graph.preload(name for p in proposals for name in (*(e.name for e in p.extraction.entities), *(
            n for t in p.extraction.triples for n in (t.subject, t.object))))
        for proposal, batch in zip(proposals, batches, strict=True):
            ids.append([w.id for w in written[position:position + len(batch)]])
            position += len(batch)
            message, extraction = proposal.message, proposal.extraction
            if not extraction.entities and not extraction.triples:
                continue
            when = message.created_at.timestamp() if message is not None and message.created_at else now
            metadata = proposal.metadata if proposal.metadata is not None else (
                dict(message.metadata) if message is not None else {})
            if any(e.attributes.get("relation") == "self" for e in extraction.entities):
                graph.flush()
                self._refresh(scope, touched)  # a speaker changes how every later document reads
            if extraction.entities:
                upserted = graph.upsert(extraction.entities, now=when, metadata=metadata)
                touched.update(upserted.values())
                report.entities += len(upserted)
            if extraction.triples:
                report.triples += len(graph.add_triples(
                    extraction.triples, now=when, metadata=metadata,
                    source_message_id=message.id if message is not None else None, touched=touched))
        graph.flush()
        self._refresh(scope, touched)
        return ids

    def _refresh(self, scope: Scope, touched: set[str]) -> None:
        """Refresh the documents of the entities touched so far (each depends only on the graph
        as it stands, so once after their last change is as good as after every change)."""
        ordered = sorted(touched)
        for start in range(0, len(ordered), 500):
            self.graph.refresh(scope.user_id, ordered[start:start + 500])
        touched.clear()
