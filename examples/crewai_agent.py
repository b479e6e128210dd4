"""A CrewAI crew whose memory lasts from one run to the next (offline, with a stand-in model).

``Crew(..., memory=CrewMemory(...))`` gives the crew unified-memory as its memory: after each
task CrewAI saves what was asked and the result as a fact of the user; before each task it
recalls what bears on it and puts it in the agent's prompt. So Tuesday's crew, a new crew
with a new task, plans with what Monday's crew was told.

The model here is a stand-in that notes what the guest says, and answers a question with the
remembered note sharing the most words with it (no network, no key); give the agent any
CrewAI LLM instead::

    pip install "unified-memory[crewai]"
    python examples/crewai_agent.py                 # MEMORY_DB=memory.db keeps it across runs
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")  # offline: no telemetry, no traces
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")

from crewai import Agent, Crew, Task  # noqa: E402
from crewai.llms.base_llm import BaseLLM  # noqa: E402

from unified_memory import UnifiedMemory  # noqa: E402
from unified_memory.integrations.crewai import CrewMemory  # noqa: E402

_WORD = re.compile(r"[a-z0-9]+")
_COMMON = {"the", "a", "guest", "for", "what", "must", "of", "to", "is", "and", "does", "do", "their", "my", "i"}


class StandInLLM(BaseLLM):
    """Notes what the guest says; answers anything else with the best-matching remembered note."""

    def call(self, messages: Any, tools: Any = None, callbacks: Any = None, available_functions: Any = None,
             from_task: Any = None, from_agent: Any = None, response_model: Any = None) -> str:
        prompt = messages if isinstance(messages, str) else "\n".join(str(m.get("content")) for m in messages)
        task = next((line.removeprefix("Current Task: ") for line in prompt.splitlines()
                     if line.startswith("Current Task: ")), "")
        if task.startswith("The guest says: "):
            answer = "Noted: " + task.removeprefix("The guest says: ").split(". Note", 1)[0]
        else:
            asked = set(_WORD.findall(task.lower())) - _COMMON
            notes = [line.removeprefix("Result: Noted: ") for line in prompt.splitlines()
                     if line.startswith("Result: Noted: ")]
            best = max(notes, key=lambda note: len(asked & set(_WORD.findall(note.lower()))), default=None)
            found = best is not None and asked & set(_WORD.findall(best.lower()))
            answer = f"From memory: {best}" if found else "I don't know yet."
        return f"Thought: I now know the final answer\nFinal Answer: {answer}"

    def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
        return len(str(messages)) // 4  # about four characters a token (CrewAI's estimate, without its warning)

    def supports_function_calling(self) -> bool:
        return False

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 8192


def run(memory: CrewMemory, description: str) -> str:
    """One crew, one task: a new crew each time, sharing only the memory."""
    concierge = Agent(role="Concierge", goal="Look after the guest", backstory="A hotel concierge who notes "
                      "what guests say.", llm=StandInLLM(model="stand-in"), allow_delegation=False)
    task = Task(description=description, expected_output="A short answer.", agent=concierge)
    return str(Crew(agents=[concierge], tasks=[task], memory=memory).kickoff().raw)


def main(argv: list[str]) -> int:
    with UnifiedMemory(os.environ.get("MEMORY_DB"), user_id="ada") as store:
        memory = CrewMemory(memory=store)
        for said in ["The guest Ada is allergic to peanuts", "Ada keeps bees on the roof",
                     "Ada's sister Maria lives in Lisbon"]:
            print(f"monday> {said}\n  {run(memory, f'The guest says: {said}. Note it for their stay.')}")
        for asked in argv[1:] or ["Plan a dinner for Ada: what is she allergic to?"]:
            print(f"tuesday> {asked}\n  {run(memory, asked)}")
        memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
