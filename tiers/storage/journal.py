"""What each write changed in the derived indexes, for the other processes sharing the file.

Every process keeps in-memory indexes derived from the store (BM25 postings, numpy
vectors). When another connection commits, a process could drop them all and
rebuild from the store — seconds per 100,000 documents, paid by every process after
every foreign write. Instead, each write journals its document changes in the same
transaction (``index_journal``: put a key's text, delete a key, or reset a user's
partition), and a process that sees a foreign commit (``PRAGMA data_version``)
replays the entries it has not seen, oldest first.

A bulk write journals one reset instead of thousands of rows (rebuilding is then
cheaper than replaying). The journal is bounded: writers keep the newest
:data:`JOURNAL_KEEP` entries, and a reader that fell behind the pruned part, or
has more than :data:`REPLAY_LIMIT` entries to replay, rebuilds everything, as if
there were no journal. An in-memory store has one connection and journals nothing.

    >>> from tiers.storage.backend import Storage
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.db")
    >>> writer, reader = Storage(path), Storage(path)
    >>> follower = IndexJournal(reader, "facts")
    >>> with writer.atomic():
    ...     IndexJournal(writer, "facts").put("ada", [("f1", "I like tea")])
    >>> [(c.user_id, c.key, c.text) for c in follower.changes()]
    [('ada', 'f1', 'I like tea')]
    >>> follower.changes()
    []
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tiers.storage.backend import Storage

__all__ = ["IndexJournal", "Change", "replay", "JOURNAL_KEEP", "REPLAY_LIMIT", "BULK_RESET"]

#: Entries kept when a writer prunes (at twice as many); a reader further behind rebuilds anyway.
JOURNAL_KEEP = 5_000
#: More entries than this to replay: rebuilding from the store is the cheaper way to catch up.
REPLAY_LIMIT = JOURNAL_KEEP
#: A write that changes more documents of one user than this journals one reset instead.
BULK_RESET = 1_000
_PRUNED_KEY = "index_journal_pruned_through"
_PRUNE_CHECK_EVERY = 256  # entries written by one journal between looks at the journal's length


@dataclass(frozen=True, slots=True)
class Change:
    """One journalled change: ``key`` is ``None`` for a reset (of ``user_id``'s
    partition, or every user's when ``user_id`` is ``None``); ``text`` is ``None`` for
    a deletion."""

    user_id: str | None
    key: str | None
    text: str | None


class IndexJournal:
    """Writes and follows the journal of one kind of document (``facts``, ``messages``,
    ``entities``). A writer calls :meth:`put`, :meth:`delete` and :meth:`reset` inside
    its write transaction; a follower calls :meth:`changes` before it reads its index."""

    def __init__(self, storage: Storage, kind: str) -> None:
        self.storage = storage
        self.kind = kind
        self.enabled = storage.shared
        self._version = storage.data_version()
        self._seen = self._head() if self.enabled else 0
        self._written = 0

    # -- writing (inside the write transaction) -------------------------------------------

    def put(self, user_id: str, items: Sequence[tuple[str, str]]) -> None:
        """Journal new or changed documents of the user.

        >>> from tiers.storage.backend import Storage
        >>> IndexJournal(Storage(None), "facts").put("ada", [("f1", "tea")])  # in memory: nothing to tell
        """
        if self.enabled and items:
            if len(items) > BULK_RESET:
                self.reset(user_id)
            else:
                self._write([(user_id, key, text) for key, text in items])

    def delete(self, user_id: str, keys: Sequence[str]) -> None:
        """Journal removed documents of the user.

        >>> from tiers.storage.backend import Storage
        >>> IndexJournal(Storage(None), "facts").delete("ada", ["f1"])
        """
        if self.enabled and keys:
            if len(keys) > BULK_RESET:
                self.reset(user_id)
            else:
                self._write([(user_id, key, None) for key in keys])

    def reset(self, user_id: str | None) -> None:
        """Journal that the user's partition (every user's, for ``None``) must be
        rebuilt from the store: a bulk change, or a deletion. The user's earlier entries
        and saved index of this kind (:mod:`tiers.indexes.snapshots`) are erased (the reset
        supersedes them), so deleted text does not outlive its rows there.

        >>> from tiers.storage.backend import Storage
        >>> IndexJournal(Storage(None), "facts").reset(None)
        """
        if self.enabled:
            if user_id is not None:
                self.storage.execute("DELETE FROM index_journal WHERE user_id = ? AND kind = ?", [user_id, self.kind])
                self.storage.execute("DELETE FROM index_snapshots WHERE user_id = ? AND kind = ?",
                                     [user_id, self.kind])
            self._write([(user_id or "", None, None)])

    def _write(self, rows: list[tuple[str, str | None, str | None]]) -> None:
        storage = self.storage
        storage.executemany(
            "INSERT INTO index_journal (origin, kind, user_id, key, text) VALUES (?, ?, ?, ?, ?)",
            [(storage.origin, self.kind, user, key, text) for user, key, text in rows])
        storage.journal_written()
        self._written += len(rows)
        if self._written >= _PRUNE_CHECK_EVERY:  # look now and then, not on every write
            self._written = 0
            head, pruned = self._head(), int(storage.get_meta(_PRUNED_KEY) or 0)
            if head - pruned > 2 * JOURNAL_KEEP:
                through = head - JOURNAL_KEEP
                storage.execute("DELETE FROM index_journal WHERE seq <= ?", [through])
                storage.set_meta(_PRUNED_KEY, str(through))

    def head(self) -> int:
        """The position of the newest entry ever written (0 before the first)."""
        return self._head() if self.enabled else 0

    def since(self, user_id: str, position: int) -> list[Change] | None:
        """Every entry of this kind for the user after ``position`` (from every
        connection, this one too), oldest first: what to replay on a snapshot taken
        there. ``None`` when it cannot be replayed: pruned past it, a reset since, or
        too many entries.

        >>> from tiers.storage.backend import Storage
        >>> IndexJournal(Storage(None), "facts").since("ada", 0)
        """
        if not self.enabled or position < int(self.storage.get_meta(_PRUNED_KEY) or 0):
            return None
        rows = self.storage.execute(
            "SELECT user_id, key, text FROM index_journal WHERE seq > ? AND kind = ? AND user_id IN (?, '') "
            "ORDER BY seq LIMIT ?", [position, self.kind, user_id, REPLAY_LIMIT + 1]).fetchall()
        if len(rows) > REPLAY_LIMIT or any(key is None for _, key, _ in rows):
            return None
        return [Change(user, key, text) for user, key, text in rows]

    def _head(self) -> int:
        return self.storage.journal_head()

    # -- following --------------------------------------------------------------------------

    def changes(self) -> list[Change] | None:
        """What other connections journalled for this kind since the last call, oldest
        first; ``None`` when replaying is not possible or not worth it (rebuild all)."""
        if not self.enabled:
            return []
        version = self.storage.data_version()
        if version == self._version:
            return []
        self._version = version
        head = self._head()
        if head <= self._seen:  # the sequence only grows: a smaller head means a replaced file
            replaced, self._seen = head < self._seen, head
            return None if replaced else []
        seen, self._seen = self._seen, head
        pruned = int(self.storage.get_meta(_PRUNED_KEY) or 0)
        if seen < pruned or head - seen > REPLAY_LIMIT:
            return None
        rows = self.storage.execute(
            "SELECT origin, user_id, key, text FROM index_journal WHERE seq > ? AND seq <= ? AND kind = ? "
            "ORDER BY seq", [seen, head, self.kind]).fetchall()
        origin = self.storage.origin
        return [Change(user or None, key, text) for who, user, key, text in rows if who != origin]


def replay(changes: list[Change] | None, held: dict[str, Any], apply: Callable[[str, Any, Change], None]) -> None:
    """Bring per-user in-memory state ``held`` (user id -> state) in step with followed
    ``changes`` (:meth:`IndexJournal.changes`): ``None`` or a reset of every user forgets
    it all, a user's reset forgets theirs (rebuilt from the store on next use), and a put
    or delete of a user whose state is held goes to ``apply(user_id, state, change)``;
    users not held are skipped, as they load from the store anyway.

    >>> held = {"ada": ["f1"], "bo": []}
    >>> replay([Change("ada", "f2", "tea"), Change("bo", None, None)], held,
    ...        lambda user, state, change: state.append(change.key))
    >>> held
    {'ada': ['f1', 'f2']}
    """
    if changes is None:
        held.clear()
        return
    for change in changes:
        if change.user_id is None:
            held.clear()
            continue
        state = held.get(change.user_id)
        if state is None:
            continue
        if change.key is None:
            del held[change.user_id]
        else:
            apply(change.user_id, state, change)
