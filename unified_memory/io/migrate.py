"""Move a whole memory from one database to another: a SQLite file to PostgreSQL, and back.

:func:`migrate_database` copies every user's rows (as an all-users export and import do,
so ids, ``seq`` positions, times and metadata are kept exactly), the API keys, the stored
embeddings (no text is embedded again) and the settings kept in ``meta``; then it checks
that the two databases hold the same rows, table by table. The derived indexes are not
copied: the destination builds its own. The destination must hold no memories yet.

    >>> import os, tempfile
    >>> from unified_memory import UnifiedMemory
    >>> folder = tempfile.mkdtemp()
    >>> with UnifiedMemory(os.path.join(folder, "a.db"), user_id="ada", retrieval="lexical") as mem:
    ...     _ = mem.remember("I'm allergic to peanuts")
    >>> report = migrate_database(os.path.join(folder, "a.db"), os.path.join(folder, "b.db"))
    >>> report.rows["facts"], report.users
    (1, ['ada'])
"""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tiers.storage.backend import Storage
from tiers.storage.postgres_backend import displayed
from tiers.storage.table_info import quote_name
from unified_memory.errors import ConflictError, MemoryValueError, StorageError

__all__ = ["MigrationReport", "migrate_database"]

#: ``meta`` keys that describe one database, not the memory (never copied).
_OWN_META = frozenset({"schema_version", "index_journal_pruned_through"})
#: Tables copied row for row besides the export: API keys, stored vectors.
_COPIED = ("api_keys", "embeddings")


@dataclass
class MigrationReport:
    """What :func:`migrate_database` copied: rows per table, the users, and the check made."""

    rows: dict[str, int] = field(default_factory=dict)
    users: list[str] = field(default_factory=list)
    verified: bool = False
    #: Users whose search tables were filled (a destination on the database search path), else 0.
    indexed_users: int = 0


def _export(target: str | os.PathLike[str]) -> list[str]:
    """Every user's rows of ``target`` as export lines (header left out), sorted."""
    from unified_memory.memory import UnifiedMemory

    out = io.StringIO()
    with UnifiedMemory(target, retrieval="lexical") as mem:
        mem.export_jsonl(out, all_users=True)
    return sorted(line for line in out.getvalue().split("\n")[1:] if line)


def _rows(storage: Storage, table: str) -> list[dict[str, Any]]:
    return storage.query(f"SELECT * FROM {quote_name(table)}")


def migrate_database(source: str | os.PathLike[str], destination: str | os.PathLike[str], *,
                     progress: Callable[[int, int], Any] | None = None) -> MigrationReport:
    """Copy the memory at ``source`` (a SQLite file or a ``postgresql://`` URL) to
    ``destination`` (either), which must hold no memories or keys yet; returns what was copied.
    Raises :class:`~unified_memory.errors.ConflictError` for a destination already in use and
    :class:`~unified_memory.errors.StorageError` when the copy does not match its source
    (nothing is left half-copied: the import is one transaction).

    A destination that searches in the database (PostgreSQL with pgvector) then gets its BM25
    tables filled, user by user (``progress(done, users)`` after each); its vectors are filled
    at each user's first dense search, from the copied embedding cache (no text is embedded again)."""
    from unified_memory.memory import UnifiedMemory

    if os.fspath(source) == os.fspath(destination):
        raise ConflictError("destination: the same database as the source", field="destination")
    report = MigrationReport()
    out = io.StringIO()
    with UnifiedMemory(source, retrieval="lexical") as origin:
        origin.export_jsonl(out, all_users=True)
        report.users = origin.users()
    text = out.getvalue()
    lines = sorted(line for line in text.split("\n")[1:] if line)
    with UnifiedMemory(destination, retrieval="lexical") as target:
        if target.users():
            raise ConflictError("destination: already holds memories; migrate into an empty database",
                                field="destination")
        try:
            target.import_jsonl(io.StringIO(text))
        except MemoryValueError as exc:  # a stored value no memory accepts now (a NUL in old metadata)
            reason = str(exc).split(": ", 2)[-1]
            raise MemoryValueError(f"source: {displayed(source)} holds a value that cannot be copied, nothing was "
                                   f"written: {reason}", field="source") from None
    counts = Counter(line.split('"kind":"', 1)[1].split('"', 1)[0] for line in lines)
    report.rows = dict(sorted(counts.items()))
    _copy_tables(source, destination, report)
    if _export(destination) != lines:
        raise StorageError("destination: the copy differs from the source after migrating; "
                           "nothing else was changed in the source", field="destination")
    report.verified = True
    with UnifiedMemory(destination, retrieval="lexical") as target:
        if target.stats().search == "database":
            report.indexed_users = target.reindex(all_users=True, progress=progress)
    return report


def _copy_tables(source: str | os.PathLike[str], destination: str | os.PathLike[str],
                 report: MigrationReport) -> None:
    """Copy the API keys, stored vectors and settings (``meta``) in one transaction."""
    origin, target = Storage(source), Storage(destination)
    try:
        present = set(target.table_infos()) | {"api_keys", "meta"}
        with target.atomic():
            if target.query("SELECT id FROM api_keys LIMIT 1"):
                raise ConflictError("destination: already holds API keys", field="destination")
            for table in _COPIED:
                if table not in present:
                    continue
                rows = _rows(origin, table)
                if rows:
                    columns = list(rows[0])
                    target.executemany(
                        f"INSERT INTO {quote_name(table)} ({', '.join(map(quote_name, columns))}) "
                        f"VALUES ({', '.join('?' * len(columns))})", [[row[c] for c in columns] for row in rows])
                report.rows[table] = len(rows)
            for row in _rows(origin, "meta"):
                if row["key"] not in _OWN_META:
                    target.set_meta(row["key"], row["value"])
    finally:
        origin.close()
        target.close()
