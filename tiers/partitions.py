"""Per-user lexical indexes derived from SQLite, built lazily and kept in step
(the lexical half of :class:`tiers.documents.DocumentIndex`).

Each indexed tier keeps one :class:`~scoring.lexical.LexicalIndex` per user, so
a query can only ever see that user's documents. An index is built from the
store the first time the user is searched, updated in place by this process's
writes, and by other processes' writes replayed from the journal (:mod:`tiers.journal`).

    >>> from tiers.storage import Storage
    >>> store = Storage(None)
    >>> parts = PartitionedIndex(store, lambda user_id: [("d1", "peanut allergy")])
    >>> [m.key for m in parts.search("default", "peanut")]
    ['d1']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scoring.lexical import LexicalIndex, LexicalMatch
from tiers.journal import IndexJournal
from tiers.storage import Storage

__all__ = ["PartitionedIndex", "Loader"]

Loader = Callable[[str], Iterable[tuple[str, str]]]


class PartitionedIndex:
    """One lexical index per user, derived from the store by ``loader(user_id)``."""

    def __init__(self, storage: Storage, loader: Loader, *, kind: str = "documents", k1: float = 1.2,
                 b: float = 0.75) -> None:
        self._storage = storage
        self._loader = loader
        self._k1 = k1
        self._b = b
        self._parts: dict[str, LexicalIndex] = {}
        self._journal = IndexJournal(storage, kind)

    def _sync(self) -> None:
        """Replay what other processes changed since the last look (see :mod:`tiers.journal`)."""
        changes = self._journal.changes()
        if changes is None:  # too far behind to replay: rebuild each user's index on next use
            self._parts.clear()
            return
        for change in changes:
            if change.user_id is None:
                self._parts.clear()
                continue
            index = self._parts.get(change.user_id)
            if index is None:  # not loaded here: it is built from the store on first use
                continue
            if change.key is None:
                del self._parts[change.user_id]
            elif change.text is None:
                index.remove(change.key)
            else:
                index.add(change.key, change.text)

    def get(self, user_id: str) -> LexicalIndex:
        """The user's index, built from the store on first use."""
        with self._storage.lock:
            self._sync()
            index = self._parts.get(user_id)
            if index is None:
                index = LexicalIndex(k1=self._k1, b=self._b)
                index.add_many(self._loader(user_id))
                self._parts[user_id] = index
            return index

    def add(self, user_id: str, items: Iterable[tuple[str, str]]) -> None:
        """Index new or changed documents, if the user's index is loaded (else it loads them later)."""
        with self._storage.lock:
            self._sync()
            index = self._parts.get(user_id)
            if index is not None:
                index.add_many(items)

    def remove(self, user_id: str, keys: Iterable[str]) -> None:
        """Drop documents from the user's index, if it is loaded."""
        with self._storage.lock:
            self._sync()
            index = self._parts.get(user_id)
            if index is not None:
                for key in keys:
                    index.remove(key)

    def search(
        self,
        user_id: str,
        query: str,
        limit: int | None = 50,
        *,
        keys_allowed: Callable[[str], bool] | None = None,
    ) -> list[LexicalMatch]:
        """Search the user's documents only (under the store's lock: a write from another
        thread may be growing the same index)."""
        with self._storage.lock:
            return self.get(user_id).search(query, limit, keys_allowed=keys_allowed)

    def invalidate(self, user_id: str | None = None) -> None:
        """Forget one user's index (or all), so it is rebuilt from the store on next use."""
        with self._storage.lock:
            if user_id is None:
                self._parts.clear()
            else:
                self._parts.pop(user_id, None)
