"""Where an export goes and where an import comes from: a path or a text stream, checked alike by
``UnifiedMemory.export_jsonl`` / ``import_jsonl`` and their RemoteMemory twins (same fields, same
errors). A path is written atomically (a temporary file next to it, fsynced, then ``os.replace``;
nothing is left on failure) and read whole as UTF-8.

    >>> import io
    >>> with text_destination(io.StringIO()) as out:
    ...     _ = out.write("line\\n")
    >>> read_text_source(io.StringIO("line\\n"))
    ('<stream>', 'line\\n')
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from unified_memory.errors import MemoryValueError, StorageError, check_path, invalid, wrong_type

__all__ = ["is_path", "text_destination", "read_text_source"]


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
