"""A Google ADK agent whose memory remembers across sessions (offline, with a stand-in model).

ADK's ``Runner`` gives its memory service to the agent's ``load_memory`` tool: when the model
calls it with a query, the tool answers with ``search_memory``'s memories.
:class:`~unified_memory.integrations.google_adk.UnifiedMemoryService` is that service over
unified-memory: after Monday's session it is added to the memory (facts, people and relations
are extracted from what the user said), and on Tuesday a new session, with no history of its
own, finds them.

The model here is a stand-in that, asked a question, calls ``load_memory`` and answers with the
remembered line sharing the most words with the question (no network, no key); put any ADK
model (``"gemini-2.5-flash"``, ``LiteLlm(...)``) in its place::

    pip install "unified-memory[google-adk]"
    python examples/google_adk_agent.py            # MEMORY_DB=memory.db keeps it across runs
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import Agent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import load_memory
from google.genai import types
from pydantic import BaseModel

from unified_memory import UnifiedMemory
from unified_memory.integrations.google_adk import UnifiedMemoryService

_WORD = re.compile(r"[a-z0-9]+")
_SKIP = {"my", "i", "do", "does", "what", "where", "am", "is", "the", "a", "to"}
APP, USER = "assistant", "ada"


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower())) - _SKIP


def _said(part: Any) -> str:
    return part.text or ""


def _remembered(response: Any) -> list[str]:
    """The texts of the memories in ``load_memory``'s answer (``{"result": LoadMemoryResponse}``)."""
    result = (response or {}).get("result", response)
    if isinstance(result, BaseModel):
        result = result.model_dump()
    memories = result.get("memories", []) if isinstance(result, dict) else []
    return [part["text"] for m in memories for part in (m.get("content") or {}).get("parts") or []
            if part.get("text")]


def _reply(request: LlmRequest, part: types.Part) -> LlmResponse:
    """The model's answer, with the token counts ADK's metrics ask for (estimated: 4 characters a token)."""
    prompt = sum(len(p.text or "") for c in request.contents for p in c.parts or []) // 4
    usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=prompt,
                                                       candidates_token_count=len(part.text or "") // 4 + 1)
    return LlmResponse(content=types.Content(role="model", parts=[part]), usage_metadata=usage)


class RememberingStandIn(BaseLlm):
    """Asked a question, calls ``load_memory``; given the memories, answers with the one sharing the
    most words with the question; anything else is "Noted."."""

    model: str = "remembering-stand-in"

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        asked = next((_said(p) for c in reversed(llm_request.contents) if c.role == "user"
                      for p in c.parts or [] if p.text), "")
        last = llm_request.contents[-1].parts or [] if llm_request.contents else []
        found = [p.function_response for p in last if p.function_response is not None]
        if found:  # the tool answered: pick the best memory
            lines = _remembered(found[0].response)
            best = max(lines, key=lambda line: len(_words(asked) & _words(line)), default="")
            text = f"From memory: {best}" if _words(asked) & _words(best) else "I don't remember that."
            yield _reply(llm_request, types.Part(text=text))
        elif asked.rstrip().endswith("?"):  # a question: look it up
            call = types.FunctionCall(name="load_memory", args={"query": asked})
            yield _reply(llm_request, types.Part(function_call=call))
        else:
            yield _reply(llm_request, types.Part(text="Noted."))


async def chat(runner: Runner, session_id: str, said: str) -> str:
    """One turn: the agent's last text."""
    answer = ""
    message = types.Content(role="user", parts=[types.Part(text=said)])
    async for event in runner.run_async(user_id=USER, session_id=session_id, new_message=message):
        if event.content is not None and any(p.text for p in event.content.parts or []):
            answer = "".join(p.text or "" for p in event.content.parts or [])
    return answer


async def run(store: UnifiedMemory, questions: list[str]) -> None:
    memory_service = UnifiedMemoryService(store, limit=5)
    sessions = InMemorySessionService()
    agent = Agent(name="assistant", model=RememberingStandIn(), tools=[load_memory],
                  instruction="Answer from memory when you can.")
    runner = Runner(app_name=APP, agent=agent, session_service=sessions, memory_service=memory_service)

    await sessions.create_session(app_name=APP, user_id=USER, session_id="monday")
    for said in ["My sister Maria lives in Lisbon", "I'm allergic to peanuts", "I keep bees on the roof"]:
        print(f"monday> {said}\n  {await chat(runner, 'monday', said)}")
    monday = await sessions.get_session(app_name=APP, user_id=USER, session_id="monday")
    assert monday is not None
    await memory_service.add_session_to_memory(monday)  # the host's call (an after_agent_callback works too)

    await sessions.create_session(app_name=APP, user_id=USER, session_id="tuesday")  # nothing of monday in it
    for asked in questions:
        print(f"tuesday> {asked}\n  {await chat(runner, 'tuesday', asked)}")


def main(argv: list[str]) -> int:
    with UnifiedMemory(os.environ.get("MEMORY_DB"), user_id=USER) as store:
        asyncio.run(run(store, argv[1:] or ["Where does my sister live?"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
