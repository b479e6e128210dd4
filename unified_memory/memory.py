"""UnifiedMemory: the coordinator of the four tiers over one SQLite file.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory(short_term_limit=2) as mem:
    ...     _ = mem.add_turn("I'm allergic to peanuts", "Noted.")
    ...     _ = mem.add_turn("Thanks!", "Anytime.")      # the first turn leaves the window
    ...     [hit.text for hit in mem.recall("any allergies?", tiers=["long_term"])]
    ["I'm allergic to peanuts"]
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.importance import HeuristicImportanceScorer
from tiers.entities import ENTITY_LENGTH_NORMALISATION, EntityGraph
from tiers.episodic import EpisodicLog
from tiers.long_term import EvictionWeights, LongTermFacts
from tiers.short_term import ShortTermWindow
from tiers.storage import Scope, Storage
from tiers.summaries import ConversationSummaries
from tiers.trimming import message_token_counts
from unified_memory.async_api import AsyncMethods
from unified_memory.config import MemoryConfig
from unified_memory.errors import StorageError, wrong_type
from unified_memory.events import EventBus, MemoryEvent
from unified_memory.extraction.promotion import CONTEXT_MESSAGES, Promoter, PromotionReport
from unified_memory.extraction.rules import RuleExtractor
from unified_memory.extraction.summarizers import ExtractiveSummarizer
from unified_memory.fact_writing import FactWritingMethods
from unified_memory.io.jsonl import export_jsonl, forget, import_jsonl
from unified_memory.privacy.redaction import Scrubber, make_scrubber
from unified_memory.protocols import Embedder, Extractor, Reranker, Summarizer, VectorIndex
from unified_memory.reading import ReadingMethods
from unified_memory.retrieval.method import Dense, setup_dense
from unified_memory.retrieval.tokens import make_token_counter
from unified_memory.types import (
    Message,
    utc_from_timestamp,
)
from unified_memory.validation import (
    check_bool,
    check_metadata,
    check_scope_id,
    check_text,
    parse_when,
    to_message,
)

_LOG = logging.getLogger(__name__)

__all__ = ["UnifiedMemory"]


@dataclass(slots=True)
class _Backend:
    """What every scoped view of one memory file shares."""

    storage: Storage
    config: MemoryConfig
    log: EpisodicLog
    window: ShortTermWindow
    facts: LongTermFacts
    graph: EntityGraph
    promoter: Promoter
    extractor: Extractor
    scorer: Callable[[str], float]
    count_tokens: Callable[[str], int]
    clock: Callable[[], float]
    mode: str
    dense: Dense | None
    reranker: Reranker | None
    events: EventBus
    summaries: ConversationSummaries
    summarizer: Summarizer
    scrub: Scrubber


class UnifiedMemory(ReadingMethods, FactWritingMethods, AsyncMethods):
    """Tiered long-term memory for one user (and optionally one agent and session).

    ``path=None`` keeps everything in memory; a path is one durable SQLite file,
    created if missing. ``overrides`` are :class:`MemoryConfig` fields. Pluggable:
    ``importance_scorer`` (any ``str -> float``), ``extractor`` (see
    :class:`~unified_memory.protocols.Extractor`), ``token_counter`` (``str -> int``),
    ``clock`` (``() -> POSIX seconds``, for tests and replays) and ``redactor``
    (``str -> str``, run on every text before it is stored; ``redact_secrets=True``
    uses :class:`~unified_memory.privacy.secrets.SecretRedactor`).

    >>> mem = UnifiedMemory(None, user_id="ada", importance_threshold=0.5)
    >>> mem.config.importance_threshold
    0.5
    >>> mem.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        config: MemoryConfig | dict[str, Any] | None = None,
        user_id: str = "default",
        agent_id: str | None = None,
        session_id: str | None = None,
        importance_scorer: Callable[[str], float] | None = None,
        extractor: Extractor | None = None,
        token_counter: Callable[[str], int] | None = None,
        clock: Callable[[], float] | None = None,
        embedder: Embedder | None = None,
        vector_index: VectorIndex | None = None,
        reranker: Reranker | None = None,
        summarizer: Summarizer | None = None,
        redactor: Callable[[str], str] | None = None,
        **overrides: Any,
    ) -> None:
        scope = Scope(check_scope_id("user_id", user_id),
                      check_scope_id("agent_id", agent_id, optional=True) or "",
                      check_scope_id("session_id", session_id, optional=True) or "")
        if path is not None and not isinstance(path, str | os.PathLike):
            raise wrong_type("path", "str or path", path)
        cfg = MemoryConfig.build(config, overrides)
        for name, value in (("importance_scorer", importance_scorer), ("token_counter", token_counter),
                            ("clock", clock)):
            if value is not None and not callable(value):
                raise wrong_type(name, "callable", value)
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            raise wrong_type("extractor", "object with an extract(message, context=...) method", extractor)
        if embedder is not None and not callable(getattr(embedder, "embed", None)):
            raise wrong_type("embedder", "Embedder (name, dim, embed(texts))", embedder)
        if vector_index is not None and not callable(getattr(vector_index, "search", None)):
            raise wrong_type("vector_index", "VectorIndex", vector_index)
        if reranker is not None and not callable(getattr(reranker, "rerank", None)):
            raise wrong_type("reranker", "object with a rerank(query, texts) method", reranker)
        if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
            raise wrong_type("summarizer", "object with a summarize(previous, messages) method", summarizer)
        scrub = make_scrubber(redactor, redact_secrets=cfg.redact_secrets)
        scorer = importance_scorer or HeuristicImportanceScorer()
        count_tokens = token_counter or make_token_counter(cfg.token_counter, cfg.tiktoken_encoding)
        storage = Storage(path)
        try:  # a file refused while the tiers open must not stay open (nor keep its -wal / -shm)
            k1, b = cfg.ranking.bm25_k1, cfg.ranking.bm25_b
            log = EpisodicLog(storage, k1=k1, b=b, neighbor_turns=cfg.ranking.neighbor_turns,
                              neighbor_gap_seconds=60.0 * cfg.ranking.neighbor_gap_minutes)
            facts = LongTermFacts(storage, k1=k1, b=b)
            graph = EntityGraph(storage, k1=k1, b=min(b, ENTITY_LENGTH_NORMALISATION))
            chosen_extractor = extractor or RuleExtractor(scorer)
            mode, dense = setup_dense(cfg, storage, [log.index, facts.index, graph.index], path=path,
                                      embedder=embedder, vector_index=vector_index)
            self._backend = _Backend(
                storage=storage, config=cfg, log=log,
                window=ShortTermWindow(log, max_messages=cfg.short_term_limit, max_tokens=cfg.short_term_max_tokens),
                facts=facts, graph=graph,
                promoter=Promoter(log, facts, graph, extractor=chosen_extractor, scorer=scorer,
                                  threshold=cfg.importance_threshold, roles=cfg.promote_roles),
                extractor=chosen_extractor, scorer=scorer, count_tokens=count_tokens, clock=clock or time.time,
                mode=mode, dense=dense, reranker=reranker, events=EventBus(),
                summaries=ConversationSummaries(storage), summarizer=summarizer or ExtractiveSummarizer(), scrub=scrub,
            )
        except BaseException:
            storage.close()
            raise
        self._scope = scope
        if dense is not None and dense.index.persistent:
            self._check_drift()

    # -- identity ---------------------------------------------------------------------------

    @property
    def config(self) -> MemoryConfig:
        """The validated configuration (shared by every scoped view)."""
        return self._backend.config

    @property
    def user_id(self) -> str:
        return self._scope.user_id

    @property
    def agent_id(self) -> str | None:
        return self._scope.agent_id or None

    @property
    def session_id(self) -> str | None:
        return self._scope.session_id or None

    @property
    def path(self) -> str | None:
        """The database file, or ``None`` in memory."""
        return str(self._backend.storage.path) if self._backend.storage.path else None

    def scoped(self, *, user_id: str | None = None, agent_id: str | None = None,
               session_id: str | None = None) -> UnifiedMemory:
        """A view of the same file for another user / agent / session (shares the connection).

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.remember("I live in Lisbon")
        ...     mem.scoped(user_id="bob").recall("Lisbon")
        []
        """
        view = object.__new__(UnifiedMemory)
        view._backend = self._backend
        view._scope = Scope(
            check_scope_id("user_id", user_id if user_id is not None else self._scope.user_id),
            check_scope_id("agent_id", agent_id, optional=True) or "" if agent_id is not None
            else self._scope.agent_id,
            check_scope_id("session_id", session_id, optional=True) or "" if session_id is not None
            else self._scope.session_id,
        )
        return view

    def __enter__(self) -> UnifiedMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def retrieval(self) -> str:
        """The retrieval method in force: ``lexical``, ``embedding`` or ``hybrid``."""
        return self._backend.mode

    def close(self) -> None:
        """Close the file (idempotent). Scoped views share it and are closed too.
        Large lexical indexes built or changed here are saved first, so the next
        process restores them instead of rebuilding (:mod:`tiers.snapshots`)."""
        backend = self._backend
        if not backend.storage.closed:
            try:
                for documents in (backend.facts.index, backend.graph.index, backend.log.index):
                    documents.save_snapshots()
            except (StorageError, sqlite3.Error) as exc:  # e.g. locked by a writer: the next open rebuilds
                _LOG.warning("close: index snapshots not saved: %s", exc)
            if backend.dense is not None:
                backend.dense.close()
        backend.storage.close()

    def _check_drift(self) -> None:
        """Compare a persistent vector index with the store for this user; rebuild what drifted."""
        dense = self._backend.dense
        if dense is not None:
            for partitions in dense.partitions.values():
                partitions.ensure(self._scope.user_id)

    def reindex(self, *, all_users: bool = False) -> int:
        """Rebuild the indexes derived from SQLite (lexical, and vectors when dense
        retrieval is on) for this user, or for every user in the file. Returns how
        many users were reindexed.

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.remember("I keep bees")
        ...     mem.reindex(), [h.text for h in mem.recall("bees", tiers="long_term")]
        (1, ['I keep bees'])
        """
        backend = self._backend
        users = [self._scope.user_id]
        if check_bool("all_users", all_users):
            users = self.users()
        for documents in (backend.log.index, backend.facts.index, backend.graph.index):
            for user in users:
                documents.lexical.invalidate(user)
        if backend.dense is not None:
            with backend.storage.atomic():
                backend.dense.rebuild(users)
        return len(users)

    def __repr__(self) -> str:
        return f"UnifiedMemory(path={self.path!r}, user_id={self.user_id!r})"

    # -- export, import, forget ---------------------------------------------------------------

    def export_jsonl(self, destination: str | os.PathLike[str] | Any, *, all_users: bool = False) -> int:
        """Export this user's rows of every tier (every user's with ``all_users``) as JSON Lines.

        ``destination`` is a path (written atomically: a temporary file, then
        ``os.replace``) or a text stream. The first line is a header (``format``,
        ``version``, ``schema_version``, ``library_version``, ``exported_at``,
        ``users``), then one ``{"kind": <table>, "row": {...}}`` line per stored row
        of messages, window, facts, entities, triples, summaries and any other table
        with a ``user_id`` column, values exactly as stored. Embeddings and indexes are
        derived, not exported. Returns the number of row lines.

        >>> import io
        >>> with UnifiedMemory(user_id="ada") as mem:
        ...     _ = mem.add_turn("I keep bees", "Nice")
        ...     mem.export_jsonl(io.StringIO())    # two messages, their two window entries
        4
        """
        return export_jsonl(self, destination, all_users=all_users)

    def ingest(self, path: str | os.PathLike[str], *, format: str = "auto", user_id: str | None = None,
               progress: Callable[[int, int], Any] | None = None, extract: bool | None = None) -> Any:
        """Ingest a chat-log file: OpenAI-style JSON (a list of messages, ``{"messages": [...]}``
        or a list of conversations), JSON Lines, or LoCoMo. Idempotent and resumable: each
        message's key is stored with it, so ingesting a file again adds nothing and an
        interrupted run completes. The whole file is validated before anything is written;
        errors name the file and line. Facts, entities and relations are extracted from the
        users' messages as they are written (``extract=None`` follows
        ``config.extract_on_write``; ``False`` leaves the log as history only). Returns an
        :class:`~unified_memory.io.ingest.IngestReport` (see :func:`~unified_memory.io.ingest.ingest_file`
        for users and sessions).

        >>> import json, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "chat.json")
        >>> with open(path, "w") as f:
        ...     json.dump([{"role": "user", "content": "I keep bees"}], f)
        >>> with UnifiedMemory() as mem:
        ...     mem.ingest(path).messages_added, mem.ingest(path).messages_added
        (1, 0)
        """
        from unified_memory.io.ingest import ingest_file

        return ingest_file(self, path, format=format, user_id=user_id, progress=progress, extract=extract)

    def import_jsonl(self, source: str | os.PathLike[str] | Any, *, user_id: str | None = None) -> int:
        """Import an :meth:`export_jsonl` file (a path or a text stream) into this file.

        Everything is validated first (header, kinds, columns, value types; an error
        names the file and line) and written in one transaction, so a bad file writes
        nothing. Rows already present with the same content are skipped (importing
        twice adds nothing); a row whose id exists with other content is an error.
        Integer positions (``seq``) are kept when free, else renumbered with every
        reference. ``user_id`` moves a single-user export to that user; into the file the
        export came from, that copies the user: rows whose ids belong to another user get
        fresh ids (derived from the new user and the old id, so importing again still adds
        nothing) and every reference follows. The indexes of the users touched are rebuilt
        from the store. Returns the rows imported.

        >>> import io
        >>> buffer = io.StringIO()
        >>> with UnifiedMemory(user_id="ada") as mem:
        ...     _ = mem.remember("I keep bees")
        ...     _ = mem.export_jsonl(buffer)
        >>> with UnifiedMemory() as other:
        ...     n = other.import_jsonl(io.StringIO(buffer.getvalue()), user_id="bob")
        ...     n, [h.text for h in other.scoped(user_id="bob").recall("bees")]
        (1, ['I keep bees'])
        """
        return import_jsonl(self, source, user_id=user_id)

    def forget(self, *, user_id: str | None = None, ids: Sequence[str] | None = None) -> dict[str, int]:
        """Delete a user's data for good; returns the rows deleted per table.

        Without ``ids``: everything of ``user_id`` (this memory's user by default) —
        every table with a ``user_id`` column (all agents and sessions), the embedding
        cache, vector partitions (numpy or chroma) and lexical indexes. With ``ids``
        (message, fact, entity or triple ids of that user; an unknown id raises
        ``NotFoundError`` naming ``ids`` and deletes nothing): those items and what
        derives from them — a message's window entry and its conversation's running
        summary if the message had left the window, an entity's triples, the
        descriptions of entities that lost a relation, index entries and cached
        embeddings no longer used. Deleted pages are zeroed (``secure_delete``), the file is
        rewritten (``VACUUM``), the in-memory query cache dropped and the write-ahead log
        checkpointed and truncated, so the text cannot be read back from the files (with
        embedded Chroma, see docs/deployment.md). Emits a ``reset`` event with the counts.

        >>> with UnifiedMemory() as mem:
        ...     keep, drop = mem.remember("I keep bees"), mem.remember("My PIN is 4711")
        ...     mem.forget(ids=[drop])["facts"], [f.text for f in mem.facts()]
        (1, ['I keep bees'])
        """
        return forget(self, user_id=user_id, ids=ids)

    # -- writing ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _write(self) -> Iterator[None]:
        """One transaction; on failure the user's indexes are rebuilt from the store."""
        backend = self._backend
        try:
            # Vectors are embedded at the end of the transaction, in one batch per tier
            # (inside it: an embedder failure rolls the write back like any other).
            with backend.storage.atomic(), \
                    backend.dense.defer() if backend.dense is not None else contextlib.nullcontext():
                yield
        except BaseException as exc:
            for index in (backend.log.index, backend.facts.index, backend.graph.index):
                index.invalidate(self._scope.user_id)
            backend.events.fail(exc)
            raise
        backend.events.deliver()

    def _event(self, kind: str, stage: str, **counts: int) -> None:
        """Report what this write did (delivered when it commits, see :mod:`unified_memory.events`)."""
        self._backend.events.hold(self._new_event(kind, stage, counts))

    def _new_event(self, kind: str, stage: str, counts: dict[str, int], error: str | None = None) -> MemoryEvent:
        scope = self._scope
        return MemoryEvent(kind, stage, scope.user_id, scope.agent_id or None,  # type: ignore[arg-type]
                           scope.session_id or None, counts, utc_from_timestamp(self._backend.clock()), error)

    def report_failure(self, kind: str, error: str) -> None:
        """Tell the event hooks that work of ``kind`` failed outside a write (used by ``@remember``).

        >>> with UnifiedMemory() as mem:
        ...     seen = []
        ...     _ = mem.on_event(seen.append)
        ...     mem.report_failure("agent", "recall: timeout"); seen[0].stage, seen[0].error
        ('failed', 'recall: timeout')
        """
        self._backend.events.emit(self._new_event(kind, "failed", {}, error))

    def on_event(self, hook: Callable[[MemoryEvent], None], *, kinds: Iterable[str] | None = None,
                 ) -> Callable[[], None]:
        """Call ``hook(event)`` for what the memory does — trim, promote, evict, reset
        (see :mod:`unified_memory.events`); returns a function that unsubscribes.

        >>> with UnifiedMemory() as mem:
        ...     seen = []
        ...     stop = mem.on_event(seen.append, kinds=["reset"])
        ...     mem.clear(); stop(); [(e.kind, e.stage) for e in seen]
        [('reset', 'completed')]
        """
        return self._backend.events.subscribe(hook, kinds=kinds)

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by the configured counter (chars/4 unless tiktoken is usable offline).

        >>> UnifiedMemory().count_tokens("abcdefgh")
        2
        """
        return self._backend.count_tokens(check_text("text", text, allow_empty=True))

    def add_message(self, role: str, content: str | None, *, name: str | None = None, when: Any = None,
                    metadata: Mapping[str, Any] | None = None, tool_calls: list[dict[str, Any]] | None = None,
                    tool_call_id: str | None = None, extract: bool | None = None) -> str:
        """Log one message and add it to the window; returns its id. ``extract``: see :meth:`add_turn`.

        >>> with UnifiedMemory() as mem:
        ...     mem.add_message("user", "hello").startswith("msg_")
        True
        """
        message = to_message("message", {
            "role": role, "content": content, "name": name, "tool_calls": tool_calls,
            "tool_call_id": tool_call_id, "metadata": check_metadata("metadata", metadata),
        }, when=parse_when("when", when))
        return self._ingest([message], extract=self._extract_now(extract))[0]

    def add_turn(self, user: str, assistant: str | None = None, *, when: Any = None,
                 metadata: Mapping[str, Any] | None = None, extract: bool | None = None,
                 extractor: Extractor | None = None) -> list[str]:
        """Log a user message and, optionally, the assistant's reply (one transaction).

        Facts, entities and triples are extracted from the user's message as it is
        written (``extract=None`` follows ``config.extract_on_write``, True by default, unless
        ``auto_promote=False`` defers all extraction to :meth:`consolidate`), with
        ``extractor`` if given, else the memory's; ``extract=False`` leaves that to
        promotion, when the turn leaves the short-term window.

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_turn("Hi, I'm Ada", "Hello Ada!")
        ...     [f.text for f in mem.facts()]
        ["I'm Ada"]
        """
        extract = self._extract_now(extract)
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            raise wrong_type("extractor", "object with an extract(message, context=...) method", extractor)
        stamp = parse_when("when", when)
        meta = check_metadata("metadata", metadata)
        messages = [to_message("user", {"role": "user", "content": check_text("user", user), "metadata": meta},
                               when=stamp)]
        if assistant is not None:
            messages.append(to_message("assistant", {"role": "assistant", "content": check_text(
                "assistant", assistant, allow_empty=True), "metadata": meta}, when=stamp))
        return self._ingest(messages, extract=extract, extractor=extractor)

    def add_messages(self, messages: Iterable[Message | Mapping[str, Any]], *,
                     extract: bool | None = None) -> list[str]:
        """Log many messages (Message objects or OpenAI-style dicts) in one transaction.
        ``extract``: see :meth:`add_turn`.

        >>> with UnifiedMemory() as mem:
        ...     len(mem.add_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}]))
        2
        """
        extract = self._extract_now(extract)
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise wrong_type("messages", "list of Message or dict", messages)
        checked = [to_message(f"messages[{i}]", m) for i, m in enumerate(messages)]
        return self._ingest(checked, extract=extract) if checked else []

    def _extract_now(self, extract: bool | None) -> bool:
        """Whether a write extracts at once: ``extract``, else ``config.extract_on_write`` (with
        ``auto_promote=False`` extraction waits for :meth:`consolidate`, as that setting asks)."""
        if extract is None:
            config = self._backend.config
            return config.extract_on_write and config.auto_promote
        if not isinstance(extract, bool):
            raise wrong_type("extract", "bool or None", extract)
        return extract

    def _ingest(self, messages: Sequence[Message], *, extract: bool = False,
                extractor: Extractor | None = None) -> list[str]:
        backend = self._backend
        messages = backend.scrub.messages("messages", messages)  # the redactor runs before anything is written
        now = backend.clock()
        importances = [backend.scorer(m.content) if m.role == "user" and m.content else 0.0 for m in messages]
        tokens = message_token_counts(messages, backend.count_tokens)
        with self._write():
            # the extractor's context: only when a message of a promoted role is there to extract from
            before = (backend.window.messages(self._scope, last=CONTEXT_MESSAGES)
                      if extract and any(m.role in backend.promoter.roles and m.content for m in messages) else [])
            logged = backend.log.append(self._scope, messages, now=now, importances=importances)
            if extract:
                report = self._promote(logged, now=now, source="turn", extractor=extractor, context=before)
                protect = [*report.facts_created, *report.facts_reinforced]
            else:
                protect = []
            trimmed = backend.window.extend(self._scope, logged, token_counts=tokens)
            if trimmed:
                self._event("trim", "completed", messages=len(trimmed))
                self._summarize(trimmed, now)
            self._compact(now)
            self._maintain(now, promote=backend.config.auto_promote, protect=protect)
        return [m.id for m in logged]

    def _compact(self, now: float) -> None:
        """Compaction at ``compaction_ratio`` x ``context_max_tokens``: the oldest whole
        interactions leave the window (at a turn boundary only), are summarised, and are
        promoted by :meth:`_maintain` like any message that left the window."""
        backend, cfg = self._backend, self._backend.config
        if cfg.compaction_ratio is None:
            return
        threshold = max(1, int(cfg.context_max_tokens * cfg.compaction_ratio))
        target = max(1, int(threshold * (1 - cfg.compaction_min_reduction)))
        before = backend.window.tokens(self._scope)
        if before <= threshold:
            return
        self._event("compact", "started")
        compacted = backend.window.compact(self._scope, threshold=threshold, target=target)
        if compacted:
            self._summarize(compacted, now)
        self._event("compact", "completed", messages_compacted=len(compacted), tokens_before=before,
                    tokens_after=backend.window.tokens(self._scope), threshold=threshold, target=target)

    def _summarize(self, trimmed: Sequence[Any], now: float) -> None:
        """Summarize-on-trim: fold what left the window into the running summary."""
        backend = self._backend
        if not backend.config.summarize_on_trim:
            return
        self._event("summarise", "started")
        previous = backend.summaries.get(self._scope)
        text, count = previous if previous is not None else ("", 0)
        summary = backend.summarizer.summarize(text, [m.message for m in trimmed])
        if not isinstance(summary, str):
            raise wrong_type("summarizer", "a summarize() that returns str", summary)
        backend.summaries.put(self._scope, summary, messages=count + len(trimmed), now=now)
        self._event("summarise", "completed", messages=len(trimmed), chars=len(summary))

    def _promote(self, logged: Sequence[Any], *, now: float, source: str, extractor: Extractor | None = None,
                 context: Sequence[Message] = ()) -> PromotionReport:
        """Extract from logged messages into facts, entities and triples, reported as
        ``promote`` events (at write time ``source="turn"``, on leaving the window ``"promotion"``)."""
        self._event("promote", "started")
        report = self._backend.promoter.promote(self._scope, logged, now=now, source=source, extractor=extractor,
                                                context=context)
        self._event("promote", "completed", messages=report.messages, facts_created=len(report.facts_created),
                    facts_reinforced=len(report.facts_reinforced), facts_superseded=len(report.facts_superseded),
                    entities=report.entities, triples=report.triples)
        return report

    def _maintain(self, now: float, *, promote: bool, protect: Iterable[str] = ()) -> PromotionReport:
        """Promotion (when asked), then TTL expiry, the long-term limit and episodic
        retention, which apply after every write (call inside a transaction)."""
        backend, cfg = self._backend, self._backend.config
        due = backend.log.due_for_promotion(self._scope) if promote else []
        report = self._promote(due, now=now, source="promotion") if due else PromotionReport()
        backend.facts.expire(self._scope, now=now)
        if cfg.long_term_limit is not None:
            e = cfg.eviction
            evicted = backend.facts.evict(self._scope, limit=cfg.long_term_limit, now=now,
                                          protect={*protect, *report.facts_created, *report.facts_reinforced},
                                          weights=EvictionWeights(e.importance_weight, e.recency_weight,
                                                                  e.use_weight, e.recency_half_life_days,
                                                                  e.use_saturation))
            if evicted:
                self._event("evict", "completed", facts=len(evicted))
        if cfg.episodic_retention_days is not None:
            backend.log.prune(self._scope.user_id, older_than=now - cfg.episodic_retention_days * 86400)
        return report

    def consolidate(self) -> int:
        """Promote what is due now (for ``auto_promote=False``), expire TTLs, apply the
        long-term limit and retention. Returns how many messages went through promotion.

        >>> with UnifiedMemory(short_term_limit=1, auto_promote=False) as mem:
        ...     _ = mem.add_turn("I live in Lisbon")
        ...     _ = mem.add_turn("I work at Acme")
        ...     mem.consolidate(), len(mem.facts())
        (1, 1)
        """
        with self._write():
            return self._maintain(self._backend.clock(), promote=True).messages

    def end_session(self) -> int:
        """Close this conversation: every message leaves its window and is promoted now
        (or waits for :meth:`consolidate` with ``auto_promote=False``). Returns how many
        messages left the window.

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_turn("I live in Lisbon", "Nice")
        ...     mem.end_session(), [f.text for f in mem.facts()]
        (2, ['I live in Lisbon'])
        """
        backend = self._backend
        with self._write():
            held = backend.window.clear(self._scope)
            if held:
                self._event("trim", "completed", messages=len(held))
                self._summarize(held, backend.clock())
            self._maintain(backend.clock(), promote=backend.config.auto_promote)
        return len(held)

    def clear(self, include_long_term: bool = False) -> None:
        """Forget this conversation's window and this user's episodic log; with
        ``include_long_term`` also the user's facts, entities and triples.

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_turn("hello")
        ...     mem.clear(); mem.stats().messages
        0
        """
        check_bool("include_long_term", include_long_term)  # clear("no") must not wipe the facts
        backend = self._backend
        with self._write():
            backend.window.clear(self._scope)
            messages = backend.log.delete_scope(self._scope)
            backend.summaries.delete_scope(self._scope)
            facts = entities = 0
            if include_long_term:
                facts = backend.facts.delete_scope(self._scope)
                entities = backend.graph.delete_scope(self._scope)
            self._event("reset", "completed", messages=messages, facts=facts, entities=entities)
