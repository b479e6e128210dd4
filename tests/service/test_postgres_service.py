"""``unified-memory serve --db postgresql://…``: the service over a real PostgreSQL database, its
API keys in the database, two service processes sharing it, and no user reading another's."""

from __future__ import annotations

import pytest

from unified_memory import RemoteMemory, UnifiedMemory
from unified_memory.errors import PermissionDeniedError
from unified_memory.service.background import ServiceProcess

pytest.importorskip("psycopg")
pytest.importorskip("fastapi")


def test_two_services_on_one_postgresql_database_share_memories_and_keep_users_apart(pg_url):
    url = pg_url.replace("postgres@", "postgres:hidden@")  # trust auth: the password must never be shown
    with ServiceProcess(url) as first, ServiceProcess(url) as second:
        ada_key, bob_key = first.create_key("ada"), first.create_key("bob")
        ada = RemoteMemory(first.url, api_key=ada_key, user_id="ada")
        ada.add_turn("I'm allergic to peanuts and I live in Lisbon.")
        ada.remember("My sister Maria plays the cello")
        # another process, keys read from the same database, the write recalled there
        ada_elsewhere = RemoteMemory(second.url, api_key=ada_key, user_id="ada")
        assert any("cello" in hit.text for hit in ada_elsewhere.recall("what does Maria play?"))
        assert "peanuts" in ada_elsewhere.context("allergies").text
        bob = RemoteMemory(second.url, api_key=bob_key, user_id="bob")
        assert bob.recall("peanuts") == [] and bob.facts() == []
        with pytest.raises(PermissionDeniedError):
            RemoteMemory(second.url, api_key=bob_key, user_id="ada").recall("peanuts")
        assert "hidden" not in first.log() + second.log()
        stats = ada.stats()
        assert stats.path is None or "hidden" not in stats.path
    with UnifiedMemory(pg_url, user_id="ada", retrieval="lexical") as local:  # the rows are in the database
        assert any("cello" in fact.text for fact in local.facts())


def test_serve_with_two_workers_and_a_pool_on_postgresql(pg_url):
    """``serve --workers 2 --pool-size 2`` on PostgreSQL: concurrent requests on the one port reach
    both processes, every write answered is listed and recalled through either, and the service
    holds no more connections than the pool size allows (memory and keys per process, plus one
    listener per process)."""
    import concurrent.futures
    import time

    import httpx
    import psycopg

    service = ServiceProcess(pg_url, args=("--retrieval", "lexical", "--workers", "2", "--pool-size", "2")).start()
    try:
        key = service.create_key("ada")
        headers = {"Authorization": f"Bearer {key}"}
        texts = [f"I keep bee hive number {n} in the orchard" for n in range(40)]
        with httpx.Client(base_url=service.url, timeout=30) as client, \
                concurrent.futures.ThreadPoolExecutor(8) as pool:
            ids = list(pool.map(lambda text: client.post("/v1/users/ada/facts", json={"text": text},
                                                         headers=headers).json()["id"], texts))
            recalled = list(pool.map(lambda _: client.post(
                "/v1/users/ada/recall", json={"query": "bee hive orchard", "limit": 50, "tiers": ["long_term"]},
                headers=headers).json()["hits"], range(16)))
            assert all(hits for hits in recalled)
            deadline = time.monotonic() + 20
            while True:  # each worker follows the other's writes
                seen = [{h["id"] for h in client.post("/v1/users/ada/recall", json={
                    "query": "bee hive orchard", "limit": 50, "tiers": ["long_term"]}, headers=headers).json()["hits"]}
                    for _ in range(6)]
                if all(set(ids) <= s for s in seen) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert all(set(ids) <= s for s in seen)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            held = conn.execute("SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                                "AND pid <> pg_backend_pid()").fetchone()[0]
        assert held <= 2 * (2 + 2 + 1), held  # per worker: memory 2, keys 2, listener 1
        assert service.log().count("Started server process") == 2
    finally:
        code = service.stop()
    assert code == 0, service.log()[-2000:]
    with UnifiedMemory(pg_url, user_id="ada", retrieval="lexical") as local:
        assert {f.id for f in local.facts(limit=100)} == set(ids)


@pytest.mark.slow
@pytest.mark.embeddings
def test_a_service_on_postgresql_with_pgvector_needs_no_local_disk(pgvector_url, tmp_path):
    """``serve`` on a PostgreSQL URL with pgvector needs nothing on the host's disk: with HOME and
    every cache (ours, Hugging Face's, XDG's) where nothing can be written (under a regular file:
    not even root can), the real bundled model and hybrid retrieval answer writes, recalls and a
    context, a second host answers the same user at once, and neither logs an error."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    env = {"HOME": str(blocked / "home"), "XDG_CACHE_HOME": str(blocked / "xdg"),
           "UNIFIED_MEMORY_CACHE": str(blocked / "cache"), "HF_HOME": str(blocked / "hf")}
    args = ("--retrieval", "hybrid", "--no-mcp")
    # The model loads before a host listens (seconds; more on a loaded machine): the start may take long,
    # but no request waits for it.
    with ServiceProcess(pgvector_url, args=args, env=env, log_path=tmp_path / "a.log",
                        startup_timeout=300) as host_a:
        key = host_a.create_key("ada")
        ada = RemoteMemory(host_a.url, api_key=key, user_id="ada")
        ada.remember("I'm allergic to peanuts")
        ada.remember("My sister Maria plays the cello")
        ada.add_turn("We moved to Porto last spring.")
        assert ada.recall("which instrument does Maria play?")[0].text == "My sister Maria plays the cello"
        assert "peanuts" in ada.context("food I must avoid").text
        assert ada.stats().search == "database"
        with ServiceProcess(pgvector_url, args=args, env=env, log_path=tmp_path / "b.log",
                            startup_timeout=300) as host_b:
            elsewhere = RemoteMemory(host_b.url, api_key=key, user_id="ada")
            assert elsewhere.recall("which instrument does Maria play?")[0].text == "My sister Maria plays the cello"
            logs = host_a.log() + host_b.log()
    assert "Traceback" not in logs and "ERROR" not in logs, logs[-3000:]
    assert "(API docs at /docs, console at /ui)" in logs and "MCP at /mcp" not in logs  # --no-mcp: not announced
