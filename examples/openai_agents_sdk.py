"""An OpenAI Agents SDK agent whose sessions remember across sessions (offline, with a fake model).

:class:`~unified_memory.integrations.openai_agents.MemorySession` is the SDK session: the
``Runner`` reads the session's items from unified-memory and logs each run's new items there
(facts, people and relations are extracted from what the user says). Before each run the agent
is given the memory's context for the message, so a new session, with no items yet, still
knows what the user said in the last one.

The model here is a stand-in that answers with the remembered line sharing the most words with
the question (no network, no key); put any Agents SDK model in its place::

    pip install "unified-memory[openai-agents]"
    python examples/openai_agents_sdk.py            # MEMORY_DB=memory.db keeps it across runs
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from typing import Any

from agents import Agent, Runner, set_tracing_disabled
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from unified_memory import UnifiedMemory
from unified_memory.integrations.openai_agents import MemorySession

_WORD = re.compile(r"[a-z0-9]+")
_FILLER = {"user", "assistant", "my", "i", "am", "do", "does", "what", "where", "to"}


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class RememberingFakeModel(Model):
    """Answers the newest user message with the memory line (``- ...`` in its instructions)
    that shares the most words with it; "Noted." when none does."""

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
                           ) -> ModelResponse:
        items = input if isinstance(input, list) else [{"role": "user", "content": input}]
        said = [i.get("content") for i in items if i.get("role") == "user" and isinstance(i.get("content"), str)]
        asked = _words(said[-1] if said else "") - _FILLER
        remembered = [line[2:] for line in (system_instructions or "").splitlines() if line.startswith("- ")]
        best = max(remembered, key=lambda line: len(asked & _words(line)), default=None)
        text = f"From memory: {best}" if best is not None and asked & _words(best) else "Noted."
        output = [ResponseOutputMessage(id="msg_fake", type="message", role="assistant", status="completed",
                                        content=[ResponseOutputText(type="output_text", text=text, annotations=[])])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the fake model does not stream")


AGENT = Agent(name="assistant", instructions="You are a helpful assistant.", model=RememberingFakeModel())


async def chat(memory: UnifiedMemory, session: MemorySession, message: str) -> str:
    """One run: the agent gets the memory's context for the message; the session keeps the items."""
    block = await memory.acontext(message, max_tokens=300, include_conversation=False)
    agent = AGENT.clone(instructions=f"{AGENT.instructions}\n\nWhat you remember:\n{block.text}")
    result = await Runner.run(agent, message, session=session)
    return str(result.final_output)


async def conversation(argv: list[str]) -> None:
    with UnifiedMemory(os.environ.get("MEMORY_DB"), user_id="ada") as memory:
        monday = MemorySession("monday", memory=memory)
        for said in ["My sister Maria lives in Lisbon", "I'm allergic to peanuts", "Tell me a joke"]:
            print(f"monday> {said}\n  {await chat(memory, monday, said)}")
        tuesday = MemorySession("tuesday", memory=memory)  # a new session: none of monday's items
        for asked in argv[1:] or ["What am I allergic to?", "Where does my sister live?"]:
            print(f"tuesday> {asked}\n  {await chat(memory, tuesday, asked)}")
        print(f"(tuesday's session holds {len(await tuesday.get_items())} items; "
              f"monday's {len(await monday.get_items())})")


def main(argv: list[str]) -> int:
    set_tracing_disabled(True)  # no network: the SDK would export traces to OpenAI
    asyncio.run(conversation(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
