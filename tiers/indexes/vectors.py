"""Dense vectors derived from SQLite: an embedding cache, an in-process index,
and per-user dense partitions kept in step with the store.

* :class:`EmbeddingCache` — vectors keyed by (user, model, sha256 of the text) in
  the ``embeddings`` table, so a text is embedded once, ever, per user and model
  (defined in :mod:`tiers.indexes.embedding_cache`, re-exported here).
* :class:`NumpyVectorIndex` — the in-process cosine index (a float32 matrix per partition;
  defined in :mod:`tiers.indexes.numpy_index`, re-exported here).
* :class:`PartitionedVectors` — the dense twin of :class:`tiers.indexes.partitions.PartitionedIndex`.

    >>> from scoring.embeddings import HashingEmbedder
    >>> from tiers.storage.backend import Storage
    >>> store = Storage(None)
    >>> cache = EmbeddingCache(store, HashingEmbedder(64))
    >>> dense = PartitionedVectors(store, lambda user: [("f1", "allergic to peanuts"), ("f2", "I love jazz")],
    ...                            cache, NumpyVectorIndex(), "facts")
    >>> [key for key, _ in dense.search("ada", cache.query_vector("peanut allergy"), 1)]
    ['f1']
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from scoring.errors import invalid
from scoring.linalg import unit_rows
from tiers.indexes.embedding_cache import EmbeddingCache, content_hash
from tiers.indexes.numpy_index import NumpyVectorIndex
from tiers.records.protocols import VectorIndex
from tiers.storage.backend import Storage
from tiers.storage.journal import Change, IndexJournal, replay

__all__ = ["content_hash", "EmbeddingCache", "NumpyVectorIndex", "PartitionedVectors", "document_vectors", "Deferral"]

Loader = Callable[[str], Iterable[tuple[str, str]]]


class Deferral:
    """How deep a write's ``defer()`` blocks are (dense partitions hold what is added inside them):
    when the outermost block ends, ``flush()``; when a block raises, ``dropped()``."""

    def __init__(self, lock: Any, flush: Callable[[], None], dropped: Callable[[], None]) -> None:
        self._lock = lock
        self._flush = flush
        self._dropped = dropped
        self.depth = 0

    @property
    def active(self) -> bool:
        """Whether a block is open (documents added now wait for its end)."""
        return self.depth > 0

    @contextlib.contextmanager
    def block(self) -> Iterator[None]:
        """One ``defer()`` block (under the storage's lock)."""
        with self._lock:
            self.depth += 1
            try:
                yield
            except BaseException:
                self._dropped()
                raise
            finally:
                self.depth -= 1
            if not self.depth:
                self._flush()


def document_vectors(cache: EmbeddingCache, user_id: str, documents: list[str],
                     parts: Callable[[str], list[str]] | None) -> np.ndarray:
    """One vector per document: its embedding, or with ``parts`` the normalised sum
    of its parts' embeddings (each distinct part embedded once, through the cache)."""
    if parts is None:
        return cache.vectors(user_id, documents)
    split = [parts(document) for document in documents]
    distinct = list(dict.fromkeys(part for pieces in split for part in pieces))
    position = {part: i for i, part in enumerate(distinct)}
    embedded = cache.vectors(user_id, distinct)
    sums = np.zeros((len(documents), embedded.shape[1]), dtype=np.float32)
    for row, pieces in enumerate(split):
        sums[row] = embedded[[position[part] for part in pieces]].sum(axis=0)
    return unit_rows(sums)


class PartitionedVectors:
    """Dense partitions of one tier (``kind``: "facts", "messages", "entities"), one per
    user (``"<kind>/<user_id>"``), derived from the store by ``loader(user_id)`` (a public
    attribute: the callable that reads a user's ``(id, text)`` documents from the rows).

    Each document is held in the index under ``"<id>|<fingerprint of model and
    text>"``, so the index's own ids tell what it holds: :meth:`ensure` compares them
    with the store and repairs the difference (deletes stale entries, embeds —
    through the cache — and adds missing ones). It runs once per process and user,
    and again after another connection commits (``PRAGMA data_version``). A
    non-persistent index is thus filled on first use; a persistent one is only
    repaired where it drifted. Searches return plain ids, best first.

    >>> from scoring.embeddings import HashingEmbedder
    >>> from tiers.storage.backend import Storage
    >>> store = Storage(None)
    >>> cache = EmbeddingCache(store, HashingEmbedder(64))
    >>> dense = PartitionedVectors(store, lambda user: [], cache, NumpyVectorIndex(), "facts")
    >>> dense.ensure("ada"); dense.add("ada", [("f1", "my sister lives in Lisbon")])
    >>> dense.search("ada", cache.query_vector("Lisbon"), 5)[0][0], dense.search("bob", cache.query_vector("Lisbon"), 5)
    ('f1', [])
    """

    def __init__(self, storage: Storage, loader: Loader, cache: EmbeddingCache, index: VectorIndex,
                 kind: str, *, parts: Callable[[str], list[str]] | None = None) -> None:
        if not isinstance(kind, str) or not kind or "/" in kind:
            raise invalid("kind", f"must be a non-empty str without '/', got {kind!r}")
        self.storage = storage
        self.cache = cache
        self.index = index
        self.kind = kind
        self.loader = loader
        self._parts = parts
        self._deferral = Deferral(storage.lock, self._flush, self._drop_pending)
        self._pending: dict[str, dict[str, str]] = {}  # user -> id -> document, while deferring
        self._keys: dict[str, dict[str, str]] = {}  # user -> id -> index key, for synced users
        self._journal = IndexJournal(storage, kind)

    def partition(self, user_id: str) -> str:
        """The index partition of a user: ``"<kind>/<user_id>"``."""
        return f"{self.kind}/{user_id}"

    def _key(self, item_id: str, text: str) -> str:
        digest = hashlib.blake2b(f"{self.cache.model}\x00{text}".encode("utf-8", "surrogatepass"),
                                 digest_size=8).hexdigest()
        return f"{item_id}|{digest}"

    def _keys_of(self, docs: dict[str, str]) -> dict[str, str]:
        """:meth:`_key` of many documents (``id -> text``), the model's prefix hashed once."""
        seed = hashlib.blake2b(f"{self.cache.model}\x00".encode("utf-8", "surrogatepass"), digest_size=8)
        keys = {}
        for item_id, text in docs.items():
            digest = seed.copy()
            digest.update(text.encode("utf-8", "surrogatepass"))
            keys[item_id] = f"{item_id}|{digest.hexdigest()}"
        return keys

    def _sync(self) -> None:
        """Replay what other processes changed since the last look (see :mod:`tiers.storage.journal`);
        their vectors are in the embedding cache already, so replaying embeds nothing, and a
        persistent index shared with them (chroma) is not written again: only what this
        process knows it holds is updated."""
        replay(self._journal.changes(), self._keys, self._replayed)

    def _replayed(self, user_id: str, keys: dict[str, str], change: Change) -> None:
        key, text = change.key, change.text
        if key is None:  # a reset: tiers.storage.journal.replay handles those itself
            return
        if self.index.persistent:  # a shared index (chroma) already holds the writer's change
            if text is None:
                keys.pop(key, None)
            else:
                keys[key] = self._key(key, text)
        elif text is None:
            if key in keys:
                self.index.delete(self.partition(user_id), [keys.pop(key)])
        else:
            self._put(user_id, keys, {key: text})

    def _put(self, user_id: str, keys: dict[str, str], items: dict[str, str],
             computed: dict[str, str] | None = None) -> None:
        """Upsert ``items`` (id -> text) not already held under the same key (``computed``: their
        keys, when the caller has them)."""
        fresh = computed if computed is not None else self._keys_of(items)
        fresh = {item_id: key for item_id, key in fresh.items() if keys.get(item_id) != key}
        if not fresh:
            return
        name = self.partition(user_id)
        stale = [keys[item_id] for item_id in fresh if item_id in keys]
        if stale:
            self.index.delete(name, stale)
        vectors = self._vectors(user_id, [items[item_id] for item_id in fresh])
        index = self.index  # a fresh array, ours: a new numpy partition keeps it (its subclasses may not)
        owned = isinstance(index, NumpyVectorIndex) and type(index).upsert is NumpyVectorIndex.upsert
        index.upsert(name, list(fresh.values()), vectors, **({"owned": True} if owned else {}))
        keys.update(fresh)

    def _vectors(self, user_id: str, documents: list[str]) -> np.ndarray:
        """:func:`document_vectors` of these documents."""
        return document_vectors(self.cache, user_id, documents, self._parts)

    def ensure(self, user_id: str) -> None:
        """Bring the user's partition in step with the store, if not done since the
        last commit by another connection."""
        with self.storage.lock:
            self._sync()
            if user_id in self._keys:
                return
            # A persistent index is shared with other processes, which update it just before
            # they commit: the write lock makes the store and the index one consistent moment.
            with self.storage.atomic() if self.index.persistent else contextlib.nullcontext():
                if self._load_saved(user_id):
                    return
                docs = dict(self.loader(user_id))
                want = self._keys_of(docs)
                name = self.partition(user_id)
                have = self.index.ids(name)
                stale = have - set(want.values())
                if stale:
                    self.index.delete(name, sorted(stale))
                keys = {item_id: key for item_id, key in want.items() if key in have}
                self._put(user_id, keys, docs, want)
                self._keys[user_id] = keys

    @property
    def tag(self) -> str:
        """What a saved partition must have been made with to be used: kind, model, dimensions."""
        return f"{self.kind}|{self.cache.model}|{self.cache.embedder.dim}"

    def _load_saved(self, user_id: str) -> bool:
        """Load the user's saved partition (:mod:`tiers.indexes.vector_store`), if the index keeps them and
        holds none yet, and replay the journal since the position it reflects (puts embedded
        through the cache, deletes applied; a partition so changed is saved again later); whether
        it was. It held exactly the store's documents at that position (saved in step, under the
        write lock), so with the journal since it is in step now, as the lexical snapshots are
        (:mod:`tiers.indexes.snapshots`). Not usable — deleted, and built from the store instead: a reset of
        the user since (a forget, a bulk write), a pruned journal, too many entries to replay."""
        load = getattr(self.index, "load_saved", None)
        if load is None:
            return False
        name = self.partition(user_id)
        head = load(name, self.tag)
        if head is None:
            return False
        changes = self._journal.since(user_id, head)
        if changes is None:
            self.index.drop(name)
            return False
        keys = {key.rpartition("|")[0]: key for key in self.index.ids(name)}
        for change in changes:
            self._replayed(user_id, keys, change)
        self._keys[user_id] = keys
        return True

    def save(self) -> None:
        """Save the in-step partitions the index keeps on disk (a numpy index with a
        directory, :meth:`~tiers.indexes.numpy_index.NumpyVectorIndex.save_partition`). Inside one
        write: the database's write lock serialises saving with forgets, and the journal is
        replayed first, so no partition that still holds a forgotten vector is saved."""
        save, saveable = getattr(self.index, "save_partition", None), getattr(self.index, "saveable", None)
        if save is None or saveable is None or not any(saveable(self.partition(user)) for user in list(self._keys)):
            return  # nothing to save: no write lock taken
        with self.storage.lock, self.storage.atomic():
            self._sync()
            head = self._journal.head()
            for user_id in list(self._keys):
                if user_id not in self._pending:
                    save(self.partition(user_id), head, self.tag)

    def forget_saved(self, user_id: str) -> None:
        """Delete the user's saved partition (inside the forget's write, before it commits)."""
        delete = getattr(self.index, "delete_saved", None)
        if delete is not None:
            delete(self.partition(user_id))

    def _loaded(self, user_id: str) -> dict[str, str] | None:
        self._sync()
        keys = self._keys.get(user_id)
        if keys is None and self.index.persistent:  # keep a persistent index exact
            self.ensure(user_id)
            keys = self._keys[user_id]
        return keys

    def add(self, user_id: str, items: Iterable[tuple[str, str]]) -> None:
        """Index new or changed documents. A non-persistent partition not built yet is built
        from the store on first use; its new documents are still embedded now, into the
        embedding cache, so that first use only reads them (the write that adds a text pays
        for its embedding, not the first recall after a bulk import: 3.4 s of 6.3 at 60,000
        hashed texts, minutes with a model). While deferring (:meth:`defer`), documents
        wait and are embedded together at the end."""
        with self.storage.lock:
            keys = self._loaded(user_id)
            if self._deferral.active:
                self._pending.setdefault(user_id, {}).update(items)
            elif keys is not None:
                self._put(user_id, keys, dict(items))
            else:
                self._vectors(user_id, [text for _, text in items])

    @contextlib.contextmanager
    def defer(self) -> Iterator[None]:
        """Hold documents added inside the block and embed them in one batch when it
        ends (one write that touches many entities embeds once, not once per entity);
        if the block raises, they are dropped and the user's partition is re-checked
        against the store on next use."""
        with self._deferral.block():
            yield

    def _drop_pending(self) -> None:
        """A deferred write failed: its documents go, and their users are checked again on next use."""
        for user_id in self._pending:
            self._keys.pop(user_id, None)
        self._pending.clear()

    def _flush(self, user_id: str | None = None) -> None:
        users = [user_id] if user_id is not None else list(self._pending)
        for user in users:
            items = self._pending.pop(user, None)
            keys = self._keys.get(user)
            if items and keys is not None:
                self._put(user, keys, items)
            elif items:  # a partition built on first use: into the cache it reads (see add)
                self._vectors(user, list(items.values()))

    def remove(self, user_id: str, ids: Iterable[str]) -> None:
        """Drop documents from the user's partition."""
        with self.storage.lock:
            ids = list(ids)
            pending = self._pending.get(user_id)
            if pending:
                for item_id in ids:
                    pending.pop(item_id, None)
            keys = self._loaded(user_id)
            if keys is not None:
                stale = [keys.pop(item_id) for item_id in ids if item_id in keys]
                if stale:
                    self.index.delete(self.partition(user_id), stale)

    def search(self, user_id: str, vector: object, limit: int) -> list[tuple[str, float]]:
        """The user's ``limit`` documents most similar to ``vector``: ``[(id, cosine)]``."""
        self.ensure(user_id)
        if user_id in self._pending:  # a search inside a deferred write sees its documents
            with self.storage.lock:
                self._flush(user_id)
        hits = self.index.search(self.partition(user_id), vector, limit)
        return [(key.rpartition("|")[0], score) for key, score in hits]

    def similarity(self, user_id: str, vector: object, ids: Iterable[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of these documents of the user (those indexed)."""
        self.ensure(user_id)
        if user_id in self._pending:
            with self.storage.lock:
                self._flush(user_id)
        with self.storage.lock:
            keys = self._keys.get(user_id, {})
            wanted = {keys[item_id]: item_id for item_id in ids if item_id in keys}
        if not wanted:
            return {}
        found = self.index.similarity(self.partition(user_id), vector, list(wanted))
        return {wanted[key]: score for key, score in found.items()}

    def rebuild(self, user_id: str) -> None:
        """Drop the user's partition and rebuild it from the store (vectors from the cache)."""
        with self.storage.lock:
            self.index.drop(self.partition(user_id))
            self._keys.pop(user_id, None)
            self._pending.pop(user_id, None)
            self.ensure(user_id)

    def rebuild_all(self, user_ids: Iterable[str]) -> None:
        """:meth:`rebuild` each of these users."""
        for user_id in user_ids:
            self.rebuild(user_id)

    def drop(self, user_id: str) -> None:
        """Delete the user's partition from the index (the embedding cache is kept)."""
        with self.storage.lock:
            self.index.drop(self.partition(user_id))
            self._keys.pop(user_id, None)
            self._pending.pop(user_id, None)

    def invalidate(self, user_id: str | None = None) -> None:
        """Forget what is known to be in step, so the next use re-checks against the store."""
        with self.storage.lock:
            if user_id is None:
                self._keys.clear()
                self._pending.clear()
            else:
                self._keys.pop(user_id, None)
                self._pending.pop(user_id, None)
