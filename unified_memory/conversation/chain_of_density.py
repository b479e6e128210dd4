"""Chain of Density summarization (Adams et al., 2023) over conversation messages.

One call asks the model for an entity-sparse summary of at most ``max_words``
words; each of ``loops`` densification passes then shows the conversation and the
current summary and asks for a rewrite that adds 1-3 informative entities still
missing, without growing beyond ``max_words`` words. ``instructions`` are appended
to the system prompt of every call. An empty reply keeps the previous iteration's
summary (for the first call: the offline extractive summary); a failing model
raises :class:`~unified_memory.errors.LLMError` with the cause chained.

    >>> from unified_memory.types import Message
    >>> replies = iter(["Ada called.", "Ada called about Lisbon.", "Ada, in Lisbon, is allergic to peanuts."])
    >>> chain_of_density(lambda prompt: next(replies),
    ...                  [Message(role="user", content="I'm Ada, in Lisbon, allergic to peanuts")], loops=2)
    'Ada, in Lisbon, is allergic to peanuts.'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from unified_memory.errors import LLMError, invalid
from unified_memory.extraction.summarizers import ExtractiveSummarizer, transcript
from unified_memory.types import Message

__all__ = ["chain_of_density"]

_SYSTEM = ("You write faithful, dense summaries of conversations for an AI assistant's long-term memory. "
           "Never invent facts; keep names, numbers, decisions, preferences and open tasks.")


def _system(instructions: str | None) -> str:
    return _SYSTEM + (f"\n\n{instructions.strip()}" if instructions and instructions.strip() else "")


def _conversation(previous: str | None, messages: Sequence[Message]) -> str:
    earlier = f"Summary of earlier conversation:\n{previous.strip()}\n\n" if previous and previous.strip() else ""
    return f"{earlier}Conversation:\n{transcript(messages)}"


def _ask(model: Any, system: str, prompt: str, step: int) -> str:
    try:
        reply = model.complete([{"role": "system", "content": system}, {"role": "user", "content": prompt}])
    except LLMError:
        raise
    except Exception as exc:
        raise LLMError(f"llm: chain-of-density call {step} failed: {type(exc).__name__}: {exc}",
                       field="llm") from exc
    return reply.strip() if isinstance(reply, str) else ""


def chain_of_density(llm: Any, messages: Sequence[Message], *, previous_summary: str | None = None,
                     loops: int = 5, max_words: int = 120, instructions: str | None = None) -> str:
    """Summarize ``messages`` (and ``previous_summary``) with ``1 + loops`` model calls.

    ``llm`` is anything :func:`~unified_memory.agents.llm.as_llm` accepts; each call gets a
    system and a user message and its reply (stripped) is the new summary.

    >>> chain_of_density(lambda prompt: "  ", [Message(role="user", content="I live in Lisbon.")], loops=1)
    'user: I live in Lisbon.'
    """
    from unified_memory.agents.llm import as_llm

    if isinstance(loops, bool) or not isinstance(loops, int) or loops < 1:
        raise invalid("cod_max_loops", f"must be an int of at least 1, got {loops!r}")
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise invalid("summary_max_words", f"must be an int of at least 1, got {max_words!r}")
    model = as_llm(llm)
    system = _system(instructions)
    conversation = _conversation(previous_summary, messages)
    summary = _ask(model, system, (
        f"{conversation}\n\nWrite an initial summary of this conversation in at most {max_words} words. "
        "Keep it entity-sparse: mention only one to three of the most important entities, in general terms. "
        "Reply with the summary only."), 1)
    if not summary:
        summary = ExtractiveSummarizer().summarize(previous_summary or "", messages)
    for step in range(2, loops + 2):
        dense = _ask(model, system, (
            f"{conversation}\n\nCurrent summary:\n{summary or '(empty)'}\n\n"
            "Step 1: identify 1-3 informative entities (names, places, numbers, decisions, preferences, tasks) "
            "from the conversation that are missing from the current summary.\n"
            "Step 2: rewrite the summary so that it keeps every entity it already has and adds the missing ones, "
            f"fusing and compressing the wording so that it does not grow beyond {max_words} words.\n"
            "Reply with the new summary only."), step)
        if dense:
            summary = dense
    return summary
