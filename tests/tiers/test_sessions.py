"""The ConversationStore contract, run against every backend (memory, JSON files, SQLite, Redis,
PostgreSQL; the last has its own tests in tests/test_sessions_postgres.py)."""

from __future__ import annotations

import ast
import doctest
import importlib
import math
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import T0, free_port
from tiers.sessions import (
    InMemoryConversationStore,
    JSONConversationStore,
    PostgresConversationStore,
    RedisConversationStore,
    SQLiteConversationStore,
)
from unified_memory.errors import StorageError, StoreUnavailableError, UnifiedMemoryError
from unified_memory.protocols import ConversationStore
from unified_memory.types import Message

BACKENDS = ["memory", "json", "sqlite", "redis", "postgres"]
CLOCKED = ["memory", "json", "sqlite", "postgres"]
SESSIONS = Path(__file__).resolve().parents[2] / "tiers" / "sessions"


def realistic_state() -> dict:
    call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lisboa"}'}}
    messages = [
        Message(role="system", content="You are terse.").model_dump(mode="json", exclude_none=True),
        {"role": "user", "content": "Wie ist das Wetter in Lisboa? 🌦️", "images": ["data:image/png;base64,iVBORw0KGgo="]},
        {"role": "assistant", "content": None, "tool_calls": [call],
         "reasoning_details": [{"type": "reasoning.text", "text": "need weather → call tool", "signature": None},
                               {"type": "reasoning.encrypted", "data": "gAAA…"}]},
        {"role": "tool", "tool_call_id": "call_1", "name": "weather", "content": '{"temp_c": 21.5, "sky": "☀"}'},
        {"role": "assistant", "content": "21,5 °C, ensolarado.", "metadata": {"tokens": {"in": 120, "out": 9}}},
    ]
    return {"messages": messages, "summary": "O utilizador quer saber o tempo.",
            "metadata": {"user": {"id": "ada", "tags": ["beta", None, True, 0, -1.25e-7]}, "turns": 3,
                         "nested": {"a": {"b": {"c": [[], {}, ""]}}}}}


# --- the shared contract -----------------------------------------------------------------------

def test_is_a_conversation_store(store):
    assert isinstance(store, ConversationStore)


def test_round_trip_of_a_realistic_session(store):
    state = realistic_state()
    store.save("sess-1", state)
    assert store.load("sess-1") == state
    assert store.list() == ["sess-1"]


def test_save_overwrites(store):
    store.save("s", {"summary": "old", "messages": [{"role": "user", "content": "1"}]})
    store.save("s", {"summary": "new"})
    assert store.load("s") == {"summary": "new"}
    assert store.list() == ["s"]


def test_missing_is_none(store):
    assert store.load("nobody") is None
    assert store.list() == []
    assert store.list(namespace="empty") == []


def test_delete_returns_true_then_false(store):
    store.save("s", [])
    assert store.delete("s") is True
    assert store.delete("s") is False
    assert store.load("s") is None
    assert store.delete("never-saved") is False


def test_list_is_sorted_and_namespaces_are_isolated(store):
    for sid in ["b", "a", "C", "é", "10", "2"]:
        store.save(sid, {"n": sid}, namespace="team")
    store.save("a", {"where": "other"}, namespace="other")
    assert store.list(namespace="team") == sorted(["b", "a", "C", "é", "10", "2"])
    assert store.list(namespace="other") == ["a"]
    assert store.list() == []
    assert store.load("a", namespace="team") == {"n": "a"}
    assert store.load("a", namespace="other") == {"where": "other"}
    assert store.delete("a", namespace="other") is True
    assert store.load("a", namespace="team") == {"n": "a"}


def test_plain_list_is_normalised(store):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    store.save("s", messages)
    assert store.load("s") == {"messages": messages, "summary": None}


@pytest.mark.parametrize("field, kwargs", [
    ("session_id", {"session_id": ""}),
    ("session_id", {"session_id": 42}),
    ("session_id", {"session_id": None}),
    ("session_id", {"session_id": "x" * 513}),
    ("session_id", {"session_id": "bad\ud800"}),
    ("namespace", {"namespace": ""}),
    ("namespace", {"namespace": b"bytes"}),
    ("namespace", {"namespace": "n" * 513}),
    ("ttl", {"ttl": 0}),
    ("ttl", {"ttl": -5}),
    ("ttl", {"ttl": math.inf}),
    ("ttl", {"ttl": math.nan}),
    ("ttl", {"ttl": "60"}),
    ("ttl", {"ttl": True}),
    ("state", {"state": "just text"}),
    ("state", {"state": 3}),
    ("state", {"state": None}),
    ("state", {"state": {"x": math.nan}}),
    ("state", {"state": {"x": [1, math.inf]}}),
    ("state", {"state": {"x": {1, 2}}}),
    ("state", {"state": {"x": object()}}),
    ("state", {"state": {1: "int key"}}),
    ("state", {"state": {"x": b"bytes"}}),
])
def test_bad_arguments_name_the_field_and_write_nothing(store, field, kwargs):
    store.save("keep", {"summary": "original"})
    args = {"session_id": "keep", "state": {"summary": "changed"}} | kwargs
    namespace = args.pop("namespace", "default")
    with pytest.raises((ValueError, TypeError)) as info:
        store.save(args.pop("session_id"), args.pop("state"), namespace=namespace, **args)
    assert isinstance(info.value, UnifiedMemoryError)
    assert info.value.field == field and str(info.value).startswith(f"{field}:")
    assert store.load("keep") == {"summary": "original"}
    assert store.list() == ["keep"]


@pytest.mark.parametrize("bad, field", [("", "session_id"), (7, "session_id")])
def test_bad_ids_are_refused_by_every_method(store, bad, field):
    for call in (lambda: store.load(bad), lambda: store.delete(bad)):
        with pytest.raises((ValueError, TypeError)) as info:
            call()
        assert isinstance(info.value, UnifiedMemoryError) and info.value.field == field
    for call in (lambda: store.load("s", namespace=bad), lambda: store.list(namespace=bad),
                 lambda: store.delete("s", namespace=bad)):
        with pytest.raises((ValueError, TypeError)) as info:
            call()
        assert isinstance(info.value, UnifiedMemoryError) and info.value.field == "namespace"


def test_bad_default_ttl_is_refused(make_store):
    for bad in (0, -1.0, math.inf, "1"):
        with pytest.raises((ValueError, TypeError)) as info:
            make_store(default_ttl=bad)
        assert isinstance(info.value, UnifiedMemoryError) and info.value.field == "default_ttl"


def test_returned_state_is_a_copy(store):
    store.save("s", realistic_state())
    loaded = store.load("s")
    loaded["messages"][2]["tool_calls"][0]["id"] = "tampered"
    loaded["metadata"]["nested"]["a"]["b"]["c"].append("x")
    loaded.clear()
    assert store.load("s") == realistic_state()


def test_saved_state_is_a_copy(store):
    state = realistic_state()
    store.save("s", state)
    state["messages"].append({"role": "user", "content": "later"})
    state["summary"] = "mutated"
    assert store.load("s") == realistic_state()


# --- TTL -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", CLOCKED, indirect=True)
def test_ttl_expiry_with_an_injected_clock(make_store, clock):
    store = make_store(default_ttl=100)
    store.save("default", {"n": 1})
    store.save("short", {"n": 2}, ttl=10)
    store.save("long", {"n": 3}, ttl=1000)
    clock.advance(seconds=9.999)
    assert store.list() == ["default", "long", "short"]
    clock.advance(seconds=0.001)  # expires_at <= now: gone
    assert store.load("short") is None
    assert store.delete("short") is False
    assert store.list() == ["default", "long"]
    clock.advance(seconds=90)
    assert store.list() == ["long"]
    assert store.load("default") is None and store.delete("default") is False
    assert store.load("long") == {"n": 3}
    store.save("default", {"n": 4})  # a fresh save starts a fresh lifetime
    assert store.load("default") == {"n": 4}


@pytest.mark.parametrize("backend", CLOCKED, indirect=True)
def test_overwrite_without_ttl_clears_the_old_expiry(make_store, clock):
    store = make_store()
    store.save("s", {"v": 1}, ttl=5)
    store.save("s", {"v": 2})
    clock.advance(days=365)
    assert store.load("s") == {"v": 2}


def test_redis_ttl_is_native_expiry(make_redis):
    store = make_redis(default_ttl=3600)
    store.save("short", {"n": 1}, ttl=0.2)
    store.save("kept", {"n": 2})
    deadline = time.monotonic() + 3
    while store.load("short") is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.load("short") is None
    assert store.list() == ["kept"]
    assert store.delete("short") is False
    assert 0 < store._client.pttl(store._key("kept", "default")) <= 3600 * 1000


# --- property: anything JSON-able round-trips ----------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
states = st.dictionaries(st.text(max_size=10), json_values, max_size=5)
ids = st.text(min_size=1, max_size=40)


@pytest.mark.parametrize("kind", CLOCKED)
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=states, session_id=ids, namespace=ids)
def test_any_json_state_and_any_ids_round_trip(tmp_path_factory, request, kind, state, session_id, namespace):
    folder = tmp_path_factory.mktemp("prop")
    if kind == "postgres":  # one database per test, a table per example
        store = PostgresConversationStore(request.getfixturevalue("pg_url"), table=f"t_{uuid.uuid4().hex}")
    elif kind == "memory":
        store = InMemoryConversationStore()
    elif kind == "json":
        store = JSONConversationStore(folder / "sessions")
    else:
        store = SQLiteConversationStore(folder / "s.db")
    store.save(session_id, state, namespace=namespace)
    assert store.load(session_id, namespace=namespace) == state
    assert store.list(namespace=namespace) == [session_id]
    if kind == "json":
        root = folder / "sessions"
        assert all(p == root or root in p.parents for p in folder.rglob("*"))
    assert store.delete(session_id, namespace=namespace) is True
    if kind in ("sqlite", "postgres"):
        store.close()


# --- JSON files ----------------------------------------------------------------------------------

def test_json_file_layout_and_envelope(tmp_path, clock):
    store = JSONConversationStore(tmp_path, default_ttl=60, clock=clock)
    store.save("s1", {"summary": "x"}, namespace="ada")
    path = store.path("s1", namespace="ada")
    assert path.parent.parent == tmp_path and path.suffix == ".json"
    import json

    data = json.loads(path.read_text(encoding="utf-8"))
    assert data == {"format": "unified-memory.session", "version": 1, "namespace": "ada", "session_id": "s1",
                    "saved_at": T0, "expires_at": T0 + 60, "state": {"summary": "x"}}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind


@pytest.mark.parametrize("hostile", ["../x", "../../etc/passwd", "a/b", "a\\b", ".", "..", "...", ".hidden",
                                     "/abs", "C:\\win", "nul\x00byte", "ünï/cødé 🐍", "x.json", "A", "a", "%2F",
                                     "x" * 512, "é" * 512])
def test_json_ids_cannot_escape_the_directory(tmp_path, hostile):
    root = tmp_path / "root"
    store = JSONConversationStore(root)
    store.save(hostile, {"id": hostile}, namespace=hostile)
    store.save(hostile, {"id": hostile, "ns": "default"})
    path = store.path(hostile, namespace=hostile)
    assert root in path.parents and path.parent.parent == root
    assert len(path.name.encode()) <= 255 and len(path.parent.name.encode()) <= 255
    assert all(root in p.parents for p in tmp_path.rglob("*") if p != root)
    assert store.load(hostile, namespace=hostile) == {"id": hostile}
    assert store.list(namespace=hostile) == [hostile]
    assert store.load(hostile) == {"id": hostile, "ns": "default"}


def test_json_case_and_dot_variants_do_not_collide(tmp_path):
    store = JSONConversationStore(tmp_path)
    variants = ["a", "A", ".", "..", "%2E", "%2e", "a.b", "a%2Eb"]
    for sid in variants:
        store.save(sid, {"id": sid})
    names = [p.name.lower() for p in (tmp_path / "default").iterdir()]
    assert len(set(names)) == len(variants)
    assert store.list() == sorted(variants)
    assert all(store.load(sid) == {"id": sid} for sid in variants)


@pytest.mark.parametrize("content", ["{not json", "", "[1, 2]", '{"format": "other"}', "\xff\xfe"])
def test_json_corrupt_file_is_a_storage_error_naming_the_path(tmp_path, content):
    store = JSONConversationStore(tmp_path)
    store.save("s", {"ok": True})
    path = store.path("s")
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(StorageError) as info:
        store.load("s")
    assert str(path) in str(info.value)
    with pytest.raises(StorageError, match="s.json"):
        store.list()
    assert store.delete("s") is True and not path.exists()


def test_json_expired_files_are_removed_lazily(tmp_path, clock):
    store = JSONConversationStore(tmp_path, clock=clock)
    store.save("a", {}, ttl=1)
    store.save("b", {}, ttl=1)
    clock.advance(seconds=1)
    assert store.path("a").exists()
    assert store.load("a") is None and not store.path("a").exists()
    assert store.list() == [] and not store.path("b").exists()


def test_json_directory_that_is_a_file_is_unavailable(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreUnavailableError) as info:
        JSONConversationStore(blocker / "sub")
    assert info.value.field == "directory" and str(info.value).startswith("directory:")
    with pytest.raises(StoreUnavailableError) as info:  # a name too long for the file system (found by the fuzz)
        JSONConversationStore(tmp_path / ("x" * 300))
    assert info.value.field == "directory"


def test_json_files_are_shared_between_instances(tmp_path):
    JSONConversationStore(tmp_path).save("s", {"v": 1}, namespace="n")
    assert JSONConversationStore(tmp_path).load("s", namespace="n") == {"v": 1}


# --- SQLite --------------------------------------------------------------------------------------

def test_sqlite_reopen_reads_back(tmp_path):
    path = tmp_path / "sessions.db"
    with SQLiteConversationStore(path, table="chats") as store:
        store.save("s1", realistic_state(), namespace="ada", ttl=3600)
    with SQLiteConversationStore(path, table="chats") as store:
        assert store.load("s1", namespace="ada") == realistic_state()
        assert store.list(namespace="ada") == ["s1"]


@pytest.mark.parametrize("table", ["", "1abc", "a-b", 'x"; DROP TABLE t; --', "a b", "x" * 65])
def test_sqlite_table_name_must_be_an_identifier(table):
    with pytest.raises(ValueError) as info:
        SQLiteConversationStore(table=table)
    assert info.value.field == "table"


def test_sqlite_closed_store_refuses_work():
    store = SQLiteConversationStore()
    store.close()
    with pytest.raises(StorageError, match="closed"):
        store.load("s")


def test_sqlite_refuses_a_foreign_table(tmp_path):
    import sqlite3

    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE conversation_sessions (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="something else"):
        SQLiteConversationStore(path)


def test_sqlite_is_usable_from_other_threads(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with SQLiteConversationStore(tmp_path / "t.db") as store, ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: store.save(f"s{i:02d}", {"i": i}), range(40)))
        assert store.list() == [f"s{i:02d}" for i in range(40)]


# --- in memory (lauren-ai extras) ----------------------------------------------------------------

def test_memory_extras(clock):
    store = InMemoryConversationStore(clock=clock)
    store.save("b", [])
    store.save("a", [], ttl=5)
    store.save("z", [], namespace="other")
    assert store.list_conversations() == ["a", "b"]
    clock.advance(seconds=5)
    assert store.list_conversations() == ["b"]
    store.clear()
    assert store.list_conversations() == [] and store.list(namespace="other") == []


# --- Redis ---------------------------------------------------------------------------------------

def test_redis_unreachable_server_fails_fast():
    port = free_port()  # nothing listens there once the probe socket is closed
    start = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        RedisConversationStore(f"redis://127.0.0.1:{port}/0", socket_timeout=1.0)
    assert time.monotonic() - start < 5
    assert info.value.field == "store" and f"127.0.0.1:{port}" in str(info.value)
    assert info.value.__cause__ is not None


def test_redis_silent_server_times_out_instead_of_hanging():
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{port}"):
            RedisConversationStore(f"redis://127.0.0.1:{port}/0", socket_timeout=0.5)
        assert time.monotonic() - start < 3


def test_redis_accepts_a_ready_client(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url, decode_responses=True)
    with RedisConversationStore(client=client, prefix=f"client:{uuid.uuid4().hex}") as store:
        store.save("s:1", realistic_state(), namespace="ns:x")
        assert store.load("s:1", namespace="ns:x") == realistic_state()
        assert store.list(namespace="ns:x") == ["s:1"]
        assert store.list(namespace="ns") == []


def test_redis_server_gone_later_is_store_unavailable(redis_url):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                store = RedisConversationStore(f"redis://127.0.0.1:{port}/0", socket_timeout=0.5)
                break
            except StoreUnavailableError:
                assert time.monotonic() < deadline, "second redis-server did not start"
                time.sleep(0.05)
        store.save("s", {"v": 1})
    finally:
        proc.kill()
        proc.wait(timeout=10)
    for call in (lambda: store.load("s"), lambda: store.save("s", {}), lambda: store.delete("s"), store.list):
        start = time.monotonic()
        with pytest.raises(StoreUnavailableError) as info:
            call()
        assert time.monotonic() - start < 5 and info.value.__cause__ is not None


def test_redis_prefix_isolation(make_redis):
    base = f"iso:{uuid.uuid4().hex}"
    outer = make_redis(prefix=base)
    inner = make_redis(prefix=f"{base}:default")  # keys of `inner` start with outer's namespace head
    other = make_redis(prefix=f"{base}x")
    outer.save("s", {"who": "outer"})
    inner.save("s", {"who": "inner"})
    other.save("s", {"who": "other"})
    assert outer.list() == ["s"] and inner.list() == ["s"] and other.list() == ["s"]
    assert outer.load("s") == {"who": "outer"} and inner.load("s") == {"who": "inner"}
    assert inner.delete("s") is True
    assert outer.load("s") == {"who": "outer"}


def test_redis_glob_and_colon_namespaces_do_not_leak(make_redis):
    store = make_redis()
    namespaces = ["a", "ab", "a*", "a?", "[a]", "a\\", "a:b", "a%3Ab", "*"]
    for ns in namespaces:
        store.save(f"id-{ns}", {"ns": ns}, namespace=ns)
        store.save("x:y*", {"ns": ns}, namespace=ns)
    for ns in namespaces:
        assert store.list(namespace=ns) == sorted([f"id-{ns}", "x:y*"]), ns
        assert store.load("x:y*", namespace=ns) == {"ns": ns}
    assert store.list(namespace="?") == [] and store.list(namespace="a[") == []


def test_redis_missing_dependency_is_a_dependency_error(monkeypatch):
    import builtins

    from unified_memory.errors import DependencyError

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "redis" or name.startswith("redis."):
            raise ImportError("No module named 'redis'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(DependencyError, match=r"pip install 'unified-memory\[redis\]'"):
        RedisConversationStore()


def test_redis_bad_arguments():
    with pytest.raises(ValueError) as info:
        RedisConversationStore(prefix="")
    assert info.value.field == "prefix"
    with pytest.raises((ValueError, TypeError)) as info:
        RedisConversationStore(socket_timeout=0)
    assert info.value.field == "socket_timeout"


# --- package hygiene (test_packaging.py only walks top-level modules) ---------------------------

MODULES = ["tiers.sessions", "tiers.sessions._common", "tiers.sessions.memory", "tiers.sessions.json_files",
           "tiers.sessions.sqlite", "tiers.sessions.redis", "tiers.sessions.postgres"]


@pytest.mark.parametrize("name", MODULES)
def test_session_module_doctests_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0


def test_session_modules_respect_layering_and_size():
    allowed = {"scoring.errors"}
    for path in SESSIONS.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 220, path.name
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            for name in names:
                if name and name.split(".")[0] in {"unified_memory", "scoring", "tiers"}:
                    assert name in allowed or name.startswith("tiers."), f"{path.name} imports {name}"
