"""The writing layer of :class:`~unified_memory.memory.UnifiedMemory`: messages, facts and
relations, consolidation and sessions, events, export / import / ingest / forget. Each
method checks its arguments (errors name the field) and hands them to a typed
collaborator: :class:`~unified_memory.coordinator.writer.Writer` for writes, the
:mod:`unified_memory.io` functions for files.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.add_turn("I live in Lisbon", "Nice")
    ...     [f.text for f in mem.facts()]
    ['I live in Lisbon']
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from unified_memory.coordinator.read_api import ReadingAPI
from unified_memory.coordinator.writer import Writer
from unified_memory.errors import wrong_type
from unified_memory.events import MemoryEvent
from unified_memory.io.ingest import IngestReport, ingest_chat
from unified_memory.io.jsonl import export_jsonl, import_jsonl
from unified_memory.privacy.forgetting import forget
from unified_memory.protocols import Extractor
from unified_memory.types import ExtractedFact, ExtractedTriple, Message
from unified_memory.validation import (
    check_bool,
    check_metadata,
    check_text,
    check_unit,
    parse_when,
    to_message,
)

__all__ = ["WritingAPI"]


class WritingAPI(ReadingAPI):
    """The writing layer, over the reading layer."""

    @property
    def _writer(self) -> Writer:
        return Writer(self._view)

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Group writes into one transaction: all of them happen, or (on an exception) none.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     try:
        ...         with mem.atomic():
        ...             _ = mem.remember("I keep bees")
        ...             raise RuntimeError("changed my mind")
        ...     except RuntimeError:
        ...         pass
        ...     mem.facts()
        []
        """
        with self._view.write():
            yield

    def remember(self, text: str, *, importance: float | None = None, category: str | None = None,
                 metadata: Mapping[str, Any] | None = None, ttl_days: float | None = None) -> str:
        """Store a long-term fact directly (reinforcing it if already known); returns its id.

        Entities and relations in the text go to the graph too.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     a = mem.remember("I'm allergic to peanuts")
        ...     a == mem.remember("I am allergic to peanuts.")
        True
        """
        writer = self._writer
        return writer.store_facts([writer.fact_item("", {"text": text, "importance": importance, "category": category,
                                                       "metadata": metadata, "ttl_days": ttl_days})])[0]

    def correct(self, fact_id: str, *, text: str | None = None, importance: float | None = None,
                category: str | None = None) -> str:
        """Correct a fact: a new version of the current fact ``fact_id`` with the ``text``,
        ``importance`` or ``category`` given (the rest carried over: the turns it came from, its
        metadata, its expiry) supersedes it, as a later statement would. The old version stays as
        history (:meth:`fact_history`), valid until now. Returns the new version's id.
        ``NotFoundError`` when this user has no fact ``fact_id``, ``ConflictError`` when it is
        already superseded (correct its current version).

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     old = mem.remember("My dentist is Dr. Weiss")
        ...     new = mem.correct(old, text="My dentist is Dr. Weis", importance=0.9)
        ...     [(f.text, f.status) for f in mem.fact_history(new)]
        [('My dentist is Dr. Weiss', 'superseded'), ('My dentist is Dr. Weis', 'active')]
        """
        return self._writer.correct(fact_id, text=text, importance=importance, category=category)

    def remember_many(self, texts_or_facts: Iterable[str | Mapping[str, Any] | ExtractedFact]) -> list[str]:
        """Store many facts in one transaction; items are texts, dicts with ``text`` and
        the keywords of :meth:`remember`, or :class:`ExtractedFact` objects.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     len(mem.remember_many(["I live in Lisbon", {"text": "I like jazz", "importance": 0.4}]))
        2
        """
        if isinstance(texts_or_facts, str | bytes | Mapping) or not isinstance(texts_or_facts, Iterable):
            raise wrong_type("texts_or_facts", "list of str, dict or ExtractedFact", texts_or_facts)
        writer = self._writer
        return writer.store_facts([writer.fact_item(f"texts_or_facts[{i}]", item)
                                   for i, item in enumerate(texts_or_facts)])

    def add_triple(self, subject: str, predicate: str, obj: str, *, confidence: float = 1.0,
                   metadata: Mapping[str, Any] | None = None) -> str:
        """Add a relation to the entity graph (endpoints are created as needed); returns its id.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_triple("Maria", "lives_in", "Lisbon")
        ...     [t.as_text() for t in mem.triples()]
        ['Maria lives in Lisbon']
        """
        scrub = self._view.backend.scrub
        triple = ExtractedTriple(subject=scrub.text("subject", check_text("subject", subject)).strip(),
                                 predicate=scrub.text("predicate", check_text("predicate", predicate)).strip(),
                                 object=scrub.text("obj", check_text("obj", obj)).strip(),
                                 confidence=check_unit("confidence", confidence, optional=False))
        meta = scrub.data("metadata", check_metadata("metadata", metadata))
        return self._writer.add_triple(triple, meta)

    def add_message(self, role: str, content: str | None, *, name: str | None = None, when: Any = None,
                    metadata: Mapping[str, Any] | None = None, tool_calls: list[dict[str, Any]] | None = None,
                    tool_call_id: str | None = None, extract: bool | None = None) -> str:
        """Log one message and add it to the window; returns its id. ``extract``: see :meth:`add_turn`.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     mem.add_message("user", "hello").startswith("msg_")
        True
        """
        message = to_message("message", {
            "role": role, "content": content, "name": name, "tool_calls": tool_calls,
            "tool_call_id": tool_call_id, "metadata": check_metadata("metadata", metadata),
        }, when=parse_when("when", when))
        return self._writer.write_messages([message], extract=self._writer.extract_now(extract))[0]

    def add_turn(self, user: str, assistant: str | None = None, *, when: Any = None,
                 metadata: Mapping[str, Any] | None = None, extract: bool | None = None,
                 extractor: Extractor | None = None) -> list[str]:
        """Log a user message and, optionally, the assistant's reply (one transaction).

        Facts, entities and triples are extracted from the user's message as it is
        written (``extract=None`` follows ``config.extract_on_write``, True by default, unless
        ``auto_promote=False`` defers all extraction to :meth:`consolidate`), with
        ``extractor`` if given, else the memory's; ``extract=False`` leaves that to
        promotion, when the turn leaves the short-term window.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_turn("Hi, I'm Ada", "Hello Ada!")
        ...     [f.text for f in mem.facts()]
        ["I'm Ada"]
        """
        extract = self._writer.extract_now(extract)
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            raise wrong_type("extractor", "object with an extract(message, context=...) method", extractor)
        stamp = parse_when("when", when)
        meta = check_metadata("metadata", metadata)
        messages = [to_message("user", {"role": "user", "content": check_text("user", user), "metadata": meta},
                               when=stamp)]
        if assistant is not None:
            messages.append(to_message("assistant", {"role": "assistant", "content": check_text(
                "assistant", assistant, allow_empty=True), "metadata": meta}, when=stamp))
        return self._writer.write_messages(messages, extract=extract, extractor=extractor)

    def add_messages(self, messages: Iterable[Message | Mapping[str, Any]], *,
                     extract: bool | None = None) -> list[str]:
        """Log many messages (Message objects or OpenAI-style dicts) in one transaction.
        ``extract``: see :meth:`add_turn`.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     len(mem.add_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}]))
        2
        """
        extract = self._writer.extract_now(extract)
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise wrong_type("messages", "list of Message or dict", messages)
        checked = [to_message(f"messages[{i}]", m) for i, m in enumerate(messages)]
        return self._writer.write_messages(checked, extract=extract) if checked else []

    def consolidate(self) -> int:
        """Promote what is due now (for ``auto_promote=False``), expire TTLs, apply the
        long-term limit and retention. Returns how many messages went through promotion.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory(short_term_limit=1, auto_promote=False) as mem:
        ...     _ = mem.add_turn("I live in Lisbon")
        ...     _ = mem.add_turn("I work at Acme")
        ...     mem.consolidate(), len(mem.facts())
        (1, 1)
        """
        return self._writer.consolidate()

    def end_session(self) -> int:
        """Close this conversation: every message leaves its window and is promoted now
        (or waits for :meth:`consolidate` with ``auto_promote=False``). Returns how many
        messages left the window.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_turn("I live in Lisbon", "Nice")
        ...     mem.end_session(), [f.text for f in mem.facts()]
        (2, ['I live in Lisbon'])
        """
        return self._writer.end_session()

    def clear(self, include_long_term: bool = False) -> None:
        """Forget this conversation's window and this user's episodic log; with
        ``include_long_term`` also the user's facts, entities and triples. Keyed items
        (:meth:`put_item`) stay: ``delete_item`` or ``forget(user_id=...)`` deletes them.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.add_turn("hello")
        ...     mem.clear(); mem.stats().messages
        0
        """
        check_bool("include_long_term", include_long_term)  # clear("no") must not wipe the facts
        self._writer.clear(include_long_term)

    def export_jsonl(self, destination: str | os.PathLike[str] | Any, *, all_users: bool = False) -> int:
        """Export this user's rows of every tier (every user's with ``all_users``) as JSON Lines.

        ``destination`` is a path (written atomically: a temporary file, then
        ``os.replace``) or a text stream. The first line is a header (``format``,
        ``version``, ``schema_version``, ``library_version``, ``exported_at``,
        ``users``), then one ``{"kind": <table>, "row": {...}}`` line per stored row
        of messages, window, facts, entities, triples, summaries and any other table
        with a ``user_id`` column, values exactly as stored. Embeddings and indexes are
        derived, not exported. Returns the number of row lines.

        >>> from unified_memory import UnifiedMemory

        >>> import io
        >>> with UnifiedMemory(user_id="ada") as mem:
        ...     _ = mem.add_turn("I keep bees", "Nice")
        ...     mem.export_jsonl(io.StringIO())    # two messages, their two window entries
        4
        """
        return export_jsonl(self._view, destination, all_users=all_users)

    def ingest(self, path: str | os.PathLike[str], *, format: str = "auto", user_id: str | None = None,
               progress: Callable[[int, int], Any] | None = None, extract: bool | None = None) -> IngestReport:
        """Ingest a chat-log file: OpenAI-style JSON (a list of messages, ``{"messages": [...]}``
        or a list of conversations), JSON Lines, or LoCoMo. Idempotent and resumable: each
        message's key is stored with it, so ingesting a file again adds nothing and an
        interrupted run completes. The whole file is validated before anything is written;
        errors name the file and line. Facts, entities and relations are extracted from the
        users' messages as they are written (``extract=None`` follows
        ``config.extract_on_write``; ``False`` leaves the log as history only). Returns an
        :class:`~unified_memory.io.ingest.IngestReport` (see :func:`~unified_memory.io.ingest.ingest_file`
        for users and sessions).

        >>> from unified_memory import UnifiedMemory

        >>> import json, os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "chat.json")
        >>> with open(path, "w") as f:
        ...     json.dump([{"role": "user", "content": "I keep bees"}], f)
        >>> with UnifiedMemory() as mem:
        ...     mem.ingest(path).messages_added, mem.ingest(path).messages_added
        (1, 0)
        """
        return ingest_chat(self._view, path, format=format, user_id=user_id, progress=progress, extract=extract)

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

        >>> from unified_memory import UnifiedMemory

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
        return import_jsonl(self._view, source, user_id=user_id)

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

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     keep, drop = mem.remember("I keep bees"), mem.remember("My PIN is 4711")
        ...     mem.forget(ids=[drop])["facts"], [f.text for f in mem.facts()]
        (1, ['I keep bees'])
        """
        return forget(self._view, user_id=user_id, ids=ids)

    def reindex(self, *, all_users: bool = False, progress: Callable[[int, int], Any] | None = None) -> int:
        """Rebuild the indexes derived from SQLite (lexical, and vectors when dense
        retrieval is on) for this user, or for every user in the file. Returns how
        many users were reindexed. On the database search path (PostgreSQL with pgvector)
        the search tables are rebuilt from the rows, user by user, each in its own
        transaction (an interrupted reindex keeps the users done); ``progress(done, total)``
        is called after each user.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.remember("I keep bees")
        ...     mem.reindex(), [h.text for h in mem.recall("bees", tiers="long_term")]
        (1, ['I keep bees'])
        """
        users = [self._view.scope.user_id]
        if check_bool("all_users", all_users):
            users = self.users()
        if progress is not None and not callable(progress):
            raise wrong_type("progress", "callable or None", progress)
        self._view.backend.reindex(users, progress=progress)
        return len(users)

    def report_failure(self, kind: str, error: str) -> None:
        """Tell the event hooks that work of ``kind`` failed outside a write (used by ``@remember``).

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     seen = []
        ...     _ = mem.on_event(seen.append)
        ...     mem.report_failure("agent", "recall: timeout"); seen[0].stage, seen[0].error
        ('failed', 'recall: timeout')
        """
        self._view.backend.events.emit(self._view.new_event(kind, "failed", {}, error))

    def on_event(self, hook: Callable[[MemoryEvent], None], *, kinds: Iterable[str] | None = None,
                 ) -> Callable[[], None]:
        """Call ``hook(event)`` for what the memory does — trim, promote, evict, reset
        (see :mod:`unified_memory.events`); returns a function that unsubscribes.

        >>> from unified_memory import UnifiedMemory

        >>> with UnifiedMemory() as mem:
        ...     seen = []
        ...     stop = mem.on_event(seen.append, kinds=["reset"])
        ...     mem.clear(); stop(); [(e.kind, e.stage) for e in seen]
        [('reset', 'completed')]
        """
        return self._view.backend.events.subscribe(hook, kinds=kinds)

    def count_tokens(self, text: str) -> int:
        """Tokens in ``text`` by the configured counter (chars/4 unless tiktoken is usable offline).

        >>> from unified_memory import UnifiedMemory

        >>> UnifiedMemory().count_tokens("abcdefgh")
        2
        """
        return self._view.backend.count_tokens(check_text("text", text, allow_empty=True))
