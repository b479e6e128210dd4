"""The tables of the one SQLite file, their version, and which files are ours.

:func:`refuse_foreign_file` and :func:`check_ownership` refuse, without writing, a file
that is not SQLite, a database of another application or of a newer schema;
:func:`migrate` creates what is missing, brings the rows of an older schema up to date
(:data:`MIGRATIONS`) and records :data:`SCHEMA_VERSION`. :func:`upgrade_row` does the
same for one row of an older export.

Versions: 1, the first; 2, a fact pushed out by ``long_term_limit`` is ``archived``
(kept, listed and recalled) where version 1 marked it ``evicted`` and unindexed it;
3, facts are bi-temporal: besides when they were true (``valid_from``, ``valid_to``)
they keep when the memory stored them (``recorded_at``) and retired them
(``superseded_at``); 4, a keyed item may carry the vectors of its indexed fields
(``keyed_items.vectors``, :mod:`tiers.items.vectors`); 5, a relation says whether it is
single-valued (``triples.single``) instead of its predicate starting ``my_``: the speaker's
slots lose the prefix (``my_car`` is ``car``, single), a relation stored under both names
merged into one (:data:`MERGE_SLOT_PREDICATES`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import sqlite_utils

from scoring.errors import StorageError

__all__ = ["SCHEMA_VERSION", "SCHEMA", "TRIGGERS", "SCHEMA_OBJECTS", "MIGRATIONS", "MERGE_SLOT_PREDICATES",
           "refuse_foreign_file", "check_ownership", "stored_version", "migrate", "upgrade_row", "merge_slot_rows"]

SCHEMA_VERSION = 5
SQLITE_MAGIC = b"SQLite format 3\x00"

SCHEMA = """
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
-- the system messages, tool calls and tool results of each conversation (a window trim asks whether it
-- holds any: almost never, so this index is nearly empty)
CREATE INDEX IF NOT EXISTS messages_special ON messages(user_id, agent_id, session_id, seq)
    WHERE role IN ('system', 'tool') OR tool_calls IS NOT NULL;

CREATE TABLE IF NOT EXISTS "window" (
    message_seq INTEGER PRIMARY KEY REFERENCES messages(seq) ON DELETE CASCADE,
    user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL DEFAULT '',
    session_id TEXT NOT NULL DEFAULT '',
    tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS window_scope ON "window"(user_id, agent_id, session_id, message_seq);

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
    metadata TEXT NOT NULL DEFAULT '{}',
    recorded_at REAL,
    superseded_at REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS facts_id ON facts(id);
CREATE INDEX IF NOT EXISTS facts_key ON facts(user_id, norm_key);
CREATE INDEX IF NOT EXISTS facts_status ON facts(user_id, status);
-- The profile (tiers.facts.long_term.of_categories): a user's current facts, most important first,
-- read in that order and stopped at the limit (no sort of all of them: 40 ms -> 1 ms at 100,000).
CREATE INDEX IF NOT EXISTS facts_importance ON facts(user_id, status, importance DESC, seq);
CREATE INDEX IF NOT EXISTS facts_retired_source ON facts(user_id, json_extract(source_message_ids, '$[0]'))
    WHERE status = 'superseded';
CREATE INDEX IF NOT EXISTS facts_slot ON facts(user_id, subject, attribute) WHERE attribute IS NOT NULL;
-- The facts each turn produced (tiers.browse.episodes.facts_of_messages): their first source.
CREATE INDEX IF NOT EXISTS facts_first_source ON facts(user_id, json_extract(source_message_ids, '$[0]'));
-- A fact's older versions (tiers.facts.listing.fact_versions): what superseded it points back here.
CREATE INDEX IF NOT EXISTS facts_superseded_by ON facts(user_id, superseded_by) WHERE superseded_by IS NOT NULL;
CREATE INDEX IF NOT EXISTS facts_expiry ON facts(user_id, expires_at) WHERE expires_at IS NOT NULL;
-- Recall's uses of facts not yet added to the facts' own columns (tiers.facts.access): a narrow
-- row per fact is several times cheaper to update than the fact's own row. Readers add them.
CREATE TABLE IF NOT EXISTS fact_uses (
    seq INTEGER PRIMARY KEY,
    access_count INTEGER NOT NULL,
    last_accessed REAL NOT NULL
);

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
    single INTEGER NOT NULL DEFAULT 0,
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
-- What each write changed in the derived indexes, replayed by other processes (tiers.storage.journal).
CREATE TABLE IF NOT EXISTS index_journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL,
    kind TEXT NOT NULL,
    user_id TEXT NOT NULL,
    key TEXT,
    text TEXT
);
-- Saved lexical indexes of large partitions, valid at a journal position (tiers.indexes.snapshots).
CREATE TABLE IF NOT EXISTS index_snapshots (
    user_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    head INTEGER NOT NULL,
    header TEXT NOT NULL,
    arrays BLOB NOT NULL,
    PRIMARY KEY (user_id, kind)
);
-- The running summary of what left each conversation's window (summarize-on-trim).
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    owner TEXT,
    admin INTEGER NOT NULL DEFAULT 0,
    digest TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    revoked_at REAL
);
-- The web console's sign-ins (tiers.maintenance.sign_ins): the digest of a session cookie, the API key it
-- was opened with (checked again at every request: a revoked key ends its sessions), the form token.
CREATE TABLE IF NOT EXISTS console_sessions (
    digest TEXT PRIMARY KEY,
    key_id TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_expiry ON console_sessions(expires_at);
-- Keyed JSON items (tiers.items.keyed_items: LangGraph's store): a namespace path (labels joined with '.'),
-- a key, the value and its searchable text, expires_at when a TTL (minutes) is set, and the vectors
-- a caller's embedder made of its indexed fields (tiers.items.vectors).
CREATE TABLE IF NOT EXISTS keyed_items (
    seq INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value_json TEXT NOT NULL,
    text TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    expires_at REAL,
    ttl_minutes REAL,
    vectors TEXT,
    UNIQUE (user_id, namespace, key)
);
CREATE INDEX IF NOT EXISTS keyed_items_expiry ON keyed_items(expires_at) WHERE expires_at IS NOT NULL;
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

#: What brings a file of an older schema to each version, in order: a file at version
#: ``v`` runs the statements of every version above ``v`` (in the transaction that
#: records the new version, so a crash leaves the file at its old version, untouched).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    # Eviction archives: the fact is kept, listed and recalled (below active facts), from
    # an index of its own ("archived_facts", built from the store); the current facts'
    # index (and its saved snapshots) held active and superseded facts then as now.
    2: ("UPDATE facts SET status = 'archived' WHERE status = 'evicted'",),
    # Bi-temporal facts: when the memory stored a fact and when it retired it. Older rows
    # were stored when they were stated, and retired when their validity ended.
    3: ("ALTER TABLE facts ADD COLUMN recorded_at REAL",
        "ALTER TABLE facts ADD COLUMN superseded_at REAL",
        "UPDATE facts SET recorded_at = created_at WHERE recorded_at IS NULL",
        "UPDATE facts SET superseded_at = valid_to WHERE status = 'superseded' AND superseded_at IS NULL"),
    # Keyed items carry the vectors of their indexed fields (none for the items stored before).
    4: ("ALTER TABLE keyed_items ADD COLUMN vectors TEXT",),
    # Single-valued relations say so (triples.single); the speaker's slots lose their "my_" prefix.
    5: ("ALTER TABLE triples ADD COLUMN single INTEGER NOT NULL DEFAULT 0",),
}

_TWIN = ("o.user_id = triples.user_id AND o.agent_id = triples.agent_id AND o.subject_id = triples.subject_id "
         "AND o.object_id = triples.object_id")
_SLOT = "substr({0}.predicate, 1, 3) = 'my_' AND length({0}.predicate) > 3"

#: Schema 5's renaming of the speaker's slots, the same SQL on SQLite and PostgreSQL: a ``my_X``
#: relation becomes ``X`` marked single; where the same ``X`` relation (same user, agent, subject
#: and object) is stored too, the two become one row (the ``X`` row's id): mentions summed, the
#: earlier creation and the later update, the higher confidence, live if either was (else the
#: later end and what superseded it), references to the ``my_X`` row (``superseded_by``) moved to it.
MERGE_SLOT_PREDICATES: tuple[str, ...] = (
    # references to a my_X row that has a twin point to the twin
    "UPDATE triples SET superseded_by = (SELECT t.id FROM triples o JOIN triples t ON t.user_id = o.user_id "
    "AND t.agent_id = o.agent_id AND t.subject_id = o.subject_id AND t.object_id = o.object_id "
    "AND o.predicate = 'my_' || t.predicate WHERE o.id = triples.superseded_by AND o.user_id = triples.user_id) "
    "WHERE superseded_by IN (SELECT o.id FROM triples o JOIN triples t ON t.user_id = o.user_id "
    "AND t.agent_id = o.agent_id AND t.subject_id = o.subject_id AND t.object_id = o.object_id "
    "AND o.predicate = 'my_' || t.predicate WHERE o.user_id = triples.user_id)",
    # the twin takes in the my_X row
    "UPDATE triples SET mention_count = triples.mention_count + o.mention_count, "
    "created_at = CASE WHEN o.created_at < triples.created_at THEN o.created_at ELSE triples.created_at END, "
    "updated_at = CASE WHEN o.updated_at > triples.updated_at THEN o.updated_at ELSE triples.updated_at END, "
    "confidence = CASE WHEN o.confidence > triples.confidence THEN o.confidence ELSE triples.confidence END, "
    "source_message_id = CASE WHEN triples.source_message_id IS NULL OR (o.source_message_id IS NOT NULL "
    "AND o.created_at < triples.created_at) THEN o.source_message_id ELSE triples.source_message_id END, "
    "metadata = CASE WHEN triples.metadata = '{}' THEN o.metadata ELSE triples.metadata END, "
    "valid_to = CASE WHEN triples.valid_to IS NULL OR o.valid_to IS NULL THEN NULL "
    "WHEN o.valid_to > triples.valid_to THEN o.valid_to ELSE triples.valid_to END, "
    "superseded_by = CASE WHEN triples.valid_to IS NULL OR o.valid_to IS NULL THEN NULL "
    "WHEN o.valid_to > triples.valid_to THEN o.superseded_by ELSE triples.superseded_by END, "
    f"single = 1 FROM triples o WHERE {_TWIN} AND o.predicate = 'my_' || triples.predicate",
    f"DELETE FROM triples WHERE {_SLOT.format('triples')} AND EXISTS (SELECT 1 FROM triples o WHERE {_TWIN} "
    "AND triples.predicate = 'my_' || o.predicate)",
    f"UPDATE triples SET predicate = substr(predicate, 4), single = 1 WHERE {_SLOT.format('triples')}",
    "UPDATE triples SET superseded_by = NULL WHERE superseded_by = id",
)
#: A meta row saying the entities' stored descriptions and index texts were derived from
#: relations as an older schema named them (``my_car``): the graph derives them again at the next
#: open (``EntityGraph.refresh_stale_cards``) and marks them current.
ENTITY_CARDS = "entity_cards"
STALE_ENTITY_CARDS = ("INSERT INTO meta (key, value) VALUES ('entity_cards', 'stale') "
                      "ON CONFLICT (key) DO UPDATE SET value = excluded.value")
MIGRATIONS[5] += (*MERGE_SLOT_PREDICATES, STALE_ENTITY_CARDS)

_ADD_COLUMN = re.compile(r"ALTER TABLE (\w+) ADD COLUMN (\w+)")

#: Stored values of older schemas and what they are now: ``(table, column) -> {old: new}``.
_RENAMED_VALUES: dict[tuple[str, str], dict[Any, Any]] = {("facts", "status"): {"evicted": "archived"}}

#: Statements run whole (a trigger's body holds semicolons): a fact deleted, whatever deletes
#: it, takes its uses along.
TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS facts_uses_deleted AFTER DELETE ON facts "
    "BEGIN DELETE FROM fact_uses WHERE seq = old.seq; END",
)

SCHEMA_OBJECTS = frozenset(re.findall(r"CREATE (?:UNIQUE )?(?:TABLE|INDEX|TRIGGER) IF NOT EXISTS \"?(\w+)",
                                      SCHEMA + ";".join(TRIGGERS)))


def refuse_foreign_file(path: Path) -> None:
    """Refuse a file at ``path`` that is a directory or does not start as a SQLite file
    does (an empty or missing file is fine: SQLite makes it a database)."""
    if not path.exists():
        return
    if path.is_dir():
        raise StorageError(f"path: {str(path)!r} is a directory, not a database file", field="path")
    with path.open("rb") as handle:
        head = handle.read(len(SQLITE_MAGIC))
    if head and head != SQLITE_MAGIC:
        raise StorageError(f"path: {str(path)!r} is not a SQLite database; refusing to overwrite it", field="path")


def check_ownership(db: sqlite_utils.Database, path: Path | None) -> None:
    """Refuse (read-only) a database of another application or of a newer version."""
    tables = set(db.table_names())
    if tables and "meta" not in tables:
        raise StorageError(
            f"path: {str(path)!r} is a SQLite database of another application "
            f"(tables: {', '.join(sorted(tables)[:5])}); refusing to modify it", field="path"
        )
    version = None
    if "meta" in tables:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = stored_version(row, path)
        if version is None and len(tables) > 1:
            raise StorageError(f"path: {str(path)!r} has no schema version; refusing to modify it", field="path")
    if version is not None and version > SCHEMA_VERSION:
        raise StorageError(
            f"path: {str(path)!r} was written by a newer unified-memory "
            f"(schema {version}, this version reads up to {SCHEMA_VERSION}); upgrade the package",
            field="path",
        )


def stored_version(row: Sequence[Any] | None, path: Path | str | None) -> int | None:
    """The stored schema version (``None``: no row); a value that is not a version
    number means the file is not ours or is damaged, and is refused (``path`` names the
    file, or a PostgreSQL database, in the message).

    >>> stored_version(("1",), None), stored_version(None, None)
    (1, None)
    """
    if row is None:
        return None
    value = row[0]
    if isinstance(value, int) or (isinstance(value, str) and value.isascii() and value.isdigit()):
        return int(value)
    raise StorageError(f"path: {str(path)!r} has a schema version {value!r:.40} that is not a number; "
                       "refusing to modify it", field="path")


def migrate(db: sqlite_utils.Database, atomic: Callable[[], AbstractContextManager[Any]], path: Path | None) -> None:
    """Create the missing tables and indexes, run the :data:`MIGRATIONS` of the versions
    above the stored one, and record :data:`SCHEMA_VERSION`, in one ``atomic()``
    transaction; a file already up to date is only read."""
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master").fetchall()}
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
        if "meta" in present else None
    version = stored_version(row, path)
    if version == SCHEMA_VERSION and SCHEMA_OBJECTS <= present:
        return  # up to date: opening writes nothing, so many processes can open at once
    with atomic():
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        for statement in TRIGGERS:
            db.execute(statement)
        if version is not None:  # a new file has no rows to bring up to date
            for target in sorted(MIGRATIONS):
                if version < target:
                    for statement in MIGRATIONS[target]:
                        if not _has_column(db, statement):
                            db.execute(statement)
        db.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
        )


def _has_column(db: sqlite_utils.Database, statement: str) -> bool:
    """Whether ``statement`` adds a column its table already has (a file created by this
    version and marked older, or a migration interrupted outside our transaction)."""
    added = _ADD_COLUMN.match(statement)
    if added is None:
        return False
    table, column = added.groups()
    return any(row[1] == column for row in db.execute(f"PRAGMA table_info({table})").fetchall())


def upgrade_row(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """One row of ``table`` as stored by an older schema (an old export), in this
    version's values and columns (in place; returned too): an ``evicted`` fact is
    ``archived`` (schema 2); a fact without ``recorded_at`` was recorded when it was
    stated, and a superseded one retired when its validity ended (schema 3).

    >>> upgrade_row("facts", {"id": "fact_1", "status": "evicted", "created_at": 5.0, "valid_to": None})
    {'id': 'fact_1', 'status': 'archived', 'created_at': 5.0, 'valid_to': None, 'recorded_at': 5.0, 'superseded_at': None}
    """
    for (name, column), renamed in _RENAMED_VALUES.items():
        if name == table and column in row:
            value = row[column]
            if isinstance(value, str) and value in renamed:
                row[column] = renamed[value]
    if table == "facts" and "created_at" in row:
        row.setdefault("recorded_at", row["created_at"])
        row.setdefault("superseded_at", row.get("valid_to") if row.get("status") == "superseded" else None)
    if table == "triples" and "predicate" in row:
        row.setdefault("single", 0)
        predicate = row["predicate"]
        if isinstance(predicate, str) and predicate.startswith("my_") and len(predicate) > 3:
            row["predicate"], row["single"] = predicate[3:], 1  # schema 5: a slot named by its attribute
    return row


def merge_slot_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Of an older export's ``triples`` rows (upgraded by :func:`upgrade_row`), one per relation:
    where a ``my_X`` row, renamed ``X``, meets an ``X`` row of the same user, agent, subject and
    object, the two become one as :data:`MERGE_SLOT_PREDICATES` merges them in a file (the first
    row's id; the other's references follow). Rows are dicts with the ``triples`` columns.

    >>> a = {"id": "tri_a", "user_id": "u", "agent_id": "", "subject_id": "e1", "predicate": "car", "object_id": "e2",
    ...      "confidence": 0.5, "mention_count": 1, "created_at": 2.0, "updated_at": 2.0, "source_message_id": None,
    ...      "metadata": "{}", "valid_to": 3.0, "superseded_by": "tri_c", "single": 1}
    >>> b = {**a, "id": "tri_b", "confidence": 0.9, "created_at": 1.0, "valid_to": None, "superseded_by": None}
    >>> [(r["id"], r["mention_count"], r["created_at"], r["valid_to"], r["confidence"]) for r in merge_slot_rows([a, b])]
    [('tri_a', 2, 1.0, None, 0.9)]
    """
    kept: dict[tuple[Any, ...], dict[str, Any]] = {}
    moved: dict[tuple[Any, Any], Any] = {}  # (user, merged id) -> kept id
    for row in rows:
        key = (row.get("user_id"), row.get("agent_id"), row.get("subject_id"), row.get("predicate"), row.get("object_id"))
        first = kept.get(key)
        if first is None:
            kept[key] = row
            continue
        moved[row.get("user_id"), row.get("id")] = first.get("id")
        live = first.get("valid_to") is None or row.get("valid_to") is None
        later = row if not live and row["valid_to"] > first["valid_to"] else first
        first.update(
            mention_count=first["mention_count"] + row["mention_count"],
            created_at=min(first["created_at"], row["created_at"]), updated_at=max(first["updated_at"], row["updated_at"]),
            confidence=max(first["confidence"], row["confidence"]),
            source_message_id=first.get("source_message_id") if first.get("source_message_id") is not None and (
                row.get("source_message_id") is None or first["created_at"] <= row["created_at"])
            else row.get("source_message_id"),
            metadata=row.get("metadata") if first.get("metadata") == "{}" else first.get("metadata"),
            valid_to=None if live else later["valid_to"], superseded_by=None if live else later.get("superseded_by"),
            single=max(int(first.get("single") or 0), int(row.get("single") or 0)))
    out = list(kept.values())
    for row in out:
        target = moved.get((row.get("user_id"), row.get("superseded_by")))
        if target is not None:
            row["superseded_by"] = None if target == row.get("id") else target
    return out
