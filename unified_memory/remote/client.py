"""``RemoteMemory``: the memory service (``unified-memory serve``) as a ``UnifiedMemory``.

The methods the service offers have ``UnifiedMemory``'s names, arguments and return types
(the library's own records: :class:`~unified_memory.types.RecallHit`,
:class:`~unified_memory.types.ContextBlock`, :class:`~unified_memory.types.Fact`, ...), with
async twins (:mod:`unified_memory.remote.async_client`), so code written against a local
memory — ``@remember``, the memory tools — runs against a shared server unchanged::

    from unified_memory import RemoteMemory, remember
    mem = RemoteMemory("http://127.0.0.1:8080", api_key, user_id="ada")
    mem.remember("I keep bees"); mem.recall("bees")[0].text     # 'I keep bees'

Arguments are checked locally with the library's own checks before any request, so a bad
value raises the same error, naming the same field, as a local memory, and nothing is sent.
The service's refusals come back as the library's errors: 422 as ``MemoryValueError`` /
``MemoryTypeError``, 404 ``NotFoundError``, 409 ``ConflictError``, 413 ``MemoryValueError``
(``field="body"``), 401 / 429 :class:`~unified_memory.errors.AuthenticationError`, 403
:class:`~unified_memory.errors.PermissionDeniedError`; 503, a refused connection or a timeout
:class:`~unified_memory.errors.StoreUnavailableError` naming the URL.

What differs from a local memory: ``add_turn(extractor=...)`` is refused (the server extracts
with its own extractor); ``forget(ids=...)`` takes fact ids only; ``export_jsonl(all_users=True)``
is refused and ``import_jsonl`` imports into this memory's user (or ``user_id``);
``stats().path`` is None; ``report_failure`` logs on this side (logger
``unified_memory.remote``): the server's event hooks are out of reach.

    >>> mem = RemoteMemory("http://127.0.0.1:9", "um_key", user_id="ada", timeout=0.5)
    >>> mem.scoped(session_id="s1").session_id, mem.user_id
    ('s1', 'ada')
    >>> mem.recall("bees", limit=0)
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: limit: must be at least 1, got 0
    >>> mem.close()
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

from unified_memory.errors import invalid, wrong_type
from unified_memory.protocols import Extractor
from unified_memory.remote import wire
from unified_memory.remote.async_client import AsyncTwins
from unified_memory.remote.files import destination as export_destination
from unified_memory.remote.files import source_bytes
from unified_memory.remote.transport import Connection, Scope
from unified_memory.types import (
    ContextBlock,
    Entity,
    Episode,
    ExtractedFact,
    Fact,
    MemoryStats,
    Message,
    Profile,
    RecallHit,
    StoredItem,
    Triple,
)
from unified_memory.validation import check_text

__all__ = ["RemoteMemory"]

_LOG = logging.getLogger("unified_memory.remote")
T = TypeVar("T")


def _check_url(url: Any) -> str:
    if not isinstance(url, str):
        raise wrong_type("url", "str", url)
    parts = urlsplit(url.strip()) if "\x00" not in url else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise invalid("url", f"must be the service's http(s) address, e.g. 'http://127.0.0.1:8080', got {url!r:.120}")
    return url.strip()


def _check_key(api_key: Any) -> str:
    if not isinstance(api_key, str):
        raise wrong_type("api_key", "str", api_key)
    if not api_key or not api_key.isprintable() or not api_key.isascii() or any(c.isspace() for c in api_key):
        raise invalid("api_key", "must be the key 'unified-memory keys create' printed (printable ASCII, no spaces)")
    return api_key


def _check_timeout(timeout: Any) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise wrong_type("timeout", "seconds (a number)", timeout)
    if not (math.isfinite(timeout) and 0 < timeout <= 86400):
        raise invalid("timeout", f"must be a positive number of seconds (at most a day), got {timeout!r}")
    return float(timeout)


class RemoteMemory(AsyncTwins):
    """The memory of ``user_id`` (and optionally one agent and session) on the memory service at
    ``url``, reached with ``api_key`` (see the module docstring). ``timeout``: seconds per request.

    One connection pool serves the memory and every :meth:`scoped` view; ``close()`` (or
    ``with`` / ``async with``) closes it for all of them.
    """

    def __init__(self, url: str, api_key: str, *, user_id: str = "default", agent_id: str | None = None,
                 session_id: str | None = None, timeout: float = 30.0) -> None:
        scope = Scope(str(wire.check_user("user_id", user_id)), wire.check_user("agent_id", agent_id, optional=True),
                      wire.check_user("session_id", session_id, optional=True))
        self._connection = Connection(_check_url(url), _check_key(api_key), timeout=_check_timeout(timeout))
        self._scope = scope

    @classmethod
    def _over(cls, connection: Connection, scope: Scope) -> RemoteMemory:
        memory = object.__new__(cls)
        memory._connection = connection
        memory._scope = scope
        return memory

    # -- who and where ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The service's address."""
        return self._connection.url

    @property
    def user_id(self) -> str:
        return self._scope.user_id

    @property
    def agent_id(self) -> str | None:
        return self._scope.agent_id

    @property
    def session_id(self) -> str | None:
        return self._scope.session_id

    @property
    def path(self) -> None:
        """None: the memory file is the server's."""
        return None

    def scoped(self, *, user_id: str | None = None, agent_id: str | None = None,
               session_id: str | None = None) -> RemoteMemory:
        """The same service and connection for another user / agent / session (the key must grant that user)."""
        scope = self._scope
        return RemoteMemory._over(self._connection, Scope(
            str(wire.check_user("user_id", user_id)) if user_id is not None else scope.user_id,
            wire.check_user("agent_id", agent_id, optional=True) if agent_id is not None else scope.agent_id,
            wire.check_user("session_id", session_id, optional=True) if session_id is not None else scope.session_id))

    def close(self) -> None:
        """Close the connection (idempotent); scoped views share it and are closed too."""
        self._connection.close()

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> RemoteMemory:
        return self

    def __repr__(self) -> str:
        return f"RemoteMemory(url={self.url!r}, user_id={self.user_id!r})"

    def _send(self, call: wire.Call[T], *, content: bytes | None = None) -> T:
        return self._connection.send(self._scope, call, content=content)

    def report_failure(self, kind: str, error: str) -> None:
        """Log that work of ``kind`` failed outside a write (what ``@remember`` reports): on this side,
        as a warning of the ``unified_memory.remote`` logger; the server's event hooks are out of reach."""
        _LOG.warning("%s failed for user %r: %s", check_text("kind", kind), self.user_id,
                     check_text("error", error, allow_empty=True))

    # -- writing ---------------------------------------------------------------------------------

    def add_turn(self, user: str, assistant: str | None = None, *, when: Any = None,
                 metadata: Mapping[str, Any] | None = None, extract: bool | None = None,
                 extractor: Extractor | None = None) -> list[str]:
        """Log a user message and, optionally, the reply (``POST /turns``); returns the message ids.
        ``extractor`` must be None: the server extracts with its own."""
        return self._send(wire.add_turn(user, assistant, when=when, metadata=metadata, extract=extract,
                                        extractor=extractor))

    def add_message(self, role: str, content: str | None, *, name: str | None = None, when: Any = None,
                    metadata: Mapping[str, Any] | None = None, tool_calls: list[dict[str, Any]] | None = None,
                    tool_call_id: str | None = None, extract: bool | None = None) -> str:
        """Log one message (``POST /messages``); returns its id."""
        return self._send(wire.add_message(
            role, content, name=name, when=when, metadata=metadata, tool_calls=tool_calls, tool_call_id=tool_call_id,
            extract=extract))

    def add_messages(self, messages: Iterable[Message | Mapping[str, Any]], *,
                     extract: bool | None = None) -> list[str]:
        """Log many messages in one transaction (``POST /messages``)."""
        call = wire.add_messages(messages, extract=extract)
        return [] if call is None else self._send(call)

    def remember(self, text: str, *, importance: float | None = None, category: str | None = None,
                 metadata: Mapping[str, Any] | None = None, ttl_days: float | None = None) -> str:
        """Store a long-term fact (``POST /facts``); returns its id."""
        return self._send(wire.remember(
            text, importance=importance, category=category, metadata=metadata, ttl_days=ttl_days))

    def remember_many(self, texts_or_facts: Iterable[str | Mapping[str, Any] | ExtractedFact]) -> list[str]:
        """Store many facts in one transaction (``POST /facts/batch``); an ``ExtractedFact`` sends
        its text, importance and category (the server's extractor finds the slot)."""
        call = wire.remember_many(texts_or_facts)
        return [] if call is None else self._send(call)

    def add_triple(self, subject: str, predicate: str, obj: str, *, confidence: float = 1.0,
                   metadata: Mapping[str, Any] | None = None) -> str:
        """Add a relation to the entity graph (``POST /triples``); returns its id."""
        return self._send(wire.add_triple(
            subject, predicate, obj, confidence=confidence, metadata=metadata))

    # -- reading ---------------------------------------------------------------------------------

    def recall(self, query: str, *, limit: int = 10, tiers: Sequence[str] | str | None = None,
               days: float | None = None, where: Mapping[str, Any] | None = None,
               as_of: datetime | str | float | None = None, diversify: bool = True) -> list[RecallHit]:
        """Federated recall over the tiers, best first (``POST /recall``)."""
        return self._send(wire.recall(
            query, limit=limit, tiers=tiers, days=days, where=where, as_of=as_of, diversify=diversify))

    def context(self, query: str | None = None, *, max_tokens: int | None = None,
                include_conversation: bool = True, limit: int | None = None,
                as_of: datetime | str | float | None = None) -> ContextBlock:
        """A token-budgeted memory block for the next LLM call (``POST /context``)."""
        return self._send(wire.context(
            query, max_tokens=max_tokens, include_conversation=include_conversation, limit=limit, as_of=as_of))

    def assemble_context(self, max_tokens: int = 4000, *, query: str | None = None,
                         include_conversation: bool = True) -> str:
        """``context(query, max_tokens=..., include_conversation=...).text``."""
        return self.context(query, max_tokens=max_tokens, include_conversation=include_conversation).text

    def facts(self, *, include_archived: bool = False, include_inactive: bool = False, category: str | None = None,
              limit: int | None = None, order: Literal["time", "importance"] = "time",
              include_history: bool = False, offset: int = 0) -> list[Fact]:
        """This user's long-term facts (pages through ``GET /facts``; ``limit`` facts at most)."""
        params, wanted, start = wire.facts_query(
            include_archived=include_archived, include_inactive=include_inactive, category=category, limit=limit,
            order=order, include_history=include_history, offset=offset)
        found: list[Fact] = []
        following: int | None = start
        while following is not None and (wanted is None or len(found) < wanted):
            size = wire.PAGE if wanted is None else min(wire.PAGE, wanted - len(found))
            page, following = self._send(wire.facts_page(params, following, size))
            found.extend(page)
        return found

    def count_facts(self, *, include_archived: bool = False, include_inactive: bool = False,
                    category: str | None = None, include_history: bool = False) -> int:
        """How many facts :meth:`facts` lists with the same filters (``GET /facts``'s ``total``)."""
        return self._send(wire.facts_count(include_archived=include_archived, include_inactive=include_inactive,
                                            category=category, include_history=include_history))

    def entities(self, *, type: str | None = None, limit: int | None = None) -> list[Entity]:
        """This user's entities, most mentioned first (``GET /entities``)."""
        return self._send(wire.entities(type=type, limit=limit))

    def triples(self, entity: str | None = None) -> list[Triple]:
        """This user's relations, optionally those touching ``entity`` (``GET /triples``)."""
        return self._send(wire.triples(entity))

    def episodes(self, *, days: float | None = None, session_id: str | None = None,
                 limit: int | None = None) -> list[Episode]:
        """This user's episodic log, oldest first (``GET /episodes``)."""
        return self._send(wire.episodes(days=days, session_id=session_id, limit=limit))

    def profile(self, *, as_of: datetime | str | float | None = None) -> Profile:
        """The user's key facts, safety first (``GET /profile``; see ``UnifiedMemory.profile``)."""
        return self._send(wire.profile(as_of=as_of))

    def stats(self) -> MemoryStats:
        """Counts of what this user's memory holds (``GET /stats``; ``path`` is None)."""
        return self._send(wire.stats())

    def users(self) -> list[str]:
        """Every user with memories in the server's file (``GET /v1/users``: needs an admin key)."""
        return self._send(wire.users())

    # -- keyed items ------------------------------------------------------------------------------

    def put_item(self, namespace: Sequence[str], key: str, value: Mapping[str, Any], *,
                 index: list[str] | bool | None = None, ttl: float | None = None,
                 vectors: Sequence[Sequence[float]] | None = None) -> None:
        """Store a keyed item of this user (``PUT /items``; see ``UnifiedMemory.put_item``)."""
        self._send(wire.put_item(namespace, key, value, index=index, ttl=ttl, vectors=vectors))

    def get_item(self, namespace: Sequence[str], key: str, *, refresh_ttl: bool = True) -> StoredItem | None:
        """One keyed item of this user, or ``None`` (``POST /items/get``)."""
        return self._send(wire.get_item(namespace, key, refresh_ttl=refresh_ttl))

    def delete_item(self, namespace: Sequence[str], key: str) -> bool:
        """Delete one keyed item of this user; whether there was one (``POST /items/delete``)."""
        return self._send(wire.delete_item(namespace, key))

    def search_items(self, namespace_prefix: Sequence[str], *, query: str | None = None,
                     filter: Mapping[str, Any] | None = None, limit: int = 10, offset: int = 0,
                     refresh_ttl: bool = True, query_vector: Sequence[float] | None = None,
                     distance_type: str = "cosine") -> list[StoredItem]:
        """This user's keyed items under a prefix, filtered, ranked by ``query`` (``POST /items/search``)."""
        return self._send(wire.search_items(namespace_prefix, query=query, filter=filter, limit=limit, offset=offset,
                                            refresh_ttl=refresh_ttl, query_vector=query_vector,
                                            distance_type=distance_type))

    def item_namespaces(self, *, prefix: Sequence[str] | None = None, suffix: Sequence[str] | None = None,
                        max_depth: int | None = None, limit: int = 100, offset: int = 0) -> list[tuple[str, ...]]:
        """The namespaces holding this user's keyed items (``POST /items/namespaces``)."""
        return self._send(wire.item_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth, limit=limit,
                                               offset=offset))

    # -- moving and forgetting ---------------------------------------------------------------------

    def export_jsonl(self, destination: str | os.PathLike[str] | Any, *, all_users: bool = False) -> int:
        """This user's rows as JSON Lines (``GET /export``, streamed into ``destination``: a path,
        written atomically, or a text stream); returns the row lines. ``all_users=True`` is refused."""
        wire.check_export(all_users)
        with export_destination(destination) as out:
            return self._connection.export(self._scope, out.write)

    def import_jsonl(self, source: str | os.PathLike[str] | Any, *, user_id: str | None = None) -> int:
        """Import an export (a path or a text stream) into this user, or ``user_id`` (``POST /import``);
        returns the rows imported. The server validates it whole: a bad file imports nothing."""
        user = wire.check_user("user_id", user_id, optional=True)
        return self._send(wire.import_rows(user), content=source_bytes(source))

    def forget(self, *, user_id: str | None = None, ids: Sequence[str] | None = None) -> dict[str, int]:
        """Without ``ids``: everything of ``user_id`` (this user by default; ``DELETE /v1/users/{user}``).
        With ``ids`` (message, fact, entity or relation ids of that user): those items and what derives
        from them, in one transaction (``POST /forget``; an unknown id raises ``NotFoundError`` naming
        ``ids`` and deletes nothing)."""
        user, item_ids = wire.check_forget(user_id, ids)
        if item_ids is None:
            return self._send(wire.forget_user(user))
        return self._send(wire.forget_items(item_ids, user))
