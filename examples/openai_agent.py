"""A chat agent with long-term memory, on any OpenAI-compatible endpoint.

``@remember(mem)`` wraps ``Agent.run``: before each call the memories relevant to
the message are put in front of ``self.system_prompt``; after it, the turn is
logged and facts, entities and triples are extracted from it — here by the same
model, through :class:`~unified_memory.extraction.llm_extractor.LLMExtractor` (which falls
back to the offline rules when the model is down or answers badly).

Configuration (environment variables, read on first use, never at import):

* ``OPENAI_BASE_URL`` — the endpoint; unset means OpenAI itself.
* ``OPENAI_API_KEY`` — the key; local servers ignore it ("not-needed" is used).
* ``MODEL`` — the model name (default ``gpt-4o-mini``).
* ``MEMORY_DB`` — a SQLite file to keep memories across runs (default: in memory).

With OpenAI::

    pip install "unified-memory[llm]"
    OPENAI_API_KEY=sk-... python examples/openai_agent.py

With Ollama (``ollama serve``; ``ollama pull llama3.2``)::

    OPENAI_BASE_URL=http://localhost:11434/v1 MODEL=llama3.2 python examples/openai_agent.py

vLLM (``http://localhost:8000/v1``) and the llama.cpp server (``http://localhost:8080/v1``)
work the same way. Give messages as arguments for a scripted run, e.g.
``python examples/openai_agent.py "My sister Maria lives in Lisbon" "Where does my sister live?"``,
or none to chat interactively (an empty line quits).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from unified_memory import UnifiedMemory, remember
from unified_memory.agents.llm import LLMError, OpenAICompatibleLLM
from unified_memory.extraction.llm_extractor import LLMExtractor

_llm: OpenAICompatibleLLM | None = None


def default_llm() -> OpenAICompatibleLLM:
    """The model named by the environment, built on first use (building it does no I/O)."""
    global _llm
    if _llm is None:
        _llm = OpenAICompatibleLLM(os.environ.get("MODEL", "gpt-4o-mini"),
                                   base_url=os.environ.get("OPENAI_BASE_URL") or None,
                                   api_key=os.environ.get("OPENAI_API_KEY") or None)
    return _llm


def _extraction_llm(messages: list[dict[str, Any]]) -> str:
    return default_llm().complete(messages)


mem = UnifiedMemory(os.environ.get("MEMORY_DB") or None, extractor=LLMExtractor(_extraction_llm))


@remember(mem)
class Agent:
    """Answers with the model; ``@remember`` adds the memory around each ``run``."""

    system_prompt = "You are a helpful assistant. Use what you remember about the user; be brief."

    def __init__(self, llm: Any = None) -> None:
        self.llm = llm or default_llm()

    def run(self, message: str, *, user_id: str = "default") -> str:
        return self.llm.complete([{"role": "system", "content": self.system_prompt},
                                  {"role": "user", "content": message}])


def main(argv: list[str]) -> int:
    agent = Agent()
    scripted = argv[1:]
    while True:
        if scripted:
            message = scripted.pop(0)
            print(f"you> {message}")
        elif len(argv) > 1:
            break
        else:
            try:
                message = input("you> ").strip()
            except EOFError:
                break
            if not message:
                break
        try:
            print(f"agent> {agent.run(message)}")
        except LLMError as exc:  # endpoint down, wrong model name...: say so and stop
            print(f"error: {exc}\n(is the server at OPENAI_BASE_URL running, and MODEL pulled?)", file=sys.stderr)
            return 1
    print("\nremembered:", *(f"  - {fact.text}" for fact in mem.facts()), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
