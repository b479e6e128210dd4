"""Motus-style memory (``motus.memory``) over :class:`~unified_memory.Conversation`.

``BasicMemory`` grows without bound; ``CompactionMemory`` compacts at a token threshold,
only at a turn boundary (never while a parallel tool-call batch still awaits results),
and can log to JSONL and restore from it. The async methods do no I/O of their own:
they only give Motus' call shapes.

    >>> import asyncio
    >>> memory = CompactionMemory({"token_threshold": 40}, compact_fn=lambda msgs, prompt: "they chatted")
    >>> for i in range(5):
    ...     _ = asyncio.run(memory.add_message(role="user", content=f"message number {i} " * 4))
    >>> context = asyncio.run(memory.get_context())
    >>> context[0]["content"].endswith("they chatted"), len(memory.messages) < 5
    (True, True)
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from unified_memory.compat._common import as_message, llm_dict
from unified_memory.config import coerce_config
from unified_memory.conversation.compaction import (
    CompactionConfig,
    ToolTruncationConfig,
    truncate_tool_results,
)
from unified_memory.conversation.engine import Conversation
from unified_memory.conversation.state import ConversationState
from unified_memory.errors import ConfigError, invalid, wrong_type
from unified_memory.types import Message

__all__ = ["BaseMemory", "BasicMemory", "CompactionBase", "CompactionMemory", "CompactionMemoryConfig",
           "CompactionSessionState", "create_memory", "MEMORY_TYPES"]

MEMORY_TYPES = ("basic", "compact")


class CompactionMemoryConfig(BaseModel):
    """Motus' ``CompactionMemoryConfig``. The threshold is ``token_threshold``, else
    ``safety_ratio`` × the context window of ``model_name`` (else ``compact_model_name``).

    >>> cfg = CompactionMemoryConfig(compact_model_name="claude-haiku-4-5-20251001", safety_ratio=0.5)
    >>> cfg.compaction_config().threshold(), len(cfg.session_id) > 0
    (100000, True)
    """

    model_config = ConfigDict(extra="forbid")

    compact_model_name: str | None = None
    token_threshold: int | None = Field(default=None, ge=1)
    safety_ratio: float = Field(default=0.75, gt=0.0, le=1.0)
    session_id: str | None = Field(default=None, validate_default=True)
    log_base_path: str | None = None
    max_tool_result_tokens: int = Field(default=50_000, ge=1)
    model_name: str | None = None

    @field_validator("session_id")
    @classmethod
    def _auto_session(cls, value: str | None) -> str:
        return value or uuid.uuid4().hex

    def compaction_config(self) -> CompactionConfig:
        """The engine's :class:`~unified_memory.conversation.compaction.CompactionConfig` for these settings.

        >>> CompactionMemoryConfig(token_threshold=1000).compaction_config().target()
        600
        """
        return CompactionConfig(
            token_threshold=self.token_threshold, model=self.model_name or self.compact_model_name,
            safety_ratio=self.safety_ratio,
            tool_truncation=ToolTruncationConfig(max_tool_message_tokens=self.max_tool_result_tokens))


class BaseMemory(ABC):
    """The base to subclass for a custom memory: implement ``async compact(**kwargs)`` and ``reset()``.

    It gives message management over an internal :class:`~unified_memory.Conversation`
    (``self._conversation``; ``self._messages`` is its live message list), token
    estimation, tool-result truncation and the memory trace.

    >>> import asyncio
    >>> class KeepLast(BaseMemory):
    ...     async def compact(self, **kwargs):
    ...         del self._messages[:-1]
    ...     def reset(self):
    ...         count = len(self._messages)
    ...         self._messages.clear()
    ...         return {"messages": count}
    >>> memory = KeepLast()
    >>> _ = asyncio.run(memory.add_message(role="user", content="one"))
    >>> _ = asyncio.run(memory.add_message(role="user", content="two"))
    >>> asyncio.run(memory.compact()); [m.content for m in memory.messages], memory.reset()
    (['two'], {'messages': 1})
    """

    max_tool_result_tokens: int = 50_000

    def __init__(self, *, system_prompt: str | None = None, count_tokens: Callable[[str], int] | None = None,
                 conversation: Conversation | None = None) -> None:
        if conversation is not None and not isinstance(conversation, Conversation):
            raise wrong_type("conversation", "Conversation", conversation)
        if conversation is None:  # not ``or``: an empty Conversation is falsy (it has ``__len__``)
            conversation = Conversation(system_prompt=system_prompt, count_tokens=count_tokens)
        self._conversation = conversation

    @property
    def conversation(self) -> Conversation:
        """The engine underneath (for everything the facade does not name)."""
        return self._conversation

    @property
    def messages(self) -> list[Message]:
        """The held messages, oldest first (a copy)."""
        return self._conversation.messages()

    @property
    def _messages(self) -> list[Message]:
        # Motus subclasses edit ``self._messages`` in place: hand them the engine's live list.
        return self._conversation.live_messages()

    @property
    def system_prompt(self) -> str | None:
        """The system prompt (kept by ``reset()``)."""
        return self._conversation.system_prompt

    async def add_message(self, message: Message | Mapping[str, Any] | None = None, **fields: Any) -> str:
        """Append a message (a ``Message``, a dict, or its fields as keywords); returns its id."""
        return self._conversation.add(message, **fields)

    async def get_context(self) -> list[dict[str, Any]]:
        """What to send to the model, as OpenAI-style dicts (system prompt and summary first)."""
        return [llm_dict(m) for m in self._conversation.context()]

    def get_memory_trace(self) -> list[dict[str, Any]]:
        """What happened to the memory: compactions (with stats), failed compactions, trims, resets."""
        return self._conversation.get_memory_trace()

    def estimate_tokens(self) -> int:
        """Estimated input tokens of :meth:`get_context`."""
        return self._conversation.tokens()

    def truncate_tool_result(self, message: Message | Mapping[str, Any], max_tokens: int | None = None) -> Message:
        """``message`` with its tool result cut to ``max_tokens`` (default ``max_tool_result_tokens``)."""
        msg = as_message(message)
        limit = self.max_tool_result_tokens if max_tokens is None else max_tokens
        return truncate_tool_results([msg], max_tokens=limit, count_tokens=self._conversation.count_tokens)[0][0]

    @abstractmethod
    async def compact(self, **kwargs: Any) -> Any:
        """Reduce the context now."""

    @abstractmethod
    def reset(self) -> Any:
        """Forget the conversation; return what was dropped."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._conversation!r})"


class BasicMemory(BaseMemory):
    """Append-only memory: no compaction, the context grows without bound.

    >>> import asyncio
    >>> memory = BasicMemory(system_prompt="Be brief.")
    >>> _ = asyncio.run(memory.add_message(role="user", content="hi"))
    >>> asyncio.run(memory.compact()), asyncio.run(memory.get_context())[1], memory.reset()
    (None, {'role': 'user', 'content': 'hi'}, {'messages': 1})
    """

    async def compact(self, **kwargs: Any) -> None:
        """A no-op: basic memory never compacts."""
        return None

    def reset(self) -> dict[str, int]:
        """Forget the messages (the system prompt stays); returns ``{"messages": n}``."""
        return {"messages": self._conversation.reset()["messages"]}


class CompactionBase(BaseMemory):
    """Base of compacting memories: the engine compacts automatically at a turn boundary
    (it waits for every result of a tool-call batch); :meth:`set_model` picks a separate
    compaction model; summaries come from ``compact_fn``, else that model, else an
    offline extractive summary. Tool results over ``max_tool_result_tokens`` are cut on add.

    >>> import asyncio
    >>> memory = CompactionMemory({"token_threshold": 10_000})
    >>> memory.set_model(lambda messages: "a summary")
    >>> _ = asyncio.run(memory.add_message(role="user", content="hello"))
    >>> asyncio.run(memory.compact())["mode"], memory.conversation.summary
    ('compaction', None)
    """

    async def add_message(self, message: Message | Mapping[str, Any] | None = None, **fields: Any) -> str:
        """Append a message (tool results over ``max_tool_result_tokens`` are truncated); returns its id."""
        if message is not None and fields:
            raise invalid("message", "give a message or its fields, not both")
        msg = as_message(message if message is not None else fields)
        if msg.role == "tool":
            msg = self.truncate_tool_result(msg)
        return self._conversation.add(msg)

    def set_model(self, llm: Any) -> None:
        """Write compaction summaries with ``llm`` (an object with ``complete(messages)`` or a callable)."""
        self._conversation.set_model(llm)

    async def compact(self, **kwargs: Any) -> dict[str, Any] | None:
        """Compact now; returns the stats dict, or ``None`` while tool results are pending
        (it then runs as soon as the batch is complete)."""
        stats = self._conversation.compact()
        return None if stats is None else stats.as_dict()

    def reset(self) -> dict[str, int]:
        """Forget messages and summary (the system prompt stays); returns the counts dropped."""
        return self._conversation.reset()


class CompactionSessionState:
    """A snapshot of a :class:`CompactionMemory` (messages, system prompt, summary,
    session id, log location); ``to_dict()`` is JSON-compatible.

    >>> state = CompactionSessionState(session_id="user-123", messages=[{"role": "user", "content": "hi"}])
    >>> CompactionSessionState.from_dict(state.to_dict()).messages[0].content
    'hi'
    """

    def __init__(self, state: ConversationState | None = None, **fields: Any) -> None:
        if state is not None and fields:
            raise invalid("state", "give a ConversationState or its fields, not both")
        if state is None:
            state = ConversationState.from_dict({"session_id": uuid.uuid4().hex, **fields})
        elif not isinstance(state, ConversationState):
            raise wrong_type("state", "ConversationState", state)
        self.state = state

    messages = property(lambda self: list(self.state.messages), doc="The messages of the context window.")
    system_prompt = property(lambda self: self.state.system_prompt, doc="The system prompt.")
    summary = property(lambda self: self.state.summary, doc="The running summary of compacted turns.")
    session_id = property(lambda self: self.state.session_id, doc="The session's id.")
    log_base_path = property(lambda self: self.state.log_base_path, doc="Where the session's log lives.")

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible data; :meth:`from_dict` restores it."""
        return self.state.to_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CompactionSessionState:
        """Validate saved data (a bad field is a ``ConfigError`` naming it)."""
        return cls(ConversationState.from_dict(data))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CompactionSessionState) and other.state == self.state

    def __repr__(self) -> str:
        return f"CompactionSessionState(session_id={self.session_id!r}, messages={len(self.state.messages)})"


class CompactionMemory(CompactionBase):
    """Motus' ``CompactionMemory``: auto-compaction, a JSONL log when ``log_base_path`` is
    set, restore from that log or from a :class:`CompactionSessionState`.

    Without ``token_threshold`` and without a model name, auto-compaction waits for
    :meth:`set_model_name` (the agent's model); ``compact()`` works regardless.

    >>> import asyncio, tempfile
    >>> logs = tempfile.mkdtemp()
    >>> memory = CompactionMemory({"session_id": "user-123", "log_base_path": logs, "model_name": "gpt-4o"})
    >>> _ = asyncio.run(memory.add_message(role="user", content="I live in Lisbon"))
    >>> restored = CompactionMemory.restore_from_log("user-123", logs)
    >>> restored.session_id, [m.content for m in restored.messages]
    ('user-123', ['I live in Lisbon'])
    """

    def __init__(self, config: CompactionMemoryConfig | Mapping[str, Any] | None = None, *,
                 on_compact: Callable[[dict[str, Any]], Any] | None = None,
                 compact_fn: Callable[[list[Message], str | None], str] | None = None, llm: Any = None,
                 system_prompt: str | None = None, count_tokens: Callable[[str], int] | None = None,
                 conversation: Conversation | None = None) -> None:
        self.config = coerce_config(CompactionMemoryConfig, config)
        self.max_tool_result_tokens = self.config.max_tool_result_tokens
        if conversation is None:
            conversation = Conversation(
                system_prompt=system_prompt, session_id=self.config.session_id, compaction=_engine(self.config),
                compact_fn=compact_fn, compaction_llm=llm, count_tokens=count_tokens, on_compact=on_compact,
                log_base_path=self.config.log_base_path)
        super().__init__(conversation=conversation)

    @property
    def session_id(self) -> str:
        """The session's id (the log file is ``<log_base_path>/<session_id>.jsonl``)."""
        return self._conversation.session_id

    def set_model_name(self, model_name: str) -> None:
        """The agent's model: without ``token_threshold`` the threshold is derived from its window."""
        self.config = coerce_config(CompactionMemoryConfig, {**self.config.model_dump(), "model_name": model_name})
        self._conversation.compaction = _engine(self.config)

    def get_session_state(self) -> CompactionSessionState:
        """A snapshot to save anywhere; :meth:`from_session_state` continues from it."""
        return CompactionSessionState(self._conversation.get_session_state())

    @classmethod
    def from_session_state(cls, state: CompactionSessionState | Mapping[str, Any], **kwargs: Any,
                           ) -> CompactionMemory:
        """A memory continuing ``state``; ``kwargs`` are the constructor's (``config``, ``compact_fn``, ``llm``...)."""
        if isinstance(state, Mapping):
            state = CompactionSessionState.from_dict(state)
        if not isinstance(state, CompactionSessionState):
            raise wrong_type("state", "CompactionSessionState or dict", state)
        saved, config = state.state.compaction, kwargs.pop("config", None)
        if config is None and saved is not None:
            config = {"token_threshold": saved.token_threshold, "model_name": saved.model,
                      "safety_ratio": saved.safety_ratio,
                      "max_tool_result_tokens": saved.tool_truncation.max_tool_message_tokens}
        return cls._resume(Conversation.from_dict(state.state, **_engine_options(kwargs)), config)

    @classmethod
    def restore_from_log(cls, session_id: str, log_base_path: str, **kwargs: Any) -> CompactionMemory:
        """Replay ``<log_base_path>/<session_id>.jsonl``; the restored memory appends to the same log."""
        config = kwargs.pop("config", None)
        return cls._resume(Conversation.restore_from_log(session_id, log_base_path, **_engine_options(kwargs)),
                           config)

    @classmethod
    def _resume(cls, conversation: Conversation, config: Any) -> CompactionMemory:
        config = coerce_config(CompactionMemoryConfig, {
            **coerce_config(CompactionMemoryConfig, config).model_dump(),
            "session_id": conversation.session_id, "log_base_path": conversation.log_base_path})
        conversation.compaction = _engine(config)
        return cls(config, conversation=conversation)


def _engine_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    names = {"on_compact": "on_compact", "compact_fn": "compact_fn", "llm": "compaction_llm",
             "count_tokens": "count_tokens"}
    for key in kwargs:
        if key not in names:
            raise invalid(key, f"unknown option; choose from config, {', '.join(names)}")
    return {names[key]: value for key, value in kwargs.items()}


def _engine(config: CompactionMemoryConfig) -> CompactionConfig | None:
    """The engine's compaction settings, checked now; ``None`` when no threshold can be known yet."""
    engine = config.compaction_config()
    if engine.token_threshold is None and engine.model is None:
        return None
    try:
        engine.threshold()
    except ConfigError as exc:
        raise ConfigError(f"config.{exc}", field=f"config.{exc.field}") from None
    return engine


def create_memory(memory_type: str = "basic", **kwargs: Any) -> BaseMemory:
    """Motus' ``memory_type`` names: ``"basic"`` → :class:`BasicMemory`, ``"compact"`` → :class:`CompactionMemory`.

    >>> type(create_memory("compact", config={"token_threshold": 1000})).__name__
    'CompactionMemory'
    >>> create_memory("background")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: memory_type: unknown memory type 'background'; choose from basic, compact
    """
    if memory_type == "basic":
        return BasicMemory(**kwargs)
    if memory_type == "compact":
        return CompactionMemory(**kwargs)
    raise invalid("memory_type", f"unknown memory type {memory_type!r}; choose from {', '.join(MEMORY_TYPES)}")
