"""What goes over the wire for :class:`~unified_memory.remote.client.RemoteMemory`: each method's
arguments checked locally with the library's own checks (a bad value raises before any request,
naming the same field a local ``UnifiedMemory`` would), turned into a :class:`Call` (method, path
under ``/v1/users/{user_id}``, JSON body, query parameters, how to read the answer), and the
service's error answers turned back into the library's error classes (:func:`error_from`, defined in
:mod:`unified_memory.remote.wire_errors`).

No httpx here: the transport (:mod:`unified_memory.remote.transport`) sends the calls.

    >>> call = recall("bees", limit=3, tiers="long_term", days=None, where=None, as_of="2024-01-01")
    >>> call.method, call.path, call.json
    ('POST', '/recall', {'query': 'bees', 'limit': 3, 'tiers': ['long_term'], 'as_of': 1704067200.0})
    >>> type(error_from(404, {"error": {"type": "not_found", "field": "fact_id", "message": "no fact"}},
    ...                 "http://127.0.0.1:8080")).__name__
    'NotFoundError'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from tiers.items.checks import (
    check_filter,
    check_index,
    check_key,
    check_namespace,
    check_ttl,
    check_value,
    filter_to_wire,
)
from tiers.items.vectors import check_distance_type, check_query_vector, check_vectors
from unified_memory.errors import invalid, wrong_type
from unified_memory.remote.wire_errors import error_from
from unified_memory.types import (
    ContextBlock,
    Entity,
    Episode,
    ExtractedFact,
    Fact,
    MemoryStats,
    Profile,
    RecallHit,
    StoredItem,
    Triple,
)
from unified_memory.validation import (
    check_bool,
    check_fact_keys,
    check_ids,
    check_limit,
    check_metadata,
    check_optional_text,
    check_scope_id,
    check_text,
    check_tiers,
    check_ttl_days,
    check_unit,
    parse_when,
    to_message,
)

__all__ = ["Call", "error_from", "check_user", "add_turn", "add_message", "add_messages", "remember",
           "remember_many", "add_triple", "recall", "context", "facts_query", "entities", "triples", "episodes",
           "stats", "forget_items", "forget_user", "users", "PAGE", "facts_page", "facts_count", "check_export", "import_rows",
           "check_forget", "put_item", "get_item", "delete_item", "search_items", "item_namespaces"]

T = TypeVar("T")
PAGE = 1000  # the service's largest page of facts


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request: ``path`` is under ``/v1/users/{user}`` (the memory's user, or ``user``),
    or under ``/v1`` when ``admin``; ``parse`` reads the JSON answer; ``fields`` renames the
    service's field names in error answers to the library's."""

    method: str
    path: str
    parse: Callable[[Any], T]
    json: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    fields: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None
    admin: bool = False


def check_user(name: str, value: Any, *, optional: bool = False) -> str | None:
    """A scope id the service can address in a path (not ``.`` or ``..``: URL clients resolve them
    as dot segments; a ``/`` is sent as ``%2F``)."""
    checked = check_scope_id(name, value, optional=optional)
    if checked is not None and name == "user_id" and checked in (".", ".."):
        raise invalid(name, f"the memory service cannot address a user id like {checked!r:.80} in a URL")
    return checked


def _ids(body: Any) -> list[str]:
    return [str(i) for i in body["ids"]]


def _id(body: Any) -> str:
    return str(body["id"])


def _extract(value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise wrong_type("extract", "bool or None", value)
    return value


def _number(name: str, value: Any) -> float:
    """A positive number of days, as a float JSON can carry (a huge one is clamped, as the library does)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(name, "a number of days", value)
    if not value > 0:  # also NaN
        raise invalid(name, f"must be a positive number of days, got {value!r}")
    return float(value) if value < 1e300 else 1e300


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


# -- writing ---------------------------------------------------------------------------------

def _message_json(name: str, value: Any) -> dict[str, Any]:
    """One message as the service's ``MessageIn``, checked by the library's own ``to_message``."""
    message = to_message(name, value)
    for extra in ("images", "reasoning_details"):
        if getattr(message, extra) is not None:
            raise invalid(f"{name}.{extra}", "cannot be sent to the memory service")
    out = message.model_dump(mode="json", include={"role", "content", "name", "tool_calls", "tool_call_id",
                                                   "metadata"}, exclude_none=True)
    out["content"] = message.content
    if message.created_at is not None:
        out["when"] = message.created_at.timestamp()
    return out


def add_turn(user: Any, assistant: Any, *, when: Any, metadata: Any, extract: Any, extractor: Any) -> Call[list[str]]:
    """``POST /turns``."""
    if extractor is not None:
        raise invalid("extractor", "cannot run over HTTP: the memory service extracts with its own extractor")
    body = {"user": check_text("user", user),
            "assistant": None if assistant is None else check_text("assistant", assistant, allow_empty=True),
            "when": parse_when("when", when), "metadata": check_metadata("metadata", metadata) or None,
            "extract": _extract(extract)}
    return Call("POST", "/turns", _ids, json=_drop_none(body))


def add_message(role: Any, content: Any, *, name: Any, when: Any, metadata: Any, tool_calls: Any,
                tool_call_id: Any, extract: Any) -> Call[str]:
    """``POST /messages`` with one message."""
    message = _message_json("message", {"role": role, "content": content, "name": name, "tool_calls": tool_calls,
                                        "tool_call_id": tool_call_id,
                                        "metadata": check_metadata("metadata", metadata),
                                        "when": parse_when("when", when)})
    return Call("POST", "/messages", lambda body: _ids(body)[0],
                json=_drop_none({"messages": [message], "extract": _extract(extract)}),
                fields={"messages[0]": "message", "messages": "message"})


def add_messages(messages: Any, *, extract: Any) -> Call[list[str]] | None:
    """``POST /messages``; None for no messages (nothing to send)."""
    flag = _extract(extract)
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise wrong_type("messages", "list of Message or dict", messages)
    items = [_message_json(f"messages[{i}]", m) for i, m in enumerate(messages)]
    if not items:
        return None
    return Call("POST", "/messages", _ids, json=_drop_none({"messages": items, "extract": flag}))


def _fact(name: str, item: Any, *, keywords: bool = False) -> str | dict[str, Any]:
    """One fact as the service's ``FactIn`` (``keywords``: the arguments of ``remember``)."""
    def at(key: str) -> str:
        return key if keywords else f"{name}.{key}"

    if isinstance(item, str):
        return check_text(name, item)
    if isinstance(item, ExtractedFact):
        spec: dict[str, Any] = {"text": item.text, "importance": item.importance, "category": item.category}
    elif isinstance(item, Mapping):
        spec = check_fact_keys(name, item)
    else:
        raise wrong_type(name, "str, dict or ExtractedFact", item)
    category = spec.get("category")
    if category is not None:
        check_optional_text(at("category"), category)
    ttl = check_ttl_days(at("ttl_days"), spec.get("ttl_days"), now=time.time())
    return _drop_none({"text": check_text(at("text"), spec.get("text")),
                       "importance": check_unit(at("importance"), spec.get("importance")),
                       "category": category, "metadata": check_metadata(at("metadata"), spec.get("metadata")) or None,
                       "ttl_days": None if ttl is None else float(ttl)})


def remember(text: Any, *, importance: Any, category: Any, metadata: Any, ttl_days: Any) -> Call[str]:
    """``POST /facts``."""
    fact = _fact("", {"text": text, "importance": importance, "category": category, "metadata": metadata,
                      "ttl_days": ttl_days}, keywords=True)
    assert isinstance(fact, dict)
    return Call("POST", "/facts", _id, json=fact)


def remember_many(texts_or_facts: Any) -> Call[list[str]] | None:
    """``POST /facts/batch``; None for no facts."""
    if isinstance(texts_or_facts, str | bytes | Mapping) or not isinstance(texts_or_facts, Iterable):
        raise wrong_type("texts_or_facts", "list of str, dict or ExtractedFact", texts_or_facts)
    items = [_fact(f"texts_or_facts[{i}]", item) for i, item in enumerate(texts_or_facts)]
    return Call("POST", "/facts/batch", _ids, json={"facts": items}) if items else None


def add_triple(subject: Any, predicate: Any, obj: Any, *, confidence: Any, metadata: Any) -> Call[str]:
    """``POST /triples``."""
    body = {"subject": check_text("subject", subject).strip(), "predicate": check_text("predicate", predicate).strip(),
            "object": check_text("obj", obj).strip(), "confidence": check_unit("confidence", confidence, optional=False),
            "metadata": check_metadata("metadata", metadata) or None}
    return Call("POST", "/triples", _id, json=_drop_none(body))


# -- reading ---------------------------------------------------------------------------------

def _tiers(tiers: Any) -> list[str] | None:
    return None if tiers is None else list(check_tiers("tiers", tiers))


def _where(where: Any) -> dict[str, Any] | None:
    if where is None:
        return None
    if not isinstance(where, Mapping):
        raise wrong_type("where", "dict", where)
    return check_metadata("where", where)


def recall(query: Any, *, limit: Any, tiers: Any, days: Any, where: Any, as_of: Any,
           diversify: Any = True) -> Call[list[RecallHit]]:
    """``POST /recall`` (``diversify`` is sent only when off: the service's default is on)."""
    body = {"query": check_text("query", query), "limit": check_limit("limit", limit), "tiers": _tiers(tiers),
            "days": None if days is None else _number("days", days), "where": _where(where),
            "as_of": parse_when("as_of", as_of), "diversify": None if check_bool("diversify", diversify) else False}
    return Call("POST", "/recall", lambda answer: [RecallHit.model_validate(h) for h in answer["hits"]],
                json=_drop_none(body))


def context(query: Any, *, max_tokens: Any, include_conversation: Any, limit: Any, as_of: Any) -> Call[ContextBlock]:
    """``POST /context``."""
    body = {"query": None if query is None else check_text("query", query, allow_empty=True),
            "max_tokens": None if max_tokens is None else check_limit("max_tokens", max_tokens),
            "include_conversation": check_bool("include_conversation", include_conversation),
            "limit": None if limit is None else check_limit("limit", limit), "as_of": parse_when("as_of", as_of)}
    return Call("POST", "/context", ContextBlock.model_validate, json=_drop_none(body))


def facts_query(*, include_archived: Any, include_inactive: Any, category: Any, limit: Any, order: Any,
                include_history: Any, offset: Any = 0) -> tuple[dict[str, Any], int | None, int]:
    """The query parameters of ``GET /facts`` (without paging), the number of facts wanted
    and the offset of the first."""
    wanted = None if limit is None else check_limit("limit", limit)
    start = check_limit("offset", offset, minimum=0)
    params = {"include_archived": check_bool("include_archived", include_archived),
              "include_inactive": check_bool("include_inactive", include_inactive),
              "include_history": check_bool("include_history", include_history),
              "category": check_optional_text("category", category)}
    if not isinstance(order, str):
        raise wrong_type("order", "str", order)
    if order not in ("time", "importance"):
        raise invalid("order", f"must be 'time' or 'importance', got {order!r}")
    params["order"] = order
    return _drop_none(params), wanted, start


def facts_count(*, include_archived: Any, include_inactive: Any, category: Any, include_history: Any) -> Call[int]:
    """``GET /facts`` for its ``total`` (a page of one fact)."""
    params, _, _ = facts_query(include_archived=include_archived, include_inactive=include_inactive,
                               category=category, limit=None, order="time", include_history=include_history)
    return Call("GET", "/facts", lambda body: int(body["total"]), params={**params, "offset": 0, "limit": 1})


def facts_page(params: Mapping[str, Any], offset: int, size: int) -> Call[tuple[list[Fact], int | None]]:
    """``GET /facts``: one page; the answer is ``(facts, next_offset)``."""
    return Call("GET", "/facts", lambda body: ([Fact.model_validate(f) for f in body["facts"]], body["next_offset"]),
                params={**params, "offset": offset, "limit": size})


def entities(*, type: Any, limit: Any) -> Call[list[Entity]]:
    """``GET /entities``."""
    params = {"type": check_optional_text("type", type), "limit": None if limit is None else check_limit("limit", limit)}
    return Call("GET", "/entities", lambda body: [Entity.model_validate(e) for e in body["entities"]],
                params=_drop_none(params))


def triples(entity: Any) -> Call[list[Triple]]:
    """``GET /triples``."""
    params = {} if entity is None else {"entity": check_text("entity", entity)}
    return Call("GET", "/triples", lambda body: [Triple.model_validate(t) for t in body["triples"]], params=params)


def episodes(*, days: Any, session_id: Any, limit: Any) -> Call[list[Episode]]:
    """``GET /episodes``."""
    params = {"days": None if days is None else _number("days", days),
              "session": check_scope_id("session_id", session_id, optional=True),
              "limit": None if limit is None else check_limit("limit", limit)}
    return Call("GET", "/episodes", lambda body: [Episode.model_validate(e) for e in body["episodes"]],
                params=_drop_none(params))


def profile(*, as_of: Any) -> Call[Profile]:
    """``GET /profile`` (``as_of`` sent as an ISO 8601 moment in UTC)."""
    moment = parse_when("as_of", as_of)
    params = {} if moment is None else {"as_of": datetime.fromtimestamp(moment, UTC).isoformat()}
    return Call("GET", "/profile", Profile.model_validate, params=params)


def stats() -> Call[MemoryStats]:
    """``GET /stats`` (``path`` is None: the server's file is not the caller's business)."""
    return Call("GET", "/stats", MemoryStats.model_validate)


# -- keyed items -----------------------------------------------------------------------------

def put_item(namespace: Any, key: Any, value: Any, *, index: Any, ttl: Any, vectors: Any) -> Call[None]:
    """``PUT /items``."""
    checked = check_vectors("vectors", vectors)
    body = {"namespace": list(check_namespace("namespace", namespace)), "key": check_key("key", key),
            "value": check_value("value", value)[0], "index": check_index("index", index),
            "ttl": check_ttl("ttl", ttl), "vectors": None if checked is None else [v.tolist() for v in checked]}
    return Call("PUT", "/items", lambda answer: None, json=_drop_none(body))


def get_item(namespace: Any, key: Any, *, refresh_ttl: Any) -> Call[StoredItem | None]:
    """``POST /items/get``."""
    body = {"namespace": list(check_namespace("namespace", namespace)), "key": check_key("key", key),
            "refresh_ttl": check_bool("refresh_ttl", refresh_ttl)}
    return Call("POST", "/items/get",
                lambda answer: None if answer["item"] is None else StoredItem.model_validate(answer["item"]), json=body)


def delete_item(namespace: Any, key: Any) -> Call[bool]:
    """``POST /items/delete``."""
    body = {"namespace": list(check_namespace("namespace", namespace)), "key": check_key("key", key)}
    return Call("POST", "/items/delete", lambda answer: bool(answer["deleted"]), json=body)


def search_items(namespace_prefix: Any, *, query: Any, filter: Any, limit: Any, offset: Any,
                 refresh_ttl: Any, query_vector: Any, distance_type: Any) -> Call[list[StoredItem]]:
    """``POST /items/search`` (a filter's NaN and infinities travel as ``{"$float": "inf"}``)."""
    vector = check_query_vector("query_vector", query_vector)
    body = {"namespace_prefix": list(check_namespace("namespace_prefix", namespace_prefix, empty=True)),
            "query": check_optional_text("query", query),
            "filter": filter_to_wire(check_filter("filter", filter)),
            "query_vector": None if vector is None else vector.tolist(),
            "distance_type": None if distance_type == "cosine" else check_distance_type("distance_type", distance_type),
            "limit": check_limit("limit", limit), "offset": check_limit("offset", offset, minimum=0),
            "refresh_ttl": check_bool("refresh_ttl", refresh_ttl)}
    return Call("POST", "/items/search", lambda answer: [StoredItem.model_validate(i) for i in answer["items"]],
                json=_drop_none(body))


def item_namespaces(*, prefix: Any, suffix: Any, max_depth: Any, limit: Any,
                    offset: Any) -> Call[list[tuple[str, ...]]]:
    """``POST /items/namespaces``."""
    body = {"prefix": None if prefix is None else list(check_namespace("prefix", prefix, empty=True)),
            "suffix": None if suffix is None else list(check_namespace("suffix", suffix, empty=True)),
            "max_depth": None if max_depth is None else check_limit("max_depth", max_depth),
            "limit": check_limit("limit", limit), "offset": check_limit("offset", offset, minimum=0)}
    return Call("POST", "/items/namespaces", lambda answer: [tuple(ns) for ns in answer["namespaces"]],
                json=_drop_none(body))


# -- forgetting and admin --------------------------------------------------------------------

def _deleted(body: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in body["deleted"].items()}


def forget_items(ids: list[str], user: str | None) -> Call[dict[str, int]]:
    """``POST /forget``: these items and what derives from them, in one transaction."""
    return Call("POST", "/forget", _deleted, json={"ids": ids}, user=user)


def forget_user(user: str | None) -> Call[dict[str, int]]:
    """``DELETE /v1/users/{user}``."""
    return Call("DELETE", "", _deleted, user=user)


def users() -> Call[list[str]]:
    """``GET /v1/users`` (an admin key)."""
    return Call("GET", "/users", lambda body: [str(u) for u in body["users"]], admin=True)


def check_export(all_users: Any) -> None:
    """``export_jsonl(all_users=...)``: over HTTP only this user's rows can be exported."""
    if check_bool("all_users", all_users):
        raise invalid("all_users", "the memory service exports one user at a time (GET /export of that user)")


def import_rows(user: str | None) -> Call[int]:
    """``POST /import`` (the JSON Lines go as the body), into ``user`` or the memory's user."""
    return Call("POST", "/import", lambda body: int(body["imported"]), user=user)


def check_forget(user_id: Any, ids: Any) -> tuple[str | None, list[str] | None]:
    """The user and the item ids of ``forget`` (``None``: everything of the user)."""
    user = check_user("user_id", user_id, optional=True)
    if ids is None:
        return user, None
    checked = check_ids("ids", ids)
    for item in checked:
        check_text("ids", item)
    return user, list(dict.fromkeys(checked))


