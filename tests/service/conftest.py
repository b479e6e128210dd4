"""Fixtures of the service tests: the real server in a child process on loopback (a free port),
over a fresh memory file, and keys for it."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the service needs the server extra")
httpx = pytest.importorskip("httpx")

from unified_memory.service.background import ServiceProcess  # noqa: E402


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """One running service per test module (its file in a temporary directory)."""
    db = tmp_path_factory.mktemp("service") / "memory.db"
    with ServiceProcess(db) as running:
        yield running


def bearer(key: str) -> dict[str, str]:
    """The Authorization header of ``key``."""
    return {"Authorization": f"Bearer {key}"}
