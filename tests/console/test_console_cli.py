"""``unified-memory ui``: the console on loopback for a local file, with a temporary admin key that
is revoked when the command stops; ``serve --no-console`` leaves the console out."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.console.conftest import form_value
from unified_memory import UnifiedMemory
from unified_memory.service.background import free_port

httpx = pytest.importorskip("httpx")
pytestmark = pytest.mark.sqlite_only


def _wait_for(url: str, process: subprocess.Popen[bytes], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer")


def test_ui_prints_an_address_and_a_key_that_works_until_it_stops(tmp_path):
    db = tmp_path / "m.db"
    with UnifiedMemory(db, user_id="ada", retrieval="lexical") as mem:
        mem.remember("I keep bees")
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "unified_memory", "--db", str(db), "--retrieval", "lexical",
                                "ui", "--port", str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        head = b""
        while b"um_" not in head:
            line = process.stderr.readline()
            assert line, process.stderr.read().decode()
            head += line
        text = head.decode()
        assert f"http://127.0.0.1:{port}/ui/" in text
        key = re.search(r"(um_[0-9a-f]{12}_\S+)", text).group(1)
        _wait_for(f"http://127.0.0.1:{port}/healthz", process)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=True) as client:
            page = client.get("/ui/login")
            users = client.post("/ui/login", data={"key": key, "nonce": form_value(page.text, "nonce")})
            assert users.status_code == 200 and "/ui/overview?u=ada" in users.text
            assert "I keep bees" in client.get("/ui/facts", params={"u": "ada"}).text
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    from tiers.maintenance.keys import KeyRing
    from tiers.storage.backend import Storage

    ring = KeyRing(Storage(db))
    try:
        assert ring.verify(key) is None and all(not r.active for r in ring.list() if r.admin)  # revoked
    finally:
        ring.storage.close()


def test_ui_needs_an_existing_file(tmp_path):
    done = subprocess.run([sys.executable, "-m", "unified_memory", "--db", str(tmp_path / "none.db"), "ui"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "none.db" in done.stderr


def test_serve_without_the_console(tmp_path):
    from unified_memory.service.background import ServiceProcess

    with ServiceProcess(tmp_path / "m.db", args=("--retrieval", "lexical", "--no-console")) as service:
        assert httpx.get(service.url + "/ui/login").status_code == 404
        assert "console at /ui" not in service.log()
