"""Keyed items: JSON objects a caller stores under a namespace (a tuple of labels) and a key, per
user, in the memory's SQLite file (the ``keyed_items`` table) — what LangGraph's ``BaseStore``
keeps. Export, import and ``forget(user_id=...)`` cover them like every user-scoped table.

An item may expire: ``ttl`` minutes after it was last written (or read, when the read refreshes
it). An expired item is never returned nor listed, and expired rows are deleted by the next write.

Search keeps the items under a namespace prefix that pass a filter. With a query they are ranked
by BM25 relevance over their indexed text (:class:`scoring.lexical.LexicalIndex`), blended with
dense similarity, times recency (:func:`scoring.fusion.fuse`). The dense part is the cosine
similarity of ``query_vector`` to the item's closest stored vector (:mod:`tiers.items.vectors`:
the caller's embedder, one vector per indexed field; blended as it is, above 0), or else of the
query to the item's text by a ``similarity`` function (the memory's own embedder, whose
similarities are mapped through the ranking's calibrated floor and ceiling). Items the query
does not reach come after, closest first, then most recently updated.

An item's ``score`` (with a query) is that cosine similarity when there is one (LangGraph's
stores score so; with ``distance_type``, the dot product or minus the Euclidean distance of the
closest vector instead), else its BM25 relevance in [0, 1]; ``None`` for an item with nothing indexed
(``index=False``). ``ranking`` holds the parts of the order: ``fused``, ``lexical``,
``dense`` (the cosine, or ``None``) and ``recency``.

    >>> from tiers.storage.backend import Storage
    >>> items = KeyedItems(Storage(None))
    >>> items.put("ada", ("notes",), "n1", {"text": "I keep bees"}, now=0.0)
    >>> items.put("ada", ("notes",), "n2", {"text": "I like jazz"}, now=1.0)
    >>> items.get("ada", ("notes",), "n1", now=2.0).value
    {'text': 'I keep bees'}
    >>> [(row.key, row.score > 0) for row in items.search("ada", ("notes",), query="bees", now=2.0)]
    [('n1', True), ('n2', False)]
    >>> items.get("bob", ("notes",), "n1", now=2.0) is None     # another user sees nothing
    True
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scoring.decay import recency
from scoring.errors import StorageError
from scoring.fusion import dense_relevance, fuse, hybrid_relevance
from scoring.lexical import LexicalIndex
from tiers.items.checks import (
    check_filter,
    check_index,
    check_key,
    check_namespace,
    check_ttl,
    check_value,
    joined,
    matches,
    namespace_matches,
    searchable_text,
    split,
)
from tiers.items.vectors import (
    best_cosine,
    best_score,
    check_distance_type,
    check_query_vector,
    check_vectors,
    decode_vectors,
    encode_vectors,
)
from tiers.storage.backend import Storage

__all__ = ["KeyedItems", "ItemRow", "Ranking"]

#: Similarity of a query to texts (cosine, in [-1, 1]), one per text: the dense half of ranking.
Similarity = Callable[[str, list[str]], Sequence[float]]
_COLUMNS = "seq, namespace, key, value_json, text, created_at, updated_at, expires_at, ttl_minutes, vectors"
_LIVE = "(expires_at IS NULL OR expires_at > ?)"


@dataclass(frozen=True, slots=True)
class ItemRow:
    """One stored item: its namespace, key, value, times (POSIX seconds) and, from a search with
    a query, its score and the parts of its rank (see the module docstring)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: float
    updated_at: float
    score: float | None = None
    ranking: dict[str, float | None] | None = None


@dataclass(frozen=True, slots=True)
class Ranking:
    """How a query ranks items: BM25 parameters, the fusion weights and the recency half-life
    (the memory's :class:`~unified_memory.config.RankingConfig`), and the dense blend."""

    k1: float = 1.2
    b: float = 0.75
    base: float = 0.6
    recency_weight: float = 0.15
    half_life_days: float = 30.0
    lexical_weight: float = 0.5
    dense_floor: float = 0.1
    dense_ceiling: float = 0.7


def _prefix_where(prefix: tuple[str, ...]) -> tuple[str, list[Any]]:
    """SQL keeping the namespaces equal to ``prefix`` or under it, without LIKE: a label holds no
    '.', so the namespaces under ``p`` are exactly the strings between ``p.`` and ``p/`` ('/' follows
    '.'), a range the ``(user_id, namespace, key)`` index serves."""
    if not prefix:
        return "", []
    stored = joined(prefix)
    return " AND (namespace = ? OR (namespace > ? AND namespace < ?))", [stored, stored + ".", stored + "/"]


class KeyedItems:
    """The keyed items of every user of one file (see the module docstring). Times are given by
    the caller (``now``, POSIX seconds); arguments are checked here too (errors name the field)."""

    def __init__(self, storage: Storage, ranking: Ranking | None = None) -> None:
        self.storage = storage
        self.ranking = ranking or Ranking()

    # -- writing ----------------------------------------------------------------------------------

    def sweep(self, now: float) -> int:
        """Delete every expired item (of any user); returns how many. Call inside ``storage.atomic()``."""
        return int(self.storage.execute("DELETE FROM keyed_items WHERE expires_at IS NOT NULL AND expires_at <= ?",
                                        [now]).rowcount)

    def put(self, user_id: str, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
            index: list[str] | bool | None = None, ttl: float | None = None, vectors: Any = None,
            now: float) -> None:
        """Store ``value`` under ``namespace`` / ``key`` (replacing what was there: ``created_at`` is
        kept); ``index``: which fields are searched (see :func:`~tiers.items.checks.searchable_text`);
        ``ttl``: minutes until it expires (``None``: never); ``vectors``: what the caller's embedder
        made of the indexed fields (:func:`~tiers.items.vectors.check_vectors`; none with ``index=False``)."""
        labels = check_namespace("namespace", namespace)
        key = check_key("key", key)
        data, text = check_value("value", value)
        fields = check_index("index", index)
        searched = searchable_text(data, fields)
        stored_vectors = encode_vectors(check_vectors("vectors", vectors)) if fields is not False else None
        minutes = check_ttl("ttl", ttl)
        expires = None if minutes is None else now + 60.0 * minutes
        with self.storage.atomic():
            self.sweep(now)
            self.storage.execute(
                "INSERT INTO keyed_items (user_id, namespace, key, value_json, text, created_at, updated_at, "
                "expires_at, ttl_minutes, vectors) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (user_id, namespace, key) DO UPDATE SET value_json = excluded.value_json, "
                "text = excluded.text, updated_at = excluded.updated_at, expires_at = excluded.expires_at, "
                "ttl_minutes = excluded.ttl_minutes, vectors = excluded.vectors",
                [user_id, joined(labels), key, text, searched, now, now, expires, minutes, stored_vectors])

    def delete(self, user_id: str, namespace: Sequence[str], key: str, *, now: float) -> bool:
        """Delete one item; whether a live one was there."""
        labels = check_namespace("namespace", namespace)
        key = check_key("key", key)
        with self.storage.atomic():
            self.sweep(now)
            return bool(self.storage.execute(
                "DELETE FROM keyed_items WHERE user_id = ? AND namespace = ? AND key = ?",
                [user_id, joined(labels), key]).rowcount)

    def _refresh(self, rows: list[dict[str, Any]], now: float) -> None:
        """Start the TTL of these rows again from ``now`` (those that have one)."""
        timed = [(now + 60.0 * row["ttl_minutes"], row["seq"]) for row in rows if row["ttl_minutes"] is not None]
        if timed:
            with self.storage.atomic():
                self.storage.executemany("UPDATE keyed_items SET expires_at = ? WHERE seq = ?", timed)

    # -- reading ----------------------------------------------------------------------------------

    @staticmethod
    def _row(row: Mapping[str, Any], score: float | None = None) -> ItemRow:
        try:
            value = json.loads(row["value_json"])
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise StorageError(f"keyed_items: the value of {row['key']!r:.80} is not a JSON object "
                               "(the file is damaged)")
        return ItemRow(split(row["namespace"]), row["key"], value, row["created_at"], row["updated_at"], score)

    def get(self, user_id: str, namespace: Sequence[str], key: str, *, now: float,
            refresh_ttl: bool = True) -> ItemRow | None:
        """The live item at ``namespace`` / ``key`` (``None``: none); ``refresh_ttl`` restarts its TTL."""
        labels = check_namespace("namespace", namespace)
        key = check_key("key", key)
        rows = self.storage.query(f"SELECT {_COLUMNS} FROM keyed_items WHERE user_id = ? AND namespace = ? "
                                  f"AND key = ? AND {_LIVE}", [user_id, joined(labels), key, now])
        if not rows:
            return None
        if refresh_ttl:
            self._refresh(rows, now)
        return self._row(rows[0])

    def search(self, user_id: str, namespace_prefix: Sequence[str], *, query: str | None = None,
               filter: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0, now: float,
               refresh_ttl: bool = True, similarity: Similarity | None = None,
               query_vector: Any = None, distance_type: str = "cosine") -> list[ItemRow]:
        """The live items under ``namespace_prefix`` (``()``: all) whose value passes ``filter``
        (:func:`~tiers.items.checks.matches`): ranked by ``query`` when given (see the module
        docstring; ``query_vector``: the query as the caller's embedder sees it, compared with the
        items' stored vectors; ``distance_type``: how their score says how close they are), else most
        recently updated first; ``offset`` / ``limit`` apply after ranking. ``refresh_ttl`` restarts
        the TTL of the items returned."""
        prefix = check_namespace("namespace_prefix", namespace_prefix, empty=True)
        wanted = check_filter("filter", filter)
        vector = check_query_vector("query_vector", query_vector)
        metric = check_distance_type("distance_type", distance_type)
        where, params = _prefix_where(prefix)
        rows = self.storage.query(
            f"SELECT {_COLUMNS} FROM keyed_items WHERE user_id = ?{where} AND {_LIVE} "
            "ORDER BY updated_at DESC, seq DESC", [user_id, *params, now])
        candidates = [(row, item) for row in rows if matches((item := self._row(row)).value, wanted)]
        if query is not None and query.strip():
            ranked = self._rank(query, candidates, now, similarity, vector, metric)
        else:
            ranked = [item for _, item in candidates]
        page = ranked[offset:offset + limit]
        if refresh_ttl and page:
            by_key = {(item.namespace, item.key): row for row, item in candidates}
            self._refresh([by_key[(item.namespace, item.key)] for item in page], now)
        return page

    def _dense(self, query: str, candidates: list[tuple[dict[str, Any], ItemRow]], similarity: Similarity | None,
               vector: Any, metric: str) -> tuple[list[float | None], list[float | None]]:
        """Each candidate's cosine similarity to the query (``None``: nothing to compare) and its
        score by ``metric``: its closest stored vector to ``vector`` when one is given (each item's
        vectors decoded once), else its text by ``similarity`` (the score is the cosine)."""
        if vector is not None:
            stored = [decode_vectors(row["vectors"]) for row, _ in candidates]
            near = [best_cosine(matrix, vector) for matrix in stored]
            return near, near if metric == "cosine" else [best_score(matrix, vector, metric) for matrix in stored]
        dense: list[float | None] = [None] * len(candidates)
        texted = [i for i, (row, _) in enumerate(candidates) if row["text"]]
        if similarity is not None and texted:
            sims = similarity(query, [candidates[i][0]["text"] for i in texted])
            for i, sim in zip(texted, sims, strict=True):
                dense[i] = float(sim)
        return dense, dense

    def _rank(self, query: str, candidates: list[tuple[dict[str, Any], ItemRow]], now: float,
              similarity: Similarity | None, vector: Any = None, metric: str = "cosine") -> list[ItemRow]:
        """The candidates ranked (see the module docstring): by fused score, then by cosine
        similarity, then in the candidates' order (most recently updated first)."""
        ranking = self.ranking
        base, weight = ((ranking.base, ranking.recency_weight) if ranking.base + ranking.recency_weight > 0
                        else (1.0, 0.0))
        index = LexicalIndex(k1=ranking.k1, b=ranking.b)
        index.add_many((str(i), row["text"]) for i, (row, _) in enumerate(candidates) if row["text"])
        lexical = [0.0] * len(candidates)
        for match in index.search(query, limit=None):
            lexical[int(match.key)] = match.relevance
        dense, closeness = self._dense(query, candidates, similarity, vector, metric)
        ranked: list[tuple[float, float, int, ItemRow]] = []
        for i, (row, item) in enumerate(candidates):
            relevance, cosine = lexical[i], dense[i]
            if cosine is not None:  # the memory's model is calibrated (floor, ceiling); a caller's is not
                near = (max(0.0, cosine) if vector is not None else
                        dense_relevance(cosine, floor=ranking.dense_floor, ceiling=ranking.dense_ceiling))
                relevance = hybrid_relevance(relevance, near, lexical_weight=ranking.lexical_weight)
            fresh = recency(age_seconds=now - item.updated_at, half_life_days=ranking.half_life_days)
            fused = fuse(relevance=relevance, importance=0.0, recency=fresh, tier_weight=1.0, base=base,
                         importance_weight=0.0, recency_weight=weight).score if relevance > 0.0 else 0.0
            score = closeness[i] if cosine is not None else (lexical[i] if row["text"] else None)
            parts: dict[str, float | None] = {"fused": fused, "lexical": lexical[i], "dense": cosine,
                                              "recency": fresh}
            ranked.append((fused, -2.0 if cosine is None else cosine, i,
                           ItemRow(item.namespace, item.key, item.value, item.created_at, item.updated_at, score,
                                   parts)))
        ranked.sort(key=lambda entry: (-entry[0], -entry[1], entry[2]))
        return [item for _, _, _, item in ranked]

    def namespaces(self, user_id: str, *, prefix: Sequence[str] | None = None, suffix: Sequence[str] | None = None,
                   max_depth: int | None = None, limit: int = 100, offset: int = 0, now: float
                   ) -> list[tuple[str, ...]]:
        """The namespaces holding live items, sorted: those starting with ``prefix`` and ending with
        ``suffix`` (a ``*`` label matches any label), cut to ``max_depth`` labels (duplicates merged),
        then ``offset`` / ``limit``."""
        starts = check_namespace("prefix", prefix, empty=True) if prefix is not None else ()
        ends = check_namespace("suffix", suffix, empty=True) if suffix is not None else ()
        fixed = tuple(label for label in starts[:next((i for i, x in enumerate(starts) if x == "*"), len(starts))])
        where, params = _prefix_where(fixed)
        found = {split(row[0]) for row in self.storage.execute(
            f"SELECT DISTINCT namespace FROM keyed_items WHERE user_id = ?{where} AND {_LIVE}", [user_id, *params, now])}
        kept = [ns for ns in found if namespace_matches(ns, starts) and namespace_matches(ns, ends, suffix=True)]
        if max_depth is not None:
            kept = list({ns[:max_depth] for ns in kept})
        return sorted(kept)[offset:offset + limit]

    def users(self, now: float) -> list[str]:
        """The users with live items, sorted."""
        return [row[0] for row in self.storage.execute(
            f"SELECT DISTINCT user_id FROM keyed_items WHERE {_LIVE} ORDER BY user_id", [now])]
