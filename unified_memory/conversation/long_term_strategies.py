"""The long-term memory strategies: a trigger fires (the input's tokens, the counted interactions
or their tokens, a tool that succeeded or failed), then the older interactions are summarized
with Chain of Density (:class:`SummarizerStrategy`) or erased (:class:`NeuralyzerStrategy`) and
the last ``interaction_keep`` kept. Public, with the short-term ones and the loaders, as
:mod:`unified_memory.conversation.strategies`.

    >>> msgs = [Message(role="user", content="I live in Lisbon."), Message(role="user", content="ok")]
    >>> outcome = NeuralyzerStrategy(interaction_threshold_qty=2, interaction_keep=1).apply(msgs)
    >>> outcome.triggered, [m.content for m in outcome.messages], outcome.summary
    ('interaction_threshold_qty', ['ok'], None)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tiers.trimming import interaction_units
from unified_memory.conversation._strategy_conditions import (
    INTERACTION_NAMES,
    InteractionView,
    MessageView,
    StrategyModel,
    TokenCounter,
    as_messages,
    call_name,
    check_conditions,
    evaluate,
    tool_failed,
)
from unified_memory.conversation.chain_of_density import chain_of_density
from unified_memory.errors import invalid, wrong_type
from unified_memory.extraction.summarizers import ExtractiveSummarizer
from unified_memory.retrieval.tokens import chars_per_token_counter, message_tokens
from unified_memory.types import Message

__all__ = ["StrategyOutcome", "LongTermMemoryStrategyBase", "SummarizerStrategy", "NeuralyzerStrategy",
           "LongTermStrategy"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class StrategyOutcome(BaseModel):
    """What a long-term strategy run did.

    ``triggered`` names the trigger that fired (``"force"`` when forced), or is
    ``None`` when nothing ran; ``messages`` is what remains, ``removed`` what was
    taken out; ``summary`` is the new summary (``None`` when none was made: keep
    your previous one); ``facts_stored`` counts the summary sentences stored.

    >>> StrategyOutcome(triggered=None, messages=[]).removed
    []
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    triggered: str | None
    messages: list[Message]
    removed: list[Message] = Field(default_factory=list)
    summary: str | None = None
    facts_stored: int = 0


class LongTermMemoryStrategyBase(StrategyModel):
    """The trigger fields shared by long-term strategies (0 or -1 disables a threshold).

    Triggers, checked in this order: ``input_tokens_threshold`` (input tokens > it;
    estimated from the messages when not given), ``interaction_threshold_qty``
    (counted interactions >= it), ``interaction_threshold_tokens`` (their tokens >=
    it), ``on_tools_success_threshold`` / ``on_tools_error_threshold`` (a tool result
    of one of these tools, in the messages passed, succeeded / failed). An interaction
    counts when all ``interaction_conditions`` hold for it and it has a user message.
    A tool result failed when its metadata has a truthy ``error`` or ``is_error`` or
    ``status == "error"``; its tool is ``message.name``, else the name of its call.

    >>> NeuralyzerStrategy(on_tools_error_threshold=["pay"]).should_trigger([
    ...     Message(role="user", content="pay"),
    ...     Message(role="tool", name="pay", tool_call_id="1", metadata={"status": "error"})])
    'on_tools_error_threshold'
    """

    input_tokens_threshold: int = Field(default=0, ge=-1)
    interaction_keep: int = Field(default=0, ge=0)
    interaction_conditions: list[str] = Field(default_factory=list)
    interaction_threshold_qty: int = Field(default=0, ge=-1)
    interaction_threshold_tokens: int = Field(default=0, ge=-1)
    on_tools_success_threshold: list[str] = Field(default_factory=list)
    on_tools_error_threshold: list[str] = Field(default_factory=list)

    @field_validator("interaction_conditions")
    @classmethod
    def _valid_conditions(cls, value: list[str]) -> list[str]:
        return check_conditions(value, allowed=INTERACTION_NAMES)

    def _counted(self, msgs: list[Message], count_tokens: TokenCounter) -> list[InteractionView]:
        counted, index = [], 0
        for group in interaction_units(msgs):
            if not any(msgs[i].role == "user" for i in group):
                continue
            members = [msgs[i] for i in group]
            view = InteractionView.of(index, members, count_tokens)
            index += 1
            names = {"message": MessageView.of(members[0]), "interaction": view}
            if all(evaluate(c, names, field="interaction_conditions") for c in self.interaction_conditions):
                counted.append(view)
        return counted

    def _tool_outcomes(self, msgs: list[Message]) -> tuple[set[str], set[str]]:
        names: dict[str, str] = {}
        ok: set[str] = set()
        failed: set[str] = set()
        for m in msgs:
            if m.role == "assistant":
                for call in m.tool_calls or ():
                    name = call_name(call)
                    if name and call.get("id") is not None:
                        names[str(call["id"])] = name
            elif m.role == "tool":
                name = m.name or names.get(m.tool_call_id or "")
                if name:
                    (failed if tool_failed(m) else ok).add(name)
        return ok, failed

    def should_trigger(self, messages: Sequence[Message], *, input_tokens: int | None = None,
                       count_tokens: TokenCounter = chars_per_token_counter) -> str | None:
        """The name of the first trigger that fires for ``messages``, or ``None``.

        >>> NeuralyzerStrategy(interaction_threshold_qty=2).should_trigger([Message(role="user", content="hi")])
        """
        msgs = as_messages(messages)
        if input_tokens is not None and (isinstance(input_tokens, bool) or not isinstance(input_tokens, int)):
            raise wrong_type("input_tokens", "int or None", input_tokens)
        if self.input_tokens_threshold > 0:
            used = input_tokens if input_tokens is not None else sum(message_tokens(m, count_tokens) for m in msgs)
            if used > self.input_tokens_threshold:
                return "input_tokens_threshold"
        if self.interaction_threshold_qty > 0 or self.interaction_threshold_tokens > 0:
            counted = self._counted(msgs, count_tokens)
            if 0 < self.interaction_threshold_qty <= len(counted):
                return "interaction_threshold_qty"
            if 0 < self.interaction_threshold_tokens <= sum(v.tokens for v in counted):
                return "interaction_threshold_tokens"
        if self.on_tools_success_threshold or self.on_tools_error_threshold:
            ok, failed = self._tool_outcomes(msgs)
            if ok & set(self.on_tools_success_threshold):
                return "on_tools_success_threshold"
            if failed & set(self.on_tools_error_threshold):
                return "on_tools_error_threshold"
        return None

    def _split(self, msgs: list[Message]) -> tuple[list[Message], list[Message]]:
        """(kept: system messages + the last ``interaction_keep`` interactions, removed: the rest)."""
        groups = interaction_units(msgs)
        kept = {i for g in (groups[-self.interaction_keep:] if self.interaction_keep else []) for i in g}
        keep = [m.role == "system" or i in kept for i, m in enumerate(msgs)]
        return ([m for m, k in zip(msgs, keep, strict=True) if k],
                [m for m, k in zip(msgs, keep, strict=True) if not k])

    def _summarize(self, removed: list[Message], *, llm: Any, previous_summary: str | None,
                   memory: Any) -> tuple[str | None, int]:
        return None, 0

    def apply(self, messages: Sequence[Message], *, llm: Any = None, previous_summary: str | None = None,
              count_tokens: TokenCounter = chars_per_token_counter, input_tokens: int | None = None,
              memory: Any = None, force: bool = False) -> StrategyOutcome:
        """Run the strategy if a trigger fires (or ``force``); never mutates ``messages``.

        >>> msgs = [Message(role="user", content="a"), Message(role="user", content="b")]
        >>> NeuralyzerStrategy().apply(msgs).triggered is None
        True
        >>> [m.content for m in NeuralyzerStrategy(interaction_keep=1).apply(msgs, force=True).messages]
        ['b']
        """
        msgs = as_messages(messages)
        triggered = self.should_trigger(msgs, input_tokens=input_tokens, count_tokens=count_tokens)
        if triggered is None and force:
            triggered = "force"
        if triggered is None:
            return StrategyOutcome(triggered=None, messages=msgs)
        kept, removed = self._split(msgs)
        summary, stored = (self._summarize(removed, llm=llm, previous_summary=previous_summary, memory=memory)
                           if removed else (None, 0))
        return StrategyOutcome(triggered=triggered, messages=kept, removed=removed, summary=summary,
                               facts_stored=stored)


class SummarizerStrategy(LongTermMemoryStrategyBase):
    """Summarize the older interactions with Chain of Density, keep the last ``interaction_keep``.

    With an ``llm``, one initial call and ``cod_max_loops`` densification passes
    (see :func:`~unified_memory.conversation.chain_of_density.chain_of_density`); without one, the
    offline :class:`~unified_memory.extraction.summarizers.ExtractiveSummarizer` summary of
    ``previous_summary`` and the removed messages. With ``store_summary_as_facts``,
    ``apply`` needs ``memory`` (anything with ``remember_many(list[str])``, e.g. a
    :class:`~unified_memory.UnifiedMemory`) and stores each summary sentence in it.

    >>> s = SummarizerStrategy(interaction_threshold_qty=2, interaction_keep=1)
    >>> out = s.apply([Message(role="user", content="I live in Lisbon."), Message(role="user", content="ok")])
    >>> out.triggered, out.summary, [m.content for m in out.messages]
    ('interaction_threshold_qty', 'user: I live in Lisbon.', ['ok'])
    """

    long_term_memory_id: Literal["summarizer"] = "summarizer"
    interaction_threshold_qty: int = Field(default=20, ge=-1)
    interaction_threshold_tokens: int = Field(default=20000, ge=-1)
    cod_max_loops: int = Field(default=5, ge=1)
    instructions: str | None = None
    store_summary_as_facts: bool = False
    summary_max_words: int = Field(default=120, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _unsupported(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for name, hint in (("knowledge_base", "vector-store knowledge bases are not supported; set "
                                "store_summary_as_facts=true and pass a UnifiedMemory as apply(memory=...)"),
                               ("text_splitter", "not supported: with store_summary_as_facts=true the summary "
                                "is split into sentences")):
                if name in data:
                    raise PydanticCustomError("unsupported_setting", hint, {"setting": name})
        return data

    def _summarize(self, removed: list[Message], *, llm: Any, previous_summary: str | None,
                   memory: Any) -> tuple[str | None, int]:
        if self.store_summary_as_facts and not callable(getattr(memory, "remember_many", None)):
            raise invalid("memory", "store_summary_as_facts=true needs memory= (an object with remember_many)")
        if llm is None:
            summary = ExtractiveSummarizer().summarize(previous_summary or "", removed)
        else:
            summary = chain_of_density(llm, removed, previous_summary=previous_summary, loops=self.cod_max_loops,
                                       max_words=self.summary_max_words, instructions=self.instructions)
        stored = 0
        if self.store_summary_as_facts:
            sentences = [s.strip() for s in _SENTENCE.split(summary) if s.strip()]
            if sentences:
                memory.remember_many(sentences)
            stored = len(sentences)
        return summary, stored


class NeuralyzerStrategy(LongTermMemoryStrategyBase):
    """Erase all but the last ``interaction_keep`` interactions (system messages stay); no summary.

    >>> NeuralyzerStrategy(interaction_threshold_qty=30, interaction_keep=5).interaction_threshold_tokens
    -1
    """

    long_term_memory_id: Literal["neuralyzer"] = "neuralyzer"
    interaction_threshold_qty: int = Field(default=-1, ge=-1)
    interaction_threshold_tokens: int = Field(default=-1, ge=-1)


LongTermStrategy = Annotated[SummarizerStrategy | NeuralyzerStrategy, Field(discriminator="long_term_memory_id")]
