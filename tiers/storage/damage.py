"""A damaged database file: telling its ``sqlite3`` errors from others, and turning them
into a :class:`~scoring.errors.StorageError` that names the file, also while rows
are fetched after the statement ran (:class:`CheckedRows`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from os import PathLike
from typing import Any

from scoring.errors import StorageError

__all__ = ["is_damage", "refuse_damage", "CheckedRows"]


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether a ``sqlite3`` error says the file is damaged (corrupt, not a database, text
    that is not UTF-8, a header SQLite will only read), rather than a constraint, a lock
    or a bad statement.

    >>> is_damage(sqlite3.DatabaseError("database disk image is malformed"))
    True
    >>> is_damage(sqlite3.IntegrityError("UNIQUE constraint failed: facts.id"))
    False
    """
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_READONLY")) or type(exc) is sqlite3.DatabaseError:
        return True
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("Could not decode to UTF-8" in text
                                                          or "malformed" in text)


def refuse_damage(exc: sqlite3.DatabaseError, path: str | PathLike[str] | None) -> None:
    """Raise a :class:`StorageError` naming the file at ``path`` (``None``: in memory) when
    ``exc`` says the file is damaged (a corrupt page, text that is not UTF-8); else return,
    and the caller re-raises ``exc`` (constraint and lock errors are handled by callers).

    >>> refuse_damage(sqlite3.IntegrityError("UNIQUE constraint failed: facts.id"), None)
    >>> refuse_damage(sqlite3.DatabaseError("file is not a database"), None)
    Traceback (most recent call last):
    ...
    unified_memory.errors.StorageError: path: the in-memory database is damaged or cannot be written: file is not a database
    """
    if is_damage(exc):
        where = "the in-memory database" if path is None else repr(str(path))
        raise StorageError(f"path: {where} is damaged or cannot be written: {exc}", field="path") from exc


class CheckedRows:
    """A cursor whose fetches turn a damaged file's ``sqlite3`` errors into :class:`StorageError`
    (rows are read lazily, so corruption can surface after ``execute`` returned)."""

    __slots__ = ("_cursor", "_refuse_damage")

    def __init__(self, cursor: sqlite3.Cursor, refuse_damage: Callable[[sqlite3.DatabaseError], None]) -> None:
        self._cursor, self._refuse_damage = cursor, refuse_damage

    @property
    def rowcount(self) -> int:
        """Rows the statement changed (see :attr:`sqlite3.Cursor.rowcount`)."""
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        """The rowid of the last row inserted (see :attr:`sqlite3.Cursor.lastrowid`)."""
        return self._cursor.lastrowid

    @property
    def description(self) -> Any:
        """The result's columns (see :attr:`sqlite3.Cursor.description`)."""
        return self._cursor.description

    def fetchone(self) -> Any:
        try:
            return self._cursor.fetchone()
        except sqlite3.DatabaseError as exc:
            self._refuse_damage(exc)
            raise

    def fetchall(self) -> list[Any]:
        try:
            return self._cursor.fetchall()
        except sqlite3.DatabaseError as exc:
            self._refuse_damage(exc)
            raise

    def fetchmany(self, size: int = 1) -> list[Any]:
        try:
            return self._cursor.fetchmany(size)
        except sqlite3.DatabaseError as exc:
            self._refuse_damage(exc)
            raise

    def __iter__(self) -> Iterator[Any]:
        while rows := self.fetchmany(_ITERATION_CHUNK):  # one Python call per chunk, not per row
            yield from rows

    def __next__(self) -> Any:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def __getattr__(self, name: str) -> Any:  # close, arraysize ...
        return getattr(self._cursor, name)


_ITERATION_CHUNK = 1024
