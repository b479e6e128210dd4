"""What every framework adapter checks the same way: that it was given a memory (a
:class:`~unified_memory.UnifiedMemory` or :class:`~unified_memory.RemoteMemory`, by the methods it
calls), and, for adapters that are pydantic models of their framework, the first validation
error as the library's error naming the field.

    >>> check_memory(object(), ("arecall",))
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryTypeError: memory: expected a UnifiedMemory or RemoteMemory (with arecall), got object
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from unified_memory.errors import MemoryTypeError, MemoryValueError, UnifiedMemoryError, wrong_type

__all__ = ["check_memory", "library_error"]


def check_memory(value: Any, needed: Iterable[str], field: str = "memory") -> Any:
    """``value`` when it has every method in ``needed``, else a ``MemoryTypeError`` naming ``field``
    and the methods it lacks."""
    missing = [name for name in needed if not callable(getattr(value, name, None))]
    if missing:
        raise wrong_type(field, "a UnifiedMemory or RemoteMemory (with " + ", ".join(missing) + ")", value)
    return value


def library_error(exc: ValidationError, model: str) -> UnifiedMemoryError:
    """The first error of a pydantic ``ValidationError`` as the library's error: the error a
    validator raised when it is already ours (it names its field), else a ``MemoryValueError``
    naming the field (``model`` when the error has no location)."""
    first = exc.errors()[0]
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, MemoryValueError | MemoryTypeError) and cause.field:
        return cause
    name = ".".join(str(part) for part in first["loc"]) or model
    message = str(first["msg"]).removeprefix("Value error, ").removeprefix(f"{name}: ")
    return MemoryValueError(f"{name}: {message}", field=name)
