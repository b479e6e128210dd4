"""Applying a redactor to what callers write: message fields, fact specs, metadata,
imported rows. The write paths of :class:`~unified_memory.UnifiedMemory` and
:class:`~unified_memory.Conversation` call a :class:`Scrubber` before anything is
stored, so a failing redactor writes nothing.

    >>> from unified_memory.types import Message
    >>> scrub = Scrubber(str.upper)
    >>> scrub.message("message", Message(role="user", content="hi", metadata={"n": 1, "city": "Lisbon"})).metadata
    {'n': 1, 'city': 'LISBON'}
    >>> Scrubber(None).text("text", "unchanged")
    'unchanged'
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from unified_memory.errors import MemoryValueError, wrong_type
from unified_memory.protocols import Redactor
from unified_memory.types import Message

__all__ = ["Scrubber", "make_scrubber"]

# Keys of tool calls and reasoning details that are structure, not text (ids pair calls with results).
_STRUCTURAL = frozenset({"id", "type", "index", "signature", "format", "encrypted_content", "data"})
# Text columns of exported rows (JSON columns are scrubbed value by value).
_ROW_TEXT = {"messages": ("content", "name"), "facts": ("text", "subject", "attribute", "value", "category"),
             "entities": ("name", "description", "doc"), "triples": ("predicate",), "summaries": ("text",)}
_ROW_JSON = {"messages": ("tool_calls", "metadata", "reasoning_details"), "facts": ("metadata",),
             "entities": ("attributes", "metadata"), "triples": ("metadata",)}


def make_scrubber(redactor: Any, *, redact_secrets: bool = False) -> Scrubber:
    """The scrubber for a ``redactor=`` argument: a callable, or ``None`` for the built-in
    :class:`~unified_memory.privacy.secrets.SecretRedactor` when ``redact_secrets`` is on, else none.

    >>> make_scrubber(None).redactor is None, type(make_scrubber(None, redact_secrets=True).redactor).__name__
    (True, 'SecretRedactor')
    >>> make_scrubber("yes")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryTypeError: redactor: expected a callable str -> str or None, got str
    """
    if redactor is not None and not callable(redactor):
        raise wrong_type("redactor", "a callable str -> str or None", redactor)
    if redactor is None and redact_secrets:
        from unified_memory.privacy.secrets import SecretRedactor

        redactor = SecretRedactor()
    return Scrubber(redactor)


def _checked(field: str, redact: Any, *args: str) -> str:
    """``redact(*args)``: a redactor that raises or returns a non-``str`` is an error naming
    ``redactor`` (and the field, not the text: the secret stays out of logs)."""
    try:
        out = redact(*args)
    except Exception as exc:
        raise MemoryValueError(f"redactor: raised {type(exc).__name__} on {field}; nothing was written",
                               field="redactor") from exc
    if not isinstance(out, str):
        raise wrong_type("redactor", f"str from redactor({field})", out)
    return out


class Scrubber:
    """Runs a :class:`~unified_memory.protocols.Redactor` (or nothing, when ``None``) over
    user text; an exception in it or a result that is not a ``str`` is an error naming
    ``redactor`` (the original exception is chained).

    >>> Scrubber(lambda text: 42).text("content", "hi")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryTypeError: redactor: expected str from redactor(content), got int
    """

    def __init__(self, redactor: Redactor | None) -> None:
        self.redactor = redactor
        self._local = threading.local()

    def __bool__(self) -> bool:
        return self.redactor is not None

    @contextlib.contextmanager
    def done(self) -> Iterator[None]:
        """In this block and thread, :meth:`messages` passes messages through unchanged: the
        caller redacted them already (ingest redacts a whole file before writing any of it)."""
        previous = getattr(self._local, "done", False)
        self._local.done = True
        try:
            yield
        finally:
            self._local.done = previous

    def text(self, field: str, value: str) -> str:
        """``value`` redacted (checked to be a ``str``)."""
        if self.redactor is None or not isinstance(value, str):
            return value
        return _checked(field, self.redactor, value)

    def _named(self, field: str, name: str, value: str) -> str:
        """A value under a key: the redactor's ``redact_field(name, value)`` when it has one."""
        by_name = getattr(self.redactor, "redact_field", None)
        if not callable(by_name):
            return self.text(field, value)
        return _checked(field, by_name, name, value)

    def data(self, field: str, value: Any, *, keep: frozenset[str] = frozenset()) -> Any:
        """JSON-like data with every string in it redacted (mapping keys stay, and the
        values of the keys in ``keep``).

        >>> Scrubber(str.upper).data("metadata", {"tags": ["a", {"b": "c"}], "id": "x"}, keep=frozenset({"id"}))
        {'tags': ['A', {'b': 'C'}], 'id': 'x'}
        """
        if self.redactor is None:
            return value
        if isinstance(value, str):
            return self.text(field, value)
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                name = f"{field}.{key}"
                if key in keep:
                    out[key] = item
                elif isinstance(item, str):
                    out[key] = self._named(name, str(key), item)
                else:
                    out[key] = self.data(name, item, keep=keep)
            return out
        if isinstance(value, list | tuple):
            return [self.data(f"{field}[{i}]", item, keep=keep) for i, item in enumerate(value)]
        return value

    def message(self, field: str, message: Message) -> Message:
        """A copy of ``message`` with its content, name, tool-call arguments, reasoning
        text and metadata redacted (ids, roles and images unchanged)."""
        if self.redactor is None:
            return message
        update: dict[str, Any] = {}
        if message.content is not None:
            update["content"] = self.text(f"{field}.content", message.content)
        if message.name is not None:
            update["name"] = self.text(f"{field}.name", message.name)
        if message.tool_calls:
            update["tool_calls"] = self.data(f"{field}.tool_calls", message.tool_calls, keep=_STRUCTURAL)
        if message.reasoning_details:
            update["reasoning_details"] = self.data(f"{field}.reasoning_details", message.reasoning_details,
                                                    keep=_STRUCTURAL)
        if message.metadata:
            update["metadata"] = self.data(f"{field}.metadata", message.metadata)
        return message.model_copy(update=update)

    def messages(self, field: str, messages: Sequence[Message]) -> list[Message]:
        """:meth:`message` for each, named ``field[i]``."""
        if self.redactor is None or getattr(self._local, "done", False):
            return list(messages)
        return [self.message(f"{field}[{i}]", m) for i, m in enumerate(messages)]

    def export_row(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        """A row of an export (:mod:`tiers.maintenance.row_export`) with its text columns redacted; the
        keys derived from them (``facts.norm_key``, ``entities.norm_name``) follow.

        >>> Scrubber(lambda t: t.replace("secret", "***")).export_row("summaries", {"text": "a secret"})
        {'text': 'a ***'}
        """
        if self.redactor is None or table not in _ROW_TEXT:
            return row
        out = dict(row)
        for column in _ROW_TEXT[table]:
            if isinstance(out.get(column), str):
                out[column] = self.text(f"{table}.{column}", out[column])
        for column in _ROW_JSON.get(table, ()):
            if isinstance(out.get(column), str):
                data = json.loads(out[column])
                keep = _STRUCTURAL if column in ("tool_calls", "reasoning_details") else frozenset()
                clean = self.data(f"{table}.{column}", data, keep=keep)
                if clean != data:
                    out[column] = json.dumps(clean, ensure_ascii=False, separators=(",", ":"))
        if table == "facts" and out.get("text") != row.get("text"):
            from tiers.facts.writes import fact_key

            out["norm_key"] = fact_key(out["text"])
        if table == "entities" and out.get("name") != row.get("name") and row.get("norm_name") != "user":  # the user keeps its key
            from tiers.graph.entities import norm_name

            out["norm_name"] = norm_name(out["name"])
        return out
