"""Summarize-on-trim: what leaves the short-term window is folded into a running summary.

The default :class:`ExtractiveSummarizer` is offline and deterministic: it keeps
the most important sentences (by the importance scorer) of the previous summary
and the trimmed messages, within ``max_chars``, in the order they were said.
:class:`LLMSummarizer` asks a (cheaper) chat model to update the summary and falls
back to the extractive one when the model fails or answers nothing usable.

    >>> from unified_memory.types import Message
    >>> summary = ExtractiveSummarizer(max_chars=40).summarize("", [
    ...     Message(role="user", content="Hi there! I'm allergic to peanuts."),
    ...     Message(role="assistant", content="Noted.")])
    >>> summary
    "user: I'm allergic to peanuts."
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from scoring.importance import HeuristicImportanceScorer
from unified_memory.errors import invalid
from unified_memory.types import Message

__all__ = ["ExtractiveSummarizer", "LLMSummarizer"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_LOG = logging.getLogger(__name__)


def _units(previous: str, messages: Sequence[Message]) -> list[str]:
    """Summary lines so far, then one ``speaker: sentence`` line per sentence of the messages."""
    units = [line.strip() for line in previous.splitlines() if line.strip()]
    for message in messages:
        if not message.content or message.role not in ("user", "assistant"):
            continue
        speaker = message.name or message.role
        for sentence in _SENTENCE.split(" ".join(message.content.split())):
            if sentence:
                units.append(f"{speaker}: {sentence}")
    return list(dict.fromkeys(units))


class ExtractiveSummarizer:
    """Keeps the most important sentences within ``max_chars`` (deterministic, offline).

    >>> ExtractiveSummarizer(max_chars=100).summarize("user: I live in Lisbon.", [])
    'user: I live in Lisbon.'
    """

    def __init__(self, *, max_chars: int = 1200, scorer: Callable[[str], float] | None = None) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 20:
            raise invalid("max_chars", f"must be an int of at least 20, got {max_chars!r}")
        self.max_chars = max_chars
        self.scorer = scorer or HeuristicImportanceScorer()

    def summarize(self, previous: str, messages: Sequence[Message]) -> str:
        """The new running summary: one line per kept sentence, oldest first."""
        units = _units(previous, messages)
        # The speaker prefix does not count towards importance; later sentences win ties.
        ranked = sorted(range(len(units)), key=lambda i: (-self.scorer(units[i].split(": ", 1)[-1]), -i))
        kept, used = set(), 0
        for i in ranked:
            cost = len(units[i]) + (1 if kept else 0)
            if used + cost <= self.max_chars:
                kept.add(i)
                used += cost
        return "\n".join(units[i] for i in sorted(kept))


class LLMSummarizer:
    """Updates the summary with a chat model (``as_llm``-compatible), e.g. a cheap
    ``summarize_model``; anything unusable falls back to ``fallback`` (extractive).

    >>> s = LLMSummarizer(lambda messages: "Ada is allergic to peanuts.")
    >>> s.summarize("", [Message(role="user", content="I'm allergic to peanuts")])
    'Ada is allergic to peanuts.'
    """

    def __init__(self, llm: Any, *, max_chars: int = 1200, fallback: Any = None) -> None:
        from unified_memory.llm import as_llm

        self.llm = as_llm(llm)
        self.max_chars = max_chars
        self.fallback = fallback or ExtractiveSummarizer(max_chars=max_chars)
        self.fallbacks = 0

    def summarize(self, previous: str, messages: Sequence[Message]) -> str:
        """The model's updated summary, or the fallback's."""
        transcript = "\n".join(f"{m.name or m.role}: {m.content}" for m in messages if m.content)
        prompt = [
            {"role": "system", "content": (
                "You maintain the running summary of a conversation for an assistant's memory. "
                f"Update the summary with the new messages. Keep facts about the user, decisions and open "
                f"tasks; drop small talk. Answer with the summary only, at most {self.max_chars} characters.")},
            {"role": "user", "content": f"Summary so far:\n{previous or '(empty)'}\n\nNew messages:\n{transcript}"},
        ]
        try:
            reply = self.llm.complete(prompt)
        except Exception as exc:  # noqa: BLE001 - the summary must not fail the write
            _LOG.warning("summarizer LLM failed (%s); using the extractive summary", exc)
            reply = None
        if not isinstance(reply, str) or not reply.strip():
            self.fallbacks += 1
            return self.fallback.summarize(previous, messages)
        text = reply.strip()
        return text if len(text) <= self.max_chars else text[: self.max_chars - 1].rstrip() + "…"
