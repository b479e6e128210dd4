"""The service's error answers as the library's error classes: a :class:`~unified_memory.remote.wire.Call`
that failed raises what a local :class:`~unified_memory.UnifiedMemory` would (a 404 a
:class:`~unified_memory.errors.NotFoundError`, a 422 about the kind of value a
:class:`~unified_memory.errors.MemoryTypeError`), naming the field by the library's name.

    >>> error = error_from(422, {"error": {"type": "invalid", "field": "facts[0]", "message": "facts[0]: empty"}},
    ...                    "http://127.0.0.1:8080")
    >>> type(error).__name__, error.field, str(error)
    ('MemoryValueError', 'texts_or_facts[0]', 'texts_or_facts[0]: empty')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from unified_memory.errors import (
    AuthenticationError,
    ConflictError,
    MemoryTypeError,
    MemoryValueError,
    NotFoundError,
    PermissionDeniedError,
    StorageError,
    StoreUnavailableError,
    UnifiedMemoryError,
)

__all__ = ["error_from"]

# The service's names of fields that the library calls otherwise.
_RENAMED = {"facts": "texts_or_facts", "object": "obj", "session": "session_id"}
_ROOT = re.compile(r"[.\[]")
# A 422 about the kind of value, not the value: the library's wrong_type or pydantic's type errors.
_TYPE_WORDS = re.compile(r": expected |should be a valid (string|integer|number|boolean|dictionary|list|array)"
                         r"|should be an? (object|list|dict)|Input should be a valid", re.IGNORECASE)


def _renamed(name: str | None, fields: Mapping[str, str]) -> str | None:
    if not name:
        return name
    for old, new in {**_RENAMED, **fields}.items():
        if name == old or (name.startswith(old) and _ROOT.match(name[len(old):])):
            return new + name[len(old):]
    return name


def error_from(status: int, body: Any, url: str, fields: Mapping[str, str] | None = None) -> UnifiedMemoryError:
    """The library's error for the service's answer ``status`` / ``body`` (``{"error": {...}}``)."""
    error = body.get("error") if isinstance(body, Mapping) else None
    error = error if isinstance(error, Mapping) else {}
    given = error.get("field") if isinstance(error.get("field"), str) else None
    message = str(error.get("message") or (body if isinstance(body, str) else "") or f"HTTP {status}")[:2000]
    name = _renamed(given, fields or {})
    if name and given and message.startswith(given):
        message = name + message[len(given):]
    elif name and not message.startswith(name):
        message = f"{name}: {message}"
    if error.get("request_id"):
        message += f" (request {error['request_id']})"
    if status in (401, 429):
        return AuthenticationError(f"api_key: {message} ({url})", field="api_key")
    if status == 403:
        return PermissionDeniedError(message if name else f"user_id: {message}", field=name or "user_id")
    if status == 404:
        return NotFoundError(message, field=name)
    if status == 409:
        return ConflictError(message, field=name)
    if status == 413:
        return MemoryValueError(f"body: {message}", field="body")
    if 400 <= status < 500:
        kind = MemoryTypeError if _TYPE_WORDS.search(message) else MemoryValueError
        return kind(message if name else f"body: {message}", field=name or "body")
    if status == 503:
        return StoreUnavailableError(f"url: the memory service at {url} is unavailable: {message}", field="url")
    return StorageError(f"url: the memory service at {url} failed (HTTP {status}): {message}", field="url")
