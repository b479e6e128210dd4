"""Ready-made ``remember`` and ``recall`` tools, so an agent can write and search its own memory.

Each :class:`MemoryTool` carries an OpenAI-format JSON schema (``tool.schema()``) and
runs the arguments the model sends back — a JSON string, a dict or keywords —
returning text for the model. :func:`run_tool_call` answers one tool call with the
``{"role": "tool", ...}`` message. Recall answers in readable lines, never ids.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory(clock=lambda: 1_700_000_000.0) as mem:
    ...     remember, recall = memory_tools(mem)
    ...     print(remember('{"text": "I am allergic to peanuts"}'))
    ...     print(recall(query="peanuts", tiers=["long_term"]))  # doctest: +ELLIPSIS
    Remembered: I am allergic to peanuts
    1. [fact, 2023-11-14] I am allergic to peanuts (score ...)
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from unified_memory.errors import invalid, wrong_type
from unified_memory.retrieval.context import clean_item
from unified_memory.types import MemoryStats
from unified_memory.validation import check_limit, check_text

__all__ = ["MemoryTool", "remember_tool", "recall_tool", "memory_tools", "run_tool_call"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # what OpenAI accepts as a function name
_TIER_WORDS = {"long_term": "fact", "entity": "entity", "episodic": "past conversation",
               "short_term": "current conversation"}


@dataclass(frozen=True)
class MemoryTool:
    """A tool an LLM can call: its name, description, JSON Schema of arguments, and handler.

    Calling it validates the arguments against ``parameters`` (a bad value raises
    ``MemoryValueError`` / ``MemoryTypeError`` naming ``arguments.<field>``, and
    nothing is written) and returns the handler's text. A ``null`` optional argument
    counts as absent.

    >>> echo = MemoryTool("echo", "Repeat a word.", {"type": "object", "properties": {"word": {
    ...     "type": "string"}}, "required": ["word"], "additionalProperties": False},
    ...     lambda args: args["word"])
    >>> echo('{"word": "hi"}'), echo({"word": "hi"}), echo(word="hi")
    ('hi', 'hi', 'hi')
    """

    name: str
    description: str
    parameters: dict[str, Any]
    handler: Callable[[dict[str, Any]], str] = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise invalid("name", f"must be 1-64 letters, digits, '_' or '-', got {self.name!r:.80}")
        if not isinstance(self.description, str):
            raise wrong_type("description", "str", self.description)
        if not isinstance(self.parameters, Mapping) or self.parameters.get("type") != "object":
            raise invalid("parameters", f"must be a JSON Schema object ({{'type': 'object', ...}}), "
                                        f"got {self.parameters!r:.80}")
        if not callable(self.handler):
            raise wrong_type("handler", "callable", self.handler)

    def schema(self) -> dict[str, Any]:
        """The tool in OpenAI's ``tools`` format (a fresh copy, safe to modify).

        >>> MemoryTool("noop", "Do nothing.", {"type": "object"}, str).schema()["function"]["name"]
        'noop'
        """
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": copy.deepcopy(self.parameters)}}

    def __call__(self, arguments: str | Mapping[str, Any] | None = None, /, **kwargs: Any) -> str:
        """Run the tool on the model's arguments (JSON string, dict or keywords); returns text.

        >>> MemoryTool("noop", "Do nothing.", {"type": "object"}, lambda args: "done")("{}")
        'done'
        """
        if arguments is None:
            data: Any = {}
        elif isinstance(arguments, str | bytes | bytearray):
            try:
                data = json.loads(arguments) if arguments.strip() else {}
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise invalid("arguments", f"not valid JSON ({exc})") from None
        else:
            data = arguments
        if not isinstance(data, Mapping):
            raise wrong_type("arguments", "JSON object", data)
        return self.handler(_check(self.parameters, {**data, **kwargs}, "arguments"))


def _check(schema: Mapping[str, Any], value: Any, name: str) -> Any:
    """``value`` checked against the subset of JSON Schema the tools use; strings must not be blank."""
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, Mapping):
            raise wrong_type(name, "object", value)
        props, required = schema.get("properties", {}), schema.get("required", ())
        value = {k: v for k, v in value.items() if v is not None or k not in props or k in required}
        unknown = [str(k) for k in value if k not in props]
        if unknown and schema.get("additionalProperties") is False:
            raise invalid(f"{name}.{unknown[0]}", f"unknown argument; expected one of {sorted(props)}")
        for key in required:
            if key not in value:
                raise invalid(f"{name}.{key}", "is required")
        return {k: _check(props[k], v, f"{name}.{k}") if k in props else v for k, v in value.items()}
    if kind == "string":
        value = check_text(name, value, allow_empty=not schema.get("minLength"))
    elif kind in ("number", "integer"):
        if isinstance(value, float) and kind == "integer" and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int if kind == "integer" else int | float):
            raise wrong_type(name, kind, value)
        low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
        if not (low <= value <= high and (isinstance(value, int) or math.isfinite(value))):
            raise invalid(name, f"must be between {low} and {high}, got {value!r}")
    elif kind == "array":
        if not isinstance(value, list | tuple):
            raise wrong_type(name, "array", value)
        if len(value) < schema.get("minItems", 0):
            raise invalid(name, f"must have at least {schema['minItems']} item(s)")
        if schema.get("uniqueItems") and len(set(map(repr, value))) < len(value):
            raise invalid(name, f"must not repeat items, got {list(value)!r}")
        value = [_check(schema.get("items", {}), v, f"{name}[{i}]") for i, v in enumerate(value)]
    if "enum" in schema and value not in schema["enum"]:
        raise invalid(name, f"must be one of {schema['enum']}, got {value!r}")
    return value


def remember_tool(memory: Any, *, name: str = "remember") -> MemoryTool:
    """A tool storing a long-term fact in ``memory`` (a ``UnifiedMemory`` or a scoped view).

    Arguments: ``text`` (required), ``importance`` (0..1), ``category``. Says when the
    fact was already known (and so reinforced) or replaced an older one.

    >>> from unified_memory import UnifiedMemory
    >>> tool = remember_tool(UnifiedMemory())
    >>> tool(text="I live in Lisbon"), tool(text="I live in Lisbon")
    ('Remembered: I live in Lisbon', 'Remembered: I live in Lisbon (already known, reinforced)')
    """
    parameters = {"type": "object", "properties": {
        "text": {"type": "string", "minLength": 1, "description": (
            "The fact as one self-contained sentence that makes sense on its own later, "
            "e.g. \"The user is allergic to peanuts\".")},
        "importance": {"type": "number", "minimum": 0, "maximum": 1, "description": (
            "How much the fact matters, from 0 (trivia) to 1 (critical, e.g. health or safety). "
            "Omit to let the memory judge.")},
        "category": {"type": "string", "minLength": 1, "description": (
            "Optional short label such as preference, personal, health, work, location or plan.")},
    }, "required": ["text"], "additionalProperties": False}

    def handle(args: dict[str, Any]) -> str:
        text = args["text"].strip()
        before = memory.stats()
        fact_id = memory.remember(text, importance=args.get("importance"), category=args.get("category"))
        after = memory.stats()
        def total(stats: MemoryStats) -> int:
            return stats.facts + stats.superseded_facts + stats.archived_facts

        if total(after) <= total(before) and any(  # no new row: confirm the fact was reinforced
                f.id == fact_id and f.reinforcement_count for f in memory.facts()):
            return f"Remembered: {text} (already known, reinforced)"
        if after.superseded_facts > before.superseded_facts:
            return f"Remembered: {text} (replaces an older fact)"
        return f"Remembered: {text}"

    return MemoryTool(name, (
        "Save a durable fact to long-term memory so it can be recalled in later conversations: "
        "the user's preferences, personal details, decisions, plans and commitments. Restating a "
        "known fact reinforces it; a newer fact on the same subject replaces the old one."),
        parameters, handle)


def recall_tool(memory: Any, *, name: str = "recall", limit: int = 5) -> MemoryTool:
    """A tool searching ``memory`` (all tiers) and answering with numbered readable lines.

    Arguments: ``query`` (required), ``limit`` (1..20, default ``limit``), ``tiers``.

    >>> from unified_memory import UnifiedMemory
    >>> recall_tool(UnifiedMemory())(query="peanuts")
    'No memories match "peanuts".'
    """
    check_limit("limit", limit)
    parameters = {"type": "object", "properties": {
        "query": {"type": "string", "minLength": 1, "description": (
            "What to look for, in natural words, e.g. \"food allergies\" or \"where does Maria live\".")},
        "limit": {"type": "integer", "minimum": 1, "maximum": max(20, limit), "default": limit,
                  "description": f"How many memories to return at most (default {limit})."},
        "tiers": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {
            "type": "string", "enum": list(_TIER_WORDS)}, "description": (
            "Optional: search only these kinds of memory: long_term (facts), entity (people, places, "
            "things), episodic (past conversations), short_term (the current conversation). "
            "Omit to search all.")},
    }, "required": ["query"], "additionalProperties": False}

    def handle(args: dict[str, Any]) -> str:
        query = args["query"]
        hits = memory.recall(query, limit=args.get("limit", limit), tiers=args.get("tiers"))
        if not hits:
            return f"No memories match {json.dumps(' '.join(query.split()), ensure_ascii=False)}."
        return "\n".join(f"{i}. {_line(hit)}" for i, hit in enumerate(hits, 1))

    return MemoryTool(name, (
        "Search long-term memory (facts, people and places, past and current conversations) for what "
        "is relevant to a query. Use it before answering anything that depends on what the user said "
        "earlier. Returns numbered lines, best first: [kind, date] text (score)."),
        parameters, handle)


def _line(hit: Any) -> str:
    """One hit as ``[kind, date, superseded] speaker: text (score 0.83)``, on one line, without its id."""
    tags = [_TIER_WORDS.get(hit.tier, str(hit.tier))]
    if hit.created_at is not None:
        tags.append(hit.created_at.strftime("%Y-%m-%d"))
    if hit.components.get("superseded"):
        tags.append("superseded")
    speaker = hit.components.get("speaker") or hit.components.get("role")
    speaker = clean_item(speaker)[:40] if isinstance(speaker, str) else ""
    said = f"{speaker}: " if speaker and hit.tier in ("episodic", "short_term") else ""
    # clean_item: stored text stays on its own numbered line (no breaks, control or bidi characters)
    return f"[{', '.join(tags)}] {said}{clean_item(hit.text)} (score {hit.score:.2f})"


def memory_tools(memory: Any, *, prefix: str = "", limit: int = 5) -> list[MemoryTool]:
    """``[remember, recall]`` for ``memory``; a ``prefix`` names them ``<prefix>_remember`` etc.

    >>> from unified_memory import UnifiedMemory
    >>> [t.name for t in memory_tools(UnifiedMemory(), prefix="memory")]
    ['memory_remember', 'memory_recall']
    """
    if not isinstance(prefix, str):
        raise wrong_type("prefix", "str", prefix)
    join = prefix + ("_" if prefix and not prefix.endswith(("_", "-")) else "")
    return [remember_tool(memory, name=f"{join}remember"), recall_tool(memory, name=f"{join}recall", limit=limit)]


def run_tool_call(tools: Sequence[MemoryTool], call: Mapping[str, Any] | Any) -> dict[str, Any]:
    """Run one OpenAI-style tool call (a dict, or the openai SDK's object) and return the tool message.

    An unknown tool name raises ``MemoryValueError`` with ``field == "tool"``.

    >>> from unified_memory import UnifiedMemory
    >>> call = {"id": "call_1", "type": "function",
    ...         "function": {"name": "remember", "arguments": '{"text": "I like jazz"}'}}
    >>> run_tool_call(memory_tools(UnifiedMemory()), call)
    {'role': 'tool', 'tool_call_id': 'call_1', 'content': 'Remembered: I like jazz'}
    """
    def part(obj: Any, key: str) -> Any:
        return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)

    if isinstance(tools, MemoryTool | str | bytes | Mapping) or not isinstance(tools, Iterable):
        raise wrong_type("tools", "list of MemoryTool", tools)
    tools = list(tools)
    for i, each in enumerate(tools):
        if not isinstance(each, MemoryTool):
            raise wrong_type(f"tools[{i}]", "MemoryTool", each)
    call_id, function = part(call, "id"), part(call, "function")
    if not isinstance(call_id, str):
        raise wrong_type("call.id", "str", call_id)
    if function is None:
        raise invalid("call.function", "is required")
    name = part(function, "name")
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        raise invalid("tool", f"unknown tool {name!r}; expected one of {[t.name for t in tools]}")
    return {"role": "tool", "tool_call_id": call_id, "content": tool(part(function, "arguments"))}
