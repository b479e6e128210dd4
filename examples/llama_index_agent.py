"""A LlamaIndex chat engine whose memory remembers across sessions (offline, with a fake model).

LlamaIndex's ``Memory`` keeps the recent chat; what overflows it is handed to its memory
blocks. :class:`~unified_memory.integrations.llama_index.MemoryBlock` logs that in
unified-memory (facts, people and relations are extracted from it) and, before each model
call, puts the memory's context for the latest message into the system prompt. So a new
session, with an empty chat, still knows what the user said in the last one.

The model here is a stand-in that answers with the remembered line sharing the most words
with the question (no network, no key); put any LlamaIndex LLM in its place::

    pip install "unified-memory[llama-index]"
    python examples/llama_index_agent.py            # MEMORY_DB=memory.db keeps it across runs
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.memory import Memory

from unified_memory import UnifiedMemory
from unified_memory.integrations.llama_index import MemoryBlock

_WORD = re.compile(r"[a-z0-9]+")


class RememberingFakeLLM(CustomLLM):
    """Answers a question with the line of the memory block that shares the most words with it."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="remembering-fake")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        said = [line for line in prompt.splitlines() if line.startswith("user: ")]
        question = said[-1] if said else ""
        asked = set(_WORD.findall(question.lower())) - {"user", "assistant", "my", "i", "do", "does", "what", "where"}
        remembered = [line[2:] for line in prompt.splitlines() if line.startswith("- ")]
        best = max(remembered, key=lambda line: len(asked & set(_WORD.findall(line.lower()))), default=None)
        if best is None or not asked & set(_WORD.findall(best.lower())):
            return CompletionResponse(text="Noted.")
        return CompletionResponse(text=f"From memory: {best}")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        yield self.complete(prompt, formatted=formatted, **kwargs)


def session(store: UnifiedMemory, session_id: str) -> SimpleChatEngine:
    """A chat engine for one session: a short chat queue that flushes into the long-term memory."""
    memory = Memory.from_defaults(session_id=session_id, token_limit=400, chat_history_token_ratio=0.05,
                                  token_flush_size=20, memory_blocks=[MemoryBlock(memory=store, max_tokens=300)])
    return SimpleChatEngine.from_defaults(llm=RememberingFakeLLM(), memory=memory)


def main(argv: list[str]) -> int:
    with UnifiedMemory(os.environ.get("MEMORY_DB"), user_id="ada") as store:
        first = session(store, "monday")
        for said in ["My sister Maria lives in Lisbon", "I'm allergic to peanuts", "I keep bees on the roof",
                     "Tell me a joke", "Thanks, that was fun"]:
            print(f"monday> {said}\n  {first.chat(said)}")
        second = session(store, "tuesday")  # a new chat: nothing of monday in its queue
        for asked in argv[1:] or ["Where does my sister live?"]:
            print(f"tuesday> {asked}\n  {second.chat(asked)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
