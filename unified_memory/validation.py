"""Checks on what callers pass in: every error names the field at fault.

All of these run before anything is written, so a bad item in a batch leaves
the memory untouched.

    >>> check_text("content", "hello")
    'hello'
    >>> parse_when("when", "2023-05-08T13:56:00Z")
    1683554160.0
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence, Set
from datetime import UTC, datetime
from typing import Any, Literal, overload

from pydantic import ValidationError

from unified_memory.errors import MemoryValueError, check_path, invalid, wrong_type
from unified_memory.types import (
    LONE_SURROGATE,
    MAX_JSON_DEPTH,
    TIERS,
    Message,
    holds_nul,
    json_depth,
    text_fault,
)

__all__ = [
    "check_text", "check_scope_id", "check_limit", "check_unit", "check_metadata", "parse_when",
    "to_message", "pydantic_error", "check_bool", "check_ttl_days", "check_optional_text", "check_messages",
    "check_path", "check_json", "check_no_nul", "check_tiers", "check_ids", "check_fact_keys", "FACT_KEYS",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_ID_LENGTH = 256
MAX_LIMIT = 2**63 - 1  # the largest integer SQLite can bind
# The moments a datetime can hold, as POSIX seconds (year 1 to year 9999).
_MIN_TIMESTAMP = datetime(1, 1, 1, tzinfo=UTC).timestamp()
_MAX_TIMESTAMP = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def check_text(field: str, value: Any, *, allow_empty: bool = False) -> str:
    """A string, non-blank unless ``allow_empty``.

    >>> check_text("text", "  ")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: text: must not be empty
    """
    if not isinstance(value, str):
        raise wrong_type(field, "str", value)
    if not allow_empty and not value.strip():
        raise invalid(field, "must not be empty")
    fault = text_fault(value)
    if fault is not None:
        raise invalid(field, fault)
    return value


def check_optional_text(field: str, value: Any) -> str | None:
    """``None`` or a string (which may be empty), without NUL or lone surrogates.

    >>> check_optional_text("category", None) is None
    True
    """
    return None if value is None else check_text(field, value, allow_empty=True)


def check_bool(field: str, value: Any) -> bool:
    """A real ``bool``: a truthy string like ``"no"`` must not silently mean ``True``.

    >>> check_bool("all_users", False)
    False
    """
    if not isinstance(value, bool):
        raise wrong_type(field, "bool", value)
    return value


@overload
def check_scope_id(field: str, value: Any, *, optional: Literal[False] = False) -> str: ...
@overload
def check_scope_id(field: str, value: Any, *, optional: bool) -> str | None: ...
def check_scope_id(field: str, value: Any, *, optional: bool = False) -> str | None:
    """A user / agent / session id: a short printable string (``None`` when optional).

    >>> check_scope_id("user_id", "ada")
    'ada'
    """
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise wrong_type(field, "str", value)
    if (not value or len(value) > MAX_ID_LENGTH or _CONTROL.search(value) or LONE_SURROGATE.search(value)
            or value != value.strip()):
        raise invalid(field, f"must be 1-{MAX_ID_LENGTH} printable characters without surrounding "
                             f"whitespace, got {value!r}")
    return value


#: The keys a fact given as a dict may have (``remember``'s arguments).
FACT_KEYS = frozenset({"text", "importance", "category", "metadata", "ttl_days"})


def check_fact_keys(field: str, value: Mapping[Any, Any]) -> dict[Any, Any]:
    """A copy of a fact given as a dict, refused (naming ``field``) when it has keys besides
    :data:`FACT_KEYS` (listed as strings: keys of several types do not sort together).

    >>> check_fact_keys("facts[0]", {"text": "I keep bees", 1: "x", "colour": "y"})
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: facts[0]: unknown keys ['1', 'colour']
    """
    spec = dict(value)
    unknown = set(spec) - FACT_KEYS
    if unknown:
        raise invalid(field, f"unknown keys {sorted(map(str, unknown))}")
    return spec


def check_ttl_days(field: str, value: Any, *, now: float) -> float | None:
    """``None``, or a positive number of days whose end, counted from ``now``, a date can
    still hold (before the year 10000: a later expiry would break every read of the fact).

    >>> check_ttl_days("ttl_days", 30, now=0.0)
    30
    >>> check_ttl_days("ttl_days", 1e300, now=0.0)
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: ttl_days: must end before the year 10000, got 1e+300 days
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise invalid(field, f"must be a positive number of days, got {value!r}")
    if not value <= (_MAX_TIMESTAMP - now) / 86400:  # compared in days: a huge int never becomes a float
        raise invalid(field, f"must end before the year 10000, got {value!r:.40} days")
    return value


def check_limit(field: str, value: Any, *, minimum: int = 1) -> int:
    """A whole number of at least ``minimum`` and at most 2**63-1 (booleans refused).

    >>> check_limit("limit", 5)
    5
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(field, "int", value)
    if value < minimum:
        raise invalid(field, f"must be at least {minimum}, got {value}")
    if value > MAX_LIMIT:
        raise invalid(field, f"must be at most {MAX_LIMIT}, got {value}")
    return value


@overload
def check_unit(field: str, value: Any, *, optional: Literal[False]) -> float: ...
@overload
def check_unit(field: str, value: Any, *, optional: bool = True) -> float | None: ...
def check_unit(field: str, value: Any, *, optional: bool = True) -> float | None:
    """A number in [0, 1] (``None`` allowed when optional).

    >>> check_unit("importance", 0.5)
    0.5
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(field, "float", value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise invalid(field, f"must be between 0 and 1, got {value}")
    return float(value)


def check_metadata(field: str, value: Any) -> dict[str, Any]:
    """A JSON-serialisable dict with string keys (``None`` gives ``{}``).

    >>> check_metadata("metadata", None)
    {}
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise wrong_type(field, "dict", value)
    data = dict(value)
    for key in data:
        if not isinstance(key, str):
            raise invalid(field, f"keys must be strings, got {key!r}")
    check_json(field, data)
    return data


def check_json(field: str, value: Any) -> None:
    """``value`` can be stored as JSON text: serialisable, no NaN or infinity, valid unicode
    (a lone surrogate in a key or string cannot be written to the database) without NUL
    characters (PostgreSQL cannot read one inside JSON, so a filter on the row would fail).

    >>> check_json("metadata", {"k": "v"})
    >>> check_json("metadata", {"k": float("nan")})
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: metadata: must be JSON-serialisable: Out of range float values are not JSON compliant
    """
    if type(value) is dict and not value:  # no metadata, the usual case: nothing to check
        return
    if json_depth(value) > MAX_JSON_DEPTH:  # else reads of the row could not serialise it again
        raise invalid(field, f"nests more than {MAX_JSON_DEPTH} levels deep")
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise invalid(field, f"must be JSON-serialisable: {exc}") from None
    if LONE_SURROGATE.search(text):
        raise invalid(field, "must be valid unicode text (it holds a lone surrogate)")
    check_no_nul(field, value)


def check_no_nul(field: str, value: Any) -> None:
    """No key or string anywhere in the JSON ``value`` holds a NUL character: one rule for
    metadata and keyed items' values (PostgreSQL cannot store one in text or read one in JSON).

    >>> check_no_nul("value", {"a": ["ok", "x\\x00"]})
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: value: must not contain NUL characters (U+0000)
    """
    if holds_nul(value):
        raise invalid(field, "must not contain NUL characters (U+0000)")


def parse_when(field: str, value: Any) -> float | None:
    """A moment as a POSIX timestamp: a datetime (naive means UTC), an ISO 8601
    string, or a number of seconds since the epoch. ``None`` stays ``None``.

    >>> parse_when("when", 0)
    0.0
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        try:
            stamp = moment.timestamp()
        except (OverflowError, ValueError, OSError):
            raise invalid(field, f"out of range: {value!r}") from None
        return parse_when(field, stamp)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise invalid(field, f"not an ISO 8601 date or time: {value!r}") from None
        return parse_when(field, moment)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):  # (an int is finite; isfinite would overflow)
            raise invalid(field, f"must be finite, got {value}")
        if not _MIN_TIMESTAMP <= value <= _MAX_TIMESTAMP:
            raise invalid(field, f"must be a moment from 0001-01-01 to 9999-12-31T23:59:59Z, got {value}")
        return float(value)
    raise wrong_type(field, "datetime, ISO 8601 str or timestamp", value)


def pydantic_error(field: str, exc: ValidationError) -> MemoryValueError:
    """A :class:`MemoryValueError` naming ``field`` and the first bad sub-field.

    >>> try:
    ...     Message(role="robot")
    ... except ValidationError as exc:
    ...     print(pydantic_error("messages[0]", exc))
    messages[0].role: Input should be 'user', 'assistant', 'system' or 'tool'
    """
    first = exc.errors()[0]
    path = ".".join(str(p) for p in first["loc"])
    name = f"{field}.{path}" if path else field
    return MemoryValueError(f"{name}: {first['msg']}", field=name)


def to_message(field: str, value: Any, *, when: float | None = None) -> Message:
    """A validated :class:`Message` from a Message or a dict (OpenAI-style keys, plus
    ``when`` / ``created_at``); content is required except for assistant tool calls.

    >>> to_message("messages[0]", {"role": "user", "content": "hi"}).content
    'hi'
    """
    if isinstance(value, Message):
        data = value.model_dump(exclude_none=True)
    elif isinstance(value, Mapping):
        data = dict(value)
        if "when" in data:
            data["created_at"] = data.pop("when")
    else:
        raise wrong_type(field, "Message or dict", value)
    for key in ("id", "user_id", "agent_id", "session_id"):
        data.pop(key, None)  # the memory assigns these
    stamp = parse_when(f"{field}.created_at", data.pop("created_at", None))
    if stamp is None:
        stamp = when
    try:
        message = Message.model_validate(data)
    except ValidationError as exc:
        raise pydantic_error(field, exc) from None
    for key in ("content", "name", "tool_call_id"):  # stored as text: no NUL, no lone surrogate
        if getattr(message, key) is not None:
            check_text(f"{field}.{key}", getattr(message, key), allow_empty=True)
    if message.tool_calls is not None:
        check_json(f"{field}.tool_calls", message.tool_calls)
    check_json(f"{field}.metadata", message.metadata)
    if message.content is None and not (message.role == "assistant" and message.tool_calls):
        raise invalid(f"{field}.content", f"required for a {message.role} message")
    if stamp is not None:
        message = message.model_copy(update={"created_at": datetime.fromtimestamp(stamp, tz=UTC)})
    return message


def check_messages(field: str, value: Any) -> list[Message]:
    """A list (any iterable but a str, bytes or dict) of :class:`Message` objects.

    >>> check_messages("messages", [Message(role="user", content="hi")])[0].content
    'hi'
    """
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise wrong_type(field, "list of Message", value)
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, Message):
            raise wrong_type(f"{field}[{i}]", "Message", item)
    return items


def check_tiers(field: str, tiers: Any) -> tuple[str, ...]:
    """Tier names (one, or a list of them) among :data:`~unified_memory.types.TIERS`; ``None`` is all.

    >>> check_tiers("tiers", "long_term")
    ('long_term',)
    """
    if tiers is None:
        return TIERS
    if not isinstance(tiers, str | Sequence | Set):
        raise wrong_type(field, "a tier name or a list of them", tiers)
    chosen = (tiers,) if isinstance(tiers, str) else tuple(tiers)
    unknown = [t for t in chosen if not isinstance(t, str) or t not in TIERS]
    if unknown or not chosen:
        raise invalid(field, f"choose from {list(TIERS)}, got {list(chosen)!r}")
    return chosen


def check_ids(field: str, ids: Any) -> list[str]:
    """A non-empty list of non-empty id strings (``forget``'s ``ids``).

    >>> check_ids("ids", ("fact_1",))
    ['fact_1']
    """
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise wrong_type(field, "a list of ids", ids)
    checked = list(ids)
    if not checked:
        raise invalid(field, "must not be empty (leave ids out to forget everything of the user)")
    for item in checked:
        if not isinstance(item, str) or not item:
            raise invalid(field, f"every id must be a non-empty str, got {item!r}")
    return checked
