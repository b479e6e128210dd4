"""The pluggable parts of unified-memory, as ``typing.Protocol`` classes.

Anything with the right shape plugs in; nothing needs to subclass us.

    >>> from unified_memory.protocols import ImportanceScorer
    >>> isinstance(lambda text: 0.5, ImportanceScorer)
    True

This module is a leaf: it imports only :mod:`unified_memory.types`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from unified_memory.types import Extraction, Message

__all__ = ["TokenCounter", "ImportanceScorer", "Extractor", "Embedder", "LLM"]


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text: any callable ``str -> int``."""

    def __call__(self, text: str) -> int: ...


@runtime_checkable
class ImportanceScorer(Protocol):
    """Scores how worth remembering a text is: any callable ``str -> float`` in [0, 1]."""

    def __call__(self, text: str) -> float: ...


@runtime_checkable
class Extractor(Protocol):
    """Proposes facts, entities and triples from a message that left the window.

    ``context`` holds the messages just before it (the same interaction), so an
    extractor can resolve "yes, Lisbon" against the question it answers.
    """

    def extract(self, message: Message, *, context: Sequence[Message] = ()) -> Extraction: ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape ``(n, dim)``."""

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Any: ...


@runtime_checkable
class LLM(Protocol):
    """A chat model: takes OpenAI-style messages, returns the reply text."""

    def complete(self, messages: Sequence[dict[str, Any]]) -> str: ...
