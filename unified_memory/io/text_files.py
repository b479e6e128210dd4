"""Where an export goes and where an import comes from: a path or a text stream, checked alike by
``UnifiedMemory.export_jsonl`` / ``import_jsonl`` and their RemoteMemory twins (same fields, same
errors). A path is written atomically (a temporary file next to it, fsynced, then ``os.replace``;
nothing is left on failure) and read as UTF-8 (whole, or a chunk at a time by :func:`text_lines`).

    >>> import io
    >>> with text_destination(io.StringIO()) as out:
    ...     _ = out.write("line\\n")
    >>> read_text_source(io.StringIO("line\\n"))
    ('<stream>', 'line\\n')
"""

from __future__ import annotations

import codecs
import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from unified_memory.errors import MemoryValueError, StorageError, check_path, invalid, wrong_type

__all__ = ["is_path", "text_destination", "read_text_source", "text_lines"]

_CHUNK = 1 << 16  # characters read at a time by text_lines


def is_path(value: Any) -> bool:
    """Whether ``value`` names a file (str or ``os.PathLike``) rather than being a stream."""
    return isinstance(value, str | os.PathLike)


@contextlib.contextmanager
def text_destination(target: Any, field: str = "destination") -> Iterator[Any]:
    """A text stream to write to: ``target`` itself when it is a stream, else a temporary file that
    replaces the path ``target`` only when the block ends without an error."""
    if not is_path(target):
        if not callable(getattr(target, "write", None)):
            raise wrong_type(field, "path or text stream", target)
        yield target
        return
    path = Path(check_path(field, target))
    if not path.parent.is_dir():
        raise invalid(field, f"directory {str(path.parent)!r} does not exist")
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:  # a name too long for the file system, no permission
        raise StorageError(f"{field}: cannot write next to {str(path)[:200]!r}: {exc.strerror or exc}",
                           field=field) from None
    try:
        with open(handle, "w", encoding="utf-8", newline="\n") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as exc:  # e.g. the destination is a directory
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise StorageError(f"{field}: cannot write {str(path)[:200]!r}: {exc.strerror or exc}",
                           field=field) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_text_source(source: Any, field: str = "source") -> tuple[str, str]:
    """``(name for errors, text)`` of a path or a text stream (bytes from a stream must be UTF-8)."""
    if is_path(source):
        path = Path(check_path(field, source))
        try:
            return str(path), path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MemoryValueError(f"{field}: {str(path)!r} does not exist", field=field) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise MemoryValueError(f"{field}: cannot read {str(path)!r}: {exc}", field=field) from None
    read = getattr(source, "read", None)
    if not callable(read):
        raise wrong_type(field, "path or text stream", source)
    text = read()
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MemoryValueError(f"{field}: not UTF-8: {exc}", field=field) from None
    if not isinstance(text, str):
        raise wrong_type(field, "a stream of text", text)
    return str(getattr(source, "name", "<stream>")), text


@contextlib.contextmanager
def text_lines(source: Any, field: str = "source") -> Iterator[tuple[str, Iterator[str]]]:
    """``(name for errors, lines)`` of a path or a stream, read a chunk at a time (never whole) and
    split on ``\\n`` only (exported JSON may hold U+2028 raw); bytes must be UTF-8. The path's
    file is closed when the block ends.

    >>> import io
    >>> with text_lines(io.StringIO("a\\nb\\u2028c\\n")) as (name, lines):
    ...     name, list(lines)
    ('<stream>', ['a', 'b\\u2028c', ''])
    """
    if is_path(source):
        path = Path(check_path(field, source))
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            raise MemoryValueError(f"{field}: {str(path)!r} does not exist", field=field) from None
        except OSError as exc:
            raise MemoryValueError(f"{field}: cannot read {str(path)!r}: {exc}", field=field) from None
        with handle:
            yield str(path), _split(handle.read, field, str(path))
        return
    read = getattr(source, "read", None)
    if not callable(read):
        raise wrong_type(field, "path or text stream", source)
    name = getattr(source, "name", None)  # (a temporary file's is a number, a spool's None)
    yield name if isinstance(name, str) else "<stream>", _split(read, field, None)


def _split(read: Callable[[int], Any], field: str, path: str | None) -> Iterator[str]:
    """The lines of what successive ``read(n)`` calls return (text, or bytes decoded as UTF-8)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []  # the line being read (a list: a long line is joined once, not re-copied per chunk)
    while True:
        try:
            chunk = read(_CHUNK)
        except OSError as exc:
            raise MemoryValueError(f"{field}: cannot read {path or '<stream>'!r}: {exc}", field=field) from None
        done = not chunk
        if isinstance(chunk, bytes | bytearray):
            try:
                chunk = decoder.decode(bytes(chunk), final=done)
            except UnicodeDecodeError as exc:
                where = f"cannot read {path!r}: " if path else "not UTF-8: "
                raise MemoryValueError(f"{field}: {where}{exc}", field=field) from None
        elif not isinstance(chunk, str):
            raise wrong_type(field, "a stream of text", chunk)
        if done:
            yield "".join(parts)
            return
        if "\n" not in chunk:
            parts.append(chunk)
            continue
        first, *rest = chunk.split("\n")
        yield "".join([*parts, first])
        yield from rest[:-1]
        parts = [rest[-1]]
