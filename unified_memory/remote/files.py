"""Where :class:`~unified_memory.remote.client.RemoteMemory` puts an export and finds an import,
checked as ``UnifiedMemory.export_jsonl`` / ``import_jsonl`` check them (same fields, same errors):
a path is written atomically (a temporary file next to it, then ``os.replace``), a text stream
is written as the export arrives; an import is read whole (the service validates it whole).

    >>> import io
    >>> with destination(io.StringIO()) as write:
    ...     _ = write('{"kind": "header"}\\n')
    >>> source_bytes(io.StringIO("line\\n"))
    b'line\\n'
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from unified_memory.errors import MemoryValueError, StorageError, check_path, invalid, wrong_type

__all__ = ["destination", "source_bytes"]


def _is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike)


@contextlib.contextmanager
def destination(target: Any) -> Iterator[Callable[[str], Any]]:
    """A ``write(text)`` for ``target`` (a path or a text stream); a path is replaced only on success."""
    if not _is_path(target):
        write = getattr(target, "write", None)
        if not callable(write):
            raise wrong_type("destination", "path or text stream", target)
        yield write
        return
    path = Path(check_path("destination", target))
    if not path.parent.is_dir():
        raise invalid("destination", f"directory {str(path.parent)!r} does not exist")
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise StorageError(f"destination: cannot write next to {str(path)[:200]!r}: {exc.strerror or exc}",
                           field="destination") from None
    try:
        with open(handle, "w", encoding="utf-8", newline="\n") as out:
            yield out.write
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise StorageError(f"destination: cannot write {str(path)[:200]!r}: {exc.strerror or exc}",
                           field="destination") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def source_bytes(source: Any) -> bytes:
    """The UTF-8 bytes of ``source`` (a path or a text stream)."""
    if _is_path(source):
        path = Path(check_path("source", source))
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise MemoryValueError(f"source: {str(path)!r} does not exist", field="source") from None
        except OSError as exc:
            raise MemoryValueError(f"source: cannot read {str(path)!r}: {exc}", field="source") from None
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MemoryValueError(f"source: not UTF-8: {exc}", field="source") from None
        return data
    read = getattr(source, "read", None)
    if not callable(read):
        raise wrong_type("source", "path or text stream", source)
    text = read()
    if isinstance(text, bytes):
        try:
            text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MemoryValueError(f"source: not UTF-8: {exc}", field="source") from None
        return text
    if not isinstance(text, str):
        raise wrong_type("source", "a stream of text", text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryValueError(f"source: not valid unicode text: {exc}", field="source") from None
