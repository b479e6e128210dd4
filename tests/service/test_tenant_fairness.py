"""One tenant's slow call never holds back another tenant's (security issue 36, finding 2): while
tenant A's turn is stuck in the extractor, tenant B's recall, listing and turn are answered, and
A's own next request waits for A's turn (calls of one user stay in order).

In process (the ASGI app under ``httpx.AsyncClient``), on a SQLite file and on PostgreSQL; no
wall-clock bound is asserted: B's requests get 10 s, which they never need, and which on the code
before (one worker thread per memory file, the extraction inside the write transaction) ran out.
The figures under load are ``benchmarks/tenant_fairness.py``'s.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from unified_memory import UnifiedMemory
from unified_memory.extraction.rules import RuleExtractor

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from unified_memory.service.app import create_app  # noqa: E402

STUCK = "zqstuckzq"  # a message carrying it waits in the extractor until released


class Stuck(RuleExtractor):
    """The rules, except that a message carrying :data:`STUCK` waits for ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()

    def extract(self, message, *, context=()):
        if STUCK in (message.content or ""):
            self.entered.set()
            assert self.release.wait(60), "never released"
        return super().extract(message, context=context)


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path) -> str:
    if request.param == "postgresql":
        pytest.importorskip("psycopg")
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "memory.db")


def test_a_tenant_stuck_in_extraction_holds_back_only_its_own_requests(database):
    stuck = Stuck()
    memory = UnifiedMemory(database, retrieval="lexical", extractor=stuck)
    app = create_app(memory, settings={"mcp": False})
    key_a, key_b = app.state.keys.create("A")[1], app.state.keys.create("B")[1]

    async def run() -> dict[str, object]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://tenants") as http:
            a = {"Authorization": f"Bearer {key_a}"}
            b = {"Authorization": f"Bearer {key_b}"}
            seeded = await http.post("/v1/users/B/facts", json={"text": "I keep bees"}, headers=b)
            assert seeded.status_code == 201, seeded.text
            turn = await http.post("/v1/users/B/turns", json={"user": "My sister Maria lives in Lisbon"}, headers=b)
            assert turn.status_code == 201, turn.text
            slow = asyncio.ensure_future(http.post(
                "/v1/users/A/turns", json={"user": f"{STUCK} I live in Porto and I play the cello"}, headers=a))
            assert await asyncio.to_thread(stuck.entered.wait, 10)
            then = asyncio.ensure_future(http.get("/v1/users/A/facts", headers=a))  # A's next request
            try:
                recalled = await asyncio.wait_for(
                    http.post("/v1/users/B/recall", json={"query": "bees"}, headers=b), 10)
                listed = await asyncio.wait_for(http.get("/v1/users/B/facts", headers=b), 10)
                written = await asyncio.wait_for(
                    http.post("/v1/users/B/turns", json={"user": "I play chess on Sundays"}, headers=b), 10)
                await asyncio.sleep(0.2)
                held = not slow.done() and not then.done()
            finally:
                stuck.release.set()
            return {"recalled": recalled, "listed": listed, "written": written, "held": held,
                    "slow": await slow, "then": await then}

    try:
        got = asyncio.run(run())
    finally:
        memory.close()
        app.state.keys.storage.close()
    recalled, listed, written = got["recalled"], got["listed"], got["written"]
    assert isinstance(recalled, httpx.Response) and recalled.status_code == 200, recalled
    assert any(hit["text"] == "I keep bees" for hit in recalled.json()["hits"])
    assert isinstance(listed, httpx.Response) and "I keep bees" in {f["text"] for f in listed.json()["facts"]}
    assert isinstance(written, httpx.Response) and written.status_code == 201
    assert got["held"]  # A's turn and A's next request were both still waiting
    slow, then = got["slow"], got["then"]
    assert isinstance(slow, httpx.Response) and slow.status_code == 201, slow.text
    assert isinstance(then, httpx.Response) and any("Porto" in f["text"] for f in then.json()["facts"])
