"""The memory as an AutoGen memory (``pip install "unified-memory[autogen]"``).

An AutoGen agent (``AssistantAgent(..., memory=[...])``) calls ``update_context`` on each of its
memories before every model call. :class:`AutoGenMemory` is such a memory over a
:class:`~unified_memory.UnifiedMemory` (or a :class:`~unified_memory.RemoteMemory`), for the
user that memory is scoped to:

- ``add(MemoryContent)`` stores the content as a long-term fact (``remember``): recall finds it
  by its words (and meaning, with a hybrid memory), the people, places and relations in it go
  to the graph, and its metadata comes back from ``query``. Text (``text/plain``,
  ``text/markdown``, any ``text/*``) is stored as it is (without surrounding blanks);
  ``application/json`` content (a dict) as its JSON text, and comes back as the dict. Images
  and binary content are refused (``MemoryValueError`` naming ``content.mime_type``): store a
  text description of them instead. A fact the memory already holds is reinforced, not
  stored twice, and keeps its first metadata; a fact that changes a single-valued one ("I live
  in Porto" after "... Lisbon") supersedes it, as in any use of the memory.
- ``query(text)`` is the memory's recall over its long-term facts (``tiers=`` widens it:
  ``"entity"``, ``"episodic"``): at most ``k`` ``MemoryContent`` items, best first, each with
  its metadata and ``score`` (the recall score: relevance to the query, weighed by importance
  and recency; a full match scores 0.6 to 1), ``id``, ``tier``,
  ``created_at`` (ISO 8601) and ``status`` when the fact is ``superseded`` or ``archived``.
  Keyword options: ``k`` (also ``limit`` / ``top_k``), ``score_threshold``, ``where`` (metadata
  values the items must have), ``tiers``. A blank query finds nothing.
- ``update_context(model_context)`` makes a query of the latest user message(s) of the
  context, adds the memory's context block for it (facts, people and places, past turns: at
  most ``k`` memories within ``max_tokens``, their text escaped) as a ``SystemMessage``, and
  returns the memories in it. Nothing is added when nothing is relevant (or nothing reaches
  ``score_threshold``). A context with no message to query by gets the most important facts
  (their ``score`` is then their importance).
- ``clear()`` forgets the facts this adapter's ``add`` stored under its ``name`` (active,
  superseded and archived alike), with what the memory drew only from them (people, places
  and relations). Nothing else of the user is touched: facts said in conversations, facts
  another adapter (another ``name``) added, logged messages.
- ``close()`` closes the memory only when the adapter opened it (``load_component`` /
  ``_from_config``); a memory passed in stays open for its owner.
- ``add_messages(messages)`` (not part of AutoGen's protocol) logs a conversation (AutoGen
  chat messages, a ``TaskResult``, or model messages) in the memory: facts, people and
  relations are extracted from what the user said, as from any logged turn.

The query and the context read the user's whole memory, not only what ``add`` stored: what
was learnt in conversations, through another adapter or another ``name`` too.

The adapter is an AutoGen component: ``dump_component()`` writes where the memory is (the
SQLite file, or the PostgreSQL URL without its password, or the service's URL; never an API
key) and the options; ``AutoGenMemory.load_component(...)`` opens it again. An in-process
memory (path ``None``) and plug-ins (extractor, embedder...) are not carried by the config.

.. code-block:: python

    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.memory import MemoryContent
    from unified_memory import UnifiedMemory
    from unified_memory.integrations.autogen import AutoGenMemory

    memory = AutoGenMemory(UnifiedMemory("memory.db", user_id="ada"), k=5)
    await memory.add(MemoryContent(content="The user prefers metric units", mime_type="text/plain"))
    agent = AssistantAgent("assistant", model_client=client, memory=[memory])
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from unified_memory.errors import DependencyError, UnifiedMemoryError, invalid, wrong_type
from unified_memory.validation import check_limit, check_metadata, check_scope_id, check_text, check_unit

INSTALL_HINT = 'pip install "unified-memory[autogen]"'

try:
    from autogen_core import CancellationToken, Component, Image
    from autogen_core.memory import (
        Memory,
        MemoryContent,
        MemoryMimeType,
        MemoryQueryResult,
        UpdateContextResult,
    )
    from autogen_core.model_context import ChatCompletionContext
    from autogen_core.models import (
        AssistantMessage,
        FunctionExecutionResultMessage,
        SystemMessage,
        UserMessage,
    )
    from pydantic import BaseModel, ConfigDict, Field, SecretStr
except ImportError as exc:  # tests/integrations/test_without_frameworks.py
    raise DependencyError(f"unified_memory.integrations.autogen needs autogen-core: {INSTALL_HINT}") from exc

_CHAT: tuple[type, ...] = ()  # autogen-agentchat's chat messages and events (when it is installed)
_EVENTS: tuple[type, ...] = ()
try:
    from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage

    _CHAT, _EVENTS = (BaseChatMessage,), (BaseAgentEvent,)
except ImportError:  # autogen-core alone: model messages only
    pass

__all__ = ["AutoGenMemory", "AutoGenMemoryConfig", "INSTALL_HINT", "NAME_KEY", "MIME_KEY", "API_KEY_ENV"]

T = TypeVar("T")

#: Metadata keys of a stored fact: the adapter ``name`` that added it, and its content's MIME type.
NAME_KEY, MIME_KEY = "autogen_memory", "autogen_mime_type"
#: Where a loaded config's memory service key is read from when the config holds none.
API_KEY_ENV = "UNIFIED_MEMORY_API_KEY"
#: The memory methods the adapter calls (a UnifiedMemory and a RemoteMemory both have them).
_NEEDED = ("aremember", "arecall", "acontext", "afacts", "aforget", "aadd_messages")
_QUERY_OPTIONS = ("k", "limit", "top_k", "score_threshold", "where", "tiers")
_PAGE = 500  # facts read per request by clear()
_JSON = MemoryMimeType.JSON.value


class AutoGenMemoryConfig(BaseModel):
    """The component config of :class:`AutoGenMemory`: its options and where its memory is.

    ``path``: a SQLite file or PostgreSQL URL (a password comes from ``PGPASSWORD`` or
    ``~/.pgpass``); ``url``: a memory service (its key: ``api_key``, else the
    ``UNIFIED_MEMORY_API_KEY`` environment variable); neither: a new in-process memory.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="default", description="The adapter's name: clear() forgets what it added under it.")
    k: int = Field(default=10, description="The most memories a query returns and the context holds.")
    score_threshold: float | None = Field(default=None, description="The least recall score a memory needs.")
    max_tokens: int = Field(default=1000, description="The most tokens update_context adds.")
    query_messages: int = Field(default=1, description="How many of the latest user messages make the query.")
    importance: float | None = Field(default=None, description="Importance of added facts (None: the memory's).")
    path: str | None = Field(default=None, description="A SQLite file or PostgreSQL URL of a UnifiedMemory.")
    url: str | None = Field(default=None, description="A memory service's URL (a RemoteMemory).")
    api_key: SecretStr | None = Field(default=None, description=f"The service's key (default: ${API_KEY_ENV}).")
    user_id: str = Field(default="default", description="The user the memory is scoped to.")
    agent_id: str | None = None
    session_id: str | None = None
    memory_config: dict[str, Any] | None = Field(default=None, description="MemoryConfig fields of a UnifiedMemory.")


def _mime(content: MemoryContent) -> str:
    kind = content.mime_type
    return str(kind.value if isinstance(kind, MemoryMimeType) else kind)


def _stored_text(content: MemoryContent) -> tuple[str, str]:
    """The text a content is stored as, and its MIME type (refusing what is not text or JSON)."""
    if not isinstance(content, MemoryContent):
        raise wrong_type("content", "MemoryContent", content)
    mime, value = _mime(content), content.content
    if mime == _JSON:
        if not isinstance(value, dict):
            raise invalid("content.content", f"JSON content must be a dict, got {type(value).__name__}")
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise invalid("content.content", f"JSON content must be JSON-serialisable: {exc}") from None
    elif mime.startswith("text/") and not isinstance(value, Image):
        if not isinstance(value, str):
            raise wrong_type("content.content", f"str for {mime} content", value)
        text = value
    else:
        raise invalid("content.mime_type", f"Unsupported content type {mime!r}: text (text/plain, text/markdown, "
                                           "text/*) and JSON (application/json) are stored; store a text "
                                           "description of an image or a file instead")
    return check_text("content.content", text), mime


def _query_text(query: Any) -> str:
    if isinstance(query, str):
        return query
    if isinstance(query, MemoryContent):
        if _mime(query) == _JSON and isinstance(query.content, dict):
            return json.dumps(query.content, ensure_ascii=False, default=str)
        if isinstance(query.content, str):
            return query.content
        raise invalid("query", f"Unsupported content type {_mime(query)!r}: a query is text or JSON")
    raise wrong_type("query", "str or MemoryContent", query)


def _content(hit: Any) -> MemoryContent:
    """A recall hit as AutoGen memory content (a fact ``add`` stored comes back as it was added)."""
    metadata = dict(hit.metadata or {})
    metadata.pop(NAME_KEY, None)
    mime = metadata.pop(MIME_KEY, None)
    value: Any = hit.text
    kind: MemoryMimeType | str = MemoryMimeType.TEXT
    if hit.tier == "long_term" and isinstance(mime, str):
        if mime == _JSON:
            try:
                parsed = json.loads(hit.text)
            except ValueError:  # changed on the way in (a redactor): its text, as text
                parsed = None
            if isinstance(parsed, dict):
                value, kind = parsed, MemoryMimeType.JSON
        else:
            kind = next((m for m in MemoryMimeType if m.value == mime), mime)
    metadata.update(score=hit.score, id=hit.id, tier=hit.tier)
    if hit.created_at is not None:
        metadata["created_at"] = hit.created_at.isoformat()
    status = (hit.components or {}).get("status")
    if isinstance(status, str) and status != "active":
        metadata["status"] = status
    return MemoryContent(content=value, mime_type=kind, metadata=metadata)


def _threshold(field: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(field, "a number or None", value)
    if not math.isfinite(value):
        raise invalid(field, f"must be a finite number, got {value!r}")
    return float(value)


def _without_password(path: str | None) -> str | None:
    """A PostgreSQL URL without its password (a file path as it is)."""
    if not path or "://" not in path:
        return path
    parts = urlsplit(path)
    if parts.password is None:
        return path
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    netloc = f"{parts.username or ''}@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _model_text(message: Any) -> str:
    """The text of a model message's content (its strings; images and function calls left out)."""
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        return "\n".join(part for part in content if isinstance(part, str)).strip()
    return ""


class AutoGenMemory(Memory, Component[AutoGenMemoryConfig]):
    """An AutoGen ``Memory`` over unified-memory (see the module docstring).

    ``memory``: a :class:`~unified_memory.UnifiedMemory` or :class:`~unified_memory.RemoteMemory`,
    scoped to the user (``memory.scoped(user_id=...)``). ``name``: what ``clear`` forgets is
    what was added under this name. ``k``: the most memories a query returns and the context
    holds; ``score_threshold``: the least recall score they need (``None``: any).
    ``max_tokens``: the most tokens ``update_context`` adds. ``query_messages``: how many of the
    latest user messages make its query. ``importance``: the importance of added facts
    (``None``: the memory's importance scorer decides).
    """

    component_type = "memory"
    component_config_schema = AutoGenMemoryConfig
    component_provider_override = "unified_memory.integrations.autogen.AutoGenMemory"

    def __init__(self, memory: Any, *, name: str = "default", k: int = 10, score_threshold: float | None = None,
                 max_tokens: int = 1000, query_messages: int = 1, importance: float | None = None) -> None:
        missing = [method for method in _NEEDED if not callable(getattr(memory, method, None))]
        if missing:
            raise wrong_type("memory", "a UnifiedMemory or RemoteMemory (with " + ", ".join(missing) + ")", memory)
        self._memory = memory
        self._name = check_scope_id("name", name)
        self.k = check_limit("k", k)
        self.score_threshold = _threshold("score_threshold", score_threshold)
        self.max_tokens = check_limit("max_tokens", max_tokens)
        self.query_messages = check_limit("query_messages", query_messages)
        self.importance = check_unit("importance", importance)
        self._owns_memory = False
        self._closed = False

    @property
    def name(self) -> str:
        """The adapter's name: ``clear`` forgets the facts added under it."""
        return self._name

    @property
    def memory(self) -> Any:
        """The memory behind the adapter."""
        return self._memory

    def __repr__(self) -> str:
        return f"AutoGenMemory(name={self._name!r}, memory={self._memory!r})"

    @staticmethod
    async def _cancellable(work: Awaitable[T], cancellation_token: CancellationToken | None) -> T:
        """Await ``work``, cancelled with the token (a write already under way may still complete)."""
        if cancellation_token is None:
            return await work
        if not isinstance(cancellation_token, CancellationToken):
            raise wrong_type("cancellation_token", "CancellationToken or None", cancellation_token)
        future = asyncio.ensure_future(work)
        cancellation_token.link_future(future)
        return await future

    # -- AutoGen's Memory protocol ------------------------------------------------------------------

    async def add(self, content: MemoryContent, cancellation_token: CancellationToken | None = None) -> None:
        """Store the content as a long-term fact of the user, with its metadata (see the module docstring)."""
        text, mime = _stored_text(content)
        metadata = check_metadata("content.metadata", content.metadata)
        reserved = sorted({NAME_KEY, MIME_KEY} & set(metadata))
        if reserved:
            raise invalid("content.metadata", f"{reserved} are keys the adapter keeps; use other names")
        metadata.update({NAME_KEY: self._name, MIME_KEY: mime})
        try:
            await self._cancellable(self._memory.aremember(text, importance=self.importance, metadata=metadata),
                                    cancellation_token)
        except UnifiedMemoryError as exc:  # the memory names text / metadata: here they are the content's
            renamed = {"text": "content.content", "metadata": "content.metadata"}.get(exc.field or "")
            if renamed is None:
                raise
            raise type(exc)(f"{renamed}: {str(exc).removeprefix(f'{exc.field}: ')}", field=renamed) from None

    async def query(self, query: str | MemoryContent = "", cancellation_token: CancellationToken | None = None,
                    **kwargs: Any) -> MemoryQueryResult:
        """The memories relevant to the query, best first (options: ``k``, ``score_threshold``,
        ``where``, ``tiers``; see the module docstring)."""
        text = _query_text(query)
        unknown = sorted(set(kwargs) - set(_QUERY_OPTIONS))
        if unknown:
            raise invalid(unknown[0], "is not an option of AutoGenMemory.query (it takes " +
                          ", ".join(_QUERY_OPTIONS) + ")")
        counts = [name for name in ("k", "limit", "top_k") if kwargs.get(name) is not None]
        if len(counts) > 1:
            raise invalid(counts[1], f"gives the number of results again (with {counts[0]}); give one of them")
        k = check_limit(counts[0], kwargs[counts[0]]) if counts else self.k
        threshold = (_threshold("score_threshold", kwargs["score_threshold"]) if "score_threshold" in kwargs
                     else self.score_threshold)
        where = kwargs.get("where")
        if where is not None and not isinstance(where, Mapping):
            raise wrong_type("where", "a dict of metadata values", where)
        tiers = kwargs.get("tiers") or "long_term"
        if not text.strip():
            return MemoryQueryResult(results=[])
        hits = await self._cancellable(self._memory.arecall(text, limit=k, tiers=tiers, where=where),
                                       cancellation_token)
        return MemoryQueryResult(results=[_content(hit) for hit in hits
                                          if threshold is None or hit.score >= threshold])

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add the memory's context block for the latest user message(s) (with no message to
        query by, the most important facts) as a system message; returns the memories in it
        (none, and nothing added, when nothing is relevant)."""
        if not isinstance(model_context, ChatCompletionContext):
            raise wrong_type("model_context", "ChatCompletionContext", model_context)
        query = self._context_query(await model_context.get_messages()) or None
        nothing = UpdateContextResult(memories=MemoryQueryResult(results=[]))
        limit = self.k
        if query is not None and self.score_threshold is not None:  # the block holds recall's best `limit`
            hits = await self._memory.arecall(query, limit=self.k)
            limit = sum(1 for hit in hits if hit.score >= self.score_threshold)
            if not limit:
                return nothing
        block = await self._memory.acontext(query, max_tokens=self.max_tokens, include_conversation=False,
                                            limit=limit)
        if not block.text:
            return nothing
        await model_context.add_message(SystemMessage(content=block.text))
        return UpdateContextResult(memories=MemoryQueryResult(results=[_content(hit) for hit in block.hits]))

    def _context_query(self, messages: Sequence[Any]) -> str:
        """The latest ``query_messages`` user messages with text (the latest assistant ones when
        there is none; system messages, tool calls and results never)."""
        said: list[Any] = [m for m in messages if isinstance(m, UserMessage) and _model_text(m)]
        if not said:
            said = [m for m in messages if isinstance(m, AssistantMessage) and _model_text(m)]
        return "\n".join(_model_text(m) for m in said[-self.query_messages:])

    async def clear(self) -> None:
        """Forget the facts ``add`` stored under this adapter's name, and what the memory drew only
        from them; nothing else of the user (see the module docstring)."""
        ids: list[str] = []
        offset = 0
        while True:
            page = await self._memory.afacts(include_inactive=True, limit=_PAGE, offset=offset)
            ids.extend(fact.id for fact in page if (fact.metadata or {}).get(NAME_KEY) == self._name)
            if len(page) < _PAGE:
                break
            offset += _PAGE
        if ids:
            await self._memory.aforget(ids=ids)

    async def close(self) -> None:
        """Close the memory if the adapter opened it (``load_component``); a memory passed in stays open."""
        if not self._owns_memory or self._closed:
            return
        self._closed = True
        closer = getattr(self._memory, "aclose", None)
        if callable(closer):
            await closer()
        else:
            await asyncio.to_thread(self._memory.close)

    # -- beyond the protocol ------------------------------------------------------------------------

    async def add_messages(self, messages: Any, *, user_sources: Iterable[str] = ("user",),
                           extract: bool | None = None) -> list[str]:
        """Log a conversation in the memory; returns the ids of the messages logged.

        ``messages``: AutoGen chat messages (``TextMessage``... from ``result.messages``, events
        left out), a ``TaskResult``, or model messages (``UserMessage``, ``AssistantMessage``;
        system messages and tool calls left out). A chat message whose ``source`` is in
        ``user_sources`` is the user's; the others are the assistant's, named by their source.
        ``extract``: extract facts from what the user said (``None``: the memory's setting).
        What is logged stays in the memory's history: ``clear`` does not forget it.
        """
        if hasattr(messages, "messages") and not isinstance(messages, Sequence):
            messages = messages.messages  # a TaskResult
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
            raise wrong_type("messages", "a list of AutoGen messages or a TaskResult", messages)
        sources = {user_sources} if isinstance(user_sources, str) else set(user_sources)
        batch: list[dict[str, Any]] = []
        for i, message in enumerate(messages):
            logged = self._logged(message, sources, f"messages[{i}]")
            if logged is not None:
                batch.append(logged)
        if not batch:
            return []
        return list(await self._memory.aadd_messages(batch, extract=extract))

    @staticmethod
    def _logged(message: Any, user_sources: set[str], field: str) -> dict[str, Any] | None:
        """The memory message an AutoGen message is logged as (``None``: nothing to log)."""
        if isinstance(message, UserMessage | AssistantMessage):
            text = _model_text(message)
            role = "user" if isinstance(message, UserMessage) else "assistant"
            source = getattr(message, "source", None)
        elif isinstance(message, (SystemMessage, FunctionExecutionResultMessage, *_EVENTS)):
            return None  # the memory's own block, a tool's result, an agent's event
        elif isinstance(message, _CHAT):
            chat: Any = message
            text, source = chat.to_model_text().strip(), chat.source
            role = "user" if source in user_sources else "assistant"
        else:
            raise wrong_type(field, "an AutoGen chat message or model message", message)
        if not text:
            return None
        logged: dict[str, Any] = {"role": role, "content": text}
        if role == "assistant" and isinstance(source, str) and source:
            logged["name"] = source
        return logged

    # -- the component config -----------------------------------------------------------------------

    def _to_config(self) -> AutoGenMemoryConfig:
        memory = self._memory
        url = getattr(memory, "url", None)
        settings = getattr(memory, "config", None) if url is None else None
        return AutoGenMemoryConfig(
            name=self._name, k=self.k, score_threshold=self.score_threshold, max_tokens=self.max_tokens,
            query_messages=self.query_messages, importance=self.importance,
            path=None if url is not None else _without_password(getattr(memory, "path", None)),
            url=url if isinstance(url, str) else None, user_id=getattr(memory, "user_id", "default"),
            agent_id=getattr(memory, "agent_id", None), session_id=getattr(memory, "session_id", None),
            memory_config=settings.model_dump(mode="json", exclude_defaults=True) if isinstance(settings, BaseModel)
            else None)

    @classmethod
    def _from_config(cls, config: AutoGenMemoryConfig) -> AutoGenMemory:
        from unified_memory import RemoteMemory, UnifiedMemory

        if config.url is not None and config.path is not None:
            raise invalid("url", "a config names either a memory service (url) or a memory file (path), not both")
        memory: Any
        if config.url is not None:
            key = config.api_key.get_secret_value() if config.api_key is not None else os.environ.get(API_KEY_ENV)
            if not key:
                raise invalid("api_key", f"the memory service needs a key: api_key, or ${API_KEY_ENV}")
            memory = RemoteMemory(config.url, key, user_id=config.user_id, agent_id=config.agent_id,
                                  session_id=config.session_id)
        else:
            memory = UnifiedMemory(config.path, config=config.memory_config, user_id=config.user_id,
                                   agent_id=config.agent_id, session_id=config.session_id)
        try:
            adapter = cls(memory, name=config.name, k=config.k, score_threshold=config.score_threshold,
                          max_tokens=config.max_tokens, query_messages=config.query_messages,
                          importance=config.importance)
        except BaseException:
            memory.close()
            raise
        adapter._owns_memory = True
        return adapter
