"""The memory as an AutoGen memory (``pip install "unified-memory[autogen]"``).

An AutoGen agent (``AssistantAgent(..., memory=[...])``) calls ``update_context`` on each of its
memories before every model call. :class:`AutoGenMemory` is such a memory over a
:class:`~unified_memory.UnifiedMemory` (or a :class:`~unified_memory.RemoteMemory`), for the
user that memory is scoped to:

- ``add(MemoryContent)`` stores the content as a long-term fact (``remember``): recall finds it
  by its words (and meaning, with a hybrid memory), the people, places and relations in it go
  to the graph, and its metadata comes back from ``query``. Text (``text/plain``,
  ``text/markdown``, any ``text/*``) comes back exactly as it was added (the fact's text is
  stripped, the blanks around it are kept in its metadata); ``application/json`` content (a
  dict) is stored as its JSON text and comes back as the dict. Images and binary content are
  refused (``MemoryValueError`` naming ``content.mime_type``, as AutoGen's Chroma and Redis
  memories refuse them): recall and the context block are text, so store a text description
  of them instead. A fact the memory already holds is reinforced, not stored twice, and keeps
  its first metadata; a fact that changes a single-valued one ("I live in Porto" after "...
  Lisbon") supersedes it, as in any use of the memory.
- ``query(text)`` is the memory's recall over its long-term facts (``tiers=`` widens it:
  ``"entity"``, ``"episodic"``): at most ``k`` ``MemoryContent`` items in the memory's ranking
  (relevance fused with importance and recency), each with its metadata and ``score``: its
  similarity to the query as AutoGen's vector memories report one, the cosine similarity of
  the two embeddings when the memory has an embedder (the default model is Chroma's default,
  all-MiniLM-L6-v2: the same numbers), else (a lexical memory) the BM25 relevance in [0, 1],
  relative to the best match. Also ``recall_score`` (the fused score that orders the results),
  ``id``, ``tier``, ``created_at`` (ISO 8601) and ``status`` when the fact is ``superseded`` or
  ``archived`` (``annotate=False`` leaves all of these out: the metadata is what was added, as
  Redis's memory returns it). Keyword options: ``k`` (also ``limit`` / ``top_k``),
  ``score_threshold`` (the least ``score``) or ``distance_threshold`` (Redis's: the most cosine
  distance, ``1 - score``), ``where`` (metadata values the items must have), ``tiers``,
  ``sequential`` (below). A blank query finds nothing.
- ``sequential=True`` (Redis's option; for the adapter or one query): the latest ``k`` facts of
  the user, oldest first, whatever the query (their ``score`` is their importance; thresholds
  do not apply).
- ``update_context(model_context)`` makes a query of the latest user message(s) of the
  context, adds the memory's context block for it (facts, people and places, past turns: at
  most ``k`` memories within ``max_tokens``, their text escaped) as a ``SystemMessage``, and
  returns the memories in it. Nothing is added when nothing is relevant (or nothing reaches
  ``score_threshold``). A context with no message to query by gets the most important facts
  (their ``score`` is then their importance); a ``sequential`` adapter the latest facts.
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
import os
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from unified_memory.config import ContextConfig
from unified_memory.errors import DependencyError, UnifiedMemoryError, invalid, wrong_type
from unified_memory.integrations._checks import check_memory
from unified_memory.retrieval.context import assemble
from unified_memory.retrieval.tokens import chars_per_token_counter
from unified_memory.types import ContextBlock, RecallHit
from unified_memory.validation import check_bool, check_limit, check_metadata, check_scope_id, check_unit

INSTALL_HINT = 'pip install "unified-memory[autogen]"'

try:
    from autogen_core import CancellationToken, Component
    from autogen_core.memory import Memory, MemoryContent, MemoryQueryResult, UpdateContextResult
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

from unified_memory.integrations._autogen_content import (  # noqa: E402 (after the framework's import)
    MIME_KEY,
    NAME_KEY,
    PADDING_KEY,
    RESERVED_KEYS,
    as_content,
    fact_hit,
    query_text,
    score_of,
    stored_text,
    threshold,
)

_CHAT: tuple[type, ...] = ()  # autogen-agentchat's chat messages and events (when it is installed)
_EVENTS: tuple[type, ...] = ()
try:
    from autogen_agentchat.messages import BaseAgentEvent, BaseChatMessage

    _CHAT, _EVENTS = (BaseChatMessage,), (BaseAgentEvent,)
except ImportError:  # autogen-core alone: model messages only
    pass

__all__ = ["AutoGenMemory", "AutoGenMemoryConfig", "INSTALL_HINT", "NAME_KEY", "MIME_KEY", "PADDING_KEY",
           "API_KEY_ENV"]

T = TypeVar("T")

#: Where a loaded config's memory service key is read from when the config holds none.
API_KEY_ENV = "UNIFIED_MEMORY_API_KEY"
#: The memory methods the adapter calls (a UnifiedMemory and a RemoteMemory both have them).
_NEEDED = ("aremember", "arecall", "acontext", "afacts", "acount_facts", "aforget", "aadd_messages")
_QUERY_OPTIONS = ("k", "limit", "top_k", "score_threshold", "distance_threshold", "where", "tiers", "sequential")
_PAGE = 500  # facts read per request by clear()
_SECTIONS = {"long_term": "facts", "entity": "entities"}  # the context block's section of a hit's tier


class AutoGenMemoryConfig(BaseModel):
    """The component config of :class:`AutoGenMemory`: its options and where its memory is.

    ``path``: a SQLite file or PostgreSQL URL (a password comes from ``PGPASSWORD`` or
    ``~/.pgpass``); ``url``: a memory service (its key: ``api_key``, else the
    ``UNIFIED_MEMORY_API_KEY`` environment variable); neither: a new in-process memory.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="default", description="The adapter's name: clear() forgets what it added under it.")
    k: int = Field(default=10, description="The most memories a query returns and the context holds.")
    score_threshold: float | None = Field(default=None, description="The least score (similarity) a memory needs.")
    max_tokens: int = Field(default=1000, description="The most tokens update_context adds.")
    query_messages: int = Field(default=1, description="How many of the latest user messages make the query.")
    importance: float | None = Field(default=None, description="Importance of added facts (None: the memory's).")
    annotate: bool = Field(default=True, description="Add score, recall_score, id, tier... to results' metadata.")
    sequential: bool = Field(default=False, description="Queries give the latest facts, whatever they say.")
    path: str | None = Field(default=None, description="A SQLite file or PostgreSQL URL of a UnifiedMemory.")
    url: str | None = Field(default=None, description="A memory service's URL (a RemoteMemory).")
    api_key: SecretStr | None = Field(default=None, description=f"The service's key (default: ${API_KEY_ENV}).")
    user_id: str = Field(default="default", description="The user the memory is scoped to.")
    agent_id: str | None = None
    session_id: str | None = None
    memory_config: dict[str, Any] | None = Field(default=None, description="MemoryConfig fields of a UnifiedMemory.")


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
    holds; ``score_threshold``: the least ``score`` (similarity to the query) they need
    (``None``: any). ``max_tokens``: the most tokens ``update_context`` adds.
    ``query_messages``: how many of the latest user messages make its query. ``importance``:
    the importance of added facts (``None``: the memory's importance scorer decides).
    ``annotate``: add ``score``, ``recall_score``, ``id``, ``tier``, ``created_at`` (and
    ``status``) to each result's metadata (``False``: a result's metadata is what it was added
    with). ``sequential``: queries and the context give the latest ``k`` facts, whatever the query.
    """

    component_type = "memory"
    component_config_schema = AutoGenMemoryConfig
    component_provider_override = "unified_memory.integrations.autogen.AutoGenMemory"

    def __init__(self, memory: Any, *, name: str = "default", k: int = 10, score_threshold: float | None = None,
                 max_tokens: int = 1000, query_messages: int = 1, importance: float | None = None,
                 annotate: bool = True, sequential: bool = False) -> None:
        self._memory = check_memory(memory, _NEEDED)
        self._name = check_scope_id("name", name)
        self.k = check_limit("k", k)
        self.score_threshold = threshold("score_threshold", score_threshold)
        self.max_tokens = check_limit("max_tokens", max_tokens)
        self.query_messages = check_limit("query_messages", query_messages)
        self.importance = check_unit("importance", importance)
        self.annotate = check_bool("annotate", annotate)
        self.sequential = check_bool("sequential", sequential)
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
        text, mime, padding = stored_text(content)
        metadata = check_metadata("content.metadata", content.metadata)
        reserved = sorted(set(RESERVED_KEYS) & set(metadata))
        if reserved:
            raise invalid("content.metadata", f"{reserved} are keys the adapter keeps; use other names")
        metadata.update({NAME_KEY: self._name, MIME_KEY: mime})
        if padding is not None:
            metadata[PADDING_KEY] = padding
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
        """The memories relevant to the query, best first (options: ``k``, ``score_threshold`` or
        ``distance_threshold``, ``where``, ``tiers``, ``sequential``; see the module docstring)."""
        text = query_text(query)
        unknown = sorted(set(kwargs) - set(_QUERY_OPTIONS))
        if unknown:
            raise invalid(unknown[0], "is not an option of AutoGenMemory.query (it takes " +
                          ", ".join(_QUERY_OPTIONS) + ")")
        counts = [name for name in ("k", "limit", "top_k") if kwargs.get(name) is not None]
        if len(counts) > 1:
            raise invalid(counts[1], f"gives the number of results again (with {counts[0]}); give one of them")
        k = check_limit(counts[0], kwargs[counts[0]]) if counts else self.k
        least = self._least_score(kwargs)
        where = kwargs.get("where")
        if where is not None and not isinstance(where, Mapping):
            raise wrong_type("where", "a dict of metadata values", where)
        sequential = (self.sequential if kwargs.get("sequential") is None
                      else check_bool("sequential", kwargs["sequential"]))
        if sequential:
            given = [name for name in ("where", "tiers") if kwargs.get(name) is not None]
            if given:
                raise invalid(given[0], "does not apply to a sequential query (the latest facts, whatever they say)")
            hits = await self._cancellable(self._latest(k), cancellation_token)
            return MemoryQueryResult(results=[as_content(hit, annotate=self.annotate) for hit in hits])
        if not text.strip():
            return MemoryQueryResult(results=[])
        hits = await self._cancellable(self._memory.arecall(text, limit=k, tiers=kwargs.get("tiers") or "long_term",
                                                            where=where), cancellation_token)
        return MemoryQueryResult(results=[as_content(hit, annotate=self.annotate) for hit in hits
                                          if least is None or score_of(hit) >= least])

    def _least_score(self, options: Mapping[str, Any]) -> float | None:
        """A query's least score: ``score_threshold``, or ``1 - distance_threshold`` (a cosine
        distance, as Redis's memory takes), else the adapter's own."""
        if "score_threshold" in options and "distance_threshold" in options:
            raise invalid("distance_threshold", "gives the threshold again (with score_threshold); give one of them")
        if "distance_threshold" in options:
            distance = threshold("distance_threshold", options["distance_threshold"])
            return None if distance is None else 1.0 - distance
        if "score_threshold" in options:
            return threshold("score_threshold", options["score_threshold"])
        return self.score_threshold

    async def _latest(self, k: int) -> list[RecallHit]:
        """The latest ``k`` active facts of the user, oldest first (scored by their importance)."""
        total = await self._memory.acount_facts()
        return [fact_hit(fact) for fact in await self._memory.afacts(limit=k, offset=max(0, total - k))]

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add the memory's context block for the latest user message(s) (with no message to
        query by, the most important facts; ``sequential``: the latest facts) as a system
        message; returns the memories in it (none, and nothing added, when nothing is relevant)."""
        if not isinstance(model_context, ChatCompletionContext):
            raise wrong_type("model_context", "ChatCompletionContext", model_context)
        query = self._context_query(await model_context.get_messages()) or None
        if self.sequential:
            block = self._block(None, await self._latest(self.k))
        elif query is not None and self.score_threshold is not None:  # the hits that reach it, in the block
            hits = await self._memory.arecall(query, limit=self.k)
            block = self._block(query, [hit for hit in hits if score_of(hit) >= self.score_threshold])
        else:
            block = await self._memory.acontext(query, max_tokens=self.max_tokens, include_conversation=False,
                                                limit=self.k)
        if not block.text:
            return UpdateContextResult(memories=MemoryQueryResult(results=[]))
        await model_context.add_message(SystemMessage(content=block.text))
        return UpdateContextResult(memories=MemoryQueryResult(
            results=[as_content(hit, annotate=self.annotate) for hit in block.hits]))

    def _block(self, query: str | None, hits: Sequence[RecallHit]) -> ContextBlock:
        """The memory's context block of these hits (its layout; the memory's token counter and
        context settings when it has them, else chars/4 and the defaults)."""
        sections: dict[str, list[RecallHit]] = {"facts": [], "entities": [], "episodes": []}
        for hit in hits:
            sections[_SECTIONS.get(hit.tier, "episodes")].append(hit)
        settings = getattr(getattr(self._memory, "config", None), "context", None)
        counter = getattr(self._memory, "count_tokens", None)
        return assemble(query=query, max_tokens=self.max_tokens, sections=sections, conversation=[],
                        count_tokens=counter if callable(counter) else chars_per_token_counter,
                        config=settings if isinstance(settings, ContextConfig) else ContextConfig())

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
            query_messages=self.query_messages, importance=self.importance, annotate=self.annotate,
            sequential=self.sequential,
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
                          importance=config.importance, annotate=config.annotate, sequential=config.sequential)
        except BaseException:
            memory.close()
            raise
        adapter._owns_memory = True
        return adapter
