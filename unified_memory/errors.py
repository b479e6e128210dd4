"""The exception tree of unified-memory: every error derives from :class:`UnifiedMemoryError`,
and errors caused by the caller's input also from ``ValueError`` or ``TypeError``.

The tree is drawn in :mod:`scoring.errors`, where it is defined (the lowest layer raises it too);
this is its public home, the module users import from and tracebacks name.

    >>> from unified_memory import UnifiedMemory, UnifiedMemoryError
    >>> try:
    ...     UnifiedMemory(importance_threshold=2)
    ... except UnifiedMemoryError as exc:
    ...     print(type(exc).__name__, exc.field)
    ConfigError importance_threshold
"""

from __future__ import annotations

# Importable from here too, though not in __all__: the backend-neutral storage errors and the
# helpers the front door's checks build its errors with.
from scoring.errors import (  # noqa: F401
    AuthenticationError,
    ClosedError,
    ConfigError,
    ConflictError,
    ConstraintError,
    DependencyError,
    LLMError,
    MemoryTypeError,
    MemoryValueError,
    NotFoundError,
    PermissionDeniedError,
    StorageError,
    StorageUnavailableError,
    StoreUnavailableError,
    UnifiedMemoryError,
    check_path,
    invalid,
    wrong_type,
)

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
