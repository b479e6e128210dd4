"""Export and import: a memory's rows as JSON Lines.

The coordinator half of :mod:`tiers.maintenance.row_export` (which moves rows): here the derived
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

import logging
from datetime import UTC, datetime
from typing import Any

from tiers.graph.upkeep import refresh_user
from tiers.maintenance.row_export import FORMAT, FORMAT_VERSION, export_rows
from tiers.maintenance.row_import import import_rows
from tiers.maintenance.row_parsing import parse_export
from tiers.storage.backend import SCHEMA_VERSION
from tiers.storage.user_tables import TableInfo, user_tables
from unified_memory._version import __version__
from unified_memory.coordinator.view import MemoryView
from unified_memory.errors import wrong_type
from unified_memory.io.text_files import text_destination, text_lines
from unified_memory.validation import check_scope_id

__all__ = ["export_jsonl", "import_jsonl"]

_LOG = logging.getLogger(__name__)


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
    backend.facts.uses.fold()  # the rows carry the uses recall reinforced
    with text_destination(destination) as out:
        return export_rows(backend.storage, out, users=users, header=header)


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
    with text_lines(source) as (name, lines):  # read a line at a time: the file is never held whole
        parsed = parse_export(lines, source=name, tables=user_tables(backend.storage), user_id=user_id,
                              create=lambda kind: _create_lazy_table(backend.storage, kind))
    if backend.scrub:  # the redactor runs on every row before anything is written
        parsed.rows = [(number, table, backend.scrub.export_row(table.name, row)) for number, table, row in parsed.rows]
    target = view if user_id is None or user_id == view.user_id else view.rescoped(user_id=user_id)
    indexes = backend.indexes
    touched = set(parsed.users) if user_id is None else {user_id}
    try:
        with target.write():
            backend.facts.uses.fold()  # rows already there are compared with the file's, uses included
            result = import_rows(backend.storage, parsed, user_id=user_id)
            if any(table.name in ("entities", "triples") for _, table, _ in parsed.rows):
                for user in touched:  # the cards the rows brought read relations as their version named them
                    refresh_user(backend.graph, user)
            for index in indexes:  # other processes sharing the file rebuild them too
                for user in touched:
                    index.journal.reset(user)
    finally:  # the derived indexes of every user the rows belong to are rebuilt from the store
        for index in indexes:
            for user in touched:
                index.invalidate(user)
    return result.rows


def _create_lazy_table(storage: Any, kind: str) -> TableInfo | None:
    """Create a table another module creates on first use (``ingested``) when an export has rows
    for it and this file does not have it yet; returns it (None for any other kind)."""
    if kind != "ingested":
        return None
    from tiers.maintenance.ingested import IngestedKeys

    IngestedKeys(storage).ensure()
    return next((t for t in user_tables(storage) if t.name == kind), None)
