"""The drift guard between tiers.storage.schema.SCHEMA (SQLite) and tiers.storage.pg_schema.SCHEMA_PG: on fresh
databases, tiers.storage.pg_catalog describes every user table exactly as tiers.storage.user_tables does, and
every table (user-scoped or not) has the same columns, NOT NULLs, keys, defaults, indexes and
foreign keys on both (docs/design/postgresql-survey.md, section 3)."""

from __future__ import annotations

import re

import pytest

from tiers.maintenance.ingested import IngestedKeys
from tiers.storage.backend import Storage
from tiers.storage.pg_catalog import table_columns, table_infos
from tiers.storage.pg_schema import INGESTED_PG, prepare_schema
from tiers.storage.user_tables import Column, user_tables

psycopg = pytest.importorskip("psycopg")
# Not run twice (storage_backend): these tests make their own PostgreSQL databases (pg_url), and the
# SQLite Storage they compare with must stay SQLite.
pytestmark = pytest.mark.sqlite_only


@pytest.fixture
def pg(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        prepare_schema(conn, "test db")
        conn.execute(INGESTED_PG)
        yield conn


@pytest.fixture
def lite():
    storage = Storage(None)
    IngestedKeys(storage).ensure()
    yield storage
    storage.close()


def sqlite_tables(lite) -> list[str]:
    return [name for (name,) in lite.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]


def test_every_user_table_is_described_alike(pg, lite):
    expected = {info.name: info for info in user_tables(lite)}
    assert "ingested" in expected and "embeddings" in expected
    assert table_infos(pg) == expected


def test_every_table_has_the_same_columns_in_the_same_order(pg, lite):
    # our SQLite schema declares exactly INTEGER, REAL, TEXT or BLOB: the affinity is the declared type
    expected = {table: tuple(Column(row[1], row[2].upper(), bool(row[3]), int(row[5]))
                             for row in lite.execute(f'PRAGMA table_info("{table}")').fetchall())
                for table in sqlite_tables(lite)}
    assert {"meta", "api_keys", "fact_uses", "index_journal", "ingested"} <= set(expected)
    assert table_columns(pg) == expected


def _pg_default(text: str | None) -> str | None:
    """A column default as PostgreSQL shows it, as SQLite does: ``'{}'::text`` is ``'{}'``."""
    return None if text is None else re.sub(r"::(text|double precision|bigint)$", "", text)


def test_every_column_has_the_same_default(pg, lite):
    found = {(table, column): _pg_default(default) for table, column, default in pg.execute(
        "SELECT table_name, column_name, column_default FROM information_schema.columns "
        "WHERE table_schema = current_schema()").fetchall()}
    expected = {(table, row[1]): row[4] for table in sqlite_tables(lite)
                for row in lite.execute(f'PRAGMA table_info("{table}")').fetchall()}
    assert found == expected


def test_every_text_column_sorts_in_binary_order(pg):
    collations = set(pg.execute("SELECT DISTINCT collation_name FROM information_schema.columns "
                                "WHERE table_schema = current_schema() AND data_type = 'text'").fetchall())
    assert collations == {("C",)}


def test_the_rowid_keys_are_identity_columns(pg, lite):
    generated = set(pg.execute("SELECT table_name, column_name FROM information_schema.columns "
                               "WHERE table_schema = current_schema() AND is_identity = 'YES'").fetchall())
    # every "seq INTEGER PRIMARY KEY"; fact_uses.seq is the seq of a fact, not one of its own
    seqs = {(table, "seq") for table in sqlite_tables(lite)
            for row in lite.execute(f'PRAGMA table_info("{table}")').fetchall()
            if row[1] == "seq" and row[2] == "INTEGER" and row[5] == 1}
    assert generated == seqs - {("fact_uses", "seq")}


def _sqlite_indexes(lite) -> dict[str, tuple[str, bool, bool, tuple[str | None, ...]]]:
    """Named index -> (table, unique, partial, columns (None: an expression))."""
    found = {}
    for table in sqlite_tables(lite):
        for row in lite.execute(f'PRAGMA index_list("{table}")').fetchall():
            name, unique, origin, partial = row[1], bool(row[2]), row[3], bool(row[4])
            columns = tuple(r[2] for r in lite.execute(f'PRAGMA index_info("{name}")').fetchall())
            key = name if origin == "c" else f"{table} {origin} {columns}"  # constraints have no name of ours
            found[key] = (table, unique, partial, columns)
    return found


def _pg_indexes(pg) -> dict[str, tuple[str, bool, bool, tuple[str | None, ...]]]:
    found = {}
    for name, table, unique, primary, partial, columns, generated in pg.execute(
        "SELECT ic.relname, c.relname, i.indisunique, i.indisprimary, i.indpred IS NOT NULL, "
        "ARRAY(SELECT a.attname FROM unnest(i.indkey) WITH ORDINALITY k(attnum, ord) "
        "      LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.ord), "
        "EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid AND con.contype IN ('p', 'u')) "
        "FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class c ON c.oid = i.indrelid "
        "WHERE c.relnamespace = current_schema()::regnamespace"
    ).fetchall():
        columns = tuple(columns)
        if primary and len(columns) == 1 and (table, columns[0]) in _ROWID_KEYS:
            continue  # SQLite's INTEGER PRIMARY KEY is the rowid: no index of its own
        origin = "pk" if primary else "u"
        found[f"{table} {origin} {columns}" if generated else name] = (table, unique, partial, columns)
    return found


_ROWID_KEYS = {("messages", "seq"), ("window", "message_seq"), ("facts", "seq"), ("fact_uses", "seq"),
               ("entities", "seq"), ("triples", "seq"), ("index_journal", "seq"), ("keyed_items", "seq")}


def test_every_index_is_the_same(pg, lite):
    expected = _sqlite_indexes(lite)
    assert "facts_retired_source" in expected and "entities u ('user_id', 'agent_id', 'norm_name')" in expected
    assert _pg_indexes(pg) == expected


def test_every_foreign_key_is_the_same_and_the_trigger_is_one(pg, lite):
    expected = {(table, row[3], row[2], row[4], row[6]) for table in sqlite_tables(lite)
                for row in lite.execute(f'PRAGMA foreign_key_list("{table}")').fetchall()}
    expected.add(("fact_uses", "seq", "facts", "seq", "CASCADE"))  # SQLite's trigger facts_uses_deleted
    rules = {"a": "NO ACTION", "c": "CASCADE", "r": "RESTRICT", "n": "SET NULL", "d": "SET DEFAULT"}
    found = {(table, column, target, to, rules[rule]) for table, column, target, to, rule in pg.execute(
        "SELECT c.relname, a.attname, f.relname, fa.attname, con.confdeltype::text FROM pg_constraint con "
        "JOIN pg_class c ON c.oid = con.conrelid JOIN pg_class f ON f.oid = con.confrelid "
        "JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[1] "
        "JOIN pg_attribute fa ON fa.attrelid = con.confrelid AND fa.attnum = con.confkey[1] "
        "WHERE con.contype = 'f' AND c.relnamespace = current_schema()::regnamespace").fetchall()}
    assert found == expected


def test_a_deleted_fact_takes_its_uses_along(pg):
    seq = pg.execute("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at) "
                     "VALUES ('f1', 'u1', 'x', 'x', 0.5, 0, 0) RETURNING seq").fetchone()[0]
    pg.execute("INSERT INTO fact_uses (seq, access_count, last_accessed) VALUES (%s, 2, 5.0)", [seq])
    pg.execute("DELETE FROM facts WHERE id = 'f1'")
    assert pg.execute("SELECT count(*) FROM fact_uses").fetchone()[0] == 0


def test_the_catalog_rules_on_tables_of_other_shapes(pg):
    """Rules our schema does not exercise: an identity key a foreign key uses is no surrogate;
    the newest of two unique indexes is the identity; a table without keys is all its columns."""
    pg.execute("CREATE TABLE x_parent (seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, user_id TEXT)")
    pg.execute("CREATE TABLE x_child (seq BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY "
               "REFERENCES x_parent(seq), user_id TEXT, a TEXT, b TEXT, UNIQUE (a), UNIQUE (b))")
    pg.execute("CREATE UNIQUE INDEX x_child_ab ON x_child (a, b)")
    pg.execute("CREATE TABLE x_loose (user_id TEXT, n NUMERIC, flag BOOLEAN)")
    infos = table_infos(pg)
    assert infos["x_parent"].surrogate == "seq" and infos["x_parent"].identity == ("user_id",)
    assert infos["x_child"].surrogate is None and infos["x_child"].identity == ("seq",)
    assert infos["x_child"].references == (("seq", "x_parent", "seq"),)
    assert [c.affinity for c in infos["x_loose"].columns] == ["TEXT", "NUMERIC", "NUMERIC"]
    assert infos["x_loose"].identity == ("user_id", "n", "flag") and infos["x_loose"].surrogate is None
    pg.execute("ALTER TABLE x_child DROP CONSTRAINT x_child_seq_fkey")
    assert table_infos(pg)["x_child"].identity == ("a", "b")  # the newest unique index, as SQLite lists them
