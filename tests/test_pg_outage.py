"""The PostgreSQL server goes away and comes back: calls in between fail with a clear
``StorageUnavailableError`` (never the driver's own error), nothing half-written, and the memory
(and its listener of other hosts' commits) recovers by itself, without being reopened."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest

from tests.pg_server import create_database, start_postgres
from unified_memory import StorageUnavailableError, UnifiedMemory

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def own_server(postgres_server):  # postgres_server: skips (or fails under CI) without PostgreSQL
    server = start_postgres(Path(tempfile.mkdtemp(prefix="um-pg-outage-")), postgres_server.bindir)
    try:
        yield server
    finally:
        server.stop()


def _eventually(check, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except (AssertionError, StorageUnavailableError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_an_outage_is_a_clear_error_and_the_memory_recovers_by_itself(own_server):
    url = create_database(own_server)
    mem = UnifiedMemory(url, user_id="ada", retrieval="lexical")
    other = UnifiedMemory(url, user_id="ada", retrieval="lexical")  # another host's memory
    try:
        mem.remember("I'm allergic to peanuts")
        assert any("peanuts" in h.text for h in other.recall("allergic"))

        own_server.stop(remove=False, mode="fast")  # a restart by the administrator
        for call in (lambda: mem.recall("allergic"), lambda: mem.remember("I live in Lisbon"),
                     lambda: mem.add_turn("hello?"), mem.facts):
            with pytest.raises(StorageUnavailableError) as caught:
                call()
            assert caught.value.field == "path" and "127.0.0.1" in str(caught.value)
            assert not isinstance(caught.value, psycopg.Error)

        own_server.start()
        # the next call connects again: what was stored is there, what failed was not written
        assert [f.text for f in _eventually(mem.facts)] == ["I'm allergic to peanuts"]
        mem.remember("My sister Maria plays the cello")
        assert any("cello" in h.text for h in mem.recall("what does Maria play?"))
        # the other host hears of the new write again (its listener reconnected)
        _eventually(lambda: [h for h in other.recall("Maria cello") if "cello" in h.text] or _fail())
    finally:
        mem.close()
        other.close()


def test_opening_while_the_server_is_down_is_a_clear_error(own_server):
    url = create_database(own_server)
    own_server.stop(remove=False, mode="fast")
    with pytest.raises(StorageUnavailableError, match="cannot connect"):
        UnifiedMemory(url, user_id="ada", retrieval="lexical")
    own_server.start()
    with UnifiedMemory(url, user_id="ada", retrieval="lexical") as mem:
        assert mem.facts() == []


def _fail():
    raise AssertionError("not yet")


def _terminate(url: str, pid: int) -> None:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_connection_lost_at_the_commit_is_reported_as_an_unknown_outcome(pg_url):
    """Cut before the commit was sent: nothing was written, and the error says so. Cut as the
    commit is sent: the client cannot know whether it took effect, and the error says that
    (never "nothing was written")."""
    from tiers.storage.backend import Storage

    storage = Storage(pg_url)
    try:
        pid = storage.execute("SELECT pg_backend_pid()").fetchone()[0]
        with pytest.raises(StorageUnavailableError, match="nothing of this call was written"):
            with storage.atomic():
                storage.set_meta("first", "1")
                _terminate(pg_url, pid)
                storage.set_meta("second", "2")  # the statement after the cut fails
        assert _eventually(lambda: storage.get_meta("first")) is None
        pid = storage.execute("SELECT pg_backend_pid()").fetchone()[0]
        with pytest.raises(StorageUnavailableError, match="may or may not have been stored") as caught:
            with storage.atomic():
                storage.set_meta("third", "3")
                _terminate(pg_url, pid)  # the last statement ran; the commit goes to a closed connection
        assert caught.value.field == "path" and not isinstance(caught.value, psycopg.Error)
        assert _eventually(lambda: storage.get_meta("third")) is None  # here it was not (the server cut first)
    finally:
        storage.close()


def test_the_server_and_the_client_probe_a_silent_peer(pg_url):
    """A host that dies holding the writer lock sends nothing: the server probes its idle
    connection (TCP keepalives, 10 s then every 5 s, 3 tries) and ends the session, which frees
    the lock in ~25 s rather than after the kernel's default two hours. The client probes the
    server the same way, unless the URL chooses otherwise."""
    from tiers.storage.backend import Storage

    storage = Storage(pg_url)
    try:
        settings = storage.query("SELECT current_setting('tcp_keepalives_idle') AS idle, "
                                 "current_setting('tcp_keepalives_interval') AS every, "
                                 "current_setting('tcp_keepalives_count') AS count, "
                                 "current_setting('lock_timeout') AS lock")[0]
        assert settings == {"idle": "10", "every": "5", "count": "3", "lock": "10s"}
        info = storage.backend._conn.info.get_parameters()  # noqa: SLF001  (the driver's view of the connection)
        assert info.get("keepalives_idle") == "10" and info.get("keepalives") == "1"
    finally:
        storage.close()
    chosen = Storage(f"{pg_url}?keepalives_idle=30")
    try:
        assert chosen.backend._conn.info.get_parameters().get("keepalives_idle") == "30"  # noqa: SLF001
    finally:
        chosen.close()
