"""The keyed-items layer of :class:`~unified_memory.UnifiedMemory`: JSON objects stored under a
namespace (a tuple of labels) and a key, for this memory's user, in the memory's file
(:mod:`tiers.items.keyed_items`) — what LangGraph's store keeps
(:mod:`unified_memory.integrations.langgraph`). A search ranks them with the memory's recall
scoring (BM25, dense similarity when the memory has an embedder, recency).

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory(user_id="ada") as mem:
    ...     mem.put_item(("notes",), "n1", {"text": "I keep bees"})
    ...     mem.put_item(("notes", "work"), "n2", {"text": "Standup at nine"})
    ...     [item.key for item in mem.search_items(("notes",), query="bees")]
    ['n1', 'n2']
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tiers.items.checks import check_filter, check_index, check_key, check_namespace, check_ttl, check_value
from tiers.items.keyed_items import ItemRow, Similarity
from tiers.items.vectors import check_distance_type, check_query_vector, check_vectors, cosines
from unified_memory.coordinator.write_api import WritingAPI
from unified_memory.types import StoredItem
from unified_memory.validation import check_bool, check_limit, check_no_nul, check_optional_text

__all__ = ["ItemsAPI"]


def _stored(row: ItemRow) -> StoredItem:
    return StoredItem(namespace=row.namespace, key=row.key, value=row.value,
                      created_at=datetime.fromtimestamp(row.created_at, tz=UTC),
                      updated_at=datetime.fromtimestamp(row.updated_at, tz=UTC), score=row.score,
                      ranking=row.ranking)


class ItemsAPI(WritingAPI):
    """Keyed items of this memory's user (``scoped(user_id=...)`` for another user's)."""

    def _similarity(self) -> Similarity | None:
        """Cosine similarity of a query to texts with the memory's embedder (``None``: lexical memory)."""
        dense, user = self._view.backend.dense, self._view.user_id
        if dense is None:
            return None
        cache = dense.cache

        def similarity(query: str, texts: list[str]) -> list[float]:
            return cosines(cache.vectors(user, texts), cache.query_vector(query)).tolist()  # type: ignore[no-any-return]

        return similarity

    def put_item(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
                 index: list[str] | bool | None = None, ttl: float | None = None,
                 vectors: Sequence[Sequence[float]] | None = None) -> None:
        """Store ``value`` (a JSON object) under ``namespace`` / ``key``, replacing what was there.

        ``namespace``: a tuple of labels (non-empty, without ``.`` or NUL); ``value``: no NUL in any of
        its keys or strings (as in metadata). ``index``: which fields a
        query searches (``None``: every string; a list of paths like ``"title"`` or
        ``"chapters[*].text"``, ``"tags[-1]"``, ``"$"``; ``False``: none). ``ttl``: minutes until the
        item expires, restarted when a read refreshes it (``None``: never). ``vectors``: what your
        embedder made of the indexed texts, one vector each, kept with the item for
        ``search_items(query_vector=...)`` (how LangGraph's ``index=`` config is served). Use
        :meth:`delete_item` to delete.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     mem.put_item(("prefs",), "food", {"likes": ["tea"]}, ttl=60)
        ...     mem.get_item(("prefs",), "food").value
        {'likes': ['tea']}
        """
        backend = self._view.backend
        labels = check_namespace("namespace", namespace)
        checked_key = check_key("key", key)
        data, _ = check_value("value", value)
        check_no_nul("value", data)  # as in metadata: nowhere in the value, keys included
        fields = check_index("index", index)
        minutes = check_ttl("ttl", ttl)
        checked_vectors = check_vectors("vectors", vectors)
        backend.items.put(self._view.user_id, labels, checked_key, data, index=fields, ttl=minutes,
                          vectors=checked_vectors, now=backend.clock())

    def get_item(self, namespace: Sequence[str], key: str, *, refresh_ttl: bool = True) -> StoredItem | None:
        """The item at ``namespace`` / ``key`` (``None`` when there is none or it expired);
        ``refresh_ttl`` restarts its TTL.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     mem.get_item(("prefs",), "food") is None
        True
        """
        backend = self._view.backend
        labels = check_namespace("namespace", namespace)
        checked_key = check_key("key", key)
        refresh = check_bool("refresh_ttl", refresh_ttl)
        row = backend.items.get(self._view.user_id, labels, checked_key, now=backend.clock(), refresh_ttl=refresh)
        return None if row is None else _stored(row)

    def delete_item(self, namespace: Sequence[str], key: str) -> bool:
        """Delete the item at ``namespace`` / ``key``; whether there was one.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     mem.put_item(("prefs",), "food", {"likes": "tea"})
        ...     mem.delete_item(("prefs",), "food"), mem.delete_item(("prefs",), "food")
        (True, False)
        """
        backend = self._view.backend
        labels = check_namespace("namespace", namespace)
        checked_key = check_key("key", key)
        return backend.items.delete(self._view.user_id, labels, checked_key, now=backend.clock())

    def search_items(self, namespace_prefix: Sequence[str], *, query: str | None = None,
                     filter: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0,
                     refresh_ttl: bool = True, query_vector: Sequence[float] | None = None,
                     distance_type: str = "cosine") -> list[StoredItem]:
        """The items under ``namespace_prefix`` (``()``: all of this user's) whose value passes
        ``filter`` (``{"field": value}`` equality, nested dicts and lists compared whole, or
        operators ``{"field": {"$gt": 3}}``: ``$eq $ne $gt $gte $lt $lte``). With a ``query`` they
        are ranked by the memory's recall scoring: BM25 over the indexed text, blended with dense
        similarity — of ``query_vector`` (the query embedded by your embedder) to the vectors
        stored with the items, or else of the query to the text by the memory's embedder — and
        recency. Each item's ``score`` is then its cosine similarity (else its BM25 relevance; see
        :class:`~unified_memory.StoredItem`; ``distance_type="inner_product"`` or ``"l2"`` scores
        vectors by the dot product or minus the Euclidean distance instead, as pgvector and
        LangGraph's PostgresStore do). Without a query: most recently updated first.
        ``offset`` / ``limit`` apply after ranking; ``refresh_ttl`` restarts the TTL of the items
        returned.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     mem.put_item(("todo",), "a", {"task": "buy honey", "done": False})
        ...     mem.put_item(("todo",), "b", {"task": "call Maria", "done": True})
        ...     [i.key for i in mem.search_items(("todo",), filter={"done": False})]
        ['a']
        """
        backend = self._view.backend
        prefix = check_namespace("namespace_prefix", namespace_prefix, empty=True)
        text = check_optional_text("query", query)
        wanted = check_filter("filter", filter)
        size = check_limit("limit", limit)
        start = check_limit("offset", offset, minimum=0)
        refresh = check_bool("refresh_ttl", refresh_ttl)
        vector = check_query_vector("query_vector", query_vector)
        metric = check_distance_type("distance_type", distance_type)
        ranked = bool(text and text.strip())
        rows = backend.items.search(self._view.user_id, prefix, query=text, filter=wanted, limit=size, offset=start,
                                    now=backend.clock(), refresh_ttl=refresh, query_vector=vector if ranked else None,
                                    distance_type=metric,
                                    similarity=self._similarity() if ranked and vector is None else None)
        return [_stored(row) for row in rows]

    def item_namespaces(self, *, prefix: Sequence[str] | None = None, suffix: Sequence[str] | None = None,
                        max_depth: int | None = None, limit: int = 100, offset: int = 0) -> list[tuple[str, ...]]:
        """The namespaces holding this user's items, sorted: those starting with ``prefix`` and
        ending with ``suffix`` (a ``"*"`` label matches any label), cut to ``max_depth`` labels.

        >>> from unified_memory import UnifiedMemory
        >>> with UnifiedMemory() as mem:
        ...     mem.put_item(("notes", "home"), "a", {"text": "hi"})
        ...     mem.put_item(("notes", "work", "2024"), "b", {"text": "hi"})
        ...     mem.item_namespaces(prefix=("notes",), max_depth=2)
        [('notes', 'home'), ('notes', 'work')]
        """
        backend = self._view.backend
        starts = None if prefix is None else check_namespace("prefix", prefix, empty=True)
        ends = None if suffix is None else check_namespace("suffix", suffix, empty=True)
        depth = None if max_depth is None else check_limit("max_depth", max_depth)
        return backend.items.namespaces(self._view.user_id, prefix=starts, suffix=ends, max_depth=depth,
                                        limit=check_limit("limit", limit), offset=check_limit("offset", offset, minimum=0),
                                        now=backend.clock())
