"""Export, import and forget: a memory's rows as JSON Lines, and deletion that leaves
nothing readable behind.

The coordinator half of :mod:`tiers.row_export` (which moves rows): here the derived
state is kept in step — lexical indexes and vector partitions invalidated or
dropped, the embedding cache pruned, entity descriptions rewritten, the WAL
checkpointed — and the ``reset`` event reported. :class:`~unified_memory.UnifiedMemory`'s
``export_jsonl``, ``import_jsonl`` and ``forget`` delegate to the functions below.

    >>> import io
    >>> from unified_memory import UnifiedMemory
    >>> buffer = io.StringIO()
    >>> with UnifiedMemory(user_id="ada") as mem:
    ...     _ = mem.remember("I keep bees")
    ...     export_jsonl(mem, buffer)
    1
    >>> with UnifiedMemory(user_id="ada") as fresh:
    ...     import_jsonl(fresh, io.StringIO(buffer.getvalue())), [f.text for f in fresh.facts()]
    (1, ['I keep bees'])
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiers.deletion import delete_items, delete_user_rows, find_items, prune_embeddings
from tiers.row_export import FORMAT, FORMAT_VERSION, export_rows, import_rows, parse_export
from tiers.storage import SCHEMA_VERSION
from tiers.user_tables import user_tables
from unified_memory.errors import MemoryValueError, StorageError, check_path, invalid, wrong_type
from unified_memory.types import utc_from_timestamp
from unified_memory.validation import check_scope_id

if TYPE_CHECKING:
    from unified_memory.memory import UnifiedMemory

__all__ = ["export_jsonl", "import_jsonl", "forget"]

_LOG = logging.getLogger(__name__)


def _is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike)


def export_jsonl(mem: UnifiedMemory, destination: Any, *, all_users: bool = False) -> int:
    """Write ``mem``'s user's rows (every user's with ``all_users``) to ``destination``,
    a path (written atomically: a temporary file, then ``os.replace``) or a text stream.
    Returns the number of row lines. See :meth:`UnifiedMemory.export_jsonl`.

    >>> import io
    >>> from unified_memory import UnifiedMemory
    >>> out = io.StringIO()
    >>> export_jsonl(UnifiedMemory(), out), out.getvalue()[:47]
    (0, '{"kind":"header","format":"unified-memory.expor')
    """
    if not isinstance(all_users, bool):
        raise wrong_type("all_users", "bool", all_users)
    backend = mem._backend
    from unified_memory import __version__

    header = {"kind": "header", "format": FORMAT, "version": FORMAT_VERSION, "schema_version": SCHEMA_VERSION,
              "library_version": __version__,
              "exported_at": utc_from_timestamp(backend.clock()).isoformat()}
    users = None if all_users else [mem.user_id]
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


def import_jsonl(mem: UnifiedMemory, source: Any, *, user_id: str | None = None) -> int:
    """Validate then import an export into ``mem``'s file in one transaction (rows
    already present are skipped); returns the rows imported. See
    :meth:`UnifiedMemory.import_jsonl`.

    >>> import io
    >>> from unified_memory import UnifiedMemory
    >>> import_jsonl(UnifiedMemory(), io.StringIO('{"kind": "fact"}'))
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: source: <stream>, line 1: the first line must be the header ...
    """
    if user_id is not None:
        user_id = check_scope_id("user_id", user_id)
    backend = mem._backend
    name, lines = _read_lines(source)
    _ensure_lazy_tables(backend.storage, lines)
    parsed = parse_export(lines, source=name, tables=user_tables(backend.storage), user_id=user_id)
    if backend.scrub:  # the redactor runs on every row before anything is written
        parsed.rows = [(number, table, backend.scrub.export_row(table.name, row)) for number, table, row in parsed.rows]
    view = mem if user_id is None or user_id == mem.user_id else mem.scoped(user_id=user_id)
    indexes = (backend.log.index, backend.facts.index, backend.graph.index)
    touched = set(parsed.users) if user_id is None else {user_id}
    try:
        with view._write():
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


def _check_ids(ids: Any) -> list[str]:
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise wrong_type("ids", "a list of ids", ids)
    checked = list(ids)
    if not checked:
        raise invalid("ids", "must not be empty (leave ids out to forget everything of the user)")
    for item in checked:
        if not isinstance(item, str) or not item:
            raise invalid("ids", f"every id must be a non-empty str, got {item!r}")
    return checked


def _live_texts(mem: UnifiedMemory, user_id: str) -> Iterable[str]:
    """Every text the user's vectors are made of now (what the embedding cache must keep)."""
    backend = mem._backend
    for index in (backend.log.index, backend.facts.index, backend.graph.index):
        for _, document in index.loader(user_id):
            yield from (index.parts(document) if index.parts is not None else [document])


def forget(mem: UnifiedMemory, *, user_id: str | None = None, ids: Sequence[str] | None = None
           ) -> dict[str, int]:
    """Delete a user's data (everything, or ``ids`` and what derives from them) and make
    it unreadable from the files; returns the rows deleted per table. See
    :meth:`UnifiedMemory.forget`.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.remember("I keep bees")
    ...     forget(mem)["facts"], mem.facts()
    (1, [])
    """
    target = check_scope_id("user_id", user_id) if user_id is not None else mem.user_id
    checked = _check_ids(ids) if ids is not None else None
    view = mem if target == mem.user_id else mem.scoped(user_id=target)
    backend = mem._backend
    storage = backend.storage
    indexes = (backend.log.index, backend.facts.index, backend.graph.index)
    with view._write():
        if checked is None:
            counts = delete_user_rows(storage, target)  # the user's journal entries too
            for index in indexes:  # other processes rebuild all (no entry may name the forgotten user)
                index.journal.reset(None)
                index.invalidate(target)  # here, only the forgotten user's indexes are stale
            if backend.dense is not None:
                for partitions in backend.dense.partitions.values():
                    partitions.drop(target)  # the numpy partition, or the chroma collection
                backend.dense.cache.clear_queries()  # the user's recent queries, kept in memory
        else:
            counts = _forget_items(mem, target, checked)
        view._event("reset", "completed", **counts)
    storage.vacuum()  # rewrite the file: no moved copy of a deleted row survives in a page's unused gap
    busy = storage.checkpoint()[0]
    if busy:
        _LOG.warning("forget: another connection is reading %s; its write-ahead log is truncated at its next "
                     "checkpoint", storage.path)
    return counts


def _forget_items(mem: UnifiedMemory, user_id: str, ids: list[str]) -> dict[str, int]:
    """Delete these items of the user and what derives from them (inside a write)."""
    backend = mem._backend
    storage = backend.storage
    found = find_items(storage, user_id, ids)  # NotFoundError before anything is deleted
    deleted = delete_items(storage, user_id, found)
    counts = {table.name: len(deleted.get(table.name, [])) for table in user_tables(storage)}
    # A message that had left its window may be in its conversation's running summary.
    in_window = {row["message_seq"] for row in deleted.get("window", [])}
    summarised = sorted({(row["agent_id"], row["session_id"]) for row in deleted.get("messages", [])
                         if row["seq"] not in in_window})
    for agent_id, session_id in summarised:
        counts["summaries"] = counts.get("summaries", 0) + storage.execute(
            "DELETE FROM summaries WHERE user_id = ? AND agent_id = ? AND session_id = ?",
            [user_id, agent_id, session_id]).rowcount
    # Entities that lost a relation get their stored description and document rewritten.
    gone = {row["id"] for row in deleted.get("entities", [])}
    endpoints = {row[side] for row in deleted.get("triples", []) for side in ("subject_id", "object_id")} - gone
    if endpoints:
        backend.graph._refresh(user_id, endpoints)
    backend.facts.index.remove(user_id, [row["id"] for row in deleted.get("facts", [])])
    backend.graph.index.remove(user_id, sorted(gone))
    backend.log.index.remove(user_id, [row["id"] for row in deleted.get("messages", [])])
    if deleted.get("messages"):  # the neighbouring turns' documents held the removed text
        backend.log.index.invalidate(user_id)
    # The user's journal entries may hold the removed text: erased, and the other
    # processes sharing the file rebuild the user's indexes instead (tiers.journal).
    for index in (backend.facts.index, backend.graph.index, backend.log.index):
        index.journal.reset(user_id)
    if storage.execute("SELECT 1 FROM embeddings WHERE user_id = ? LIMIT 1", [user_id]).fetchone():
        counts["embeddings"] = counts.get("embeddings", 0) + prune_embeddings(
            storage, user_id, _live_texts(mem, user_id))
    return counts
