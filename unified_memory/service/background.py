"""The service in a child process, for tests, benchmarks and notebooks: :class:`ServiceProcess`
starts ``unified-memory serve`` on loopback on a free port, waits until it answers, creates
keys in its file, and stops it (SIGTERM: in-flight requests finish) or kills it (SIGKILL).

    >>> import tempfile
    >>> with ServiceProcess(tempfile.mkdtemp() + "/m.db") as service:   # doctest: +SKIP
    ...     key = service.create_key("ada")
    ...     # httpx.post(f"{service.url}/v1/users/ada/facts", json={"text": "I keep bees"},
    ...     #            headers={"Authorization": f"Bearer {key}"})
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from tiers.storage.postgres_backend import is_url

__all__ = ["ServiceProcess", "free_port"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServiceProcess:
    """``unified-memory serve --db PATH`` in a child process on ``127.0.0.1`` and a free port.

    ``args`` are more ``serve`` options (default ``--retrieval lexical``: no model to load);
    ``env`` is added to the child's environment. The child's stderr (its log) goes to
    ``log_path`` (a temporary file by default; :meth:`log` reads it).
    """

    def __init__(self, db: str | os.PathLike[str], *, args: Sequence[str] = ("--retrieval", "lexical"),
                 env: dict[str, str] | None = None, startup_timeout: float = 60.0,
                 log_path: str | os.PathLike[str] | None = None) -> None:
        self.db: str | Path = str(db) if is_url(db) else Path(db)  # a postgresql:// URL stays a URL
        self.args = list(args)
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.log_path = Path(log_path) if log_path is not None else Path(
            tempfile.mkstemp(prefix="unified-memory-serve-", suffix=".log")[1])
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ServiceProcess:
        """Start the child and wait until ``/healthz`` answers (a RuntimeError with its log if it does not)."""
        self.port = free_port()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "unified_memory", "serve", "--db", str(self.db), "--host", "127.0.0.1",
             "--port", str(self.port), *self.args],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the service exited with {self.process.returncode}:\n{self.log()}")
            if self.healthy():
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the service did not answer within {self.startup_timeout} s:\n{self.log()}")

    def healthy(self) -> bool:
        """Whether ``GET /healthz`` answers 200 now."""
        try:
            with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as answer:  # noqa: S310 - loopback
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def create_key(self, user: str | None = None, *, admin: bool = False, label: str = "") -> str:
        """A new key in the service's file (usable at once: keys are read per request), written
        by this process as ``unified-memory keys create`` writes it (no interpreter started)."""
        from tiers.maintenance.keys import KeyRing
        from tiers.storage.backend import Storage
        from unified_memory.errors import MemoryValueError
        from unified_memory.validation import check_scope_id

        if admin == (user is not None):
            raise MemoryValueError("user: create_key needs a user, or admin=True, not both", field="user")
        if user is not None:
            check_scope_id("user", user)
        storage = Storage(self.db)
        try:
            return KeyRing(storage).create(None if admin else user, admin=admin, label=label)[1]
        finally:
            storage.close()

    def log(self) -> str:
        """What the child wrote to stderr / stdout so far."""
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, then wait (requests in flight finish, the memory closes); SIGKILL after ``timeout``."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self._closed()

    def kill(self) -> int | None:
        """SIGKILL at once (what a crash looks like to the file)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        return self._closed()

    def _closed(self) -> int | None:
        if self._log is not None:
            self._log.close()
            self._log = None
        return None if self.process is None else self.process.returncode

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
