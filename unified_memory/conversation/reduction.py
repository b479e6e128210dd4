"""How a :class:`~unified_memory.Conversation` gets smaller: window trims and compactions.

A :class:`Reducer` works on the conversation's
:class:`~unified_memory.conversation.buffer.ConversationBuffer` and reads its settings
(limits, compaction, summariser, token counts) through :class:`ReductionHost`. Trims
drop whole interactions (never while tool calls are pending); compactions run the
pipeline of :mod:`unified_memory.conversation.compaction` or a long-term strategy,
only at a turn boundary, and a failed one keeps the conversation whole.

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
from typing import Any, Protocol

from tiers.trimming import TrimPlan, plan_trim
from unified_memory.conversation.buffer import ConversationBuffer, EventSource
from unified_memory.conversation.compaction import CompactionConfig, CompactionStats, compact
from unified_memory.conversation.persistence import dump_message
from unified_memory.conversation.strategies import MemoryStrategies
from unified_memory.errors import wrong_type
from unified_memory.extraction.summarizers import llm_compact_fn, summarizer_compact_fn
from unified_memory.protocols import Summarizer
from unified_memory.types import Message
from unified_memory.validation import check_limit

__all__ = ["Reducer", "ReductionHost"]

_LOG = logging.getLogger(__name__)
_UNBOUNDED = 1 << 62


class ReductionHost(EventSource, Protocol):
    """What a :class:`Reducer` reads of its conversation: who it is, its public settings and token counts."""

    @property
    def max_messages(self) -> int | None: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def compaction(self) -> CompactionConfig | None: ...
    @property
    def compact_fn(self) -> Callable[[list[Any], str | None], str] | None: ...
    @property
    def compaction_llm(self) -> Any: ...
    @property
    def summarizer(self) -> Summarizer: ...
    @property
    def summarize_on_trim(self) -> bool: ...
    @property
    def count_tokens(self) -> Callable[[str], int]: ...
    @property
    def on_compact(self) -> Callable[[dict[str, Any]], Any] | None: ...
    @property
    def strategies(self) -> MemoryStrategies | None: ...
    @property
    def strategy_memory(self) -> Any: ...
    def message_tokens(self, message: Any) -> int: ...
    def tokens(self) -> int: ...


class Reducer:
    """Trimming (``max_messages`` / ``max_tokens``, ``trim_to_fit``, ``trim_to_recent``) and
    compaction (``compact``, long-term strategies) of one conversation's ``buffer``, with the
    settings of ``host``. The public methods hold ``buffer.lock``; the others expect it held."""

    def __init__(self, buffer: ConversationBuffer, host: ReductionHost) -> None:
        self.buffer = buffer
        self.host = host

    def after_change(self) -> None:
        """After messages were added: trim to the limits, then, at a turn boundary, run the
        long-term strategy and compact when the context is over the threshold (or a compaction
        waited for the end of a tool-call batch)."""
        self.enforce_limits()
        if self.buffer.pending():
            return  # not at a turn boundary: strategies and compaction wait for the batch
        strategies, compaction = self.host.strategies, self.host.compaction
        if strategies is not None and strategies.long_term is not None:
            self.run_strategy(strategies.long_term)
        if compaction is None or compaction.mode != "compaction":
            return
        if self.buffer.compaction_due or self.host.tokens() > compaction.threshold():
            self.compact(compaction, auto=True)

    # ---- trimming -------------------------------------------------------------------------------
    def _drop(self, dropped: Sequence[Message], reason: str) -> None:
        buf, host = self.buffer, self.host
        buf.remove_ids(m.id for m in dropped)
        buf.last_trimmed = list(dropped)
        buf.record({"type": "trim", "removed": [m.id for m in dropped], "reason": reason})
        buf.note("trim", messages_removed=len(dropped), messages_remaining=len(buf.messages), reason=reason)
        buf.emit(self.host, "trim", "completed", messages=len(dropped))
        if host.summarize_on_trim:
            summary = host.summarizer.summarize(buf.summary or "", dropped)
            if not isinstance(summary, str):
                raise wrong_type("summarizer", "a summarize() that returns str", summary)
            buf.summary = summary or None
            buf.record({"type": "summary", "summary": buf.summary})
            buf.emit(self.host, "summarise", "completed", messages=len(dropped), chars=len(summary))

    def _plan(self, max_messages: int | None, max_tokens: int | None) -> TrimPlan:
        msgs = self.buffer.messages
        counts = [self.host.message_tokens(m) for m in msgs] if max_tokens is not None else None
        return plan_trim(msgs, max_messages=max_messages or _UNBOUNDED, max_tokens=max_tokens, token_counts=counts)

    def _trim(self, max_messages: int | None, max_tokens: int | None, reason: str) -> list[Message]:
        _, dropped = self._plan(max_messages, max_tokens).apply(self.buffer.messages)
        if dropped:
            self._drop(dropped, reason)
        return dropped

    def enforce_limits(self) -> None:
        """Trim to ``max_messages`` / ``max_tokens`` when the messages are over either."""
        max_messages, max_tokens = self.host.max_messages, self.host.max_tokens
        if max_messages is None and max_tokens is None:
            return
        counted = [m for m in self.buffer.messages if m.role != "system"]
        if ((max_messages is None or len(counted) <= max_messages)
                and (max_tokens is None or sum(map(self.host.message_tokens, counted)) <= max_tokens)):
            return  # within the limits: no plan needed
        self._trim(max_messages, max_tokens, "enforce_limits")

    def fit(self, max_tokens: int) -> list[Message]:
        """The messages :meth:`trim_to_fit` would keep, without changing anything."""
        with self.buffer.lock:
            kept, _ = self._plan(None, check_limit("max_tokens", max_tokens)).apply(self.buffer.messages)
            return kept

    def trim_to_fit(self, max_tokens: int) -> list[Message]:
        """Drop the oldest whole interactions until the messages fit ``max_tokens``; returns them."""
        with self.buffer.lock:
            return self._trim(None, check_limit("max_tokens", max_tokens), "trim_to_fit")

    def _recent_start(self, keep_recent: int) -> int:
        """Index where the last ``keep_recent`` non-system messages begin, moved forward past
        tool results whose call would be cut off."""
        keep = check_limit("keep_recent", keep_recent, minimum=0)
        msgs = self.buffer.messages
        positions = [i for i, m in enumerate(msgs) if m.role != "system"]
        start = positions[-keep] if 0 < keep <= len(positions) else (0 if keep else len(msgs))
        while start < len(msgs) and msgs[start].role == "tool":
            start += 1
        return start

    def messages_to_summarize(self, keep_recent: int) -> list[Message]:
        """The older non-system messages that :meth:`trim_to_recent` would drop."""
        with self.buffer.lock:
            start = self._recent_start(keep_recent)
            return [m for m in self.buffer.messages[:start] if m.role != "system"]

    def trim_to_recent(self, keep_recent: int) -> list[Message]:
        """Keep only the last ``keep_recent`` non-system messages; returns what was dropped."""
        with self.buffer.lock:
            dropped = self.messages_to_summarize(keep_recent)
            if dropped:
                self._drop(dropped, "trim_to_recent")
            return dropped

    # ---- compaction -----------------------------------------------------------------------------
    def _summarize_fn(self, config: CompactionConfig) -> Callable[[list[Any], str | None], str]:
        host = self.host
        if host.compact_fn is not None:
            return host.compact_fn
        if host.compaction_llm is not None:
            return llm_compact_fn(host.compaction_llm, instructions=config.summarization.instructions)
        return summarizer_compact_fn(host.summarizer)

    def compact_now(self) -> CompactionStats | None:
        """Compact regardless of the threshold; ``None`` (and a compaction due at the end of
        the batch) while tool results are pending."""
        with self.buffer.lock:
            if self.buffer.pending():
                self.buffer.compaction_due = True
                return None
            base = self.host.compaction or CompactionConfig(token_threshold=max(1, self.host.tokens()))
            # forced: the current size counts as over the threshold
            config = base.model_copy(update={"token_threshold": max(1, min(self.host.tokens(), base.threshold()))})
            return self.compact(config, auto=False)

    def compact(self, config: CompactionConfig, *, auto: bool) -> CompactionStats | None:
        """Run the compaction pipeline with ``config``; an automatic one that fails is logged
        and keeps the conversation whole, a requested one raises."""
        buf = self.buffer
        buf.emit(self.host, "compact", "started")
        try:
            result = compact(buf.messages, config=config, count_tokens=self.host.count_tokens,
                             summarize=self._summarize_fn(config), system_prompt=buf.system_prompt,
                             previous_summary=buf.summary)
        except Exception as exc:
            buf.note("compaction_failed", error=f"{type(exc).__name__}: {exc}")
            buf.emit(self.host, "compact", "failed", error=f"{type(exc).__name__}: {exc}")
            if not auto:
                raise
            _LOG.warning("compaction of session %s failed; the conversation is kept whole: %s",
                         self.host.session_id, exc)
            return None
        buf.compaction_due = False
        stats = result.stats
        changed = stats.messages_compacted or stats.messages_truncated or result.summary is not None
        if not changed:  # the newest interaction alone is over the threshold: nothing can go
            buf.emit(self.host, "compact", "completed", messages=0, tokens_before=stats.tokens_before,
                     tokens_after=stats.tokens_after)
            return stats
        self._commit(result.messages if config.mode == "compaction" else None, result.summary, stats.as_dict())
        return stats

    def run_strategy(self, strategy: Any) -> None:
        """A long-term strategy (summarizer, neuralyzer) whose trigger fired rewrites the memory."""
        buf, host = self.buffer, self.host
        try:
            outcome = strategy.apply(buf.messages, llm=host.compaction_llm, previous_summary=buf.summary,
                                     count_tokens=host.count_tokens, memory=host.strategy_memory)
        except Exception as exc:
            buf.note("strategy_failed", error=f"{type(exc).__name__}: {exc}")
            buf.emit(self.host, "compact", "failed", error=f"{type(exc).__name__}: {exc}")
            _LOG.warning("strategy %s of session %s failed; the conversation is kept whole: %s",
                         strategy.long_term_memory_id, self.host.session_id, exc)
            return
        if outcome.triggered is None or not outcome.removed:
            return
        buf.emit(self.host, "compact", "started")
        self._commit(outcome.messages, outcome.summary, {
            "mode": "strategy", "strategy": strategy.long_term_memory_id, "trigger": outcome.triggered,
            "messages_before": len(buf.messages), "messages_after": len(outcome.messages),
            "messages_compacted": len(outcome.removed), "facts_stored": outcome.facts_stored})

    def _commit(self, messages: Sequence[Message] | None, summary: str | None, stats: dict[str, Any]) -> None:
        """Apply a compaction (``messages`` None: the sliding window rewrites nothing), log it, report it."""
        buf = self.buffer
        if messages is not None:
            buf.messages = list(messages)
            if summary is not None:
                buf.summary = summary
            buf.compactions += 1
            buf.record({"type": "compaction", "messages": [dump_message(m) for m in buf.messages],
                        "summary": buf.summary, "stats": stats})
        buf.note("compaction", **stats)
        buf.emit(self.host, "compact", "completed", **{k: v for k, v in stats.items()
                                            if k in ("messages_compacted", "tokens_before", "tokens_after")})
        if self.host.on_compact is not None:
            try:
                self.host.on_compact(dict(stats))
            except Exception:  # noqa: BLE001 - a callback never breaks the conversation
                _LOG.exception("on_compact callback failed")
