"""Validation shared by every conversation store: ids, state, TTLs, the clock.

A state is a JSON object; a plain list of messages becomes ``{"messages": [...],
"summary": None}``. Stores keep the canonical JSON text and parse it afresh on every
load, so callers never share (and cannot mutate) what is stored.

    >>> encode_state([{"role": "user", "content": "hi"}])
    '{"messages": [{"role": "user", "content": "hi"}], "summary": null}'
    >>> check_key("session_id", "")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: session_id: must not be empty
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from scoring.errors import StorageError, invalid, wrong_type

__all__ = ["MAX_KEY_LENGTH", "check_key", "check_ttl", "check_clock", "encode_state", "decode_state", "expires_at"]

MAX_KEY_LENGTH = 512


def check_table(table: object, longest: int) -> str:
    """Validate a store's ``table``: a plain SQL identifier of at most ``longest`` characters.

    >>> check_table("conversation_sessions", 63)
    'conversation_sessions'
    """
    if not isinstance(table, str):
        raise wrong_type("table", "str", table)
    if not re.fullmatch(rf"[A-Za-z_][A-Za-z0-9_]{{0,{longest - 1}}}", table):
        raise invalid("table", f"must be a SQL identifier ([A-Za-z_][A-Za-z0-9_]*, up to {longest} characters), "
                               f"got {table!r}")
    return table


def check_key(field: str, value: object) -> str:
    """Validate a ``session_id`` or ``namespace``: a non-empty str of at most 512 characters.

    >>> check_key("namespace", "team/ada")
    'team/ada'
    """
    if not isinstance(value, str):
        raise wrong_type(field, "str", value)
    if not value:
        raise invalid(field, "must not be empty")
    if len(value) > MAX_KEY_LENGTH:
        raise invalid(field, f"must be at most {MAX_KEY_LENGTH} characters, got {len(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid(field, "must be valid unicode text (it holds a lone surrogate)") from None
    return value


def check_ttl(field: str, value: object) -> float | None:
    """Validate a TTL in seconds: ``None`` (never expires) or a finite number > 0.

    >>> check_ttl("ttl", 30), check_ttl("ttl", None)
    (30.0, None)
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise wrong_type(field, "a number of seconds or None", value)
    ttl = float(value)
    if not math.isfinite(ttl) or ttl <= 0:
        raise invalid(field, f"must be a finite number of seconds > 0, got {value!r}")
    return ttl


def check_clock(clock: object) -> Callable[[], float]:
    """Validate the injected clock: a callable returning seconds since the epoch.

    >>> check_clock(lambda: 0.0)()
    0.0
    """
    if not callable(clock):
        raise wrong_type("clock", "a callable returning seconds", clock)
    return clock


def expires_at(now: float, ttl: float | None) -> float | None:
    """The expiry instant of an entry saved at ``now`` (``None``: never).

    >>> expires_at(100.0, 5.0), expires_at(100.0, None)
    (105.0, None)
    """
    return None if ttl is None else now + ttl


def _plain(value: Any, where: str) -> Any:
    """A copy of ``value`` made of dict/list/str/int/float/bool/None only, or an error."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise invalid("state", f"{where} is {value!r}, which JSON cannot hold")
        return value
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise invalid("state", f"{where} has a key of type {type(key).__name__}; JSON keys are str")
            out[key] = _plain(item, f"{where}[{key!r}]")
        return out
    if isinstance(value, list | tuple):
        return [_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise invalid("state", f"{where} is a {type(value).__name__}, which is not JSON")


def encode_state(state: object) -> str:
    """Normalise a state and return its canonical JSON text (``state`` errors otherwise).

    >>> encode_state({"messages": [], "summary": "so far", "n": 1.5})
    '{"messages": [], "summary": "so far", "n": 1.5}'
    >>> encode_state({"x": float("nan")})
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: state: state['x'] is nan, which JSON cannot hold
    """
    if isinstance(state, list | tuple):
        state = {"messages": list(state), "summary": None}
    if not isinstance(state, Mapping):
        raise wrong_type("state", "a dict (a JSON object) or a list of messages", state)
    try:
        plain = _plain(state, "state")
    except RecursionError:
        raise invalid("state", "is nested too deeply (or refers to itself)") from None
    try:
        return json.dumps(plain, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:  # pragma: no cover - _plain checked it all
        raise invalid("state", f"is not JSON-serialisable: {exc}") from exc


def decode_state(text: str | bytes, where: str) -> dict[str, Any]:
    """Parse stored JSON text back into a fresh dict; ``where`` names the source in errors.

    >>> decode_state('{"summary": null}', "test")
    {'summary': None}
    """
    try:
        state = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise StorageError(f"store: {where} holds invalid JSON: {exc}", field="store") from exc
    if not isinstance(state, dict):
        raise StorageError(f"store: {where} does not hold a JSON object", field="store")
    return state
