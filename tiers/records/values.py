"""The rules every stored value meets, shared by the records (:mod:`unified_memory.types`), the
checks of the public API and the tiers: text without NUL or lone surrogates, JSON that nests
at most :data:`MAX_JSON_DEPTH` levels and holds no NUL anywhere.

    >>> text_fault("tea"), json_depth([[1]])
    (None, 2)

This module is a leaf: it imports nothing of ours.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["LONE_SURROGATE", "MAX_JSON_DEPTH", "text_fault", "json_depth", "holds_nul", "check_json_value"]

#: A UTF-16 surrogate on its own: Python strings may hold one, UTF-8 (SQLite, files) cannot.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def text_fault(text: str) -> str | None:
    """Why ``text`` cannot be stored as it is (a NUL character, a lone surrogate), or ``None``.

    >>> text_fault("tea"), text_fault("a\\x00b")
    (None, 'must not contain NUL characters')
    """
    if "\x00" in text:
        return "must not contain NUL characters"
    if LONE_SURROGATE.search(text):
        return "must be valid unicode text (it holds a lone surrogate)"
    return None

#: How deeply JSON values (metadata, tool calls) may nest: a message must stay serialisable
#: (pydantic stops at about 250 levels, json at the recursion limit).
MAX_JSON_DEPTH = 100


def json_depth(value: Any) -> int:
    """How deeply lists and dicts nest in ``value`` (iteratively: any depth is measured).

    >>> json_depth({"a": [1, {"b": 2}]}), json_depth("text")
    (3, 0)
    """
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            deepest = max(deepest, level)
            if level <= MAX_JSON_DEPTH:
                stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def holds_nul(value: Any) -> bool:
    """Whether a key or string anywhere in the JSON ``value`` holds a NUL character (PostgreSQL
    cannot read one inside JSON: a filter on the row would fail). ``holds_nul({"k": "\\x00"})``"""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(key for key in item if isinstance(key, str))
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, str) and "\x00" in item:
            return True
    return False


def check_json_value(value: Any, field: str) -> Any:
    """``value`` when it is JSON a record may hold (nesting, NUL, serialisable), else a
    ``ValueError`` naming ``field`` (pydantic validators raise it as the field's error)."""
    if type(value) is not dict or value:  # {} (no metadata, the usual case) needs no check
        if json_depth(value) > MAX_JSON_DEPTH:
            raise ValueError(f"{field} nests more than {MAX_JSON_DEPTH} levels deep")
        if holds_nul(value):
            raise ValueError(f"{field} must not contain NUL characters (U+0000)")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"{field} must be JSON-serialisable: {exc}") from None
    return value
