"""The memory as a LlamaIndex memory block (``pip install "unified-memory[llama-index]"``).

LlamaIndex's ``Memory`` keeps the recent chat as a token-bounded queue and, when it overflows,
hands the oldest messages to its memory blocks; before each model call it asks every block
for content to put in the prompt. :class:`MemoryBlock` is such a block over a
:class:`~unified_memory.UnifiedMemory` (or a :class:`~unified_memory.RemoteMemory`):

- ``aput(messages)`` logs what LlamaIndex flushes to it in the memory (facts, people and
  relations are extracted from it as from any logged turn), under the chat's session id;
- ``aget(messages)`` answers with what the memory's context block holds for the latest
  messages, within ``max_tokens`` (facts, entities and past episodes relevant to them, as
  ``## Facts`` / ``## Entities`` / ``## Episodes`` lists): LlamaIndex puts it inside its own
  ``<memory><long_term_memory>`` tags, so the block leaves out the context block's
  ``<memory>`` frame. Stored text is escaped (``& < >``) as in every context block: nothing a
  user said can close LlamaIndex's tags;
- ``atruncate`` answers the same question again within a smaller budget when LlamaIndex must
  cut the prompt (LlamaIndex picks the blocks to cut by ``priority``; ``0``: never cut).

.. code-block:: python

    from llama_index.core.memory import Memory
    from unified_memory import UnifiedMemory
    from unified_memory.integrations.llama_index import MemoryBlock

    store = UnifiedMemory("memory.db", user_id="ada")
    memory = Memory.from_defaults(session_id="chat-1", token_limit=4000,
                                  memory_blocks=[MemoryBlock(memory=store, max_tokens=800)])
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from pydantic import ValidationError

from unified_memory.errors import DependencyError
from unified_memory.integrations._checks import check_memory, library_error
from unified_memory.validation import check_limit

INSTALL_HINT = 'pip install "unified-memory[llama-index]"'

try:
    from llama_index.core.base.llms.types import ChatMessage, TextBlock
    from llama_index.core.bridge.pydantic import ConfigDict, Field, PrivateAttr, field_validator
    from llama_index.core.memory import BaseMemoryBlock
except ImportError as exc:  # tests/integrations/test_without_frameworks.py
    raise DependencyError(f"unified_memory.integrations.llama_index needs llama-index-core: {INSTALL_HINT}") from exc

__all__ = ["MemoryBlock", "INSTALL_HINT"]

#: The memory methods the block calls (a UnifiedMemory and a RemoteMemory both have them).
_NEEDED = ("acontext", "aadd_messages", "scoped")
#: The context block's frame: its first line ``<memory>`` and last ``</memory>`` (the tag is
#: ``ContextConfig.header``); stored text is escaped, so only the frame is a tag of its own line.
_FRAME = re.compile(r"\A<([A-Za-z_][A-Za-z0-9_]*)>\n(.*)\n</\1>\Z", re.DOTALL)
_REMEMBERED = 64  # the contents aget answered lately, for atruncate to answer the same question smaller
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system", "tool": "tool",
          "function": "tool", "chatbot": "assistant", "model": "assistant"}


def _text(message: ChatMessage) -> str:
    """The text of a chat message (its text blocks; images and other blocks are left out)."""
    return "\n".join(block.text for block in message.blocks if isinstance(block, TextBlock) and block.text).strip()


def _inner(text: str) -> str:
    """The context block's text without its ``<memory>`` frame (LlamaIndex adds its own tags)."""
    framed = _FRAME.match(text)
    return framed.group(2) if framed else text


def _role(message: ChatMessage) -> str:
    return str(getattr(message.role, "value", message.role)).lower()


class MemoryBlock(BaseMemoryBlock[str]):
    """A LlamaIndex memory block over unified-memory (see the module docstring).

    ``memory``: a :class:`~unified_memory.UnifiedMemory` or :class:`~unified_memory.RemoteMemory`
    scoped to the user. ``max_tokens``: the most the block puts in the prompt.
    ``query_messages``: how many of the latest user messages make the query (the latest
    messages of any role when there is no user message). ``extract``: whether
    facts are extracted from the messages flushed to the block (the memory's setting when None).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    name: str = Field(default="long_term_memory", description="The name of the memory block.")
    description: str | None = Field(
        default="What the long-term memory holds about the user that bears on the latest messages.")
    priority: int = Field(default=1, description="LlamaIndex's truncation order (0: never truncated).")
    memory: Any = Field(description="A UnifiedMemory or RemoteMemory, scoped to the user.")
    max_tokens: int = Field(default=1000, description="The most tokens the block puts in the prompt.")
    query_messages: int = Field(default=1, description="How many of the latest user messages make the query.")
    extract: bool | None = Field(default=None, description="Extract facts from flushed messages (None: the memory's setting).")
    # what aget answered lately (content -> memory, question, size), for atruncate to answer the
    # same question smaller: keyed by the content, so chats sharing the block never mix answers
    _answered: OrderedDict[str, tuple[Any, str | None, int]] = PrivateAttr(default_factory=OrderedDict)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:  # the library's error, naming the field
            raise library_error(exc, "MemoryBlock") from None

    @field_validator("memory")
    @classmethod
    def _memory_like(cls, value: Any) -> Any:
        return check_memory(value, _NEEDED)

    @field_validator("max_tokens", "query_messages")
    @classmethod
    def _positive(cls, value: Any, info: Any) -> int:
        return check_limit(info.field_name, value)

    def _scoped(self, session_id: str | None) -> Any:
        return self.memory.scoped(session_id=session_id) if session_id else self.memory

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """What the memory's context block holds for the latest messages (its most important
        facts when there are none), without the block's ``<memory>`` frame; "" when it holds nothing."""
        said = [m for m in messages or [] if _role(m) == "user"] or list(messages or [])
        latest = [text for text in (_text(m) for m in said[-self.query_messages:]) if text]
        query = "\n".join(latest) or None
        memory = self._scoped(block_kwargs.get("session_id"))
        return await self._answer(memory, query, self.max_tokens)

    async def _answer(self, memory: Any, query: str | None, budget: int) -> str:
        block = await memory.acontext(query, max_tokens=budget, include_conversation=False)
        content = _inner(str(block.text))
        if content:
            self._answered[content] = (memory, query, int(block.tokens))
            self._answered.move_to_end(content)
            while len(self._answered) > _REMEMBERED:
                self._answered.popitem(last=False)
        return content

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Log the flushed messages (those with text) in the memory, under their session when they carry one."""
        by_session: dict[str | None, list[dict[str, str]]] = {}
        for message in messages:
            text = _text(message)
            if not text:
                continue
            role = _ROLES.get(_role(message), "user")
            session = message.additional_kwargs.get("session_id")
            by_session.setdefault(session if isinstance(session, str) and session else None, []).append(
                {"role": role, "content": text})
        for session, batch in by_session.items():
            await self._scoped(session).aadd_messages(batch, extract=self.extract)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """The same question answered within ``tokens_to_truncate`` fewer tokens: the memories
        that rank best for it still (None when nothing is left, or when the content is not one
        this block answered lately: then the whole block goes, as LlamaIndex's own blocks do)."""
        answered = self._answered.get(content) if isinstance(content, str) else None
        if answered is None:
            return None
        memory, query, tokens = answered
        budget = tokens - max(0, int(tokens_to_truncate))
        if budget < 1:
            return None
        return await self._answer(memory, query, budget) or None
