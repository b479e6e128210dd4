"""The memory as a LangGraph store (``pip install "unified-memory[langgraph]"``).

LangGraph's long-term memory is a ``BaseStore``: JSON documents under a namespace (a tuple of
labels) and a key, read with ``get``, ``search`` (a namespace prefix, a filter, a query) and
``list_namespaces``. :class:`MemoryStore` keeps them in a :class:`~unified_memory.UnifiedMemory`
(or a :class:`~unified_memory.RemoteMemory`) as its keyed items
(:meth:`~unified_memory.UnifiedMemory.put_item`): in the memory's database, per user, so
``forget(user_id=...)``, export and import cover them, and ``search(query=...)`` ranks them with
the memory's recall scoring (BM25, dense similarity, recency).

Semantic search is configured as in LangGraph's own stores, with ``index=``: ``{"dims": 384,
"embed": embeddings, "fields": ["text", "summary"]}`` (``embed``: a LangChain ``Embeddings``, a
function from texts to vectors, sync or async, or an embedder of ours; ``fields``: JSON paths,
``"$"`` for the whole value, ``[*]`` and ``[-1]`` in lists; default ``["$"]``). Each indexed text
of an item is embedded separately when it is put (``put(..., index=False)`` skips the item,
``index=[...]`` names its fields) and the vectors are kept with the item. A search's ``score``
is then the cosine similarity of the query to the item's closest field, a float for every item
with something indexed, as LangGraph's stores return; the order is the memory's fused ranking
(BM25 + that similarity + recency), whose parts are on the memory's own
:meth:`~unified_memory.UnifiedMemory.search_items` results (``StoredItem.ranking``). Without
``index=``, a memory with an embedder of its own compares the query with each item's text, and
a lexical memory scores by BM25 relevance in [0, 1].

How namespaces map onto the memory's scopes:

- by default (``user_label=None``) every namespace is a path inside the memory's user (its
  ``user_id``; scope the memory with ``memory.scoped(user_id=...)`` for another user): a
  namespace never sees another's items, nor another user's;
- with ``user_label=k``, label ``k`` of each namespace names the user the item belongs to (the
  common ``("memories", user_id)`` layout is ``user_label=1``): each operation runs on
  ``memory.scoped(user_id=namespace[k])``. A search or a listing whose prefix does not reach
  label ``k`` covers the users the memory can see (``memory.users()`` for a local memory; the
  API key's user for a remote one).

Agent and session scopes do not partition items (items are per user).

TTL (``supports_ttl``): ``ttl`` minutes after an item was last written or read (reads refresh it
unless ``refresh_ttl=False`` or ``ttl_config={"refresh_on_read": False}``); expired items are
never returned or listed, and are deleted by the next write. ``ttl_config["default_ttl"]`` is
the TTL of a ``put`` that names none.

Within one ``batch``, reads see the store as it was before the batch; puts (and deletes, a put of
``None``) are applied after them in order, the last one for a key winning — as LangGraph's
``InMemoryStore`` does.

.. code-block:: python

    from langgraph.graph import StateGraph
    from unified_memory import UnifiedMemory
    from unified_memory.integrations.langgraph import MemoryStore

    store = MemoryStore(UnifiedMemory("memory.db"), user_label=1)
    graph = builder.compile(store=store)     # nodes: store.put(("memories", user_id), key, {...})
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from tiers.items.checks import ROOT_PATH, check_index
from tiers.items.vectors import check_distance_type
from unified_memory.errors import DependencyError, MemoryValueError, invalid, wrong_type
from unified_memory.integrations._checks import check_memory

INSTALL_HINT = 'pip install "unified-memory[langgraph]"'

try:
    from langchain_core.embeddings import Embeddings
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        validate_op_namespace,
    )
    from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path
except ImportError as exc:  # tests/integrations/test_without_frameworks.py
    raise DependencyError(f"unified_memory.integrations.langgraph needs langgraph: {INSTALL_HINT}") from exc

__all__ = ["MemoryStore", "INSTALL_HINT"]

#: The memory methods the store calls (a UnifiedMemory and a RemoteMemory both have them).
_NEEDED = ("put_item", "get_item", "delete_item", "search_items", "item_namespaces", "aput_item", "aget_item",
           "adelete_item", "asearch_items", "aitem_namespaces", "scoped")
_TTL_KEYS = frozenset({"refresh_on_read", "omit_expired", "default_ttl", "sweep_interval_minutes"})
#: LangGraph's IndexConfig keys; ``ann_index_config`` (PostgresStore's ANN index) is accepted and
#: not needed (the memory compares every candidate); ``distance_type``: how scores are given.
#: ``text_fields`` is SqliteStore's name for ``fields``.
_INDEX_KEYS = frozenset({"dims", "embed", "fields", "text_fields", "ann_index_config", "distance_type"})


def _item(found: Any) -> Item:
    return Item(value=found.value, key=found.key, namespace=tuple(found.namespace), created_at=found.created_at,
                updated_at=found.updated_at)


def _search_item(found: Any) -> SearchItem:
    return SearchItem(tuple(found.namespace), found.key, found.value, found.created_at, found.updated_at, found.score)


def _ranked(found: list[Any]) -> list[Any]:
    """Items of several users in one order: by the memory's fused rank, then score, then newest first."""
    def order(item: Any) -> tuple[float, float, float]:
        fused = (item.ranking or {}).get("fused") or 0.0
        return (-fused, -item.score if item.score is not None else math.inf, -item.updated_at.timestamp())

    return sorted(found, key=order)


class _Embedder:
    """LangChain's ``Embeddings`` methods over an embedder of ours (``embed(texts) -> (n, dim)``) or
    over an object that has only the sync ones (``embed_documents``, ``embed_query``)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if callable(getattr(self.embedder, "embed_documents", None)):
            return [list(map(float, row)) for row in self.embedder.embed_documents(list(texts))]
        return [list(map(float, row)) for row in self.embedder.embed(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        if callable(getattr(self.embedder, "embed_query", None)):
            return list(map(float, self.embedder.embed_query(text)))
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await asyncio.to_thread(self.embed_query, text)


def _index_config(index: Any) -> tuple[dict[str, Any], Any, list[tuple[str, Any]]]:
    """The checked ``index=`` config, its embeddings (LangChain's interface) and its fields
    (each path with LangGraph's tokens of it)."""
    if not isinstance(index, Mapping):
        raise wrong_type("index", "an IndexConfig dict ({'dims', 'embed', 'fields'}) or None", index)
    unknown = set(index) - _INDEX_KEYS
    if unknown:
        raise invalid("index", f"unknown keys {sorted(map(str, unknown))} (IndexConfig has dims, embed, fields)")
    embed = index.get("embed")
    if embed is None:
        raise invalid("index.embed", "is required: a LangChain Embeddings, a function from texts to vectors, "
                                     "or an embedder")
    is_ours = callable(getattr(embed, "embed", None)) and not callable(getattr(embed, "embed_documents", None))
    duck = (callable(getattr(embed, "embed_documents", None)) and callable(getattr(embed, "embed_query", None))
            and not isinstance(embed, Embeddings))
    dims = index.get("dims", getattr(embed, "dim", None) if is_ours else None)
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise wrong_type("index.dims", "a positive int (the length of the embeddings' vectors)", dims)
    check_distance_type("index.distance_type", index.get("distance_type", "cosine"))
    try:
        embeddings = _Embedder(embed) if is_ours or duck else ensure_embeddings(embed)
    except (ValueError, TypeError) as exc:
        raise MemoryValueError(f"index.embed: {exc}", field="index.embed") from None
    named = "text_fields" if index.get("fields") is None and index.get("text_fields") is not None else "fields"
    paths = index.get(named) or [ROOT_PATH]
    fields = _fields(f"index.{named}", [paths] if isinstance(paths, str) else paths)
    return {**dict(index), "dims": dims}, embeddings, fields


def _fields(field: str, paths: Any) -> list[tuple[str, Any]]:
    if isinstance(paths, str | bytes) or not isinstance(paths, Sequence):
        raise wrong_type(field, "a list of JSON paths", paths)
    found = []
    for i, path in enumerate(paths):
        if not isinstance(path, str) or not path:
            raise wrong_type(f"{field}[{i}]", "a JSON path (a non-empty str)", path)
        try:
            found.append((path, path if path == ROOT_PATH else tokenize_path(path)))
        except (ValueError, IndexError) as exc:
            raise MemoryValueError(f"{field}[{i}]: not a JSON path: {exc}", field=f"{field}[{i}]") from None
    return found


def _memory_index(paths: list[str]) -> list[str] | None:
    """The paths as the memory's ``index`` (its BM25 text): LangGraph's ``{a,b}`` choices, which the
    memory's paths do not have, search every string of the value."""
    try:
        return cast(list[str], check_index("index", paths))
    except MemoryValueError:
        return None


def _conditions(op: ListNamespacesOp) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    prefix: tuple[str, ...] | None = None
    suffix: tuple[str, ...] | None = None
    for condition in op.match_conditions or ():
        if not isinstance(condition, MatchCondition) or condition.match_type not in ("prefix", "suffix"):
            raise invalid("match_conditions", f"expected prefix or suffix MatchConditions, got {condition!r:.80}")
        if condition.match_type == "prefix":
            prefix = tuple(condition.path) if prefix is None else _longer(prefix, tuple(condition.path))
        else:
            suffix = tuple(condition.path) if suffix is None else _longer(suffix, tuple(condition.path))
    return prefix, suffix


def _longer(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    """Two prefix (or suffix) conditions both hold: the longer one, when the other agrees with it."""
    return second if len(second) > len(first) else first


class MemoryStore(BaseStore):
    """A LangGraph ``BaseStore`` over unified-memory (see the module docstring).

    ``memory``: a :class:`~unified_memory.UnifiedMemory` or :class:`~unified_memory.RemoteMemory`.
    ``user_label``: which label of a namespace names the user (``None``: all items are the memory's
    user's). ``ttl``: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``).
    ``index``: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``) for semantic search.
    """

    supports_ttl: bool = True

    def __init__(self, memory: Any, *, user_label: int | None = None,
                 ttl: TTLConfig | Mapping[str, Any] | None = None, index: Mapping[str, Any] | None = None) -> None:
        check_memory(memory, _NEEDED)
        if user_label is not None and (isinstance(user_label, bool) or not isinstance(user_label, int)):
            raise wrong_type("user_label", "int or None", user_label)
        if user_label is not None and user_label < 0:
            raise invalid("user_label", f"must be a label position (0 or more), got {user_label}")
        if ttl is not None:
            if not isinstance(ttl, Mapping):
                raise wrong_type("ttl", "a TTLConfig dict or None", ttl)
            unknown = set(ttl) - _TTL_KEYS
            if unknown:
                raise invalid("ttl", f"unknown keys {sorted(map(str, unknown))} (TTLConfig has {sorted(_TTL_KEYS)})")
        self.memory = memory
        self.user_label = user_label
        self.ttl_config = cast(TTLConfig, dict(ttl)) if ttl is not None else None
        #: LangGraph's ``index_config`` (``None``: no embeddings of the store's own).
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Any = None
        self._fields: list[tuple[str, Any]] = []
        if index is not None:
            self.index_config, self.embeddings, self._fields = _index_config(index)
        self._distance_type = (self.index_config or {}).get("distance_type", "cosine")

    def __repr__(self) -> str:
        return f"MemoryStore(memory={self.memory!r}, user_label={self.user_label!r})"

    # -- which memory an operation runs on ------------------------------------------------------------

    def _user_of(self, namespace: tuple[str, ...]) -> str | None:
        """The user a namespace names (``None``: the memory's own, or, for a prefix too short, every user)."""
        k = self.user_label
        return None if k is None or len(namespace) <= k or namespace[k] == "*" else namespace[k]

    def _memory_for(self, namespace: tuple[str, ...], field: str) -> Any:
        if self.user_label is None:
            return self.memory
        user = self._user_of(namespace)
        if user is None:
            raise invalid(field, f"must have a label {self.user_label} naming the user (user_label="
                                 f"{self.user_label}), got {namespace!r:.120}")
        return self.memory.scoped(user_id=user)

    def _memories_under(self, prefix: tuple[str, ...]) -> list[Any]:
        """The memories a prefix covers: one user's, or (a prefix short of the user label) every user's."""
        if self.user_label is None:
            return [self.memory]
        user = self._user_of(prefix)
        if user is not None:
            return [self.memory.scoped(user_id=user)]
        users = self._visible_users()
        return [self.memory.scoped(user_id=u) for u in users]

    def _visible_users(self) -> list[str]:
        if getattr(self.memory, "url", None) is not None:
            return [self.memory.user_id]  # a remote memory: its key's user (listing users needs an admin key)
        return list(self.memory.users())

    # -- the batch ------------------------------------------------------------------------------------

    @staticmethod
    def _check(ops: Iterable[Op]) -> list[Op]:
        checked = list(ops)
        for op in checked:
            if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
                raise wrong_type("ops", "GetOp, PutOp, SearchOp or ListNamespacesOp", op)
            validate_op_namespace(op)
        return checked

    @staticmethod
    def _puts(ops: list[Op]) -> dict[tuple[tuple[str, ...], str], PutOp]:
        """The batch's puts, the last one for each item (in order of first appearance)."""
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
        return puts

    # -- embeddings (with ``index=``) -----------------------------------------------------------------

    def _to_embed(self, op: PutOp) -> tuple[list[str] | bool | None, list[str]]:
        """A put's ``index`` for the memory (the BM25 text) and the texts to embed, one per field found."""
        if self.embeddings is None or op.index is False:
            return op.index, []
        paths = self._fields if op.index is None else _fields("index", op.index)
        texts = [text for path, tokens in paths for text in get_text_at_path(op.value, tokens)]
        return _memory_index([path for path, _ in paths]), texts

    def _vectors(self, found: Any, count: int) -> list[list[float]]:
        vectors = [list(vector) for vector in found]
        dims = self.index_config["dims"] if self.index_config else None
        if len(vectors) != count:
            raise invalid("index.embed", f"returned {len(vectors)} vectors for {count} texts")
        for vector in vectors:
            if len(vector) != dims:
                raise invalid("index.dims", f"is {dims}, but the embeddings returned a vector of {len(vector)}")
        return vectors

    def _queries(self, ops: list[Op]) -> list[str]:
        if self.embeddings is None:
            return []
        return list(dict.fromkeys(op.query for op in ops if isinstance(op, SearchOp) and op.query and op.limit > 0))

    @staticmethod
    def _writes(puts: dict[tuple[tuple[str, ...], str], PutOp], planned: dict[tuple[tuple[str, ...], str], Any],
                vectors: list[list[float]]) -> list[tuple[tuple[str, ...], str, PutOp, Any, list[list[float]] | None]]:
        """Each put with its memory ``index`` and its vectors (taken in order from ``vectors``)."""
        writes, at = [], 0
        for (namespace, key), op in puts.items():
            index, texts = planned.get((namespace, key), (op.index, []))
            writes.append((namespace, key, op, index, vectors[at:at + len(texts)] or None))
            at += len(texts)
        return writes

    # -- the batch ------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations with the memory's methods (reads first, then the puts)."""
        checked = self._check(ops)
        puts = self._puts(checked)
        planned = {where: self._to_embed(op) for where, op in puts.items() if op.value is not None}
        texts = [text for _, found in planned.values() for text in found]
        vectors = self._vectors(self.embeddings.embed_documents(texts), len(texts)) if texts else []
        queries = {query: self._vectors([self.embeddings.embed_query(query)], 1)[0]
                   for query in self._queries(checked)}
        results: list[Result] = [None] * len(checked)
        for i, op in enumerate(checked):
            if isinstance(op, GetOp):
                found = self._memory_for(tuple(op.namespace), "namespace").get_item(
                    tuple(op.namespace), op.key, refresh_ttl=op.refresh_ttl)
                results[i] = None if found is None else _item(found)
            elif isinstance(op, SearchOp) and op.limit <= 0:
                results[i] = []
            elif isinstance(op, SearchOp):
                results[i] = self._search(op, [m.search_items(
                    tuple(op.namespace_prefix), query=op.query, filter=op.filter, limit=op.offset + op.limit, offset=0,
                    refresh_ttl=op.refresh_ttl, query_vector=queries.get(op.query or ""),
                    distance_type=self._distance_type)
                    for m in self._memories_under(tuple(op.namespace_prefix))])
            elif isinstance(op, ListNamespacesOp) and op.limit <= 0:
                results[i] = []
            elif isinstance(op, ListNamespacesOp):
                prefix, suffix = _conditions(op)
                results[i] = self._listing(op, [m.item_namespaces(
                    prefix=prefix, suffix=suffix, max_depth=op.max_depth, limit=op.offset + op.limit, offset=0)
                    for m in self._memories_under(prefix or ())])
        for namespace, key, op, index, item_vectors in self._writes(puts, planned, vectors):
            memory = self._memory_for(namespace, "namespace")
            if op.value is None:
                memory.delete_item(namespace, key)
            else:
                memory.put_item(namespace, key, op.value, index=index, ttl=op.ttl, vectors=item_vectors)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` with the memory's async twins (and the embeddings' async methods)."""
        checked = self._check(ops)
        puts = self._puts(checked)
        planned = {where: self._to_embed(op) for where, op in puts.items() if op.value is not None}
        texts = [text for _, found in planned.values() for text in found]
        vectors = self._vectors(await self.embeddings.aembed_documents(texts), len(texts)) if texts else []
        queries = {query: self._vectors([await self.embeddings.aembed_query(query)], 1)[0]
                   for query in self._queries(checked)}
        results: list[Result] = [None] * len(checked)
        for i, op in enumerate(checked):
            if isinstance(op, GetOp):
                found = await self._memory_for(tuple(op.namespace), "namespace").aget_item(
                    tuple(op.namespace), op.key, refresh_ttl=op.refresh_ttl)
                results[i] = None if found is None else _item(found)
            elif isinstance(op, SearchOp) and op.limit <= 0:
                results[i] = []
            elif isinstance(op, SearchOp):
                results[i] = self._search(op, [await m.asearch_items(
                    tuple(op.namespace_prefix), query=op.query, filter=op.filter, limit=op.offset + op.limit, offset=0,
                    refresh_ttl=op.refresh_ttl, query_vector=queries.get(op.query or ""),
                    distance_type=self._distance_type)
                    for m in self._memories_under(tuple(op.namespace_prefix))])
            elif isinstance(op, ListNamespacesOp) and op.limit <= 0:
                results[i] = []
            elif isinstance(op, ListNamespacesOp):
                prefix, suffix = _conditions(op)
                results[i] = self._listing(op, [await m.aitem_namespaces(
                    prefix=prefix, suffix=suffix, max_depth=op.max_depth, limit=op.offset + op.limit, offset=0)
                    for m in self._memories_under(prefix or ())])
        for namespace, key, op, index, item_vectors in self._writes(puts, planned, vectors):
            memory = self._memory_for(namespace, "namespace")
            if op.value is None:
                await memory.adelete_item(namespace, key)
            else:
                await memory.aput_item(namespace, key, op.value, index=index, ttl=op.ttl, vectors=item_vectors)
        return results

    @staticmethod
    def _search(op: SearchOp, per_user: list[list[Any]]) -> list[SearchItem]:
        merged = per_user[0] if len(per_user) == 1 else _ranked([i for found in per_user for i in found])
        return [_search_item(i) for i in merged[op.offset:op.offset + op.limit]]

    @staticmethod
    def _listing(op: ListNamespacesOp, per_user: list[list[tuple[str, ...]]]) -> list[tuple[str, ...]]:
        merged = sorted(set(heapq.merge(*per_user)))
        return merged[op.offset:op.offset + op.limit]
