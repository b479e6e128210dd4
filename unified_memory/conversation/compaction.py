"""Conversation compaction: keep a chat history under a model's context budget.

:func:`compact` runs a pipeline of processors (see
:mod:`unified_memory.conversation.compaction_processors`) over a list of messages, in
``config.processors()`` order, and stops as soon as the estimated total is at most
``config.target()``:

* ``tool_truncation`` cuts oversized tool results to ``max_tool_message_tokens``;
* ``summarization`` folds the older interactions into a running summary through a
  ``summarize(messages, system_prompt) -> str`` callable (skipped when there is none);
* ``backward_packing`` keeps whole interactions from the newest backwards within budget.

Totals count every message with :func:`~unified_memory.retrieval.tokens.message_tokens`, plus the
system prompt and the summary message (:func:`summary_message`) when there is one. The
newest interaction is always kept; a tool call is never separated from its results;
system messages are always kept in place; the input is never mutated.

    >>> from unified_memory.conversation.compaction import CompactionConfig, compact
    >>> from unified_memory.types import Message
    >>> msgs = [Message(role=r, content=f"{r} turn {i} " * 20) for i in range(6) for r in ("user", "assistant")]
    >>> result = compact(msgs, config=CompactionConfig(token_threshold=300),
    ...                  summarize=lambda older, prompt: f"{len(older)} earlier messages")
    >>> result.summary, len(result.messages), result.stats.processors_run
    ('10 earlier messages', 2, ['tool_truncation', 'summarization'])

The caller shows ``[summary_message(result.summary)] + result.messages`` (with its
system prompt first).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from unified_memory.config import _Config
from unified_memory.conversation.compaction_processors import (
    SUMMARY_HEADER,
    Summarize,
    cap_text,
    interaction_units,
    pack_backward,
    summarize_older,
    summary_message,
    truncate_tool_results,
)
from unified_memory.conversation.model_windows import context_window
from unified_memory.errors import ConfigError, MemoryValueError, wrong_type
from unified_memory.retrieval.tokens import chars_per_token_counter, message_tokens
from unified_memory.types import Message
from unified_memory.validation import check_messages, check_optional_text

__all__ = [
    "CompactionConfig",
    "CompactionPolicy",
    "CompactionResult",
    "CompactionStats",
    "ProcessorName",
    "SUMMARY_HEADER",
    "SummarizationConfig",
    "ToolTruncationConfig",
    "cap_text",
    "compact",
    "interaction_units",
    "pack_backward",
    "select_window",
    "summarize_older",
    "summary_message",
    "truncate_tool_results",
]

ProcessorName = Literal["tool_truncation", "summarization", "backward_packing"]
_DEFAULT_ORDER: tuple[ProcessorName, ...] = ("tool_truncation", "summarization", "backward_packing")


class ToolTruncationConfig(_Config):
    """How the ``tool_truncation`` processor cuts oversized tool results.

    >>> ToolTruncationConfig().max_tool_message_tokens
    50000
    """

    max_tool_message_tokens: int = Field(default=50_000, ge=1)


class SummarizationConfig(_Config):
    """How the ``summarization`` processor folds older interactions into a summary.

    ``keep_recent_interactions`` newest interactions stay verbatim (in :func:`compact`
    at least one: the latest turn is always kept); ``instructions`` is for the caller's
    summarizer (the engine's default LLM prompt), the pipeline does not read it.

    >>> SummarizationConfig().output_max_tokens, SummarizationConfig().keep_recent_interactions
    (6000, 1)
    """

    output_max_tokens: int = Field(default=6000, ge=1)
    keep_recent_interactions: int = Field(default=1, ge=0)
    instructions: str | None = None


class CompactionPolicy(_Config):
    """How a conversation is reduced: the mode and the pipeline of processors (MARSYS
    calls it ``active_context``); :class:`CompactionConfig` adds when.

    >>> CompactionPolicy(excluded_processors=["summarization"]).processors()
    ['tool_truncation', 'backward_packing']
    """

    mode: Literal["compaction", "sliding_window"] = "compaction"
    processor_order: list[ProcessorName] = Field(default_factory=lambda: list(_DEFAULT_ORDER))
    excluded_processors: list[ProcessorName] = Field(default_factory=list)
    min_reduction_ratio: float = Field(default=0.4, ge=0.0, lt=1.0)
    tool_truncation: ToolTruncationConfig = Field(default_factory=ToolTruncationConfig)
    summarization: SummarizationConfig = Field(default_factory=SummarizationConfig)

    @field_validator("processor_order")
    @classmethod
    def _no_duplicates(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError(f"processor_order has duplicates: {value}")
        return value

    def processors(self) -> list[str]:
        """``processor_order`` without ``excluded_processors``.

        >>> CompactionConfig(excluded_processors=["tool_truncation"]).processors()
        ['summarization', 'backward_packing']
        """
        return [p for p in self.processor_order if p not in self.excluded_processors]


class CompactionConfig(CompactionPolicy):
    """When and how to compact a conversation.

    ``threshold()`` is ``token_threshold``, else ``safety_ratio`` × the context window
    of ``model`` (see :func:`~unified_memory.conversation.model_windows.context_window`). Compaction
    aims at ``target() = threshold() × (1 - min_reduction_ratio)``. ``mode="sliding_window"``
    never rewrites history: :func:`compact` only backward-packs (the caller keeps the
    raw history elsewhere).

    >>> cfg = CompactionConfig(model="gpt-4o", excluded_processors=["summarization"])
    >>> cfg.threshold(), cfg.target(), cfg.processors()
    (96000, 57600, ['tool_truncation', 'backward_packing'])
    """

    token_threshold: int | None = Field(default=None, ge=1)
    model: str | None = None
    safety_ratio: float = Field(default=0.75, gt=0.0, le=1.0)
    image_token_estimate: int = Field(default=800, ge=0)

    def threshold(self) -> int:
        """The token count above which the conversation should be compacted.

        >>> CompactionConfig(token_threshold=1000).threshold()
        1000
        >>> CompactionConfig().threshold()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        unified_memory.errors.ConfigError: token_threshold: ...
        """
        if self.token_threshold is not None:
            return self.token_threshold
        if self.model is None:
            raise ConfigError("token_threshold: set token_threshold, or model to derive it from the "
                              "model's context window", field="token_threshold")
        try:
            window = context_window(self.model)
        except MemoryValueError as exc:
            raise ConfigError(str(exc), field="model") from None
        return max(1, int(window * self.safety_ratio))

    def target(self) -> int:
        """The token count compaction aims at: ``threshold() × (1 - min_reduction_ratio)``, at least 1.

        >>> CompactionConfig(token_threshold=1000, min_reduction_ratio=0.25).target()
        750
        """
        return max(1, int(self.threshold() * (1 - self.min_reduction_ratio)))

class CompactionStats(BaseModel):
    """What one :func:`compact` call did.

    ``tokens_*`` include the system prompt and the summary message; ``messages_compacted``
    counts the input messages that are no longer in the output (summarized or dropped);
    ``messages_truncated`` the tool results the truncation processor cut;
    ``summary_tokens`` the tokens of the summary message counted in ``tokens_after``
    (the new summary, else the previous one, else 0).

    >>> stats = CompactionStats(mode="compaction", threshold=10, target=6, tokens_before=12,
    ...     tokens_after=5, messages_before=4, messages_after=2, messages_compacted=2,
    ...     messages_truncated=0, processors_run=["backward_packing"], summary_tokens=0)
    >>> stats.as_dict()["messages_compacted"]
    2
    """

    model_config = ConfigDict(extra="forbid")

    mode: str
    threshold: int
    target: int
    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    messages_compacted: int
    messages_truncated: int
    processors_run: list[str]
    summary_tokens: int

    def as_dict(self) -> dict[str, Any]:
        """The stats as a plain dict (for ``on_compact(stats)`` callbacks and logs).

        >>> sorted(CompactionStats(mode="compaction", threshold=1, target=1, tokens_before=0,
        ...     tokens_after=0, messages_before=0, messages_after=0, messages_compacted=0,
        ...     messages_truncated=0, processors_run=[], summary_tokens=0).as_dict())[:3]
        ['messages_after', 'messages_before', 'messages_compacted']
        """
        return self.model_dump()


@dataclass(frozen=True)
class CompactionResult:
    """The outcome of :func:`compact`.

    ``messages``: the compacted conversation *without* the summary message;
    ``summary``: the new running summary (``None`` when summarization did not run: keep
    the previous one); ``stats``: a :class:`CompactionStats`.

    >>> from unified_memory.types import Message
    >>> r = compact([Message(role="user", content="hi")], config=CompactionConfig(token_threshold=100))
    >>> r.summary, [m.content for m in r.messages], r.stats.processors_run
    (None, ['hi'], [])
    """

    messages: list[Message]
    summary: str | None
    stats: CompactionStats


def _check(config: Any, count_tokens: Any, summarize: Any) -> None:
    if not isinstance(config, CompactionConfig):
        raise wrong_type("config", "CompactionConfig", config)
    if not callable(count_tokens):
        raise wrong_type("count_tokens", "callable", count_tokens)
    if summarize is not None and not callable(summarize):
        raise wrong_type("compact_fn", "callable", summarize)


def compact(messages: Sequence[Message], *, config: CompactionConfig,
            count_tokens: Callable[[str], int] = chars_per_token_counter,
            summarize: Summarize | None = None, system_prompt: str | None = None,
            previous_summary: str | None = None) -> CompactionResult:
    """Run the compaction pipeline (see the module docstring) until the total is ≤ ``config.target()``.

    Nothing runs when the total already fits. ``summarization`` is skipped without
    ``summarize``. The returned messages exclude the summary message; prepend
    ``summary_message(result.summary)`` (or the previous summary's when ``result.summary``
    is ``None``). In ``mode="sliding_window"`` only backward packing runs (no
    summarizing, no truncation). Safe with pending tool calls: the open part is
    the protected newest unit.

    >>> from unified_memory.types import Message
    >>> msgs = [Message(role="user", content="q" * 400), Message(role="user", content="now")]
    >>> r = compact(msgs, config=CompactionConfig(token_threshold=50, mode="sliding_window"))
    >>> [m.content for m in r.messages], r.stats.messages_compacted
    (['now'], 1)
    """
    _check(config, count_tokens, summarize)
    current = check_messages("messages", messages)
    for name, value in (("system_prompt", system_prompt), ("previous_summary", previous_summary)):
        check_optional_text(name, value)
    threshold, target = config.threshold(), config.target()
    estimate = config.image_token_estimate
    prompt_tokens = count_tokens(system_prompt) if system_prompt else 0
    summary: str | None = None

    def summary_tokens() -> int:
        text = summary if summary is not None else previous_summary
        return message_tokens(summary_message(text), count_tokens, image_token_estimate=estimate) if text else 0

    def total(msgs: list[Message]) -> int:
        return (prompt_tokens + summary_tokens()
                + sum(message_tokens(m, count_tokens, image_token_estimate=estimate) for m in msgs))

    tokens_before = total(current)
    processors = ["backward_packing"] if config.mode == "sliding_window" else config.processors()
    run: list[str] = []
    truncated = 0
    for name in processors:
        if total(current) <= target:
            break
        if name == "tool_truncation":
            current, truncated = truncate_tool_results(
                current, max_tokens=config.tool_truncation.max_tool_message_tokens, count_tokens=count_tokens)
        elif name == "summarization":
            if summarize is None:
                continue
            kept, new_summary, _ = summarize_older(
                current, keep_recent_interactions=max(1, config.summarization.keep_recent_interactions),
                summarize=summarize, system_prompt=system_prompt, previous_summary=previous_summary,
                output_max_tokens=config.summarization.output_max_tokens, count_tokens=count_tokens)
            if new_summary is None:
                continue  # nothing older than the kept interactions: summarize was not called
            current, summary = kept, new_summary
        else:
            budget = target - prompt_tokens - summary_tokens()
            current = pack_backward(current, budget=budget, count_tokens=count_tokens,
                                    image_token_estimate=estimate)
        run.append(name)
    stats = CompactionStats(
        mode=config.mode, threshold=threshold, target=target, tokens_before=tokens_before,
        tokens_after=total(current), messages_before=len(messages), messages_after=len(current),
        messages_compacted=len(messages) - len(current), messages_truncated=truncated,
        processors_run=run, summary_tokens=summary_tokens())
    return CompactionResult(messages=current, summary=summary, stats=stats)


def select_window(messages: Sequence[Message], *, config: CompactionConfig,
                  count_tokens: Callable[[str], int] = chars_per_token_counter,
                  system_prompt: str | None = None) -> list[Message]:
    """The sliding-window view: ``messages`` backward-packed to ``config.threshold()``.

    The system prompt's tokens, when given, count against the threshold. The newest
    interaction is always in the view; the input is not changed.

    >>> from unified_memory.types import Message
    >>> msgs = [Message(role="user", content="old " * 100), Message(role="user", content="new")]
    >>> [m.content for m in select_window(msgs, config=CompactionConfig(token_threshold=60))]
    ['new']
    """
    _check(config, count_tokens, None)
    prompt_tokens = count_tokens(system_prompt) if system_prompt else 0
    return pack_backward(messages, budget=config.threshold() - prompt_tokens, count_tokens=count_tokens,
                         image_token_estimate=config.image_token_estimate)
