"""The records of :mod:`scoring.lexical`: a search hit, a saved index's state, and the cache that
turns raw tokens into term ids.

    >>> LexicalMatch("f1", 1.5, 0.4, ("lisbon",)).key
    'f1'
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from scoring.text import DOC_BREAK, token_terms

__all__ = ["LexicalMatch", "LexicalState", "TokenIds"]

_TOKEN_CACHE_MAX = 1 << 20


class TokenIds(dict[str, tuple[int, ...]]):
    """raw token -> term ids under the default analyzer (DOC_BREAK -> -1); fills the
    vocabulary on a miss."""

    def __init__(self, vocab: dict[str, int]) -> None:
        super().__init__({DOC_BREAK: (-1,)})
        self.vocab = vocab

    def __missing__(self, token: str) -> tuple[int, ...]:
        if len(self) >= _TOKEN_CACHE_MAX:
            self.clear()
            self[DOC_BREAK] = (-1,)
        vocab = self.vocab
        ids = self[token] = tuple(vocab.setdefault(t, len(vocab)) for t in token_terms(token))
        return ids


class LexicalState(NamedTuple):
    """What :meth:`LexicalIndex.state` captures: keys by slot (``None`` for removed
    ones), terms by id, the per-slot and postings arrays, and the BM25 parameters."""

    keys: list[str | None]
    vocab: list[str]
    arrays: dict[str, np.ndarray]
    total_len: int
    k1: float
    b: float


class LexicalMatch(NamedTuple):
    """One search hit: raw BM25 ``score``, ``relevance`` = score / query upper bound
    (in [0, 1]) and the query stems the document matched, in query order.

    >>> LexicalMatch("f1", 1.5, 0.4, ("lisbon",)).matched_terms
    ('lisbon',)
    """

    key: str
    score: float
    relevance: float
    matched_terms: tuple[str, ...]
