"""The service answers over loopback: health, a write and its recall, keys that keep users apart."""

from __future__ import annotations

import httpx
import pytest

from tests.service.conftest import bearer


@pytest.mark.slow
def test_health_write_recall_and_tenancy(service):
    ada, bob = service.create_key("ada"), service.create_key("bob")
    with httpx.Client(base_url=service.url) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").json() == {"status": "ready"}
        made = client.post("/v1/users/ada/facts", json={"text": "I keep bees"}, headers=bearer(ada))
        assert made.status_code == 201
        hits = client.post("/v1/users/ada/recall", json={"query": "bees"}, headers=bearer(ada)).json()["hits"]
        assert [h["id"] for h in hits] == [made.json()["id"]]
        refused = client.post("/v1/users/ada/recall", json={"query": "bees"}, headers=bearer(bob))
        assert refused.status_code == 403 and "bees" not in refused.text
        assert client.post("/v1/users/ada/recall", json={"query": "bees"}).status_code == 401


def test_bad_service_settings_name_the_field():
    import pytest

    from unified_memory import ConfigError, MemoryTypeError, UnifiedMemory
    from unified_memory.service.app import create_app

    with UnifiedMemory(retrieval="lexical") as memory:
        with pytest.raises(ConfigError) as caught:
            create_app(memory, settings={"max_body_bytes": 5})
        assert caught.value.field == "settings.max_body_bytes" and isinstance(caught.value, ValueError)
        with pytest.raises(ConfigError) as caught:
            create_app(memory, settings={"bogus": 1})
        assert caught.value.field == "settings.bogus"
        with pytest.raises(MemoryTypeError):
            create_app(memory, settings="fast")  # type: ignore[arg-type]
