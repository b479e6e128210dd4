"""A second Storage on a file this process already holds open must not drop the process's
SQLite locks on it (the service opens the memory and its key ring on one file): otherwise
another process closing the file takes itself for the last user and deletes the write-ahead
log still in use here, and this process's later writes are lost to every other reader."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from tiers.storage.backend import Storage


@pytest.mark.sqlite_only  # about SQLite's write-ahead log file and POSIX locks; another process opens the path
def test_another_process_closing_the_file_leaves_this_process_s_log_alone(tmp_path):
    path = tmp_path / "m.db"
    first = Storage(path)
    second = Storage(path)  # the key ring beside the memory
    subprocess.run([sys.executable, "-c", f"from tiers.storage.backend import Storage; Storage({str(path)!r}).close()"],
                   check=True)
    assert (tmp_path / "m.db-wal").exists()
    with first.atomic() as db:
        db.execute("INSERT INTO meta(key, value) VALUES ('written', 'here')")
    reader = sqlite3.connect(path)
    try:
        assert reader.execute("SELECT value FROM meta WHERE key = 'written'").fetchone() == ("here",)
    finally:
        reader.close()
    second.close()
    first.close()
    third = Storage(path)  # closed ones are forgotten: a fresh open checks the file again
    assert third.get_meta("written") == "here"
    third.close()


def test_a_writer_waits_for_another_connections_write_then_takes_the_lock(tmp_path):
    """Another connection (as another process would) holds the write lock: the writer waits
    for it (polling, :meth:`Storage._begin_immediate`) and writes once it is released; the
    connection keeps its busy timeout for everything else; held past the timeout, the wait
    is a StorageError naming the file, and nothing was written."""
    import re
    import threading
    import time

    from tests.tiers.write_lock import busy_timeout_ms, hold_write_lock, release
    from tiers.storage.backend import Storage
    from unified_memory.errors import StorageError

    path = tmp_path / "m.db"
    holder, waiter = Storage(path), Storage(path, busy_timeout_ms=5000)
    try:
        hold_write_lock(holder)
        timer = threading.Timer(0.05, lambda: release(holder))
        timer.start()
        with waiter.atomic():
            waiter.execute("INSERT INTO meta (key, value) VALUES ('waited', '1')")
        timer.join()
        assert holder.get_meta("waited") == "1"
        assert busy_timeout_ms(waiter) == 5000
        impatient = Storage(path, busy_timeout_ms=100)
        hold_write_lock(holder)
        began = time.monotonic()
        with pytest.raises(StorageError, match=re.escape(impatient.location)):
            with impatient.atomic():
                impatient.execute("INSERT INTO meta (key, value) VALUES ('impatient', '1')")
        assert time.monotonic() - began >= 0.1  # it waited the whole timeout
        release(holder)
        assert holder.get_meta("impatient") is None
        assert busy_timeout_ms(impatient) == 100
        impatient.close()
    finally:
        holder.close()
        waiter.close()
