"""``PATCH /v1/users/{user}/facts/{id}`` and ``GET .../facts/{id}/history`` (issue 41): a correction over
HTTP, its errors in the service's format (404 another user's id, 409 a superseded version, 422 a bad
field), and the history."""

from __future__ import annotations

import pytest

from tests.service.conftest import bearer
from tiers.maintenance.keys import KeyRing
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from unified_memory.service.app import create_app  # noqa: E402

pytestmark = pytest.mark.sqlite_only


@pytest.fixture
def api(tmp_path):
    path = str(tmp_path / "m.db")
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:
        fact = mem.remember("My dentist is Dr. Weiss")
        bobs = mem.scoped(user_id="bob").remember("Bob's PIN is 4711")
    ring = KeyRing(Storage(path))
    key = ring.create("ada")[1]
    ring.storage.close()
    with TestClient(create_app(UnifiedMemory(path, retrieval="lexical"))) as client:
        yield client, bearer(key), fact, bobs


def test_a_correction_over_http_and_its_history(api):
    client, auth, fact, _ = api
    answer = client.patch(f"/v1/users/ada/facts/{fact}", json={"text": "My dentist is Dr. Weis", "importance": 0.9},
                          headers=auth)
    assert answer.status_code == 200
    new = answer.json()["id"]
    history = client.get(f"/v1/users/ada/facts/{new}/history", headers=auth).json()["facts"]
    assert [(f["text"], f["status"]) for f in history] == [("My dentist is Dr. Weiss", "superseded"),
                                                           ("My dentist is Dr. Weis", "active")]
    again = client.patch(f"/v1/users/ada/facts/{fact}", json={"text": "x"}, headers=auth)
    assert again.status_code == 409 and again.json()["error"]["field"] == "fact_id" and new in again.text


@pytest.mark.parametrize("body, status, field", [({}, 422, "text"), ({"importance": 2}, 422, "importance"),
                                                  ({"text": 5}, 422, "text"), ({"colour": "x"}, 422, "colour")])
def test_bad_corrections_are_4xx_naming_the_field(api, body, status, field):
    client, auth, fact, _ = api
    answer = client.patch(f"/v1/users/ada/facts/{fact}", json=body, headers=auth)
    assert answer.status_code == status and answer.json()["error"]["field"] == field
    assert client.get(f"/v1/users/ada/facts/{fact}/history", headers=auth).json()["facts"][0]["status"] == "active"


def test_another_users_fact_is_not_found(api):
    client, auth, _, bobs = api
    for answer in (client.patch(f"/v1/users/ada/facts/{bobs}", json={"text": "mine"}, headers=auth),
                   client.get(f"/v1/users/ada/facts/{bobs}/history", headers=auth)):
        assert answer.status_code == 404 and "4711" not in answer.text
    assert client.get(f"/v1/users/bob/facts/{bobs}/history", headers=auth).status_code == 403
