"""The write paths of one :class:`~unified_memory.coordinator.view.MemoryView`: messages into the
log and the window, what follows from them (trim, summary, compaction, promotion,
expiry, archiving beyond the long-term limit, retention), and facts and relations stored directly.

Arguments arrive validated (the public layer checks them and names the field); each
method here runs inside the view's write transaction, so a failure writes nothing.

    >>> from unified_memory.config import MemoryConfig
    >>> from unified_memory.coordinator.backend import open_backend
    >>> from unified_memory.types import Message
    >>> from tiers.records.scope import Scope
    >>> writer = Writer(MemoryView(open_backend(None, MemoryConfig()), Scope("ada", "", "")))
    >>> ids = writer.write_messages([Message(role="user", content="I live in Lisbon")], extract=True)
    >>> [f.text for f in writer.view.backend.facts.list(writer.view.scope, now=0.0)]
    ['I live in Lisbon']
    >>> writer.view.backend.close()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tiers.episodic import LoggedMessage
from tiers.facts.long_term import EvictionWeights
from tiers.storage.rows import new_id
from tiers.trimming import message_token_counts
from unified_memory.coordinator.view import MemoryView
from unified_memory.errors import invalid, wrong_type
from unified_memory.extraction.promotion import CONTEXT_MESSAGES, Extracted, PromotionReport, Proposal
from unified_memory.protocols import Extractor
from unified_memory.types import (
    ExtractedFact,
    ExtractedTriple,
    Extraction,
    Message,
    trusted_record,
    utc_from_timestamp,
)
from unified_memory.validation import (
    check_fact_keys,
    check_metadata,
    check_optional_text,
    check_text,
    check_ttl_days,
    check_unit,
)

__all__ = ["Writer"]


@dataclass(frozen=True, slots=True)
class _Ahead:
    """A write's extraction made before its transaction: the context it was given, the storage's
    change mark when that context was read, and what came of it."""

    mark: Any
    context: list[Message]
    extracted: Extracted


@dataclass(frozen=True, slots=True)
class Writer:
    """Writes for one view; stateless beyond it."""

    view: MemoryView

    def extract_now(self, extract: bool | None) -> bool:
        """Whether a write extracts at once: ``extract``, else ``config.extract_on_write`` (with
        ``auto_promote=False`` extraction waits for ``consolidate()``, as that setting asks)."""
        if extract is None:
            config = self.view.backend.config
            return config.extract_on_write and config.auto_promote
        if not isinstance(extract, bool):
            raise wrong_type("extract", "bool or None", extract)
        return extract

    # -- messages -----------------------------------------------------------------------------

    def write_messages(self, messages: Sequence[Message], *, extract: bool = False,
                       extractor: Extractor | None = None) -> list[str]:
        """Log ``messages``, add them to the window, and do what follows; returns their ids."""
        view, backend = self.view, self.view.backend
        messages = backend.scrub.messages("messages", messages)  # the redactor runs before anything is written
        now = backend.clock()
        # The pure work runs before the write takes the lock other users' reads wait for: the
        # importance scores, the token counts, and the extraction (see _ahead).
        importances = [backend.scorer(m.content) if m.role == "user" and m.content else 0.0 for m in messages]
        tokens = message_token_counts(messages, backend.count_tokens)
        # the extractor's context: only when a message of a promoted role is there to extract from
        wanted = extract and any(m.role in backend.promoter.roles and m.content for m in messages)
        ahead = self._ahead(messages, now, extractor) if wanted else None
        with view.write():
            before: list[Message] | None = None
            extracted: Extracted | None = None
            if ahead is not None:
                before = self._context_now(ahead)
                if before is ahead.context:  # the window ends as it did: what was extracted holds
                    extracted = ahead.extracted
            rows: list[tuple[Any, ...]] = []
            logged = backend.log.append(view.scope, messages, now=now, importances=importances, promoted=extract,
                                        rows=rows)
            protect: list[str] = []
            if extract:  # logged already marked promoted: one write of each row
                report = self.promote(logged, now=now, source="turn", extractor=extractor, context=before or [],
                                      marked=True, extracted=extracted)
                protect = [*report.facts_created, *report.facts_reinforced]
            trimmed, held = backend.window.extend_counted(  # the tokens held only matter to compaction
                view.scope, logged, token_counts=tokens, held=backend.config.compaction_ratio is not None)
            if trimmed:
                view.event("trim", "completed", messages=len(trimmed))
                self.summarize(trimmed, now)
            compacted = self.compact(now, held=held)
            self.maintain(now, promote=backend.config.auto_promote, protect=protect)
            if before is not None and backend.window_tail.outermost():
                self._offer_tail(before, logged, rows, [*trimmed, *compacted])
        return [m.id for m in logged]

    def _ahead(self, messages: Sequence[Message], now: float, extractor: Extractor | None) -> _Ahead:
        """Before the write: the extractor's context (what the window ends with: kept from the last
        write when nothing was written since, else read) and the mark it was read at, under the
        storage's lock for a moment; then, outside it, the extraction of ``messages`` as the log
        will store them: their time and scope, and an id of the same form (the log gives each its
        own inside the transaction; the facts found name that one as their source)."""
        view, backend = self.view, self.view.backend
        storage, scope = backend.storage, view.scope
        mark = storage.change_mark()
        if mark is None:  # PostgreSQL: no mark, nothing kept; read beside a write (a spare connection)
            context = backend.window.messages(scope, last=CONTEXT_MESSAGES)
        else:
            with storage.lock:  # the mark and the context read together
                mark = storage.change_mark()
                kept = backend.window_tail.get(scope, lambda: mark)
                context = kept if kept is not None else backend.window.messages(scope, last=CONTEXT_MESSAGES)
        update = {"user_id": scope.user_id, "agent_id": scope.agent_id or None, "session_id": scope.session_id or None}
        logged = [m.model_copy(update={**update, "id": new_id("msg"), "created_at": utc_from_timestamp(
            m.created_at.timestamp() if m.created_at else now)}) for m in messages]
        return _Ahead(mark, context, backend.promoter.ahead(logged, context=context, extractor=extractor))

    def _context_now(self, ahead: _Ahead) -> list[Message]:
        """Inside the write: the extractor's context as the window ends now; ``ahead.context`` itself
        when it still is (the same mark; else the same messages read again: PostgreSQL has no mark,
        and on SQLite any write to the file, another user's too, moves it)."""
        view, backend = self.view, self.view.backend
        storage = backend.storage
        mark = storage.change_mark()
        if mark is not None and mark == ahead.mark:
            return ahead.context
        now = backend.window_tail.get(view.scope, lambda: mark)
        if now is None:
            now = [m.message for m in backend.window.logged(view.scope, last=CONTEXT_MESSAGES)]
        return ahead.context if now == ahead.context else now

    def _offer_tail(self, before: list[Message], logged: list[LoggedMessage], rows: list[tuple[Any, ...]],
                    left: list[LoggedMessage]) -> None:
        """Offer what the window ends with now: the last :data:`CONTEXT_MESSAGES` of what it ended
        with and of the messages just logged (appended after all it holds, each as a read of
        the log makes it), unless one of those left it (then the window is read at the next write)."""
        keep = min(len(logged), CONTEXT_MESSAGES)
        as_read = self.view.backend.log.as_read
        newer = [m.message if _as_stored(m.message) else as_read(row)
                 for m, row in zip(logged[len(logged) - keep:], rows[len(rows) - keep:], strict=True)]
        ends = [*before, *newer][-CONTEXT_MESSAGES:]
        gone = {m.id for m in left}
        if not any(m.id in gone for m in ends):
            self.view.backend.window_tail.offer(self.view.scope, ends)

    def compact(self, now: float, *, held: int | None = None) -> list[LoggedMessage]:
        """Compaction at ``compaction_ratio`` x ``context_max_tokens``: the oldest whole
        interactions leave the window (at a turn boundary only), are summarised, and are
        promoted by :meth:`maintain` like any message that left the window. ``held``: the
        tokens the window holds, when the caller has just counted them. Returns what left."""
        view, backend = self.view, self.view.backend
        cfg = backend.config
        if cfg.compaction_ratio is None:
            return []
        threshold = max(1, int(cfg.context_max_tokens * cfg.compaction_ratio))
        target = max(1, int(threshold * (1 - cfg.compaction_min_reduction)))
        before = backend.window.tokens(view.scope) if held is None else held
        if before <= threshold:
            return []
        view.event("compact", "started")
        compacted = backend.window.compact(view.scope, threshold=threshold, target=target)
        if compacted:
            self.summarize(compacted, now)
        view.event("compact", "completed", messages_compacted=len(compacted), tokens_before=before,
                   tokens_after=backend.window.tokens(view.scope), threshold=threshold, target=target)
        return compacted

    def summarize(self, trimmed: Sequence[LoggedMessage], now: float) -> None:
        """Summarize-on-trim: fold what left the window into the running summary."""
        view, backend = self.view, self.view.backend
        if not backend.config.summarize_on_trim:
            return
        view.event("summarise", "started")
        previous = backend.summaries.get(view.scope)
        text, count = previous if previous is not None else ("", 0)
        summary = backend.summarizer.summarize(text, [m.message for m in trimmed])
        if not isinstance(summary, str):
            raise wrong_type("summarizer", "a summarize() that returns str", summary)
        backend.summaries.put(view.scope, summary, messages=count + len(trimmed), now=now)
        view.event("summarise", "completed", messages=len(trimmed), chars=len(summary))

    def promote(self, logged: Sequence[LoggedMessage], *, now: float, source: str,
                extractor: Extractor | None = None, context: Sequence[Message] = (),
                marked: bool = False, extracted: Extracted | None = None) -> PromotionReport:
        """Extract from logged messages into facts, entities and triples, reported as
        ``promote`` events (at write time ``source="turn"``, on leaving the window ``"promotion"``;
        ``marked``, ``extracted``: see :meth:`~unified_memory.extraction.promotion.Promoter.promote`)."""
        view = self.view
        view.event("promote", "started")
        report = view.backend.promoter.promote(view.scope, logged, now=now, source=source, extractor=extractor,
                                               context=context, marked=marked, extracted=extracted)
        view.event("promote", "completed", messages=report.messages, facts_created=len(report.facts_created),
                   facts_reinforced=len(report.facts_reinforced), facts_superseded=len(report.facts_superseded),
                   entities=report.entities, triples=report.triples)
        return report

    def maintain(self, now: float, *, promote: bool, protect: Iterable[str] = ()) -> PromotionReport:
        """Promotion (when asked), then TTL expiry, the long-term limit (archives the
        active facts beyond it: an ``evict`` event counts them) and episodic retention,
        which apply after every write (call inside a transaction)."""
        view, backend = self.view, self.view.backend
        cfg = backend.config
        due = backend.log.due_for_promotion(view.scope) if promote else []
        report = self.promote(due, now=now, source="promotion") if due else PromotionReport()
        backend.facts.expire(view.scope, now=now)
        if cfg.long_term_limit is not None:
            e = cfg.eviction
            archived = backend.facts.evict(view.scope, limit=cfg.long_term_limit, now=now,
                                           protect={*protect, *report.facts_created, *report.facts_reinforced},
                                           weights=EvictionWeights(e.importance_weight, e.recency_weight,
                                                                   e.use_weight, e.recency_half_life_days,
                                                                   e.use_saturation))
            if archived:
                view.event("evict", "completed", facts=len(archived))
        if cfg.episodic_retention_days is not None:
            backend.log.prune(view.scope.user_id, older_than=now - cfg.episodic_retention_days * 86400)
        return report

    def consolidate(self) -> int:
        """Promote what is due, expire, archive beyond the limit, prune; returns the messages promoted."""
        with self.view.write():
            return self.maintain(self.view.backend.clock(), promote=True).messages

    def end_session(self) -> int:
        """Every message leaves the window (and is promoted); returns how many."""
        view, backend = self.view, self.view.backend
        with view.write():
            held = backend.window.clear(view.scope)
            if held:
                view.event("trim", "completed", messages=len(held))
                self.summarize(held, backend.clock())
            self.maintain(backend.clock(), promote=backend.config.auto_promote)
        return len(held)

    def clear(self, include_long_term: bool) -> None:
        """Forget the window, the log and the summary (and with ``include_long_term`` the facts and graph)."""
        view, backend = self.view, self.view.backend
        with view.write():
            backend.window.clear(view.scope)
            messages = backend.log.delete_scope(view.scope)
            backend.summaries.delete_scope(view.scope)
            facts = entities = 0
            if include_long_term:
                facts = backend.facts.delete_scope(view.scope)
                entities = backend.graph.delete_scope(view.scope)
            view.event("reset", "completed", messages=messages, facts=facts, entities=entities)

    # -- facts and relations ------------------------------------------------------------------

    def store_facts(self, proposals: list[Proposal]) -> list[str]:
        """Store validated proposals (one fact each) as facts; returns their ids."""
        view, backend = self.view, self.view.backend
        now = backend.clock()
        with view.write():
            per_item = backend.promoter.store(view.scope, proposals, now=now, report=PromotionReport(),
                                              source="remember", threshold=0.0)
            ids = [fact_ids[0] for fact_ids in per_item]
            self.maintain(now, promote=False, protect=ids)
        return ids

    def correct(self, fact_id: str, *, text: str | None, importance: float | None,
                category: str | None) -> str:
        """A new version of the user's current fact ``fact_id`` (its text, importance or category
        changed; the rest carried over) that supersedes it; returns the new fact's id. See
        :meth:`UnifiedMemory.correct <unified_memory.UnifiedMemory.correct>`."""
        from tiers.facts.listing import fact_versions

        view, backend = self.view, self.view.backend
        fact_id = check_text("fact_id", fact_id)
        importance = check_unit("importance", importance)
        category = check_optional_text("category", category)
        if text is not None:
            text = check_text("text", text).strip()
        if text is None and importance is None and category is None:
            raise invalid("text", "give the new text, importance or category")
        old = self._current_version(fact_id, fact_versions(backend.storage, view.scope, fact_id))
        now = backend.clock()
        spec: dict[str, Any] = {
            "text": old.text if text is None else text,
            "importance": old.importance if importance is None else importance,
            "category": old.category if category is None else (category or None),
            "metadata": {**old.metadata, "corrects": old.id},
            "ttl_days": None if old.expires_at is None else max(old.expires_at.timestamp() - now, 1.0) / 86400}
        proposal = self.fact_item("", spec)  # extracts outside the write, as remember does
        if (text is None or text == old.text) and old.attribute:  # the same statement: the same slot
            proposal.extraction.facts[0] = proposal.extraction.facts[0].model_copy(
                update={"subject": old.subject, "attribute": old.attribute, "value": old.value})
        proposal.supersedes, proposal.sources = (old.id,), tuple(old.source_message_ids)
        with view.write():  # again inside: another write may have replaced it meanwhile
            self._current_version(fact_id, fact_versions(backend.storage, view.scope, fact_id))
            ids = backend.promoter.store(view.scope, [proposal], now=now, report=PromotionReport(),
                                         source="correction", threshold=0.0)[0]
            self.maintain(now, promote=False, protect=ids)
        return ids[0]

    def _current_version(self, fact_id: str, versions: Sequence[Any]) -> Any:
        """The fact ``fact_id`` among its ``versions`` when it is current (active or archived), else
        ``NotFoundError`` (no such fact of this user) or ``ConflictError`` (it was superseded)."""
        from unified_memory.errors import ConflictError, NotFoundError

        fact = next((f for f in versions if f.id == fact_id), None)
        if fact is None or (self.view.scope.agent_id or None) != fact.agent_id:
            raise NotFoundError(f"fact_id: no fact {fact_id[:80]!r} of this user", field="fact_id")
        if fact.status not in ("active", "archived"):
            current = versions[-1].id if versions[-1].status in ("active", "archived") else None
            raise ConflictError(f"fact_id: {fact_id[:80]!r} is {fact.status}" + (
                f"; correct its current version {current!r}" if current else ""), field="fact_id")
        return fact

    def fact_item(self, field: str, item: Any) -> Proposal:
        """Validate one item of ``remember_many`` into a proposal holding exactly one fact
        (``field=""``: the keywords of ``remember``, named as they are)."""
        def name(key: str) -> str:
            return f"{field}.{key}" if field else key

        backend = self.view.backend
        if isinstance(item, ExtractedFact):
            spec: dict[str, Any] = item.model_dump()
        elif isinstance(item, str):
            spec = {"text": item}
        elif isinstance(item, Mapping):
            spec = check_fact_keys(field, item)
        else:
            raise wrong_type(field, "str, dict or ExtractedFact", item)
        spec = backend.scrub.data(field or "fact", spec)  # text, slots, category and metadata
        text = check_text(name("text") if not isinstance(item, str) else field, spec.get("text")).strip()
        if isinstance(item, str):  # a bare text: no options to check (what the checks give for None)
            importance, category, metadata = None, None, {}
            ttl = check_ttl_days(field, None, now=backend.clock())
        else:
            importance = check_unit(name("importance"), spec.get("importance"))
            category = check_optional_text(name("category"), spec.get("category"))  # no NUL or lone surrogate
            metadata = check_metadata(name("metadata"), spec.get("metadata"))
            ttl = check_ttl_days(name("ttl_days"), spec.get("ttl_days"), now=backend.clock())
        extraction = backend.extractor.extract(trusted_record(  # the text is checked: a Message as validated
            Message, role="user", content=text, name=None, tool_calls=None, tool_call_id=None, metadata={},
            images=None, reasoning_details=None, id=None, created_at=None, user_id=None, agent_id=None,
            session_id=None))
        # The text is stored whole, as one fact; the extractor lends it a slot and a category.
        found = next((f for f in extraction.facts if f.attribute), extraction.facts[0] if extraction.facts else None)
        checked = True  # every value below is already valid (checked here, or a field of the extractor's fact)
        if importance is None:
            checked = found is not None and found.importance is not None and len(extraction.facts) == 1
            importance = found.importance if checked and found is not None else float(backend.scorer(text))
        values: dict[str, Any] = {"text": text, "importance": importance,
                  "category": category or (found.category if found else None),
                  "subject": spec.get("subject") or (found.subject if found else None),
                  "attribute": spec.get("attribute") or (found.attribute if found else None),
                  "value": spec.get("value") or (found.value if found else None)}
        fact = (trusted_record(ExtractedFact, **values, confidence=1.0, replaces=[]) if checked and isinstance(item, str)
                else ExtractedFact(**values))  # a scorer's number, a caller's slot: validated
        return Proposal(trusted_record(Extraction, facts=[fact], entities=extraction.entities,
                                       triples=extraction.triples), metadata=metadata, ttl_days=ttl)

    def add_triple(self, triple: ExtractedTriple, metadata: dict[str, Any] | None) -> str:
        """Add one relation (endpoints created as needed); returns its id."""
        view = self.view
        with view.write():
            return view.backend.graph.add_triples(view.scope, [triple], now=view.backend.clock(),
                                                  metadata=metadata)[0]


def _as_stored(message: Message) -> bool:
    """Whether a logged message is already what a read of its row makes: no metadata, tool calls,
    images or reasoning (values a read decodes from JSON, as new objects, lists for tuples)."""
    return (not message.metadata and type(message.metadata) is dict and message.tool_calls is None
            and message.images is None and message.reasoning_details is None)
