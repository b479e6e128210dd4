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
