"""Errors over HTTP: every refusal is ``{"error": {"type", "field", "message"}}`` with a 4xx status
mapped from the library's own error classes (5xx only for the server's own failures).

=============================  ======  ==========================================
cause                          status  ``type``
=============================  ======  ==========================================
body is not JSON / not UTF-8   400     ``malformed_json``
path / query not UTF-8         400     ``malformed_path`` / ``malformed_query``
no key, unknown/revoked key    401     ``unauthorized``
key for another user           403     ``forbidden``
unknown id or route            404     ``not_found``
conflicting import row         409     ``conflict``
body over the size limit       413     ``too_large``
wrong field type or value      422     ``invalid`` (library ``MemoryValueError`` /
                                       ``MemoryTypeError`` or the request schema)
too many failed key attempts   429     ``too_many_attempts``
memory file unusable / closed  503     ``unavailable``
=============================  ======  ==========================================
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from unified_memory.errors import (
    ConflictError,
    DependencyError,
    MemoryTypeError,
    MemoryValueError,
    NotFoundError,
    StorageError,
    UnifiedMemoryError,
)

__all__ = ["error_body", "status_of", "field_of_location", "TooLarge"]

log = logging.getLogger("unified_memory.service")


class TooLarge(Exception):  # noqa: N818 - an answer, not a failure
    """The request body is over the configured size."""

    def __init__(self, limit: int, message: str | None = None) -> None:
        super().__init__(message or f"request body over {limit} bytes")
        self.limit = limit


def error_body(type_: str, message: str, field: str | None = None, request_id: str | None = None) -> dict[str, Any]:
    """The JSON body of an error answer."""
    error: dict[str, Any] = {"type": type_, "field": field, "message": message}
    if request_id:
        error["request_id"] = request_id
    return {"error": error}


def status_of(exc: UnifiedMemoryError) -> tuple[int, str]:
    """HTTP status and error type for one of the library's errors."""
    if isinstance(exc, NotFoundError):
        return 404, "not_found"
    if isinstance(exc, ConflictError):
        return 409, "conflict"
    if isinstance(exc, MemoryValueError | MemoryTypeError):
        return 422, "invalid"
    if isinstance(exc, StorageError | DependencyError):
        return 503, "unavailable"
    return 500, "internal"


def field_of_location(location: Sequence[Any]) -> str | None:
    """``("body", "facts", 2, "text")`` -> ``"facts[2].text"`` (the field a schema error is about)."""
    parts = list(location)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]  # where the value was; a body field may itself be called "query"
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif not isinstance(part, str) or _UNION_TAG.match(part):
            continue  # pydantic's union-member tags ("str", "FactIn", "function-after[...]") are not fields
        else:
            text += f".{part}" if text else part
    return text or None


# A union member pydantic names in an error location: a type (str, int, dict[str,any], ...) or a model (FactIn).
_UNION_TAG = re.compile(r"^(str|int|float|bool|none|bytes|list|dict|tuple|set)(\[.*\])?$|^[A-Z]\w*In$|\[|^function-")
