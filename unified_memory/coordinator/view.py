"""One scope (user, agent, session) over a :class:`~unified_memory.coordinator.backend.Backend`:
its write transaction and the events it reports.

Every writing path goes through :meth:`MemoryView.write`: one transaction (vectors
embedded in one batch at its end); on failure the user's indexes are rebuilt from
the store and the held events are dropped, on success they are delivered.

    >>> from unified_memory.config import MemoryConfig
    >>> from unified_memory.coordinator.backend import open_backend
    >>> from tiers.records.scope import Scope
    >>> view = MemoryView(open_backend(None, MemoryConfig()), Scope("ada", "", ""))
    >>> seen = []
    >>> _ = view.backend.events.subscribe(seen.append)
    >>> with view.write():
    ...     view.event("reset", "completed", messages=0)
    >>> [(e.kind, e.user_id) for e in seen]
    [('reset', 'ada')]
    >>> view.backend.close()
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from tiers.records.scope import Scope
from unified_memory.coordinator.backend import Backend
from unified_memory.events import MemoryEvent, Stage
from unified_memory.types import utc_from_timestamp
from unified_memory.validation import check_scope_id

__all__ = ["MemoryView"]


@dataclass(frozen=True, slots=True)
class MemoryView:
    """A backend seen as one user (and optionally one agent and session)."""

    backend: Backend
    scope: Scope

    @property
    def user_id(self) -> str:
        return self.scope.user_id

    def rescoped(self, *, user_id: str | None = None, agent_id: str | None = None,
                 session_id: str | None = None) -> MemoryView:
        """The same backend for another user / agent / session (each checked, named in errors)."""
        scope = self.scope
        return MemoryView(self.backend, Scope(
            check_scope_id("user_id", user_id if user_id is not None else scope.user_id),
            (check_scope_id("agent_id", agent_id, optional=True) or "") if agent_id is not None
            else scope.agent_id,
            (check_scope_id("session_id", session_id, optional=True) or "") if session_id is not None
            else scope.session_id,
        ))

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        """One transaction; on failure the user's indexes are rebuilt from the store."""
        backend = self.backend
        if backend.dense is not None:  # a model loads once, before the lock other writers wait for
            backend.dense.prepare()
        storage, tail = backend.storage, backend.window_tail
        # The bus holds one list of events per open write, the innermost last: writes of other
        # threads take turns from the first event held to the last delivered (reads do not wait).
        with backend.writing:
            backend.events.begin()
            try:
                # Vectors are embedded at the end of the transaction, in one batch per tier
                # (inside it: an embedder failure rolls the write back like any other). The window's
                # tail a write offers is kept at the mark taken once all is written; a failure (the
                # commit's too) forgets it before another thread can take the lock.
                with storage.lock:
                    try:
                        with storage.atomic():
                            tail.enter()
                            done = False
                            try:
                                with backend.dense.defer() if backend.dense is not None else contextlib.nullcontext():
                                    yield
                                done = True
                            finally:
                                tail.leave(storage.change_mark if done else None)
                    except BaseException:
                        tail.clear()
                        raise
            except BaseException as exc:
                for index in backend.indexes:
                    index.invalidate(self.scope.user_id)
                backend.events.fail(exc)
                raise
            backend.events.deliver()

    def event(self, kind: str, stage: Stage, **counts: int) -> None:
        """Report what this write did (delivered when it commits, see :mod:`unified_memory.events`)."""
        at = self.backend.clock()  # read now, as always (a clock may count its reads); the event is made if heard
        self.backend.events.hold(lambda: self._event_at(kind, stage, counts, at), kind, stage)

    def _event_at(self, kind: str, stage: Stage, counts: dict[str, int], at: float) -> MemoryEvent:
        scope = self.scope
        return MemoryEvent(kind, stage, scope.user_id, scope.agent_id or None, scope.session_id or None, counts,
                           utc_from_timestamp(at))

    def new_event(self, kind: str, stage: Stage, counts: dict[str, int], error: str | None = None) -> MemoryEvent:
        scope = self.scope
        return MemoryEvent(kind, stage, scope.user_id, scope.agent_id or None,
                           scope.session_id or None, counts, utc_from_timestamp(self.backend.clock()), error)
