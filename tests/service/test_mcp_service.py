"""MCP over streamable HTTP through the real service (``unified-memory serve``, ``/mcp``): the same
API keys as the JSON API choose the user; keys of two users never see each other's memories."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("mcp")

import httpx  # noqa: E402
import httpx2  # noqa: E402  (the mcp SDK's own HTTP client)
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.service.conftest import bearer  # noqa: E402


def _text(result: Any) -> str:
    return "\n".join(getattr(part, "text", "") for part in result.content)


def _client(url: str, headers: dict[str, str]) -> tuple[Any, Client]:
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    return http, Client(streamable_http_client(f"{url}/mcp", http_client=http))


@pytest.mark.slow
def test_mcp_over_http_acts_for_the_keys_user_and_keeps_users_apart(service):
    ada_key, bob_key, admin = service.create_key("ada"), service.create_key("bob"), service.create_key(admin=True)

    async def scenario() -> None:
        (ada_http, ada), (bob_http, bob) = _client(service.url, bearer(ada_key)), _client(service.url, bearer(bob_key))
        admin_http, as_ada = _client(service.url, {**bearer(admin), "X-User-Id": "ada"})
        async with ada_http, bob_http, admin_http, ada, bob, as_ada:
            stored = await ada.call_tool("remember", {"text": "My favourite tea is sencha"})
            assert not stored.is_error, _text(stored)
            await bob.call_tool("remember", {"text": "My favourite tea is rooibos"})
            await ada.call_tool("log_turn", {"user": "I adopted a cat called Miso", "assistant": "Lovely"})
            ada_text = _text(await ada.call_tool("recall", {"query": "favourite tea sencha rooibos"}))
            assert "sencha" in ada_text and "rooibos" not in ada_text
            bob_text = _text(await bob.call_tool("recall", {"query": "favourite tea sencha rooibos cat Miso"}))
            assert "rooibos" in bob_text and "sencha" not in bob_text and "Miso" not in bob_text
            block = (await ada.call_tool("context", {"query": "what tea and pets?", "max_tokens": 120}))
            assert block.structured_content["tokens"] <= 120 and "sencha" in block.structured_content["text"]
            # an admin key acts for the user it names
            assert "sencha" in _text(await as_ada.call_tool("recall", {"query": "favourite tea"}))
            refused = await bob.call_tool("forget", {"ids": [stored.structured_content["id"]]})
            assert refused.is_error
            forgotten = await ada.call_tool("forget", {"ids": [stored.structured_content["id"]]})
            assert not forgotten.is_error, _text(forgotten)
            gone = await ada.call_tool("recall", {"query": "favourite tea sencha", "tiers": ["long_term"]})
            assert stored.structured_content["id"] not in _text(gone)

    asyncio.run(scenario())
    # the writes are the same memory the JSON API serves
    with httpx.Client(base_url=service.url) as client:
        episodes = client.get("/v1/users/ada/episodes", headers=bearer(ada_key)).json()["episodes"]
        assert [e["content"] for e in episodes] == ["I adopted a cat called Miso", "Lovely"]


def test_mcp_over_http_refuses_without_a_valid_key_or_for_another_user(service):
    bob_key = service.create_key("bob")
    with httpx.Client(base_url=service.url) as client:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert client.post("/mcp", json=hello).status_code == 401
        assert client.post("/mcp", json=hello, headers=bearer("um_000000000000_" + "x" * 43)).status_code == 401
        other = client.post("/mcp", json=hello, headers={**bearer(bob_key), "X-User-Id": "ada"})
        assert other.status_code == 403 and "ada" not in other.json()["error"]["message"], other.text
        admin = service.create_key(admin=True)
        unnamed = client.post("/mcp", json=hello, headers=bearer(admin))
        assert unnamed.status_code == 400 and unnamed.json()["error"]["field"] == "x-user-id"
