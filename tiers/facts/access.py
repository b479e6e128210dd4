"""Recall's reinforcement of the facts it returns, written in batches.

Every fact a recall returns counts one more use (``access_count``) and is last
accessed then (``last_accessed``). Written at once, that made every recall a write
transaction: it took the file's write lock away from writers and other processes for
what is usage statistics, not something a user stored. The uses are kept here instead
and written in a transaction of their own once the oldest is ``max_age`` seconds old or
``max_pending`` facts wait; and before anything reads them (listing the facts, export,
import, retention), and at close. (Written with every write transaction instead, they
made the writes longer and two service processes served 6% fewer requests; in batches of
2,000 a batch held the write lock ~35 ms, and the other process's writes waited behind it.)

They are written to ``fact_uses``, a narrow row per fact, not to the fact's own row:
updating that wide row (and finding it by its text id) cost ~9.5 µs a use at 100,000
facts, the narrow row ~4 µs. Readers of the counts add them (:data:`USES_JOIN`,
:data:`ACCESS_COUNT`, :func:`last_accessed`); :meth:`AccessLog.fold` moves them into the
facts' columns for what copies rows as they are (export, import).

A crash loses at most the uses of the last ``max_age`` seconds; never anything stored.

    >>> from tiers.storage.backend import Storage
    >>> storage = Storage(None)
    >>> with storage.atomic():
    ...     _ = storage.execute("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, "
    ...                         "updated_at) VALUES ('f1', 'u1', 'x', 'x', 0.5, 0, 0)")
    >>> uses = AccessLog(storage)
    >>> uses.note(["f1", "f1"], now=5.0)
    >>> storage.query("SELECT access_count FROM facts")
    [{'access_count': 0}]
    >>> uses.flush()
    >>> storage.query(f"SELECT {ACCESS_COUNT} AS uses, {last_accessed(storage.dialect)} AS last FROM facts {USES_JOIN}")
    [{'uses': 2, 'last': 5.0}]
    >>> uses.fold()
    >>> storage.query("SELECT access_count, last_accessed FROM facts")
    [{'access_count': 2, 'last_accessed': 5.0}]
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from scoring.errors import StorageError
from tiers.storage.backend import Storage
from tiers.storage.dialect import Dialect

__all__ = ["AccessLog", "USES_JOIN", "ACCESS_COUNT", "last_accessed"]

#: Joins a query over ``facts`` to the uses not yet in its columns (as ``uses``).
USES_JOIN = "LEFT JOIN fact_uses AS uses ON uses.seq = facts.seq"
#: A fact's uses, all counted (with :data:`USES_JOIN`).
ACCESS_COUNT = "(facts.access_count + COALESCE(uses.access_count, 0))"


def last_accessed(dialect: Dialect) -> str:
    """When a fact was last recalled, or NULL (with :data:`USES_JOIN`).

    >>> from tiers.storage.dialect import SQLITE
    >>> last_accessed(SQLITE)
    'COALESCE(MAX(facts.last_accessed, uses.last_accessed), uses.last_accessed, facts.last_accessed)'
    """
    return (f"COALESCE({dialect.greatest('facts.last_accessed', 'uses.last_accessed')}, "
            "uses.last_accessed, facts.last_accessed)")

_LOG = logging.getLogger(__name__)


class AccessLog:
    """Uses of facts not written yet: ``fact id -> [uses, last accessed]``."""

    def __init__(self, storage: Storage, *, max_age: float = 2.0, max_pending: int = 500,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.storage = storage
        self.max_age = max_age
        self.max_pending = max_pending
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._pending: dict[str, list[float]] = {}
        self._since = 0.0  # monotonic time of the oldest use waiting

    @property
    def pending(self) -> int:
        """How many facts have uses not written yet."""
        return len(self._pending)

    def note(self, ids: Sequence[str], *, now: float) -> None:
        """One more use of each of ``ids`` (a repeated id counts each time), last accessed
        ``now``. Written now when the batch is due; if the file's write lock cannot be had
        (another process holds it past the busy timeout), they wait for the next batch: a
        recall never fails over its statistics."""
        if not ids:
            return
        with self._lock:
            if not self._pending:
                self._since = self._monotonic()
            for fact_id in ids:
                entry = self._pending.get(fact_id)
                if entry is None:
                    self._pending[fact_id] = [1.0, now]
                else:
                    entry[0] += 1
                    entry[1] = now
            due = len(self._pending) >= self.max_pending or self._monotonic() - self._since >= self.max_age
        if due:
            try:
                self.flush()
            except StorageError as exc:  # another process held the write lock past the busy timeout:
                _LOG.warning("the uses of %d recalled facts wait for the next batch: %s", self.pending, exc)

    def flush(self) -> None:
        """Write the uses waiting (in a transaction of their own unless one is open)."""
        if self._pending:
            with self.storage.atomic():
                self.write_pending()

    def write_pending(self) -> None:
        """Write the waiting uses in the open transaction (for a write that reads them, such
        as retention). Should it roll back they are lost (usage statistics; nothing stored is)."""
        with self._lock:
            if not self._pending:
                return
            batch, self._pending = self._pending, {}
        self.storage.executemany(  # a fact deleted meanwhile has no row: its uses go with it
            "INSERT INTO fact_uses (seq, access_count, last_accessed) "
            f"SELECT seq, ?, ? FROM facts {self.storage.dialect.hint('facts_id')} WHERE id = ? "
            "ON CONFLICT (seq) DO UPDATE SET access_count = fact_uses.access_count + excluded.access_count, "
            f"last_accessed = {self.storage.dialect.greatest('fact_uses.last_accessed', 'excluded.last_accessed')}",
            [[int(uses), last, fact_id] for fact_id, (uses, last) in batch.items()])

    def fold(self) -> None:
        """Write the waiting uses and move every use counted into the facts' own columns
        (for what copies rows as they are: export, import), in the open transaction or one
        of its own. Reads only when there is nothing to move."""
        if not self._pending and not self.storage.execute("SELECT 1 FROM fact_uses LIMIT 1").fetchall():
            return
        with self.storage.atomic():
            self.write_pending()
            self.storage.execute(
                "UPDATE facts SET access_count = facts.access_count + uses.access_count, "
                "last_accessed = "
                f"{self.storage.dialect.greatest('COALESCE(facts.last_accessed, uses.last_accessed)', 'uses.last_accessed')} "
                "FROM fact_uses AS uses WHERE facts.seq = uses.seq")
            self.storage.execute("DELETE FROM fact_uses")
