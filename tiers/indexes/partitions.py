"""Per-user lexical indexes derived from SQLite, built lazily and kept in step
(the lexical half of :class:`tiers.indexes.documents.DocumentIndex`).

Each indexed tier keeps one :class:`~scoring.lexical.LexicalIndex` per user, so
a query can only ever see that user's documents. An index is built from the
store the first time the user is searched, updated in place by this process's
writes, and by other processes' writes replayed from the journal (:mod:`tiers.storage.journal`).

    >>> from tiers.storage.backend import Storage
    >>> store = Storage(None)
    >>> parts = PartitionedIndex(store, lambda user_id: [("d1", "peanut allergy")])
    >>> [m.key for m in parts.search("default", "peanut")]
    ['d1']
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from scoring.lexical import LexicalIndex, LexicalMatch
from tiers.indexes import snapshots
from tiers.storage.backend import Storage
from tiers.storage.journal import Change, IndexJournal, replay

__all__ = ["PartitionedIndex", "Loader"]

Loader = Callable[[str], Iterable[tuple[str, str]]]


class PartitionedIndex:
    """One lexical index per user, derived from the store by ``loader(user_id)``.

    ``loader`` (the callable that reads a user's ``(id, text)`` documents from the tier's rows) and
    ``kind`` (the tier) are public: a test may count the loads by wrapping ``loader``."""

    def __init__(self, storage: Storage, loader: Loader, *, kind: str = "documents", k1: float = 1.2,
                 b: float = 0.75) -> None:
        self._storage = storage
        self.loader = loader
        self._k1 = k1
        self._b = b
        self._parts: dict[str, LexicalIndex] = {}
        self.kind = kind
        self._journal = IndexJournal(storage, kind)
        self._unsaved: set[str] = set()  # users whose loaded index differs from their saved snapshot

    def _sync(self) -> None:
        """Replay what other processes changed since the last look (see :mod:`tiers.storage.journal`)."""
        replay(self._journal.changes(), self._parts, self._replayed)

    def _replayed(self, user_id: str, index: LexicalIndex, change: Change) -> None:
        _apply(index, change)
        self._unsaved.add(user_id)

    def _restore(self, user_id: str) -> LexicalIndex | None:
        """The user's saved index brought up to date from the journal, when usable."""
        found = snapshots.load(self._storage, user_id, self.kind) if self._journal.enabled else None
        if found is None:
            return None
        state, position = found
        changes = self._journal.since(user_id, position)
        if changes is None or (state.k1, state.b) != (self._k1, self._b):
            return None
        try:
            index = LexicalIndex.from_state(state)
        except ValueError:  # damaged: built from the store instead
            return None
        for change in changes:
            _apply(index, change)
        if changes:
            self._unsaved.add(user_id)
        return index

    def get(self, user_id: str) -> LexicalIndex:
        """The user's index, built from the store on first use."""
        with self._storage.lock:
            self._sync()
            index = self._parts.get(user_id)
            if index is None:
                index = self._restore(user_id)
                if index is None:
                    index = LexicalIndex(k1=self._k1, b=self._b)
                    index.add_many(self.loader(user_id))
                    self._unsaved.add(user_id)
                self._parts[user_id] = index
            return index

    def save_snapshots(self) -> int:
        """Save the loaded indexes of at least :data:`~tiers.indexes.snapshots.SNAPSHOT_MIN_DOCS`
        documents that changed since they were built or restored, so that the next
        process restores them instead of re-analysing every text. Returns how many.

        >>> from tiers.storage.backend import Storage
        >>> PartitionedIndex(Storage(None), lambda user_id: []).save_snapshots()
        0
        """
        with self._storage.lock:
            users = [u for u in sorted(self._unsaved)
                     if u in self._parts and len(self._parts[u]) >= snapshots.SNAPSHOT_MIN_DOCS]
            if not users or not self._journal.enabled:
                return 0
            with self._storage.atomic():  # no other writer between catching up and the position
                self._sync()
                position = self._journal.head()
                saved = 0
                for user in users:
                    index = self._parts.get(user)
                    if index is not None:
                        snapshots.save(self._storage, user, self.kind, index.state(), head=position)
                        self._unsaved.discard(user)
                        saved += 1
            return saved

    def add(self, user_id: str, items: Iterable[tuple[str, str]]) -> None:
        """Index new or changed documents, if the user's index is loaded (else it loads them later)."""
        with self._storage.lock:
            self._sync()
            index = self._parts.get(user_id)
            if index is not None:
                index.add_many(items)
                self._unsaved.add(user_id)

    def remove(self, user_id: str, keys: Iterable[str]) -> None:
        """Drop documents from the user's index, if it is loaded."""
        with self._storage.lock:
            self._sync()
            index = self._parts.get(user_id)
            if index is not None:
                for key in keys:
                    index.remove(key)
                self._unsaved.add(user_id)

    def search(
        self,
        user_id: str,
        query: str,
        limit: int | None = 50,
        *,
        keys_allowed: Callable[[str], bool] | None = None,
        keys: Collection[str] | None = None,
    ) -> list[LexicalMatch]:
        """Search the user's documents only (under the store's lock: a write from another
        thread may be growing the same index); ``keys_allowed`` and ``keys`` as
        :meth:`scoring.lexical.LexicalIndex.search`."""
        with self._storage.lock:
            return self.get(user_id).search(query, limit, keys_allowed=keys_allowed, keys=keys)

    def invalidate(self, user_id: str | None = None) -> None:
        """Forget one user's index (or all), so it is rebuilt from the store on next use."""
        with self._storage.lock:
            if user_id is None:
                self._parts.clear()
            else:
                self._parts.pop(user_id, None)


def _apply(index: LexicalIndex, change: Change) -> None:
    """One journalled put or delete (resets are the caller's)."""
    key, text = change.key, change.text
    if key is None:  # a reset: never handed here (see tiers.storage.journal.replay and IndexJournal.since)
        return
    if text is None:
        index.remove(key)
    else:
        index.add(key, text)
