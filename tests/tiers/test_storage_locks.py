"""A second Storage on a file this process already holds open must not drop the process's
SQLite locks on it (the service opens the memory and its key ring on one file): otherwise
another process closing the file takes itself for the last user and deletes the write-ahead
log still in use here, and this process's later writes are lost to every other reader."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

from tiers.storage import Storage


def test_another_process_closing_the_file_leaves_this_process_s_log_alone(tmp_path):
    path = tmp_path / "m.db"
    first = Storage(path)
    second = Storage(path)  # the key ring beside the memory
    subprocess.run([sys.executable, "-c", f"from tiers.storage import Storage; Storage({str(path)!r}).close()"],
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
