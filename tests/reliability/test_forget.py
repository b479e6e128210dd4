"""``forget`` leaves nothing behind (issue 8), verified by scanning the files.

Several users write turns, facts, triples and metadata carrying markers unique to
them, with dense retrieval on (numpy vectors or a persistent Chroma collection), the
index journal and saved lexical snapshots in play, a second process-like reader of
the same file, and recalls that fill the query-embedding cache. After
``forget(user_id=...)`` — and again after closing — no byte of any file under the
directory (SQLite database, WAL, shared memory, Chroma's files) holds the forgotten
user's markers or id, the in-process caches do not either, and every other user
answers exactly as before.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import record_figures, scaled
from tiers import snapshots
from unified_memory import UnifiedMemory, VectorConfig
from unified_memory.testing import FakeEmbedder

USERS = ["ulrike", "vasco", "wanjiru"]
TALLY = {"forgets": 0, "files_scanned": 0, "bytes_scanned": 0, "markers_checked": 0, "traces_found": 0}


@pytest.fixture(autouse=True, scope="module")
def _report():
    yield
    record_figures(__name__, "forget", **TALLY)


def marker(user: str, i: int) -> str:
    return f"{user[:3]}secret{i:03d}x"


def scan(directory: Path, needles: list[str]) -> list[tuple[str, str]]:
    found = []
    for path in directory.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            TALLY["files_scanned"] += 1
            TALLY["bytes_scanned"] += len(data)
            found += [(path.name, n) for n in needles if n.encode() in data]
    TALLY["markers_checked"] += len(needles)
    return found


def fill(mem: UnifiedMemory, user: str, n: int) -> None:
    view = mem.scoped(user_id=user)
    for i in range(n):
        secret = marker(user, i)
        view.add_turn(f"My locker code is {secret} and my dog is {user}dog", f"Noted {secret}")
        view.remember(f"{user} keeps {secret} in the drawer", metadata={"note": secret})
        view.add_triple(f"{user}dog", "guards", secret)
    view.end_session()


def answers(mem: UnifiedMemory, user: str) -> list[tuple[str, str]]:
    view = mem.scoped(user_id=user)
    return sorted((h.id, h.text) for h in view.recall(f"locker code drawer {user}dog", limit=50))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpy", "chroma"])
@settings(max_examples=scaled(4), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(victim=st.sampled_from(USERS), n=st.integers(3, 8), reader=st.booleans())
def test_forget_a_user_leaves_no_byte_behind(tmp_path_factory, monkeypatch, backend, victim, n, reader):
    if backend == "chroma":
        pytest.importorskip("chromadb")
    monkeypatch.setattr(snapshots, "SNAPSHOT_MIN_DOCS", 2)  # small partitions are snapshotted at close
    folder = tmp_path_factory.mktemp("forget")
    path = folder / "memory.db"
    options = dict(embedder=FakeEmbedder(dim=32), retrieval="hybrid", vectors=VectorConfig(backend=backend),
                   short_term_limit=2, long_term_limit=None)
    with UnifiedMemory(path, **options) as mem:
        for user in USERS:
            fill(mem, user, n)
        for user in USERS:
            answers(mem, user)  # builds indexes, fills the query cache
    # a reopen restores the snapshots saved at close; the victim's secrets are in every derived table
    mem = UnifiedMemory(path, **options)
    other = UnifiedMemory(path, **options) if reader else None  # another connection that follows the journal
    try:
        before = {user: answers(mem, user) for user in USERS if user != victim}
        mem.scoped(user_id=victim).recall(f"{marker(victim, 0)} locker")  # in the query cache now
        needles = [marker(victim, i) for i in range(n)] + [f"{victim}dog"]
        assert scan(folder, needles), "the scan sees the secrets before forgetting"
        counts = mem.forget(user_id=victim)
        TALLY["forgets"] += 1
        assert counts["messages"] == 2 * n and counts["facts"] >= n
        dense = mem._backend.dense
        assert not any(victim[:3] + "secret" in q for q in dense.cache._queries), "query cache kept the victim's query"
        if other is not None:
            assert other.scoped(user_id=victim).recall("locker code drawer") == []
            for user in before:
                assert answers(other, user) == before[user]
        for user in before:
            assert answers(mem, user) == before[user]
        assert mem.scoped(user_id=victim).recall(f"{marker(victim, 0)} locker") == []
        left = scan(folder, needles) if backend == "numpy" else []  # chroma compacts on close (checked below)
        TALLY["traces_found"] += len(left)
        assert left == [], left
    finally:
        if other is not None:
            other.close()
        mem.close()
    left = scan(folder, [*needles, victim])
    TALLY["traces_found"] += len(left)
    assert left == [], left
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        for table in ("messages", "facts", "entities", "triples", "embeddings", "index_journal", "index_snapshots"):
            assert con.execute(f'SELECT COUNT(*) FROM "{table}" WHERE user_id = ?', (victim,)).fetchone()[0] == 0
    finally:
        con.close()
    with UnifiedMemory(path, **options) as reopened:
        for user in before:
            assert answers(reopened, user) == before[user]
