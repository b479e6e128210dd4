"""A tier's searchable documents: lexical partitions, plus dense ones when embeddings are on.

Every indexed tier (facts, messages, entities) keeps one :class:`DocumentIndex`.
Writes go to both kinds of partition together; a search asks each for
candidates, unions them, and keeps those whose stored rows pass the caller's SQL
filter (user, agent, time, metadata), widening the search until enough pass.

    >>> from tiers.storage.backend import Storage
    >>> docs = DocumentIndex(Storage(None), lambda user_id: [("d1", "peanut allergy")], kind="facts")
    >>> docs.lexical.search("default", "peanut")[0].key
    'd1'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from scoring.lexical import LexicalMatch
from tiers.indexes.partitions import Loader, PartitionedIndex
from tiers.indexes.sql_lexical import DatabaseLexical
from tiers.storage.backend import Storage
from tiers.storage.journal import IndexJournal

__all__ = ["DocumentIndex", "Candidate", "DensePartitions", "SearchMode"]

SearchMode = Literal["lexical", "embedding", "hybrid"]


class DensePartitions(Protocol):
    """What a tier needs of its dense partitions (see ``tiers.indexes.vectors.PartitionedVectors``)."""

    def add(self, user_id: str, items: Iterable[tuple[str, str]]) -> None: ...

    def remove(self, user_id: str, ids: Iterable[str]) -> None: ...

    def invalidate(self, user_id: str | None = None) -> None: ...

    def search(self, user_id: str, vector: Any, limit: int) -> list[tuple[str, float]]: ...

    def similarity(self, user_id: str, vector: Any, ids: Iterable[str]) -> dict[str, float]: ...


@dataclass(slots=True)  # not frozen: built for every candidate of every recall (5x faster)
class Candidate:
    """One document found for a query: its stored row, and how each index scored it
    (``None`` when that index did not return it). The row stays inside the tier: each
    tier turns it into a typed :class:`tiers.candidates.RecallCandidate` for recall."""

    id: str
    row: dict[str, Any]
    lexical: LexicalMatch | None
    dense: float | None


class DocumentIndex:
    """Lexical (always) and dense (once attached) partitions of one tier.

    ``parts``, when given, splits a document into texts that the dense index
    embeds one by one and sums (see :mod:`tiers.indexes.neighbors`)."""

    def __init__(self, storage: Storage, loader: Loader, *, kind: str, k1: float = 1.2, b: float = 0.75,
                 parts: Callable[[str], list[str]] | None = None) -> None:
        self.storage = storage
        self.loader = loader
        self.kind = kind
        self.parts = parts  # how the dense index splits a document into separately embedded texts
        self.journal = IndexJournal(storage, kind)
        #: Whether the tier's indexes are tables of the database (PostgreSQL with pgvector, written
        #: with the rows, nothing kept per user here) or kept in this process.
        self.in_database = storage.search == "database"
        self.lexical: PartitionedIndex | DatabaseLexical
        if self.in_database:
            self.lexical = DatabaseLexical(storage, loader, kind=kind, k1=k1, b=b)
        else:
            self.lexical = PartitionedIndex(storage, loader, kind=kind, k1=k1, b=b)
        self.dense: DensePartitions | None = None

    def attach_dense(self, dense: DensePartitions | None) -> None:
        """Start (or stop, with ``None``) keeping dense partitions for this tier."""
        self.dense = dense

    def add(self, user_id: str, items: Iterable[tuple[str, str]]) -> None:
        """Index new or changed documents in every kind of partition, and journal them
        for the other processes sharing the file (call inside the write)."""
        items = list(items)
        self.journal.put(user_id, items)
        self.lexical.add(user_id, items)
        if self.dense is not None and items:
            self.dense.add(user_id, items)

    def remove(self, user_id: str, keys: Iterable[str]) -> None:
        """Drop documents from every kind of partition (journalled like :meth:`add`)."""
        keys = list(keys)
        self.journal.delete(user_id, keys)
        self.lexical.remove(user_id, keys)
        if self.dense is not None and keys:
            self.dense.remove(user_id, keys)

    def invalidate(self, user_id: str | None = None) -> None:
        """Forget this process's in-memory state so it is rebuilt (or re-checked) from the store."""
        self.lexical.invalidate(user_id)
        if self.dense is not None:
            self.dense.invalidate(user_id)

    def save_snapshots(self) -> int:
        """Save this tier's large lexical partitions for the next process (see
        :mod:`tiers.indexes.snapshots`); returns how many were saved."""
        return self.lexical.save_snapshots()

    def reset(self, user_id: str | None) -> None:
        """:meth:`invalidate` here and in every process sharing the file, for changes
        too broad to journal one by one (call inside the write). ``None``: every user
        (what a whole-user deletion uses, so that no entry names the user afterwards)."""
        self.journal.reset(user_id)
        self.invalidate(user_id)
        if self.in_database:  # the tables refill from the rows on next use
            assert isinstance(self.lexical, DatabaseLexical)
            self.lexical.reset(user_id)
            reset = getattr(self.dense, "reset", None)
            if reset is not None:
                reset(user_id)

    def fill(self, user_id: str) -> None:
        """On the database search path, index the user's documents from the rows now, unless done
        (by any host): what a first search would do (``reindex``, an upgrade's backfill)."""
        if isinstance(self.lexical, DatabaseLexical):
            self.lexical.fill(user_id)
            ensure = getattr(self.dense, "ensure", None)
            if ensure is not None:
                ensure(user_id)

    def search(
        self,
        user_id: str,
        query: str,
        want: int,
        *,
        table: str,
        columns: str,
        filter_sql: str,
        filter_params: Sequence[Any],
        vector: Any = None,
        mode: SearchMode = "lexical",
    ) -> list[Candidate]:
        """Up to ``want`` candidates from each index in use whose rows pass ``filter_sql``.

        ``table`` must have a unique index ``<table>_id`` on its ``id`` column (forced,
        so the lookup never degrades to a scan of the user's rows).
        """
        use_lexical = mode in ("lexical", "hybrid")
        dense_index = self.dense if mode in ("embedding", "hybrid") and vector is not None else None
        size = want + max(4, want // 4)  # a little slack for rows the filter drops; more if short
        while True:
            lexical = self.lexical.search(user_id, query, size) if use_lexical else []
            dense = dense_index.search(user_id, vector, size) if dense_index is not None else []
            # The rows of the first ``want`` of each list, and of the slack only if the filter dropped some
            # (reading a row by id costs some 6 us: most searches need none of the slack).
            head = [m.key for m in lexical[:want]] + [i for i, _ in dense[:want]]
            rows = self._rows(head, table, columns, filter_sql, filter_params)
            if len(rows) < len(set(head)) and (len(lexical) > want or len(dense) > want):
                rows.update(self._rows([m.key for m in lexical[want:]] + [i for i, _ in dense[want:]], table,
                                       columns, filter_sql, filter_params))
            kept_lexical = [m for m in lexical if m.key in rows][:want]
            kept_dense = [(i, s) for i, s in dense if i in rows][:want]
            short = ((len(kept_lexical) < want and len(lexical) == size)
                     or (len(kept_dense) < want and len(dense) == size))
            if not short:
                break
            size *= 4
        dense_of = dict(kept_dense)
        if dense_index is not None and kept_lexical:  # lexical hits beyond the nearest neighbours: score them too
            missing = [m.key for m in kept_lexical if m.key not in dense_of]
            if missing:
                dense_of.update(dense_index.similarity(user_id, vector, missing))
        lexical_of = {m.key: m for m in kept_lexical}
        if use_lexical and kept_dense:  # nearest neighbours beyond the lexical top: their BM25 too
            unscored = {item_id for item_id, _ in kept_dense if item_id not in lexical_of}
            if unscored and len(lexical) == size:  # else every lexical match was already returned
                for match in self.lexical.search(user_id, query, len(unscored), keys=unscored):
                    lexical_of[match.key] = match
        by_id: dict[str, Candidate] = {}
        for match in kept_lexical:
            by_id[match.key] = Candidate(match.key, rows[match.key], match, dense_of.get(match.key))
        for item_id, similarity in kept_dense:
            if item_id not in by_id:
                by_id[item_id] = Candidate(item_id, rows[item_id], lexical_of.get(item_id), similarity)
        return list(by_id.values())

    def _rows(self, ids: list[str], table: str, columns: str, filter_sql: str,
              params: Sequence[Any]) -> dict[str, dict[str, Any]]:
        unique = list(dict.fromkeys(ids))
        if not unique:
            return {}
        marks = ",".join("?" * len(unique))
        found = self.storage.query(
            f"SELECT {columns} FROM {table} {self.storage.dialect.hint(f'{table}_id')} WHERE id IN ({marks}) AND {filter_sql}",
            [*unique, *params])
        return {row["id"]: row for row in found}

