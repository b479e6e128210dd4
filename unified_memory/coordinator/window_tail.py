"""The newest messages of the conversation written last, kept between writes: the context an
extractor reads for the next turn (the last :data:`~unified_memory.extraction.promotion.CONTEXT_MESSAGES`
of the window) without asking the database again, as long as nothing was written since.

A write offers what the window ends with once it is done (:meth:`WindowTail.offer`); the
outermost transaction keeps it with :meth:`tiers.storage.backend.Storage.change_mark` taken as its last
step before the commit, and the next write uses it only while the mark is the same (nothing
written since by this connection, rolled back or not, nor committed by another one: the
next write looks inside its own transaction, where no one else can commit). A failed write
forgets it. PostgreSQL has no mark: nothing is kept, the window is read.

    >>> from tiers.records.scope import Scope
    >>> tail = WindowTail()
    >>> tail.enter(); tail.offer(Scope("ada"), []); tail.leave(lambda: (1, 2))
    >>> tail.get(Scope("ada"), lambda: (1, 2)), tail.get(Scope("ada"), lambda: (1, 3)), tail.get(Scope("bo"), lambda: (1, 2))
    ([], None, None)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tiers.records.scope import Scope
from unified_memory.types import Message

__all__ = ["WindowTail"]


class WindowTail:
    """The last window messages of one conversation, valid at one change mark (see the module)."""

    def __init__(self) -> None:
        self._kept: tuple[Scope, Any, list[Message]] | None = None
        self._offered: tuple[Scope, list[Message]] | None = None
        self._depth = 0  # the view's writes open, the outermost first (under the storage's lock)

    def get(self, scope: Scope, mark: Callable[[], Any]) -> list[Message] | None:
        """The kept messages of ``scope`` when ``mark()`` (asked only then) is the mark they were
        kept at, else ``None``."""
        kept = self._kept
        if kept is None or kept[0] != scope:
            return None
        return kept[2] if mark() == kept[1] else None

    def enter(self) -> None:
        """A write starts (inside its transaction)."""
        self._depth += 1
        if self._depth == 1:
            self._offered = None

    def outermost(self) -> bool:
        """Whether the write going on is not nested in another (what it offers is kept)."""
        return self._depth == 1

    def offer(self, scope: Scope, messages: list[Message]) -> None:
        """What the window of ``scope`` ends with after the outermost write going on."""
        if self._depth == 1:
            self._offered = (scope, messages)

    def leave(self, mark: Callable[[], Any] | None) -> None:
        """A write ends: ``mark`` when it is done writing (the outermost one keeps what was offered
        at the mark it gives, then commits), ``None`` when it failed (nothing is kept)."""
        self._depth -= 1
        if mark is None:
            self.clear()
        elif self._depth == 0:
            offered, self._offered = self._offered, None
            value = mark() if offered is not None else None
            self._kept = (offered[0], value, offered[1]) if offered is not None and value is not None else None

    def clear(self) -> None:
        """Forget what is kept (a failed write; ``forget``: the messages quote deleted text)."""
        self._kept = None
        self._offered = None
