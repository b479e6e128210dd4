"""Alquimia-style memory strategies, loadable from JSON.

*Short-term* strategies choose which messages go into the next prompt;
*long-term* strategies fire on a threshold and then summarize
(:class:`SummarizerStrategy`, Chain of Density) or erase
(:class:`NeuralyzerStrategy`) the older part of the conversation.

**Interactions.** Messages are grouped into interactions: a user message and
everything after it up to the next user message (messages before the first user
message form a leading group). If a tool call is still open when the next user
message arrives, that user message joins the same interaction, so a tool call and
its result are always kept or dropped together. ``system`` messages are always
kept, where they stand, and never count against a budget.

**Conditions** are ``simpleeval`` expressions (never ``eval``) over ``message``
(role, content, name, tool_call_id, has_tool_calls, tool_names, images, metadata)
and, in ``interaction_conditions``, ``interaction`` (index, size, tokens,
user_text, has_tool_calls, tool_names; ``message`` is then the interaction's first
message). A short-term strategy keeps a message only when all its ``conditions``
hold, then restores tool pairing: a tool result is kept only if the assistant
message that opened its call is kept too and the result itself passes; a call
whose result was dropped is removed from the assistant message's ``tool_calls``;
an assistant message left with no answered call is dropped, unless it has text, in
which case it is kept without ``tool_calls``. (This pairing is also applied without
conditions: a tool result without its call, or a call never answered, never reaches
the prompt.)

    >>> strategies = load_strategies('{"short_term": {"memory_strategy_id": "max_messages", '
    ...     '"memory_max_messages": 2}, "long_term": {"long_term_memory_id": "neuralyzer", '
    ...     '"interaction_threshold_qty": 2, "interaction_keep": 1}}')
    >>> msgs = [Message(role="user", content="hi"), Message(role="assistant", content="hello"),
    ...         Message(role="user", content="bye")]
    >>> [m.content for m in strategies.short_term.select(msgs)]
    ['bye']
    >>> outcome = strategies.long_term.apply(msgs)
    >>> outcome.triggered, [m.content for m in outcome.messages]
    ('interaction_threshold_qty', ['bye'])
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tiers.trimming import interaction_units
from unified_memory.conversation._strategy_conditions import (
    INTERACTION_NAMES,
    MESSAGE_NAMES,
    InteractionView,
    MessageView,
    as_messages,
    call_name,
    check_condition,
    config_error,
    evaluate,
    filter_messages,
    read_source,
    tool_failed,
)
from unified_memory.conversation.chain_of_density import chain_of_density
from unified_memory.errors import invalid, wrong_type
from unified_memory.extraction.summarizers import ExtractiveSummarizer
from unified_memory.retrieval.tokens import chars_per_token_counter, message_tokens
from unified_memory.types import Message

__all__ = ["MemoryMaxTokensStrategy", "MemoryMaxMessagesStrategy", "ShortTermStrategy",
           "LongTermMemoryStrategyBase", "SummarizerStrategy", "NeuralyzerStrategy", "LongTermStrategy",
           "StrategyOutcome", "MemoryStrategies", "load_strategies", "load_short_term_strategy",
           "load_long_term_strategy", "interactions"]

TokenCounter = Callable[[str], int]
_T = TypeVar("_T")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


# ---------------------------------------------------------------- interactions and tool pairing


def interactions(messages: Sequence[Message]) -> list[list[Message]]:
    """Group messages into interactions (see the module docstring), oldest first.

    >>> call = Message(role="assistant", tool_calls=[{"id": "c", "function": {"name": "f"}}])
    >>> msgs = [Message(role="user", content="q1"), call, Message(role="user", content="q2"),
    ...         Message(role="tool", content="r", tool_call_id="c"), Message(role="user", content="q3")]
    >>> [[m.content or m.role for m in g] for g in interactions(msgs)]
    [['q1', 'assistant', 'q2', 'r'], ['q3']]
    """
    msgs = as_messages(messages)
    return [[msgs[i] for i in group] for group in interaction_units(msgs)]


# ---------------------------------------------------------------- models


_NESTED: contextvars.ContextVar[bool] = contextvars.ContextVar("strategy_nested", default=False)


class _Strategy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, **data: Any) -> None:
        # Only the outermost construction turns pydantic's error into a ConfigError: nested
        # models (and the loaders) let the ValidationError through so its field path stays whole.
        outer = not _NESTED.get()
        token = _NESTED.set(True)
        try:
            super().__init__(**data)
        except ValidationError as exc:
            if outer:
                raise config_error(exc) from None
            raise
        finally:
            _NESTED.reset(token)


def _check_all(values: list[str], allowed: frozenset[str]) -> list[str]:
    return [check_condition(v, allowed=allowed) for v in values]


class _ShortTermBase(_Strategy):
    conditions: list[str] = Field(default_factory=list, description="Keep a message only if all hold.")

    @field_validator("conditions")
    @classmethod
    def _valid_conditions(cls, value: list[str]) -> list[str]:
        return _check_all(value, MESSAGE_NAMES)

    def _limit(self) -> int:
        raise NotImplementedError

    def _cost(self, message: Message, count_tokens: TokenCounter) -> int:
        raise NotImplementedError

    def select(self, messages: Sequence[Message], *, count_tokens: TokenCounter = chars_per_token_counter) -> list[Message]:
        """The messages for the prompt: system messages, plus the newest whole interactions that fit.

        Conditions filter the messages first (tool pairing restored). Interactions are
        then taken newest first while the running total stays within the limit; the
        first one that does not fit stops the walk (no skipping to older, smaller
        ones). ``-1`` includes no interaction at all: only the system messages remain.
        """
        msgs = filter_messages(as_messages(messages), self.conditions)
        limit, total, chosen = self._limit(), 0, set()
        for group in reversed(interaction_units(msgs) if limit >= 0 else []):
            cost = sum(self._cost(msgs[i], count_tokens) for i in group if msgs[i].role != "system")
            if total + cost > limit:
                break
            total += cost
            chosen.update(group)
        return [m for i, m in enumerate(msgs) if m.role == "system" or i in chosen]


class MemoryMaxTokensStrategy(_ShortTermBase):
    """Keep the newest whole interactions within ``memory_max_tokens`` (``-1``: only system messages).

    Tokens are :func:`~unified_memory.retrieval.tokens.message_tokens` of each non-system message.

    >>> s = MemoryMaxTokensStrategy(memory_max_tokens=8, conditions=["message.role != 'tool'"])
    >>> [m.content for m in s.select([Message(role="user", content="an old question"),
    ...                               Message(role="user", content="new")])]
    ['new']
    """

    memory_strategy_id: Literal["max_tokens"] = "max_tokens"
    memory_max_tokens: int = Field(default=10000, ge=-1, description="Token budget; -1 = include nothing.")

    def _limit(self) -> int:
        return self.memory_max_tokens

    def _cost(self, message: Message, count_tokens: TokenCounter) -> int:
        return message_tokens(message, count_tokens)


class MemoryMaxMessagesStrategy(_ShortTermBase):
    """Keep the newest whole interactions within ``memory_max_messages`` non-system messages.

    ``-1`` keeps only the system messages, like :class:`MemoryMaxTokensStrategy`.

    >>> s = MemoryMaxMessagesStrategy(memory_strategy_id="max_messages", memory_max_messages=1)
    >>> [m.content for m in s.select([Message(role="system", content="be brief"),
    ...                               Message(role="user", content="a"), Message(role="user", content="b")])]
    ['be brief', 'b']
    """

    memory_strategy_id: Literal["max_messages"] = "max_messages"
    memory_max_messages: int = Field(default=50, ge=-1, description="Message budget; -1 = include nothing.")

    def _limit(self) -> int:
        return self.memory_max_messages

    def _cost(self, message: Message, count_tokens: TokenCounter) -> int:
        return 1


ShortTermStrategy = Annotated[MemoryMaxTokensStrategy | MemoryMaxMessagesStrategy,
                              Field(discriminator="memory_strategy_id")]


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


class LongTermMemoryStrategyBase(_Strategy):
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
        return _check_all(value, INTERACTION_NAMES)

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


class MemoryStrategies(_Strategy):
    """A short-term and a long-term strategy, either optional (the JSON document's shape).

    >>> MemoryStrategies(long_term={"long_term_memory_id": "neuralyzer"}).long_term.interaction_keep
    0
    """

    short_term: ShortTermStrategy | None = None
    long_term: LongTermStrategy | None = None


# ---------------------------------------------------------------- loading


def _validate(adapter: TypeAdapter[_T], source: Any) -> _T:
    data, label = read_source(source)
    token = _NESTED.set(True)
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise config_error(exc, source=label) from None
    finally:
        _NESTED.reset(token)


_STRATEGIES = TypeAdapter(MemoryStrategies)
_SHORT: TypeAdapter[MemoryMaxTokensStrategy | MemoryMaxMessagesStrategy] = TypeAdapter(ShortTermStrategy)
_LONG: TypeAdapter[SummarizerStrategy | NeuralyzerStrategy] = TypeAdapter(LongTermStrategy)


def load_strategies(source: Mapping[str, Any] | str | Path) -> MemoryStrategies:
    """Load ``{"short_term": {...}, "long_term": {...}}`` from a dict, JSON text or a ``.json`` file.

    Errors raise :class:`~unified_memory.errors.ConfigError` naming the field path
    (and the file, with the line for invalid JSON).

    >>> load_strategies({"long_term": {"long_term_memory_id": "summarizer", "cod_max_loops": 0}})
    Traceback (most recent call last):
    ...
    unified_memory.errors.ConfigError: long_term.cod_max_loops: Input should be greater than or equal to 1 (got 0)
    """
    return _validate(_STRATEGIES, source)


def load_short_term_strategy(source: Mapping[str, Any] | str | Path) -> MemoryMaxTokensStrategy | MemoryMaxMessagesStrategy:
    """Load one short-term strategy object (``memory_strategy_id`` picks the class).

    >>> load_short_term_strategy('{"memory_strategy_id": "max_tokens", "memory_max_tokens": 8000}').memory_max_tokens
    8000
    """
    return _validate(_SHORT, source)


def load_long_term_strategy(source: Mapping[str, Any] | str | Path) -> SummarizerStrategy | NeuralyzerStrategy:
    """Load one long-term strategy object (``long_term_memory_id`` picks the class).

    >>> type(load_long_term_strategy({"long_term_memory_id": "neuralyzer", "interaction_keep": 5})).__name__
    'NeuralyzerStrategy'
    """
    return _validate(_LONG, source)
