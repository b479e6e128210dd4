"""How a message becomes part of a :class:`~unified_memory.Conversation`: validated, given an
id and a time when it has none, and redacted — always as a copy of what the caller gave.

    >>> from unified_memory.privacy.redaction import make_scrubber
    >>> intake = MessageIntake(make_scrubber(str.upper), id_prefix="conv")
    >>> message, chosen = intake.coerce("message", None, {"role": "user", "content": "hi"})
    >>> message.id, message.content, chosen
    ('conv-1', 'HI', False)
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from unified_memory.errors import invalid, wrong_type
from unified_memory.privacy.redaction import Scrubber
from unified_memory.types import Message
from unified_memory.validation import pydantic_error

__all__ = ["MessageIntake"]


class MessageIntake:
    """Turns a :class:`~unified_memory.Message`, a dict, or a message's fields into a held
    message: ids ``<id_prefix>-1``, ``-2``... for those without one; ``scrub`` (the
    conversation's redactor) runs over every message."""

    def __init__(self, scrub: Scrubber, *, id_prefix: str) -> None:
        self.scrub = scrub
        self.id_prefix = id_prefix
        self._counter = itertools.count(1)

    def coerce(self, field: str, message: Any, fields: Mapping[str, Any]) -> tuple[Message, bool]:
        """``(message, whether the caller chose its id)``; a bad one raises an error naming ``field``."""
        if message is not None and fields:
            raise invalid(field, "give a message or its fields, not both")
        if message is None:
            message = dict(fields)
        if isinstance(message, Message):
            msg = message  # valid already: Message validates on construction and assignment
        elif isinstance(message, Mapping):
            try:
                msg = Message.model_validate(dict(message))
            except ValidationError as exc:
                raise pydantic_error(field, exc) from None
        else:
            raise wrong_type(field, "Message or dict", message)
        if msg.content is None and not (msg.tool_calls or msg.images):
            raise invalid(f"{field}.content", f"required for a {msg.role} message without tool calls or images")
        chosen = msg.id is not None
        updates: dict[str, Any] = {}
        if not chosen:
            updates["id"] = f"{self.id_prefix}-{next(self._counter)}"
        if msg.created_at is None:
            updates["created_at"] = datetime.now(UTC)
        # a copy either way: the caller's object never becomes part of this conversation
        return self.scrub.message(field, msg.model_copy(update=updates, deep=isinstance(message, Message))), chosen
