"""Spare connections (tiers.storage.pg_spares): while one thread holds a PostgreSQL memory's connection
(a write in progress), other threads' reads run on spares and see what was committed; with
``pool_size=1`` they take turns; a spare lost to a server restart never surfaces the driver's
error, and closing the memory closes the spares."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.pg_server import create_database, start_postgres
from tiers.storage.backend import Storage
from unified_memory import ClosedError, ConfigError, StorageUnavailableError, UnifiedMemory

psycopg = pytest.importorskip("psycopg")


def _connections(url: str) -> int:
    """Connections of this test's database opened by spare pools (their application_name)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND application_name = 'unified-memory' AND pid <> pg_backend_pid()").fetchone()[0]


class Holder:
    """A thread inside a write transaction (it inserted ``meta`` key ``k`` and has not committed)
    until :meth:`commit`."""

    def __init__(self, storage: Storage) -> None:
        self.inside, self.go = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._run, args=(storage,))
        self.thread.start()
        assert self.inside.wait(10)

    def _run(self, storage: Storage) -> None:
        with storage.atomic():
            storage.set_meta("k", "uncommitted")
            self.inside.set()
            self.go.wait(20)

    def commit(self) -> None:
        self.go.set()
        self.thread.join(10)


def _read_in_thread(storage: Storage, timeout: float) -> list:
    """``get_meta('k')`` in another thread: (its result or the error, seconds it took)."""
    out: list = []

    def read() -> None:
        began = time.monotonic()
        try:
            out.append(storage.get_meta("k"))
        except Exception as exc:  # noqa: BLE001  (reported to the test)
            out.append(exc)
        out.append(time.monotonic() - began)

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(timeout)
    return out


def test_reads_of_other_threads_run_beside_a_write_and_see_only_what_was_committed(pg_url):
    storage = Storage(pg_url, pool_size=3)
    try:
        with storage.atomic():
            storage.set_meta("k", "committed")
        holder = Holder(storage)
        try:
            out = _read_in_thread(storage, timeout=5)
            assert out[0] == "committed" and out[1] < 2.0  # did not wait for the write
            # several readers at once: at most pool_size - 1 spares are opened
            results: list = []
            threads = [threading.Thread(target=lambda: results.append(storage.get_meta("k"))) for _ in range(6)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(10)
            assert results == ["committed"] * 6
            assert 2 <= _connections(pg_url) <= 3  # the main connection and at most pool_size - 1 spares
        finally:
            holder.commit()
        assert storage.get_meta("k") == "uncommitted"  # the write committed; every thread sees it
        out = _read_in_thread(storage, timeout=5)
        assert out[0] == "uncommitted"
    finally:
        storage.close()


def test_a_read_waits_for_a_busy_spare_rather_than_for_the_write(pg_url):
    """Every spare busy: a read takes the first spare that frees (here after a 0.4 s read), not the
    main connection a write holds (here for as long as the test likes)."""
    storage = Storage(pg_url, pool_size=2)  # the main connection and one spare
    try:
        with storage.atomic():
            storage.set_meta("k", "committed")
        holder = Holder(storage)
        try:
            slow = threading.Thread(target=lambda: storage.execute("SELECT pg_sleep(0.4)").fetchall())
            slow.start()
            time.sleep(0.1)  # the slow read holds the one spare
            out = _read_in_thread(storage, timeout=5)
            slow.join(5)
            assert out and out[0] == "committed", out  # the spare's read: the write is not committed yet
            assert out[1] < 2.0, out
            assert holder.thread.is_alive()  # the write still holds the main connection
        finally:
            holder.commit()
    finally:
        storage.close()


def test_with_one_connection_reads_wait_for_the_write(pg_url):
    storage = Storage(pg_url, pool_size=1)
    try:
        holder = Holder(storage)
        out: list = []
        thread = threading.Thread(target=lambda: out.append(storage.get_meta("k")))
        thread.start()
        time.sleep(0.3)
        assert out == []  # waiting its turn on the one connection
        holder.commit()
        thread.join(10)
        assert out == ["uncommitted"]  # ran after the commit, on the same connection
        assert _connections(pg_url) == 1
    finally:
        storage.close()


def test_a_thread_inside_its_own_write_reads_its_own_rows(pg_url):
    storage = Storage(pg_url, pool_size=4)
    try:
        holder = Holder(storage)  # keeps another thread busy too, so spares exist
        _read_in_thread(storage, timeout=5)
        holder.commit()
        with storage.atomic():
            storage.set_meta("mine", "not yet committed")
            assert storage.get_meta("mine") == "not yet committed"  # the main connection, not a spare
    finally:
        storage.close()


def test_closing_closes_the_spares_and_refuses_later_reads(pg_url):
    storage = Storage(pg_url, pool_size=3)
    holder = Holder(storage)
    _read_in_thread(storage, timeout=5)
    assert _connections(pg_url) >= 2  # the main connection and a spare
    holder.commit()
    storage.close()
    deadline = time.monotonic() + 5
    while _connections(pg_url) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _connections(pg_url) == 0
    with pytest.raises(ClosedError):
        storage.get_meta("k")


def test_pool_size_is_a_setting_of_the_memory(pg_url):
    with pytest.raises(ConfigError, match="pool_size"):
        UnifiedMemory(pg_url, pool_size=0)
    with UnifiedMemory(pg_url, pool_size=2, retrieval="lexical", user_id="ada") as mem:
        mem.remember("I live in Lisbon")
        assert mem.config.pool_size == 2
        assert "I live in Lisbon" in [h.text for h in mem.recall("Lisbon")]


@pytest.fixture
def own_server(postgres_server):
    server = start_postgres(Path(tempfile.mkdtemp(prefix="um-pg-spares-")), postgres_server.bindir)
    try:
        yield server
    finally:
        server.stop()


def test_a_spare_lost_to_a_restart_never_surfaces_the_drivers_error(own_server):
    url = create_database(own_server)
    storage = Storage(url, pool_size=3)
    try:
        with storage.atomic():
            storage.set_meta("k", "v")
        holder = Holder(storage)
        out = _read_in_thread(storage, timeout=5)
        assert out[0] == "v"  # a spare is open (and idle in its pool) now
        holder.commit()
        own_server.stop(remove=False, mode="fast")
        own_server.start()
        seen = []  # the main connection was cut: at most one clear error, then it connects again
        for _ in range(2):
            try:
                seen.append(storage.get_meta("k"))
                break
            except StorageUnavailableError as exc:
                seen.append(exc)
        assert seen[-1] == "uncommitted", seen
        # the spare was cut too: the read goes back to the main connection (after the write), no error
        holder = Holder(storage)
        out: list = []
        reader = threading.Thread(target=lambda: out.append(storage.get_meta("k")))
        reader.start()
        time.sleep(0.3)
        holder.commit()
        reader.join(10)
        assert out == ["uncommitted"]
        holder = Holder(storage)  # and the next read beside a write gets a new spare
        out = _read_in_thread(storage, timeout=5)
        holder.commit()
        assert out[0] == "uncommitted" and out[1] < 2.0
    finally:
        storage.close()
