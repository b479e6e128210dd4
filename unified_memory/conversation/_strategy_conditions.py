"""Helpers of :mod:`unified_memory.conversation.strategies`: safe conditions, interactions, tool pairing, config errors
and the strategies' base model.

A condition is a one-line Python *expression* evaluated with ``simpleeval`` (never
``eval``) over read-only views of a message and, for interaction conditions, of the
interaction. Conditions are checked when the strategy is built: a syntax error, a
statement, an unknown name, a call to an unknown function or any ``_``-prefixed
attribute (``__class__``, ``__globals__``...) is refused there.

    >>> from unified_memory.types import Message
    >>> check_condition("message.role != 'tool'", allowed=MESSAGE_NAMES)
    "message.role != 'tool'"
    >>> evaluate("message.role != 'tool'", {"message": MessageView.of(Message(role="tool", content="42"))})
    False
"""

from __future__ import annotations

import ast
import contextvars
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from simpleeval import EvalWithCompoundTypes, SimpleEval

from unified_memory.errors import ConfigError, invalid, wrong_type
from unified_memory.retrieval.tokens import message_tokens
from unified_memory.types import Message

__all__ = ["MessageView", "InteractionView", "check_condition", "check_conditions", "evaluate", "MESSAGE_NAMES",
           "INTERACTION_NAMES", "FUNCTIONS", "StrategyModel", "NESTED", "TokenCounter"]

TokenCounter = Callable[[str], int]

#: Functions a condition may call (besides methods of the values, e.g. ``message.content.lower()``).
FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": len, "str": str, "int": int, "float": float, "bool": bool, "abs": abs, "min": min, "max": max,
    "any": any, "all": all, "lower": lambda s: str(s).lower(),
}
MESSAGE_NAMES = frozenset({"message", "True", "False", "None"})
INTERACTION_NAMES = MESSAGE_NAMES | {"interaction"}
_TAGS = {"memory_strategy_id": ("max_tokens", "max_messages"), "long_term_memory_id": ("summarizer", "neuralyzer")}
_ALL_TAGS = {tag for tags in _TAGS.values() for tag in tags}
_FORBIDDEN_NODES = (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom, ast.Starred)


@dataclass(frozen=True)
class MessageView:
    """What a condition sees as ``message``: plain copies, never the message itself.

    >>> view = MessageView.of(Message(role="assistant", tool_calls=[
    ...     {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]))
    >>> view.content, view.has_tool_calls, view.tool_names
    ('', True, ['search'])
    """

    role: str
    content: str
    name: str | None
    tool_call_id: str | None
    has_tool_calls: bool
    tool_names: list[str]
    images: int
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, message: Message) -> MessageView:
        """Build the view of ``message`` (``content`` is ``''`` when the message has none).

        >>> MessageView.of(Message(role="user", content="hi")).role
        'user'
        """
        return cls(role=message.role, content=message.content or "", name=message.name,
                   tool_call_id=message.tool_call_id, has_tool_calls=bool(message.tool_calls),
                   tool_names=call_names(message), images=len(message.images or ()),
                   metadata=dict(message.metadata))


@dataclass(frozen=True)
class InteractionView:
    """What an interaction condition sees as ``interaction``.

    ``size`` is its number of messages, ``tokens`` their :func:`message_tokens` sum
    (system messages excluded), ``user_text`` the text of its user message.

    >>> msgs = [Message(role="user", content="find x"), Message(role="assistant", content="done")]
    >>> view = InteractionView.of(3, msgs, lambda text: len(text))
    >>> view.index, view.size, view.user_text, view.has_tool_calls
    (3, 2, 'find x', False)
    """

    index: int
    size: int
    tokens: int
    user_text: str
    has_tool_calls: bool
    tool_names: list[str]

    @classmethod
    def of(cls, index: int, messages: Sequence[Message], count_tokens: Callable[[str], int]) -> InteractionView:
        """Build the view of one interaction (``index`` counts from 0, oldest first).

        >>> InteractionView.of(0, [], len).size
        0
        """
        names = [n for m in messages for n in call_names(m)]
        return cls(index=index, size=len(messages),
                   tokens=sum(message_tokens(m, count_tokens) for m in messages if m.role != "system"),
                   user_text=next((m.content or "" for m in messages if m.role == "user"), ""),
                   has_tool_calls=bool(names), tool_names=names)


def call_name(call: Any) -> str | None:
    """The function name of one OpenAI-style tool call dict (``None`` when it has none).

    >>> call_name({"id": "a", "type": "function", "function": {"name": "search", "arguments": "{}"}})
    'search'
    """
    if not isinstance(call, dict):
        return None
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else call.get("name")
    return str(name) if name else None


def call_names(message: Message) -> list[str]:
    """The function names of the tool calls ``message`` opens (calls without a name left out).

    >>> call_names(Message(role="assistant", tool_calls=[{"id": "a", "function": {"name": "f"}}]))
    ['f']
    """
    return [name for name in map(call_name, message.tool_calls or ()) if name]


@lru_cache(maxsize=512)
def _parse(expression: str) -> ast.AST:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree: ast.AST = SimpleEval.parse(expression)
        return tree


def check_condition(expression: str, *, allowed: frozenset[str]) -> str:
    """Validate a condition; return it unchanged or raise ``ValueError`` saying what is wrong.

    >>> check_condition("__import__('os')", allowed=MESSAGE_NAMES)
    Traceback (most recent call last):
    ...
    ValueError: condition "__import__('os')": calls unknown function '__import__'
    """
    prefix = f'condition "{expression}"'
    if not isinstance(expression, str) or not expression.strip():
        raise ValueError(f"{prefix}: must be a non-empty expression")
    try:
        tree = ast.parse(expression.strip())
        _parse(expression)
    except SyntaxError as exc:
        raise ValueError(f"{prefix}: syntax error: {exc.msg}") from None
    except (RecursionError, MemoryError):  # 'not not not ...' or '----1' thousands deep: the parser gives up
        raise ValueError(f"{prefix:.80}...: nested too deeply to parse") from None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        raise ValueError(f"{prefix}: must be a single expression, not a statement")
    for node in ast.walk(tree):
        if isinstance(node, _FORBIDDEN_NODES):
            raise ValueError(f"{prefix}: {type(node).__name__} is not allowed")
        if isinstance(node, ast.Attribute) and (node.attr.startswith("_") or node.attr.startswith("func_")):
            raise ValueError(f"{prefix}: access to attribute {node.attr!r} is not allowed")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in FUNCTIONS:
            raise ValueError(f"{prefix}: calls unknown function {node.func.id!r}")
        if (isinstance(node, ast.Name) and node.id not in allowed and node.id not in FUNCTIONS
                and not _bound_in_comprehension(tree, node.id)):
            raise ValueError(f"{prefix}: unknown name {node.id!r} (use {', '.join(sorted(allowed - {'True', 'False', 'None'}))})")
    return expression


def check_conditions(values: list[str], *, allowed: frozenset[str]) -> list[str]:
    """:func:`check_condition` of each of ``values``."""
    return [check_condition(v, allowed=allowed) for v in values]


def _bound_in_comprehension(tree: ast.AST, name: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension):
            targets = [n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
            if name in targets:
                return True
    return False


def evaluate(expression: str, names: dict[str, Any], *, field: str = "conditions") -> bool:
    """Evaluate a (checked) condition; a failure raises ``MemoryValueError`` naming it.

    >>> evaluate("'x' in message.nope", {"message": MessageView.of(Message(role="user"))})
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: conditions: condition "'x' in message.nope" failed: ...
    """
    evaluator = EvalWithCompoundTypes(names=dict(names), functions=FUNCTIONS)
    try:
        return bool(evaluator.eval(expression, previously_parsed=_parse(expression)))
    except Exception as exc:  # noqa: BLE001 - any evaluation failure is the condition's fault
        raise invalid(field, f"condition \"{expression}\" failed: {type(exc).__name__}: {exc}") from exc


# ---------------------------------------------------------------- interactions and tool pairing


def as_messages(messages: Any) -> list[Message]:
    """A list of :class:`Message` from Messages or message dicts (the input list is not changed).

    >>> as_messages([{"role": "user", "content": "hi"}])[0].content
    'hi'
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise wrong_type("messages", "a list of Message or dict", messages)
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping):
            try:
                out.append(Message.model_validate(dict(m)))
            except ValidationError as exc:
                raise invalid(f"messages[{i}]", str(exc.errors()[0]["msg"])) from None
        else:
            raise wrong_type(f"messages[{i}]", "Message or dict", m)
    return out


def _pairs(messages: Sequence[Message]) -> dict[int, tuple[int, int]]:
    """tool result index -> (index of the assistant message that opened the call, position of the call)."""
    open_calls: list[tuple[int, int, str | None]] = []
    pairs: dict[int, tuple[int, int]] = {}
    for i, m in enumerate(messages):
        if m.role == "assistant" and m.tool_calls:
            open_calls += [(i, k, None if c.get("id") is None else str(c["id"])) for k, c in enumerate(m.tool_calls)]
        elif m.role == "tool" and open_calls:
            j = 0 if m.tool_call_id is None else next(
                (x for x, c in enumerate(open_calls) if c[2] == m.tool_call_id),
                next((x for x, c in enumerate(open_calls) if c[2] is None), None))
            if j is not None:
                a, k, _ = open_calls.pop(j)
                pairs[i] = (a, k)
    return pairs


def _paired(messages: Sequence[Message], keep: Sequence[bool]) -> list[Message]:
    """The kept messages with tool pairing restored (the rule in :mod:`unified_memory.conversation.strategies`)."""
    pairs, keep = _pairs(messages), list(keep)
    answered: dict[int, set[int]] = {}
    for i, m in enumerate(messages):
        if m.role == "tool":
            pair = pairs.get(i)
            if pair is None or not (keep[i] and keep[pair[0]]):
                keep[i] = False
            else:
                answered.setdefault(pair[0], set()).add(pair[1])
    out = []
    for i, m in enumerate(messages):
        if not keep[i]:
            continue
        if m.role == "assistant" and m.tool_calls:
            got = answered.get(i, set())
            if len(got) < len(m.tool_calls):
                if got:
                    m = m.model_copy(update={"tool_calls": [c for k, c in enumerate(m.tool_calls) if k in got]})
                elif (m.content or "").strip():
                    m = m.model_copy(update={"tool_calls": None})
                else:
                    continue
        out.append(m)
    return out


def filter_messages(messages: Sequence[Message], conditions: Sequence[str]) -> list[Message]:
    """The messages for which every condition holds, with tool pairing restored.

    >>> msgs = [Message(role="user", content="q"), Message(role="assistant", content="let me look",
    ...         tool_calls=[{"id": "c"}]), Message(role="tool", content="r", tool_call_id="c")]
    >>> [(m.role, m.tool_calls) for m in filter_messages(msgs, ["message.role != 'tool'"])]
    [('user', None), ('assistant', None)]
    """
    keep = [all(evaluate(c, {"message": MessageView.of(m)}, field="conditions") for c in conditions)
            for m in messages]
    return _paired(messages, keep)


def tool_failed(message: Message) -> bool:
    """Whether a tool result reports a failure (metadata ``error``/``is_error`` truthy or ``status == "error"``).

    >>> tool_failed(Message(role="tool", content="x", metadata={"status": "error"}))
    True
    """
    meta = message.metadata
    return bool(meta.get("error")) or meta.get("status") == "error" or bool(meta.get("is_error"))


def config_error(exc: ValidationError, *, source: str | None = None) -> ConfigError:
    """A ConfigError naming the field path (union tags left out) and, when given, the file."""
    errors = exc.errors()
    first = errors[0]
    loc = [str(p) for p in first["loc"]]
    parts = [p for i, p in enumerate(loc)
             if not (p in _ALL_TAGS and (i == 0 or loc[i - 1] in ("short_term", "long_term")))]
    ctx = first.get("ctx") or {}
    kind = first["type"]
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        discriminator = str(ctx.get("discriminator", "")).strip("'")
        parts.append(discriminator)
        expected = ", ".join(repr(t) for t in _TAGS.get(discriminator, ()))
        detail = (f"unknown strategy {ctx.get('tag')!r}" if kind == "union_tag_invalid" else "missing") + \
            f"; expected one of {expected}"
    elif kind == "unsupported_setting":
        parts.append(str(ctx["setting"]))
        detail = str(first["msg"])
    elif kind == "extra_forbidden":
        detail = "unknown setting"
    elif kind == "value_error":
        detail = str(first["msg"]).removeprefix("Value error, ")
    else:
        detail = f"{first['msg']} (got {first.get('input')!r})"
    field = ".".join(parts) or "strategy"
    message = f"{field}: {detail}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return ConfigError(f"{source}: {message}" if source else message, field=field)


#: Set while a strategy is built inside another one or by a loader (see :class:`StrategyModel`).
NESTED: contextvars.ContextVar[bool] = contextvars.ContextVar("strategy_nested", default=False)


class StrategyModel(BaseModel):
    """The base of the strategy models: frozen, no unknown setting, and pydantic's error raised
    as a :class:`~unified_memory.errors.ConfigError` (see :func:`config_error`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __init__(self, **data: Any) -> None:
        # Only the outermost construction turns pydantic's error into a ConfigError: nested
        # models (and the loaders) let the ValidationError through so its field path stays whole.
        outer = not NESTED.get()
        token = NESTED.set(True)
        try:
            super().__init__(**data)
        except ValidationError as exc:
            if outer:
                raise config_error(exc) from None
            raise
        finally:
            NESTED.reset(token)


def read_source(source: Any) -> tuple[Any, str | None]:
    """(the parsed data, the file path or None) from a dict, JSON text or a ``pathlib.Path``.

    >>> read_source('{"short_term": null}')
    ({'short_term': None}, None)
    """
    if isinstance(source, Path):
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, ValueError) as exc:  # ValueError: not UTF-8, or a NUL byte in the name
            raise ConfigError(f"source: {source}: cannot read the strategies file: {exc}", field="source") from None
        return _parse_json(text, str(source)), str(source)
    if isinstance(source, str):
        return _parse_json(source, None), None
    if isinstance(source, Mapping):
        return dict(source), None
    raise wrong_type("source", "dict, JSON string or pathlib.Path", source)


def _parse_json(text: str, label: str | None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        hint = (" (to load a file pass a pathlib.Path)"
                if label is None and text.strip().endswith(".json") and not text.lstrip().startswith("{") else "")
        raise ConfigError(f"{label or 'source'}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}{hint}", field="source") from None
    except RecursionError:  # a recursion bomb ('[[[[...')
        raise ConfigError(f"{label or 'source'}: invalid JSON: nested too deeply", field="source") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise ConfigError(f"{label or 'source'}: invalid JSON: {exc}", field="source") from None
