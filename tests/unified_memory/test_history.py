"""Bi-temporal facts and ``as_of`` (issue 16): every fact keeps when it was true
(``valid_from`` / ``valid_to``) and when the memory recorded and retired it
(``recorded_at`` / ``superseded_at``); ``recall`` and ``context`` ``as_of`` a moment
answer what was true then; ``facts(include_history=True)`` lists what was replaced."""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import DAY, T0, Clock
from tiers.storage.backend import SCHEMA_VERSION
from unified_memory import MemoryTypeError, MemoryValueError, UnifiedMemory, UnifiedMemoryError
from unified_memory.cli import main


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def slot_hits(mem: UnifiedMemory, as_of: object = None) -> list[str]:
    """The residence facts recall finds for the question, best first."""
    return [h.text for h in mem.recall("where do I live?", tiers="long_term", as_of=as_of)
            if h.text.startswith("I live in")]


@pytest.fixture
def moved(clock):
    """Lisbon at T0, Porto ten days later; the clock a further ten days on."""
    with UnifiedMemory(clock=clock) as mem:
        lisbon = mem.remember("I live in Lisbon")
        clock.advance(days=10)
        porto = mem.remember("I live in Porto")
        clock.advance(days=10)
        yield mem, lisbon, porto


# -- what is recorded ------------------------------------------------------------------------


def test_a_superseded_fact_keeps_when_it_was_true_and_when_it_was_recorded_and_retired(moved):
    mem, lisbon, porto = moved
    assert [f.id for f in mem.facts()] == [porto]
    old, new = mem.facts(include_history=True)
    assert (old.id, old.status, old.superseded_by) == (lisbon, "superseded", porto)
    assert (old.valid_from, old.valid_to, old.recorded_at, old.superseded_at) == (
        at(T0), at(T0 + 10 * DAY), at(T0), at(T0 + 10 * DAY))
    assert (new.id, new.status, new.valid_from, new.valid_to, new.recorded_at, new.superseded_at) == (
        porto, "active", at(T0 + 10 * DAY), None, at(T0 + 10 * DAY), None)


def test_a_turn_is_valid_from_when_it_was_said_and_recorded_when_written(clock):
    said = T0 - 30 * DAY
    with UnifiedMemory(clock=clock) as mem:
        mem.add_turn("I live in Lisbon", when=at(said), extract=True)
        clock.advance(days=1)
        mem.add_turn("I live in Porto now", when=at(said + 5 * DAY), extract=True)
        old, new = (f for f in mem.facts(include_history=True) if f.attribute == "residence")
        assert (old.valid_from, old.valid_to, old.recorded_at, old.superseded_at) == (
            at(said), at(said + 5 * DAY), at(T0), at(T0 + DAY))  # true then, known since the writes
        assert (new.valid_from, new.recorded_at) == (at(said + 5 * DAY), at(T0 + DAY))
        assert slot_hits(mem, as_of=at(said + DAY))[0] == "I live in Lisbon"


def test_a_start_the_fact_states_is_its_valid_from_and_ends_the_fact_it_replaces():
    clock = Clock(datetime(2024, 1, 10, tzinfo=UTC).timestamp())
    with UnifiedMemory(clock=clock) as mem:
        mem.remember("I live in Lisbon")
        clock.now = datetime(2024, 6, 15, tzinfo=UTC).timestamp()
        mem.remember("I live in Porto since March 2024")
        mem.remember("In 2019 I started playing the violin")
        mem.remember("In June I'm moving to Berlin")  # ahead, not a start: said when said
        by_text = {f.text: f for f in mem.facts(include_history=True)}
        assert by_text["I live in Lisbon"].valid_to == datetime(2024, 3, 1, tzinfo=UTC)
        assert by_text["I live in Porto since March 2024"].valid_from == datetime(2024, 3, 1, tzinfo=UTC)
        assert by_text["I live in Porto since March 2024"].recorded_at == datetime(2024, 6, 15, tzinfo=UTC)
        assert by_text["In 2019 I started playing the violin"].valid_from == datetime(2019, 1, 1, tzinfo=UTC)
        assert by_text["In June I'm moving to Berlin"].valid_from == datetime(2024, 6, 15, tzinfo=UTC)
        # as of April the move to Porto had happened, though the memory heard of it in June
        assert slot_hits(mem, as_of="2024-04-01")[0] == "I live in Porto since March 2024"
        assert slot_hits(mem, as_of="2024-02-01") == ["I live in Lisbon"]


def test_include_history_fits_with_include_archived_and_include_inactive(clock):
    with UnifiedMemory(clock=clock, long_term_limit=1) as mem:
        bees = mem.remember("I keep bees", importance=0.2)
        lisbon = mem.remember("I live in Lisbon")  # archives the bees
        clock.advance(days=1)
        porto = mem.remember("I live in Porto")
        ids = lambda **kw: [f.id for f in mem.facts(**kw)]  # noqa: E731
        assert ids() == [porto]
        assert ids(include_history=True) == [lisbon, porto]
        assert ids(include_archived=True) == [bees, porto]
        assert ids(include_history=True, include_archived=True) == [bees, lisbon, porto]
        assert ids(include_inactive=True) == [bees, lisbon, porto]
        with pytest.raises(MemoryTypeError) as caught:
            mem.facts(include_history="yes")
        assert caught.value.field == "include_history"


# -- as_of -------------------------------------------------------------------------------------


def test_recall_as_of_before_an_update_gives_the_old_value_and_after_it_the_new_one(moved):
    mem, lisbon, porto = moved
    before = mem.recall("where do I live?", tiers="long_term", as_of=at(T0 + 5 * DAY))
    assert [h.id for h in before] == [lisbon]  # Porto was not true yet
    assert (before[0].components["status"], before[0].components["valid_to"]) == ("active", None)
    after = mem.recall("where do I live?", tiers="long_term", as_of=at(T0 + 15 * DAY))
    assert [h.id for h in after] == [porto, lisbon] and after[1].components["status"] == "superseded"
    assert [h.id for h in mem.recall("where do I live?", tiers="long_term")] == [porto, lisbon]
    assert mem.recall("where do I live?", as_of=at(T0 - DAY)) == []  # nothing was known of it
    # the moment of a change: the new value holds from it on
    assert slot_hits(mem, as_of=at(T0 + 10 * DAY))[0] == "I live in Porto"


def test_context_as_of_shows_the_facts_true_then(moved):
    mem, _, _ = moved
    then = mem.context("where do I live?", as_of=at(T0 + 5 * DAY), max_tokens=300).text
    assert "Lisbon" in then and "Porto" not in then
    now = mem.context("where do I live?", max_tokens=300).text
    assert now.index("I live in Porto") < now.index("I live in Lisbon")
    empty_query = mem.context(as_of=at(T0 + 5 * DAY), max_tokens=300).text
    assert "I live in Lisbon" in empty_query and "Porto" not in empty_query
    assert "Porto" not in mem.context(as_of=at(T0 - DAY), max_tokens=300).text


def test_as_of_leaves_out_messages_and_entities_from_later(clock):
    with UnifiedMemory(clock=clock, short_term_limit=2) as mem:
        mem.add_turn("We adopted a dog called Biscuit", "Lovely")
        clock.advance(days=3)
        mem.add_turn("Biscuit chewed my violin", "Oh no")
        clock.advance(days=3)
        mem.add_turn("My sister Maria visited", "Nice")
        texts = lambda **kw: [h.text for h in mem.recall("Biscuit violin Maria", **kw)]  # noqa: E731
        assert any("chewed my violin" in t for t in texts())
        assert any("Maria" in t for t in texts())
        early = texts(as_of=at(T0 + DAY))
        assert any("Biscuit" in t for t in early)
        assert not any("violin" in t or "Maria" in t for t in early)
        block = mem.context("Biscuit", as_of=at(T0 + DAY), max_tokens=400).text
        assert "Maria" not in block and "violin" not in block


def test_as_of_reads_the_graph_as_it_stood(clock):
    with UnifiedMemory(clock=clock) as mem:
        mem.add_triple("Maria", "lives_in", "Lisbon")
        clock.advance(days=10)
        mem.add_triple("Maria", "lives_in", "Berlin")  # ends Lisbon
        maria = lambda **kw: next(h for h in mem.recall("Maria", tiers="entity", **kw)  # noqa: E731
                                  if h.components["entity"] == "Maria")
        assert "formerly lives in Lisbon" in maria().text and "Berlin" in maria().text
        then = maria(as_of=at(T0 + DAY))
        assert "Maria lives in Lisbon" in then.text and "Berlin" not in then.text
        assert [h.text for h in mem.recall("Berlin", tiers="entity", as_of=at(T0 + DAY))] == []


def test_days_count_back_from_as_of(moved):
    mem, lisbon, _ = moved
    assert [h.id for h in mem.recall("live", tiers="long_term", days=3, as_of=at(T0 + 2 * DAY))] == [lisbon]
    assert mem.recall("live", tiers="long_term", days=3, as_of=at(T0 + 9 * DAY)) == []


def test_looking_back_does_not_count_as_a_use(moved):
    mem, lisbon, _ = moved
    mem.recall("where do I live?", as_of=at(T0 + DAY))
    assert {f.id: f.access_count for f in mem.facts(include_history=True)}[lisbon] == 0


def test_as_of_accepts_datetimes_iso_strings_and_seconds_naive_meaning_utc(moved):
    mem, lisbon, _ = moved
    moment = T0 + 5 * DAY
    aware = at(moment)
    naive = aware.replace(tzinfo=None)
    elsewhere = aware.astimezone(timezone(timedelta(hours=5)))
    results = {str(v): [h.id for h in mem.recall("live", tiers="long_term", as_of=v)]
               for v in (aware, naive, elsewhere, aware.isoformat(), naive.isoformat(), moment)}
    assert set(map(tuple, results.values())) == {(lisbon,)}


@pytest.mark.parametrize("bad, kind", [("yesterday", MemoryValueError), ("2024-13-01", MemoryValueError),
                                       (float("nan"), MemoryValueError), (1e20, MemoryValueError),
                                       ([2024], MemoryTypeError), (True, MemoryTypeError)])
def test_a_bad_as_of_is_refused_naming_the_field(mem, bad, kind):
    for call in (lambda: mem.recall("x", as_of=bad), lambda: mem.context("x", as_of=bad),
                 lambda: mem.context(as_of=bad)):
        with pytest.raises(kind) as caught:
            call()
        assert isinstance(caught.value, UnifiedMemoryError) and caught.value.field == "as_of"
        assert isinstance(caught.value, ValueError if kind is MemoryValueError else TypeError)


def test_the_async_twins_take_as_of_and_include_history(moved):
    mem, lisbon, porto = moved

    async def main():
        hits = await mem.arecall("where do I live?", tiers="long_term", as_of=at(T0 + DAY))
        block = await mem.acontext("where do I live?", as_of=at(T0 + DAY), max_tokens=300)
        facts = await mem.afacts(include_history=True)
        return [h.id for h in hits], block.text, [f.id for f in facts]

    hits, text, facts = asyncio.run(main())
    assert hits == [lisbon] and "Porto" not in text and facts == [lisbon, porto]


def test_a_scoped_view_answers_as_of_for_its_user(moved):
    mem, lisbon, _ = moved
    assert mem.scoped(user_id="bob").recall("live", as_of=at(T0 + DAY)) == []
    assert [h.id for h in mem.scoped(user_id=mem.user_id).recall("live", tiers="long_term",
                                                                 as_of=at(T0 + DAY))] == [lisbon]


# -- files, exports, forgetting, the command line ----------------------------------------------


@pytest.mark.sqlite_only  # migrates a SQLite file written by version 2 (PostgreSQL schemas start at version 3)
def test_a_file_of_schema_2_is_migrated_recorded_and_superseded_times_backfilled(db_path, clock):
    with UnifiedMemory(db_path, clock=clock) as mem:
        lisbon = mem.remember("I live in Lisbon")
        clock.advance(days=10)
        porto = mem.remember("I live in Porto")
    conn = sqlite3.connect(db_path)  # what version 2 wrote: no recorded_at, no superseded_at
    with conn:
        conn.execute("ALTER TABLE facts DROP COLUMN recorded_at")
        conn.execute("ALTER TABLE facts DROP COLUMN superseded_at")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.close()
    clock.advance(days=10)
    with UnifiedMemory(db_path, clock=clock) as mem:
        assert mem.stats().schema_version == SCHEMA_VERSION
        old, new = mem.facts(include_history=True)
        assert (old.id, old.recorded_at, old.superseded_at) == (lisbon, at(T0), at(T0 + 10 * DAY))
        assert (new.id, new.recorded_at, new.superseded_at) == (porto, at(T0 + 10 * DAY), None)
        assert slot_hits(mem, as_of=at(T0 + DAY)) == ["I live in Lisbon"]
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    conn.close()


def _export(mem: UnifiedMemory) -> tuple[dict, list[dict]]:
    out = io.StringIO()
    mem.export_jsonl(out)
    header, *rows = (json.loads(line) for line in out.getvalue().splitlines() if line)
    return header, rows


def _jsonl(header: dict, rows: list[dict]) -> io.StringIO:
    return io.StringIO("\n".join(json.dumps(obj) for obj in [header, *rows]) + "\n")


def test_export_and_import_keep_the_history(moved, clock):
    mem, lisbon, porto = moved
    header, rows = _export(mem)
    assert header["schema_version"] == SCHEMA_VERSION
    with UnifiedMemory(clock=clock) as fresh:
        assert fresh.import_jsonl(_jsonl(header, rows)) == len(rows)
        assert fresh.facts(include_history=True) == mem.facts(include_history=True)
        assert slot_hits(fresh, as_of=at(T0 + DAY)) == ["I live in Lisbon"]


def test_an_export_of_schema_2_imports_with_recorded_and_superseded_times(moved, clock):
    mem, lisbon, porto = moved
    header, rows = _export(mem)
    header["schema_version"] = 2
    for row in rows:
        if row["kind"] == "facts":
            del row["row"]["recorded_at"], row["row"]["superseded_at"]
    with UnifiedMemory(clock=clock) as fresh:
        assert fresh.import_jsonl(_jsonl(header, rows)) == len(rows)
        old, new = fresh.facts(include_history=True)
        assert (old.recorded_at, old.superseded_at, new.recorded_at, new.superseded_at) == (
            at(T0), at(T0 + 10 * DAY), at(T0 + 10 * DAY), None)


def test_forgetting_the_user_leaves_no_history(moved):
    mem, _, _ = moved
    mem.forget()
    assert mem.facts(include_inactive=True) == [] and mem.recall("live", as_of=at(T0 + DAY)) == []


def test_forgetting_a_fact_removes_it_from_answers_about_the_past(moved):
    mem, lisbon, porto = moved
    mem.forget(ids=[lisbon])
    assert [f.id for f in mem.facts(include_history=True)] == [porto]
    assert mem.recall("live", tiers="long_term", as_of=at(T0 + DAY)) == []


@pytest.mark.sqlite_only  # the command line opens the file at --db itself
def test_cli_recall_and_context_as_of_and_facts_history(db_path, clock, capsys):
    with UnifiedMemory(db_path, clock=clock) as mem:
        mem.remember("I live in Lisbon")
        clock.advance(days=10)
        mem.remember("I live in Porto")
    day = at(T0 + DAY).date().isoformat()

    def run(*argv: str):
        code = main(["--db", str(db_path), "--json", *argv])
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)

    assert [h["text"] for h in run("recall", "where do I live?", "--tiers", "long_term", "--as-of", day)] == [
        "I live in Lisbon"]
    assert run("recall", "where do I live?", "--tiers", "long_term")[0]["text"] == "I live in Porto"
    assert "Porto" not in run("context", "where do I live?", "--as-of", f"{day}T12:00:00Z")["text"]
    history = run("facts", "--history")
    assert [(f["text"], f["status"]) for f in history] == [("I live in Lisbon", "superseded"),
                                                           ("I live in Porto", "active")]
    assert history[0]["valid_to"] is not None and history[0]["superseded_at"] is not None
    code = main(["--db", str(db_path), "facts", "--history"])
    assert code == 0 and "valid from" in capsys.readouterr().out
    assert main(["--db", str(db_path), "recall", "x", "--as-of", "last tuesday"]) != 0
    assert "--as-of: expected an ISO date" in capsys.readouterr().err


# -- the property -------------------------------------------------------------------------------

CITIES = ["Lisbon", "Porto", "Berlin", "Madrid", "Paris", "Oslo"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(updates=st.lists(st.tuples(st.sampled_from(CITIES), st.floats(0.5, 400.0)), min_size=1, max_size=6),
       probes=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4))
def test_as_of_ranks_the_value_valid_then_first_and_without_it_the_latest(updates, probes):
    clock = Clock()
    with UnifiedMemory(clock=clock) as mem:
        times = []
        for city, gap_days in updates:
            clock.advance(days=gap_days)
            times.append(clock.now)
            mem.remember(f"I live in {city}")
        assert slot_hits(mem)[0] == f"I live in {updates[-1][0]}"
        for probe in probes:
            index = int(probe * len(times)) if probe < 1.0 else len(times) - 1
            start = times[index]
            end = times[index + 1] if index + 1 < len(times) else start + 30 * DAY
            moment = start + (end - start) * probe % (end - start) if end > start else start
            valid = next(city for (city, _), t in reversed(list(zip(updates, times, strict=True))) if t <= moment)
            assert slot_hits(mem, as_of=moment)[0] == f"I live in {valid}"
        assert slot_hits(mem, as_of=times[0] - 1.0) == []
