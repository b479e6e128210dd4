"""What one :class:`~unified_memory.Conversation` holds, and the bookkeeping of every change.

A :class:`ConversationBuffer` is the conversation's state as one typed record: its
system prompt, running summary and messages, and what goes with each change — the
JSONL log, the memory trace, the events, a token count per message and the scan of
open tool calls. The engine and its two collaborators, the
:class:`~unified_memory.conversation.reduction.Reducer` and the functions of
:mod:`unified_memory.conversation.persistence`, receive the same buffer explicitly;
nothing else reaches into a conversation.

    >>> from unified_memory.types import Message
    >>> buffer = ConversationBuffer()
    >>> buffer.messages.append(Message(role="assistant", id="m1", tool_calls=[{"id": "c1"}]))
    >>> buffer.index("m1"), buffer.pending()
    (0, 1)
    >>> buffer.reset(keep_system_prompt=True); buffer.pending()
    0
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from tiers.trimming import track_open_calls
from unified_memory.conversation.log import ConversationLog
from unified_memory.errors import NotFoundError
from unified_memory.events import EventBus, MemoryEvent, Stage
from unified_memory.types import Message

__all__ = ["ConversationBuffer", "EventSource"]


class EventSource(Protocol):
    """Who an event is about: the conversation's user and session."""

    @property
    def user_id(self) -> str: ...
    @property
    def session_id(self) -> str: ...


def _no_calls() -> tuple[int, list[str | None], Message | None]:
    return (0, [], None)


@dataclass(eq=False)
class ConversationBuffer:
    """A conversation's state: ``messages`` (oldest first), ``summary``, ``system_prompt``,
    what the last trim dropped, the compaction count, and a compaction waiting for the
    end of a tool-call batch; ``log`` (or ``None``), ``trace``, ``events`` and ``lock``
    record and guard every change. Callers hold ``lock`` around a change."""

    log: ConversationLog | None = None
    system_prompt: str | None = None
    summary: str | None = None
    messages: list[Message] = field(default_factory=list)
    last_trimmed: list[Message] = field(default_factory=list)
    compactions: int = 0
    compaction_due: bool = False
    trace: list[dict[str, Any]] = field(default_factory=list)
    events: EventBus = field(default_factory=EventBus)
    lock: threading.RLock = field(default_factory=threading.RLock)
    # (messages scanned, calls still open, the last message scanned): appends are followed incrementally
    _calls: tuple[int, list[str | None], Message | None] = field(default_factory=_no_calls, init=False, repr=False)
    _tokens: dict[str | None, tuple[Message, int]] = field(default_factory=dict, init=False, repr=False)

    def record(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` to the JSONL log, if there is one."""
        if self.log is not None:
            self.log.append(entry)

    def note(self, kind: str, **details: Any) -> None:
        """Add a ``kind`` entry (with ``details``) to the memory trace."""
        self.trace.append({"event": kind, "at": datetime.now(UTC).isoformat(), **details})

    def emit(self, source: EventSource, kind: str, stage: Stage, error: str | None = None, **counts: int) -> None:
        """Report a ``kind`` event at ``stage`` about ``source`` to the subscribed hooks."""
        self.events.emit(MemoryEvent(kind, stage, source.user_id, None, source.session_id, counts,
                                     datetime.now(UTC), error))

    def tokens(self, message: Message, count: Callable[[Message], int]) -> int:
        """``count(message)``, remembered per message id while that id holds the same object."""
        cached = self._tokens.get(message.id)
        if cached is not None and cached[0] is message:
            return cached[1]
        tokens = count(message)
        if message.id is not None:
            if len(self._tokens) > 2 * len(self.messages) + 64:
                self._tokens.clear()
            self._tokens[message.id] = (message, tokens)
        return tokens

    def pending(self) -> int:
        """Tool calls issued and not yet answered. Appends are followed incrementally; any other
        change of the list (its last scanned message is no longer where it was) means a rescan."""
        seen, open_calls, last = self._calls
        msgs = self.messages
        if seen > len(msgs) or (seen and msgs[seen - 1] is not last):
            seen, open_calls = 0, []
        for m in msgs[seen:]:
            track_open_calls(open_calls, m)
        self._calls = (len(msgs), open_calls, msgs[-1] if msgs else None)
        return len(open_calls)

    def rescan_calls(self) -> None:
        """An earlier message changed: the next :meth:`pending` scans every message again."""
        self._calls = _no_calls()

    def index(self, message_id: str | None) -> int:
        """Where the message with this id is; :class:`NotFoundError` when there is none."""
        for i, m in enumerate(self.messages):
            if m.id == message_id:
                return i
        raise NotFoundError(f"message_id: no message {message_id!r} in this conversation", field="message_id")

    def remove_ids(self, ids: Iterable[str | None]) -> None:
        """Drop the messages with these ids. Dropping whole interactions while no call is open
        leaves none open: then the scan of open calls need not start over."""
        settled = self.pending() == 0
        gone = set(ids)
        self.messages = [m for m in self.messages if m.id not in gone]
        if settled:
            self._calls = (len(self.messages), [], self.messages[-1] if self.messages else None)

    def reset(self, keep_system_prompt: bool) -> None:
        """Forget the messages, the summary and a waiting compaction (and the system prompt,
        unless ``keep_system_prompt``); nothing is logged here."""
        self.messages.clear()
        self.summary = None
        self.last_trimmed = []
        self.compaction_due = False
        if not keep_system_prompt:
            self.system_prompt = None
