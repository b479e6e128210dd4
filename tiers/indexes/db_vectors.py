"""Dense vectors in PostgreSQL with pgvector (the dense half of the database search path;
docs/design/pg-search.md).

The twin of :class:`tiers.indexes.vectors.PartitionedVectors` for
:class:`tiers.indexes.documents.DocumentIndex`: one table per embedding model
(:func:`tiers.storage.pg_search_schema.vector_table`, ``vector(dim)`` with an HNSW index on
cosine distance), rows keyed by (user, tier, id), written in the transaction of the rows they
index. Vectors come through the :class:`~tiers.indexes.embedding_cache.EmbeddingCache`
(a text is embedded once per user and model), documents with ``parts`` as the normalised sum
of their parts' embeddings, as in-process.

A search is exact for a user's tier of up to :data:`EXACT_UP_TO` documents (every vector of
the user compared, read through the primary key: the same neighbours as in-process). A tier that
grows past that is marked ``approximate``: its rows join the table's partial HNSW index, which is
searched with pgvector's iterative scan so the user's filter does not starve it. The many small
users never pay for HNSW inserts; the write that takes a tier past the line moves it. A user's
tier is filled from its rows on its first write or search, once for every host
(``search_filled``): a new user's writes are indexed as they commit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator

import numpy as np

from tiers.indexes.embedding_cache import EmbeddingCache
from tiers.indexes.sql_lexical import Loader
from tiers.indexes.vectors import Deferral, document_vectors
from tiers.storage.backend import Storage
from tiers.storage.pg_search_schema import vector_table, vector_table_ddl

__all__ = ["DatabaseVectors", "EXACT_UP_TO", "literal"]

#: Up to this many documents in a user's tier, a search compares every one of them (exact).
EXACT_UP_TO = 20_000


def literal(vector: np.ndarray) -> str:
    """pgvector's text form of a vector, ``[x,y,...]`` (float32 values written exactly).

    >>> literal(np.array([0.5, -1.0, 0.25], dtype=np.float32))
    '[0.5,-1.0,0.25]'
    """
    return "[" + ",".join(map(repr, np.asarray(vector, dtype=np.float32).tolist())) + "]"


class DatabaseVectors:
    """One tier's (``kind``'s) vectors of every user, in the model's vector table. ``loader``
    (public, like the lexical indexes') reads a user's ``(id, text)`` documents from the rows."""

    def __init__(self, storage: Storage, loader: Loader, cache: EmbeddingCache, kind: str, *,
                 parts: Callable[[str], list[str]] | None = None) -> None:
        self.storage = storage
        self.cache = cache
        self.kind = kind
        self.loader = loader
        self._parts = parts
        self.table = vector_table(cache.model)
        self._ready = False
        self._pending: dict[str, dict[str, str]] = {}  # user -> id -> document, while deferring
        self._deferral = Deferral(storage.lock, self._flush, self._pending.clear)

    # -- the table -------------------------------------------------------------------------------

    def _prepare(self) -> None:
        """Create the model's table and HNSW index, once, and register it."""
        if self._ready:
            return
        known = self.storage.execute("SELECT dims FROM search_models WHERE table_name = ?", [self.table]).fetchone()
        dims = int(self.cache.embedder.dim)
        if known is None or int(known[0]) != dims:
            with self.storage.atomic():
                if known is not None:  # the model now gives another dimension: its old vectors go
                    self.storage.execute(f"DROP TABLE IF EXISTS {self.table}")
                    self.storage.execute("DELETE FROM search_filled WHERE part = ?", [self.table])
                for statement in vector_table_ddl(self.table, dims):
                    self.storage.execute(statement)
                self.storage.execute("INSERT INTO search_models (table_name, model, dims) VALUES (?, ?, ?) "
                                     "ON CONFLICT (table_name) DO UPDATE SET model = excluded.model, dims = excluded.dims",
                                     [self.table, self.cache.model, dims])
        self._ready = True

    def _state(self, user_id: str) -> bool | None:
        """``None``: the user's tier is not filled yet; else whether its rows are in the HNSW index
        (``approximate``: more than :data:`EXACT_UP_TO` documents once)."""
        row = self.storage.execute("SELECT approximate FROM search_filled WHERE user_id = ? AND kind = ? AND part = ?",
                                   [user_id, self.kind, self.table]).fetchone()
        return None if row is None else bool(row[0])

    def ensure(self, user_id: str) -> bool:
        """Fill the user's vectors of this tier from its rows unless done (by any host): one
        transaction holding the database's write lock. Returns whether the tier is approximate."""
        self._prepare()
        state = self._state(user_id)
        if state is not None:
            return state
        filled = self._fill(user_id)
        return filled is not None and filled[0]

    def _fill(self, user_id: str) -> tuple[bool, frozenset[str]] | None:
        """Fill the user's tier (unless another host just did): whether it is approximate and the ids
        this call stored (none when it was filled), or ``None`` when the user has nothing (then
        nothing is written, and no lock is taken)."""
        if not self.storage.has_user(user_id):  # nothing to index: a read, without the write lock
            return None
        with self.storage.atomic():
            state = self._state(user_id)
            if state is not None:
                return state, frozenset()
            self.storage.execute(f"DELETE FROM {self.table} WHERE user_id = ? AND kind = ?", [user_id, self.kind])
            docs = dict(self.loader(user_id))
            if not docs and not self.storage.has_user(user_id):  # no trace of a user who has nothing
                return None
            approximate = len(docs) > EXACT_UP_TO
            self._put(user_id, docs, approximate)
            self.storage.execute("INSERT INTO search_filled (user_id, kind, part, approximate) VALUES (?, ?, ?, ?)",
                                 [user_id, self.kind, self.table, approximate])
        return approximate, frozenset(docs)

    def _approximate(self, user_id: str) -> None:
        """Put the user's tier in the HNSW index from now on (it outgrew :data:`EXACT_UP_TO`)."""
        with self.storage.atomic():
            self.storage.execute(f"UPDATE {self.table} SET approximate = true WHERE user_id = ? AND kind = ? "
                                 "AND NOT approximate", [user_id, self.kind])
            self.storage.execute("UPDATE search_filled SET approximate = true WHERE user_id = ? AND kind = ? "
                                 "AND part = ?", [user_id, self.kind, self.table])

    # -- writes (inside the caller's transaction) -----------------------------------------------

    def _put(self, user_id: str, docs: dict[str, str], approximate: bool) -> None:
        if not docs:
            return
        ids = list(docs)
        vectors = document_vectors(self.cache, user_id, list(docs.values()), self._parts)
        self.storage.execute(
            f"INSERT INTO {self.table} (user_id, kind, id, embedding, approximate) "
            "SELECT ?, ?, v.id, v.embedding::vector, ? FROM unnest(?::text[], ?::text[]) AS v(id, embedding) "
            "ON CONFLICT (user_id, kind, id) DO UPDATE SET embedding = excluded.embedding",
            [user_id, self.kind, approximate, ids, [literal(v) for v in vectors]])
        if not approximate and self._outgrown(user_id):
            self._approximate(user_id)

    def _outgrown(self, user_id: str) -> bool:
        """Whether the user's tier now holds more than :data:`EXACT_UP_TO` documents, as the tier's
        lexical totals say (``search_stats``, written in the same transaction: every tier's
        documents are in both indexes). The write that crosses the line moves the tier into the
        HNSW index, so no search pays for that move."""
        row = self.storage.execute("SELECT docs FROM search_stats WHERE user_id = ? AND kind = ?",
                                   [user_id, self.kind]).fetchone()
        return row is not None and int(row[0]) > EXACT_UP_TO

    def add(self, user_id: str, items: Iterable[tuple[str, str]]) -> None:
        """Embed and store new or changed documents; while deferring, at the end of the block. A
        tier not filled yet is filled first, from its rows (as :mod:`tiers.indexes.sql_lexical`
        does: every write of a new user is indexed as it commits)."""
        docs = dict(items)
        if not docs:
            return
        self._prepare()
        state = self._state(user_id)
        if state is None:
            filled = self._fill(user_id)
            if filled is None:  # rows not written yet, of a user who had nothing
                self.storage.execute("INSERT INTO search_filled (user_id, kind, part, approximate) "
                                     "VALUES (?, ?, ?, false)", [user_id, self.kind, self.table])
                state = False
            else:
                state = filled[0]
                docs = {key: text for key, text in docs.items() if key not in filled[1]}  # stored by the fill
                if not docs:
                    return
        if self._deferral.active:
            self._pending.setdefault(user_id, {}).update(docs)
        else:
            self._put(user_id, docs, state)

    @contextlib.contextmanager
    def defer(self) -> Iterator[None]:
        """Hold documents added inside the block and embed them in one batch when it ends
        (inside the write: a failure rolls the write back with them)."""
        with self._deferral.block():
            yield

    def _flush(self, user_id: str | None = None) -> None:
        for user in [user_id] if user_id is not None else list(self._pending):
            docs = self._pending.pop(user, None)
            if docs:
                self._put(user, docs, bool(self._state(user)))

    def remove(self, user_id: str, ids: Iterable[str]) -> None:
        """Delete these documents' vectors."""
        gone = list(dict.fromkeys(ids))
        if not gone:
            return
        self._prepare()
        pending = self._pending.get(user_id)
        if pending:
            for item_id in gone:
                pending.pop(item_id, None)
        self.storage.execute(f"DELETE FROM {self.table} WHERE user_id = ? AND kind = ? AND id = ANY(?)",
                             [user_id, self.kind, gone])

    def reset(self, user_id: str | None) -> None:
        """Drop the user's (``None``: every user's) vectors of this tier, inside the caller's
        write: the next search fills them again."""
        self._prepare()
        self._pending.clear() if user_id is None else self._pending.pop(user_id, None)
        where, params = ("kind = ?", [self.kind]) if user_id is None else ("user_id = ? AND kind = ?",
                                                                           [user_id, self.kind])
        self.storage.execute(f"DELETE FROM {self.table} WHERE {where}", params)
        self.storage.execute(f"DELETE FROM search_filled WHERE {where} AND part = ?", [*params, self.table])

    # -- search ---------------------------------------------------------------------------------

    def search(self, user_id: str, vector: object, limit: int) -> list[tuple[str, float]]:
        """The user's ``limit`` documents most similar to ``vector``: ``[(id, cosine)]``, best first."""
        query = literal(np.asarray(vector))
        self._prepare()
        if user_id in self._pending:  # a search inside a deferred write sees its documents
            self.ensure(user_id)
            self._flush(user_id)
        rows = self._state_and_exact(user_id, query, limit)
        if not rows:  # the tier is not filled yet: fill it, then search (a user who has nothing: 2 reads)
            if self._fill(user_id) is None:
                return []
            rows = self._state_and_exact(user_id, query, limit)
        if not rows:
            return []
        if not rows[0][0]:
            found = [(row[1], row[2], row[3]) for row in rows if row[1] is not None]
            if found and found[0][2] > EXACT_UP_TO:  # too many to compare every one next time
                self._approximate(user_id)
            return [(row[0], float(row[1])) for row in found]
        with self.storage.lock:  # both statements on the main connection, which keeps the settings
            self.storage.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false), "
                                 "set_config('hnsw.ef_search', ?, false)", [str(max(40, 2 * int(limit)))])
            rows = self.storage.execute(
                f"SELECT id, 1 - (embedding <=> ?::vector) AS similarity FROM {self.table} "
                "WHERE approximate AND user_id = ? AND kind = ? ORDER BY embedding <=> ?::vector LIMIT ?",
                [query, user_id, self.kind, query, int(limit)]).fetchall()
        rows.sort(key=lambda row: -row[1])  # relaxed order: nearly sorted
        return [(row[0], float(row[1])) for row in rows]

    def _state_and_exact(self, user_id: str, query: str, limit: int) -> list:
        """One round trip: no row when the user's tier is not filled; else rows ``(approximate,
        id, similarity, count of the user's vectors)``, with an exact tier's ``limit`` nearest
        (every vector of the user compared: the ORDER BY cannot use the HNSW index), or a single
        row ``(True, None, None, None)`` for an approximate tier. The user and tier are given as
        values, not taken from ``f``: the planner then reads one range of the primary key (a
        correlated ``user_id = f.user_id`` was planned as a scan of the whole table: 41 ms for
        1,000 messages beside 100,000 facts, 3 ms now). The count is taken over (id, similarity)
        pairs, not whole rows: a window over the rows kept every vector in a temporary store (24 ms
        for 5,748 entities, 10 ms now; ``OFFSET 0`` keeps the planner from merging the two levels)."""
        return self.storage.execute(
            "SELECT f.approximate, v.id, v.similarity, v.total FROM search_filled f LEFT JOIN LATERAL ("
            "SELECT id, similarity, count(*) OVER () AS total FROM ("
            f"SELECT id, 1 - (embedding <=> ?::vector) AS similarity FROM {self.table} "
            "WHERE user_id = ? AND kind = ? AND NOT f.approximate OFFSET 0) AS scored "
            "ORDER BY similarity DESC, id LIMIT ?) v ON true WHERE f.user_id = ? AND f.kind = ? AND f.part = ?",
            [query, user_id, self.kind, int(limit), user_id, self.kind, self.table]).fetchall()

    def similarity(self, user_id: str, vector: object, ids: Iterable[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of these documents of the user (those indexed)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        self.ensure(user_id)
        if user_id in self._pending:
            self._flush(user_id)
        rows = self.storage.execute(
            f"SELECT id, 1 - (embedding <=> ?::vector) FROM {self.table} WHERE user_id = ? AND kind = ? "
            "AND id = ANY(?)", [literal(np.asarray(vector)), user_id, self.kind, wanted]).fetchall()
        return {row[0]: float(row[1]) for row in rows}

    # -- what a host keeps: nothing --------------------------------------------------------------

    def invalidate(self, user_id: str | None = None) -> None:
        """Nothing to forget (a failed write's pending documents went with it)."""
        if user_id is None:
            self._pending.clear()
        else:
            self._pending.pop(user_id, None)

    def rebuild(self, user_id: str) -> None:
        """Rebuild the user's vectors of this tier from the rows (vectors from the cache)."""
        with self.storage.atomic():
            self.reset(user_id)
        self.ensure(user_id)

    def rebuild_all(self, user_ids: Iterable[str]) -> None:
        """:meth:`rebuild` each of these users."""
        for user_id in user_ids:
            self.rebuild(user_id)

    def drop(self, user_id: str) -> None:
        """Delete the user's vectors of this tier (a forget of the whole user)."""
        self.reset(user_id)

    def save(self) -> None:
        """Nothing to save: the table is the index."""

    def forget_saved(self, user_id: str) -> None:
        """Nothing saved apart from the table (:meth:`drop` clears it)."""
