"""A throwaway PostgreSQL 15 server for tests and benchmarks: ``initdb`` into a temporary
directory, ``pg_ctl start`` on a free loopback port, trust authentication, durability off.

Used by the ``postgres_server`` / ``pg_url`` fixtures (tests/conftest.py); multi-process
tests and benchmarks can call :func:`start_postgres` themselves::

    server = start_postgres(Path(tempfile.mkdtemp()))
    try:
        url = create_database(server, "bench")
        ...
    finally:
        server.stop()

``initdb`` and ``pg_ctl`` refuse to run as root; as root they run as ``nobody`` (through
``setpriv``) in a directory handed to ``nobody``. Nothing here uses a cluster the system may
run itself (Debian's package starts one on port 5432): the server has its own port, its own
socket directory and its own data directory.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PgServer", "find_bindir", "start_postgres", "create_database", "drop_database", "schema_template", "MISSING"]

#: Why the PostgreSQL tests cannot run, when :func:`find_bindir` finds nothing.
MISSING = "PostgreSQL 15 is not installed: apt-get install postgresql"
DEFAULT_BINDIR = Path("/usr/lib/postgresql/15/bin")
SETTINGS = ("-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
START_TIMEOUT = 60  # seconds pg_ctl waits for the server to accept connections


def find_bindir() -> Path | None:
    """The directory of PostgreSQL 15's ``initdb`` and ``pg_ctl``: Debian's path, else what
    ``pg_config --bindir`` says (when that is version 15); ``None`` when neither has it."""
    if (DEFAULT_BINDIR / "initdb").is_file():
        return DEFAULT_BINDIR
    pg_config = shutil.which("pg_config")
    if pg_config is None:
        return None
    try:
        version = subprocess.run([pg_config, "--version"], capture_output=True, text=True, timeout=30).stdout
        bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    if not version.split()[-1].startswith("15") or not (Path(bindir) / "initdb").is_file():
        return None
    return Path(bindir)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_owner() -> list[str]:
    """The command prefix that runs a program as the owner of the data directory."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _run(command: list[str], what: str) -> None:
    """Run ``command`` as the data directory's owner. Its output goes to a temporary file, not a
    pipe: a server that ``pg_ctl`` starts inherits it and would hold a pipe open for its life."""
    with tempfile.TemporaryFile() as output:
        result = subprocess.run([*_as_owner(), *command], stdout=output, stderr=subprocess.STDOUT, timeout=300,
                                stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            output.seek(0)
            text = output.read().decode(errors="replace")[-4000:]
            raise RuntimeError(f"{what} failed ({result.returncode}): {text}")


@dataclass
class PgServer:
    """A running server: connect as ``user`` (no password) to ``host:port``; ``url`` is its
    ``postgres`` database. ``stop()`` ends it and removes ``root`` (the temporary directory)."""

    root: Path
    bindir: Path
    port: int
    host: str = "127.0.0.1"
    user: str = "postgres"

    @property
    def datadir(self) -> Path:
        """The cluster's data directory."""
        return self.root / "data"

    @property
    def log(self) -> Path:
        """The server's log file."""
        return self.root / "log"

    @property
    def url(self) -> str:
        """The URL of the server's ``postgres`` database."""
        return self.url_of("postgres")

    def url_of(self, database: str) -> str:
        """The URL of ``database`` on this server."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{database}"

    def _pg_ctl(self, *args: str) -> None:
        _run([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), *args], f"pg_ctl {args[-1]}")

    def start(self) -> None:
        """Start the server (``pg_ctl start``, waiting until it accepts connections)."""
        options = f"-c listen_addresses={self.host} -p {self.port} -k {self.root} {SETTINGS}"
        self._pg_ctl("-w", "-t", str(START_TIMEOUT), "-l", str(self.log), "-o", options, "start")

    def restart(self) -> None:
        """Restart the server (``pg_ctl restart -m fast``: sessions are cut, as in an outage)."""
        self._pg_ctl("-w", "-t", str(START_TIMEOUT), "-l", str(self.log), "-m", "fast", "restart")

    def stop(self, *, remove: bool = True, mode: str = "immediate") -> None:
        """Stop the server (at once by default: ``-m immediate``, which with this suite's
        ``synchronous_commit=off`` may lose the last commits; ``mode="fast"`` cuts the sessions and
        shuts down cleanly, as an administrator's restart does) and, with ``remove``, delete its directory."""
        with _ADMIN_LOCK:
            conn = _ADMIN.pop((self.host, self.port), None)
            if remove:
                _TEMPLATES.pop((self.host, self.port), None)
        if conn is not None:
            conn.close()
        try:
            self._pg_ctl("-w", "-m", mode, "stop")
        finally:
            if remove:
                shutil.rmtree(self.root, ignore_errors=True)


def start_postgres(root: Path, bindir: Path | None = None) -> PgServer:
    """``initdb`` a cluster in ``root/data`` (UTF8, C.UTF-8 locale, else C; trust auth, superuser
    ``postgres``) and start it on a free loopback port with its socket in ``root``."""
    bindir = bindir or find_bindir()
    if bindir is None:
        raise RuntimeError(MISSING)
    root.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(root, "nobody", "nogroup")
    initdb = [str(bindir / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth=trust",
              "--encoding=UTF8", "--no-sync"]
    try:
        _run([*initdb, "--locale=C.UTF-8"], "initdb")
    except RuntimeError:
        shutil.rmtree(root / "data", ignore_errors=True)
        _run([*initdb, "--locale=C"], "initdb")
    server = PgServer(root=root, bindir=bindir, port=_free_port())
    try:
        server.start()
    except RuntimeError as err:
        log = server.log.read_text(errors="replace")[-2000:] if server.log.exists() else ""
        raise RuntimeError(f"{err}\n{log}") from None
    return server


_ADMIN: dict[tuple[str, int], Any] = {}
_ADMIN_LOCK = threading.Lock()


def _admin(server: PgServer, statement: Any, params: Any = None) -> list[tuple[Any, ...]]:
    """Run ``statement`` on this process's connection to the server's ``postgres`` database
    (opened once and kept: a connection costs the server a new backend process; opened again
    when the server was restarted under it) and return the rows it gave (none for a command)."""
    import psycopg

    key = (server.host, server.port)
    with _ADMIN_LOCK:
        for attempt in (1, 2):
            conn = _ADMIN.get(key)
            if conn is None or conn.closed or conn.broken:
                conn = _ADMIN[key] = psycopg.connect(server.url, autocommit=True)
            try:
                cursor = conn.execute(statement, params)
                return cursor.fetchall() if cursor.description is not None else []
            except psycopg.OperationalError:
                if attempt == 2 or not (conn.closed or conn.broken):
                    raise
                _ADMIN.pop(key, None)
    raise AssertionError("unreachable")


def create_database(server: PgServer, name: str | None = None, *, template: str = "template0") -> str:
    """Create an empty database (``name``, else ``t_<12 hex digits>``) copied from ``template``
    and return its URL. ``template0`` is the pristine one: nothing a test adds to ``template1``
    leaks into it. ``STRATEGY FILE_COPY`` copies the template's files (~14 ms of the server's time
    here) instead of writing each of its blocks to the WAL (``WAL_LOG``, the default: ~28 ms)."""
    from psycopg import sql

    name = name or f"t_{uuid.uuid4().hex[:12]}"
    _admin(server, sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
        sql.Identifier(name), sql.Identifier(template)))
    return server.url_of(name)


_TEMPLATES: dict[tuple[str, int], str] = {}


def schema_template(server: PgServer) -> str:
    """The name of a template database on ``server`` that holds the memory's schema as a new
    memory creates it (created the first time it is asked for): a database copied from it opens
    in ~11 ms instead of ~38 ms for creating the schema. For tests whose subject is not the
    creation of the schema (``pg_url`` stays empty, from ``template0``)."""
    from psycopg import sql

    from tiers.storage.backend import Storage

    key = (server.host, server.port)
    with _ADMIN_LOCK:
        name = _TEMPLATES.get(key)
    if name is None:
        name = f"um_schema_{uuid.uuid4().hex[:8]}"
        url = create_database(server, name)
        Storage(url).close()
        _admin(server, sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false").format(
            sql.Identifier(name)))
        with _ADMIN_LOCK:
            name = _TEMPLATES.setdefault(key, name)
    return name


SESSIONS_GONE_TIMEOUT = 10.0  # seconds drop_database waits for a database's ended sessions to leave


def drop_database(server: PgServer, name: str) -> None:
    """Drop ``name``, ending its sessions first.

    ``DROP DATABASE ... WITH (FORCE)`` ends them itself, but then waits for them to leave in steps
    of 100 ms, and a closed client's backend is usually still exiting when the drop comes: most
    drops after a test took ~100 ms instead of ~7. Here the sessions are ended and their leaving
    is watched every millisecond; the drop then finds the database free (``FORCE`` stays, for a
    session that connects in between)."""
    from psycopg import sql

    others = "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    _admin(server, f"SELECT pg_terminate_backend(pid) {others}", (name,))
    deadline = time.monotonic() + SESSIONS_GONE_TIMEOUT
    while _admin(server, f"SELECT 1 {others} LIMIT 1", (name,)) and time.monotonic() < deadline:
        time.sleep(0.001)
    _admin(server, sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
