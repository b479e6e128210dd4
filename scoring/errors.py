"""The exception tree of unified-memory, public as :mod:`unified_memory.errors`.

It lives here, in the lowest package, because every layer raises it: ``scoring`` checks its
arguments, ``tiers`` reports storage faults, the front door re-exports it. The classes keep
``unified_memory.errors`` as their module, the name users catch and tracebacks show.

Every error we raise derives from :class:`UnifiedMemoryError`, so one ``except``
catches them all. Errors caused by the caller's input also derive from the
built-in ``ValueError`` or ``TypeError`` so generic handlers keep working::

    UnifiedMemoryError
    ├── MemoryValueError (ValueError)      bad value from the caller; names the field
    │   ├── ConfigError                    an invalid MemoryConfig field or override
    │   ├── NotFoundError (also KeyError)  an id or name that is not in this memory
    │   └── ConflictError                  the write contradicts what is stored (an imported
    │                                      row whose id exists with other content)
    ├── MemoryTypeError (TypeError)        wrong type from the caller; names the field
    ├── StorageError                       the database file cannot be used (not ours,
    │   │                                  corrupted, written by a newer version)
    │   ├── ClosedError                    the memory was closed
    │   └── StoreUnavailableError          a conversation store's server (or the memory
    │                                      service RemoteMemory talks to) cannot be reached
    ├── AuthenticationError (PermissionError)   the memory service refused the API key (HTTP 401 / 429)
    ├── PermissionDeniedError (PermissionError) the API key does not grant that user (HTTP 403)
    └── DependencyError (ImportError)      an optional extra is not installed

Example::

    >>> try:
    ...     raise invalid("importance_threshold", "must be between 0 and 1, got 2")
    ... except UnifiedMemoryError as exc:
    ...     print(type(exc).__name__, exc.field)
    MemoryValueError importance_threshold

This module is a leaf: it imports nothing else from the project.
"""

from __future__ import annotations

import os

__all__ = [
    "UnifiedMemoryError",
    "MemoryValueError",
    "MemoryTypeError",
    "ConfigError",
    "NotFoundError",
    "ConflictError",
    "StorageError",
    "ClosedError",
    "StoreUnavailableError",
    "AuthenticationError",
    "PermissionDeniedError",
    "DependencyError",
    "LLMError",
]


class UnifiedMemoryError(Exception):
    """Base class of every error raised by unified-memory.

    ``field`` names the argument or configuration field at fault, when one is.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class MemoryValueError(UnifiedMemoryError, ValueError):
    """The caller passed a value we cannot accept (caused by the caller)."""


class MemoryTypeError(UnifiedMemoryError, TypeError):
    """The caller passed a value of the wrong type (caused by the caller)."""


class ConfigError(MemoryValueError):
    """A configuration field or override is invalid (caused by the caller)."""


class NotFoundError(MemoryValueError, KeyError):
    """An id or name that this memory does not hold (caused by the caller)."""

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0]) if self.args else ""


class ConflictError(MemoryValueError):
    """The write contradicts what is stored, e.g. an imported row whose id is already taken
    with other content (caused by the caller; over HTTP a 409)."""


class StorageError(UnifiedMemoryError):
    """The database file cannot be used: not a unified-memory file, corrupted,
    or written by a newer schema version. We refuse it rather than overwrite it."""


class ClosedError(StorageError):
    """An operation was attempted on a closed memory (caused by the caller)."""


class StoreUnavailableError(StorageError):
    """A conversation store's backend (a Redis server, a directory) cannot be reached or used.

    Raised quickly, with the address and the cause, instead of hanging on a dead server.

    >>> err = StoreUnavailableError("store: no Redis server at 127.0.0.1:1", field="store")
    >>> isinstance(err, StorageError), err.field
    (True, 'store')
    """


class StorageUnavailableError(StoreUnavailableError):
    """The memory's database server (PostgreSQL) cannot be reached: down, restarting, or
    the connection was lost. Nothing of the statement that failed was written (its
    transaction rolled back); the memory reconnects by itself on a later call once the
    server is back. Over HTTP: 503.

    >>> err = StorageUnavailableError("path: the database at db.example:5432 cannot be reached", field="path")
    >>> isinstance(err, StoreUnavailableError), isinstance(err, StorageError)
    (True, True)
    """


class ConstraintError(StorageError):
    """A statement broke a constraint of the database (a unique key, a foreign key): the
    backend-neutral form of the driver's integrity error, raised by the PostgreSQL backend
    (:data:`tiers.storage.backend.IntegrityError` catches it and SQLite's alike)."""


class AuthenticationError(UnifiedMemoryError, PermissionError):
    """The memory service refused the API key: missing, unknown or revoked (HTTP 401), or too
    many failed attempts from this address (HTTP 429). ``field`` is ``"api_key"``.

    >>> err = AuthenticationError("api_key: invalid API key", field="api_key")
    >>> isinstance(err, PermissionError), err.field
    (True, 'api_key')
    """


class PermissionDeniedError(UnifiedMemoryError, PermissionError):
    """The API key is valid but does not grant this: another user's memory, or a call that
    needs an admin key (HTTP 403). The service says nothing of the other user.

    >>> err = PermissionDeniedError("user_id: this API key does not grant access to that user", field="user_id")
    >>> isinstance(err, PermissionError), err.field
    (True, 'user_id')
    """


class DependencyError(UnifiedMemoryError, ImportError):
    """An optional dependency is missing; the message says what to install."""


def invalid(field: str, message: str) -> MemoryValueError:
    """Build a :class:`MemoryValueError` whose message starts with the field.

    >>> str(invalid("limit", "must be at least 1, got 0"))
    'limit: must be at least 1, got 0'
    """
    return MemoryValueError(f"{field}: {message}", field=field)


def wrong_type(field: str, expected: str, value: object) -> MemoryTypeError:
    """Build a :class:`MemoryTypeError` naming the field, the expected and the actual type.

    >>> str(wrong_type("text", "str", 3))
    'text: expected str, got int'
    """
    return MemoryTypeError(f"{field}: expected {expected}, got {type(value).__name__}", field=field)


def check_path(field: str, value: object) -> str:
    """A file-system path (str or ``os.PathLike``) the OS can be given: not empty, no NUL byte,
    encodable to the file-system encoding. Returns it as a str.

    >>> check_path("path", "memory.db")
    'memory.db'
    >>> check_path("path", "a\\x00b")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: path: must not contain NUL characters, got 'a\\x00b'
    """
    if not isinstance(value, str | os.PathLike):
        raise wrong_type(field, "str or path", value)
    text = os.fspath(value)
    if not isinstance(text, str):
        raise wrong_type(field, "str or path", text)
    if not text.strip():
        raise invalid(field, "must not be empty")
    if "\x00" in text:
        raise invalid(field, f"must not contain NUL characters, got {text!r:.120}")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        raise invalid(field, f"cannot be encoded as a file name, got {text!r:.120}") from None
    return text


class LLMError(UnifiedMemoryError):
    """A chat model call failed (the endpoint refused, timed out, or answered nothing usable).

    Not caused by the caller's input, so it is neither a ``ValueError`` nor a ``TypeError``;
    the underlying error is chained as ``__cause__``. ``field`` is ``"llm"``.

    >>> err = LLMError("llm: the endpoint answered HTTP 500", field="llm")
    >>> isinstance(err, UnifiedMemoryError), err.field
    (True, 'llm')
    """


for _error in (UnifiedMemoryError, MemoryValueError, MemoryTypeError, ConfigError, NotFoundError, ConflictError,
               StorageError, ClosedError, StoreUnavailableError, StorageUnavailableError, ConstraintError,
               AuthenticationError, PermissionDeniedError, DependencyError, LLMError):
    _error.__module__ = "unified_memory.errors"  # the public name, in tracebacks and reprs
