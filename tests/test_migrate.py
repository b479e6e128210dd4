"""``unified-memory migrate SRC DST`` (unified_memory.io.migrate): a SQLite file to a real
PostgreSQL database and back, lossless, checked by identical recall, listings and exports."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.pg_server import create_database, drop_database
from tiers.maintenance.keys import KeyRing
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory
from unified_memory.errors import ConflictError
from unified_memory.io.migrate import migrate_database

pytest.importorskip("psycopg")
QUERIES = ["where does Ada live?", "what is Ada allergic to?", "Maria", "cello", "Berlin"]


def fill(target, clock) -> None:
    with UnifiedMemory(target, user_id="ada", retrieval="lexical", clock=clock, short_term_limit=2) as mem:
        mem.add_turn("Hi, I'm Ada. I'm allergic to peanuts and I live in Paris.", "Noted!")
        clock.advance(days=1)
        mem.add_turn("My sister Maria lives in Lisbon.", "Nice.")
        mem.add_turn("I moved to Berlin last month.", "Got it.")
        mem.remember("I prefer tea over coffee", importance=0.8, metadata={"topic": "food", "n": 1})
        mem.recall("tea")  # uses, folded into the rows on export
        mem.scoped(user_id="bob", session_id="s1").add_turn("I play the cello in an orchestra.")
        mem.put_item(("notes",), "k1", {"text": "buy cello strings"})
    storage = Storage(target)
    try:
        KeyRing(storage).create("ada", label="laptop")
    finally:
        storage.close()


def answers(target, clock) -> dict:
    found = {}
    for user in ("ada", "bob"):
        with UnifiedMemory(target, user_id=user, retrieval="lexical", clock=clock) as mem:
            found[user] = {
                "recall": [[(h.id, h.tier, round(h.score, 9)) for h in mem.recall(q, limit=8)] for q in QUERIES],
                "facts": [(f.id, f.text, f.status) for f in mem.facts(include_history=True)],
                "episodes": [m.id for m in mem.episodes()],
                "items": [i.key for i in mem.search_items(("notes",))],
            }
    return found


def rows(target) -> list[str]:
    out = io.StringIO()
    with UnifiedMemory(target, retrieval="lexical") as mem:
        mem.export_jsonl(out, all_users=True)
    return sorted(out.getvalue().split("\n")[1:])


@pytest.fixture
def new_database(postgres_server):
    made = []

    def make() -> str:
        url = create_database(postgres_server)
        made.append(url)
        return url

    yield make
    for url in made:
        drop_database(postgres_server, url.rsplit("/", 1)[1])


def test_sqlite_to_postgresql_and_back_keeps_every_row_and_answer(tmp_path, new_database, clock):
    source, back = tmp_path / "a.db", tmp_path / "b.db"
    fill(source, clock)
    url = new_database()
    report = migrate_database(source, url)
    assert report.verified and report.users == ["ada", "bob"]
    assert report.rows["facts"] >= 4 and report.rows["api_keys"] == 1 and report.rows["keyed_items"] == 1
    assert rows(url) == rows(source)
    migrate_database(url, back)
    assert rows(back) == rows(source)
    expected = answers(source, clock)  # each copy, asked the same at the same moment, answers alike
    assert answers(url, clock) == expected
    assert answers(back, clock) == expected
    for target in (url, back):  # the keys came along: the service on the copy accepts the same key
        ring = KeyRing(Storage(target))
        assert [k.label for k in ring.list()] == ["laptop"]
        ring.storage.close()


def test_a_destination_in_use_is_refused_and_left_as_it_was(tmp_path, new_database, clock):
    source = tmp_path / "a.db"
    fill(source, clock)
    url = new_database()
    with UnifiedMemory(url, user_id="carol", retrieval="lexical") as mem:
        mem.remember("Carol keeps bees")
    before = rows(url)
    with pytest.raises(ConflictError, match="destination"):
        migrate_database(source, url)
    assert rows(url) == before
    with pytest.raises(ConflictError):
        migrate_database(source, source)


def test_writes_after_migrating_get_new_positions(tmp_path, new_database, clock):
    """The copy's identity sequences start after the copied keys (setval), so new rows never collide."""
    source = tmp_path / "a.db"
    fill(source, clock)
    url = new_database()
    migrate_database(source, url)
    with UnifiedMemory(url, user_id="ada", retrieval="lexical") as mem:
        mem.add_turn("I also speak Portuguese.", "Great!")
        mem.remember("Ada runs on Sundays")
        assert any("Portuguese" in h.text for h in mem.recall("Portuguese"))


def test_the_command_migrates_and_hides_the_password(tmp_path, new_database, clock):
    source = tmp_path / "a.db"
    fill(source, clock)
    url = new_database().replace("postgres@", "postgres:secret@")  # trust auth: any password passes
    done = subprocess.run([sys.executable, "-m", "unified_memory", "migrate", str(source), url, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["verified"] is True and out["users"] == ["ada", "bob"]
    assert "secret" not in done.stdout + done.stderr and ":***@" in out["destination"]
    missing = subprocess.run([sys.executable, "-m", "unified_memory", "migrate", str(tmp_path / "none.db"), url],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 1 and "no memory file" in missing.stderr


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)
                      .filter(lambda t: t.strip()), min_size=1, max_size=6))
def test_any_remembered_texts_round_trip(tmp_path_factory, new_database, texts):
    source = Path(tmp_path_factory.mktemp("m")) / "a.db"
    with UnifiedMemory(source, user_id="ada", retrieval="lexical") as mem:
        for text in texts:
            mem.remember(text, metadata={"t": text})
    url = new_database()
    migrate_database(source, url)
    assert rows(url) == rows(source)


def test_a_source_holding_a_nul_in_json_is_refused_naming_the_row_and_nothing_is_written(tmp_path, new_database,
                                                                                         clock):
    """A file written before NUL characters were refused (or edited by hand) holds one in a
    fact's metadata: PostgreSQL cannot read it inside JSON, so the copy is refused before anything
    is written, naming the source, the column and the row."""
    import sqlite3

    source = tmp_path / "old.db"
    with UnifiedMemory(source, user_id="ada", retrieval="lexical", clock=clock) as mem:
        fid = mem.remember("I like tea", metadata={"k": "ab"})
        mem.remember("I like coffee")
    with sqlite3.connect(source) as db:
        db.execute("UPDATE facts SET metadata = ? WHERE id = ?", [json.dumps({"k": "a\x00b"}), fid])
    url = new_database()
    from unified_memory.errors import MemoryValueError

    with pytest.raises(MemoryValueError) as caught:
        migrate_database(source, url)
    assert caught.value.field == "source"
    assert str(source) in str(caught.value) and "facts.metadata" in str(caught.value) and fid in str(caught.value)
    assert "NUL" in str(caught.value)
    with UnifiedMemory(url, user_id="ada", retrieval="lexical") as target:
        assert target.facts() == [] and target.users() == []
