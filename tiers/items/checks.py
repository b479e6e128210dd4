"""The rules of keyed items (:mod:`tiers.items.keyed_items`), pure and shared by a local memory and the
HTTP client: what a namespace, a key, a value, a filter, an ``index`` and a TTL may be, which
items a filter keeps, which text of a value is searched, and how namespaces match a pattern.

A namespace is a tuple of labels (``("memories", "ada")``), stored as the labels joined with
``.``: so a label may not hold ``.`` (nor NUL, nor be empty), as in LangGraph's stores.

    >>> check_namespace("namespace", ["notes", "ada"])
    ('notes', 'ada')
    >>> check_namespace("namespace", ("a.b",))
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: namespace[0]: a label must not contain '.', got 'a.b'
    >>> matches({"kind": "todo", "n": 3}, {"kind": "todo", "n": {"$gte": 2}})
    True
    >>> searchable_text({"title": "Bees", "tags": ["honey", 3]}, None)
    'Bees\\nhoney'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from scoring.errors import invalid, wrong_type
from tiers.records.values import LONE_SURROGATE, MAX_JSON_DEPTH, json_depth, text_fault

__all__ = ["SEPARATOR", "OPERATORS", "MAX_TTL_MINUTES", "check_namespace", "check_key", "check_value",
           "check_index", "check_ttl", "check_filter", "matches", "searchable_text", "joined", "split",
           "namespace_matches", "field_texts", "filter_to_wire", "filter_from_wire", "ROOT_PATH"]

SEPARATOR = "."
#: The comparison operators of a filter (LangGraph's).
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
#: The longest TTL: a little under 8,000 years (an expiry must stay a date).
MAX_TTL_MINUTES = 4.0e9
_PATH_PART = re.compile(r"^([^\[\]]+)((?:\[(?:\*|-?\d+)\])*)$")
#: The path of the whole value (LangGraph's default ``fields``).
ROOT_PATH = "$"
#: How a filter's NaN and infinities travel in JSON, which has none (:func:`filter_to_wire`).
_NON_FINITE = "$float"


def _label(field: str, value: Any, *, wildcard: bool = False) -> str:
    if not isinstance(value, str):
        raise wrong_type(field, "str (a namespace label)", value)
    if not value:
        raise invalid(field, "a label must not be empty")
    if SEPARATOR in value:
        raise invalid(field, f"a label must not contain '.', got {value[:80]!r}")
    fault = text_fault(value)
    if fault is not None:
        raise invalid(field, fault)
    return value


def check_namespace(field: str, value: Any, *, empty: bool = False) -> tuple[str, ...]:
    """A namespace as a tuple of labels (a list is accepted); ``empty``: ``()`` allowed (a prefix
    matching every namespace)."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise wrong_type(field, "tuple of str", value)
    labels = tuple(_label(f"{field}[{i}]", label) for i, label in enumerate(value))
    if not labels and not empty:
        raise invalid(field, "must have at least one label")
    return labels


def check_key(field: str, value: Any) -> str:
    """An item's key: a non-empty string, without NUL or lone surrogates.

    >>> check_key("key", "k1")
    'k1'
    """
    if not isinstance(value, str):
        raise wrong_type(field, "str", value)
    if not value:
        raise invalid(field, "must not be empty")
    fault = text_fault(value)
    if fault is not None:
        raise invalid(field, fault)
    return value


def _json_text(field: str, value: Any, *, allow_nan: bool = False) -> str:
    if json_depth(value) > MAX_JSON_DEPTH:
        raise invalid(field, f"nests more than {MAX_JSON_DEPTH} levels deep")
    try:
        text = json.dumps(value, allow_nan=allow_nan, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise invalid(field, f"must be JSON-serialisable: {exc}") from None
    if LONE_SURROGATE.search(text):
        raise invalid(field, "must be valid unicode text (it holds a lone surrogate)")
    return text


def _string_keys(field: str, value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, str):
                    raise invalid(field, f"keys must be strings, got {key!r:.40}")
                stack.append(child)
        elif isinstance(item, list | tuple):
            stack.extend(item)


def check_value(field: str, value: Any) -> tuple[dict[str, Any], str]:
    """An item's value: a JSON object (a dict with string keys, no NaN or infinity). Returns it as
    JSON reads it back (tuples become lists) and its JSON text.

    >>> check_value("value", {"tags": ("a", "b")})
    ({'tags': ['a', 'b']}, '{"tags":["a","b"]}')
    """
    if not isinstance(value, Mapping):
        raise wrong_type(field, "dict (a JSON object)", value)
    _string_keys(field, value)
    text = _json_text(field, dict(value))
    return json.loads(text), text


def check_index(field: str, value: Any) -> list[str] | bool | None:
    """``None`` (every string in the value is searched), ``False`` (the item is not searched by
    query) or a list of field paths (``"title"``, ``"meta.title"``, ``"chapters[*].text"``,
    ``"authors[0]"``, ``"authors[-1]"``: the last; ``"$"``: the whole value).

    >>> check_index("index", ["title", "chapters[*].text"])
    ['title', 'chapters[*].text']
    """
    if value is None or value is False:
        return value
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise wrong_type(field, "list of field paths, False or None", value)
    paths = []
    for i, path in enumerate(value):
        if not isinstance(path, str):
            raise wrong_type(f"{field}[{i}]", "str", path)
        if path != ROOT_PATH and (not all(_PATH_PART.match(part) for part in path.split("."))
                                  or LONE_SURROGATE.search(path)):
            raise invalid(f"{field}[{i}]", f"not a field path like 'title' or 'chapters[*].text', got {path[:80]!r}")
        paths.append(path)
    return paths


def check_ttl(field: str, value: Any) -> float | None:
    """``None`` (the item never expires) or a positive number of minutes.

    >>> check_ttl("ttl", 1.5), check_ttl("ttl", None)
    (1.5, None)
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(field, "a number of minutes or None", value)
    if not (value > 0 and value <= MAX_TTL_MINUTES):  # also NaN
        raise invalid(field, f"must be a positive number of minutes (at most {MAX_TTL_MINUTES:.0e}), got {value!r:.40}")
    return float(value)


def check_filter(field: str, value: Any) -> dict[str, Any] | None:
    """``None`` or a dict of ``{field: wanted}``: ``wanted`` is a value (equal, nested dicts and
    lists compared whole) or a dict of operators (``$eq $ne $gt $gte $lt $lte``). Numbers may
    be infinite or NaN, as in Python (``{"$lt": inf}`` passes every number; NaN equals nothing).

    >>> check_filter("filter", {"n": {"$between": 1}})
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: filter.n: unknown operator '$between' (use $eq, $gt, $gte, $lt, $lte, $ne)
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise wrong_type(field, "dict", value)
    _string_keys(field, value)
    checked: dict[str, Any] = json.loads(_json_text(field, dict(value), allow_nan=True))
    stack = [(field, checked)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if key.startswith("$") and key not in OPERATORS:
                    raise invalid(where, f"unknown operator {key!r:.40} (use {', '.join(sorted(OPERATORS))})")
                stack.append((f"{where}.{key}", child))
    return checked


def _map_numbers(value: Any, change: Any) -> Any:
    """``value`` with every float replaced by ``change(number)`` (dicts and lists rebuilt)."""
    if isinstance(value, dict):
        return {key: _map_numbers(child, change) for key, child in value.items()}
    if isinstance(value, list):
        return [_map_numbers(child, change) for child in value]
    return change(value) if isinstance(value, float) else value


def filter_to_wire(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """A checked filter as JSON can carry it: NaN and the infinities as ``{"$float": "nan"}``
    (``"inf"``, ``"-inf"``); :func:`filter_from_wire` reads them back.

    >>> filter_to_wire({"price": {"$lt": float("inf")}})
    {'price': {'$lt': {'$float': 'inf'}}}
    """
    def change(number: float) -> Any:
        return {_NON_FINITE: repr(number)} if not math.isfinite(number) else number

    return None if value is None else _map_numbers(value, change)


def filter_from_wire(field: str, value: Any) -> dict[str, Any] | None:
    """A filter received as JSON: ``{"$float": "inf" | "-inf" | "nan"}`` read as the number, then
    checked (:func:`check_filter`)."""
    def read(item: Any) -> Any:
        if isinstance(item, dict):
            if set(item) == {_NON_FINITE} and item[_NON_FINITE] in ("inf", "-inf", "nan"):
                return float(item[_NON_FINITE])
            return {key: read(child) for key, child in item.items()}
        if isinstance(item, list):
            return [read(child) for child in item]
        return item

    return check_filter(field, read(value)) if isinstance(value, dict) else check_filter(field, value)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _operator(value: Any, operator: str, wanted: Any) -> bool:
    if operator == "$eq":
        return bool(value == wanted)
    if operator == "$ne":
        return bool(value != wanted)
    left, right = _number(value), _number(wanted)
    if left is None or right is None:  # strings compare as strings; anything else never matches
        if not (isinstance(value, str) and isinstance(wanted, str)):
            return False
        left_s, right_s = value, wanted
        return {"$gt": left_s > right_s, "$gte": left_s >= right_s, "$lt": left_s < right_s,
                "$lte": left_s <= right_s}[operator]
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right, "$lte": left <= right}[operator]


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, arg) for op, arg in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list):
        return (isinstance(value, list) and len(value) == len(wanted)
                and all(_compare(v, w) for v, w in zip(value, wanted, strict=True)))
    if isinstance(wanted, bool) or isinstance(value, bool):
        return type(value) is type(wanted) and value == wanted
    return bool(value == wanted)


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a (checked) filter: every field of the filter (a key, or a
    dotted path into nested objects) is equal to the value's (dicts and lists compared whole, a
    missing field is ``None``), or passes its operators (``$gt``...: numbers with numbers, strings
    with strings; other pairs never pass).

    >>> matches({"tags": ["a"], "n": 1}, {"tags": ["a"], "n": {"$ne": 2, "$lt": 5}})
    True
    >>> matches({"n": "1"}, {"n": {"$gt": 0}})
    False
    """
    return all(_compare(_field(value, key), wanted) for key, wanted in (filter or {}).items())


def _field(value: Mapping[str, Any], key: str) -> Any:
    """The value's field ``key``, or, when it has no such key, the one at the dotted path
    (``"user.level"`` is ``value["user"]["level"]``, as in LangGraph's SQL stores)."""
    if key in value or "." not in key:
        return value.get(key)
    found: Any = value
    for part in key.split("."):
        if not isinstance(found, dict) or part not in found:
            return None
        found = found[part]
    return found


def _strings(value: Any) -> list[str]:
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
    return found


def _at_path(value: Any, path: str) -> list[Any]:
    if path == ROOT_PATH:
        return [value]
    found = [value]
    for part in path.split("."):
        match = _PATH_PART.match(part)
        if match is None:
            return []
        name, brackets = match.groups()
        found = [item[name] for item in found if isinstance(item, dict) and name in item]
        for index in re.findall(r"\[(\*|-?\d+)\]", brackets):
            if index == "*":
                found = [child for item in found if isinstance(item, list) for child in item]
            else:
                at = int(index)
                found = [item[at] for item in found if isinstance(item, list) and -len(item) <= at < len(item)]
    return found


def field_texts(value: Mapping[str, Any], index: list[str] | bool | None) -> list[str]:
    """The texts a query is matched against, one per string found: every string in the value
    (``index=None``), the strings at the given field paths (in their order), or none (``False``).

    >>> field_texts({"title": "Bees", "tags": ["honey", "wax"]}, ["tags[-1]", "title"])
    ['wax', 'Bees']
    """
    if index is False:
        return []
    if index is None or index is True:
        return _strings(value)
    return [text for path in index for found in _at_path(value, path) for text in _strings(found)]


def searchable_text(value: Mapping[str, Any], index: list[str] | bool | None) -> str:
    """The text a query is matched against: every string in the value (``index=None``), the strings at
    the given field paths, or nothing (``index=False``); one per line.

    >>> searchable_text({"title": "Bees", "body": {"text": "Honey"}}, ["body.text"])
    'Honey'
    """
    return "\n".join(field_texts(value, index))


def joined(namespace: Sequence[str]) -> str:
    """A namespace as stored.

    >>> joined(("notes", "ada")), split("notes.ada")
    ('notes.ada', ('notes', 'ada'))
    """
    return SEPARATOR.join(namespace)


def split(stored: str) -> tuple[str, ...]:
    """A stored namespace as a tuple of labels (see :func:`joined`)."""
    return tuple(stored.split(SEPARATOR)) if stored else ()


def namespace_matches(namespace: Sequence[str], pattern: Sequence[str], *, suffix: bool = False) -> bool:
    """Whether ``namespace`` starts (or, with ``suffix``, ends) with ``pattern``, where a ``*`` label of the
    pattern matches any label.

    >>> namespace_matches(("a", "b", "c"), ("a", "*")), namespace_matches(("a", "b"), ("*", "c"), suffix=True)
    (True, False)
    """
    if len(namespace) < len(pattern):
        return False
    pairs = zip(reversed(namespace), reversed(pattern), strict=False) if suffix else zip(namespace, pattern, strict=False)
    return all(want == "*" or label == want for label, want in pairs)
