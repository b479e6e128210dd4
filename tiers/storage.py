"""The one SQLite file every tier lives in: schema, versioning, transactions.

SQLite is the source of truth; every index is derived from it and can be rebuilt.
A file that is not ours (or is newer than this code) is refused, never overwritten.

    >>> from tiers.storage import Storage
    >>> store = Storage(None)            # in memory
    >>> with store.atomic() as db:
    ...     _ = db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", ["greeting", "hi"])
    >>> store.get_meta("greeting")
    'hi'
    >>> store.close()
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import sqlite3
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlite_utils

from unified_memory.errors import ClosedError, StorageError, check_path, invalid, wrong_type

__all__ = ["Storage", "Scope", "SCHEMA_VERSION", "new_id", "dumps", "loads", "NO_SCOPE", "metadata_where", "recall_filter"]

SCHEMA_VERSION = 1
_PAGE_CACHE_KIB = 64 * 1024  # per connection; SQLite allocates it only as pages are read
_SQLITE_MAGIC = b"SQLite format 3\x00"
# agent_id / session_id are stored as '' when absent so equality tests work in SQL.
NO_SCOPE = ""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    session_id TEXT NOT NULL DEFAULT '',
    role TEXT NOT NULL,
    content TEXT,
    name TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    images TEXT,
    reasoning_details TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at REAL NOT NULL,
    importance REAL NOT NULL DEFAULT 0,
    promoted INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX IF NOT EXISTS messages_id ON messages(id);
CREATE INDEX IF NOT EXISTS messages_scope ON messages(user_id, agent_id, session_id, seq);
CREATE INDEX IF NOT EXISTS messages_time ON messages(user_id, created_at);
CREATE INDEX IF NOT EXISTS messages_due ON messages(user_id, promoted);

CREATE TABLE IF NOT EXISTS window (
    message_seq INTEGER PRIMARY KEY REFERENCES messages(seq) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    session_id TEXT NOT NULL DEFAULT '',
    tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS window_scope ON window(user_id, agent_id, session_id, message_seq);

CREATE TABLE IF NOT EXISTS facts (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    session_id TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    norm_key TEXT NOT NULL,
    subject TEXT,
    attribute TEXT,
    value TEXT,
    importance REAL NOT NULL,
    category TEXT,
    confidence REAL NOT NULL DEFAULT 1,
    status TEXT NOT NULL DEFAULT 'active',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    last_accessed REAL,
    access_count INTEGER NOT NULL DEFAULT 0,
    reinforcement_count INTEGER NOT NULL DEFAULT 0,
    valid_from REAL,
    valid_to REAL,
    superseded_by TEXT,
    expires_at REAL,
    source TEXT NOT NULL DEFAULT 'remember',
    source_message_ids TEXT NOT NULL DEFAULT '[]',
    metadata TEXT NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX IF NOT EXISTS facts_id ON facts(id);
CREATE INDEX IF NOT EXISTS facts_key ON facts(user_id, norm_key);
CREATE INDEX IF NOT EXISTS facts_status ON facts(user_id, status);
CREATE INDEX IF NOT EXISTS facts_slot ON facts(user_id, subject, attribute) WHERE attribute IS NOT NULL;
CREATE INDEX IF NOT EXISTS facts_expiry ON facts(user_id, expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS entities (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    name TEXT NOT NULL,
    norm_name TEXT NOT NULL,
    type TEXT NOT NULL DEFAULT 'thing',
    attributes TEXT NOT NULL DEFAULT '{}',
    mention_count INTEGER NOT NULL DEFAULT 1,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    description TEXT,
    doc TEXT,
    UNIQUE (user_id, agent_id, norm_name)
);

CREATE UNIQUE INDEX IF NOT EXISTS entities_id ON entities(id);
-- The user's speakers ("relation: self"), read on every graph write, without scanning the user's entities.
CREATE INDEX IF NOT EXISTS entities_self ON entities(user_id) WHERE json_extract(attributes, '$.relation') = 'self';
CREATE TABLE IF NOT EXISTS triples (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    subject_id TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    predicate TEXT NOT NULL,
    object_id TEXT NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    confidence REAL NOT NULL DEFAULT 1,
    mention_count INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    source_message_id TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    valid_to REAL,
    superseded_by TEXT,
    UNIQUE (user_id, agent_id, subject_id, predicate, object_id)
);
CREATE UNIQUE INDEX IF NOT EXISTS triples_id ON triples(id);
CREATE TABLE IF NOT EXISTS embeddings (
    user_id TEXT NOT NULL,
    model TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL
);
-- A rowid table keeps the ~1.6 KB vectors out of the key b-tree: half the file size, 3x faster lookups.
CREATE UNIQUE INDEX IF NOT EXISTS embeddings_key ON embeddings(user_id, model, content_hash);

CREATE INDEX IF NOT EXISTS triples_subject ON triples(subject_id, seq);
CREATE INDEX IF NOT EXISTS triples_object ON triples(object_id, seq);
-- The user's own names (recall reads them on every query) without scanning the user's triples.
CREATE INDEX IF NOT EXISTS triples_predicate ON triples(user_id, predicate, seq);
-- What each write changed in the derived indexes, replayed by other processes (tiers.journal).
CREATE TABLE IF NOT EXISTS index_journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL,
    kind TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key TEXT,
    text TEXT
);
-- Saved lexical indexes of large partitions, valid at a journal position (tiers.snapshots).
CREATE TABLE IF NOT EXISTS index_snapshots (
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    head INTEGER NOT NULL,
    header TEXT NOT NULL,
    arrays BLOB NOT NULL,
    PRIMARY KEY (user_id, kind)
);
-- The running summary of what left each conversation's window (summarize-on-trim).
CREATE TABLE IF NOT EXISTS summaries (
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    session_id TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    messages INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL,
    PRIMARY KEY (user_id, agent_id, session_id)
);
"""


@dataclass(frozen=True, slots=True)
class Scope:
    """Who an item belongs to. ``user_id`` is a hard boundary; ``agent_id`` and
    ``session_id`` are stored as ``''`` when absent (see :data:`NO_SCOPE`).

    >>> Scope("ada").agent_id
    ''
    """

    user_id: str
    agent_id: str = NO_SCOPE
    session_id: str = NO_SCOPE

    def agent_clause(self, column: str = "agent_id") -> tuple[str, list[str]]:
        """SQL (and params) selecting items visible to this scope's agent: its own
        and those shared by all agents; every agent's items when no agent is set."""
        if self.agent_id == NO_SCOPE:
            return "1", []
        return f"({column} = ? OR {column} = '')", [self.agent_id]


_SCHEMA_OBJECTS = frozenset(re.findall(r"CREATE (?:UNIQUE )?(?:TABLE|INDEX) IF NOT EXISTS (\w+)", _SCHEMA))


def new_id(prefix: str) -> str:
    """A fresh unique id with a readable prefix.

    >>> new_id("fact").startswith("fact_")
    True
    """
    return f"{prefix}_{uuid.uuid4().hex}"


def is_damage(exc: sqlite3.Error) -> bool:
    """Whether a ``sqlite3`` error says the file is damaged (corrupt, not a database, text
    that is not UTF-8, a header SQLite will only read), rather than a constraint, a lock
    or a bad statement.

    >>> is_damage(sqlite3.DatabaseError("database disk image is malformed"))
    True
    >>> is_damage(sqlite3.IntegrityError("UNIQUE constraint failed: facts.id"))
    False
    """
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_READONLY")) or type(exc) is sqlite3.DatabaseError:
        return True
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("Could not decode to UTF-8" in text
                                                          or "malformed" in text)


class _Rows:
    """A cursor whose fetches turn a damaged file's ``sqlite3`` errors into :class:`StorageError`
    (rows are read lazily, so corruption can surface after ``execute`` returned)."""

    __slots__ = ("_cursor", "_refuse_damage")

    def __init__(self, cursor: sqlite3.Cursor, refuse_damage: Any) -> None:
        self._cursor, self._refuse_damage = cursor, refuse_damage

    def fetchone(self) -> Any:
        try:
            return self._cursor.fetchone()
        except sqlite3.DatabaseError as exc:
            self._refuse_damage(exc)
            raise

    def fetchall(self) -> list[Any]:
        try:
            return self._cursor.fetchall()
        except sqlite3.DatabaseError as exc:
            self._refuse_damage(exc)
            raise

    def fetchmany(self, size: int = 1) -> list[Any]:
        try:
            return self._cursor.fetchmany(size)
        except sqlite3.DatabaseError as exc:
            self._refuse_damage(exc)
            raise

    def __iter__(self) -> Iterator[Any]:
        while rows := self.fetchmany(_ITERATION_CHUNK):  # one Python call per chunk, not per row
            yield from rows

    def __next__(self) -> Any:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row

    def __getattr__(self, name: str) -> Any:  # rowcount, lastrowid, description, close ...
        return getattr(self._cursor, name)


_ITERATION_CHUNK = 1024


def dumps(value: Any) -> str:
    """JSON-encode a stored value (compact, strict: no NaN).

    >>> dumps({"a": 1})
    '{"a":1}'
    """
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def loads(text: str | None, default: Any = None) -> Any:
    """Decode a stored JSON value; ``None`` gives ``default``.

    >>> loads('[1, 2]'), loads(None, {})
    ([1, 2], {})
    """
    if text is None:
        return default
    return json.loads(text)


def metadata_where(where: dict[str, Any] | None, column: str = "metadata") -> tuple[str, list[Any]]:
    """SQL (and params) keeping rows whose JSON ``column`` has every ``key: value`` of ``where``.

    Values must be JSON scalars (str, int, float, bool or None; None also matches a
    missing key); keys and values are
    passed as parameters, never spliced into the SQL.

    >>> metadata_where({"topic": "food"})
    ("(json_type(metadata, ?) = 'text' AND json_extract(metadata, ?) = ?)", ['$."topic"', '$."topic"', 'food'])
    """
    if not where:
        return "1", []
    if not isinstance(where, dict):
        raise wrong_type("where", "dict", where)
    clauses: list[str] = []
    params: list[Any] = []
    for key, value in where.items():
        if not isinstance(key, str) or not key or '"' in key or "\\" in key:
            raise invalid("where", f"keys must be non-empty strings without quotes or backslashes, got {key!r}")
        path = f'$."{key}"'
        if value is None:
            clauses.append(f"COALESCE(json_type({column}, ?), 'null') = 'null'")
            params.append(path)
        elif isinstance(value, bool):
            clauses.append(f"json_type({column}, ?) = ?")
            params += [path, "true" if value else "false"]
        elif isinstance(value, int | float):
            clauses.append(f"(json_type({column}, ?) IN ('integer', 'real') AND json_extract({column}, ?) = ?)")
            params += [path, path, value]
        elif isinstance(value, str):
            clauses.append(f"(json_type({column}, ?) = 'text' AND json_extract({column}, ?) = ?)")
            params += [path, path, value]
        else:
            raise wrong_type(f"where[{key!r}]", "str, int, float, bool or None", value)
    return " AND ".join(clauses), params


def recall_filter(scope: Scope, *, where: dict[str, Any] | None, since: float | None,
                  time_column: str) -> tuple[str, list[Any]]:
    """SQL (and params) for what a recall may see: the scope's user and agent, the
    metadata equalities of ``where``, and ``time_column >= since`` when given.

    >>> recall_filter(Scope("ada"), where=None, since=5.0, time_column="created_at")
    ('user_id = ? AND 1 AND 1 AND created_at >= ?', ['ada', 5.0])
    """
    agent_sql, agent_params = scope.agent_clause()
    where_sql, where_params = metadata_where(where)
    sql = f"user_id = ? AND {agent_sql} AND {where_sql}"
    params: list[Any] = [scope.user_id, *agent_params, *where_params]
    if since is not None:
        sql += f" AND {time_column} >= ?"
        params.append(since)
    return sql, params


class _WriterQueue:
    """The turns of this process's writers to one file, first come first served.

    SQLite lets a writer wait for the file's lock by polling, with sleeps growing to
    100 ms: a writer that has waited long loses the lock, again and again, to writers
    that just arrived (they poll after 1 ms). With several connections of one process
    on a file kept busy, one of them could wait past its busy timeout although no
    transaction held the lock for that long ("database is locked"). The connections of
    a process therefore take turns here before asking SQLite for the lock; SQLite's
    waiting remains for the other processes (one connection each at a time).

    >>> queue = _WriterQueue()
    >>> queue.acquire(0.1), queue.acquire(0.01)
    (True, False)
    >>> queue.release(); queue.acquire(0.01)
    True
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held = False
        self._waiting: collections.deque[threading.Event] = collections.deque()

    def acquire(self, timeout: float) -> bool:
        """Wait for this writer's turn, at most ``timeout`` seconds; whether it came."""
        with self._mutex:
            if not self._held and not self._waiting:
                self._held = True
                return True
            turn = threading.Event()
            self._waiting.append(turn)
        if turn.wait(timeout):
            return True
        with self._mutex:
            if turn.is_set():  # handed over just as the wait timed out
                return True
            self._waiting.remove(turn)
            return False

    def release(self) -> None:
        """End this writer's turn: hand it to the writer that has waited longest."""
        with self._mutex:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._held = False


_WRITER_QUEUES: dict[str, _WriterQueue] = {}
_WRITER_QUEUES_LOCK = threading.Lock()


def _fresh_writer_queues() -> None:
    """In a forked child: no writer of the parent will ever release its turn here."""
    global _WRITER_QUEUES, _WRITER_QUEUES_LOCK
    _WRITER_QUEUES, _WRITER_QUEUES_LOCK = {}, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_writer_queues)


def _writer_queue(path: Path) -> _WriterQueue:
    """The queue of this process's writers to the file at ``path``."""
    key = os.path.realpath(path)
    with _WRITER_QUEUES_LOCK:
        return _WRITER_QUEUES.setdefault(key, _WriterQueue())


class Storage:
    """One SQLite database (a file, or in memory when ``path`` is None).

    WAL journal, a busy timeout, foreign keys, a schema version in ``meta``.
    All access goes through one connection guarded by a re-entrant lock, so a
    ``Storage`` may be shared by threads. Writes happen inside :meth:`atomic`.
    """

    def __init__(self, path: str | os.PathLike[str] | None, *, busy_timeout_ms: int = 10_000) -> None:
        self.path: Path | None = Path(check_path("path", path)) if path is not None else None
        self.lock = threading.RLock()
        self.origin = uuid.uuid4().hex  # tells this connection's journal entries from others' (tiers.journal)
        self._closed = False
        self._writers = _writer_queue(self.path) if self.path is not None else None
        if self.path is not None:
            try:
                self._refuse_foreign_file(self.path)
                missing = bool(self.path.parent) and not self.path.parent.exists()
            except OSError as exc:  # e.g. a name too long for the file system, no permission
                raise StorageError(f"path: cannot use {str(self.path)[:200]!r}: {exc.strerror or exc}",
                                   field="path") from None
            if missing:
                raise StorageError(f"path: directory {str(self.path.parent)!r} does not exist", field="path")
        target = ":memory:" if self.path is None else str(self.path)
        try:
            conn = sqlite3.connect(target, timeout=busy_timeout_ms / 1000, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StorageError(f"path: cannot open {target!r}: {exc}", field="path") from None
        try:
            self.db = sqlite_utils.Database(conn, execute_plugins=False)
            self._configure(busy_timeout_ms)
            self._check_ownership()  # before the WAL switch: a file that is not ours stays untouched
            self._enable_wal()
            self._migrate()
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StorageError(f"path: {target!r} is not a usable SQLite database: {exc}", field="path") from None
        except BaseException:
            conn.close()
            raise

    @staticmethod
    def _refuse_foreign_file(path: Path) -> None:
        if not path.exists():
            return
        if path.is_dir():
            raise StorageError(f"path: {str(path)!r} is a directory, not a database file", field="path")
        with path.open("rb") as handle:
            head = handle.read(len(_SQLITE_MAGIC))
        if head and head != _SQLITE_MAGIC:
            raise StorageError(f"path: {str(path)!r} is not a SQLite database; refusing to overwrite it", field="path")

    def _configure(self, busy_timeout_ms: int) -> None:
        self._busy_timeout_ms = int(busy_timeout_ms)
        conn = self.db.conn
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Deleted content is overwritten with zeros, so forgotten text cannot be read back from the file.
        conn.execute("PRAGMA secure_delete = ON")
        # Recall reads candidate rows by id, scattered over the file: with SQLite's default
        # 2 MiB page cache a 100k-fact file misses on most of them (about 2x slower).
        conn.execute(f"PRAGMA cache_size = -{_PAGE_CACHE_KIB}")

    def _enable_wal(self) -> None:
        if self.path is not None:
            conn = self.db.conn
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StorageError(f"path: could not enable WAL journaling (got {mode!r})", field="path")
            conn.execute("PRAGMA synchronous = NORMAL")

    def _check_ownership(self) -> None:
        """Refuse (read-only) a database of another application or of a newer version."""
        tables = set(self.db.table_names())
        if tables and "meta" not in tables:
            raise StorageError(
                f"path: {str(self.path)!r} is a SQLite database of another application "
                f"(tables: {', '.join(sorted(tables)[:5])}); refusing to modify it", field="path"
            )
        version = None
        if "meta" in tables:
            row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = self._version_of(row)
            if version is None and len(tables) > 1:
                raise StorageError(f"path: {str(self.path)!r} has no schema version; refusing to modify it", field="path")
        if version is not None and version > SCHEMA_VERSION:
            raise StorageError(
                f"path: {str(self.path)!r} was written by a newer unified-memory "
                f"(schema {version}, this version reads up to {SCHEMA_VERSION}); upgrade the package",
                field="path",
            )

    def _version_of(self, row: Sequence[Any] | None) -> int | None:
        """The stored schema version (``None``: no row); a value that is not a version
        number means the file is not ours or is damaged, and is refused."""
        if row is None:
            return None
        value = row[0]
        if isinstance(value, int) or (isinstance(value, str) and value.isascii() and value.isdigit()):
            return int(value)
        raise StorageError(f"path: {str(self.path)!r} has a schema version {value!r:.40} that is not a number; "
                           "refusing to modify it", field="path")

    def _migrate(self) -> None:
        present = {row[0] for row in self.db.execute("SELECT name FROM sqlite_master").fetchall()}
        row = self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            if "meta" in present else None
        if row is not None and self._version_of(row) == SCHEMA_VERSION and _SCHEMA_OBJECTS <= present:
            return  # up to date: opening writes nothing, so many processes can open at once
        with self.atomic():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self.db.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
            )

    # -- access -------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("this memory is closed")

    @contextlib.contextmanager
    def atomic(self) -> Iterator[sqlite_utils.Database]:
        """A transaction (a savepoint when nested): all of it commits, or none of it.

        The outermost one starts with ``BEGIN IMMEDIATE``: it takes the file's write lock
        first (waiting up to the busy timeout while another process writes), so a write
        that reads before it writes cannot fail half-way because another process
        committed in between. A lock held longer than the timeout is a :class:`StorageError`.
        The connections of this process to the same file first queue for their turn, first
        come first served (:class:`_WriterQueue`), so that none of them starves.
        """
        with self.lock:
            self._check_open()
            conn = self.db.conn
            if conn.in_transaction:
                with self.db.atomic():  # a savepoint
                    yield self.db
                return
            with self._writer_turn():
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    raise self._busy(exc) from exc
                try:
                    yield self.db
                except BaseException as exc:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                        raise self._busy(exc) from exc
                    raise
                try:
                    conn.execute("COMMIT")
                except sqlite3.OperationalError as exc:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise self._busy(exc) from exc

    @contextlib.contextmanager
    def _writer_turn(self) -> Iterator[None]:
        """This connection's turn among the process's writers to the file (see :class:`_WriterQueue`);
        waiting longer than the busy timeout is a :class:`StorageError`."""
        queue = self._writers
        if queue is not None and not queue.acquire(self._busy_timeout_ms / 1000):
            raise self._busy(sqlite3.OperationalError("database is locked"))
        try:
            yield
        finally:
            if queue is not None:
                queue.release()

    def _busy(self, exc: sqlite3.OperationalError) -> StorageError:
        where = "in memory" if self.path is None else str(self.path)
        return StorageError(f"path: {where} stayed locked by another writer beyond the busy timeout "
                            f"({self._busy_timeout_ms} ms), nothing was written: {exc}", field="path")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> sqlite3.Cursor:
        """Run one parameterised statement under the lock (reads, or writes inside :meth:`atomic`)."""
        with self.lock:
            self._check_open()
            try:
                cursor = self.db.execute(sql, params)
            except sqlite3.DatabaseError as exc:
                self._refuse_damage(exc)
                raise
            return _Rows(cursor, self._refuse_damage)  # type: ignore[return-value]

    def query(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[dict[str, Any]]:
        """Run a parameterised SELECT and return its rows as dicts."""
        with self.lock:  # the rows are fetched before another thread uses the connection
            cursor = self.execute(sql, params)
            columns = [c[0] for c in cursor.description]
            return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one parameterised statement for many rows (call inside :meth:`atomic`)."""
        with self.lock:
            self._check_open()
            try:
                self.db.conn.executemany(sql, rows)
            except sqlite3.DatabaseError as exc:
                self._refuse_damage(exc)
                raise

    def _refuse_damage(self, exc: sqlite3.DatabaseError) -> None:
        """Raise a :class:`StorageError` naming the file when ``exc`` says the file is damaged
        (a corrupt page, text that is not UTF-8); else return, and the caller re-raises
        ``exc`` (constraint and lock errors are handled by callers)."""
        if is_damage(exc):
            where = "the in-memory database" if self.path is None else repr(str(self.path))
            raise StorageError(f"path: {where} is damaged or cannot be written: {exc}", field="path") from exc

    def get_meta(self, key: str) -> str | None:
        """Read a value of the ``meta`` table."""
        row = self.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return row[0] if row else None

    def data_version(self) -> int:
        """SQLite's ``PRAGMA data_version``: changes when another connection commits."""
        return int(self.execute("PRAGMA data_version").fetchone()[0])

    def checkpoint(self) -> tuple[int, int, int]:
        """Copy the write-ahead log into the database file and truncate it to zero bytes
        (``PRAGMA wal_checkpoint(TRUNCATE)``), so that old page images, deleted text
        included, no longer sit in the ``-wal`` file. Returns SQLite's ``(busy, log
        frames, checkpointed frames)``; ``busy`` is 1 when another connection's reader
        kept the log from being truncated. In memory: ``(0, 0, 0)``.

        >>> Storage(None).checkpoint()
        (0, 0, 0)
        """
        with self.lock:
            self._check_open()
            if self.path is None:
                return (0, 0, 0)
            if self.db.conn.in_transaction:
                raise StorageError("checkpoint: not possible inside a transaction")
            row = self.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return (int(row[0]), int(row[1]), int(row[2]))

    def vacuum(self) -> None:
        """Rewrite the database file compactly (``VACUUM``), under this process's writer turn.

        ``secure_delete`` zeroes deleted cells and freed pages, but a page the b-tree
        rebuilds keeps stale bytes of moved cells in its unused gap; rewriting the file is
        what leaves no deleted text behind (:func:`~unified_memory.transfer.forget`). In
        memory: nothing.

        >>> Storage(None).vacuum()
        """
        with self.lock:
            self._check_open()
            if self.path is None:
                return
            if self.db.conn.in_transaction:
                raise StorageError("vacuum: not possible inside a transaction")
            with self._writer_turn():
                try:
                    self.db.conn.execute("VACUUM")
                except sqlite3.DatabaseError as exc:
                    if isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc)):
                        raise self._busy(exc) from exc
                    self._refuse_damage(exc)
                    raise

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            if self.path is not None:
                with contextlib.suppress(sqlite3.Error):
                    self.db.conn.execute("PRAGMA optimize")
            self.db.conn.close()
