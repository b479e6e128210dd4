"""``forget`` leaves nothing behind (issue 8), verified by scanning the files.

Vectors: the numpy index (the default), a Chroma server, and embedded Chroma. Embedded
Chroma is the one exception, documented in the README: hnswlib writes its index files
(``data_level0.bin``) from memory it never initialised, so bytes of any text that was
in this process's heap — a forgotten user's included — can land in another
collection's file. Its scan therefore skips those ``.bin`` files; everything else
(SQLite, WAL, chroma.sqlite3, the victim's collections) is checked.

Several users write turns, facts, triples and metadata carrying markers unique to
them, with dense retrieval on (numpy vectors or a persistent Chroma collection), the
index journal and saved lexical snapshots in play, a second process-like reader of
the same file, and recalls that fill the query-embedding cache. After
``forget(user_id=...)`` — and again after closing — no byte of any file under the
directory (SQLite database, WAL, shared memory, Chroma's files) holds the forgotten
user's markers or id, the in-process caches do not either, and every other user
answers exactly as before.

On PostgreSQL (``test_forget_a_user_leaves_no_row_behind_on_postgresql``) there is no file of
ours to scan: after ``forget`` no value of any text, JSON or bytea column of any table of the
schema holds the markers or the user's id, and every table was rewritten (``VACUUM (FULL,
ANALYZE)``: no dead tuple keeps the deleted rows). The server's write-ahead log, archives and
backups are the operator's (docs/deployment.md).
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import record_figures, scaled
from tiers.indexes import snapshots
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory, VectorConfig
from unified_memory.testing import FakeEmbedder, internals

USERS = ["ulrike", "vasco", "wanjiru"]
TALLY = {"forgets": 0, "files_scanned": 0, "bytes_scanned": 0, "markers_checked": 0, "traces_found": 0}


@pytest.fixture(autouse=True, scope="module")
def _report():
    yield
    record_figures(__name__, "forget", **TALLY)


def marker(user: str, i: int) -> str:
    return f"{user[:3]}secret{i:03d}x"


def scan(directory: Path, needles: list[str], skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    found = []
    for path in directory.rglob("*"):
        if path.is_file() and not path.name.endswith(skip or ("\0",)):
            data = path.read_bytes()
            TALLY["files_scanned"] += 1
            TALLY["bytes_scanned"] += len(data)
            found += [(str(path.relative_to(directory)), n) for n in needles if n.encode() in data]
    TALLY["markers_checked"] += len(needles)
    return found


def fill(mem: UnifiedMemory, user: str, n: int) -> None:
    view = mem.scoped(user_id=user)
    for i in range(n):
        secret = marker(user, i)
        view.add_turn(f"My locker code is {secret} and my dog is {user}dog", f"Noted {secret}")
        view.remember(f"{user} keeps {secret} in the drawer", metadata={"note": secret})
        view.add_triple(f"{user}dog", "guards", secret)
    view.end_session()


def answers(mem: UnifiedMemory, user: str) -> list[tuple[str, str]]:
    view = mem.scoped(user_id=user)
    return sorted((h.id, h.text) for h in view.recall(f"locker code drawer {user}dog", limit=50))


def assert_others_unharmed(mem: UnifiedMemory, other: UnifiedMemory | None, victim: str,
                           before: dict[str, list[tuple[str, str]]]) -> None:
    """After ``forget(user_id=victim)``: the victim recalls nothing, through ``mem`` and through
    ``other`` (another connection following the journal, or None), and every other user answers
    exactly as ``before``."""
    if other is not None:
        assert other.scoped(user_id=victim).recall("locker code drawer") == []
        for user in before:
            assert answers(other, user) == before[user]
    for user in before:
        assert answers(mem, user) == before[user]
    assert mem.scoped(user_id=victim).recall(f"{marker(victim, 0)} locker") == []


@pytest.fixture(params=["numpy", "chroma", "chroma-server"])
def backend(request):
    """(vector settings, extra folder to scan or None, file suffixes not scanned)."""
    if request.param == "numpy":
        return {"backend": "numpy"}, None, ()
    pytest.importorskip("chromadb")
    if request.param == "chroma":
        return {"backend": "chroma"}, None, (".bin",)  # hnswlib's uninitialised memory: see the module doc
    from tests.conftest import CHROMA_SERVER_DIRS

    port = request.getfixturevalue("chroma_server")
    return ({"backend": "chroma", "chroma_host": "127.0.0.1", "chroma_port": port,
             "chroma_prefix": f"f{uuid.uuid4().hex[:8]}"}, CHROMA_SERVER_DIRS[port], ())


@pytest.mark.slow
@pytest.mark.sqlite_only  # scans the bytes of the SQLite file, its WAL and shared memory (PostgreSQL: below)
@settings(max_examples=scaled(4), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(victim=st.sampled_from(USERS), n=st.integers(3, 8), reader=st.booleans())
def test_forget_a_user_leaves_no_byte_behind(tmp_path_factory, monkeypatch, backend, victim, n, reader):
    vectors, server_dir, unscanned = backend
    monkeypatch.setattr(snapshots, "SNAPSHOT_MIN_DOCS", 2)  # small partitions are snapshotted at close
    folder = tmp_path_factory.mktemp("forget")
    path = folder / "memory.db"
    options = dict(embedder=FakeEmbedder(dim=32), retrieval="hybrid", vectors=VectorConfig(**vectors),
                   short_term_limit=2, long_term_limit=None)
    with UnifiedMemory(path, **options) as mem:
        for user in USERS:
            fill(mem, user, n)
        for user in USERS:
            answers(mem, user)  # builds indexes, fills the query cache
    # a reopen restores the snapshots saved at close; the victim's secrets are in every derived table
    mem = UnifiedMemory(path, **options)
    other = UnifiedMemory(path, **options) if reader else None  # another connection that follows the journal
    try:
        before = {user: answers(mem, user) for user in USERS if user != victim}
        mem.scoped(user_id=victim).recall(f"{marker(victim, 0)} locker")  # in the query cache now
        needles = [marker(victim, i) for i in range(n)] + [f"{victim}dog"]
        assert scan(folder, needles), "the scan sees the secrets before forgetting"
        counts = mem.forget(user_id=victim)
        TALLY["forgets"] += 1
        assert counts["messages"] == 2 * n and counts["facts"] >= n
        dense = internals(mem).dense
        assert not any(victim[:3] + "secret" in q for q in dense.cache._queries), "query cache kept the victim's query"
        assert_others_unharmed(mem, other, victim, before)
        left = scan(folder, needles, unscanned)
        TALLY["traces_found"] += len(left)
        assert left == [], left
    finally:
        if other is not None:
            other.close()
        mem.close()
    left = scan(folder, [*needles, victim], unscanned)
    if server_dir is not None:  # the server holds ids and vectors only: never a text or a user id
        left += scan(server_dir, [*needles, victim])
    TALLY["traces_found"] += len(left)
    assert left == [], left
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for table in ("messages", "facts", "entities", "triples", "embeddings", "index_journal", "index_snapshots"):
            assert con.execute(f'SELECT COUNT(*) FROM "{table}" WHERE user_id = ?', (victim,)).fetchone()[0] == 0
    finally:
        con.close()
    with UnifiedMemory(path, **options) as reopened:
        for user in before:
            assert answers(reopened, user) == before[user]


def pg_scan(url: str, needles: list[str]) -> list[tuple[str, str, str]]:
    """(table, column, needle) for every value of a text, JSON or bytea column of any table of the
    schema that contains a needle, read through a connection of its own."""
    found = []
    with contextlib.closing(Storage(url)) as db:
        columns = db.query(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE' "
            "AND c.data_type IN ('text', 'character varying', 'character', 'json', 'jsonb', 'bytea') "
            "ORDER BY c.table_name, c.column_name")
        assert columns, "no column to scan"
        for col in columns:
            table, column = col["table_name"], col["column_name"]
            value = f'"{column}"' if col["data_type"] != "json" and col["data_type"] != "jsonb" else f'"{column}"::text'
            needle = "convert_to(?, 'UTF8')" if col["data_type"] == "bytea" else "?"
            for n in needles:
                hits = db.execute(f'SELECT COUNT(*) FROM "{table}" WHERE position({needle} IN {value}) > 0', [n])
                if hits.fetchone()[0]:
                    found.append((table, column, n))
            TALLY["files_scanned"] += 1
    TALLY["markers_checked"] += len(needles)
    return found


def relfilenodes(url: str) -> dict[str, int]:
    """Each table of the schema and the file PostgreSQL keeps it in (``VACUUM FULL`` gives it a new one)."""
    with contextlib.closing(Storage(url)) as db:
        return {r["relname"]: int(r["relfilenode"]) for r in db.query(
            "SELECT c.relname, c.relfilenode FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'")}


@pytest.mark.parametrize("reader", [False, True])
def test_forget_a_user_leaves_no_row_behind_on_postgresql(tmp_path, monkeypatch, storage_backend, reader):
    """``forget(user_id=...)`` on PostgreSQL: no row of any table holds the user's text or id,
    every table was rewritten, every other user answers exactly as before."""
    if storage_backend != "postgresql":
        pytest.skip("on SQLite, test_forget_a_user_leaves_no_byte_behind scans the file itself")
    from tiers.storage.postgres_backend import PostgresBackend

    monkeypatch.setattr(snapshots, "SNAPSHOT_MIN_DOCS", 2)
    vacuums = []
    real_vacuum = PostgresBackend.vacuum
    monkeypatch.setattr(PostgresBackend, "vacuum", lambda self: (vacuums.append(self.url), real_vacuum(self))[1])
    victim, n, path = "vasco", 4, tmp_path / "memory.db"
    options = dict(embedder=FakeEmbedder(dim=32), retrieval="hybrid", vectors=VectorConfig(backend="numpy"),
                   short_term_limit=2, long_term_limit=None)
    with UnifiedMemory(path, **options) as mem:
        for user in USERS:
            fill(mem, user, n)
        for user in USERS:
            answers(mem, user)
    mem = UnifiedMemory(path, **options)
    other = UnifiedMemory(path, **options) if reader else None
    url = internals(mem).storage.backend.url
    try:
        before = {user: answers(mem, user) for user in USERS if user != victim}
        mem.scoped(user_id=victim).recall(f"{marker(victim, 0)} locker")
        needles = [marker(victim, i) for i in range(n)] + [f"{victim}dog"]
        assert pg_scan(url, needles), "the scan sees the secrets before forgetting"
        files = relfilenodes(url)
        counts = mem.forget(user_id=victim)
        TALLY["forgets"] += 1
        assert counts["messages"] == 2 * n and counts["facts"] >= n
        assert vacuums == [url], "forget did not vacuum the database"
        rewritten = relfilenodes(url)
        assert [t for t in files if rewritten.get(t) == files[t]] == [], "tables VACUUM FULL did not rewrite"
        assert_others_unharmed(mem, other, victim, before)
        left = pg_scan(url, needles)
        TALLY["traces_found"] += len(left)
        assert left == [], left
    finally:
        if other is not None:
            other.close()
        mem.close()
    left = pg_scan(url, [*needles, victim])  # after closing (snapshots saved at close) too
    TALLY["traces_found"] += len(left)
    assert left == [], left
    with UnifiedMemory(path, **options) as reopened:
        for user in before:
            assert answers(reopened, user) == before[user]
