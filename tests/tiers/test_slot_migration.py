"""Schema 5 (issue 40): a relation says it is single-valued (``triples.single``) instead of its predicate
starting ``my_``. A file of schema 4 is migrated: ``my_X`` relations become ``X`` marked single, and where
the same ``X`` relation is stored beside ``my_X`` the two become one row that loses nothing (mentions
summed, earlier creation, live if either was, references moved). The same SQL runs on PostgreSQL; an
old export is normalised the same way on import."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiers.graph.entities import EntityGraph
from tiers.storage.backend import SCHEMA_VERSION, Scope, Storage
from tiers.storage.schema import MERGE_SLOT_PREDICATES, merge_slot_rows

pytestmark = pytest.mark.sqlite_only  # an old SQLite file, written by hand; PostgreSQL: the test at the end

COLUMNS = ("id, user_id, agent_id, subject_id, predicate, object_id, confidence, mention_count, created_at, "
           "updated_at, source_message_id, metadata, valid_to, superseded_by")


def _old_file(path, triples):
    """A schema-4 file: entities u (user), c (Civic), g (Golf), and ``triples`` (tuples in COLUMNS order)."""
    Storage(path).close()
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE triples DROP COLUMN single")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    for entity_id, name in [("u", "user"), ("c", "Civic"), ("g", "Golf")]:
        conn.execute("INSERT INTO entities (id, user_id, agent_id, name, norm_name, type, attributes, first_seen, "
                     "last_seen, metadata) VALUES (?, 'ada', '', ?, ?, 'thing', '{}', 0, 0, '{}')",
                     [entity_id, name, name.casefold()])
    conn.executemany(f"INSERT INTO triples ({COLUMNS}) VALUES ({', '.join('?' * 14)})", triples)
    conn.commit()
    conn.close()


def _row(id, predicate, obj, *, mentions=1, created=1.0, updated=None, valid_to=None, by=None, source=None,
         confidence=1.0):
    return (id, "ada", "", "u", predicate, obj, confidence, mentions, created, updated or created, source, "{}",
            valid_to, by)


def _rows(store):
    return {r["id"]: r for r in store.query("SELECT * FROM triples ORDER BY seq")}


def test_a_schema_4_file_renames_the_slots_and_marks_them_single(tmp_path):
    path = tmp_path / "old.db"
    _old_file(path, [_row("t1", "my_car", "c", valid_to=2.0, by="t2"), _row("t2", "my_car", "g", created=2.0),
                     _row("t3", "likes", "g")])
    store = Storage(path)
    assert store.get_meta("schema_version") == str(SCHEMA_VERSION) == "5"
    rows = _rows(store)
    assert [(r["predicate"], r["single"], r["valid_to"], r["superseded_by"]) for r in rows.values()] == [
        ("car", 1, 2.0, "t2"), ("car", 1, None, None), ("likes", 0, None, None)]
    # and the graph goes on treating the slot as single-valued
    graph = EntityGraph(store)
    with store.atomic():
        graph.add_triples(Scope("ada"), [_triple("car", "Civic")], now=3.0)
    assert {t.object for t in graph.triples(Scope("ada")) if t.predicate == "car" and t.valid_to is None} == {"Civic"}


def _triple(predicate, obj, single=False):
    from tiers.records.types import ExtractedTriple
    return ExtractedTriple(subject="user", predicate=predicate, object=obj, single=single)


def test_a_relation_stored_under_both_names_becomes_one_row_that_loses_nothing(tmp_path):
    path = tmp_path / "old.db"
    # t1: "car Civic" (an LLM's name), ended by t3; t2: "my_car Civic", earlier, live, mentioned twice;
    # t4 was superseded by the my_ row t2
    _old_file(path, [_row("t1", "car", "c", created=5.0, updated=6.0, valid_to=7.0, by="t3", confidence=0.5),
                     _row("t2", "my_car", "c", mentions=2, created=1.0, updated=4.0, source="msg_1"),
                     _row("t3", "car", "g", created=7.0),
                     _row("t4", "my_bike", "g", created=0.5, valid_to=1.0, by="t2")])
    store = Storage(path)
    rows = _rows(store)
    assert set(rows) == {"t1", "t3", "t4"}
    merged = rows["t1"]
    assert (merged["predicate"], merged["single"], merged["mention_count"], merged["created_at"],
            merged["updated_at"], merged["valid_to"], merged["superseded_by"], merged["confidence"],
            merged["source_message_id"]) == ("car", 1, 3, 1.0, 6.0, None, None, 1.0, "msg_1")
    assert rows["t4"]["superseded_by"] == "t1" and rows["t4"]["predicate"] == "bike"
    assert rows["t3"]["single"] == 0  # not a slot then; a new "car" relation ends it (t1 is single)


def _full(id, predicate, obj, *, mentions, created, valid_to, by, user="ada"):
    return {"id": id, "user_id": user, "agent_id": "", "subject_id": "u", "predicate": predicate, "object_id": obj,
            "confidence": 1.0, "mention_count": mentions, "created_at": created, "updated_at": created,
            "source_message_id": None, "metadata": "{}", "valid_to": valid_to, "superseded_by": by, "single": 1}


_rows_strategy = st.lists(st.tuples(st.sampled_from(["car", "my_car", "bike", "my_bike"]), st.sampled_from("cg"),
                                    st.integers(1, 5), st.floats(0, 10), st.none() | st.floats(0, 10)),
                          max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_rows_strategy)
def test_migrating_my_rows_loses_no_rows_information(tmp_path_factory, specs):
    """Whatever mix of ``X`` and ``my_X`` rows a file holds, the migrated file holds one row per relation,
    whose mentions are the sum of its rows', created at the earliest, live if any was; the export merge
    (merge_slot_rows) agrees with the SQL."""
    seen, rows = set(), []
    for n, (predicate, obj, mentions, created, valid_to) in enumerate(specs):
        if (predicate, obj) not in seen:  # the UNIQUE constraint of a real file
            seen.add((predicate, obj))
            rows.append(_row(f"t{n}", predicate, obj, mentions=mentions, created=created, valid_to=valid_to))
    path = tmp_path_factory.mktemp("m") / "old.db"
    _old_file(path, rows)
    store = Storage(path)
    got = {(r["predicate"], r["object_id"]): r for r in _rows(store).values()}
    store.close()
    want: dict = {}
    for _id, _, _, _, predicate, obj, _, mentions, created, _, _, _, valid_to, _ in rows:
        key = (predicate.removeprefix("my_"), obj)
        want.setdefault(key, []).append((mentions, created, valid_to))
    assert set(got) == set(want)
    for key, parts in want.items():
        row = got[key]
        assert row["mention_count"] == sum(m for m, _, _ in parts)
        assert row["created_at"] == min(c for _, c, _ in parts)
        assert (row["valid_to"] is None) == any(v is None for _, _, v in parts)
        assert row["single"] == int(len(parts) > 1 or any(p.startswith("my_") for p, o in seen if
                                                            (p.removeprefix("my_"), o) == key))
    # the same merge for an export's rows
    from tiers.storage.schema import upgrade_row
    exported = [upgrade_row("triples", {**_full(r[0], r[4], r[5], mentions=r[7], created=r[8], valid_to=r[12],
                                                by=None), "single": None} | {"single": 0}) for r in rows]
    for row in exported:
        if any(r[0] == row["id"] and r[4].startswith("my_") for r in rows):
            row["single"] = 1
    merged = {(r["predicate"], r["object_id"]): r for r in merge_slot_rows(exported)}
    assert {k: (r["mention_count"], r["created_at"], r["valid_to"] is None) for k, r in merged.items()} == {
        k: (r["mention_count"], r["created_at"], r["valid_to"] is None) for k, r in got.items()}


def test_an_old_export_with_slot_predicates_is_normalised_on_import(tmp_path):
    from unified_memory import UnifiedMemory

    source = tmp_path / "source.db"
    with UnifiedMemory(source, user_id="ada", retrieval="lexical") as mem:
        mem.add_triple("user", "car", "Honda Civic")
        mem.export_jsonl(tmp_path / "new.jsonl")
    old = []
    for line in (tmp_path / "new.jsonl").read_text().splitlines():  # as schema 4 wrote it: no "single"
        obj = json.loads(line)
        if obj["kind"] == "header":
            obj["schema_version"] = 4
        elif obj["kind"] == "entities" and obj["row"]["name"] == "Honda Civic":
            obj["row"]["description"] = "Honda Civic (thing): user my_car Honda Civic"  # as schema 4 wrote it
            obj["row"]["doc"] = "honda civic my_car"
        elif obj["kind"] == "triples":
            obj["row"].pop("single")
            slot = {**obj["row"], "id": "tri_slot", "predicate": "my_car", "mention_count": 2,
                    "created_at": obj["row"]["created_at"] - 60}  # the same relation, stated earlier as a slot
            old.append(json.dumps({"kind": "triples", "row": slot}))
        old.append(json.dumps(obj))
    assert sum('"my_car"' in line for line in old) == 1
    (tmp_path / "old.jsonl").write_text("\n".join(old) + "\n")
    with UnifiedMemory(tmp_path / "target.db", user_id="ada", retrieval="lexical") as mem:
        mem.import_jsonl(tmp_path / "old.jsonl")
        cars = [t for t in mem.triples() if "car" in t.predicate]
        assert [(t.predicate, t.object) for t in cars] == [("car", "Honda Civic")]
        (card,) = [h.text for h in mem.recall("Honda Civic", tiers="entity")]
        assert "my_car" not in card and "car Honda Civic" in card  # the card the old rows brought, derived again
    conn = sqlite3.connect(tmp_path / "target.db")
    assert conn.execute("SELECT mention_count, single FROM triples WHERE predicate = 'car'").fetchall() == [(3, 1)]
    conn.close()


def _schema_4(pg, *, prepared: bool = False) -> None:
    """The database as schema 4 left it (no ``triples.single``), on a PostgreSQL connection."""
    from tiers.storage.pg_schema import prepare_schema

    if not prepared:
        prepare_schema(pg, "test db")
    pg.execute("ALTER TABLE triples DROP COLUMN single")
    pg.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")


@pytest.mark.postgresql
def test_the_same_migration_runs_on_postgresql(pg_url):
    psycopg = pytest.importorskip("psycopg")
    from tiers.storage.pg_schema import prepare_schema

    with psycopg.connect(pg_url, autocommit=True) as pg:
        _schema_4(pg)
        for entity_id, name in [("u", "user"), ("c", "Civic"), ("g", "Golf")]:
            pg.execute("INSERT INTO entities (id, user_id, agent_id, name, norm_name, type, attributes, first_seen, "
                       "last_seen, metadata) VALUES (%s, 'ada', '', %s, %s, 'thing', '{}', 0, 0, '{}')",
                       [entity_id, name, name.casefold()])
        for row in [_row("t1", "car", "c", created=5.0, valid_to=7.0, by="t3"), _row("t2", "my_car", "c", mentions=2),
                    _row("t3", "car", "g", created=7.0), _row("t4", "my_bike", "g", valid_to=1.0, by="t2")]:
            pg.execute(f"INSERT INTO triples ({COLUMNS}) VALUES ({', '.join(['%s'] * 14)})", list(row))
        prepare_schema(pg, "test db")
        got = pg.execute("SELECT id, predicate, single, mention_count, valid_to, superseded_by FROM triples "
                         "ORDER BY id").fetchall()
    assert got == [("t1", "car", 1, 3, None, None), ("t3", "car", 0, 1, None, None), ("t4", "bike", 1, 1, 1.0, "t1")]
    assert len(MERGE_SLOT_PREDICATES) == 5


def _stale_cards(path):
    """A schema-4 file whose Civic card reads the relation by its old name (as schema 4 wrote it)."""
    _old_file(path, [_row("t1", "my_car", "c")])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE entities SET description = 'Civic (thing): user my_car Civic', doc = 'civic my_car' "
                 "WHERE id = 'c'")
    conn.commit()
    conn.close()


def test_the_cards_of_an_upgraded_file_read_the_relations_as_they_are_named_now(tmp_path):
    from unified_memory import UnifiedMemory

    path = tmp_path / "old.db"
    _stale_cards(path)
    store = Storage(path)
    assert store.get_meta("entity_cards") == "stale"  # the migration marks them
    store.close()
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:  # the first open derives them again
        (card,) = [h.text for h in mem.recall("Civic", tiers="entity")]
        assert "my_car" not in card and "car Civic" in card
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'entity_cards'").fetchone() == ("current",)
    assert "my_car" not in conn.execute("SELECT description || doc FROM entities WHERE id = 'c'").fetchone()[0]
    conn.execute("UPDATE entities SET description = 'left alone' WHERE id = 'c'")
    conn.commit()
    conn.close()
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:  # current: a later open derives nothing
        assert [h.text for h in mem.recall("Civic", tiers="entity")] == ["left alone"]
        assert mem.reindex() == 1  # reindex derives the cards again too
        assert [h.text for h in mem.recall("Civic", tiers="entity")] != ["left alone"]


@pytest.mark.postgresql
def test_postgresql_marks_the_cards_stale_when_it_migrates(pg_url):
    psycopg = pytest.importorskip("psycopg")
    from tiers.storage.pg_schema import prepare_schema

    with psycopg.connect(pg_url, autocommit=True) as pg:
        prepare_schema(pg, "test db")
        pg.execute("DELETE FROM meta WHERE key = 'entity_cards'")
        prepare_schema(pg, "test db")  # up to date: nothing marked
        assert pg.execute("SELECT value FROM meta WHERE key = 'entity_cards'").fetchall() == []
        _schema_4(pg, prepared=True)
        pg.execute("INSERT INTO entities (id, user_id, agent_id, name, norm_name, type, attributes, first_seen, "
                   "last_seen, metadata, description, doc) VALUES ('c', 'ada', '', 'Civic', 'civic', 'thing', '{}', "
                   "0, 0, '{}', 'Civic (thing): user my_car Civic', 'civic my_car')")
        prepare_schema(pg, "test db")
        assert pg.execute("SELECT value FROM meta WHERE key = 'entity_cards'").fetchall() == [("stale",)]
    from unified_memory import UnifiedMemory

    with UnifiedMemory(pg_url, user_id="ada", retrieval="lexical") as mem:
        assert [h.text for h in mem.recall("Civic", tiers="entity")] == ["Civic (thing)"]  # derived again
    with psycopg.connect(pg_url, autocommit=True) as pg:
        assert pg.execute("SELECT value FROM meta WHERE key = 'entity_cards'").fetchall() == [("current",)]


def test_cards_that_cannot_be_derived_at_open_do_not_stop_the_open(tmp_path, monkeypatch, caplog):
    import unified_memory.coordinator.backend as opening
    from unified_memory import UnifiedMemory
    from unified_memory.errors import StorageError

    path = tmp_path / "old.db"
    _stale_cards(path)

    def locked(_graph):
        raise StorageError("database is locked")

    monkeypatch.setattr(opening, "refresh_stale_cards", locked)
    with caplog.at_level("WARNING"), UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:
        assert [t.predicate for t in mem.triples()] == ["car"]  # open, and the relations as they are now
    assert "cards are still to be derived" in caplog.text
    monkeypatch.undo()
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:  # a later open derives them
        assert "my_car" not in mem.recall("Civic", tiers="entity")[0].text
