"""How a :class:`~unified_memory.Conversation` gets smaller: window trims and compactions.

A mixin of :class:`~unified_memory.Conversation`. Trims drop whole interactions
(never while tool calls are pending); compactions run the pipeline of
:mod:`unified_memory.conversation.compaction` or a long-term strategy, only at a turn boundary,
and a failed one keeps the conversation whole.

    >>> from unified_memory import Conversation
    >>> conv = Conversation()
    >>> for i in range(4):
    ...     _ = conv.add(role="user", content=f"message {i}")
    >>> [m.content for m in conv.trim_to_recent(2)]
    ['message 0', 'message 1']
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from tiers.trimming import TrimPlan, plan_trim
from unified_memory.conversation.compaction import CompactionConfig, CompactionStats, compact
from unified_memory.conversation.persistence import dump_message
from unified_memory.errors import wrong_type
from unified_memory.extraction.summarizers import llm_compact_fn, summarizer_compact_fn
from unified_memory.validation import check_limit

__all__ = ["ReductionMethods"]

_LOG = logging.getLogger(__name__)
_UNBOUNDED = 1 << 62


class ReductionMethods:
    """Trimming (``max_messages`` / ``max_tokens``, ``trim_to_fit``, ``trim_to_recent``)
    and compaction (``compact``, strategies) for :class:`~unified_memory.Conversation`."""

    _messages: list[Any]
    _lock: Any
    summary: str | None
    compactions: int
    compaction: CompactionConfig | None
    max_messages: int | None
    max_tokens: int | None

    def _drop(self, dropped: Sequence[Any], reason: str) -> None:
        settled = self._pending() == 0
        gone = {m.id for m in dropped}
        self._messages = [m for m in self._messages if m.id not in gone]
        if settled:  # dropping whole interactions with no call open leaves none open
            self._calls_state = (len(self._messages), [], self._messages[-1] if self._messages else None)
        self.last_trimmed = list(dropped)
        self._record({"type": "trim", "removed": [m.id for m in dropped], "reason": reason})
        self._note("trim", messages_removed=len(dropped), messages_remaining=len(self._messages), reason=reason)
        self._emit("trim", "completed", messages=len(dropped))
        if self.summarize_on_trim:
            summary = self.summarizer.summarize(self.summary or "", dropped)
            if not isinstance(summary, str):
                raise wrong_type("summarizer", "a summarize() that returns str", summary)
            self.summary = summary or None
            self._record({"type": "summary", "summary": self.summary})
            self._emit("summarise", "completed", messages=len(dropped), chars=len(summary))

    def _plan(self, max_messages: int | None, max_tokens: int | None) -> TrimPlan:
        counts = [self.message_tokens(m) for m in self._messages] if max_tokens is not None else None
        return plan_trim(self._messages, max_messages=max_messages or _UNBOUNDED, max_tokens=max_tokens,
                         token_counts=counts)

    def _trim(self, max_messages: int | None, max_tokens: int | None, reason: str) -> list[Any]:
        _, dropped = self._plan(max_messages, max_tokens).apply(self._messages)
        if dropped:
            self._drop(dropped, reason)
        return dropped

    def _enforce_limits(self) -> None:
        if self.max_messages is None and self.max_tokens is None:
            return
        counted = [m for m in self._messages if m.role != "system"]
        if ((self.max_messages is None or len(counted) <= self.max_messages)
                and (self.max_tokens is None or sum(map(self.message_tokens, counted)) <= self.max_tokens)):
            return  # within the limits: no plan needed
        self._trim(self.max_messages, self.max_tokens, "enforce_limits")

    def fit(self, max_tokens: int) -> list[Any]:
        """The messages :meth:`trim_to_fit` would keep, without changing the conversation.

        >>> from unified_memory import Conversation
        >>> conv = Conversation()
        >>> _ = conv.add(role="user", content="an old question " * 5); _ = conv.add(role="user", content="new")
        >>> [m.content for m in conv.fit(10)], len(conv)
        (['new'], 2)
        """
        with self._lock:
            kept, _ = self._plan(None, check_limit("max_tokens", max_tokens)).apply(self._messages)
            return kept

    def trim_to_fit(self, max_tokens: int) -> list[Any]:
        """Drop the oldest whole interactions until the messages fit ``max_tokens``
        (system messages stay); returns what was dropped. Waits while calls are pending."""
        with self._lock:
            return self._trim(None, check_limit("max_tokens", max_tokens), "trim_to_fit")

    def _recent_start(self, keep_recent: int) -> int:
        """Index where the last ``keep_recent`` non-system messages begin, moved forward past
        tool results whose call would be cut off."""
        keep = check_limit("keep_recent", keep_recent, minimum=0)
        positions = [i for i, m in enumerate(self._messages) if m.role != "system"]
        start = positions[-keep] if 0 < keep <= len(positions) else (0 if keep else len(self._messages))
        while start < len(self._messages) and self._messages[start].role == "tool":
            start += 1
        return start

    def messages_to_summarize(self, keep_recent: int = 6) -> list[Any]:
        """The older non-system messages that :meth:`trim_to_recent` would drop."""
        with self._lock:
            start = self._recent_start(keep_recent)
            return [m for m in self._messages[:start] if m.role != "system"]

    def trim_to_recent(self, keep_recent: int = 6) -> list[Any]:
        """Keep only the last ``keep_recent`` non-system messages (never starting on an
        orphaned tool result); returns what was dropped."""
        with self._lock:
            dropped = self.messages_to_summarize(keep_recent)
            if dropped:
                self._drop(dropped, "trim_to_recent")
            return dropped

    def _summarize_fn(self, config: CompactionConfig) -> Callable[[list[Any], str | None], str]:
        if self.compact_fn is not None:
            return self.compact_fn
        if self.compaction_llm is not None:
            return llm_compact_fn(self.compaction_llm, instructions=config.summarization.instructions)
        return summarizer_compact_fn(self.summarizer)

    def compact(self) -> CompactionStats | None:
        """Compact now (thresholds aside); returns the stats, or ``None`` when tool results
        are still pending — then it runs as soon as the batch is complete."""
        with self._lock:
            if self._pending():
                self._compaction_due = True
                return None
            base = self.compaction or CompactionConfig(token_threshold=max(1, self.tokens()))
            # forced: the current size counts as over the threshold
            config = base.model_copy(update={"token_threshold": max(1, min(self.tokens(), base.threshold()))})
            return self._compact(config, auto=False)

    def _compact(self, config: CompactionConfig, *, auto: bool) -> CompactionStats | None:
        self._emit("compact", "started")
        try:
            result = compact(self._messages, config=config, count_tokens=self.count_tokens,
                             summarize=self._summarize_fn(config), system_prompt=self.system_prompt,
                             previous_summary=self.summary)
        except Exception as exc:
            self._note("compaction_failed", error=f"{type(exc).__name__}: {exc}")
            self._emit("compact", "failed", error=f"{type(exc).__name__}: {exc}")
            if not auto:
                raise
            _LOG.warning("compaction of session %s failed; the conversation is kept whole: %s",
                         self.session_id, exc)
            return None
        self._compaction_due = False
        stats = result.stats
        changed = stats.messages_compacted or stats.messages_truncated or result.summary is not None
        if not changed:  # the newest interaction alone is over the threshold: nothing can go
            self._emit("compact", "completed", messages=0, tokens_before=stats.tokens_before,
                       tokens_after=stats.tokens_after)
            return stats
        self._commit(result.messages if config.mode == "compaction" else None, result.summary, stats.as_dict())
        return stats

    def _run_strategy(self, strategy: Any) -> None:
        """A long-term strategy (summarizer, neuralyzer) whose trigger fired rewrites the memory."""
        try:
            outcome = strategy.apply(self._messages, llm=self.compaction_llm, previous_summary=self.summary,
                                     count_tokens=self.count_tokens, memory=self.strategy_memory)
        except Exception as exc:
            self._note("strategy_failed", error=f"{type(exc).__name__}: {exc}")
            self._emit("compact", "failed", error=f"{type(exc).__name__}: {exc}")
            _LOG.warning("strategy %s of session %s failed; the conversation is kept whole: %s",
                         strategy.long_term_memory_id, self.session_id, exc)
            return
        if outcome.triggered is None or not outcome.removed:
            return
        self._emit("compact", "started")
        self._commit(outcome.messages, outcome.summary, {
            "mode": "strategy", "strategy": strategy.long_term_memory_id, "trigger": outcome.triggered,
            "messages_before": len(self._messages), "messages_after": len(outcome.messages),
            "messages_compacted": len(outcome.removed), "facts_stored": outcome.facts_stored})

    def _commit(self, messages: Sequence[Any] | None, summary: str | None, stats: dict[str, Any]) -> None:
        """Apply a compaction (``messages`` None: the sliding window rewrites nothing), log it, report it."""
        if messages is not None:
            self._messages = list(messages)
            if summary is not None:
                self.summary = summary
            self.compactions += 1
            self._record({"type": "compaction", "messages": [dump_message(m) for m in self._messages],
                          "summary": self.summary, "stats": stats})
        self._note("compaction", **stats)
        self._emit("compact", "completed", **{k: v for k, v in stats.items()
                                              if k in ("messages_compacted", "tokens_before", "tokens_after")})
        if self.on_compact is not None:
            try:
                self.on_compact(dict(stats))
            except Exception:  # noqa: BLE001 - a callback never breaks the conversation
                _LOG.exception("on_compact callback failed")

