"""lauren-ai's short-term memory and conversation store, over :class:`~unified_memory.Conversation`.

    >>> from unified_memory.compat.lauren import ShortTermMemory
    >>> memory = ShortTermMemory(max_tokens=8000)
    >>> memory.add_user("Hello, how are you?")
    >>> memory.add_assistant({"role": "assistant", "content": "Fine, thanks."})
    >>> [m.role for m in memory.messages()]
    ['user', 'assistant']

``InMemoryConversationStore`` (with ``list_conversations`` and ``clear``) is
:class:`tiers.sessions.InMemoryConversationStore`; ``ConversationStore`` is the
protocol every store implements.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tiers.sessions import InMemoryConversationStore
from unified_memory.conversation.engine import Conversation
from unified_memory.errors import wrong_type
from unified_memory.protocols import ConversationStore
from unified_memory.types import Message
from unified_memory.validation import check_limit

__all__ = ["ShortTermMemory", "ConversationStore", "InMemoryConversationStore", "content_from_blocks"]


def content_from_blocks(blocks: Sequence[Any]) -> tuple[str | None, list[str]]:
    """Text and images of a list of content blocks (OpenAI ``text`` / ``image_url``,
    Anthropic ``image`` with a ``url`` or ``base64`` source); other blocks are kept as JSON text.

    >>> content_from_blocks([{"type": "text", "text": "What is this?"},
    ...                      {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}])
    ('What is this?', ['https://x/cat.png'])
    """
    texts: list[str] = []
    images: list[str] = []
    for i, block in enumerate(blocks):
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, Mapping):
            raise wrong_type(f"content[{i}]", "str or dict block", block)
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "image_url":
            image = block.get("image_url")
            images.append(str(image.get("url") if isinstance(image, Mapping) else image))
        elif kind == "image" and isinstance(block.get("source"), Mapping):
            source = block["source"]
            if source.get("type") == "base64":
                images.append(f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}")
            else:
                images.append(str(source.get("url", "")))
        else:
            texts.append(json.dumps(block, ensure_ascii=False))
    return ("\n".join(texts) if texts else None), images


def _tool_call(call: Any) -> dict[str, Any]:
    """An OpenAI-style tool-call dict from a dict or an object with id, name and arguments."""
    if isinstance(call, Mapping):
        return dict(call)
    arguments = getattr(call, "arguments", getattr(call, "input", {}))
    return {"id": str(getattr(call, "id", "")), "type": "function",
            "function": {"name": str(getattr(call, "name", "")),
                         "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}


class ShortTermMemory:
    """Sliding-window conversation buffer for one agent run (lauren-ai's API).

    ``messages()`` returns a copy trimmed to ``max_tokens`` (whole interactions,
    system messages always kept); ``trim_to_fit`` trims the buffer itself.

    >>> memory = ShortTermMemory(max_tokens=10)
    >>> memory.add_user("an old question " * 5); memory.add_user("a new one")
    >>> [m.content for m in memory.messages()]
    ['a new one']
    """

    def __init__(self, max_tokens: int = 40000, *, count_tokens: Any = None) -> None:
        self.max_tokens = check_limit("max_tokens", max_tokens)
        self.conversation = Conversation(count_tokens=count_tokens)

    @property
    def summary(self) -> str | None:
        """The conversation summary set by :meth:`set_summary` (``None`` when unset)."""
        return self.conversation.summary

    def add_user(self, content: str | list[Any]) -> None:
        """Append a user message: a string or a list of content blocks (text and images)."""
        if isinstance(content, list):
            text, images = content_from_blocks(content)
            self.conversation.add(role="user", content=text, images=images or None)
        else:
            self.conversation.add(role="user", content=content)

    def add_assistant(self, completion: Any) -> None:
        """Append an assistant completion: an object with ``content`` and ``tool_calls``,
        or a dict like ``{"role": "assistant", "content": "..."}``."""
        if isinstance(completion, Mapping):
            self.conversation.add({**completion, "role": "assistant"})
            return
        calls = getattr(completion, "tool_calls", None) or None
        content = getattr(completion, "content", None)
        if content is not None and not isinstance(content, str):
            content, _ = content_from_blocks(content if isinstance(content, list) else [content])
        self.conversation.add(role="assistant", content=content,
                              tool_calls=[_tool_call(c) for c in calls] if calls else None)

    def add_tool_result(self, result: Any) -> None:
        """Append a tool result: a dict, or an object with ``tool_call_id``, ``content``
        (or ``output``), ``name`` and ``is_error``."""
        if isinstance(result, Mapping):
            self.conversation.add({**result, "role": "tool"})
            return
        content = getattr(result, "content", getattr(result, "output", None))
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, default=str)
        metadata = {"is_error": True} if getattr(result, "is_error", False) else {}
        self.conversation.add(role="tool", content=content, tool_call_id=getattr(result, "tool_call_id", None),
                              name=getattr(result, "name", None), metadata=metadata)

    def set_summary(self, text: str) -> None:
        """Store ``text`` as the summary of the older turns (kept by snapshot/restore)."""
        self.conversation.set_summary(text)

    def messages_to_summarize(self, keep_recent: int = 6) -> list[Message]:
        """The oldest non-system messages, all but the ``keep_recent`` newest."""
        return self.conversation.messages_to_summarize(keep_recent)

    def trim_to_recent(self, keep_recent: int = 6) -> None:
        """Drop all but the ``keep_recent`` newest non-system messages."""
        self.conversation.trim_to_recent(keep_recent)

    def messages(self) -> list[Message]:
        """The messages trimmed to ``max_tokens``; the buffer itself is not changed."""
        return self.conversation.fit(self.max_tokens)

    def trim_to_fit(self, max_tokens: int) -> None:
        """Drop the oldest whole interactions until the buffer fits ``max_tokens``."""
        self.conversation.trim_to_fit(max_tokens)

    def clear(self) -> None:
        """Remove every message and the summary."""
        self.conversation.reset()

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the state: ``{"messages": [...], "summary": str | None}``.

        >>> memory = ShortTermMemory(); memory.add_user("hi"); memory.set_summary("greetings")
        >>> ShortTermMemory().restore(memory.snapshot()) is None
        True
        """
        return {"messages": [m.model_dump(mode="json", exclude_none=True) for m in self.conversation.messages()],
                "summary": self.conversation.summary}

    def restore(self, data: Any) -> None:
        """Restore from :meth:`snapshot` output, or from the legacy plain list of messages."""
        if isinstance(data, list):
            data = {"messages": data, "summary": None}
        if not isinstance(data, Mapping):
            raise wrong_type("data", "snapshot dict or list of messages", data)
        messages = data.get("messages") or []
        if not isinstance(messages, list):
            raise wrong_type("data.messages", "list", messages)
        fresh = Conversation(count_tokens=self.conversation.count_tokens)
        fresh.add_many(messages)  # validates every message before anything changes
        fresh.set_summary(data.get("summary"))
        self.conversation = fresh
