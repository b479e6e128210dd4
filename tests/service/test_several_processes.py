"""Several service processes on one memory file (docs/deployment.md, "The service"): a write
answered by one is recalled through the other, keys work on both, forgetting through one is
seen by the other."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.service.conftest import bearer
from unified_memory.service.background import ServiceProcess

pytestmark = pytest.mark.slow


def _recall(client: httpx.Client, key: str, query: str) -> list[str]:
    answer = client.post("/v1/users/ada/recall", json={"query": query, "tiers": ["long_term"]}, headers=bearer(key))
    assert answer.status_code == 200, answer.text
    return [h["text"] for h in answer.json()["hits"]]


def _eventually(check, *, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def test_two_service_processes_share_one_file(tmp_path):
    db = tmp_path / "memory.db"
    with ServiceProcess(db) as first, ServiceProcess(db) as second:
        key = first.create_key("ada")
        with httpx.Client(base_url=first.url) as one, httpx.Client(base_url=second.url) as two:
            assert _recall(two, key, "bees") == []  # the second process has built its index of ada
            made = one.post("/v1/users/ada/facts", json={"text": "I keep bees"}, headers=bearer(key))
            assert made.status_code == 201
            assert _eventually(lambda: _recall(two, key, "bees") == ["I keep bees"])
            two.post("/v1/users/ada/turns", json={"user": "My sister Maria lives in Lisbon"}, headers=bearer(key))
            assert _eventually(lambda: "My sister Maria lives in Lisbon" in _recall(one, key, "sister Maria Lisbon"))
            gone = two.delete(f"/v1/users/ada/facts/{made.json()['id']}", headers=bearer(key))
            assert gone.status_code == 200
            assert _eventually(lambda: _recall(one, key, "bees") == [])


def test_serve_with_two_workers_shares_the_port_and_the_file(tmp_path):
    """``serve --workers 2``: requests on the one port reach either process; every write answered is
    recalled (whichever process answers), and SIGTERM stops both with the writes kept."""
    db = tmp_path / "memory.db"
    service = ServiceProcess(db, args=("--retrieval", "lexical", "--workers", "2")).start()
    try:
        key = service.create_key("ada")
        texts = [f"I keep bee hive number {n} in the orchard" for n in range(12)]
        with httpx.Client(base_url=service.url) as client:
            ids = [client.post("/v1/users/ada/facts", json={"text": text}, headers=bearer(key)).json()["id"]
                   for text in texts]
            assert _eventually(lambda: set(ids) <= {h["id"] for h in client.post(
                "/v1/users/ada/recall", json={"query": "bee hive orchard", "limit": 20, "tiers": ["long_term"]},
                headers=bearer(key)).json()["hits"]}, within=20)
        # two workers behind the one port (the second may log its start after the first answered)
        assert _eventually(lambda: service.log().count("Started server process") == 2, within=20), service.log()
    finally:
        code = service.stop()
    assert code == 0, service.log()[-2000:]
    with ServiceProcess(db) as again, httpx.Client(base_url=again.url) as client:
        listed = client.get("/v1/users/ada/facts", headers=bearer(key)).json()["facts"]
        assert {f["id"] for f in listed} == set(ids)


def test_a_worker_process_collects_garbage_less_often(tmp_path, monkeypatch):
    """Each worker of ``serve --workers`` (and ``serve``) raises the young-generation threshold."""
    import gc
    import json
    import sys

    from unified_memory.service.app import GC_THRESHOLDS, SWITCH_INTERVAL, WORKER_SPEC, app_from_environment

    before, interval = gc.get_threshold(), sys.getswitchinterval()
    monkeypatch.setenv(WORKER_SPEC, json.dumps({"db": str(tmp_path / "memory.db")}))
    try:
        app_from_environment()
        assert gc.get_threshold() == GC_THRESHOLDS != before
        assert sys.getswitchinterval() == SWITCH_INTERVAL < interval  # another tenant's threads yield sooner
    finally:
        gc.set_threshold(*before)
        sys.setswitchinterval(interval)
