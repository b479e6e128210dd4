"""What every command shares: the error type, the memory file to open, and how to print a result.

    >>> import argparse
    >>> args = argparse.Namespace(db="x.db", user=None, retrieval=None, json=False)
    >>> str(db_path(args)), user_of(args)
    ('x.db', 'default')
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiers.storage.postgres_backend import displayed, is_url, redact_url
from unified_memory.cli._format import dump_json

if TYPE_CHECKING:
    from unified_memory.memory import UnifiedMemory

__all__ = ["PROG", "CliError", "DEFAULT_DB", "ENV_DB", "DatabaseURL", "db_path", "user_of", "settings_of", "open_memory", "unknown_user", "emit",
           "say"]

PROG = "unified-memory"
ENV_DB = "UNIFIED_MEMORY_DB"
DEFAULT_DB = "unified_memory.db"


class CliError(Exception):
    """A failure to report as one line on stderr, with exit status ``code`` (1; 2 for usage errors).

    >>> CliError("no such file", code=2).code
    2
    """

    def __init__(self, message: str, *, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def db_path(args: argparse.Namespace) -> Path | DatabaseURL:
    """The memory file: ``--db``, else ``$UNIFIED_MEMORY_DB``, else ``unified_memory.db`` here.
    A PostgreSQL URL is kept as it is (a :class:`DatabaseURL`, not a path).

    >>> str(db_path(argparse.Namespace(db=None))) in (os.environ.get(ENV_DB), DEFAULT_DB)
    True
    >>> db_path(argparse.Namespace(db="postgresql://ada@db/memory")).exists()
    True
    """
    target = getattr(args, "db", None) or os.environ.get(ENV_DB) or DEFAULT_DB
    return DatabaseURL(target) if is_url(target) else Path(target)


class DatabaseURL(str):
    """A ``postgresql://`` URL given for ``--db``: it passes where a path does (``str()`` is the
    URL; it always "exists": the server says otherwise when connecting), and prints without its
    password.

    >>> url = DatabaseURL("postgresql://ada:pw@db/memory")
    >>> url.exists(), f"{url!r}"
    (True, "'postgresql://ada:***@db/memory'")
    """

    def exists(self) -> bool:
        return True

    def __repr__(self) -> str:
        return repr(redact_url(self))


def user_of(args: argparse.Namespace) -> str:
    """The user to act for: ``--user``, else ``default``. An empty ``--user ""`` is an error
    (a script whose variable came out empty must not act for the default user).

    >>> user_of(argparse.Namespace(user="ada")), user_of(argparse.Namespace(user=None))
    ('ada', 'default')
    >>> user_of(argparse.Namespace(user=""))
    Traceback (most recent call last):
    ...
    unified_memory.cli._common.CliError: --user: must not be empty (leave it out to act for the default user)
    """
    user = getattr(args, "user", None)
    if user is None:
        return "default"
    if not user.strip():
        raise CliError("--user: must not be empty (leave it out to act for the default user)", code=2)
    return str(user)


def open_memory(args: argparse.Namespace, *, path: Path | None = None, must_exist: bool = True,
                known_user: bool = False, user_id: str | None = None, **overrides: Any) -> UnifiedMemory:
    """Open the memory file for the command's user, with ``--retrieval`` when given.

    ``must_exist`` refuses a missing file instead of creating an empty one; ``known_user``
    (the reading commands) refuses a user the file holds no memories of (see
    :func:`unknown_user`); ``overrides`` are :class:`~unified_memory.config.MemoryConfig` fields.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     args = argparse.Namespace(db=f"{tmp}/m.db", user="ada", retrieval="lexical", json=False)
    ...     with open_memory(args, must_exist=False) as mem:
    ...         mem.user_id, mem.retrieval
    ('ada', 'lexical')
    """
    from unified_memory.memory import UnifiedMemory

    target = path if path is not None else db_path(args)
    if must_exist and not os.path.exists(target) and not is_url(target):
        raise CliError(f"no memory file at {str(target)!r} (create one with 'unified-memory ingest FILE' "
                       f"or 'unified-memory demo', or choose one with --db)")
    mem = UnifiedMemory(target, user_id=user_id or user_of(args), **{**settings_of(args), **overrides})
    if known_user:
        users = mem.users()
        if mem.user_id not in users:
            mem.close()
            raise CliError(unknown_user(mem.user_id, target, users))
    return mem


def unknown_user(user: str, path: Path | str, users: list[str], *, shown: int = 5) -> str:
    """The error for a user the file holds nothing of: the user, the file, the users it holds.

    >>> unknown_user("ghost", Path("m.db"), ["ada", "bob"])
    "unknown user 'ghost': 'm.db' holds no memories of that user; its users: ada, bob (choose one with --user)"
    >>> unknown_user("ghost", Path("m.db"), [])
    "unknown user 'ghost': 'm.db' holds no memories of any user yet"
    """
    where = displayed(path)
    if not users:
        return f"unknown user {user!r}: {where!r} holds no memories of any user yet"
    listed = ", ".join(users[:shown]) + (f" and {len(users) - shown} more" if len(users) > shown else "")
    return (f"unknown user {user!r}: {where!r} holds no memories of that user; its users: {listed} "
            "(choose one with --user)")


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The :class:`~unified_memory.config.MemoryConfig` fields the global options set
    (``--retrieval``, ``--redact-secrets``, and serve's ``--pool-size``).

    >>> settings_of(argparse.Namespace(retrieval="lexical", redact_secrets=False))
    {'retrieval': 'lexical'}
    """
    settings: dict[str, Any] = {}
    if getattr(args, "retrieval", None):
        settings["retrieval"] = args.retrieval
    if getattr(args, "redact_secrets", False):
        settings["redact_secrets"] = True
    if getattr(args, "pool_size", None):
        settings["pool_size"] = args.pool_size
    return settings


def say(text: str = "") -> None:
    """Print a line of readable output on stdout (the current ``sys.stdout``).

    >>> say("hello")
    hello
    """
    print(text, file=sys.stdout)


def emit(args: argparse.Namespace, data: Any, render: Callable[[], str]) -> None:
    """Print ``data`` as one JSON document with ``--json``, else ``render()`` as text.

    >>> emit(argparse.Namespace(json=True), {"users": 1}, lambda: "reindexed 1 user")
    {
      "users": 1
    }
    >>> emit(argparse.Namespace(json=False), {"users": 1}, lambda: "reindexed 1 user")
    reindexed 1 user
    """
    if getattr(args, "json", False):
        dump_json(data, sys.stdout)
    else:
        say(render())
