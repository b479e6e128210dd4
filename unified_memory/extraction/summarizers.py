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

import json
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from scoring.importance import HeuristicImportanceScorer
from unified_memory.errors import LLMError, invalid
from unified_memory.protocols import Summarizer
from unified_memory.retrieval.context import clean_item
from unified_memory.types import Message
from unified_memory.validation import check_messages, check_text

__all__ = ["ExtractiveSummarizer", "LLMSummarizer", "llm_compact_fn", "summarizer_compact_fn", "transcript"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_REMEMBERED = 64  # summaries an extractive summarizer remembers (one per conversation it updates)
_LOG = logging.getLogger(__name__)


def _lines(previous: str) -> list[str]:
    """The lines of a summary, stripped, blank ones and repeats left out."""
    return list(dict.fromkeys(line.strip() for line in previous.splitlines() if line.strip()))


def _said(messages: Sequence[Message]) -> list[str]:
    """One ``speaker: sentence`` line per sentence of the user's and assistant's messages."""
    units = []
    for message in messages:
        if not message.content or message.role not in ("user", "assistant"):
            continue
        speaker = message.name or message.role
        for sentence in _SENTENCE.split(" ".join(message.content.split())):
            if sentence:
                units.append(f"{speaker}: {sentence}")
    return units


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
        # The heuristic scorer is pure: the summaries this one returned are remembered with
        # their lines and those lines' scores, so the next update (whose ``previous`` is one
        # of them) neither splits nor scores them again. Any other scorer is asked every time.
        self._known: dict[str, tuple[list[str], list[Any]]] = {}
        self._pure = self.scorer if type(self.scorer) is HeuristicImportanceScorer else None

    def _score(self, unit: str) -> Any:
        return self.scorer(unit.split(": ", 1)[-1])  # the speaker prefix does not count

    @property
    def remembered(self) -> list[str]:
        """The summaries it returned and remembers (with their lines' scores) to update them without
        scoring those lines again, oldest first; :meth:`clear` forgets them.

        >>> summarizer = ExtractiveSummarizer()
        >>> summarizer.summarize("", [Message(role="user", content="I keep bees.")])
        'user: I keep bees.'
        >>> summarizer.remembered
        ['user: I keep bees.']
        """
        return list(self._known)

    def clear(self) -> None:
        """Forget the summaries remembered (``forget`` calls it: they may quote deleted turns).

        >>> summarizer = ExtractiveSummarizer(); summarizer.clear(); summarizer.remembered
        []
        """
        self._known.clear()

    def summarize(self, previous: str, messages: Sequence[Message]) -> str:
        """The new running summary: one line per kept sentence, oldest first."""
        known = self._known if self.scorer is self._pure else None
        # A summary this one returned was checked when it was made (its lines are checked text).
        remembered = known.get(previous) if known is not None and type(previous) is str else None
        if remembered is None:
            previous = check_text("previous", previous, allow_empty=True)
        said = _said(check_messages("messages", messages))
        if remembered is not None:
            units, scores = list(remembered[0]), list(remembered[1])
        else:
            units = _lines(previous)
            scores = [self._score(unit) for unit in units]
        # Lines of a summary are single, stripped, distinct lines ("clean"): a summary made
        # of clean lines only reads back as those lines; a sentence said may not be one.
        clean = len(units)  # the units before this index are clean, and so are those in ``clean_said``
        clean_said = set()
        seen = set(units)
        for unit in said:
            if unit not in seen:
                seen.add(unit)
                if _lines(unit) == [unit]:
                    clean_said.add(len(units))
                units.append(unit)
                scores.append(self._score(unit))
        # Later sentences win ties: the highest scores first, each tie from the last one said
        # (the heuristic's scores are plain numbers: a stable sort of the positions from the last
        # gives that order; any other scorer's by the key that says so for any scores).
        n = len(units)
        ranked = (sorted(range(n - 1, -1, -1), key=scores.__getitem__, reverse=True) if known is not None
                  else sorted(range(n), key=lambda i: (-scores[i], -i)))
        keep = [False] * n
        used, limit, separator = 0, self.max_chars, 0  # a newline before every line but the first
        for i in ranked:
            cost = len(units[i]) + separator
            if used + cost <= limit:
                keep[i] = True
                used += cost
                separator = 1
        order = [i for i in range(n) if keep[i]]
        lines = [units[i] for i in order]
        summary = "\n".join(lines)
        dirty = [i for i in range(clean, n) if i not in clean_said]  # said sentences that are not clean lines
        if known is not None and (not any(keep[i] for i in dirty)
                                  or _lines(summary) == lines):  # what the next update will read back
            if len(known) >= _REMEMBERED:
                known.clear()
            known[summary] = (lines, [scores[i] for i in order])
        return summary


class LLMSummarizer:
    """Updates the summary with a chat model (``as_llm``-compatible), e.g. a cheap
    ``summarize_model``; anything unusable falls back to ``fallback`` (extractive).

    >>> s = LLMSummarizer(lambda messages: "Ada is allergic to peanuts.")
    >>> s.summarize("", [Message(role="user", content="I'm allergic to peanuts")])
    'Ada is allergic to peanuts.'
    """

    def __init__(self, llm: Any, *, max_chars: int = 1200, fallback: Any = None) -> None:
        from unified_memory.agents.llm import as_llm

        self.llm = as_llm(llm)
        self.max_chars = max_chars
        self.fallback = fallback or ExtractiveSummarizer(max_chars=max_chars)
        self.fallbacks = 0

    def clear(self) -> None:
        """Forget what the fallback summarizer remembers (see :meth:`ExtractiveSummarizer.clear`)."""
        if isinstance(self.fallback, ExtractiveSummarizer):
            self.fallback.clear()

    def summarize(self, previous: str, messages: Sequence[Message]) -> str:
        """The model's updated summary, or the fallback's."""
        text = transcript(messages)
        prompt = [
            {"role": "system", "content": (
                "You maintain the running summary of a conversation for an assistant's memory. "
                f"Update the summary with the new messages. Keep facts about the user, decisions and open "
                f"tasks; drop small talk. Answer with the summary only, at most {self.max_chars} characters.")},
            {"role": "user", "content": f"Summary so far:\n{previous or '(empty)'}\n\nNew messages:\n{text}"},
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


def transcript(messages: Sequence[Message]) -> str:
    """The messages as plain text for a summarising model: one line each, tool calls as
    ``name(arguments)``, tool results labelled, images counted, system messages left out.

    >>> print(transcript([Message(role="user", content="hi", name="Ada"),
    ...     Message(role="assistant", tool_calls=[{"id": "1", "function": {"name": "f", "arguments": "{}"}}]),
    ...     Message(role="tool", content="42", tool_call_id="1")]))
    Ada (user): hi
    assistant called f({})
    tool result: 42
    """
    lines = []
    for m in messages:
        if m.role == "system":
            continue
        speaker = f"{m.name} ({m.role})" if m.name else m.role
        text = " ".join((m.content or "").split())
        if text:
            lines.append(f"{speaker}: {text}" if m.role != "tool"
                         else f"tool result{f' from {m.name}' if m.name else ''}: {text}")
        for call in m.tool_calls or ():
            given = call.get("function")
            function: dict[str, Any] = given if isinstance(given, dict) else {}
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False)
            lines.append(f"{speaker} called {function.get('name') or call.get('name') or 'a tool'}({arguments})")
        if m.images:
            lines.append(f"{speaker}: [{len(m.images)} image(s)]")
    # clean_item: a name, text or tool argument cannot start a forged line of the transcript
    return "\n".join(clean_item(line) for line in lines)


_COMPACT_PROMPT = (
    "You compact the history of a conversation between a user and an AI agent so the agent can continue "
    "it without the original messages. Write a continuation summary: the user's goal and preferences, facts "
    "learned, decisions made, tool results that still matter, and open tasks. Be specific (names, numbers, "
    "ids); drop small talk. Answer with the summary only.")


def llm_compact_fn(llm: Any, *, instructions: str | None = None) -> Callable[[list[Message], str | None], str]:
    """A ``compact_fn(messages, system_prompt) -> str`` that asks a chat model (e.g. a cheaper
    compaction model) for the summary; a failed call or an empty answer raises :class:`LLMError`.

    >>> fn = llm_compact_fn(lambda messages: "Ada wants tea.")
    >>> fn([Message(role="user", content="I'd like tea")], "You are a barista.")
    'Ada wants tea.'
    """
    from unified_memory.agents.llm import as_llm

    model = as_llm(llm)
    system = _COMPACT_PROMPT + (f"\n\n{instructions}" if instructions else "")

    def compact_fn(messages: list[Message], system_prompt: str | None) -> str:
        agent = f"The agent's system prompt:\n{system_prompt}\n\n" if system_prompt else ""
        prompt = [{"role": "system", "content": system},
                  {"role": "user", "content": f"{agent}Conversation to compact:\n{transcript(messages)}"}]
        try:
            reply = model.complete(prompt)
        except LLMError:
            raise
        except Exception as exc:
            raise LLMError(f"llm: the compaction model failed: {type(exc).__name__}: {exc}", field="llm") from exc
        if not isinstance(reply, str) or not reply.strip():
            raise LLMError("llm: the compaction model answered no summary", field="llm")
        return reply.strip()

    return compact_fn


def summarizer_compact_fn(summarizer: Summarizer) -> Callable[[list[Message], str | None], str]:
    """A ``compact_fn`` from a :class:`~unified_memory.protocols.Summarizer` (offline by default).

    >>> fn = summarizer_compact_fn(ExtractiveSummarizer())
    >>> "allergic to peanuts" in fn([Message(role="user", content="I'm allergic to peanuts")], None)
    True
    """
    def compact_fn(messages: list[Message], system_prompt: str | None) -> str:
        return summarizer.summarize("", messages)

    return compact_fn
