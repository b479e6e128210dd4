"""selectools' ``ConversationMemory``, over :class:`~unified_memory.Conversation`.

A sliding window bounded by ``max_messages`` and optionally ``max_tokens``.
Unlike a plain pop-from-the-front window it drops whole interactions and never
while a tool call waits for its result, so a tool result is never orphaned.

    >>> from unified_memory.compat.selectools import ConversationMemory, Message, Role
    >>> memory = ConversationMemory(max_messages=3)
    >>> for i in range(5):
    ...     memory.add(Message(role=Role.USER, content=f"Message {i}"))
    >>> [m.content for m in memory.get_history()]
    ['Message 2', 'Message 3', 'Message 4']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from unified_memory.conversation.engine import Conversation
from unified_memory.errors import wrong_type
from unified_memory.types import Message
from unified_memory.validation import check_limit

__all__ = ["ConversationMemory", "Message", "Role"]


class Role(StrEnum):
    """Message roles, usable wherever a role string is expected.

    >>> Message(role=Role.TOOL, content="42", tool_call_id="c1").role
    'tool'
    """

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class ConversationMemory:
    """Dialogue history across agent runs, trimmed to the newest messages.

    ``summarize_on_trim`` folds trimmed messages into :attr:`summary` (offline by
    default, or with ``summarizer``); ``to_dict`` / ``from_dict`` round-trip the exact
    state without re-trimming; :meth:`branch` gives an independent copy.

    >>> memory = ConversationMemory(max_messages=2, summarize_on_trim=True)
    >>> memory.add_many([Message(role="user", content="My name is Alice."),
    ...                  Message(role="assistant", content="Hi Alice!"), Message(role="user", content="Hi")])
    >>> memory.summary
    'user: My name is Alice.\\nassistant: Hi Alice!'
    """

    def __init__(self, max_messages: int = 20, max_tokens: int | None = None, *,
                 summarize_on_trim: bool = False, summarizer: Any = None, count_tokens: Any = None) -> None:
        check_limit("max_messages", max_messages)
        if max_tokens is not None:
            check_limit("max_tokens", max_tokens)
        self.conversation = Conversation(max_messages=max_messages, max_tokens=max_tokens,
                                         summarize_on_trim=summarize_on_trim, summarizer=summarizer,
                                         count_tokens=count_tokens)

    @property
    def max_messages(self) -> int:
        """The message limit."""
        return self.conversation.max_messages or 0

    @property
    def max_tokens(self) -> int | None:
        """The optional token limit."""
        return self.conversation.max_tokens

    @property
    def summary(self) -> str | None:
        """The summary of trimmed messages (``None`` until something was summarised)."""
        return self.conversation.summary

    @summary.setter
    def summary(self, text: str | None) -> None:
        self.conversation.set_summary(text)

    @property
    def last_trimmed(self) -> list[Message]:
        """The messages removed by the most recent trim."""
        return list(self.conversation.last_trimmed)

    _last_trimmed = last_trimmed

    def add(self, message: Message | Mapping[str, Any]) -> None:
        """Add one message, then enforce the limits."""
        self.conversation.add(message)

    def add_many(self, messages: Iterable[Message | Mapping[str, Any]]) -> None:
        """Add several messages (validated together), then enforce the limits once."""
        self.conversation.add_many(messages)

    def get_history(self) -> list[Message]:
        """The whole held history, oldest first (a copy)."""
        return self.conversation.messages()

    def get_recent(self, n: int) -> list[Message]:
        """The last ``n`` messages (``n`` >= 1)."""
        return self.conversation.recent(n)

    def clear(self) -> None:
        """Forget every message and the summary."""
        self.conversation.reset()

    def __len__(self) -> int:
        return len(self.conversation)

    def to_dict(self) -> dict[str, Any]:
        """Serialise: limits, messages and summary (selectools' keys, plus the full engine state).

        >>> memory = ConversationMemory(); memory.add(Message(role="user", content="hi"))
        >>> ConversationMemory.from_dict(memory.to_dict()).get_history()[0].content
        'hi'
        """
        return {"max_messages": self.max_messages, "max_tokens": self.max_tokens,
                "message_count": len(self.conversation),
                "messages": [m.model_dump(mode="json", exclude_none=True) for m in self.conversation.messages()],
                "summary": self.conversation.summary, "state": self.conversation.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConversationMemory:
        """Rebuild from :meth:`to_dict` output as it was: limits are not re-applied, so
        nothing is dropped; a leading orphaned tool result is skipped."""
        if not isinstance(data, Mapping):
            raise wrong_type("data", "dict", data)
        memory = cls(max_messages=data.get("max_messages") or 20, max_tokens=data.get("max_tokens"))
        state = data.get("state")
        if state is None:
            state = {"session_id": memory.conversation.session_id, "messages": data.get("messages") or [],
                     "summary": data.get("summary"), "max_messages": data.get("max_messages") or 20,
                     "max_tokens": data.get("max_tokens")}
        restored = Conversation.from_dict(state)
        skip = 0
        held = restored.messages()
        while skip < len(held) and held[skip].role == "tool":
            skip += 1
        for orphan in held[:skip]:
            restored.remove(orphan.id)
        memory.conversation = restored
        return memory

    def branch(self) -> ConversationMemory:
        """An independent copy: what the copy adds or trims never reaches this memory."""
        copy = type(self).__new__(type(self))
        copy.conversation = self.conversation.branch()
        return copy
