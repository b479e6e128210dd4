"""Access and lifecycle of the HTTP service through the real server (issue 17): tenancy (403 that
reveals nothing, 401 for missing / unknown / malformed / revoked keys, admin keys), the limit on
failed authentications, the body limit, SIGTERM with writes in flight, and writes of other
processes seen by the server."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.service.conftest import bearer
from tests.service.test_http_api import JSON, _rows, client_for, ok
from unified_memory import UnifiedMemory
from unified_memory.service.background import ServiceProcess


@pytest.fixture(scope="module")
def admin(service) -> str:
    return service.create_key(admin=True)

# -- tenancy ---------------------------------------------------------------------------------

USER_ROUTES = [("POST", "/turns", {"user": "hi"}), ("POST", "/messages", {"messages": [{"role": "user", "content": "x"}]}),
               ("POST", "/facts", {"text": "x"}), ("POST", "/facts/batch", {"facts": ["x"]}),
               ("GET", "/facts", None), ("POST", "/triples", {"subject": "a", "predicate": "b", "object": "c"}),
               ("POST", "/recall", {"query": "secret"}), ("POST", "/context", {"query": "secret"}),
               ("GET", "/entities", None), ("GET", "/triples", None), ("GET", "/episodes", None),
               ("GET", "/stats", None), ("GET", "/export", None), ("POST", "/import", None),
               ("DELETE", "/facts/FACT", None), ("DELETE", "", None)]


def _call(http: httpx.Client, method: str, path: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    if body is None:
        return http.request(method, path, headers=headers)
    return http.request(method, path, json=body, headers=headers)


@pytest.mark.slow
def test_a_user_key_on_another_users_path_is_refused_and_reveals_nothing(service, admin):
    victim, other = service.create_key("victim"), service.create_key("intruder")
    with client_for(service, victim) as own, client_for(service, other) as http:
        secret = ok(own.post("/v1/users/victim/facts", json={"text": "The vault code is quokka-secret"}), 201)["id"]
        ok(own.post("/v1/users/victim/turns", json={"user": "my secret diary entry"}), 201)
        before = own.get("/v1/users/victim/export").text
        for method, path, body in USER_ROUTES:
            answer = _call(http, method, "/v1/users/victim" + path.replace("FACT", secret), body)
            assert answer.status_code == 403, (method, path, answer.text)
            assert answer.json()["error"]["type"] == "forbidden"
            assert "secret" not in answer.text and "quokka" not in answer.text and secret not in answer.text
            assert "msg_" not in answer.text and "fact_" not in answer.text
        assert _rows(own.get("/v1/users/victim/export").text)[1] == _rows(before)[1]
    with client_for(service, admin) as root:  # the admin key acts for every user
        assert [f["id"] for f in ok(root.get("/v1/users/victim/facts"))["facts"]] == [secret]
        assert ok(root.post("/v1/users/newcomer/facts", json={"text": "made by admin"}), 201)["id"]
        assert ok(root.get("/v1/users/newcomer/stats"))["facts"] == 1


def _key_id(service, label: str) -> str:
    listed = subprocess.run([sys.executable, "-m", "unified_memory", "keys", "list", "--db", str(service.db),
                             "--json"], capture_output=True, check=True, text=True)
    return str(next(k["id"] for k in json.loads(listed.stdout)["keys"] if k["label"] == label))


def test_missing_unknown_malformed_and_revoked_keys_are_401(service):
    key = service.create_key("keyholder", label="to-revoke")
    with client_for(service, key) as http:
        ok(http.post("/v1/users/keyholder/facts", json={"text": "kept before revocation"}), 201)
    subprocess.run([sys.executable, "-m", "unified_memory", "keys", "revoke", _key_id(service, "to-revoke"),
                    "--db", str(service.db)], capture_output=True, check=True)
    attempts: list[dict[str, str]] = [{}, bearer("um_not_a_real_key"), {"Authorization": f"Basic {key}"},
                                      {"Authorization": "Bearer"}, bearer(key)]
    with httpx.Client(base_url=service.url) as http:
        for headers in attempts:
            answer = http.get("/v1/users/keyholder/facts", headers=headers)
            assert answer.status_code == 401, (headers, answer.text)
            assert answer.headers["www-authenticate"].lower().startswith("bearer")
            assert answer.json()["error"]["type"] == "unauthorized"
            assert "kept before revocation" not in answer.text
        assert http.get("/v1/users", headers=bearer("um_nope")).status_code == 401


# -- limits ----------------------------------------------------------------------------------

def test_failed_authentications_are_rate_limited(tmp_path):
    with ServiceProcess(tmp_path / "m.db", args=["--retrieval", "lexical", "--max-failed-auth", "3", "--no-mcp"]) as svc:
        good = svc.create_key("ada")
        with httpx.Client(base_url=svc.url) as http:
            assert ok(http.get("/v1/users/ada/stats", headers=bearer(good)))["facts"] == 0  # successes do not count
            for _ in range(3):
                assert http.get("/v1/users/ada/stats", headers=bearer("um_guess")).status_code == 401
            for headers in (bearer("um_guess"), {}):
                throttled = http.get("/v1/users/ada/stats", headers=headers)
                assert throttled.status_code == 429, throttled.text
                assert int(throttled.headers["retry-after"]) >= 1
                assert throttled.json()["error"]["type"] == "too_many_attempts"
            assert throttled.request.headers.get("authorization") is None
            assert ok(http.get("/v1/users/ada/stats", headers=bearer(good)))["facts"] == 0  # a valid key still gets in
            assert ok(http.get("/healthz")) == {"status": "ok"}  # open routes are not throttled


@pytest.mark.slow
def test_bodies_over_the_limit_are_413_and_write_nothing(tmp_path):
    with ServiceProcess(tmp_path / "m.db", args=["--retrieval", "lexical", "--max-body-bytes", "4096",
                                                 "--no-mcp"]) as svc:
        key = svc.create_key("ada")
        with client_for(svc, key) as http:
            ok(http.post("/v1/users/ada/facts", json={"text": "x" * 3000}), 201)
            big = {"text": "y" * 5000}
            refused = http.post("/v1/users/ada/facts", json=big)
            assert refused.status_code == 413 and refused.json()["error"] == {
                "type": "too_large", "field": "body", "message": "request body over 4096 bytes",
                "request_id": refused.headers["x-request-id"]}

            def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is found while streaming
                payload = json.dumps({"facts": ["z" * 900] * 10}).encode()
                for at in range(0, len(payload), 1000):
                    yield payload[at:at + 1000]

            streamed = http.post("/v1/users/ada/facts/batch", content=chunks(), headers=JSON)
            assert streamed.status_code == 413, streamed.text
            assert streamed.json()["error"]["type"] == "too_large"
            facts = ok(http.get("/v1/users/ada/facts"))["facts"]
            assert [len(f["text"]) for f in facts] == [3000]


# -- graceful shutdown -----------------------------------------------------------------------

@pytest.mark.slow
def test_sigterm_answers_in_flight_writes_and_keeps_them(tmp_path):
    """Requests whose headers have arrived when SIGTERM comes are answered, and their writes are kept."""
    db = tmp_path / "m.db"
    svc = ServiceProcess(db, args=["--retrieval", "lexical", "--no-mcp"]).start()
    key = svc.create_key("ada")
    count = 6
    sent_head = [threading.Event() for _ in range(count)]
    release = threading.Event()
    answers: list[httpx.Response | BaseException | None] = [None] * count

    def send(n: int) -> None:
        payload = json.dumps({"facts": [f"in-flight fact {n}-{i}" for i in range(50)]}).encode()

        def body() -> Iterator[bytes]:
            yield payload[:20]
            sent_head[n].set()
            release.wait(60)
            yield payload[20:]

        try:
            with client_for(svc, key) as http:
                answers[n] = http.post("/v1/users/ada/facts/batch", content=body(),
                                       headers={**JSON, "Content-Length": str(len(payload))})
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            answers[n] = exc

    threads = [threading.Thread(target=send, args=(n,)) for n in range(count)]
    try:
        for thread in threads:
            thread.start()
        for event in sent_head:
            assert event.wait(60)
        assert svc.healthy()  # a round trip after the heads: the server has read them
        assert svc.process is not None
        svc.process.terminate()  # SIGTERM while every request waits for the rest of its body
        release.set()
        for thread in threads:
            thread.join(90)
        assert svc.process.wait(60) == 0  # a clean shutdown (serve does not re-raise the signal)
    finally:
        release.set()
        svc.kill()
    ids: list[str] = []
    for answer in answers:
        assert isinstance(answer, httpx.Response), answer
        assert answer.status_code == 201, answer.text
        ids += answer.json()["ids"]
    assert len(ids) == count * 50
    assert "Application shutdown complete" in svc.log()
    with ServiceProcess(db, args=["--retrieval", "lexical", "--no-mcp"]) as again:
        with client_for(again, again.create_key("ada")) as http:
            stored = ok(http.get("/v1/users/ada/facts", params={"limit": 1000}))
    assert stored["total"] == count * 50 and {f["id"] for f in stored["facts"]} == set(ids)


@pytest.mark.slow
def test_the_server_sees_what_other_processes_write(service):
    """Keys and rows written by other processes while the server runs are seen at once (the server's
    connections keep their locks on the file, so no other process deletes its write-ahead log)."""
    for n in range(3):
        key = service.create_key(f"neighbour{n}")
        with UnifiedMemory(service.db, user_id=f"neighbour{n}", retrieval="lexical") as local:
            local.remember(f"written next door {n}")
        with client_for(service, key) as http:
            facts = ok(http.get(f"/v1/users/neighbour{n}/facts"))["facts"]
            assert [f["text"] for f in facts] == [f"written next door {n}"]
            ok(http.post(f"/v1/users/neighbour{n}/facts", json={"text": f"written by the server {n}"}), 201)
        with UnifiedMemory(service.db, user_id=f"neighbour{n}", retrieval="lexical") as local:
            assert sorted(f.text for f in local.facts()) == [f"written by the server {n}", f"written next door {n}"]
