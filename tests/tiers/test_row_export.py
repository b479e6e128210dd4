"""Row-level export, import and deletion over the user-scoped tables (tiers.maintenance.row_export, tiers.maintenance.deletion,
tiers.storage.user_tables)."""

from __future__ import annotations

import io
import json
import sqlite3

import pytest

from tiers.indexes.vectors import content_hash
from tiers.maintenance.deletion import delete_items, delete_user_rows, find_items, prune_embeddings
from tiers.maintenance.row_export import FORMAT, FORMAT_VERSION, export_rows
from tiers.maintenance.row_import import fresh_id, import_rows, parse_export
from tiers.storage.backend import Storage
from tiers.storage.user_tables import export_tables, user_tables, users_in
from unified_memory.errors import MemoryValueError, NotFoundError, UnifiedMemoryError

HEADER = {"kind": "header", "format": FORMAT, "version": FORMAT_VERSION}


def add_message(store: Storage, user: str, content: str, *, seq: int | None = None, window: bool = True,
                created: float = 1.5) -> tuple[int, str]:
    message_id = f"msg_{user}_{content}"
    columns, values = ["id", "user_id", "role", "content", "created_at"], [message_id, user, "user", content, created]
    if seq is not None:
        columns, values = ["seq", *columns], [seq, *values]
    with store.atomic():
        seq = store.insert(f"INSERT INTO messages ({', '.join(columns)}) VALUES ({', '.join('?' * len(values))})",
                           values)
        store.keys_written("messages", "seq")
        if window:
            store.execute("INSERT INTO \"window\" (message_seq, user_id, tokens) VALUES (?, ?, 3)", [seq, user])
    return seq, message_id


def add_graph(store: Storage, user: str) -> None:
    with store.atomic():
        for name in ("Maria", "Lisbon"):
            store.execute("INSERT INTO entities (id, user_id, name, norm_name, first_seen, last_seen) "
                          "VALUES (?, ?, ?, ?, 0.25, 0.5)", [f"ent_{user}_{name}", user, name, name.lower()])
        store.execute("INSERT INTO triples (id, user_id, subject_id, predicate, object_id, created_at, updated_at) "
                      "VALUES (?, ?, ?, 'lives_in', ?, 1.0, 2.0)",
                      [f"tri_{user}", user, f"ent_{user}_Maria", f"ent_{user}_Lisbon"])


def dump(store: Storage, users: list[str] | None) -> str:
    out = io.StringIO()
    export_rows(store, out, users=users, header=HEADER)
    return out.getvalue()


def parse(store: Storage, text: str, **kwargs) -> object:
    return parse_export(text.split("\n"), source="export.jsonl", tables=user_tables(store), **kwargs)


def rows_of(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()[1:]]


def test_tables_are_discovered_and_ordered_by_foreign_keys():
    store = Storage(None)
    with store.atomic():  # what another module adds later, referencing a message by position
        store.execute("CREATE TABLE IF NOT EXISTS ingested (user_id TEXT NOT NULL, source TEXT NOT NULL, "
                      "message_seq INTEGER REFERENCES messages(seq) ON DELETE CASCADE, at REAL NOT NULL, "
                      "PRIMARY KEY (user_id, source))")
        store.execute("CREATE TABLE IF NOT EXISTS aardvark (user_id TEXT, x INTEGER)")
    names = [t.name for t in user_tables(store)]
    assert names[:6] == ["messages", "window", "facts", "entities", "triples", "summaries"]
    assert set(names) == {"messages", "window", "facts", "entities", "triples", "summaries", "embeddings",
                          "index_journal", "index_snapshots", "ingested", "aardvark", "keyed_items"}
    assert names.index("ingested") > names.index("messages")
    assert "embeddings" not in [t.name for t in export_tables(store)]
    by_name = {t.name: t for t in user_tables(store)}
    assert by_name["messages"].surrogate == "seq" and by_name["messages"].identity == ("id",)
    assert by_name["window"].surrogate is None and by_name["window"].identity == ("message_seq",)
    assert by_name["summaries"].identity == ("user_id", "agent_id", "session_id")
    assert by_name["keyed_items"].surrogate == "seq" and by_name["keyed_items"].identity == ("user_id", "namespace", "key")
    assert by_name["ingested"].references == (("message_seq", "messages", "seq"),)


def test_export_holds_only_the_users_asked_for_and_values_round_trip_exactly():
    store = Storage(None)
    awkward = [0.1 + 0.2, 1e-300, 1_700_000_000.123456789, 2.0**-1074, 123456789.98765433]
    for i, value in enumerate(awkward):
        add_message(store, "ada", f"hello {i} \u2028 ünï", created=value)
    add_message(store, "bob", "bob's secret")
    add_graph(store, "ada")
    with store.atomic():
        store.execute("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, metadata) "
                      "VALUES ('fact_1', 'ada', 'x', 'x', 0.3, 1.0, 2.0, '{\"a\": [1, 2.5]}')")
    text = dump(store, ["ada"])
    assert "bob" not in text
    assert len(text.splitlines()) == len(text.split("\n")) - 1  # U+2028 escaped: one line per row
    header = json.loads(text.split("\n")[0])
    assert header["users"] == ["ada"]
    assert {r["kind"] for r in rows_of(text)} == {"messages", "window", "facts", "entities", "triples"}
    assert rows_of(text)[-1]["kind"] == "triples"  # foreign keys: entities first
    target = Storage(None)
    result = import_rows(target, parse(target, text))
    assert result.rows == len(rows_of(text)) == 5 + 5 + 1 + 2 + 1
    assert result.users == {"ada"}
    assert [r["created_at"] for r in target.query("SELECT created_at FROM messages ORDER BY seq")] == awkward
    assert target.query("SELECT metadata FROM facts")[0]["metadata"] == '{"a": [1, 2.5]}'  # text kept as is
    assert dump(target, ["ada"]) == text
    assert users_in(store) == ["ada", "bob"] and "bob" in dump(store, None)


def test_importing_twice_adds_nothing():
    store = Storage(None)
    add_message(store, "ada", "hi")
    add_graph(store, "ada")
    text = dump(store, ["ada"])
    target = Storage(None)
    assert import_rows(target, parse(target, text)).rows == 5
    again = import_rows(target, parse(target, text))
    assert again.rows == 0 and again.skipped == 5
    assert target.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 1


def test_colliding_positions_are_renumbered_with_their_references():
    source = Storage(None)
    with source.atomic():
        source.execute("CREATE TABLE IF NOT EXISTS ingested (user_id TEXT NOT NULL, source TEXT NOT NULL, "
                       "message_seq INTEGER REFERENCES messages(seq), PRIMARY KEY (user_id, source))")
    first, _ = add_message(source, "ada", "one")
    second, _ = add_message(source, "ada", "two")
    with source.atomic():
        source.execute("INSERT INTO ingested VALUES ('ada', 'chat.txt', ?)", [second])
    text = dump(source, ["ada"])
    target = Storage(None)
    with target.atomic():
        target.execute("CREATE TABLE IF NOT EXISTS ingested (user_id TEXT NOT NULL, source TEXT NOT NULL, "
                       "message_seq INTEGER REFERENCES messages(seq), PRIMARY KEY (user_id, source))")
    add_message(target, "bob", "bob one")
    add_message(target, "bob", "bob two")  # seqs 1 and 2 are taken
    assert import_rows(target, parse(target, text)).rows == 5
    rows = target.query("SELECT seq, content FROM messages WHERE user_id = 'ada' ORDER BY seq")
    assert [r["content"] for r in rows] == ["one", "two"]
    seq_of = {r["content"]: r["seq"] for r in rows}
    assert seq_of == {"one": 3, "two": 4}  # after the highest, in file order
    window = [r[0] for r in target.execute("SELECT message_seq FROM \"window\" WHERE user_id = 'ada' ORDER BY 1")]
    assert window == [3, 4]
    assert target.execute("SELECT message_seq FROM ingested").fetchone()[0] == seq_of["two"]
    # importing again finds the rows under their new positions: nothing added
    assert import_rows(target, parse(target, text)).rows == 0


def test_user_id_remaps_a_single_user_export_and_refuses_several_users():
    store = Storage(None)
    add_message(store, "ada", "hi")
    with store.atomic():
        store.execute("INSERT INTO summaries (user_id, text, updated_at) VALUES ('ada', 'sum', 1.0)")
    target = Storage(None)
    result = import_rows(target, parse(target, dump(store, ["ada"]), user_id="zoe"), user_id="zoe")
    assert result.users == {"zoe"}
    assert {r[0] for r in target.execute("SELECT user_id FROM messages UNION SELECT user_id FROM \"window\" "
                                         "UNION SELECT user_id FROM summaries")} == {"zoe"}
    add_message(store, "bob", "yo")
    with pytest.raises(MemoryValueError, match="export.jsonl, line 1: user_id: the export holds 2 users"):
        parse(target, dump(store, None), user_id="zoe")


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda lines: ['{"kind": "header", "format": "other"}'] + lines[1:], "line 1: the first line must be the header"),
    (lambda lines: [lines[0].replace('"version":1', '"version":2')] + lines[1:], "line 1: export format version 2"),
    (lambda lines: [lines[0].replace('"users":["ada"]', '"users":["ada"],"schema_version":99')] + lines[1:],
     "line 1: schema_version 99 is newer"),
    (lambda lines: lines[:2] + ['{"kind": "nonsense", "row": {}}'], "line 3: unknown kind 'nonsense'"),
    (lambda lines: lines[:2] + ["{not json"], "line 3: not valid JSON"),
    (lambda lines: lines[:1] + [lines[1].replace('"role":"user",', '')] + lines[2:], "line 2: columns of 'messages'"),
    (lambda lines: lines[:1] + [lines[1].replace('"role":"user"', '"role":7')] + lines[2:],
     "line 2: messages.role: expected text"),
    (lambda lines: lines[:1] + [lines[1].replace('"seq":1', '"seq":1.5')] + lines[2:],
     "line 2: messages.seq: expected an integer"),
    (lambda lines: lines[:1] + [lines[1].replace('"seq":1', '"seq":true')] + lines[2:],
     "line 2: messages.seq: expected a scalar"),
    (lambda lines: lines[:1] + [lines[1].replace('"created_at":1.5', '"created_at":"noon"')] + lines[2:],
     "line 2: messages.created_at: expected a number"),
    (lambda lines: lines[:1] + [lines[1].replace('"role":"user"', '"role":null')] + lines[2:],
     "line 2: messages.role: must not be null"),
    (lambda lines: lines[:1] + [lines[1].replace('"metadata":"{}"', '"metadata":"{oops"')] + lines[2:],
     "line 2: messages.metadata: is not valid JSON text"),
    (lambda lines: lines[:1] + [lines[1].replace('"metadata":"{}"', '"metadata":"[]"')] + lines[2:],
     "line 2: messages.metadata: must hold a JSON object"),
    (lambda lines: lines[:1] + [lines[1].replace('"metadata":"{}"', '"metadata":"{\\"a\\":\\"\\\\u0000\\"}"')]
     + lines[2:], "line 2: messages.metadata: must not contain NUL"),
    (lambda lines: lines[:1] + [lines[1].replace('"role":"user"', '"role":"\\ud800"')] + lines[2:],
     "line 2: messages.role: is not valid unicode text"),
    (lambda lines: lines[:1] + [lines[1].replace('"user_id":"ada"', '"user_id":"eve"')] + lines[2:],
     "line 2: user_id 'eve' is not among the header's users"),
    (lambda lines: lines[:2] + [lines[2].replace('"message_seq":1', '"message_seq":99')],
     "line 3: window.message_seq = 99 refers to a messages row that is not in the export"),
    (lambda lines: lines[:2] + [lines[1]], "line 3: the same messages row as line 2"),
    (lambda lines: [], "empty: no header line"),
])
def test_a_bad_file_names_the_line_and_writes_nothing(mutate, message):
    store = Storage(None)
    add_message(store, "ada", "hi")
    lines = dump(store, ["ada"]).splitlines()
    target = Storage(None)
    add_message(target, "bob", "keep me")
    before = dump(target, None)
    with pytest.raises(UnifiedMemoryError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        import_rows(target, parse_export(mutate(lines), source="export.jsonl", tables=user_tables(target)))
    assert caught.value.field == "source" and str(caught.value).startswith("source: export.jsonl")
    assert dump(target, None) == before


def test_a_conflicting_row_is_refused_and_the_whole_import_rolls_back():
    store = Storage(None)
    add_message(store, "ada", "first")
    add_message(store, "ada", "second")
    text = dump(store, ["ada"])
    target = Storage(None)
    import_rows(target, parse(target, text))
    with target.atomic():
        target.execute("UPDATE messages SET content = 'edited' WHERE content = 'second'")
    lines = text.splitlines()
    fresh_line = lines[1].replace("msg_ada_first", "msg_ada_new").replace('"seq":1', '"seq":7')
    with pytest.raises(MemoryValueError, match=r"line 4: messages \{'id': 'msg_ada_second'\} already exists "
                                               r"with different content"):
        import_rows(target, parse_export([lines[0], fresh_line, *lines[1:]], source="export.jsonl",
                                         tables=user_tables(target)))
    assert target.execute("SELECT COUNT(*) FROM messages WHERE id = 'msg_ada_new'").fetchone()[0] == 0


def test_an_id_of_another_user_is_never_overwritten_or_shown():
    store = Storage(None)
    add_message(store, "ada", "hi")
    target = Storage(None)
    import_rows(target, parse(target, dump(store, ["ada"])))
    as_eve = dump(store, ["ada"]).replace('"ada"', '"eve"')  # eve's export, with an id ada holds here
    fresh = Storage(None)  # the same import where nobody holds that id
    for storage in (target, fresh):  # the same answer either way: no sign of ada
        assert import_rows(storage, parse(storage, as_eve)).rows == 2
    assert target.execute("SELECT id, user_id FROM messages ORDER BY seq").fetchall() == [
        ("msg_ada_hi", "ada"), (fresh_id("msg_ada_hi", "eve"), "eve")]  # eve's row got an id of eve's
    assert import_rows(target, parse(target, as_eve)).rows == 0  # and importing it again adds nothing


def test_a_copy_as_another_user_gets_fresh_ids_and_its_references_follow():
    store = Storage(None)
    seq, message = add_message(store, "ada", "hi")
    with store.atomic():
        for fact, superseded_by in (("fact_old", "fact_new"), ("fact_new", None)):
            store.execute("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, "
                          "superseded_by, source_message_ids) VALUES (?, 'ada', ?, ?, 0.5, 1, 1, ?, ?)",
                          [fact, fact, fact, superseded_by, json.dumps([message, "msg_gone"])])
    add_graph(store, "ada")
    text = dump(store, ["ada"])
    for _ in range(2):  # into the file it came from, twice: the second time adds nothing
        import_rows(store, parse(store, text, user_id="eve"), user_id="eve")
    assert dump(store, ["ada"]).split("\n")[1:] == text.split("\n")[1:]  # ada untouched
    assert store.query("SELECT id, superseded_by, source_message_ids FROM facts WHERE user_id = 'eve'") == [
        {"id": fresh_id("fact_old", "eve"), "superseded_by": fresh_id("fact_new", "eve"),
         "source_message_ids": json.dumps([fresh_id(message, "eve"), fresh_id("msg_gone", "eve")],
                                          separators=(",", ":"))},
        {"id": fresh_id("fact_new", "eve"), "superseded_by": None,
         "source_message_ids": json.dumps([fresh_id(message, "eve"), fresh_id("msg_gone", "eve")],
                                          separators=(",", ":"))}]
    [eve_seq] = [r[0] for r in store.execute("SELECT seq FROM messages WHERE user_id = 'eve'")]
    assert eve_seq != seq and store.execute("SELECT message_seq FROM \"window\" WHERE user_id = 'eve'").fetchall() == [
        (eve_seq,)]
    entities = {r[0] for r in store.execute("SELECT id FROM entities WHERE user_id = 'eve'")}
    ends = store.execute("SELECT subject_id, object_id FROM triples WHERE user_id = 'eve'").fetchall()
    assert ends and all(end in entities for pair in ends for end in pair)
    assert fresh_id(message, "eve").startswith("msg_") and fresh_id("plain", "eve") != "plain"


def test_a_unique_constraint_conflict_names_the_line():
    store = Storage(None)
    add_graph(store, "ada")
    target = Storage(None)
    with target.atomic():  # same user and name, another id
        target.execute("INSERT INTO entities (id, user_id, name, norm_name, first_seen, last_seen) "
                       "VALUES ('ent_other', 'ada', 'Maria', 'maria', 0, 0)")
    with pytest.raises(MemoryValueError, match="line 2: entities row conflicts"):
        import_rows(target, parse(target, dump(store, ["ada"])))
    assert target.execute("SELECT COUNT(*) FROM entities").fetchone()[0] == 1


def test_blobs_round_trip_through_base64():
    store = Storage(None)
    blob = "BYTEA" if store.dialect.postgres else "BLOB"  # a table of another module: its own DDL per database
    with store.atomic():
        store.execute("CREATE TABLE IF NOT EXISTS attachments (user_id TEXT NOT NULL, name TEXT PRIMARY KEY, "
                      f"data {blob})")
        store.execute("INSERT INTO attachments VALUES ('ada', 'a.bin', ?)", [b"\x00\xffzz"])
    text = dump(store, ["ada"])
    assert '{"$base64":"AP96eg=="}' in text
    target = Storage(None)
    with target.atomic():
        target.execute("CREATE TABLE IF NOT EXISTS attachments (user_id TEXT NOT NULL, name TEXT PRIMARY KEY, "
                       f"data {blob})")
    import_rows(target, parse(target, text))
    assert target.execute("SELECT data FROM attachments").fetchone()[0] == b"\x00\xffzz"


def test_delete_user_rows_clears_every_table_of_that_user_only():
    store = Storage(None)
    for user in ("ada", "bob"):
        add_message(store, user, "hi")
        add_graph(store, user)
    with store.atomic():
        store.execute("INSERT INTO embeddings VALUES ('ada', 'm', 'h', 1, ?)", [bytes(4)])
        counts = delete_user_rows(store, "ada")
    assert counts == {"messages": 1, "window": 1, "facts": 0, "entities": 2, "triples": 1, "summaries": 0,
                      "keyed_items": 0, "embeddings": 1, "index_journal": 0,
                      "index_snapshots": 0}
    assert users_in(store) == ["bob"]


def test_items_are_found_within_their_user_only_and_deleted_with_what_references_them():
    store = Storage(None)
    seq, message_id = add_message(store, "ada", "hi")
    add_message(store, "bob", "hi")
    add_graph(store, "ada")
    add_graph(store, "bob")
    with pytest.raises(NotFoundError, match="ids: user 'ada' has no items with these ids: \\['msg_bob_hi'\\]") as caught:
        find_items(store, "ada", [message_id, "msg_bob_hi"])
    assert caught.value.field == "ids"
    found = find_items(store, "ada", [message_id, "ent_ada_Maria", message_id])
    assert found == {"messages": [message_id], "entities": ["ent_ada_Maria"]}
    with store.atomic():
        deleted = delete_items(store, "ada", found)
    assert {name: len(rows) for name, rows in deleted.items()} == {"window": 1, "messages": 1, "triples": 1,
                                                                  "entities": 1}
    assert deleted["window"][0]["message_seq"] == seq
    assert store.execute("SELECT COUNT(*) FROM triples").fetchone()[0] == 1  # bob's
    assert store.execute("SELECT COUNT(*) FROM messages WHERE user_id = 'bob'").fetchone()[0] == 1


def test_prune_embeddings_keeps_the_live_texts_of_every_model():
    store = Storage(None)
    with store.atomic():
        for model in ("a", "b"):
            for text in ("keep", "drop"):
                store.execute("INSERT INTO embeddings VALUES ('ada', ?, ?, 1, ?)", [model, content_hash(text), bytes(4)])
        store.execute("INSERT INTO embeddings VALUES ('bob', 'a', ?, 1, ?)", [content_hash("drop"), bytes(4)])
        assert prune_embeddings(store, "ada", ["keep"]) == 2
    assert store.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] == 3


@pytest.mark.sqlite_only  # SQLite's secure_delete, its -wal file and the file's bytes
def test_storage_zeroes_deleted_content_and_truncates_the_wal(tmp_path):
    path = tmp_path / "m.db"
    store = Storage(path)
    assert store.execute("PRAGMA secure_delete").fetchone()[0] == 1
    add_message(store, "ada", "zebra-secret-4711" * 20)
    with store.atomic():
        store.execute("DELETE FROM messages")
    assert (tmp_path / "m.db-wal").stat().st_size > 0
    busy, _, _ = store.checkpoint()
    assert busy == 0
    assert (tmp_path / "m.db-wal").stat().st_size == 0
    assert b"zebra-secret-4711" not in path.read_bytes()
    with store.atomic(), pytest.raises(UnifiedMemoryError, match="inside a transaction"):
        store.checkpoint()
    store.close()


def test_vacuum_leaves_no_deleted_content_in_the_postgresql_tables(storage_backend, request, tmp_path):
    """The guarantee above on PostgreSQL: after a deletion and Storage.vacuum, no file of the
    schema's tables, indexes or TOAST holds the text (the server's WAL keeps it: docs/deployment.md)."""
    if storage_backend != "postgresql":
        pytest.skip("on SQLite: test_storage_zeroes_deleted_content_and_truncates_the_wal")
    import psycopg

    server = request.getfixturevalue("postgres_server")
    secret = b"zebra-secret-4711"
    store = Storage(tmp_path / "m.db")

    def files() -> list:
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CHECKPOINT")  # what the buffers hold, on disk
        return [server.datadir / path for (path,) in store.execute(
            "SELECT pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname IN (current_schema(), 'pg_toast') AND c.relkind IN ('r', 'i', 't') "
            "AND pg_relation_filepath(c.oid) IS NOT NULL")]

    try:
        add_message(store, "ada", secret.decode() * 20)
        with store.atomic():
            store.execute("DELETE FROM messages")
        assert any(secret in path.read_bytes() for path in files() if path.exists())  # deleted, still there
        store.vacuum()
        assert not [path for path in files() if path.exists() and secret in path.read_bytes()]
    finally:
        store.close()


@pytest.mark.sqlite_only  # SQLite's type affinities (a column type such as ANYTHING)
def test_sqlite_refuses_nothing_we_export(tmp_path):
    """Every value the export writes is accepted back by the same schema (sanity of the affinity rules)."""
    store = Storage(None)
    with store.atomic():
        store.execute("CREATE TABLE IF NOT EXISTS odd (user_id TEXT NOT NULL, n NUMERIC, f FLOAT, c VARCHAR(3), "
                      "k ANYTHING)")
        store.execute("INSERT INTO odd VALUES ('ada', 3, 2.5, 'abc', 'x')")
    target = Storage(None)
    with target.atomic():
        target.execute("CREATE TABLE IF NOT EXISTS odd (user_id TEXT NOT NULL, n NUMERIC, f FLOAT, c VARCHAR(3), "
                       "k ANYTHING)")
    import_rows(target, parse(target, dump(store, ["ada"])))
    assert target.execute("SELECT n, f, c, k FROM odd").fetchone() == (3, 2.5, "abc", "x")
    assert isinstance(sqlite3.sqlite_version, str)
