"""Which messages of a chat-log file have already been ingested, per user.

One small table, created on first use (``CREATE TABLE IF NOT EXISTS``, so files
written before it existed need no migration)::

    ingested(user_id TEXT, source_key TEXT, ingested_at REAL, PRIMARY KEY(user_id, source_key))

A ``source_key`` is a content-derived identity of one message of a file (see
:func:`unified_memory.io.ingest.source_key`); it never depends on where the file lives.
Keys are recorded in the same transaction as the messages they stand for, so a
crash leaves both or neither.

    >>> from tiers.storage.backend import Storage
    >>> store = Storage(None)
    >>> keys = IngestedKeys(store)
    >>> with store.atomic():
    ...     keys.record("ada", ["k1", "k2"], now=0.0)
    2
    >>> sorted(keys.existing("ada", ["k1", "k3"])), keys.count("ada"), keys.count("bob")
    (['k1'], 2, 0)
    >>> store.close()
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tiers.storage.backend import Storage
from tiers.storage.pg_schema import INGESTED_PG

__all__ = ["IngestedKeys", "INGESTED_SCHEMA"]

INGESTED_SCHEMA = """
CREATE TABLE IF NOT EXISTS ingested (
    user_id TEXT NOT NULL,
    source_key TEXT NOT NULL,
    ingested_at REAL NOT NULL,
    PRIMARY KEY (user_id, source_key)
)
"""
_CHUNK = 500  # keys per IN (...) query: well under SQLite's parameter limit


class IngestedKeys:
    """The ``ingested`` table of one :class:`~tiers.storage.backend.Storage`.

    >>> from tiers.storage.backend import Storage
    >>> keys = IngestedKeys(Storage(None))
    >>> keys.existing("ada", ["never-seen"])
    set()
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._ready = False

    def ensure(self) -> None:
        """Create the table if this file does not have it yet (idempotent).

        >>> from tiers.storage.backend import Storage
        >>> store = Storage(None)
        >>> IngestedKeys(store).ensure(); "ingested" in store.table_infos()
        True
        """
        if not self._ready:
            with self.storage.atomic():
                self.storage.execute(INGESTED_PG if self.storage.dialect.postgres else INGESTED_SCHEMA)
            self._ready = True

    def existing(self, user_id: str, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` already recorded for ``user_id``.

        >>> from tiers.storage.backend import Storage
        >>> keys = IngestedKeys(Storage(None))
        >>> with keys.storage.atomic():
        ...     _ = keys.record("ada", ["a"], now=1.0)
        >>> keys.existing("ada", ["a", "b"]), keys.existing("bob", ["a"])
        ({'a'}, set())
        """
        self.ensure()
        wanted = list(dict.fromkeys(keys))
        found: set[str] = set()
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start:start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            rows = self.storage.execute(
                f"SELECT source_key FROM ingested WHERE user_id = ? AND source_key IN ({marks})",
                [user_id, *chunk]).fetchall()
            found.update(row[0] for row in rows)
        return found

    def record(self, user_id: str, keys: Sequence[str], *, now: float) -> int:
        """Record ``keys`` for ``user_id`` (call inside :meth:`Storage.atomic`, with the
        messages they stand for). A key that is already there raises
        ``sqlite3.IntegrityError`` — two concurrent ingestions of the same file fail
        the later transaction instead of duplicating messages. Returns how many.

        >>> from tiers.storage.backend import Storage
        >>> keys = IngestedKeys(Storage(None))
        >>> with keys.storage.atomic():
        ...     keys.record("ada", ["a", "b", "c"], now=1.0)
        3
        """
        self.ensure()
        self.storage.executemany("INSERT INTO ingested(user_id, source_key, ingested_at) VALUES (?, ?, ?)",
                                 [(user_id, key, float(now)) for key in keys])
        return len(keys)

    def count(self, user_id: str | None = None) -> int:
        """How many keys are recorded (for one user, or for all).

        >>> from tiers.storage.backend import Storage
        >>> IngestedKeys(Storage(None)).count()
        0
        """
        self.ensure()
        if user_id is None:
            return int(self.storage.execute("SELECT COUNT(*) FROM ingested").fetchone()[0])
        return int(self.storage.execute("SELECT COUNT(*) FROM ingested WHERE user_id = ?",
                                        [user_id]).fetchone()[0])

    def forget(self, user_id: str) -> int:
        """Drop every key of ``user_id`` (for when its messages are deleted, so the same
        file can be ingested again). Returns how many were dropped.

        >>> from tiers.storage.backend import Storage
        >>> keys = IngestedKeys(Storage(None))
        >>> with keys.storage.atomic():
        ...     _ = keys.record("ada", ["a", "b"], now=1.0)
        >>> with keys.storage.atomic():
        ...     keys.forget("ada")
        2
        """
        self.ensure()
        cursor = self.storage.execute("DELETE FROM ingested WHERE user_id = ?", [user_id])
        return int(cursor.rowcount)
