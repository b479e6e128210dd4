"""The saved state of a :class:`~unified_memory.Conversation`: a plain, versioned record.

``to_dict()`` gives JSON-compatible data for any
:class:`~unified_memory.protocols.ConversationStore`; ``from_dict()`` validates it
and names the field at fault (``messages.3.role``, ``compaction.safety_ratio``).

    >>> state = ConversationState(session_id="s1", messages=[Message(role="user", content="hi")])
    >>> ConversationState.from_dict(state.to_dict()) == state
    True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from unified_memory.config import config_error
from unified_memory.conversation.compaction import CompactionConfig
from unified_memory.errors import wrong_type
from unified_memory.types import Message

__all__ = ["ConversationState", "STATE_FORMAT"]

STATE_FORMAT: Final = "unified-memory.conversation"


class ConversationState(BaseModel):
    """Everything needed to continue a conversation elsewhere: identity, system prompt,
    running summary, messages (with tool calls, images and reasoning details), limits,
    the compaction settings and where its log lives."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["unified-memory.conversation"] = STATE_FORMAT
    version: Literal[1] = 1
    session_id: str = Field(min_length=1)
    user_id: str = "default"
    system_prompt: str | None = None
    summary: str | None = None
    messages: list[Message] = Field(default_factory=list)
    max_messages: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    compaction: CompactionConfig | None = None
    log_base_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible data (messages without their unset fields).

        >>> ConversationState(session_id="s1").to_dict()["format"]
        'unified-memory.conversation'
        """
        data = self.model_dump(mode="json", exclude={"messages"})
        data["messages"] = [m.model_dump(mode="json", exclude_none=True) for m in self.messages]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConversationState:
        """Validate saved data; a bad field raises :class:`~unified_memory.ConfigError` naming it.

        >>> ConversationState.from_dict({"session_id": "s1", "messages": [{"role": "robot"}]})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        unified_memory.errors.ConfigError: state.messages.0.role: Input should be 'user', 'assistant', 'system' or 'tool' ...
        """
        if not isinstance(data, Mapping):
            raise wrong_type("state", "dict", data)
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise config_error(exc, "state.") from None
