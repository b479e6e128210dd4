"""The memory as a Google ADK memory service (``pip install "unified-memory[google-adk]"``).

ADK's ``Runner`` hands its memory service to the agent's tools: ``load_memory`` (the model asks
with a query) and ``preload_memory`` (the user's message is the query, before every model call)
both call ``search_memory``; the host (or an ``after_agent_callback``) calls
``add_session_to_memory`` when a session has something worth keeping. :class:`UnifiedMemoryService`
is such a service over a :class:`~unified_memory.UnifiedMemory` (or a
:class:`~unified_memory.RemoteMemory`):

- every call runs on ``memory.scoped(user_id=<ADK's user_id>)``: one user's call never reads
  another's memories (a ``RemoteMemory`` whose key belongs to one user is refused by the
  service for any other user). ADK's ``app_name`` is the agent scope (``agent_id``): a search in
  one app never returns another app's memories; memories stored for the user without an agent
  (straight through the memory) are seen by every app. ``per_app=False`` shares one memory
  between the user's apps (the memory's own agent scope stays);
- ``add_session_to_memory`` / ``add_events_to_memory`` log the events as messages of the ADK
  session (session id = ADK's; the event's time): a user's text as a user message, an agent's as
  an assistant message named after the agent, function calls and responses as tool calls and
  tool results (``log_tools=False``: text only; ``load_memory``'s own are never logged: they are
  the memory's answers). Facts, people and relations are extracted as from any logged turn.
  Thoughts, partial (streamed) events and non-text parts are left out;
- adding a session again logs only its new events: which events were logged is kept in the
  memory itself (a keyed item of the user, namespace ``("google_adk", "logged_events")``), so it
  holds across restarts and hosts. A session whose events were removed (a rewind) keeps what was
  logged: only ``delete_memory`` or the memory's ``forget`` delete;
- ``search_memory`` answers with the memory's recall for the query (facts and past messages,
  best first by relevance, at most ``limit``) as ADK ``MemoryEntry`` items: the text as one
  part, the author (the ADK author of the message, ``user`` for a fact), the time (ISO 8601),
  and the id ``delete_memory`` takes. Each memory returned matches the query itself: by a word
  of its own, or (with embeddings) by meaning, at a cosine similarity of at least
  ``min_similarity``; a turn the recall found only through a neighbouring turn that matched is
  left out, and near-duplicates are not pushed down (``diversify=True`` turns that on);
- ``add_memory`` stores ``MemoryEntry`` texts as facts (``importance``, ``category``,
  ``ttl_days`` in the custom metadata are the facts' own; a known fact is reinforced, not
  duplicated); ``delete_memory`` forgets one memory of the user by its id.

.. code-block:: python

    from google.adk.runners import Runner
    from google.adk.tools import load_memory
    from unified_memory import UnifiedMemory
    from unified_memory.integrations.google_adk import UnifiedMemoryService

    memory_service = UnifiedMemoryService(UnifiedMemory("memory.db"), limit=8)
    runner = Runner(agent=agent, app_name="assistant", session_service=sessions, memory_service=memory_service)
    ...  # after a turn: await memory_service.add_session_to_memory(session)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from unified_memory.errors import DependencyError, NotFoundError, UnifiedMemoryError, invalid, wrong_type
from unified_memory.integrations._checks import check_memory
from unified_memory.validation import (
    MAX_LIMIT,
    check_bool,
    check_json,
    check_limit,
    check_scope_id,
    check_tiers,
    check_unit,
    to_message,
)

INSTALL_HINT = 'pip install "unified-memory[google-adk]"'

try:
    from google.adk.events.event import Event
    from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions.session import Session
    from google.genai import types
except ImportError as exc:  # tests/integrations/test_google_adk.py
    raise DependencyError(f"unified_memory.integrations.google_adk needs google-adk: {INSTALL_HINT}") from exc

__all__ = ["UnifiedMemoryService", "INSTALL_HINT", "DEFAULT_TIERS", "DEFAULT_MIN_SIMILARITY", "RECORD_NAMESPACE",
           "METADATA_KEY"]

#: The memory methods the service calls (a UnifiedMemory and a RemoteMemory both have them).
_NEEDED = ("aadd_messages", "arecall", "aremember_many", "aforget", "aepisodes", "aget_item", "aput_item", "scoped")
#: What ``search_memory`` recalls by default: facts and messages (the current and past ones).
DEFAULT_TIERS = ("long_term", "short_term", "episodic")
#: Where the ids of the events logged per (app, session) are kept (a keyed item of the user).
RECORD_NAMESPACE = ("google_adk", "logged_events")
#: The metadata key of a logged message (and of the facts extracted from it): its ADK event.
METADATA_KEY = "google_adk"
#: ADK's memory tools: their calls and results are the memory's own answers, never logged again.
_MEMORY_TOOLS = frozenset({"load_memory", "preload_memory"})
_FACT_OPTIONS = ("importance", "category", "ttl_days")
#: The least cosine similarity of a memory ``search_memory`` returns for its meaning alone (no
#: word of the query in it). Measured with the bundled all-MiniLM-L6-v2: paraphrases that answer
#: a question ("Do I have a pet?" / "My dog Biscuit loves the beach") score 0.34 and up, and
#: most unrelated memories a dense search pads its results with score below 0.3.
DEFAULT_MIN_SIMILARITY = 0.3


def _event_key(event: Any) -> str:
    """The event's id; for an event without one, a hash of its author, time and content (as
    ADK's SQLite memory service does), so adding it again is recognised."""
    event_id = getattr(event, "id", None)
    if isinstance(event_id, str) and event_id:
        return event_id
    content = event.content.model_dump_json(exclude_none=True) if event.content is not None else ""
    payload = f"{getattr(event, 'author', '')}:{getattr(event, 'timestamp', '')}:{content}"
    return "sha256:" + hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _when(event: Any) -> float | None:
    stamp = getattr(event, "timestamp", None)
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not math.isfinite(stamp):
        return None
    return float(stamp)


def _json_text(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False, default=str, sort_keys=True)


def _event_messages(event: Any, key: str, *, tools: bool, custom: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The messages one event is logged as (none for an event without text or tool parts)."""
    content = getattr(event, "content", None)
    if content is None or not content.parts or getattr(event, "partial", None) is True:
        return []
    author = event.author if isinstance(getattr(event, "author", None), str) else ""
    texts: list[str] = []
    calls: list[types.FunctionCall] = []
    results: list[types.FunctionResponse] = []
    for part in content.parts:
        if part.thought:
            continue
        if part.text:
            texts.append(part.text)
        elif tools and part.function_call is not None and part.function_call.name not in _MEMORY_TOOLS:
            calls.append(part.function_call)
        elif tools and part.function_response is not None and part.function_response.name not in _MEMORY_TOOLS:
            results.append(part.function_response)
    text = "\n".join(texts).strip()
    said_by_user = author == "user" or (not author and content.role == "user")
    messages: list[dict[str, Any]] = []
    if said_by_user and text:
        messages.append({"role": "user", "content": text})
    if (text and not said_by_user) or calls:
        message: dict[str, Any] = {"role": "assistant", "content": None if said_by_user else (text or None)}
        if author and not said_by_user:
            message["name"] = author
        if calls:
            message["tool_calls"] = [
                {"id": call.id or f"{key}:{i}", "type": "function",
                 "function": {"name": call.name or "function", "arguments": _json_text(call.args)}}
                for i, call in enumerate(calls)]
        messages.append(message)
    for i, result in enumerate(results):
        messages.append({"role": "tool", "tool_call_id": result.id or f"{key}:{i}", "name": result.name or None,
                         "content": _json_text(result.response)})
    about: dict[str, Any] = {"event_id": key, "author": author or None}
    invocation = getattr(event, "invocation_id", None)
    if isinstance(invocation, str) and invocation:
        about["invocation_id"] = invocation
    if custom:
        about["custom_metadata"] = dict(custom)
    when = _when(event)
    for message in messages:
        message["metadata"] = {METADATA_KEY: about}
        if when is not None:
            message["when"] = when
    return messages


def _matches_itself(hit: Any, min_similarity: float) -> bool:
    """Whether a recall hit matches the query itself: a word of the query in its own text (a
    message is searched with its neighbour turns: ``own_match`` says whether its own text had
    one), or its meaning (a cosine similarity of at least ``min_similarity``). The present value
    of a past one that matched (``successor_of``) and an entity reached from a named one
    (``hop_from``) are the recall's answers to the query: they are kept."""
    parts = hit.components
    if "successor_of" in parts or "hop_from" in parts:
        return True
    if hit.tier in ("short_term", "episodic"):
        if parts.get("own_match", True) is not False:
            return True
    elif parts.get("matched", "x"):  # the query words its lexical index matched ("" for none)
        return True
    cosine = parts.get("cosine")
    return isinstance(cosine, int | float) and not isinstance(cosine, bool) and cosine >= min_similarity


def _content_text(content: Any) -> str:
    parts = getattr(content, "parts", None) or []
    return "\n".join(p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", None)).strip()


def _entry(hit: Any) -> MemoryEntry:
    """A recall hit as ADK's ``MemoryEntry``: a fact is the user's, a message its author's."""
    about = hit.metadata.get(METADATA_KEY) if isinstance(hit.metadata.get(METADATA_KEY), dict) else {}
    author = about.get("author") if isinstance(about.get("author"), str) else None
    role = hit.components.get("role")
    if hit.tier in ("short_term", "episodic"):
        author = author or ("user" if role == "user" else None)
        content_role = "user" if role == "user" else "model"
    else:  # facts (and entities when asked for) come from what the user said
        author, content_role = author or "user", "user"
    custom: dict[str, Any] = {"tier": hit.tier, "score": hit.score}
    for name in ("status", "session_id"):
        if isinstance(hit.components.get(name), str):
            custom[name] = hit.components[name]
    for name in ("event_id", "custom_metadata"):
        if about.get(name) is not None:
            custom[name] = about[name]
    return MemoryEntry(id=hit.id, author=author, custom_metadata=custom,
                       content=types.Content(role=content_role, parts=[types.Part(text=hit.text)]),
                       timestamp=hit.created_at.isoformat() if hit.created_at is not None else None)


class UnifiedMemoryService(BaseMemoryService):
    """A Google ADK ``BaseMemoryService`` over unified-memory (see the module docstring).

    ``memory``: a :class:`~unified_memory.UnifiedMemory` or :class:`~unified_memory.RemoteMemory`
    (each call scopes it to ADK's user and app). ``limit``: the most memories a search returns.
    ``tiers``: what a search recalls (default :data:`DEFAULT_TIERS`, facts and messages; add
    ``"entity"`` for people and things). ``per_app``: ADK's app is the agent scope (``False``: the
    user's apps share one memory). ``extract``: extract facts from logged events (``None``: the
    memory's setting). ``log_tools``: log function calls and responses besides text.
    ``min_similarity``: the least cosine similarity (0 to 1) of a memory a search returns for its
    meaning alone, without a word of the query in it (default :data:`DEFAULT_MIN_SIMILARITY`;
    with lexical retrieval every memory returned has a word of the query). ``diversify``: push
    down memories that restate a better one (the memory's ``RankingConfig.diversity``); off, a
    search ranks by relevance alone.
    """

    def __init__(self, memory: Any, *, limit: int = 10, tiers: Sequence[str] | str | None = DEFAULT_TIERS,
                 per_app: bool = True, extract: bool | None = None, log_tools: bool = True,
                 min_similarity: float = DEFAULT_MIN_SIMILARITY, diversify: bool = False) -> None:
        self.memory = check_memory(memory, _NEEDED)
        self.limit = check_limit("limit", limit)
        self.tiers = check_tiers("tiers", tiers)
        self.per_app = check_bool("per_app", per_app)
        if extract is not None and not isinstance(extract, bool):
            raise wrong_type("extract", "bool or None", extract)
        self.extract = extract
        self.log_tools = check_bool("log_tools", log_tools)
        self.min_similarity = check_unit("min_similarity", min_similarity, optional=False)
        self.diversify = check_bool("diversify", diversify)
        # one write per (loop, user, app, session) at a time in this process; entries live while used
        self._locks: weakref.WeakValueDictionary[tuple[Any, ...], asyncio.Lock] = weakref.WeakValueDictionary()

    def __repr__(self) -> str:
        return f"UnifiedMemoryService(memory={self.memory!r}, limit={self.limit})"

    def _scoped(self, app_name: Any, user_id: Any, session_id: Any = None, *, where: str = "") -> Any:
        """The memory of ADK's user (and app, and session), each id checked and named."""
        user = check_scope_id(f"{where}user_id", user_id)
        app = check_scope_id(f"{where}app_name", app_name)
        session = check_scope_id(f"{where}{'id' if where else 'session_id'}", session_id, optional=True)
        return self.memory.scoped(user_id=user, agent_id=app if self.per_app else None, session_id=session)

    # -- writing --------------------------------------------------------------------------------

    async def add_session_to_memory(self, session: Session) -> None:
        """Log the session's events not logged yet (a session may be added after every turn)."""
        if not isinstance(session, Session):
            raise wrong_type("session", "a google.adk Session", session)
        memory = self._scoped(session.app_name, session.user_id, session.id, where="session.")
        await self._log(memory, session.app_name, list(session.events or []), None, field="session.events")

    async def add_events_to_memory(self, *, app_name: str, user_id: str, events: Sequence[Event],
                                   session_id: str | None = None,
                                   custom_metadata: Mapping[str, object] | None = None) -> None:
        """Log these events (a delta: those logged before are skipped) under ``session_id`` (``None``:
        the memory's own session). ``custom_metadata`` is kept with each logged message."""
        memory = self._scoped(app_name, user_id, session_id)
        if isinstance(events, str | bytes | Mapping) or not isinstance(events, Sequence):
            raise wrong_type("events", "a list of ADK Events", events)
        if custom_metadata is not None:
            if not isinstance(custom_metadata, Mapping):
                raise wrong_type("custom_metadata", "a dict or None", custom_metadata)
            check_json("custom_metadata", dict(custom_metadata))
        await self._log(memory, app_name, list(events), custom_metadata, field="events")

    async def _log(self, memory: Any, app_name: str, events: list[Any], custom: Mapping[str, Any] | None, *,
                   field: str) -> None:
        keyed: list[tuple[int, str, Any]] = []
        for i, event in enumerate(events):
            if not isinstance(event, Event):
                raise wrong_type(f"{field}[{i}]", "an ADK Event", event)
            keyed.append((i, _event_key(event), event))
        session = memory.session_id or ""
        record_key = json.dumps([app_name, session], ensure_ascii=False)
        lock_key = (id(asyncio.get_running_loop()), memory.user_id, app_name, session)
        lock = self._locks.get(lock_key)
        if lock is None:
            lock = self._locks[lock_key] = asyncio.Lock()
        async with lock:
            logged, pending = await self._logged(memory, record_key, session)
            done = set(logged)
            new_ids: list[str] = []
            batch: list[dict[str, Any]] = []
            for i, key, event in keyed:
                if key in done:
                    continue
                messages = _event_messages(event, key, tools=self.log_tools, custom=custom)
                for message in messages:  # checked before anything is written, named by the event
                    to_message(f"{field}[{i}]", message)
                if messages:
                    done.add(key)
                    new_ids.append(key)
                    batch.extend(messages)
            record = {"app_name": app_name, "session_id": session, "events": logged}
            if not batch:
                if pending:
                    await memory.aput_item(RECORD_NAMESPACE, record_key, {**record, "pending": []}, index=False)
                return
            # claim first: a crash between the two puts leaves ``pending``, settled by the next call
            await memory.aput_item(RECORD_NAMESPACE, record_key, {**record, "pending": new_ids}, index=False)
            try:
                await memory.aadd_messages(batch, extract=self.extract)
            except BaseException:
                try:
                    await memory.aput_item(RECORD_NAMESPACE, record_key, {**record, "pending": []}, index=False)
                except Exception:  # noqa: BLE001 - the next call settles the claim
                    pass
                raise
            await memory.aput_item(RECORD_NAMESPACE, record_key, {**record, "events": logged + new_ids, "pending": []},
                                   index=False)

    @staticmethod
    async def _logged(memory: Any, record_key: str, session: str) -> tuple[list[str], list[str]]:
        """The ids of the events logged for this app and session, and those of a write that did not
        finish (each of them counted as logged when its messages are in the log)."""
        item = await memory.aget_item(RECORD_NAMESPACE, record_key, refresh_ttl=False)
        value = item.value if item is not None else {}
        logged = [i for i in value.get("events") or [] if isinstance(i, str)]
        pending = [i for i in value.get("pending") or [] if isinstance(i, str)]
        if pending:
            episodes = await memory.aepisodes(session_id=session or None)
            there = {e.metadata[METADATA_KEY].get("event_id") for e in episodes
                     if isinstance(e.metadata.get(METADATA_KEY), dict)}
            known = set(logged)
            logged += [i for i in dict.fromkeys(pending) if i in there and i not in known]
        return logged, pending

    async def add_memory(self, *, app_name: str, user_id: str, memories: Sequence[MemoryEntry],
                         custom_metadata: Mapping[str, object] | None = None) -> None:
        """Store the entries' texts as facts of the user in this app (one transaction)."""
        memory = self._scoped(app_name, user_id)
        if isinstance(memories, str | bytes | Mapping) or not isinstance(memories, Sequence):
            raise wrong_type("memories", "a list of MemoryEntry", memories)
        if custom_metadata is not None and not isinstance(custom_metadata, Mapping):
            raise wrong_type("custom_metadata", "a dict or None", custom_metadata)
        facts: list[dict[str, Any]] = []
        for i, entry in enumerate(memories):
            if not isinstance(entry, MemoryEntry):
                raise wrong_type(f"memories[{i}]", "a MemoryEntry", entry)
            text = _content_text(entry.content)
            if not text:
                raise invalid(f"memories[{i}].content", "must have a text part")
            options = {**(custom_metadata or {}), **entry.custom_metadata}
            fact: dict[str, Any] = {name: options.pop(name) for name in _FACT_OPTIONS if name in options}
            about = {"author": entry.author, "memory_id": entry.id, "timestamp": entry.timestamp,
                     "custom_metadata": options or None}
            fact.update(text=text, metadata={METADATA_KEY: {k: v for k, v in about.items() if v is not None}})
            facts.append(fact)
        if not facts:
            return
        try:
            await memory.aremember_many(facts)
        except UnifiedMemoryError as exc:  # the memory names texts_or_facts[i]: here they are memories[i]
            name = exc.field or ""
            if not name.startswith("texts_or_facts["):
                raise
            renamed = "memories[" + name.removeprefix("texts_or_facts[")
            raise type(exc)(str(exc).replace(name, renamed, 1), field=renamed) from None

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        """Forget one memory of the user (an id from ``search_memory``) and what derives from it;
        an id the user does not have (or ``None``) deletes nothing."""
        memory = self._scoped(app_name, user_id)
        if memory_id is None:
            return
        if not isinstance(memory_id, str):
            raise wrong_type("memory_id", "str or None", memory_id)
        if not memory_id.strip():
            raise invalid("memory_id", "must not be empty")
        try:
            await memory.aforget(ids=[memory_id])
        except NotFoundError:
            return

    # -- reading --------------------------------------------------------------------------------

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        """The user's memories in this app that match ``query`` themselves, best first (at most
        ``limit``; none for a blank query)."""
        memory = self._scoped(app_name, user_id)
        if not isinstance(query, str):
            raise wrong_type("query", "str", query)
        if not query.strip():
            return SearchMemoryResponse()
        # neighbour turns found with a matching one are dropped: ask for more so ``limit`` still fills
        hits = await memory.arecall(query, limit=min(3 * self.limit, MAX_LIMIT), tiers=list(self.tiers),
                                    diversify=self.diversify)
        kept = [hit for hit in hits if _matches_itself(hit, self.min_similarity)][:self.limit]
        return SearchMemoryResponse(memories=[_entry(hit) for hit in kept])
