"""MARSYS' ``ConversationMemory`` and ``ManagedConversationMemory`` (import them from
:mod:`unified_memory.compat.marsys`).

    >>> memory = ConversationMemory(description="You are a helpful assistant")
    >>> mid = memory.add(role="user", content="Hello")
    >>> [m["role"] for m in memory.retrieve_all()], memory.retrieve_by_id(mid)["content"]
    (['system', 'user'], 'Hello')
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field, ValidationError

from unified_memory.compat._common import llm_dict
from unified_memory.config import _Config, coerce_config, config_error
from unified_memory.conversation.compaction import (
    CompactionConfig,
    CompactionPolicy,
    SummarizationConfig,
    ToolTruncationConfig,
    summary_message,
)
from unified_memory.conversation.engine import Conversation
from unified_memory.errors import NotFoundError, invalid, wrong_type
from unified_memory.events import MemoryEvent
from unified_memory.types import Message

__all__ = ["ActiveContextPolicyConfig", "CompactionEvent", "ConversationMemory", "ManagedConversationMemory",
           "ManagedMemoryConfig", "MemoryResetEvent", "SummarizationConfig", "ToolTruncationConfig", "MEMORY_TYPES"]

MEMORY_TYPES = ("conversation_history", "managed_conversation", "kg")
_FIELDS = ("name", "tool_calls", "tool_call_id", "images", "reasoning_details")
_META = ("structured_data", "agent_calls")


@dataclass(frozen=True)
class MemoryResetEvent:
    """Emitted by ``reset_memory()``.

    >>> MemoryResetEvent("Researcher", "run_1", 3).messages_cleared
    3
    """

    agent_name: str | None
    session_id: str | None
    messages_cleared: int


@dataclass(frozen=True)
class CompactionEvent:
    """A managed compaction ``started``, ``completed`` (with stats) or ``failed`` (with the error).

    >>> CompactionEvent("Researcher", "run_1", "completed", {"messages": 4}).status
    'completed'
    """

    agent_name: str | None
    session_id: str | None
    status: Literal["started", "completed", "failed"]
    stats: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _encode(content: Any, metadata: dict[str, Any]) -> str | None:
    if content is None or isinstance(content, str):
        metadata.pop("content_format", None)
        return content
    if not isinstance(content, dict | list):
        raise wrong_type("content", "str, dict or list", content)
    metadata["content_format"] = "json"
    return json.dumps(content)


def _decode(message: Message) -> Any:
    if message.metadata.get("content_format") == "json" and message.content is not None:
        return json.loads(message.content)
    return message.content


def _record(message: Message) -> dict[str, Any]:
    out = {"role": message.role, "content": _decode(message), "message_id": message.id}
    out.update({k: getattr(message, k) for k in _FIELDS if getattr(message, k) is not None})
    out.update({k: message.metadata[k] for k in _META if message.metadata.get(k) is not None})
    return out


def _for_llm(message: Message) -> dict[str, Any]:
    out = llm_dict(message)
    if isinstance(_decode(message), list):  # content parts go to the model as a list; a dict stays JSON text
        out["content"] = _decode(message)
    return out


class ConversationMemory:
    """MARSYS' ``ConversationMemory``: the history; ``description`` is the system prompt.

    Content may be a str, a dict or a list (stored as JSON text, returned decoded);
    ``structured_data`` and ``agent_calls`` are kept and returned as top-level keys.

    >>> memory = ConversationMemory()
    >>> mid = memory.add(role="assistant", content={"plan": ["search"]}, structured_data={"step": 1})
    >>> memory.retrieve_by_id(mid)["content"], memory.retrieve_by_id(mid)["structured_data"]
    ({'plan': ['search']}, {'step': 1})
    """

    def __init__(self, description: str | None = None, **engine_options: Any) -> None:
        self._agent_name: str | None = None
        self._bus: Any = None
        self._session_id: str | None = None
        self._attach(Conversation(system_prompt=description, **engine_options))

    def _attach(self, conversation: Conversation) -> None:
        self._conversation = conversation
        conversation.on_event(self._forward)

    @property
    def conversation(self) -> Conversation:
        """The engine underneath; assigning another one (``MemoryManager.load_from_file`` does)
        makes the memory continue from it, its events sent to the same event bus."""
        return self._conversation

    @conversation.setter
    def conversation(self, conversation: Conversation) -> None:
        if not isinstance(conversation, Conversation):
            raise wrong_type("conversation", "Conversation", conversation)
        self._attach(conversation)

    def add(self, role: str | None = None, content: Any = None, *, message: Any = None, name: str | None = None,
            tool_calls: list[dict[str, Any]] | None = None, tool_call_id: str | None = None,
            images: list[str] | None = None, reasoning_details: list[dict[str, Any]] | None = None,
            structured_data: dict[str, Any] | None = None, agent_calls: list[Any] | None = None,
            message_id: str | None = None) -> str:
        """Append a message (its fields, or ``message=``: a ``Message``, a dict or a MARSYS-like object); returns its id."""
        given = dict(role=role, content=content, name=name, tool_calls=tool_calls, tool_call_id=tool_call_id,
                     images=images, reasoning_details=reasoning_details, structured_data=structured_data,
                     agent_calls=agent_calls, message_id=message_id)
        if message is not None:
            if any(v is not None for v in given.values()):
                raise invalid("message", "give a message or its fields, not both")
            given = _fields_of(message)
        metadata = dict(given.pop("metadata", None) or {})
        for key in _META:
            if given.get(key) is not None:
                metadata[key] = given[key]
        data = {k: given.get(k) for k in ("role", *_FIELDS)}
        data["content"] = _encode(given.get("content"), metadata)
        if data["content"] is None and metadata.get("agent_calls") and not data["tool_calls"]:
            data["content"] = ""  # the engine wants content, tool calls or images
        return self._conversation.add(**data, metadata=metadata, id=given.get("message_id"))

    def update(self, message_id: str, **fields: Any) -> None:
        """Change fields of a message (same names as :meth:`add`); an unknown id raises ``NotFoundError``."""
        current = self._conversation.get(message_id)
        if current is None:
            raise NotFoundError(f"message_id: no message {message_id!r} in this memory", field="message_id")
        metadata = dict(current.metadata)
        for key in _META:
            if key in fields:
                metadata[key] = fields.pop(key)
        if "content" in fields:
            fields["content"] = _encode(fields["content"], metadata)
        self._conversation.update(message_id, **fields, metadata=metadata)

    def _head(self) -> list[Message]:
        conv = self._conversation
        head = [Message(role="system", content=conv.system_prompt, id="system")] if conv.system_prompt else []
        return head + ([summary_message(conv.summary)] if conv.summary else [])

    def retrieve_all(self) -> list[dict[str, Any]]:
        """Every message as a dict with its ``message_id`` (the system prompt first, id ``"system"``)."""
        return [_record(m) for m in self._head() + self._conversation.messages()]

    def retrieve_recent(self, n: int = 1) -> list[dict[str, Any]]:
        """The last ``n`` messages of :meth:`retrieve_all`."""
        return self.retrieve_all()[-n:] if n > 0 else []

    def get_messages(self) -> list[dict[str, Any]]:
        """The messages for the model (OpenAI-style dicts)."""
        return [_for_llm(m) for m in self._head() + self._conversation.messages()]

    def retrieve_by_id(self, message_id: str) -> dict[str, Any] | None:
        """The message with this id as a dict, or ``None``."""
        return next((m for m in self.retrieve_all() if m["message_id"] == message_id), None)

    def retrieve_by_role(self, role: str, n: int | None = None) -> list[dict[str, Any]]:
        """Messages of ``role``; the last ``n`` of them when ``n`` is given."""
        found = [m for m in self.retrieve_all() if m["role"] == role]
        return found if n is None else found[-n:] if n > 0 else []

    def remove_by_id(self, message_id: str) -> bool:
        """Remove a message; ``False`` when there is no such message."""
        try:
            self._conversation.remove(message_id)
        except NotFoundError:
            return False
        return True

    def reset_memory(self) -> None:
        """Clear everything but the system prompt (emits :class:`MemoryResetEvent`)."""
        self._conversation.reset()

    def set_event_context(self, agent_name: str | None, event_bus: Any, session_id: str | None = None) -> None:
        """Send :class:`MemoryResetEvent` / :class:`CompactionEvent` (other engine events, such as
        ``trim``, as the engine's ``MemoryEvent``) to ``event_bus``: an object with ``emit(event)``
        (sync or async) or a callable."""
        if event_bus is not None and not (callable(getattr(event_bus, "emit", None)) or callable(event_bus)):
            raise wrong_type("event_bus", "object with emit(event) or a callable", event_bus)
        self._agent_name, self._bus, self._session_id = agent_name, event_bus, session_id

    def _forward(self, event: MemoryEvent) -> None:
        if self._bus is None:
            return
        session = self._session_id or event.session_id
        out: Any = event
        if event.kind == "reset":
            out = MemoryResetEvent(self._agent_name, session, int(event.counts.get("messages", 0)))
        elif event.kind == "compact":
            out = CompactionEvent(self._agent_name, session, event.stage, dict(event.counts), event.error)
        emit = getattr(self._bus, "emit", self._bus)
        result = emit(out)
        if inspect.isawaitable(result):  # MARSYS' EventBus.emit is a coroutine
            try:
                asyncio.get_running_loop().create_task(_awaited(result))
            except RuntimeError:
                asyncio.run(_awaited(result))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._conversation!r})"


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _fields_of(message: Any) -> dict[str, Any]:
    if isinstance(message, Message):
        data = message.model_dump(exclude_none=True)
        data["message_id"] = data.pop("id", None)
        meta = data.get("metadata", {})
        if meta.get("content_format") == "json":
            data["content"] = _decode(message)
        return data
    if isinstance(message, Mapping):
        return dict(message)
    names = ("role", "content", *_FIELDS, *_META, "message_id")
    if not hasattr(message, "role"):
        raise wrong_type("message", "Message, dict or an object with role and content", message)
    return {k: getattr(message, k, None) for k in names}


class ActiveContextPolicyConfig(CompactionPolicy):
    """How managed memory reduces its context (MARSYS' ``active_context``): the engine's
    :class:`~unified_memory.conversation.compaction.CompactionPolicy` under MARSYS' name.

    >>> ActiveContextPolicyConfig(excluded_processors=["summarization"]).processor_order[1]
    'summarization'
    """


class ManagedMemoryConfig(_Config):
    """MARSYS' ``ManagedMemoryConfig``: compact above ``threshold_tokens`` down to
    ``compaction_target_tokens = threshold_tokens × (1 − min_reduction_ratio)``.

    >>> ManagedMemoryConfig(threshold_tokens=120_000).compaction_target_tokens
    72000
    """

    threshold_tokens: int = Field(default=150_000, ge=1)
    image_token_estimate: int = Field(default=800, ge=0)
    active_context: ActiveContextPolicyConfig = Field(default_factory=ActiveContextPolicyConfig)

    @property
    def compaction_target_tokens(self) -> int:
        """``threshold_tokens × (1 − active_context.min_reduction_ratio)``."""
        return self.compaction_config().target()

    def compaction_config(self) -> CompactionConfig:
        """The engine's :class:`~unified_memory.conversation.compaction.CompactionConfig` for these settings."""
        policy = self.active_context.model_dump()
        try:
            return CompactionConfig(token_threshold=self.threshold_tokens,
                                    image_token_estimate=self.image_token_estimate, **policy)
        except ValidationError as exc:
            raise config_error(exc, "active_context.") from None


class ManagedConversationMemory(ConversationMemory):
    """MARSYS' ``ManagedConversationMemory``: the engine compacts (or, in ``sliding_window``
    mode, windows) the context above ``threshold_tokens``; ``get_messages()`` is the curated context.

    >>> memory = ManagedConversationMemory({"threshold_tokens": 50}, compact_fn=lambda msgs, prompt: "earlier talk")
    >>> for i in range(6):
    ...     _ = memory.add(role="user", content=f"question {i} " * 5)
    >>> memory.get_messages()[0]["content"].endswith("earlier talk")
    True
    """

    def __init__(self, config: ManagedMemoryConfig | Mapping[str, Any] | None = None,
                 description: str | None = None, *, compaction_model: Any = None,
                 compact_fn: Callable[[list[Message], str | None], str] | None = None, **engine_options: Any) -> None:
        self.config = coerce_config(ManagedMemoryConfig, config)
        super().__init__(description, compaction=self.config.compaction_config(), compact_fn=compact_fn,
                         compaction_llm=compaction_model, **engine_options)

    def get_messages(self) -> list[dict[str, Any]]:
        """The curated context within the token budget (system prompt and summary first)."""
        return [_for_llm(m) for m in self._conversation.context()]

