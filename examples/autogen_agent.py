"""An AutoGen assistant whose memory remembers across sessions (offline, with a stand-in model).

``AssistantAgent(..., memory=[AutoGenMemory(store)])`` asks the memory, before every model call,
for what it knows that bears on the latest message:
:class:`~unified_memory.integrations.autogen.AutoGenMemory` adds unified-memory's context block
for it to the model's messages. On Monday the user tells the assistant things; each finished
run is logged in the memory (``add_messages``: facts, people and places are extracted from what
the user said), and one preference is added directly (``add``). On Tuesday a new assistant,
with nothing of Monday in its chat, answers from the memory.

The model here is a stand-in that answers with the remembered line sharing the most words with
the question (no network, no key); put any AutoGen model client in its place::

    pip install "unified-memory[autogen]"
    python examples/autogen_agent.py            # MEMORY_DB=memory.db keeps it across runs
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_core import CancellationToken
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_core.models import (
    ChatCompletionClient,
    CreateResult,
    LLMMessage,
    ModelCapabilities,
    ModelInfo,
    RequestUsage,
    SystemMessage,
    UserMessage,
)

from unified_memory import UnifiedMemory
from unified_memory.integrations.autogen import AutoGenMemory

_WORD = re.compile(r"[a-z0-9]+")
_SMALL = {"user", "my", "i", "me", "do", "does", "what", "where", "the", "a", "to", "is", "am", "which", "should", "use",
          "tell", "about"}


class RememberingFakeClient(ChatCompletionClient):
    """A stand-in chat model: answers a question with the line of the memory block (the system
    message AutoGenMemory added) that shares the most words with it, else says "Noted."."""

    def __init__(self) -> None:
        self.seen: list[list[LLMMessage]] = []  # the messages of every call, for tests

    async def create(self, messages: Sequence[LLMMessage], *, tools: Sequence[Any] = (), tool_choice: Any = "auto",
                     json_output: Any = None, extra_create_args: Mapping[str, Any] = {},
                     cancellation_token: CancellationToken | None = None) -> CreateResult:
        self.seen.append(list(messages))
        said = [m.content for m in messages if isinstance(m, UserMessage) and isinstance(m.content, str)]
        asked = set(_WORD.findall(said[-1].lower())) - _SMALL if said else set()
        remembered = [line[2:] for m in messages if isinstance(m, SystemMessage) and "<memory>" in m.content
                      for line in m.content.splitlines() if line.startswith("- ")]
        best = max(remembered, key=lambda line: len(asked & set(_WORD.findall(line.lower()))), default=None)
        if best is None or not asked & set(_WORD.findall(best.lower())):
            answer = "Noted."
        else:
            answer = f"From memory: {best}"
        return CreateResult(finish_reason="stop", content=answer, usage=RequestUsage(0, 0), cached=False)

    async def create_stream(self, messages: Sequence[LLMMessage], **kwargs: Any) -> AsyncGenerator[str | CreateResult]:
        yield await self.create(messages, **kwargs)

    async def close(self) -> None:
        pass

    def actual_usage(self) -> RequestUsage:
        return RequestUsage(0, 0)

    def total_usage(self) -> RequestUsage:
        return RequestUsage(0, 0)

    def count_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
        return sum(len(str(m.content)) // 4 for m in messages)

    def remaining_tokens(self, messages: Sequence[LLMMessage], **kwargs: Any) -> int:
        return 100_000 - self.count_tokens(messages)

    @property
    def capabilities(self) -> ModelCapabilities:  # deprecated in AutoGen, still abstract
        return ModelCapabilities(vision=False, function_calling=False, json_output=False)

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(vision=False, function_calling=False, json_output=False, family="unknown",
                         structured_output=False)


def assistant(store: UnifiedMemory) -> AssistantAgent:
    """A new assistant (an empty chat) whose memory is the store."""
    return AssistantAgent("assistant", model_client=RememberingFakeClient(), memory=[AutoGenMemory(store, k=5)])


async def run(argv: list[str]) -> None:
    with UnifiedMemory(os.environ.get("MEMORY_DB"), user_id="ada") as store:
        monday = assistant(store)
        memory = AutoGenMemory(store, k=5)
        await memory.add(MemoryContent(content="The user prefers metric units", mime_type=MemoryMimeType.TEXT,
                                       metadata={"category": "preferences"}))
        for said in ["My sister Maria lives in Lisbon", "I'm allergic to peanuts", "I keep bees on the roof",
                     "Tell me a joke"]:
            result = await monday.run(task=said)
            await memory.add_messages(result.messages)  # the turn, logged: facts are extracted from it
            print(f"monday> {said}\n  {result.messages[-1].to_text()}")
        tuesday = assistant(store)  # a new chat: nothing of monday in its messages
        for asked in argv[1:] or ["Where does my sister live?", "Which units should I use?"]:
            result = await tuesday.run(task=asked)
            print(f"tuesday> {asked}\n  {result.messages[-1].to_text()}")


def main(argv: list[str]) -> int:
    asyncio.run(run(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
