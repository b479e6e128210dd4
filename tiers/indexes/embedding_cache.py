"""The embedding cache: vectors keyed by (user, model, sha256 of the text) in the ``embeddings``
table, so a text is embedded once, ever, per user and model; the tiers' dense partitions
(:mod:`tiers.indexes.vectors`) are built from it, and a query's vector is remembered in memory.

    >>> from scoring.embeddings import HashingEmbedder
    >>> from tiers.storage.backend import Storage
    >>> cache = EmbeddingCache(Storage(None), HashingEmbedder(32))
    >>> first = cache.vectors("ada", ["allergic to peanuts"])
    >>> bool((cache.vectors("ada", ["allergic to peanuts"]) == first).all()), cache.embedded, cache.cache_hits
    (True, 1, 1)
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

from scoring.errors import invalid, wrong_type
from tiers.records.protocols import Embedder
from tiers.storage.backend import Storage

__all__ = ["content_hash", "EmbeddingCache"]

_CHUNK = 500  # hashes per SELECT ... IN (...)
# From this many distinct texts, read the user's cached vectors in one scan (it reads every vector
# of the user: at 300,000 facts, 460 MB of pages, mapped into the process; lookups of 6,000 entity
# documents of that user by key read 27 MB).
_SCAN_FROM = 50_000
_STORE_SLICE = 5_000  # new vectors inserted per executemany (their bytes copies made per slice)
_EMBED_SLICE = 8_192  # texts per embedder call (HashingEmbedder holds ~3 copies of its output meanwhile)


def content_hash(text: str) -> str:
    """The sha256 hex digest of a text's UTF-8 bytes (the embedding cache key).

    >>> content_hash("hi")[:16]
    '8f434346648f6b96'
    """
    if not isinstance(text, str):
        raise wrong_type("text", "str", text)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache:
    """Embeds texts through the ``embeddings`` table: cached vectors are read back,
    only the missing distinct texts are embedded (batched calls of up to 8,192) and stored.

    Counters: ``embedded`` (texts sent to the embedder), ``cache_hits`` (distinct
    texts found in the table), ``embed_calls`` (calls of the embedder).

    >>> from scoring.embeddings import HashingEmbedder
    >>> from tiers.storage.backend import Storage
    >>> cache = EmbeddingCache(Storage(None), HashingEmbedder(32))
    >>> cache.vectors("ada", ["hi", "hi", "bye"]).shape, cache.embedded
    ((3, 32), 2)
    >>> _ = cache.vectors("ada", ["bye"]); cache.embedded, cache.cache_hits
    (2, 1)
    """

    def __init__(self, storage: Storage, embedder: Embedder, *, query_cache_size: int = 256) -> None:
        self.storage = storage
        self.embedder = embedder
        self.embedded = 0
        self.cache_hits = 0
        self.embed_calls = 0
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_cache_size = query_cache_size
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """The embedder's name: the cache key's model part."""
        return self.embedder.name

    def _embed(self, texts: list[str], dim: int) -> np.ndarray:
        vectors = np.ascontiguousarray(self.embedder.embed(texts), dtype=np.float32)
        if vectors.shape != (len(texts), dim):
            raise invalid("embedder", f"returned shape {vectors.shape}, expected {(len(texts), dim)}")
        with self._lock:
            self.embed_calls += 1
            self.embedded += len(texts)
        return vectors

    def _read(self, user_id: str, rows: dict[str, int], out: np.ndarray) -> set[str]:
        """Copy the cached vector of each hash in ``rows`` (hash -> row of ``out``) into its row (no
        ``bytes`` per text, no joined buffer: two 460 MB copies at 300,000); returns the hashes found."""
        dim = out.shape[1]
        found: set[str] = set()
        select = "SELECT content_hash, dim, vector FROM embeddings WHERE user_id = ? AND model = ?"
        with self.storage.lock:
            if len(rows) >= _SCAN_FROM:  # one range scan beats many random lookups
                batches: Iterable = [self.storage.execute(select, [user_id, self.model])]
            else:  # sorted keys: neighbouring lookups share pages
                ordered = sorted(rows)
                batches = (self.storage.execute(
                    f"{select} AND content_hash IN ({','.join('?' * len(chunk))})",
                    [user_id, self.model, *chunk]).fetchall()
                    for chunk in (ordered[i:i + _CHUNK] for i in range(0, len(ordered), _CHUNK)))
            for batch in batches:
                for key, stored_dim, blob in batch:
                    row = rows.get(key)
                    if row is not None and stored_dim == dim and len(blob) == 4 * dim:  # else: stale, re-embed
                        out[row] = np.frombuffer(blob, dtype=np.float32)
                        found.add(key)
        return found

    def vectors(self, user_id: str, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` in order, shape ``(len(texts), dim)``, float32."""
        if isinstance(texts, str):
            raise wrong_type("texts", "a sequence of str", texts)
        texts = list(texts)
        dim = self.embedder.dim
        hashes = [content_hash(text) for text in texts]
        first: dict[str, int] = {}  # hash -> the row of its first text
        for row, key in enumerate(hashes):
            first.setdefault(key, row)
        out = np.empty((len(texts), dim), dtype=np.float32)
        found = self._read(user_id, first, out)
        with self._lock:
            self.cache_hits += len(found)
        missing = [key for key in first if key not in found]
        if missing:
            for start in range(0, len(missing), _EMBED_SLICE):  # an embedder's temporaries stay small
                keys = missing[start:start + _EMBED_SLICE]
                out[[first[key] for key in keys]] = self._embed([texts[first[key]] for key in keys], dim)
            self._store(user_id, sorted(missing), out, first)
        if len(first) < len(texts):  # repeated texts: copies of their first row
            repeats = [row for row, key in enumerate(hashes) if first[key] != row]
            out[repeats] = out[[first[hashes[row]] for row in repeats]]
        return out

    def _store(self, user_id: str, keys: list[str], out: np.ndarray, rows: dict[str, int]) -> None:
        """Insert the vectors of ``keys`` (``out[rows[key]]``) in one transaction, a slice at a time."""
        dim = out.shape[1]
        with self.storage.atomic():
            for start in range(0, len(keys), _STORE_SLICE):
                self.storage.executemany(
                    "INSERT INTO embeddings(user_id, model, content_hash, dim, vector) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (user_id, model, content_hash) DO UPDATE SET dim = excluded.dim, vector = excluded.vector",
                    [(user_id, self.model, key, dim, out[rows[key]].tobytes())
                     for key in keys[start:start + _STORE_SLICE]])

    def query_vector(self, text: str) -> np.ndarray:
        """The vector of a query, shape ``(dim,)``: embedded directly (not stored),
        with the last ``query_cache_size`` queries remembered in memory."""
        if not isinstance(text, str):
            raise wrong_type("query", "str", text)
        with self._lock:
            hit = self._queries.get(text)
            if hit is not None:
                self._queries.move_to_end(text)
                return hit
        vector: np.ndarray = self._embed([text], self.embedder.dim)[0]
        vector.setflags(write=False)
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > self._query_cache_size:
                self._queries.popitem(last=False)
        return vector

    def clear_queries(self) -> None:
        """Drop the remembered query vectors (queries are not attributed to users, so a
        forgotten user's queries can only be dropped with everyone's)."""
        with self._lock:
            self._queries.clear()

    def delete_user(self, user_id: str) -> int:
        """Forget every cached vector of a user (all models); returns how many."""
        with self.storage.atomic():
            return self.storage.execute("DELETE FROM embeddings WHERE user_id = ?", [user_id]).rowcount

    def prune(self, user_id: str, keep: Iterable[str]) -> int:
        """Delete this model's cached vectors of a user except those of the texts in
        ``keep``; returns how many were deleted."""
        live = {content_hash(text) for text in keep}
        with self.storage.atomic():
            stored = [row[0] for row in self.storage.execute(
                "SELECT content_hash FROM embeddings WHERE user_id = ? AND model = ?", [user_id, self.model])]
            dead = [(user_id, self.model, key) for key in stored if key not in live]
            self.storage.executemany(
                "DELETE FROM embeddings WHERE user_id = ? AND model = ? AND content_hash = ?", dead)
        return len(dead)
