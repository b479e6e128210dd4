"""A LangGraph agent whose long-term memory is unified-memory (``pip install "unified-memory[langgraph]"``).

The graph has two nodes: ``remember`` stores what the user says in the store (a
:class:`~unified_memory.integrations.langgraph.MemoryStore` over a
:class:`~unified_memory.UnifiedMemory`), ``respond`` answers from ``store.search(query=...)``.
The model is a fake (no network): it answers with the best memory the search ranked, or says
it noted the message. On "monday" the user tells it things; on "tuesday" (a new thread) it
answers from them::

    python examples/langgraph_agent.py                      # in memory
    MEMORY_DB=memory.db python examples/langgraph_agent.py  # in a file, kept
    python examples/langgraph_agent.py "Where does my sister live?"
"""

from __future__ import annotations

import os
import sys
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import SearchItem

from unified_memory import UnifiedMemory
from unified_memory.integrations.langgraph import MemoryStore


class State(TypedDict):
    user_id: str
    message: str
    reply: str


def fake_model(message: str, memories: list[SearchItem]) -> str:
    """A stand-in for a chat model: answers a question from the best matching memory."""
    if message.rstrip().endswith("?"):
        best = next((m for m in memories if m.score is not None), None)
        return f"From memory: {best.value['text']}" if best else "I don't know yet."
    return "Noted."


def remember(state: State, runtime: Runtime) -> dict[str, str]:
    """Store what the user says (not their questions) under ("memories", user_id)."""
    if not state["message"].rstrip().endswith("?"):
        namespace = ("memories", state["user_id"])
        count = len(runtime.store.search(namespace, limit=1000))
        runtime.store.put(namespace, f"said-{count}", {"text": state["message"]})
    return {}


def respond(state: State, runtime: Runtime) -> dict[str, str]:
    memories = runtime.store.search(("memories", state["user_id"]), query=state["message"], limit=3)
    return {"reply": fake_model(state["message"], memories)}


def build(store: MemoryStore):  # noqa: ANN201 - LangGraph's compiled graph type
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("respond", respond)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "respond")
    builder.add_edge("respond", END)
    return builder.compile(store=store)


def main(argv: list[str]) -> int:
    with UnifiedMemory(os.environ.get("MEMORY_DB")) as memory:
        graph = build(MemoryStore(memory, user_label=1))  # label 1 of ("memories", user_id) names the user
        for said in ["My sister Maria lives in Lisbon", "I'm allergic to peanuts", "Tell me a joke"]:
            reply = graph.invoke({"user_id": "ada", "message": said, "reply": ""})["reply"]
            print(f"monday> {said}\n  {reply}")
        for asked in argv[1:] or ["What am I allergic to?", "Where does my sister live?"]:
            reply = graph.invoke({"user_id": "ada", "message": asked, "reply": ""})["reply"]
            print(f"tuesday> {asked}\n  {reply}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
