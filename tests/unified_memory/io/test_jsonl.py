"""Export, import and forget through UnifiedMemory (lossless round trips, secure deletion)."""

from __future__ import annotations

import asyncio
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Clock
from tests.unified_memory.db_rows import rows_as_text
from unified_memory import UnifiedMemory
from unified_memory.config import VectorConfig
from unified_memory.errors import MemoryTypeError, MemoryValueError, NotFoundError
from unified_memory.testing import FakeEmbedder, internals

SECRET = b"zebra-secret-4711"
QUERIES = ["what is Ada allergic to?", "where does Maria live?", "where do I live?", "weather in Lisbon",
           "jazz concerts", "my sister", "short answers please", "Acme Corp"]


def open_memory(path, clock, mode: str, **kwargs) -> UnifiedMemory:
    if mode == "hybrid":
        kwargs.update(embedder=FakeEmbedder(), retrieval="hybrid")
    else:
        kwargs.update(retrieval="lexical")
    return UnifiedMemory(path, user_id="ada", clock=clock, short_term_limit=4, long_term_limit=8, **kwargs)


def build(mem: UnifiedMemory, clock: Clock) -> None:
    """Several sessions: turns, facts with metadata and TTL, triples, tool calls, a superseded
    fact, archived facts, a running summary from trimming; and another user."""
    mem.add_turn("Hi, I'm Ada. I'm allergic to peanuts.", "Noted, Ada!")
    clock.advance(days=1)
    mem.add_turn("My sister Maria lives in Lisbon.", "Lovely city.", metadata={"mood": "happy"})
    mem.remember("Ada prefers short answers", importance=0.8, category="preference", metadata={"topic": "style"})
    mem.remember("Ada has a dentist appointment", ttl_days=30, importance=0.6)
    mem.add_triple("Maria", "works_at", "Acme Corp", confidence=0.7, metadata={"source": "chat"})
    work = mem.scoped(session_id="work")
    work.add_message("user", "What's the weather in Lisbon?")
    work.add_message("assistant", None, tool_calls=[{"id": "call_1", "type": "function",
                                                     "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}])
    work.add_message("tool", "Sunny, 24 C in Lisbon", tool_call_id="call_1")
    work.add_message("assistant", "It is sunny in Lisbon.")
    clock.advance(days=3)
    mem.remember("I live in Berlin")
    clock.advance(days=1)
    mem.remember("I live in Porto")  # supersedes Berlin
    for i, topic in enumerate(["jazz concerts", "hiking trips", "chess openings", "sourdough bread",
                               "watercolour painting", "salsa dancing", "bird watching", "board games"]):
        clock.advance(seconds=3600)
        mem.remember(f"Ada enjoys {topic}", importance=0.2 + 0.05 * i)  # some are archived (limit 8)
    mem.add_turn("I went to a jazz concert last night.", "How was it?")
    mem.add_turn("Wonderful, the saxophonist was great.", "Sounds fun!")
    mem.end_session()
    clock.advance(days=1)
    mem.add_turn("Can you recommend a jazz club in Porto?", "Try the Hot Clube.")
    mem.scoped(user_id="bob").add_turn("Bob here, I keep bees in Porto.", "Nice")
    mem.scoped(user_id="bob").remember("Bob is allergic to wasps")


def row_lines(text: str) -> list[str]:
    return text.splitlines()[1:]


def assert_same_hits(left, right) -> None:
    assert [(h.id, h.tier, h.text) for h in left] == [(h.id, h.tier, h.text) for h in right]
    for a, b in zip(left, right, strict=True):
        assert math.isclose(a.score, b.score, rel_tol=0, abs_tol=1e-9), (a, b)
        assert a.metadata == b.metadata and a.created_at == b.created_at


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_round_trip_into_a_fresh_file_gives_identical_recall_and_context(tmp_path, mode):
    clock = Clock()
    original = open_memory(tmp_path / "a.db", clock, mode)
    build(original, clock)
    stats = original.stats()
    assert stats.superseded_facts and stats.archived_facts and original.summary() and stats.window_messages
    exported = tmp_path / "ada.jsonl"
    count = original.export_jsonl(exported)
    text = exported.read_text(encoding="utf-8")
    header = json.loads(text.splitlines()[0])
    assert header["format"] == "unified-memory.export" and header["version"] == 1 and header["users"] == ["ada"]
    assert {"schema_version", "library_version", "exported_at"} <= set(header)
    assert count == len(row_lines(text)) and b"Bob" not in exported.read_bytes()
    assert {json.loads(line)["kind"] for line in row_lines(text)} == {
        "messages", "window", "facts", "entities", "triples", "summaries"}

    fresh_clock = Clock(clock.now)
    fresh = open_memory(tmp_path / "b.db", fresh_clock, mode)
    assert fresh.import_jsonl(exported) == count
    out = io.StringIO()
    fresh.export_jsonl(out)
    assert row_lines(out.getvalue()) == row_lines(text)  # lossless: the same rows, byte for byte

    # recall reinforces what it returns: both memories get the same queries at the same times
    for query in QUERIES:
        clock.advance(seconds=60)
        fresh_clock.advance(seconds=60)
        assert_same_hits(original.recall(query, limit=8), fresh.recall(query, limit=8))
    for query in (None, "plan a dinner for my sister", "jazz"):
        left, right = original.context(query, max_tokens=400), fresh.context(query, max_tokens=400)
        assert left.text == right.text and left.tokens == right.tokens
    assert original.summary() == fresh.summary()
    assert original.window() == fresh.window()
    assert original.scoped(session_id="work").window() == fresh.scoped(session_id="work").window()
    assert [f.model_dump() for f in original.facts(include_inactive=True)] == \
           [f.model_dump() for f in fresh.facts(include_inactive=True)]
    assert fresh.scoped(user_id="bob").stats().messages == 0
    original.close()
    fresh.close()


def test_import_into_a_busy_file_renumbers_and_keeps_the_window(clock):
    with UnifiedMemory(user_id="ada", clock=clock, short_term_limit=4) as source:
        build(source, clock)
        buffer = io.StringIO()
        source.export_jsonl(buffer)
        expected = [h.id for h in source.recall("Lisbon weather", limit=5)]
        window = source.scoped(session_id="work").window()
    with UnifiedMemory(user_id="zed", clock=clock) as target:
        for i in range(30):  # positions taken by another user
            target.add_turn(f"zed message {i}")
        assert target.recall("Lisbon") == []
        assert target.scoped(user_id="ada").recall("Lisbon") == []  # an index built before the import
        added = target.import_jsonl(io.StringIO(buffer.getvalue()))
        assert target.import_jsonl(io.StringIO(buffer.getvalue())) == 0  # idempotent
        ada = target.scoped(user_id="ada")
        assert [h.id for h in ada.recall("Lisbon weather", limit=5)] == expected
        assert ada.scoped(session_id="work").window() == window
        assert added > 0 and target.stats().messages == 30
        # recall reinforced facts since: the file's older copy of them now conflicts
        with pytest.raises(MemoryValueError, match=r"line \d+: facts .* already exists with different "
                                                   r"last_accessed, access_count"):
            target.import_jsonl(io.StringIO(buffer.getvalue()))


def test_user_id_moves_an_export_to_another_user(clock):
    with UnifiedMemory(user_id="ada", clock=clock) as source:
        source.remember("I keep bees", metadata={"k": 1})
        buffer = io.StringIO()
        source.export_jsonl(buffer)
        source.scoped(user_id="bob").remember("x")
        everyone = io.StringIO()
        source.export_jsonl(everyone, all_users=True)
        assert json.loads(everyone.getvalue().splitlines()[0])["users"] == ["ada", "bob"]
        with pytest.raises(MemoryValueError, match="user_id: the export holds 2 users"):
            UnifiedMemory().import_jsonl(io.StringIO(everyone.getvalue()), user_id="zoe")
    with UnifiedMemory(clock=clock) as target:
        assert target.import_jsonl(io.StringIO(buffer.getvalue()), user_id="zoe") == 1
        assert [f.text for f in target.scoped(user_id="zoe").facts()] == ["I keep bees"]
        assert [h.text for h in target.scoped(user_id="zoe").recall("bees")] == ["I keep bees"]
        assert target.facts() == []


def without_ids(record) -> dict:
    """A record's fields that do not name rows (ids, and the ids it refers to)."""
    return record.model_dump(exclude={"id", "user_id", "superseded_by", "source_message_ids", "source_message_id"})


def copy_of(mem: UnifiedMemory) -> dict:
    """What a user's memory holds, whatever its ids: every tier's records without ids."""
    return {"facts": sorted(map(repr, map(without_ids, mem.facts(include_inactive=True)))),
            "episodes": sorted(map(repr, map(without_ids, mem.episodes()))),
            "entities": sorted(map(repr, map(without_ids, mem.entities()))),
            "triples": sorted(map(repr, map(without_ids, mem.triples()))),
            "window": [m.text() for m in mem.window()], "summary": mem.summary()}


@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
def test_import_as_another_user_into_the_same_file_copies_with_fresh_ids(tmp_path, mode):
    clock = Clock()
    mem = open_memory(tmp_path / "m.db", clock, mode)
    build(mem, clock)
    before = io.StringIO()
    count = mem.export_jsonl(before)
    eve = mem.scoped(user_id="eve")
    assert mem.import_jsonl(io.StringIO(before.getvalue()), user_id="eve") == count
    assert mem.import_jsonl(io.StringIO(before.getvalue()), user_id="eve") == 0  # the same fresh ids again
    after = io.StringIO()
    mem.export_jsonl(after)
    assert row_lines(after.getvalue()) == row_lines(before.getvalue())  # ada untouched
    assert copy_of(eve) == copy_of(mem)
    assert mem.users() == ["ada", "bob", "eve"]
    # fresh ids, and every reference between eve's rows stays inside eve's rows
    ada_ids = {f.id for f in mem.facts(include_inactive=True)} | {e.id for e in mem.episodes()}
    facts, episodes = eve.facts(include_inactive=True), eve.episodes()
    assert not ada_ids & ({f.id for f in facts} | {e.id for e in episodes})
    assert all(f.id.startswith("fact_") for f in facts) and all(e.id.startswith("msg_") for e in episodes)
    message_ids = {e.id for e in episodes}
    assert all(set(f.source_message_ids) <= message_ids for f in facts)
    assert any(f.superseded_by for f in facts)
    assert all(f.superseded_by in {g.id for g in facts} for f in facts if f.superseded_by)
    assert all(t.source_message_id in message_ids for t in eve.triples() if t.source_message_id)
    # recall on the copy: the same texts and scores
    for query in QUERIES:
        left, right = mem.recall(query, limit=8), eve.recall(query, limit=8)
        assert sorted((h.tier, h.text, h.score) for h in left) == sorted((h.tier, h.text, h.score) for h in right)
    mem.close()


def test_a_bad_file_names_the_file_and_line_and_writes_nothing(tmp_path, clock):
    with UnifiedMemory(user_id="ada", clock=clock) as source:
        source.add_turn("I keep bees", "Nice")
        source.remember("I like jazz")
        path = tmp_path / "bad.jsonl"
        source.export_jsonl(path)
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"tokens":', '"tokens":"many","x":')
    path.write_text("\n".join(lines) + "\n")
    with UnifiedMemory(user_id="ada", clock=clock) as target:
        with pytest.raises(MemoryValueError, match=rf"source: {path}, line 4: columns of 'window'"):
            target.import_jsonl(path)
        path.write_text(path.read_text().replace('"tokens":"many","x":', '"tokens":'))
        path.write_text(path.read_text().replace('"status":"active"', '"status":5', 1))
        line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if '"status":5' in text)
        with pytest.raises(MemoryValueError, match=rf"line {line}: facts.status: expected text, got int"):
            target.import_jsonl(path)
        assert target.stats().messages == 0 and target.facts() == []
        with pytest.raises(MemoryValueError, match="does not exist"):
            target.import_jsonl(tmp_path / "missing.jsonl")
        with pytest.raises(MemoryTypeError, match="source: expected path or text stream"):
            target.import_jsonl(42)
        with pytest.raises(MemoryTypeError, match="destination: expected path or text stream"):
            target.export_jsonl(42)


def test_export_to_a_path_is_atomic(tmp_path, clock, monkeypatch):
    path = tmp_path / "out.jsonl"
    path.write_text("previous export\n")
    with UnifiedMemory(clock=clock) as mem:
        mem.remember("I keep bees")

        class Boom(Exception):
            pass

        def failing(storage, out, **kwargs):
            out.write("half a line")
            raise Boom

        monkeypatch.setattr("unified_memory.io.jsonl.export_rows", failing)
        with pytest.raises(Boom):
            mem.export_jsonl(path)
        assert path.read_text() == "previous export\n"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
        monkeypatch.undo()
        assert mem.export_jsonl(str(path)) == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
        assert "I keep bees" in path.read_text()


def scan(directory: Path, needles=(SECRET,)) -> list[tuple[str, bytes]]:
    """Every (file, needle) where a needle occurs in the bytes of a file under ``directory``;
    on PostgreSQL (the database of ``directory / "memory.db"``) also every (table, needle) where
    a needle occurs in a row of a table of the database, each row read as text."""
    found = [(str(p), needle) for p in directory.rglob("*") if p.is_file()
             for needle in needles if needle in p.read_bytes()]
    for table, rows in rows_as_text(directory / "memory.db").items():
        found += [(table, needle) for needle in needles if any(needle.decode() in row for row in rows)]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpy", "chroma"])
def test_forget_a_user_leaves_no_trace_in_the_files(tmp_path, clock, backend):
    if backend == "chroma":
        pytest.importorskip("chromadb")
    path = tmp_path / "memory.db"
    settings_ = dict(embedder=FakeEmbedder(), retrieval="hybrid", vectors=VectorConfig(backend=backend),
                     short_term_limit=4, clock=clock)
    mem = UnifiedMemory(path, user_id="alice", **settings_)
    bob = mem.scoped(user_id="bob")
    for i in range(25):
        mem.add_turn(f"My code is zebra-secret-4711 number {i}, my cat Quokkazilla agrees", "zebra-secret-4711 noted")
        mem.remember(f"alice keeps zebra-secret-4711 in drawer {i}", metadata={"s": "zebra-secret-4711"})
        bob.add_turn(f"I keep bees in Porto, hive {i}", "Nice")
        clock.advance(seconds=60)
    mem.add_triple("Quokkazilla", "likes", "zebra-secret-4711")
    mem.recall("zebra-secret-4711")
    bob_before = bob.recall("bees in Porto", limit=10)
    assert scan(tmp_path)  # the scan does see the secret before forgetting
    seen = []
    mem.on_event(seen.append, kinds=["reset"])
    counts = mem.forget()
    assert counts["messages"] == 50 and counts["facts"] >= 25 and counts["window"] == 4
    assert counts["embeddings"] > 0 and counts["triples"] >= 1
    assert [(e.kind, e.user_id, dict(e.counts)) for e in seen] == [("reset", "alice", counts)]
    assert mem.recall("zebra-secret-4711") == [] and mem.stats().messages == 0
    assert scan(tmp_path, (SECRET, b"Quokkazilla")) == []  # while open: the WAL was truncated
    assert_same_hits(bob.recall("bees in Porto", limit=10), bob_before)
    mem.close()
    assert scan(tmp_path, (SECRET, b"Quokkazilla")) == []
    with UnifiedMemory(path, user_id="bob", **settings_) as reopened:
        assert_same_hits(reopened.recall("bees in Porto", limit=10), bob_before)
        assert reopened.stats().messages == 50


def test_forget_by_ids_removes_the_items_and_what_derives_from_them(tmp_path, clock):
    path = tmp_path / "memory.db"
    mem = UnifiedMemory(path, user_id="ada", clock=clock, embedder=FakeEmbedder(), retrieval="hybrid",
                        short_term_limit=2)
    old_turn = mem.add_turn("my locker code is zebra-secret-4711", "noted")  # leaves the window: summarised
    mem.add_turn("I keep bees", "nice")
    kept_fact = mem.remember("I keep bees")  # the same text as a message: its cached vector stays
    secret_fact = mem.remember("the safe opens with zebra-secret-4711")
    mem.add_triple("Maria", "lives_in", "Lisbon")
    works = mem.add_triple("Maria", "works_at", "Acme Corp")
    mem.recall("bees")  # vectors built
    assert "zebra-secret-4711" in mem.summary()
    summarizer = internals(mem).summarizer
    assert any("zebra" in text for text in summarizer.remembered)  # remembered by the summarizer
    dense = internals(mem).dense.partitions
    assert any(key.startswith(secret_fact) for key in dense["facts"].index.ids("facts/ada"))

    assert scan(tmp_path)  # the secret is in the files before
    counts = mem.forget(ids=[old_turn[0], secret_fact, works])
    # facts and triples: the ones named, and those the forgotten turn was promoted into ("my locker code is ...")
    assert counts["messages"] == 1 and counts["facts"] == 2 and counts["triples"] == 2
    assert counts["window"] == 0 and counts["summaries"] == 1 and counts["embeddings"] >= 2
    assert mem.summary() == ""
    # nor in memory: the default summarizer forgot the summaries it remembered
    assert not any("zebra" in text for text in summarizer.remembered)
    assert [f.id for f in mem.facts()] == [kept_fact]
    assert [t.as_text() for t in mem.triples()] == ["Maria lives in Lisbon"]
    maria = next(h for h in mem.recall("Maria", tiers="entity"))
    assert "Acme" not in maria.text  # the description no longer names what was forgotten
    assert secret_fact not in [h.id for h in mem.recall("safe zebra-secret-4711", tiers="long_term")]
    assert not any(key.startswith(secret_fact) for key in dense["facts"].index.ids("facts/ada"))
    assert [h.id for h in mem.recall("bees", tiers="long_term")] == [kept_fact]

    in_window = mem.window()[-1].id
    maria_id = next(e.id for e in mem.entities() if e.name == "Maria")
    counts = mem.forget(ids=[in_window, maria_id])
    assert counts["messages"] == 1 and counts["window"] == 1 and counts["summaries"] == 0
    assert counts["entities"] == 1 and counts["triples"] == 1  # Maria's remaining relation
    assert mem.triples() == [] and "Maria" not in [e.name for e in mem.entities()]
    mem.close()
    assert scan(tmp_path) == []


def test_forgetting_a_remembered_fact_takes_the_relations_it_stated(clock):
    """``remember`` writes the relations its text states with no source message; forgetting the
    fact takes them (and a value left in no relation), not those another fact or turn stated."""
    with UnifiedMemory(user_id="ada", clock=clock) as mem:
        tea, bees = mem.remember_many(["My favourite tea is sencha", "My favourite insect is the honeybee"])
        clock.advance(seconds=5)
        mem.add_turn("My favourite drink is sencha", "ok")  # sencha stated again, by a turn
        stated = {t.as_text() for t in mem.triples()}
        counts = mem.forget(ids=[tea])
        left = {t.as_text() for t in mem.triples()}
        assert counts["triples"] >= 1 and not any("tea" in t for t in left)
        assert any("insect" in t for t in left) and any("drink" in t for t in left)
        assert left < stated and "sencha" in [e.name for e in mem.entities()]  # still the drink's object
        assert tea not in [h.id for h in mem.recall("favourite tea sencha")]
        mem.forget(ids=[bees])
        assert "honeybee" not in [e.name for e in mem.entities()]


def test_forgetting_a_turn_takes_the_people_and_places_only_it_named(clock):
    """Entities mentioned once, by the forgotten user turn, and left in no relation go with it; those
    mentioned elsewhere too, or still in a relation, stay."""
    with UnifiedMemory(user_id="ada", clock=clock) as mem:
        mem.add_turn("My friend Bruno lives in Porto", "ok")
        clock.advance(seconds=5)
        secret = mem.add_turn("My cousin Ottilie lives in Graz, Bruno says hi", "Say hi to Ottilie")
        assert {"Ottilie", "Graz", "Bruno"} <= {e.name for e in mem.entities()}
        mem.forget(ids=[secret[1]])  # the assistant's reply names Ottilie too, but entities come from users
        assert "Ottilie" in {e.name for e in mem.entities()}
        mem.forget(ids=[secret[0]])
        names = {e.name for e in mem.entities()}
        assert not names & {"Ottilie", "Graz"} and {"Bruno", "Porto"} <= names
        assert [h for h in mem.recall("Ottilie Graz cousin") if "Ottilie" in h.text] == []


def test_forget_unknown_or_foreign_ids_deletes_nothing(clock):
    with UnifiedMemory(user_id="ada", clock=clock) as mem:
        mine = mem.remember("I keep bees")
        theirs = mem.scoped(user_id="bob").remember("I keep wasps")
        before = io.StringIO()
        mem.export_jsonl(before, all_users=True)
        for ids in ([mine, "fact_nope"], [theirs], [mine, theirs]):
            with pytest.raises(NotFoundError) as caught:
                mem.forget(ids=ids)
            assert caught.value.field == "ids" and str(caught.value).startswith("ids:")
        with pytest.raises(MemoryTypeError, match="ids"):
            mem.forget(ids=mine)
        with pytest.raises(MemoryValueError, match="ids: must not be empty"):
            mem.forget(ids=[])
        after = io.StringIO()
        mem.export_jsonl(after, all_users=True)
        assert row_lines(after.getvalue()) == row_lines(before.getvalue())
        # bob's own ids, through bob's scope (or user_id=) are forgettable
        assert mem.forget(user_id="bob", ids=[theirs])["facts"] == 1
        assert mem.facts()[0].id == mine


def test_forget_another_user_reports_that_user(clock):
    with UnifiedMemory(user_id="ada", clock=clock) as mem:
        mem.remember("I keep bees")
        mem.scoped(user_id="bob").add_turn("hello")
        seen = []
        mem.on_event(seen.append, kinds=["reset"])
        counts = mem.forget(user_id="bob")
        assert counts["messages"] == 1 and counts["window"] == 1 and counts["facts"] == 0
        assert seen[0].user_id == "bob" and seen[0].counts["messages"] == 1
        assert [f.text for f in mem.facts()] == ["I keep bees"]


def test_async_twins(clock):
    async def main():
        async with UnifiedMemory(user_id="ada", clock=clock) as mem:
            await mem.aremember("I keep bees")
            buffer = io.StringIO()
            assert await mem.aexport_jsonl(buffer) == 1
            async with UnifiedMemory(user_id="zoe", clock=clock) as other:
                assert await other.aimport_jsonl(io.StringIO(buffer.getvalue()), user_id="zoe") == 1
                return (await other.aforget())["facts"], [f.text for f in await mem.afacts()]

    assert asyncio.run(main()) == (1, ["I keep bees"])


def test_rows_of_tables_created_on_first_use_are_carried_over(clock):
    with UnifiedMemory(user_id="ada", clock=clock) as source:
        source.add_turn("hello")
        inner = internals(source)
        with inner.storage.atomic():
            inner.ingested.record("ada", ["chat.json#1"], now=clock.now)
        buffer = io.StringIO()
        source.export_jsonl(buffer)
    assert '"kind":"ingested"' in buffer.getvalue()
    with UnifiedMemory(user_id="ada", clock=clock) as target:  # a file without the table yet
        assert target.import_jsonl(io.StringIO(buffer.getvalue())) == 3
        assert internals(target).ingested.existing("ada", ["chat.json#1"]) == {"chat.json#1"}
        assert target.forget()["ingested"] == 1


# -- property: an export holds exactly one user's items --------------------------------------------

USERS = st.sampled_from(["ada", "bob", "cyd"])
WORDS = st.lists(st.sampled_from(["bees", "jazz", "Lisbon", "Maria", "sister", "peanuts", "chess", "works",
                                  "lives", "I", "my", "love", "Porto", "at", "Acme"]), min_size=1, max_size=6)
OPERATIONS = st.lists(st.tuples(st.sampled_from(["turn", "remember", "triple"]), USERS, WORDS, WORDS),
                      min_size=1, max_size=12)


def apply(mem, clock, operations):
    """Play generated operations (a turn, a fact or a relation, for one of the users) on ``mem``."""
    for kind, user, first, second in operations:
        view = mem.scoped(user_id=user)
        clock.advance(seconds=30)
        if kind == "turn":
            view.add_turn(" ".join(first), " ".join(second))
        elif kind == "remember":
            view.remember(" ".join(first))
        else:
            view.add_triple(" ".join(first), "relates_to", " ".join(second))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, who=USERS)
def test_export_import_keeps_exactly_one_users_items(operations, who):
    clock = Clock()
    with UnifiedMemory(user_id=who, clock=clock, short_term_limit=3) as mem:
        apply(mem, clock, operations)
        buffer = io.StringIO()
        mem.export_jsonl(buffer)
        rows = [json.loads(line) for line in row_lines(buffer.getvalue())]
        assert {row["row"]["user_id"] for row in rows} <= {who}
        expected = (sorted((f.id, f.text, f.status) for f in mem.facts(include_inactive=True)),
                    sorted((e.id, e.content) for e in mem.episodes()),
                    sorted((t.id, t.as_text()) for t in mem.triples()))
    with UnifiedMemory(user_id=who, clock=clock) as fresh:
        fresh.import_jsonl(io.StringIO(buffer.getvalue()))
        got = (sorted((f.id, f.text, f.status) for f in fresh.facts(include_inactive=True)),
               sorted((e.id, e.content) for e in fresh.episodes()),
               sorted((t.id, t.as_text()) for t in fresh.triples()))
        assert got == expected
        others = [u for u in ("ada", "bob", "cyd") if u != who]
        assert all(fresh.scoped(user_id=u).stats().messages == 0 for u in others)
        assert fresh.import_jsonl(io.StringIO(buffer.getvalue())) == 0


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS, who=USERS)
def test_a_copy_as_another_user_in_the_same_file_holds_the_same_memories(operations, who):
    """Export a user, import it as a new user into the same file: both hold the same facts,
    episodes and relations (fresh ids), the original is unchanged, a second import adds nothing."""
    clock = Clock()
    with UnifiedMemory(user_id=who, clock=clock, short_term_limit=3) as mem:
        apply(mem, clock, operations)
        buffer = io.StringIO()
        count = mem.export_jsonl(buffer)
        copy = mem.scoped(user_id="zed")
        assert mem.import_jsonl(io.StringIO(buffer.getvalue()), user_id="zed") == count
        assert copy_of(copy) == copy_of(mem)
        assert sorted((f.text, f.status) for f in copy.facts(include_inactive=True)) == \
               sorted((f.text, f.status) for f in mem.facts(include_inactive=True))
        assert sorted(t.as_text() for t in copy.triples()) == sorted(t.as_text() for t in mem.triples())
        again = io.StringIO()
        mem.export_jsonl(again)
        assert again.getvalue().splitlines()[1:] == buffer.getvalue().splitlines()[1:]
        assert mem.import_jsonl(io.StringIO(buffer.getvalue()), user_id="zed") == 0
