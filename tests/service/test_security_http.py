"""Security findings of ``serve`` (issue 36) through the HTTP layer:

- finding 5: ``X-Forwarded-For`` counts only from a trusted proxy (``--trusted-proxy``; none by
  default), and the failed-authentication limiter slows guessing from an address without
  locking out a key that authenticates;
- finding 6: a request head must arrive within ``--header-timeout`` seconds (a connection that
  trickles it is closed), a stalled body is answered 408 after ``--body-timeout`` seconds, and
  connections over ``--max-connections`` are answered 503;
- finding 8: a body that is not UTF-8 or nests past the JSON parser's depth is 400
  ``malformed_json`` naming ``body``, and NUL is refused anywhere in a keyed item's value
  (422 naming ``value``), as in text and metadata.

What depends on the server (addresses, sockets, timeouts) runs the real service in a child process on
loopback; the rest runs in process.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.service.conftest import bearer
from unified_memory import MemoryValueError, UnifiedMemory
from unified_memory.service.background import ServiceProcess

httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient  # noqa: E402

from unified_memory.service.app import create_app  # noqa: E402

LEXICAL = ["--retrieval", "lexical", "--no-mcp"]


@pytest.fixture
def app_client(tmp_path, storage_backend) -> Iterator[tuple[TestClient, str, str]]:
    """The service in process (max 3 failed authentications a minute), a key for ada and one for bob."""
    memory = UnifiedMemory(str(tmp_path / "m.db"), retrieval="lexical")
    app = create_app(memory, settings={"max_failed_auth": 3, "mcp": False})
    ada = app.state.keys.create("ada")[1]
    bob = app.state.keys.create("bob")[1]
    with TestClient(app) as client:
        yield client, ada, bob


def _closed_within(sock: socket.socket, seconds: float, *, trickle: bytes = b"") -> bool:
    """Whether the server closes ``sock`` within ``seconds`` (reading, and sending ``trickle`` a byte
    every 0.2 s meanwhile)."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.2)
    sent = 0
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except TimeoutError:
            pass
        except OSError:  # reset by the server
            return True
        if sent < len(trickle):
            try:
                sock.sendall(trickle[sent:sent + 1])
            except OSError:
                return True
            sent += 1
    return False


def _read_all(sock: socket.socket, seconds: float) -> bytes:
    """What the server sends until it closes ``sock`` (or ``seconds`` pass)."""
    deadline = time.monotonic() + seconds
    sock.settimeout(0.5)
    data = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    return data


# -- finding 5: forwarded headers and the failed-authentication limiter -------------------------------------------

@pytest.mark.slow
def test_forwarded_for_is_ignored_unless_the_proxy_is_trusted(tmp_path):
    with ServiceProcess(tmp_path / "m.db", args=[*LEXICAL, "--max-failed-auth", "3"]) as svc:
        good = svc.create_key("ada")
        with httpx.Client(base_url=svc.url) as http:
            for i in range(3):  # a new forged address each time does not escape the limiter
                answer = http.get("/v1/users/ada/stats", headers={**bearer("um_guess"), "X-Forwarded-For": f"203.0.113.{i}"})
                assert answer.status_code == 401, answer.text
            answer = http.get("/v1/users/ada/stats", headers={**bearer("um_guess"), "X-Forwarded-For": "203.0.113.99"})
            assert answer.status_code == 429, answer.text
            # the valid key gets in from the throttled address, whatever address it claims
            for forged in ("203.0.113.0", "127.0.0.1", None):
                headers = bearer(good) | ({"X-Forwarded-For": forged} if forged else {})
                assert http.get("/v1/users/ada/stats", headers=headers).status_code == 200
        assert '"client": "203.0.113.' not in svc.log()  # the access log names the real peer

    with ServiceProcess(tmp_path / "p.db", args=[*LEXICAL, "--max-failed-auth", "3", "--trusted-proxy", "127.0.0.1"]) as svc:
        good = svc.create_key("ada")
        with httpx.Client(base_url=svc.url) as http:
            def guess(address: str) -> int:
                return http.get("/v1/users/ada/stats", headers={**bearer("um_guess"), "X-Forwarded-For": address}).status_code

            assert [guess("198.51.100.7") for _ in range(4)] == [401, 401, 401, 429]
            assert guess("198.51.100.8") == 401  # another caller behind the proxy is not throttled
            assert http.get("/v1/users/ada/stats", headers={**bearer(good), "X-Forwarded-For": "198.51.100.7"}).status_code == 200
        assert '"client": "198.51.100.7"' in svc.log()


def test_a_throttled_address_still_admits_valid_keys(app_client):
    client, ada, bob = app_client
    for _ in range(3):
        assert client.get("/v1/users/ada/stats", headers=bearer("um_guess")).status_code == 401
    for headers in (bearer("um_guess"), bearer("um_0123456789ab_" + "x" * 43), {}):
        throttled = client.get("/v1/users/ada/stats", headers=headers)
        assert throttled.status_code == 429, throttled.text
        assert int(throttled.headers["retry-after"]) >= 1
        assert throttled.json()["error"]["type"] == "too_many_attempts"
    # the tenants of the address are not locked out by someone else's guessing
    assert client.get("/v1/users/ada/stats", headers=bearer(ada)).status_code == 200
    assert client.get("/v1/users/bob/stats", headers=bearer(bob)).status_code == 200
    assert client.get("/v1/users/ada/stats", headers=bearer(bob)).status_code == 403  # a valid key is still authorized
    # a valid key does not lift the throttle for guesses
    assert client.get("/v1/users/ada/stats", headers=bearer("um_guess")).status_code == 429


# -- finding 6: slow clients and the connection limit ---------------------------------------------------------------

@pytest.mark.slow
def test_slow_heads_and_stalled_bodies_are_cut_off(tmp_path):
    with ServiceProcess(tmp_path / "m.db", args=[*LEXICAL, "--header-timeout", "1", "--body-timeout", "1"]) as svc:
        key = svc.create_key("ada")
        address = ("127.0.0.1", svc.port)
        with socket.create_connection(address) as half:  # half a head, then silence
            half.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            assert _closed_within(half, 10)
        with socket.create_connection(address) as silent:  # nothing at all
            assert _closed_within(silent, 10)
        with socket.create_connection(address) as trickling:  # a byte every 0.2 s: still closed
            head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 200 + b"\r\n\r\n"
            assert _closed_within(trickling, 10, trickle=head)

        with socket.create_connection(address) as stalled:  # a body that stops after 10 of 100 bytes
            stalled.sendall(b"POST /v1/users/ada/facts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key.encode()
                            + b"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n" + b'{"text": "')
            answer = _read_all(stalled, 10)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b'"type":"timeout"' in answer.replace(b" ", b"") and b'"field":"body"' in answer.replace(b" ", b"")

        with httpx.Client(base_url=svc.url, headers=bearer(key)) as http:  # normal requests are unaffected
            assert http.post("/v1/users/ada/facts", json={"text": "I keep bees"}).status_code == 201
            assert http.get("/v1/users/ada/stats").json()["facts"] == 1
        with socket.create_connection(address) as split:  # a head in two parts within the timeout is fine
            split.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            time.sleep(0.3)
            split.sendall(b"Connection: close\r\n\r\n")
            assert _read_all(split, 10).startswith(b"HTTP/1.1 200")


@pytest.mark.slow
def test_worker_processes_keep_the_limits(tmp_path):
    """``serve --workers``: each worker process applies the head deadline and the settings."""
    args = [*LEXICAL, "--workers", "2", "--header-timeout", "1", "--max-failed-auth", "2"]
    with ServiceProcess(tmp_path / "m.db", args=args) as svc:
        halves = [socket.create_connection(("127.0.0.1", svc.port)) for _ in range(4)]  # likely both workers
        try:
            for sock in halves:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            assert all(_closed_within(sock, 5) for sock in halves)  # 1 s, not the default 10 s
        finally:
            for sock in halves:
                sock.close()
        with httpx.Client(base_url=svc.url) as http:
            statuses = [http.get("/v1/users/ada/stats", headers={**bearer("um_guess"), "X-Forwarded-For": f"203.0.113.{i}"}
                                 ).status_code for i in range(3)]
            assert statuses == [401, 401, 429]  # one connection: one worker, which ignores the forged header


def test_connections_over_the_limit_are_refused(tmp_path):
    with ServiceProcess(tmp_path / "m.db", args=[*LEXICAL, "--max-connections", "3", "--header-timeout", "60"]) as svc:
        idle = [socket.create_connection(("127.0.0.1", svc.port)) for _ in range(3)]
        try:
            for sock in idle:
                sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # slow heads hold their connections
            deadline, status = time.monotonic() + 10, 0
            while status != 503 and time.monotonic() < deadline:
                with httpx.Client(base_url=svc.url) as http:
                    status = http.get("/healthz").status_code
            assert status == 503
        finally:
            for sock in idle:
                sock.close()
        deadline, status = time.monotonic() + 10, 0
        while status != 200 and time.monotonic() < deadline:
            with httpx.Client(base_url=svc.url) as http:
                status = http.get("/healthz").status_code
        assert status == 200


# -- finding 8: one error format for unreadable bodies; NUL in keyed items ---------------------------------------------

@pytest.mark.parametrize(("body", "content_type"), [
    (b'{"text": "caf\xe9"}', "application/json"),  # not UTF-8
    ('{"text": "café"}'.encode("latin-1"), "application/json; charset=latin-1"),  # a charset other than UTF-8
    (b'{"text": "x", "metadata": ' + b'{"a": ' * 995 + b"1" + b"}" * 995 + b"}", "application/json"),  # too deep
    (b"[" * 5000 + b"]" * 5000, "application/json"),
], ids=["not-utf8", "latin-1", "nested-object", "nested-list"])
def test_unreadable_bodies_are_malformed_json(app_client, body, content_type):
    client, ada, _ = app_client
    answer = client.post("/v1/users/ada/facts", content=body, headers={**bearer(ada), "Content-Type": content_type})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert (error["type"], error["field"]) == ("malformed_json", "body"), error
    assert client.get("/v1/users/ada/stats", headers=bearer(ada)).json()["facts"] == 0


NUL_VALUES = [{"a": "x\x00y"}, {"a\x00": 1}, {"a": {"b": ["ok", "\x00"]}}, {"a": [{"k\x00": None}]}]


@pytest.mark.parametrize("storage_backend", ["sqlite", "postgresql"], indirect=True)
def test_nul_anywhere_in_a_keyed_item_value_is_refused(tmp_path, storage_backend):
    with UnifiedMemory(str(tmp_path / "m.db"), user_id="ada", retrieval="lexical") as mem:
        for value in NUL_VALUES:
            with pytest.raises(MemoryValueError) as refused:
                mem.put_item(("notes",), "k", value)
            assert refused.value.field == "value" and "NUL" in str(refused.value)
            with pytest.raises(ValueError):
                mem.put_item(("notes",), "k", value)
        with pytest.raises(MemoryValueError) as refused_metadata:  # the same rule as metadata
            mem.remember("x", metadata={"a": "\x00"})
        assert str(refused.value).split(": ", 1)[1] == str(refused_metadata.value).split(": ", 1)[1]
        assert mem.get_item(("notes",), "k") is None
        mem.put_item(("notes",), "k", {"a": "\\u0000 is fine as text", "b": ["\x01"]})
        assert mem.get_item(("notes",), "k").value == {"a": "\\u0000 is fine as text", "b": ["\x01"]}


@pytest.mark.parametrize("storage_backend", ["sqlite", "postgresql"], indirect=True)
def test_nul_in_a_keyed_item_value_is_422_over_http(app_client, storage_backend):
    client, ada, _ = app_client
    for value in NUL_VALUES:
        answer = client.put("/v1/users/ada/items", json={"namespace": ["notes"], "key": "k", "value": value},
                            headers=bearer(ada))
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["field"] == "value"
    answer = client.post("/v1/users/ada/items/get", json={"namespace": ["notes"], "key": "k"}, headers=bearer(ada))
    assert answer.json() == {"item": None}
