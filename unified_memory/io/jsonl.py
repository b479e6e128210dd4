"""Export and import: a memory's rows as JSON Lines.

The coordinator half of :mod:`tiers.row_export` (which moves rows): here the derived
indexes of the users touched are rebuilt from the store. :class:`~unified_memory.UnifiedMemory`'s
``export_jsonl`` and ``import_jsonl`` hand their :class:`~unified_memory.coordinator.view.MemoryView`
to the functions below.

    >>> import io
    >>> from unified_memory import UnifiedMemory
    >>> buffer = io.StringIO()
    >>> with UnifiedMemory(user_id="ada") as mem:
    ...     mem.export_jsonl(buffer)
    0
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tiers.row_export import FORMAT, FORMAT_VERSION, export_rows, import_rows, parse_export
from tiers.storage import SCHEMA_VERSION
from tiers.user_tables import user_tables
from unified_memory._version import __version__
from unified_memory.coordinator.view import MemoryView
from unified_memory.errors import MemoryValueError, StorageError, check_path, invalid, wrong_type
from unified_memory.validation import check_scope_id

__all__ = ["export_jsonl", "import_jsonl"]

_LOG = logging.getLogger(__name__)


def _is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike)


def export_jsonl(view: MemoryView, destination: Any, *, all_users: bool = False) -> int:
    """Write the view's user's rows (every user's with ``all_users``) to ``destination``,
    a path (written atomically: a temporary file, then ``os.replace``) or a text stream.
    Returns the number of row lines. See :meth:`UnifiedMemory.export_jsonl`.

    >>> import io
    >>> from unified_memory import UnifiedMemory
    >>> out = io.StringIO()
    >>> UnifiedMemory().export_jsonl(out), out.getvalue()[:47]
    (0, '{"kind":"header","format":"unified-memory.expor')
    """
    if not isinstance(all_users, bool):
        raise wrong_type("all_users", "bool", all_users)
    backend = view.backend

    header = {"kind": "header", "format": FORMAT, "version": FORMAT_VERSION, "schema_version": SCHEMA_VERSION,
              "library_version": __version__,
              "exported_at": datetime.fromtimestamp(backend.clock(), tz=UTC).isoformat()}
    users = None if all_users else [view.user_id]
    if not _is_path(destination):
        if not callable(getattr(destination, "write", None)):
            raise wrong_type("destination", "path or text stream", destination)
        return export_rows(backend.storage, destination, users=users, header=header)
    target = Path(check_path("destination", destination))
    if not target.parent.is_dir():
        raise invalid("destination", f"directory {str(target.parent)!r} does not exist")
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:  # a name too long for the file system, no permission
        raise StorageError(f"destination: cannot write next to {str(target)[:200]!r}: {exc.strerror or exc}",
                           field="destination") from None
    try:
        with open(handle, "w", encoding="utf-8", newline="\n") as out:
            count = export_rows(backend.storage, out, users=users, header=header)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except OSError as exc:  # e.g. the destination is a directory
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise StorageError(f"destination: cannot write {str(target)[:200]!r}: {exc.strerror or exc}",
                           field="destination") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return count


def _read_lines(source: Any) -> tuple[str, list[str]]:
    """``(name for errors, lines)`` of a path or a text stream (split on newlines only:
    exported JSON may hold U+2028 unescaped)."""
    if _is_path(source):
        path = Path(check_path("source", source))
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise MemoryValueError(f"source: {str(path)!r} does not exist", field="source") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise MemoryValueError(f"source: cannot read {str(path)!r}: {exc}", field="source") from None
        return str(path), text.split("\n")
    read = getattr(source, "read", None)
    if not callable(read):
        raise wrong_type("source", "path or text stream", source)
    text = read()
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MemoryValueError(f"source: not UTF-8: {exc}", field="source") from None
    if not isinstance(text, str):
        raise wrong_type("source", "a stream of text", text)
    return str(getattr(source, "name", "<stream>")), text.split("\n")


def import_jsonl(view: MemoryView, source: Any, *, user_id: str | None = None) -> int:
    """Validate then import an export into the view's file in one transaction (rows
    already present are skipped); returns the rows imported. See
    :meth:`UnifiedMemory.import_jsonl`.

    >>> import io
    >>> from unified_memory import UnifiedMemory
    >>> UnifiedMemory().import_jsonl(io.StringIO('{"kind": "fact"}'))
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: source: <stream>, line 1: the first line must be the header ...
    """
    if user_id is not None:
        user_id = check_scope_id("user_id", user_id)
    backend = view.backend
    name, lines = _read_lines(source)
    _ensure_lazy_tables(backend.storage, lines)
    parsed = parse_export(lines, source=name, tables=user_tables(backend.storage), user_id=user_id)
    if backend.scrub:  # the redactor runs on every row before anything is written
        parsed.rows = [(number, table, backend.scrub.export_row(table.name, row)) for number, table, row in parsed.rows]
    target = view if user_id is None or user_id == view.user_id else view.rescoped(user_id=user_id)
    indexes = backend.indexes
    touched = set(parsed.users) if user_id is None else {user_id}
    try:
        with target.write():
            result = import_rows(backend.storage, parsed, user_id=user_id)
            for index in indexes:  # other processes sharing the file rebuild them too
                for user in touched:
                    index.journal.reset(user)
    finally:  # the derived indexes of every user the rows belong to are rebuilt from the store
        for index in indexes:
            for user in touched:
                index.invalidate(user)
    return result.rows


def _ensure_lazy_tables(storage: Any, lines: list[str]) -> None:
    """Create the tables other modules create on first use (``ingested``) when the
    export has rows for them and this file does not have them yet."""
    if not any('"ingested"' in line for line in lines):
        return
    present = {t.name for t in user_tables(storage)}
    if "ingested" in present:
        return
    for line in lines:
        if '"ingested"' not in line:
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):  # parse_export reports it, with its line
            continue
        if isinstance(row, dict) and row.get("kind") == "ingested":
            break
    else:
        return
    try:
        from tiers.ingested import IngestedKeys
    except ImportError:  # pragma: no cover - the module is part of the package
        return
    IngestedKeys(storage).ensure()
