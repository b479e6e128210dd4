"""The service's connections in the test process: a real uvicorn server built as ``serve`` builds it
(``_graceful_server`` and the options of ``uvicorn_options``) runs in a thread on 127.0.0.1 and is
driven over sockets, with both HTTP protocols the service may use (httptools' and h11's, each with
the head deadline):

- a request head must be complete ``header_timeout`` seconds after the connection opened (or after
  its first byte on a kept-alive connection) and hold at most 64 KiB, else the connection is closed
  without an answer; a body that stalls is answered 408;
- requests beyond ``max_connections`` open connections are answered 503;
- ``X-Forwarded-For`` names the client (for the failed-authentication limiter and the access log)
  only when the peer is a trusted proxy;
- ``serve`` answers until SIGTERM, then stops gracefully (no signal raised again, the handlers it
  replaced restored, the memory closed with its writes committed); ``serve_workers`` hands each
  worker process the file and the settings.

test_security_http.py checks the same limits on ``unified-memory serve`` in a child process.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.service.conftest import bearer
from tiers.maintenance.keys import KeyRing
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory
from unified_memory.errors import ClosedError

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from unified_memory.service import app as app_module  # noqa: E402
from unified_memory.service import connections  # noqa: E402
from unified_memory.service.app import WORKER_SPEC, ServiceSettings, create_app, serve, serve_workers  # noqa: E402
from unified_memory.service.background import free_port  # noqa: E402

PROTOCOLS = {"h11": connections.H11Deadline}
if hasattr(connections, "HttpToolsDeadline"):
    PROTOCOLS["httptools"] = connections.HttpToolsDeadline
WAIT = 10.0  # the most any test waits for the server to do something (it takes well under a second)


@pytest.fixture(autouse=True)
def _process_settings() -> Iterator[None]:
    """What ``serve`` sets for the whole process (the head deadline, the collector, the GIL's switch
    interval, uvicorn's loggers) is put back after each test."""
    deadline, thresholds, interval = connections._Deadline.header_timeout, gc.get_threshold(), sys.getswitchinterval()
    loggers = {name: logging.getLogger(name) for name in ("uvicorn", "uvicorn.error", "uvicorn.access")}
    saved = {name: (lg.level, list(lg.handlers), lg.propagate) for name, lg in loggers.items()}
    yield
    connections.set_header_timeout(deadline)
    gc.set_threshold(*thresholds)
    sys.setswitchinterval(interval)
    for name, (level, handlers, propagate) in saved.items():
        loggers[name].setLevel(level)
        loggers[name].handlers[:] = handlers
        loggers[name].propagate = propagate


@contextlib.contextmanager
def running(tmp_path: Any, protocol: str = "httptools", **chosen: Any) -> Iterator[tuple[int, str]]:
    """The service over a fresh file, served by uvicorn in a thread with ``serve``'s options for
    ``chosen`` settings (and ``protocol``'s HTTP implementation): its port and a key for ada."""
    settings = ServiceSettings(mcp=False, **chosen)
    memory = UnifiedMemory(str(tmp_path / f"{protocol}.db"), retrieval="lexical")
    app = create_app(memory, settings=settings)
    key = app.state.keys.create("ada")[1]
    options = {**app_module._connections(settings), "http": PROTOCOLS[protocol]}
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, log_level="warning", access_log=False,
                            lifespan="on", timeout_graceful_shutdown=5, **options)
    server = app_module._graceful_server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-under-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + WAIT
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "uvicorn did not start"
    try:
        yield server.servers[0].sockets[0].getsockname()[1], key
    finally:
        server.should_exit = True
        thread.join(WAIT)
        assert not thread.is_alive(), "uvicorn did not stop"
    with pytest.raises(ClosedError):  # the lifespan closed the memory
        memory.stats()


def closed_after(sock: socket.socket, within: float = WAIT) -> bytes | None:
    """What the server sent on ``sock`` before closing it, or None if it is still open after ``within`` s."""
    sock.settimeout(0.1)
    data = b""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:  # reset
            return data
        if not chunk:
            return data
        data += chunk
    return None


def read_response(sock: socket.socket) -> bytes:
    """One complete response with a Content-Length (the connection stays open)."""
    sock.settimeout(WAIT)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return head + b"\r\n\r\n" + body


@pytest.fixture(params=sorted(PROTOCOLS))
def protocol(request) -> str:
    return str(request.param)


# -- slow and large request heads ------------------------------------------------------------------------

def test_a_head_not_complete_in_time_closes_the_connection_unanswered(tmp_path, protocol):
    """A half head or silence is closed unanswered after ``header_timeout``; a head in parts within it is
    served, and on a kept-alive connection the next head has its own deadline."""
    with running(tmp_path, protocol, header_timeout=1.0) as (port, _):
        with socket.create_connection(("127.0.0.1", port)) as half:
            half.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            assert closed_after(half) == b""
        with socket.create_connection(("127.0.0.1", port)) as silent:
            assert closed_after(silent) == b""
        with socket.create_connection(("127.0.0.1", port)) as split:  # two parts within the deadline: served
            split.sendall(b"GET /healthz HTTP/1.1\r\n")
            time.sleep(0.1)
            split.sendall(b"Host: x\r\n\r\n")
            first = read_response(split)
            assert first.startswith(b"HTTP/1.1 200") and first.endswith(b'{"status":"ok"}')
            split.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # kept alive: the next request too
            assert read_response(split).startswith(b"HTTP/1.1 200")
            split.sendall(b"GET /healthz HTTP/1.1\r\nHo")  # and the next head has its own deadline
            assert closed_after(split) == b""


@pytest.mark.parametrize(("protocol", "size", "refusal"), [
    pytest.param("httptools", 70_000, b"", marks=pytest.mark.skipif("httptools" not in PROTOCOLS, reason="no httptools")),
    ("h11", 70_000, b""),  # h11 alone would serve a head that arrives whole: the protocol counts it
    ("h11", 300_000, b""),
])
def test_a_head_over_64_kib_is_not_served(tmp_path, protocol, size, refusal):
    """A request head past 64 KiB (a header or the URL) is never served; one under it is."""
    with running(tmp_path, protocol, header_timeout=60) as (port, _):
        with socket.create_connection(("127.0.0.1", port)) as fits:
            fits.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 60_000 + b"\r\n\r\n")
            assert read_response(fits).startswith(b"HTTP/1.1 200")
        for head in (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * size + b"\r\n\r\n",
                     b"GET /healthz?" + b"q" * size + b" HTTP/1.1\r\nHost: x\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port)) as huge:
                with contextlib.suppress(OSError):  # the server may close while the head is still going out
                    huge.sendall(head)
                answer = closed_after(huge)
            assert answer is not None, "the connection stayed open"
            assert answer.startswith(refusal) if refusal else answer == b"", answer[:200]


def test_a_long_body_after_a_short_head_is_not_counted_as_head(tmp_path, protocol):
    """Only the head counts toward the 64 KiB, also when its blank line is split between two reads and
    a long body follows in the same read as its last byte."""
    with running(tmp_path, protocol, header_timeout=60) as (port, _):
        with socket.create_connection(("127.0.0.1", port)) as conn:
            body = b"x" * 200_000
            conn.sendall(b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r")
            time.sleep(0.1)
            conn.sendall(b"\n" + body)
            answer = read_response(conn)
        assert answer.startswith(b"HTTP/1.1 405"), answer[:200]  # served (GET only), not closed unanswered


def test_a_body_that_stalls_is_answered_408_and_the_connection_closed(tmp_path, protocol):
    """A body that stalls past ``body_timeout`` is answered 408 and the connection closed, nothing written;
    a body that pauses for less is served."""
    with running(tmp_path, protocol, body_timeout=1.0) as (port, key):
        with socket.create_connection(("127.0.0.1", port)) as stalled:
            stalled.sendall(b"POST /v1/users/ada/facts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode()
                            + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n" + b'{"text": "I ')
            answer = closed_after(stalled)
        assert answer is not None and answer.startswith(b"HTTP/1.1 408"), answer
        body = json.loads(answer.partition(b"\r\n\r\n")[2])
        assert (body["error"]["type"], body["error"]["field"]) == ("timeout", "body")
        with socket.create_connection(("127.0.0.1", port)) as paused:  # a body after a pause under the timeout
            body = b'{"text": "I keep bees"}'
            paused.sendall(b"POST /v1/users/ada/facts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode()
                           + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                           + b"\r\n\r\n")
            time.sleep(0.1)
            paused.sendall(body)
            assert read_response(paused).startswith(b"HTTP/1.1 201")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=bearer(key)) as http:
            assert [f["text"] for f in http.get("/v1/users/ada/facts").json()["facts"]] == ["I keep bees"]


# -- many connections ---------------------------------------------------------------------------------------

def test_requests_beyond_max_connections_are_answered_503(tmp_path):
    """With ``max_connections`` connections held open, a request on another is answered 503; once they
    close, 200 again."""
    with running(tmp_path, max_connections=2, header_timeout=60) as (port, _):
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        try:
            for sock in held:
                sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # heads that hold their connections
            statuses = _statuses_until(port, 503)
            assert statuses[-1] == 503
        finally:
            for sock in held:
                sock.close()
        assert _statuses_until(port, 200)[-1] == 200  # the closed connections freed their places


def _statuses_until(port: int, wanted: int) -> list[int]:
    """``GET /healthz`` on new connections until it answers ``wanted`` (the server registers and
    forgets connections asynchronously), at most for :data:`WAIT` seconds."""
    seen: list[int] = []
    deadline = time.monotonic() + WAIT
    while (not seen or seen[-1] != wanted) and time.monotonic() < deadline:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            seen.append(http.get("/healthz").status_code)
    return seen


# -- who the client is --------------------------------------------------------------------------------------

def _guesses(port: int, forwarded: list[str]) -> list[int]:
    with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
        return [http.get("/v1/users/ada/stats", headers={**bearer("um_guess"), "X-Forwarded-For": f}).status_code
                for f in forwarded]


def test_forwarded_for_names_the_client_only_behind_a_trusted_proxy(tmp_path, caplog):
    """``X-Forwarded-For`` is ignored from an untrusted peer (forged addresses share the peer's failure
    count) and names the client behind a trusted proxy (its own count, the access log's ``client``)."""
    caplog.set_level(logging.INFO, logger="unified_memory.service.access")
    forged = ["203.0.113.1", "203.0.113.2", "203.0.113.3"]
    with running(tmp_path, max_failed_auth=2) as (port, key):
        assert _guesses(port, forged) == [401, 401, 429]  # every forged address is the one peer
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            assert http.get("/v1/users/ada/stats", headers={**bearer(key), "X-Forwarded-For": "203.0.113.1"}
                            ).status_code == 200
    clients = {json.loads(r.getMessage())["client"] for r in caplog.records if r.name == "unified_memory.service.access"}
    assert clients == {"127.0.0.1"}

    caplog.clear()
    with running(tmp_path, "h11", max_failed_auth=2, trusted_proxies=["127.0.0.0/8"]) as (port, key):
        assert _guesses(port, ["198.51.100.7"] * 3) == [401, 401, 429]
        assert _guesses(port, ["198.51.100.8"]) == [401]  # another client behind the proxy is not throttled
    clients = {json.loads(r.getMessage())["client"] for r in caplog.records if r.name == "unified_memory.service.access"}
    assert clients == {"198.51.100.7", "198.51.100.8"}


# -- serve and serve_workers --------------------------------------------------------------------------------

def test_serve_answers_until_sigterm_then_stops_gracefully(tmp_path, monkeypatch):
    """``serve`` in the main thread: SIGTERM stops it (the call returns, nothing is raised), the signal
    handlers it installed are replaced by those it found, and the memory is closed with the write it
    answered committed."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are installed from the main thread only")
    db = str(tmp_path / "m.db")
    memory = UnifiedMemory(db, retrieval="lexical")
    storage = Storage(db)
    key = KeyRing(storage).create("ada")[1]
    storage.close()
    servers: list[Any] = []
    real = app_module._graceful_server

    def graceful(config: Any) -> Any:
        servers.append(real(config))
        return servers[-1]

    monkeypatch.setattr(app_module, "_graceful_server", graceful)
    port = free_port()
    seen: dict[str, Any] = {}

    def client() -> None:
        try:
            deadline = time.monotonic() + WAIT
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=bearer(key)) as http:
                while time.monotonic() < deadline:
                    with contextlib.suppress(httpx.TransportError):
                        if http.get("/healthz").status_code == 200:
                            break
                    time.sleep(0.02)
                written = http.post("/v1/users/ada/facts", json={"text": "I keep bees"})
                seen["written"] = (written.status_code, written.json())
            handler = signal.getsignal(signal.SIGTERM)
            seen["handler"] = handler
            if servers and handler == servers[0].handle_exit:
                os.kill(os.getpid(), signal.SIGTERM)
            elif servers:  # no handler of the server's: SIGTERM would end the test run
                servers[0].should_exit = True
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            seen["failed"] = exc
            if servers:
                servers[0].should_exit = True

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    helper = threading.Thread(target=client, daemon=True)
    helper.start()
    serve(memory, host="127.0.0.1", port=port, settings={"mcp": False}, log_level="warning")
    helper.join(WAIT)
    assert "failed" not in seen, seen.get("failed")
    status, body = seen["written"]
    assert status == 201, body
    assert seen["handler"] == servers[0].handle_exit  # serve's own handler took SIGTERM
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert gc.get_threshold() == app_module.GC_THRESHOLDS  # a service process collects less often
    with pytest.raises(ClosedError):
        memory.stats()
    with UnifiedMemory(db, user_id="ada", retrieval="lexical") as again:
        assert [f.id for f in again.facts()] == [body["id"]]


def test_serve_workers_hands_every_worker_the_file_and_the_settings(tmp_path, monkeypatch):
    """``serve_workers`` asks uvicorn for N worker processes of ``app_from_environment``; a worker
    built from what it was handed (here in this process) serves the file with the settings given."""
    db = str(tmp_path / "m.db")
    storage = Storage(db)
    key = KeyRing(storage).create("ada")[1]
    storage.close()
    monkeypatch.delenv(WORKER_SPEC, raising=False)  # put back as it was (absent) after the test
    asked: dict[str, Any] = {}

    def run(target: str, **options: Any) -> None:  # what each worker process does, once, here
        asked.update(options, target=target)
        config = uvicorn.Config(target, log_config=None, **{k: v for k, v in options.items() if k != "workers"})
        config.load()
        asked["app"] = config.loaded_app

    monkeypatch.setattr(uvicorn, "run", run)
    serve_workers(db, workers=3, overrides={"retrieval": "lexical"}, port=0, log_level="warning",
                  settings={"mcp": False, "max_body_bytes": 2048, "header_timeout": 2.5, "max_connections": 7})
    assert (asked["workers"], asked["factory"], asked["target"]) == (
        3, True, "unified_memory.service.app:app_from_environment")
    assert asked["limit_concurrency"] == 8 and asked["proxy_headers"] is False
    assert connections._Deadline.header_timeout == 2.5  # each worker's head deadline
    assert json.loads(os.environ[WORKER_SPEC])["overrides"] == {"retrieval": "lexical"}
    with TestClient(asked["app"]) as http:
        assert http.post("/v1/users/ada/facts", json={"text": "I keep bees"}, headers=bearer(key)).status_code == 201
        too_large = http.post("/v1/users/ada/facts", json={"text": "x" * 3000}, headers=bearer(key))
        assert too_large.status_code == 413 and "2048" in too_large.json()["error"]["message"]
        assert http.get("/mcp", headers=bearer(key)).status_code == 404  # mcp=False reached the worker
    with UnifiedMemory(db, user_id="ada", retrieval="lexical") as again:
        assert [f.text for f in again.facts()] == ["I keep bees"]
