"""Helpers for testing code that uses unified-memory (no model, no network).

    >>> emb = FakeEmbedder(dim=16)
    >>> emb.embed(["hello", "hello there"]).shape, emb.calls, emb.texts
    ((2, 16), 1, ['hello', 'hello there'])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from scoring.embeddings import HashingEmbedder

__all__ = ["FakeEmbedder"]


class FakeEmbedder:
    """A deterministic :class:`~unified_memory.protocols.Embedder` that records its use.

    Vectors come from :class:`~scoring.embeddings.HashingEmbedder` (texts sharing
    words are close). ``calls`` counts :meth:`embed` calls, ``texts`` lists every
    text embedded, in order; :meth:`reset` clears both.

    >>> emb = FakeEmbedder()
    >>> _ = emb.embed(["a peanut"]); _ = emb.embed([])
    >>> emb.name, emb.dim, emb.calls, len(emb.texts)
    ('fake-32', 32, 2, 1)
    """

    def __init__(self, dim: int = 32, *, name: str | None = None) -> None:
        self._inner = HashingEmbedder(dim, name=name or f"fake-{dim}")
        self.calls = 0
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        """The embedder's name (part of the embedding cache key)."""
        return self._inner.name

    @property
    def dim(self) -> int:
        """Vector size."""
        return self._inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts (float32, L2-normalised) and record the call."""
        vectors = self._inner.embed(texts)
        self.calls += 1
        self.texts.extend(texts)
        return vectors

    def reset(self) -> None:
        """Forget the recorded calls."""
        self.calls = 0
        self.texts.clear()
