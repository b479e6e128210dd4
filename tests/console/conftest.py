"""Fixtures of the console tests: the service in this process (Starlette's TestClient), over a
memory file with two users, keys for them, and a signed-in client."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

pytest.importorskip("fastapi", reason="the console needs the server extra")
pytest.importorskip("jinja2", reason="the console needs the server extra")
from fastapi.testclient import TestClient  # noqa: E402

from tiers.maintenance.keys import KeyRing  # noqa: E402
from tiers.storage.backend import Storage  # noqa: E402
from unified_memory import UnifiedMemory  # noqa: E402
from unified_memory.service.app import create_app  # noqa: E402

XSS = ['<script>document.title="pwned"</script>', '"><img src=x onerror=alert(1)>', "<svg onload=alert(2)>",
       "javascript:alert(3)", "{{ 7*7 }}"]


def conversation(mem: UnifiedMemory) -> None:
    mem.add_turn("Hi! I'm Ada. I'm allergic to peanuts.", "Noted, no peanuts.", when="2024-03-02T09:15:00Z")
    mem.add_turn("I live in Lisbon.", "Lovely.", when="2024-03-02T09:20:00Z")
    mem.add_turn("My sister Maria lives in Porto.", "Nice.", when="2024-03-02T09:22:00Z")
    mem.add_turn("Big news: I moved to Berlin last week.", "Congratulations!", when="2024-06-10T08:05:00Z")


@dataclass
class Site:
    """The service in this process, its file, and keys for ``ada``, ``bob`` and an admin."""

    client: TestClient
    path: str
    ada: str
    bob: str
    admin: str

    def sign_in(self, key: str, *, next_: str = "/ui/") -> TestClient:
        sign_in(self.client, key, next_=next_)
        return self.client


def form_value(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found, f"no {name} in the page"
    return found.group(1)


@contextmanager
def signed_in(path: str, user: str) -> Iterator[TestClient]:
    """The service over the file ``path`` in this process, signed in with a new key of ``user``."""
    ring = KeyRing(Storage(path))
    key = ring.create(user)[1]
    ring.storage.close()
    with TestClient(create_app(UnifiedMemory(path, retrieval="lexical"))) as client:
        sign_in(client, key)
        yield client


def sign_in(client: TestClient, key: str, *, next_: str = "/ui/") -> None:
    page = client.get("/ui/login")
    answer = client.post("/ui/login", data={"key": key, "nonce": form_value(page.text, "nonce"), "next": next_},
                         follow_redirects=False)
    assert answer.status_code == 303, answer.text


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql),
                        pytest.param("pgvector", marks=[pytest.mark.postgresql, pytest.mark.pgvector])])
def site(request, tmp_path) -> Iterator[Site]:
    """On a SQLite file, on PostgreSQL 15, and on PostgreSQL with pgvector (the database search path)."""
    if request.param == "sqlite":
        path = str(tmp_path / "memory.db")
    else:
        path = request.getfixturevalue("pg_url" if request.param == "postgresql" else "pgvector_url")
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:
        conversation(mem)
        for text in XSS:
            mem.remember(text, importance=0.6, category="test")
        bob = mem.scoped(user_id="bob")
        bob.add_turn("I'm Bob. My PIN is 4711 and I live in Oslo.", "Noted.")
    ring = KeyRing(Storage(path))
    keys = [ring.create("ada")[1], ring.create("bob")[1], ring.create(None, admin=True)[1]]
    ring.storage.close()
    app = create_app(UnifiedMemory(path, retrieval="lexical"), settings={"max_failed_auth": 5})
    with TestClient(app) as client:
        yield Site(client, path, *keys)
