"""Helpers shared by the compat facades (not public API).

    >>> from unified_memory.types import Message
    >>> llm_dict(Message(role="tool", content="ok", tool_call_id="c1"))
    {'role': 'tool', 'content': 'ok', 'tool_call_id': 'c1'}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from unified_memory.errors import wrong_type
from unified_memory.types import Message
from unified_memory.validation import pydantic_error

__all__ = ["llm_dict", "as_message", "OPTIONAL_FIELDS"]

OPTIONAL_FIELDS = ("name", "tool_calls", "tool_call_id", "images", "reasoning_details")


def llm_dict(message: Message) -> dict[str, Any]:
    """An OpenAI-style dict of a :class:`~unified_memory.types.Message`: role and content,
    plus name, tool_calls, tool_call_id, images and reasoning_details when set."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    for key in OPTIONAL_FIELDS:
        value = getattr(message, key)
        if value is not None:
            out[key] = value
    return out


def as_message(message: Any, field: str = "message") -> Message:
    """A validated :class:`~unified_memory.types.Message` from a Message or a dict.

    >>> as_message({"role": "robot"})
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: message.role: Input should be 'user', 'assistant', 'system' or 'tool'
    """
    if isinstance(message, Message):
        return message
    if not isinstance(message, Mapping):
        raise wrong_type(field, "Message or dict", message)
    try:
        return Message.model_validate(dict(message))
    except ValidationError as exc:
        raise pydantic_error(field, exc) from None
