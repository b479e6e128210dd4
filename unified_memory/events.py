"""Event hooks: what the memory did, with counts — enough to log and to plot.

Kinds: ``trim`` (messages left the short-term window), ``summarise`` (they were
folded into the running summary), ``promote`` (extraction into facts, entities and
triples), ``evict`` (active facts over ``long_term_limit`` were archived — kept, not
deleted; counts ``facts``: how many were archived), ``reset``
(:meth:`~unified_memory.UnifiedMemory.clear`), ``agent`` (``@remember`` could not
recall or record; stage ``failed``), ``compact`` (the window passed ``compaction_ratio`` of
``context_max_tokens`` and its oldest interactions were summarised away; counts
``messages_compacted``, ``tokens_before``, ``tokens_after``). Work that can fail is
reported as ``started`` and then ``completed`` or ``failed``; events of a write
are delivered once it is committed, so a rolled-back write reports only
``failed``. A hook that raises is logged and never breaks the memory.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory(short_term_limit=2) as mem:
    ...     seen = []
    ...     _ = mem.on_event(lambda e: seen.append((e.kind, e.stage, e.counts.get("messages"))), kinds=["trim"])
    ...     _ = mem.add_turn("I live in Lisbon", "Nice")
    ...     _ = mem.add_turn("I keep bees", "Fun")
    ...     seen
    [('trim', 'completed', 2)]
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from unified_memory.errors import invalid, wrong_type

__all__ = ["MemoryEvent", "EventBus", "EVENT_KINDS"]

EVENT_KINDS = ("trim", "promote", "evict", "reset", "summarise", "compact", "agent")
Stage = Literal["started", "completed", "failed"]
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MemoryEvent:
    """One thing the memory did, for one user (and agent and session).

    >>> MemoryEvent("trim", "completed", "ada", None, None, {"messages": 2}).counts
    {'messages': 2}
    """

    kind: str
    stage: Stage
    user_id: str
    agent_id: str | None
    session_id: str | None
    counts: Mapping[str, int] = field(default_factory=dict)
    at: datetime | None = None
    error: str | None = None


class EventBus:
    """Hooks subscribed to kinds of events; events held during a write are
    delivered when it commits (:meth:`deliver`) or turned into failures (:meth:`fail`).

    >>> bus = EventBus(); got = []
    >>> stop = bus.subscribe(got.append)
    >>> bus.emit(MemoryEvent("reset", "completed", "ada", None, None)); stop(); len(got)
    1
    """

    def __init__(self) -> None:
        self._hooks: list[tuple[Callable[[MemoryEvent], None], frozenset[str] | None]] = []
        # one list per open write, innermost last: (kind, stage, the event or what makes it)
        self._held: list[list[tuple[str, str, MemoryEvent | Callable[[], MemoryEvent]]]] = []
        self._lock = threading.RLock()

    def subscribe(self, hook: Callable[[MemoryEvent], None], *, kinds: Iterable[str] | None = None,
                  ) -> Callable[[], None]:
        """Call ``hook(event)`` for every event (or those of ``kinds``); returns an unsubscribe function."""
        if not callable(hook):
            raise wrong_type("hook", "callable", hook)
        wanted = None
        if kinds is not None:
            if isinstance(kinds, str):
                kinds = [kinds]
            if isinstance(kinds, bytes | bytearray | Mapping) or not isinstance(kinds, Iterable):
                raise wrong_type("kinds", "a list of event kinds", kinds)
            kinds = list(kinds)
            if not all(isinstance(kind, str) for kind in kinds):
                raise invalid("kinds", f"event kinds are strings; choose from {list(EVENT_KINDS)}, "
                                       f"got {kinds!r:.200}")
            wanted = frozenset(kinds)
            unknown = sorted(wanted - set(EVENT_KINDS))
            if unknown:
                raise invalid("kinds", f"unknown event kinds {unknown}; choose from {list(EVENT_KINDS)}")
        entry = (hook, wanted)
        with self._lock:
            self._hooks.append(entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._hooks:
                    self._hooks.remove(entry)
        return unsubscribe

    def emit(self, event: MemoryEvent) -> None:
        """Deliver one event now."""
        with self._lock:
            hooks = [hook for hook, kinds in self._hooks if kinds is None or event.kind in kinds]
        for hook in hooks:
            try:
                hook(event)
            except Exception:  # noqa: BLE001 - a hook never breaks the memory
                _LOG.exception("event hook %r failed on %s/%s", hook, event.kind, event.stage)

    def begin(self) -> None:
        """A write (or a write nested in one) starts: what it holds is its own until it ends."""
        with self._lock:
            self._held.append([])

    def hold(self, event: MemoryEvent | Callable[[], MemoryEvent], kind: str = "", stage: str = "") -> None:
        """Keep an event of the current write until it commits (a ``started`` one is
        delivered now and only remembered, so a failure can be reported). The event may
        come as a function that makes it, with its ``kind`` and ``stage``: it is made only
        once a hook is there to receive it (what a write reports when nobody listens costs
        no event objects; a hook subscribed before the write commits still receives it)."""
        if isinstance(event, MemoryEvent):
            kind, stage = event.kind, event.stage
        if stage == "started" and self._hooks:
            self.emit(_made(event))
        with self._lock:
            if not self._held:
                self._held.append([])
            self._held[-1].append((kind, stage, event))

    def deliver(self) -> None:
        """The write committed: a nested write hands what it held to the write around it
        (which may still roll back); the outermost delivers it."""
        with self._lock:
            held = self._held.pop() if self._held else []
            if self._held:
                self._held[-1].extend(held)
                return
        for _, stage, event in held:
            if stage != "started" and self._hooks:
                self.emit(_made(event))

    def fail(self, error: BaseException) -> None:
        """The write rolled back: each kind it started or completed is reported ``failed``
        (a nested write's only: the write around it may still commit)."""
        with self._lock:
            held = self._held.pop() if self._held else []
        seen: dict[str, MemoryEvent | Callable[[], MemoryEvent]] = {}
        for kind, _, event in held:
            seen.setdefault(kind, event)
        for first in seen.values():
            event = _made(first)
            self.emit(MemoryEvent(event.kind, "failed", event.user_id, event.agent_id, event.session_id,
                                  {}, event.at, f"{type(error).__name__}: {error}"))


def _made(event: MemoryEvent | Callable[[], MemoryEvent]) -> MemoryEvent:
    """The event itself, or what its function makes."""
    return event if isinstance(event, MemoryEvent) else event()
