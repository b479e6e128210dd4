"""The pluggable parts of unified-memory, as ``typing.Protocol`` classes.

Anything with the right shape plugs in; nothing needs to subclass us.

    >>> from unified_memory.protocols import ImportanceScorer
    >>> isinstance(lambda text: 0.5, ImportanceScorer)
    True

The parts the tiers call (token counter, embedder, vector index, conversation store) are
defined in :mod:`tiers.records.protocols`, below the tiers, and importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from tiers.records.protocols import ConversationStore, Embedder, TokenCounter, VectorIndex
from unified_memory.types import ContextBlock, Extraction, Fact, MemoryStats, Message, RecallHit

__all__ = ["TokenCounter", "ImportanceScorer", "Redactor", "Extractor", "Embedder", "VectorIndex", "Reranker", "Summarizer",
           "LLM", "ConversationStore", "MemoryClient"]


@runtime_checkable
class ImportanceScorer(Protocol):
    """Scores how worth remembering a text is: any callable ``str -> float`` in [0, 1]."""

    def __call__(self, text: str, /) -> float: ...


@runtime_checkable
class Redactor(Protocol):
    """Scrubs secrets out of a text before it is stored: any callable ``str -> str``
    (see :class:`~unified_memory.privacy.secrets.SecretRedactor`). It should be idempotent:
    redacting a redacted text changes nothing."""

    def __call__(self, text: str) -> str: ...


@runtime_checkable
class Extractor(Protocol):
    """Proposes facts, entities and triples from a message that left the window.

    ``context`` holds the messages just before it (the same interaction), so an
    extractor can resolve "yes, Lisbon" against the question it answers.
    """

    def extract(self, message: Message, *, context: Sequence[Message] = ()) -> Extraction: ...


@runtime_checkable
class Reranker(Protocol):
    """Re-scores the best recall hits for a query (e.g. a cross-encoder): one score per
    text, higher is better. See :mod:`unified_memory.retrieval.rerank`."""

    def rerank(self, query: str, texts: Sequence[str]) -> Sequence[float]: ...


@runtime_checkable
class Summarizer(Protocol):
    """Folds messages that left the short-term window into the conversation's running
    summary: ``summarize(previous, messages) -> new summary`` (see :mod:`unified_memory.extraction.summarizers`)."""

    def summarize(self, previous: str, messages: Sequence[Message]) -> str: ...


@runtime_checkable
class LLM(Protocol):
    """A chat model: takes OpenAI-style messages, returns the reply text."""

    def complete(self, messages: Sequence[dict[str, Any]]) -> str: ...


@runtime_checkable
class MemoryClient(Protocol):
    """What ``@remember`` and the memory tools use of a memory: a local
    :class:`~unified_memory.UnifiedMemory` or a :class:`~unified_memory.remote.client.RemoteMemory`
    talking to the memory service both fit.

    >>> from unified_memory import UnifiedMemory
    >>> isinstance(UnifiedMemory(), MemoryClient)
    True
    """

    @property
    def user_id(self) -> str: ...

    def scoped(self, *, user_id: str | None = None, agent_id: str | None = None,
               session_id: str | None = None) -> MemoryClient: ...

    def context(self, query: str | None = None, *, max_tokens: int | None = None,
                include_conversation: bool = True, limit: int | None = None,
                as_of: Any = None) -> ContextBlock: ...

    def add_turn(self, user: str, assistant: str | None = None, *, when: Any = None,
                 metadata: Mapping[str, Any] | None = None, extract: bool | None = None,
                 extractor: Extractor | None = None) -> list[str]: ...

    def recall(self, query: str, *, limit: int = 10, tiers: Sequence[str] | str | None = None,
               days: float | None = None, where: Mapping[str, Any] | None = None,
               as_of: Any = None) -> list[RecallHit]: ...

    def remember(self, text: str, *, importance: float | None = None, category: str | None = None,
                 metadata: Mapping[str, Any] | None = None, ttl_days: float | None = None) -> str: ...

    def facts(self, *, include_archived: bool = False, include_inactive: bool = False, category: str | None = None,
              limit: int | None = None, order: Any = "time", include_history: bool = False,
              offset: int = 0) -> list[Fact]: ...

    def stats(self) -> MemoryStats: ...

    def report_failure(self, kind: str, error: str) -> None: ...
