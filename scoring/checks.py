"""Argument checks shared by :mod:`scoring` and :mod:`tiers`: every error names the field.

Pure: imports only the :mod:`scoring.errors` leaf, so :mod:`tiers` can use it too.

    >>> check_int("dim", 64, minimum=2)
    64
    >>> check_str_list("ids", ("a", "b"))
    ['a', 'b']
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scoring.errors import invalid, wrong_type

__all__ = ["check_int", "check_str_list"]


def check_int(field: str, value: Any, *, minimum: int) -> int:
    """A whole number of at least ``minimum`` (booleans refused).

    Raises :class:`~scoring.errors.MemoryTypeError` for a non-int and
    :class:`~scoring.errors.MemoryValueError` below ``minimum``.

    >>> check_int("batch_size", 32, minimum=1)
    32
    >>> check_int("batch_size", 0, minimum=1)
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: batch_size: must be at least 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise wrong_type(field, "int", value)
    if value < minimum:
        raise invalid(field, f"must be at least {minimum}, got {value}")
    return value


def check_str_list(field: str, value: Iterable[str]) -> list[str]:
    """A list copy of a sequence of str (a lone ``str`` or ``bytes`` is refused).

    Raises :class:`~scoring.errors.MemoryTypeError`, naming ``field`` for
    the whole and ``field[]`` for a bad item.

    >>> check_str_list("texts", iter(["a"]))
    ['a']
    >>> check_str_list("texts", ["a", 3])
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryTypeError: texts[]: expected str, got int
    """
    if isinstance(value, str | bytes):
        raise wrong_type(field, "a sequence of str", value)
    items = list(value)
    for item in items:
        if not isinstance(item, str):
            raise wrong_type(f"{field}[]", "str", item)
    return items
