"""BM25 computed by PostgreSQL over term tables written with the rows they index (the lexical
half of the database search path; docs/design/pg-search.md).

The twin of :class:`tiers.indexes.partitions.PartitionedIndex`, with the same interface for
:class:`tiers.indexes.documents.DocumentIndex`, and the same ranking as
:class:`scoring.lexical.LexicalIndex`: the same analyzer (:func:`scoring.text.analyze`, run
here at write and query time), the same BM25 (``k1``, ``b``, idf, the query's upper bound for
``relevance``) and the same tie order (the older document first). Only where it lives differs:

- a write changes the postings, document frequencies and totals of its documents in its own
  transaction (:meth:`add`, :meth:`remove`), so every host searches it the moment it commits;
- a user's tier is filled from its rows the first time it is written or searched (:meth:`fill`):
  once, in a transaction, for every host (``search_stats`` holds a row for a filled user's tier).
  A new user's first write fills the tier with what it writes, so every later write is indexed
  as it commits and no host's first search pays for a fill; only a tier written before this
  path existed (an upgrade) is filled later, by its first write or search, or by ``reindex``.
  The tier of a user who has nothing at all is not marked: no search leaves a row naming a user
  who has nothing (a forgotten user, say), and the search of such a user only reads (it takes
  no write lock);
- a host holds nothing per user: :meth:`invalidate` has nothing to forget.

The tables are in :mod:`tiers.storage.pg_search_schema`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import Any

from scoring.lexical import LexicalMatch
from scoring.text import analyze
from tiers.storage.backend import Storage

__all__ = ["DatabaseLexical", "Loader"]

Loader = Callable[[str], Iterable[tuple[str, str]]]

# A search is one statement: the tier's totals, the query terms' document frequencies, their idf
# (``ln`` is the C library's ``log``, as Python's ``math.log``: the same doubles the in-process index
# computes) and the scores. No row: the user's tier is not filled yet; a row without an id: filled, no
# match. Every row carries the document count and the held terms (in the index) with their frequencies,
# in query order, from which the caller computes the query's upper bound and reads the matched terms.
# One index range per query term (the primary key's prefix), whatever the planner's statistics say:
# OFFSET 0 keeps the lateral subquery from being flattened into a join that a table not analysed
# yet (rows just written) plans as a scan of every posting of the user. The matched terms come back
# as a bit mask of their positions among the first 62 held terms (a hash aggregate; array_agg(...
# ORDER BY) sorts).
_SEARCH = """
WITH s AS (SELECT docs, total_length FROM search_stats WHERE user_id = ? AND kind = ?),
held AS (
    SELECT t.term, t.df, array_position(?::text[], t.term) AS n FROM search_terms t
    WHERE t.user_id = ? AND t.kind = ? AND t.term = ANY(?) AND t.df > 0
),
w AS (
    SELECT array_agg(h.term ORDER BY h.n) AS terms, array_agg(h.idf ORDER BY h.n) AS idfs,
           array_agg(h.bit ORDER BY h.n) AS bits, max(h.average) AS average
    FROM (
        SELECT held.term, held.n, (1::bigint << (row_number() OVER (ORDER BY held.n) - 1)::int) AS bit,
               ln(1.0::float8 + ((s.docs - held.df)::float8 + 0.5::float8) / (held.df::float8 + 0.5::float8)) AS idf,
               s.total_length::float8 / NULLIF(s.docs, 0)::float8 AS average
        FROM held, s ORDER BY held.n LIMIT {mask_bits}
    ) AS h
),
m AS (
    SELECT p.id AS id,
           SUM(p.tf * (u.idf * ?) / (p.tf + ? * (p.length * ? / w.average + ?))) AS score,
           bit_or(u.bit) AS matched,
           MIN(p.seq) AS seq
    FROM w CROSS JOIN unnest(w.terms, w.idfs, w.bits) AS u(term, idf, bit)
    CROSS JOIN LATERAL (
        SELECT id, tf, length, seq FROM search_postings
        WHERE user_id = ? AND kind = ? AND term = u.term {only}
        OFFSET 0
    ) AS p
    GROUP BY p.id
    ORDER BY score DESC, seq ASC
    {limit}
)
SELECT s.docs, ARRAY(SELECT term FROM held ORDER BY n), ARRAY(SELECT df FROM held ORDER BY n),
       m.id, m.score, m.matched
FROM s LEFT JOIN m ON true
ORDER BY m.score DESC, m.seq ASC
"""
_MASK_BITS = 62  # query terms a bigint mask holds; a longer query is searched in parts of the mask


class DatabaseLexical:
    """One tier's (``kind``'s) BM25 index, per user, in the database's search tables.

    ``loader`` (the callable that reads a user's ``(id, text)`` documents from the tier's rows,
    which :meth:`fill` indexes) and ``kind`` are public: a test may count the fills by wrapping
    ``loader``."""

    def __init__(self, storage: Storage, loader: Loader, *, kind: str, k1: float = 1.2, b: float = 0.75) -> None:
        self._storage = storage
        self.loader = loader
        self.kind = kind
        self._k1 = float(k1)
        self._b = float(b)

    # -- filling ------------------------------------------------------------------------------

    def _filled(self, user_id: str) -> tuple[int, int] | None:
        """``(documents, total length)`` of a filled user's tier, else ``None``."""
        row = self._storage.execute("SELECT docs, total_length FROM search_stats WHERE user_id = ? AND kind = ?",
                                    [user_id, self.kind]).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def fill(self, user_id: str) -> tuple[int, int]:
        """Index the user's documents from the tier's rows unless done already (by any host):
        one transaction, which takes the database's write lock, so no write falls between the
        rows read and the tables written. Returns ``(documents, total length)``."""
        return self._fill(user_id)[0]

    def _fill(self, user_id: str) -> tuple[tuple[int, int], frozenset[str]]:
        """:meth:`fill`, and the ids of the documents this call indexed (none when it was filled)."""
        found = self._filled(user_id)
        if found is not None:
            return found, frozenset()
        if not self._storage.has_user(user_id):  # nothing to index: a read, without the write lock
            return (0, 0), frozenset()
        with self._storage.atomic():
            found = self._filled(user_id)  # another host may have filled it while we waited
            if found is not None:
                return found, frozenset()
            self._clear(user_id)
            docs = dict(self.loader(user_id))
            if not docs and not self._storage.has_user(user_id):  # no trace of a user who has nothing
                return (0, 0), frozenset()
            self._storage.execute("INSERT INTO search_stats (user_id, kind, docs, total_length) VALUES (?, ?, 0, 0)",
                                  [user_id, self.kind])
            self._write(user_id, docs, [])
            found = self._filled(user_id)
        assert found is not None
        return found, frozenset(docs)

    def _clear(self, user_id: str | None) -> None:
        where, params = ("kind = ?", [self.kind]) if user_id is None else ("user_id = ? AND kind = ?",
                                                                            [user_id, self.kind])
        for table in ("search_postings", "search_terms", "search_docs", "search_stats"):
            self._storage.execute(f"DELETE FROM {table} WHERE {where}", params)

    # -- writes (inside the caller's transaction) ----------------------------------------------

    def add(self, user_id: str, items: Iterable[tuple[str, str]]) -> None:
        """Index new or changed documents (a document given twice keeps its last text); a tier
        not filled yet is filled first, from its rows (which hold these documents, or will: they
        are written again here either way)."""
        docs = dict(items)
        if not docs:
            return
        if self._filled(user_id) is None:
            _totals, indexed = self._fill(user_id)
            if self._filled(user_id) is None:  # rows not written yet, of a user who had nothing
                self._storage.execute("INSERT INTO search_stats (user_id, kind, docs, total_length) "
                                      "VALUES (?, ?, 0, 0)", [user_id, self.kind])
            docs = {key: text for key, text in docs.items() if key not in indexed}  # the fill read them already
        if docs:
            self._write(user_id, docs, [])

    def remove(self, user_id: str, keys: Iterable[str]) -> None:
        """Drop documents, if the user's tier is filled."""
        gone = list(dict.fromkeys(keys))
        if gone and self._filled(user_id) is not None:
            self._write(user_id, {}, gone)

    def _write(self, user_id: str, docs: dict[str, str], gone: list[str]) -> None:
        """Replace ``docs`` (id -> text) and delete ``gone``: postings, document frequencies
        and the tier's totals change together, in at most four statements (writable CTEs)."""
        storage, kind = self._storage, self.kind
        replaced = [*docs, *gone]
        df: Counter[str] = Counter()
        docs_delta = length_delta = 0
        if replaced:  # the old postings and documents go, and say what they held
            count, length, old_terms = storage.execute(
                "WITH p AS (DELETE FROM search_postings WHERE user_id = ? AND kind = ? AND id = ANY(?) RETURNING term), "
                "d AS (DELETE FROM search_docs WHERE user_id = ? AND kind = ? AND id = ANY(?) RETURNING length) "
                "SELECT (SELECT count(*) FROM d), (SELECT coalesce(sum(length), 0) FROM d), ARRAY(SELECT term FROM p)",
                [user_id, kind, replaced, user_id, kind, replaced]).fetchone()
            df.subtract(Counter(old_terms))
            docs_delta, length_delta = -int(count), -int(length)
        if docs:
            ids = list(docs)
            counts = [Counter(analyze(text)) for text in docs.values()]
            lengths = [sum(c.values()) for c in counts]
            terms, post_ids, tfs = [], [], []
            for item_id, count_of in zip(ids, counts, strict=True):
                for term, tf in count_of.items():
                    terms.append(term)
                    post_ids.append(item_id)
                    tfs.append(tf)
                    df[term] += 1
            # The documents get their sequence numbers in the order given (the tie order of equal
            # scores); their postings carry the number and the length along.
            storage.execute(
                "WITH d AS (INSERT INTO search_docs (user_id, kind, id, length) SELECT ?, ?, d.id, d.length "
                "FROM unnest(?::text[], ?::int[]) WITH ORDINALITY AS d(id, length, n) ORDER BY d.n "
                "RETURNING id, length, seq) "
                "INSERT INTO search_postings (user_id, kind, term, id, tf, length, seq) "
                "SELECT ?, ?, p.term, p.id, p.tf, d.length, d.seq FROM unnest(?::text[], ?::text[], ?::int[]) "
                "AS p(term, id, tf) JOIN d ON d.id = p.id",
                [user_id, kind, ids, lengths, user_id, kind, terms, post_ids, tfs])
            if terms:
                storage.rows_added("search_postings", len(terms))  # the planner's statistics follow bulk writes
            docs_delta += len(ids)
            length_delta += sum(lengths)
        changed = sorted(term for term, delta in df.items() if delta)  # one order for every writer
        totals = "UPDATE search_stats SET docs = docs + ?, total_length = total_length + ? WHERE user_id = ? AND kind = ?"
        totals_params = [docs_delta, length_delta, user_id, kind]
        if changed:
            storage.execute(
                f"WITH s AS ({totals}) INSERT INTO search_terms (user_id, kind, term, df) SELECT ?, ?, t.term, t.df "
                "FROM unnest(?::text[], ?::int[]) AS t(term, df) "
                "ON CONFLICT (user_id, kind, term) DO UPDATE SET df = search_terms.df + excluded.df",
                [*totals_params, user_id, kind, changed, [df[t] for t in changed]])
            if any(df[t] < 0 for t in changed):
                storage.execute("DELETE FROM search_terms WHERE user_id = ? AND kind = ? AND term = ANY(?) AND df <= 0",
                                [user_id, kind, [t for t in changed if df[t] < 0]])
        elif docs_delta or length_delta:
            storage.execute(totals, totals_params)

    # -- search --------------------------------------------------------------------------------

    def search(self, user_id: str, query: str, limit: int | None = 50, *,
               keys_allowed: Callable[[str], bool] | None = None,
               keys: Collection[str] | None = None) -> list[LexicalMatch]:
        """The user's best ``limit`` documents for ``query`` (all matches when ``None``), best
        first, scored as :meth:`scoring.lexical.LexicalIndex.search` scores them; only those
        named in ``keys`` and passing ``keys_allowed``, when given."""
        terms = list(dict.fromkeys(analyze(query)))
        if not terms or (keys is not None and not keys):
            return []
        rows = self._search(user_id, terms, limit if keys_allowed is None else None, keys)
        if not rows:  # the user's tier is not filled yet
            docs, _total = self.fill(user_id)
            rows = self._search(user_id, terms, limit if keys_allowed is None else None, keys) if docs else []
        if not rows or not rows[0][0]:
            return []
        docs, held_terms, held_dfs = int(rows[0][0]), rows[0][1], rows[0][2]
        k1 = self._k1
        df = dict(zip(held_terms, held_dfs, strict=True))
        absent = math.log(1.0 + (docs + 0.5) / 0.5) * (k1 + 1.0)
        bound = 0.0
        for term in terms:
            count = int(df.get(term, 0))
            if count <= 0:
                bound += absent
            else:
                bound += math.log(1.0 + (docs - count + 0.5) / (count + 0.5)) * (k1 + 1.0)
        held = list(held_terms[:_MASK_BITS])  # (a query of more distinct terms: its first 62 held)
        found = []
        for *_head, item_id, score, mask in rows:
            if item_id is None:  # filled, nothing matched
                break
            if keys_allowed is not None and not keys_allowed(item_id):
                continue
            matched = tuple(term for i, term in enumerate(held) if mask >> i & 1)  # in query order
            found.append(LexicalMatch(item_id, float(score), min(float(score) / bound, 1.0), matched))
            if limit is not None and len(found) >= limit:
                break
        return found

    def _search(self, user_id: str, terms: list[str], limit: int | None,
                keys: Collection[str] | None) -> list[tuple[Any, ...]]:
        """The rows of :data:`_SEARCH` (none: the user's tier is not filled)."""
        k1, b = self._k1, self._b
        params: list[Any] = [user_id, self.kind, terms, user_id, self.kind, terms, k1 + 1.0, k1, b, 1.0 - b,
                             user_id, self.kind]
        only = ""
        if keys is not None:
            only = "AND id = ANY(?)"
            params.append([k for k in keys if isinstance(k, str)])
        sql_limit = ""
        if limit is not None:
            sql_limit = "LIMIT ?"
            params.append(int(limit))
        statement = _SEARCH.format(only=only, limit=sql_limit, mask_bits=_MASK_BITS)
        return list(self._storage.execute(statement, params).fetchall())

    # -- what a host keeps: nothing ---------------------------------------------------------------

    def invalidate(self, user_id: str | None = None) -> None:
        """Nothing to forget: this index lives in the database."""

    def save_snapshots(self) -> int:
        """Nothing to save: the tables are the index. Returns 0."""
        return 0

    def reset(self, user_id: str | None) -> None:
        """Drop the user's (``None``: every user's) search rows of this tier, inside the caller's
        write: the next search fills them again from the rows."""
        self._clear(user_id)
