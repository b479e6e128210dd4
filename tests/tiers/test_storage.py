import os
import sqlite3
import threading
import time

import pytest

from tiers.storage.backend import SCHEMA_VERSION, Scope, Storage, metadata_where
from unified_memory.errors import ClosedError, MemoryTypeError, MemoryValueError, StorageError


@pytest.mark.sqlite_only  # SQLite's PRAGMAs (WAL journal, busy timeout, mmap)
def test_file_uses_wal_and_schema_version(db_path):
    store = Storage(db_path)
    assert store.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION)
    assert store.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    # reads map the file (a build without memory-mapped I/O answers 0 and reads as before)
    assert store.execute("PRAGMA mmap_size").fetchone()[0] in (0, 256 << 20)
    store.close()
    assert Storage(db_path).get_meta("schema_version") == str(SCHEMA_VERSION)


@pytest.mark.sqlite_only  # a file that is not a SQLite database
def test_refuses_a_file_that_is_not_sqlite(tmp_path):
    path = tmp_path / "notes.db"
    path.write_text("my precious notes")
    with pytest.raises(StorageError, match="not a SQLite database"):
        Storage(path)
    assert path.read_text() == "my precious notes"


@pytest.mark.sqlite_only  # a SQLite file of another application (PostgreSQL: test_pg_schema.py)
def test_refuses_another_applications_database(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="another application"):
        Storage(path)
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["invoices"]


def test_refuses_a_newer_schema(db_path):
    store = Storage(db_path)
    with store.atomic():
        store.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)])
    store.close()
    with pytest.raises(StorageError, match="newer"):
        Storage(db_path)


@pytest.mark.sqlite_only  # the directory of a file
def test_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(StorageError, match="does not exist"):
        Storage(tmp_path / "nope" / "memory.db")


def test_atomic_rolls_back_everything_on_error():
    store = Storage(None)
    with pytest.raises(RuntimeError), store.atomic():
        store.execute("INSERT INTO meta(key, value) VALUES ('a', '1')")
        with store.atomic():
            store.execute("INSERT INTO meta(key, value) VALUES ('b', '2')")
        raise RuntimeError("boom")
    assert store.get_meta("a") is None and store.get_meta("b") is None


def test_closed_storage_refuses_work():
    store = Storage(None)
    store.close()
    store.close()  # idempotent
    with pytest.raises(ClosedError):
        store.get_meta("schema_version")


def test_metadata_where_matches_by_json_type():
    store = Storage(None)
    with store.atomic():
        store.execute("CREATE TABLE t (id INTEGER, metadata TEXT)")
        store.executemany("INSERT INTO t VALUES (?, ?)", [[1, '{"a": "1", "n": 1, "b": true}'],
                                                         [2, '{"a": 1, "n": 1.0}']])

    def ids(where):
        sql, params = metadata_where(where, dialect=store.dialect)
        return [r["id"] for r in store.query(f"SELECT id FROM t WHERE {sql} ORDER BY id", params)]

    assert ids({"a": "1"}) == [1]
    assert ids({"a": 1}) == [2]
    assert ids({"n": 1}) == [1, 2]
    assert ids({"b": True}) == [1]
    assert ids({"b": None}) == [2]
    assert ids({}) == [1, 2]


def test_metadata_where_rejects_non_scalars_and_odd_keys():
    with pytest.raises(MemoryTypeError, match=r"where\['a'\]"):
        metadata_where({"a": [1]})
    with pytest.raises(MemoryValueError, match="where"):
        metadata_where({'a"b': 1})


def test_scope_agent_clause():
    assert Scope("u").agent_clause() == ("TRUE", [])
    assert Scope("u", "bot").agent_clause() == ("(agent_id = ? OR agent_id = '')", ["bot"])


@pytest.mark.sqlite_only  # the file's bytes and its -wal/-shm (PostgreSQL: test_pg_schema.py)
def test_a_foreign_database_is_refused_byte_for_byte_untouched(tmp_path):
    import hashlib
    import sqlite3

    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (x TEXT)")
    conn.commit()
    conn.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(StorageError, match="another application"):
        Storage(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]  # no -wal / -shm left behind


@pytest.mark.slow
def test_writers_of_one_process_take_turns_without_starving(tmp_path):
    """Regression (found by the workload above at 4x scale): several connections of one
    process writing one busy file. SQLite's polling let a writer that had waited long
    lose the lock again and again to newcomers, past its busy timeout ("database is
    locked") although no transaction held the lock that long. The writers of a process
    now take turns (tiers.storage.writers.WriterQueue): each waits about one round of the others.

    Asserted without a clock bound (a busy CI machine stretches every transaction): while
    one writer waits, the others start at most about one transaction each, never the tens
    that starvation lets through."""
    path = tmp_path / "m.db"
    Storage(path).close()
    writers, hold, run = 8, 0.04, 4.0
    failures: list[str] = []
    waits: list[tuple[int, float, float]] = []  # (writer, asked, started)
    starts: list[tuple[int, float]] = []
    record = threading.Lock()

    def writer(i: int) -> None:
        storage = Storage(path, busy_timeout_ms=30_000)
        end = time.monotonic() + run
        try:
            while time.monotonic() < end:
                asked = time.monotonic()
                try:
                    with storage.atomic():
                        started = time.monotonic()
                        with record:
                            waits.append((i, asked, started))
                            starts.append((i, started))
                        storage.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) "
                                        "DO UPDATE SET value = excluded.value", [f"writer-{i}", str(asked)])
                        time.sleep(hold)  # a transaction that takes a while (e.g. embedding)
                except StorageError as exc:
                    failures.append(str(exc))
        finally:
            storage.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert failures == []
    assert len(waits) >= writers
    overtaken = [sum(1 for j, start in starts if j != i and asked < start < started) for i, asked, started in waits]
    # First come first served: the others (writers - 1) each go at most once ahead of a waiter;
    # twice that leaves room for a thread paused between its clock reading and its place in the queue.
    assert max(overtaken) <= 2 * (writers - 1), sorted(overtaken)[-5:]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_inherit_a_writer_turn_held_in_the_parent(tmp_path):
    path = tmp_path / "m.db"
    storage = Storage(path)
    with storage.atomic():  # the parent holds this process's writer turn while it forks
        pid = os.fork()
        if pid == 0:  # the child: its own writers must not wait for the parent's turn
            code = 1
            try:
                child = Storage(path, busy_timeout_ms=5000)
                code = 0 if child.backend._writers.acquire(0.5) else 3
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    storage.close()
    assert os.WEXITSTATUS(status) == 0


@pytest.mark.slow
@pytest.mark.sqlite_only  # SQLite's POSIX locks; subprocesses open the path themselves
def test_a_second_connection_in_the_process_keeps_seeing_other_processes_commits(tmp_path):
    """Opening the file again in this process must not drop the locks SQLite holds on it (a plain
    open()/close() of the file would): a connection that lost its WAL read lock went on reading an
    old snapshot, so a key created by ``unified-memory keys create`` was never seen by the server."""
    import subprocess
    import sys

    path = tmp_path / "m.db"
    first, second = Storage(path), Storage(path)
    insert = ("from tiers.storage.backend import Storage; s = Storage({path!r});\n"
              "with s.atomic(): s.execute(\"INSERT INTO meta(key, value) VALUES (?, 'x')\", [{key!r}])\n"
              "s.close()")
    for key in ("one", "two", "three"):
        subprocess.run([sys.executable, "-c", insert.format(path=str(path), key=key)], check=True)
        assert second.get_meta(key) == "x" and first.get_meta(key) == "x"
    third = Storage(path)  # a third open, after the others read
    subprocess.run([sys.executable, "-c", insert.format(path=str(path), key="four")], check=True)
    assert [s.get_meta("four") for s in (first, second, third)] == ["x", "x", "x"]
    for store in (first, second, third):
        store.close()


@pytest.mark.sqlite_only
def test_the_profile_reads_the_most_important_facts_in_index_order(db_path):
    """The profile's query (a user's current facts of some categories, most important first, a few of
    them) walks an index in that order and stops: no sort of every fact of the user (at 100,000 facts
    40 ms a context before, 1 ms now: benchmarks/read_path.py)."""
    from tiers.facts.listing import USES_JOIN, FactFilter, _columns

    storage = Storage(db_path)
    scope = Scope(user_id="ada")
    condition, params = FactFilter(categories=("health", "preference"), now=1.0).sql(scope)
    sql = (f"SELECT {_columns(storage.dialect)} FROM facts {USES_JOIN} WHERE {condition} "
           "ORDER BY importance DESC, facts.seq LIMIT 80")
    storage.close()
    conn = sqlite3.connect(db_path)
    plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall())
    conn.close()
    assert "facts_importance" in plan and "TEMP B-TREE" not in plan, plan
