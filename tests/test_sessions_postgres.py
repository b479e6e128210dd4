"""PostgresConversationStore beyond the shared contract (tests/tiers/test_sessions.py runs that on
it too): a table shared by instances and processes, keys PostgreSQL text cannot hold as they are,
the table name and the URL, a foreign table, a lost connection, a server that is not there.

Every test has a database of its own on the suite's PostgreSQL server (``pg_url``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import free_port
from tiers.sessions import PostgresConversationStore
from unified_memory.errors import ClosedError, DependencyError, StorageError, StorageUnavailableError

ROOT = Path(__file__).resolve().parents[1]


def test_instances_share_the_table_and_reopen_reads_back(pg_url):
    with PostgresConversationStore(pg_url, table="chats") as one, PostgresConversationStore(pg_url, table="chats") as two:
        one.save("s1", {"summary": "from one", "messages": []}, namespace="ada", ttl=3600)
        assert two.load("s1", namespace="ada") == {"summary": "from one", "messages": []}
        two.save("s1", {"summary": "from two"}, namespace="ada")  # an upsert, no second row
        assert one.load("s1", namespace="ada") == {"summary": "from two"}
        assert one.list(namespace="ada") == two.list(namespace="ada") == ["s1"]
        assert two.delete("s1", namespace="ada") is True and one.delete("s1", namespace="ada") is False
    with PostgresConversationStore(pg_url, table="chats") as again, PostgresConversationStore(pg_url) as other:
        again.save("kept", [])
        assert other.list() == []  # another table
    with PostgresConversationStore(pg_url, table="chats") as reopened:
        assert reopened.list() == ["kept"]


def test_keys_postgresql_text_cannot_hold_round_trip_without_colliding(pg_url):
    keys = ["a\x00b", "a%00b", "a%b", "%", "%25", "\x00", "x" * 512, "\U0001f642" * 512, "é" * 512, "a b", "A"]
    with PostgresConversationStore(pg_url) as store:
        for namespace in ("\U0001f40d" * 512, "n\x00s", "n%00s"):
            for key in keys:
                store.save(key, {"key": key, "ns": namespace}, namespace=namespace)
            assert store.list(namespace=namespace) == sorted(keys)
            assert all(store.load(key, namespace=namespace) == {"key": key, "ns": namespace} for key in keys)
        assert store.delete("a\x00b", namespace="n\x00s") is True
        assert store.load("a%00b", namespace="n\x00s") == {"key": "a%00b", "ns": "n\x00s"}
        assert store.load("a\x00b", namespace="n%00s") == {"key": "a\x00b", "ns": "n%00s"}


@pytest.mark.parametrize("table", ["", "1abc", "a-b", 'x"; DROP TABLE t; --', "a b", "x" * 64, "é"])
def test_table_name_must_be_an_identifier(table):
    with pytest.raises(ValueError) as info:
        PostgresConversationStore("postgresql://nobody@127.0.0.1:1/none", table=table)
    assert info.value.field == "table"


@pytest.mark.parametrize("url", ["sessions.db", "host=db password=s3cret", "", "redis://x/0"])
def test_url_must_be_a_postgresql_url_and_is_never_echoed(url):
    with pytest.raises(ValueError) as info:
        PostgresConversationStore(url)
    assert info.value.field == "url" and "s3cret" not in str(info.value)
    with pytest.raises(TypeError) as info:
        PostgresConversationStore(None)  # type: ignore[arg-type]
    assert info.value.field == "url"


def test_unreachable_server_is_storage_unavailable_naming_url_without_password():
    port = free_port()  # nothing listens there once the probe socket is closed
    start = time.monotonic()
    with pytest.raises(StorageUnavailableError) as info:
        PostgresConversationStore(f"postgresql://ada:s3cret@127.0.0.1:{port}/app")
    assert time.monotonic() - start < 10
    assert info.value.field == "url" and f"127.0.0.1:{port}" in str(info.value)
    assert "s3cret" not in str(info.value) and "ada:***@" in str(info.value)


def test_a_lost_connection_is_unavailable_then_the_next_call_reconnects(pg_url):
    import psycopg

    with PostgresConversationStore(pg_url) as store:
        store.save("s", {"v": 1})
        with psycopg.connect(pg_url, autocommit=True) as admin:
            ended = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
                                  "current_database() AND application_name = 'unified-memory sessions'").fetchall()
        assert ended == [(True,)]
        with pytest.raises(StorageUnavailableError) as info:
            store.load("s")
        assert info.value.field == "store"
        assert store.load("s") == {"v": 1}  # a new connection
        store.save("s", {"v": 2})
        assert store.list() == ["s"] and store.load("s") == {"v": 2}


def test_closed_store_refuses_work(pg_url):
    store = PostgresConversationStore(pg_url)
    store.close()
    store.close()  # idempotent
    for call in (lambda: store.load("s"), lambda: store.save("s", []), lambda: store.delete("s"), store.list):
        with pytest.raises(ClosedError) as info:
            call()
        assert info.value.field == "store"


def test_refuses_a_foreign_table(pg_url):
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE conversation_sessions (id INTEGER)")
    with pytest.raises(StorageError, match="something else") as info:
        PostgresConversationStore(pg_url)
    assert info.value.field == "store"


def test_is_usable_from_other_threads(pg_url):
    with PostgresConversationStore(pg_url) as store, ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: store.save(f"s{i:02d}", {"i": i}), range(40)))
        assert store.list() == [f"s{i:02d}" for i in range(40)]
        assert list(pool.map(lambda i: store.load(f"s{i:02d}"), range(40))) == [{"i": i} for i in range(40)]


CHILD = textwrap.dedent("""
    import sys, time
    from unified_memory import PostgresConversationStore

    url, me, other = sys.argv[1:4]
    with PostgresConversationStore(url, table="shared") as store:  # both create the table at once
        for i in range(20):
            store.save(f"{me}-{i:02d}", {"by": me, "i": i}, namespace="team")
            store.save("both", {"last": me}, namespace="team")
        deadline = time.monotonic() + 60
        while store.load(f"{other}-19", namespace="team") is None:  # the other process's last write
            assert time.monotonic() < deadline, "never saw the other process's sessions"
            time.sleep(0.05)
        assert store.load(f"{other}-07", namespace="team") == {"by": other, "i": 7}
        print(len(store.list(namespace="team")))
""")


def test_two_processes_share_one_table(pg_url):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children = [subprocess.Popen([sys.executable, "-c", CHILD, pg_url, me, other], env=env, cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for me, other in (("p1", "p2"), ("p2", "p1"))]
    outputs = [child.communicate(timeout=120) for child in children]
    for child, (out, err) in zip(children, outputs, strict=True):
        assert child.returncode == 0, err[-3000:]
        assert int(out.strip()) >= 21  # its own 20 and "both", the other's as far as written
    with PostgresConversationStore(pg_url, table="shared") as store:
        ids = store.list(namespace="team")
        assert ids == sorted([*(f"p1-{i:02d}" for i in range(20)), *(f"p2-{i:02d}" for i in range(20)), "both"])
        assert store.load("both", namespace="team") in ({"last": "p1"}, {"last": "p2"})


def test_many_creators_of_one_new_table_at_once(pg_url):
    def open_and_save(i):
        with PostgresConversationStore(pg_url, table="fresh") as store:
            store.save(f"s{i}", [])

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(open_and_save, range(6)))
    with PostgresConversationStore(pg_url, table="fresh") as store:
        assert store.list() == [f"s{i}" for i in range(6)]


def test_missing_driver_is_a_dependency_error_with_the_install_hint(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "psycopg" or name.startswith("psycopg."):
            raise ImportError("No module named 'psycopg'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(DependencyError, match=r'pip install "unified-memory\[postgres\]"'):
        PostgresConversationStore("postgresql://ada@127.0.0.1:1/app")
