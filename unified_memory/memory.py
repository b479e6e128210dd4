"""UnifiedMemory: the coordinator of the four tiers over one SQLite file.

The class stacks typed layers over one :class:`~unified_memory.coordinator.view.MemoryView`
(a :class:`~unified_memory.coordinator.backend.Backend` and a scope): reading
(:mod:`unified_memory.coordinator.read_api`), writing (:mod:`~unified_memory.coordinator.write_api`),
their async twins (:mod:`~unified_memory.coordinator.async_api`), and here opening,
scoping and closing.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory(short_term_limit=2) as mem:
    ...     _ = mem.add_turn("I'm allergic to peanuts", "Noted.")
    ...     _ = mem.add_turn("Thanks!", "Anytime.")      # the first turn leaves the window
    ...     [hit.text for hit in mem.recall("any allergies?", tiers=["long_term"])]
    ["I'm allergic to peanuts"]
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from tiers.records.scope import Scope
from unified_memory.config import MemoryConfig
from unified_memory.coordinator.async_api import AsyncAPI
from unified_memory.coordinator.backend import Plugins, open_backend
from unified_memory.coordinator.view import MemoryView
from unified_memory.errors import wrong_type
from unified_memory.protocols import Embedder, Extractor, Reranker, Summarizer, VectorIndex
from unified_memory.validation import check_scope_id

__all__ = ["UnifiedMemory"]


class UnifiedMemory(AsyncAPI):
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
        backend = open_backend(path, cfg, Plugins(
            importance_scorer=importance_scorer, extractor=extractor, token_counter=token_counter, clock=clock,
            embedder=embedder, vector_index=vector_index, reranker=reranker, summarizer=summarizer,
            redactor=redactor))
        self._view = MemoryView(backend, scope)
        if backend.dense is not None and backend.dense.index is not None and backend.dense.index.persistent:
            backend.check_drift(scope.user_id)

    @classmethod
    def _of(cls, view: MemoryView) -> UnifiedMemory:
        """A memory over an existing view (shares its backend)."""
        memory = object.__new__(cls)
        memory._view = view
        return memory

    def scoped(self, *, user_id: str | None = None, agent_id: str | None = None,
               session_id: str | None = None) -> UnifiedMemory:
        """A view of the same file for another user / agent / session (shares the connection).

        >>> with UnifiedMemory() as mem:
        ...     _ = mem.remember("I live in Lisbon")
        ...     mem.scoped(user_id="bob").recall("Lisbon")
        []
        """
        return UnifiedMemory._of(self._view.rescoped(user_id=user_id, agent_id=agent_id, session_id=session_id))

    def __enter__(self) -> UnifiedMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"UnifiedMemory(path={self.path!r}, user_id={self.user_id!r})"
