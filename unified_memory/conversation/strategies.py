"""Alquimia-style memory strategies, loadable from JSON.

*Short-term* strategies choose which messages go into the next prompt;
*long-term* strategies fire on a threshold and then summarize
(:class:`SummarizerStrategy`, Chain of Density) or erase
(:class:`NeuralyzerStrategy`) the older part of the conversation (defined in
:mod:`unified_memory.conversation.long_term_strategies`, public here with the loaders).

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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, TypeAdapter, ValidationError, field_validator

from tiers.trimming import interaction_units
from unified_memory.conversation._strategy_conditions import (
    MESSAGE_NAMES,
    NESTED,
    StrategyModel,
    TokenCounter,
    as_messages,
    check_conditions,
    config_error,
    filter_messages,
    read_source,
)
from unified_memory.conversation.long_term_strategies import (
    LongTermMemoryStrategyBase,
    LongTermStrategy,
    NeuralyzerStrategy,
    StrategyOutcome,
    SummarizerStrategy,
)
from unified_memory.retrieval.tokens import chars_per_token_counter, message_tokens
from unified_memory.types import Message

__all__ = ["MemoryMaxTokensStrategy", "MemoryMaxMessagesStrategy", "ShortTermStrategy",
           "LongTermMemoryStrategyBase", "SummarizerStrategy", "NeuralyzerStrategy", "LongTermStrategy",
           "StrategyOutcome", "MemoryStrategies", "load_strategies", "load_short_term_strategy",
           "load_long_term_strategy", "interactions"]

_T = TypeVar("_T")


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


class _ShortTermBase(StrategyModel):
    conditions: list[str] = Field(default_factory=list, description="Keep a message only if all hold.")

    @field_validator("conditions")
    @classmethod
    def _valid_conditions(cls, value: list[str]) -> list[str]:
        return check_conditions(value, allowed=MESSAGE_NAMES)

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


class MemoryStrategies(StrategyModel):
    """A short-term and a long-term strategy, either optional (the JSON document's shape).

    >>> MemoryStrategies(long_term={"long_term_memory_id": "neuralyzer"}).long_term.interaction_keep
    0
    """

    short_term: ShortTermStrategy | None = None
    long_term: LongTermStrategy | None = None


# ---------------------------------------------------------------- loading


def _validate(adapter: TypeAdapter[_T], source: Any) -> _T:
    data, label = read_source(source)
    token = NESTED.set(True)
    try:
        return adapter.validate_python(data)
    except ValidationError as exc:
        raise config_error(exc, source=label) from None
    finally:
        NESTED.reset(token)


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
