"""Ingest chat logs from files: idempotent and resumable.

:func:`ingest_file` reads a whole file (formats: see :mod:`unified_memory.io.chat_formats`),
validates all of it, then writes it one conversation (one LoCoMo session) at a time,
each in one transaction together with the keys of its messages in the ``ingested``
table (:mod:`tiers.maintenance.ingested`). Ingesting the same file again adds nothing; a file
extended with new conversations, sessions or messages adds only those; a run that was
interrupted (killed, Ctrl-C) is completed by running it again, without duplicates.

A message's key is the SHA-256 of its format, its conversation (explicit id, else
its index in the file), session, index, role and content, chained with the previous
message's key — never the file's path, so a moved or re-downloaded file is recognised.
Keys are per user: the same file ingested for another user is ingested again. A
message edited in place is new (as are the messages after it in its conversation).
Keys outlive the messages: after deleting a user's messages, drop its keys too
(:meth:`tiers.maintenance.ingested.IngestedKeys.forget`) to ingest the file again. Two processes
ingesting the same file at once cannot duplicate it: the later transaction fails on
the keys the first one recorded (or on SQLite's lock) and can simply be re-run.

    >>> import json, tempfile, os
    >>> from unified_memory import UnifiedMemory
    >>> path = os.path.join(tempfile.mkdtemp(), "chat.json")
    >>> with open(path, "w") as f:
    ...     json.dump([{"role": "user", "content": "I keep bees"}, {"role": "assistant", "content": "Nice!"}], f)
    >>> with UnifiedMemory() as mem:
    ...     first, again = ingest_file(mem, path), ingest_file(mem, path)
    ...     first.messages_added, again.messages_added, again.messages_skipped
    (2, 0, 2)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tiers.maintenance.ingested import IngestedKeys
from unified_memory.coordinator.view import MemoryView
from unified_memory.coordinator.writer import Writer
from unified_memory.errors import MemoryValueError, check_path, invalid, wrong_type
from unified_memory.io.chat_formats import FORMATS, ChatSession, ParsedChat, detect_format, parse_chat_text
from unified_memory.types import Message
from unified_memory.validation import check_scope_id


class SupportsIngest(Protocol):
    """What :func:`ingest_file` ingests into: a :class:`~unified_memory.UnifiedMemory`."""

    def ingest(self, path: str | os.PathLike[str], *, format: str = ..., user_id: str | None = ...,
               progress: Callable[[int, int], Any] | None = ..., extract: bool | None = ...) -> IngestReport: ...

__all__ = ["IngestReport", "ingest_file", "read_chat_file", "source_key"]


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What :func:`ingest_file` did: the file, its format, how many conversations
    (LoCoMo samples) and sessions it holds, messages added and skipped (already
    ingested), and the users written to.

    >>> IngestReport("chat.json", "openai", 1, 1, 2, 0, ["ada"]).messages_added
    2
    """

    path: str
    format: str
    conversations: int
    sessions: int
    messages_added: int
    messages_skipped: int
    users: list[str]


def source_key(format: str, conversation: str, session_id: str | None, index: int, message: Message,
               previous: str = "") -> str:
    """The identity of one message of a file (hex SHA-256): its format, conversation,
    session, index, role and content (text, tool calls, images), chained with the
    ``previous`` message's key.

    >>> a = source_key("openai", "#0", None, 0, Message(role="user", content="hi"))
    >>> a == source_key("openai", "#0", None, 0, Message(role="user", content="hi")), len(a)
    (True, 64)
    >>> a == source_key("openai", "#1", None, 0, Message(role="user", content="hi"))
    False
    """
    identity = [format, conversation, session_id, index, message.role, message.content, message.name,
                message.tool_calls, message.tool_call_id, message.images, previous]
    blob = json.dumps(identity, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def read_chat_file(path: str | os.PathLike[str], format: str = "auto") -> ParsedChat:
    """Read and validate a whole chat-log file (nothing is written).

    Errors are :class:`MemoryValueError` starting with the path: a missing file,
    malformed JSON (``"<path>:<line>: ..."``), a bad message (its location and field);
    a ``format`` the file's content does not match says so, and which format it is.

    >>> read_chat_file("/no/such/chat.json")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: path: /no/such/chat.json: no such file
    """
    name = check_path("path", path)  # a str or path, not blank, no NUL, encodable
    if format != "auto" and format not in FORMATS:
        raise invalid("format", f"must be one of auto, {', '.join(FORMATS)}, got {format!r}")
    file = Path(name)
    try:
        found = file.exists()
    except OSError as exc:  # e.g. a name too long for the file system
        raise MemoryValueError(f"path: {name:.200}: cannot be used: {exc.strerror or exc}", field="path") from None
    if not found:
        raise MemoryValueError(f"path: {name}: no such file", field="path")
    if file.is_dir():
        raise MemoryValueError(f"path: {name}: is a directory, not a file", field="path")
    try:
        text = file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MemoryValueError(f"path: {name}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                               field="path") from None
    except OSError as exc:
        raise MemoryValueError(f"path: {name}: cannot read: {exc.strerror or exc}", field="path") from None
    chosen = detect_format(name, text) if format == "auto" else format
    return parse_chat_text(text, chosen, source=name)


def ingest_file(memory: SupportsIngest, path: str | os.PathLike[str], *, format: str = "auto",
                user_id: str | None = None, progress: Callable[[int, int], Any] | None = None,
                extract: bool | None = None) -> IngestReport:
    """Ingest a chat-log file into ``memory``; returns an :class:`IngestReport`.

    ``format``: ``auto`` (by extension and content), ``openai``, ``jsonl`` or ``locomo``.
    Each conversation goes to its own user (``user_id`` given here, else the one the file
    names — a LoCoMo ``sample_id`` — else the memory's) and session (the one the file
    names, else ``conversation_<i>`` in a list of conversations, else the memory's).
    ``progress(done, total)`` is called after each conversation / session is committed.
    ``extract``: extract facts, entities and relations from the users' messages as they are
    written (``None``: the memory's ``config.extract_on_write``, True by default).

    The whole file is validated first (nothing is written if any of it is bad); then each
    conversation is written in one transaction with the keys of its messages, so an
    interrupted run leaves whole conversations, and running again completes it.

    >>> import json, tempfile, os
    >>> from unified_memory import UnifiedMemory
    >>> path = os.path.join(tempfile.mkdtemp(), "chats.jsonl")
    >>> with open(path, "w") as f:
    ...     _ = f.write(json.dumps({"user_id": "ada", "role": "user", "content": "hi"}) + "\\n")
    >>> with UnifiedMemory() as mem:
    ...     report = ingest_file(mem, path)
    ...     report.format, report.users, [e.content for e in mem.scoped(user_id="ada").episodes()]
    ('jsonl', ['ada'], ['hi'])
    """
    if not callable(getattr(memory, "ingest", None)):
        raise wrong_type("memory", "UnifiedMemory", memory)
    return memory.ingest(path, format=format, user_id=user_id, progress=progress, extract=extract)


def ingest_chat(view: MemoryView, path: str | os.PathLike[str], *, format: str = "auto",
                user_id: str | None = None, progress: Callable[[int, int], Any] | None = None,
                extract: bool | None = None) -> IngestReport:
    """What :func:`ingest_file` does, into ``view``'s file."""
    if user_id is not None:
        check_scope_id("user_id", user_id)
    if progress is not None and not callable(progress):
        raise wrong_type("progress", "callable", progress)
    extract = Writer(view).extract_now(extract)
    parsed = read_chat_file(path, format)
    # The memory's redactor runs on the whole file before anything is written; keys are of the originals.
    scrub = view.backend.scrub
    clean = [scrub.messages(f"{session.conversation}.messages", session.messages) for session in parsed.sessions]
    keys = IngestedKeys(view.backend.storage)
    keys.ensure()
    added = skipped = 0
    users: list[str] = []
    for done, (session, messages) in enumerate(zip(parsed.sessions, clean, strict=True), start=1):
        user = user_id or session.user_id or view.user_id
        if user not in users:
            users.append(user)
        new, old = _write_session(view, keys, parsed.format, session, messages, user, extract)
        added, skipped = added + new, skipped + old
        if progress is not None:
            progress(done, len(parsed.sessions))
    return IngestReport(os.fspath(path), parsed.format, parsed.conversations, len(parsed.sessions), added,
                        skipped, users)


def _write_session(view: MemoryView, keys: IngestedKeys, format: str, session: ChatSession,
                   messages: list[Message], user: str, extract: bool) -> tuple[int, int]:
    """Write the messages of ``session`` not yet ingested for ``user``, and their keys,
    in one transaction; ``messages`` are the session's, redacted. Returns (added, skipped)."""
    chosen = view.rescoped(user_id=user, session_id=session.session_id)
    message_keys: list[str] = []
    previous = ""
    for index, message in enumerate(session.messages):
        previous = source_key(format, session.conversation, session.session_id, index, message, previous)
        message_keys.append(previous)
    # One write transaction around the writer's own (a savepoint inside it): the keys, the
    # messages, the window and promotion commit together or not at all, and the events are
    # delivered when the outer transaction commits.
    with chosen.write():
        seen = keys.existing(user, message_keys)
        fresh = [(key, m) for key, m in zip(message_keys, messages, strict=True) if key not in seen]
        if fresh:
            keys.record(user, [key for key, _ in fresh], now=view.backend.clock())
            with view.backend.scrub.done():  # redacted above, with the rest of the file
                Writer(chosen).write_messages([m for _, m in fresh], extract=extract)
    return len(fresh), len(message_keys) - len(fresh)
