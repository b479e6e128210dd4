"""tiers.storage.pg_schema.prepare_schema on a real PostgreSQL 15 server (tests/pg_server.py): it creates
a fresh schema, reads an up-to-date one without writing, refuses what is not ours (without
writing), serialises concurrent openers, and an error leaves nothing half-created."""

from __future__ import annotations

import threading

import pytest

from tiers.storage.pg_schema import SCHEMA_OBJECTS_PG, SCHEMA_PG, prepare_schema, statements
from tiers.storage.schema import SCHEMA_OBJECTS, SCHEMA_VERSION
from unified_memory.errors import StorageError

psycopg = pytest.importorskip("psycopg")
# Not run twice (storage_backend): these tests make their own PostgreSQL databases (pg_url), and the
# SQLite Storage they compare with must stay SQLite.
pytestmark = pytest.mark.sqlite_only


@pytest.fixture
def pg(pg_url):
    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


def relations(conn, kinds=("r", "i")) -> set[str]:
    rows = conn.execute("SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
                        "AND relkind::text = ANY(%s)", [list(kinds)]).fetchall()
    return {name for (name,) in rows}


def version(conn) -> str:
    return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]


def test_the_schema_names_the_objects_of_sqlites_but_the_trigger():
    assert SCHEMA_OBJECTS_PG == SCHEMA_OBJECTS - {"facts_uses_deleted"}
    assert all(";" not in s for s in statements(SCHEMA_PG))


def test_a_fresh_schema_is_created_and_versioned(pg):
    prepare_schema(pg, "test db")
    assert SCHEMA_OBJECTS_PG <= relations(pg)
    assert version(pg) == str(SCHEMA_VERSION)
    assert pg.execute("SELECT count(*) FROM meta").fetchone()[0] == 1


def test_an_up_to_date_schema_is_only_read(pg):
    prepare_schema(pg, "test db")
    before = pg.execute("SELECT xmin::text FROM meta").fetchone()[0]
    pg.execute("SET default_transaction_read_only = on")  # any write, DDL included, would fail now
    prepare_schema(pg, "test db")
    assert pg.execute("SELECT xmin::text FROM meta").fetchone()[0] == before


def test_the_read_only_check_can_fail(pg):
    pg.execute("SET default_transaction_read_only = on")
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        prepare_schema(pg, "test db")


def test_a_missing_index_is_created_again(pg):
    prepare_schema(pg, "test db")
    pg.execute("DROP INDEX facts_slot")
    prepare_schema(pg, "test db")
    assert "facts_slot" in relations(pg)


def test_the_tables_of_another_application_are_refused_untouched(pg):
    pg.execute("CREATE TABLE customers (id BIGINT)")
    pg.execute("CREATE TABLE orders (id BIGINT)")
    with pytest.raises(StorageError, match="another application.*customers, orders") as caught:
        prepare_schema(pg, "postgresql://app@db/shop")
    assert caught.value.field == "path" and "postgresql://app@db/shop" in str(caught.value)
    assert relations(pg, ("r",)) == {"customers", "orders"}


@pytest.mark.parametrize("stored, reason", [(str(SCHEMA_VERSION + 1), "newer unified-memory"), ("four", "not a number"),
                                            ("2", "older than any PostgreSQL schema")])
def test_a_version_not_ours_is_refused_untouched(pg, stored, reason):
    prepare_schema(pg, "test db")
    pg.execute("DROP INDEX facts_slot")  # would be created again, were the schema accepted
    pg.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", [stored])
    with pytest.raises(StorageError, match=reason):
        prepare_schema(pg, "test db")
    assert "facts_slot" not in relations(pg) and version(pg) == stored


def test_a_schema_3_database_gains_the_vectors_column_and_keeps_its_items(pg):
    prepare_schema(pg, "test db")
    pg.execute("ALTER TABLE keyed_items DROP COLUMN vectors")  # what schema 3 created
    pg.execute("INSERT INTO keyed_items (user_id, namespace, key, value_json, created_at, updated_at) "
               "VALUES ('ada', 'notes', 'n1', '{}', 0, 0)")
    pg.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    prepare_schema(pg, "test db")
    assert version(pg) == str(SCHEMA_VERSION) == "5"
    assert pg.execute("SELECT key, vectors FROM keyed_items").fetchall() == [("n1", None)]


def test_meta_without_a_version_beside_other_tables_is_refused(pg):
    pg.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    pg.execute("CREATE TABLE things (id BIGINT)")
    with pytest.raises(StorageError, match="no schema version"):
        prepare_schema(pg, "test db")
    assert relations(pg, ("r",)) == {"meta", "things"}


def test_a_server_not_in_utf8_is_refused(postgres_server):
    from tests.pg_server import drop_database

    url = postgres_server.url_of("t_ascii")
    with psycopg.connect(postgres_server.url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE t_ascii TEMPLATE template0 ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C'")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            with pytest.raises(StorageError, match="encoding 'SQL_ASCII'.*UTF8"):
                prepare_schema(conn, url)
            assert relations(conn) == set()
    finally:
        drop_database(postgres_server, "t_ascii")


class _OldServer:
    """A connection to a PostgreSQL 14 server, as far as prepare_schema asks."""

    autocommit = True

    def execute(self, sql, params=None):
        answers = {"SHOW server_encoding": ("UTF8",), "SHOW server_version_num": ("140011",)}

        class Rows:
            def fetchone(self):
                return answers[sql]

        return Rows()


def test_a_server_older_than_15_is_refused():
    with pytest.raises(StorageError, match="PostgreSQL 14; unified-memory needs 15 or later"):
        prepare_schema(_OldServer(), "old server")  # type: ignore[arg-type]


def test_a_connection_in_a_transaction_is_a_mistake(pg_url):
    with psycopg.connect(pg_url) as conn, pytest.raises(ValueError, match="autocommit"):
        prepare_schema(conn, "test db")


def test_a_search_path_of_no_schema_is_refused(pg):
    pg.execute("SET search_path TO nowhere")
    with pytest.raises(StorageError, match="no schema of the search_path"):
        prepare_schema(pg, "test db")


def test_each_schema_of_a_database_is_its_own(pg):
    prepare_schema(pg, "test db")
    pg.execute("CREATE SCHEMA tenant_b")
    pg.execute("SET search_path TO tenant_b")
    prepare_schema(pg, "test db, schema tenant_b")
    assert SCHEMA_OBJECTS_PG <= relations(pg) and version(pg) == str(SCHEMA_VERSION)


def test_an_error_midway_leaves_nothing(pg):
    pg.execute("CREATE TYPE facts AS (x BIGINT)")  # the statements after meta, messages and window fail
    with pytest.raises(psycopg.errors.WrongObjectType):  # CREATE INDEX facts_id ON facts
        prepare_schema(pg, "test db")
    assert relations(pg) == set()


def test_two_processes_opening_a_fresh_schema_both_succeed(pg_url):
    openers = 6
    barrier = threading.Barrier(openers)
    errors: list[BaseException] = []
    connections = [psycopg.connect(pg_url, autocommit=True) for _ in range(openers)]

    def open_it(conn):
        try:
            barrier.wait(timeout=30)
            prepare_schema(conn, "test db")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_it, args=(conn,)) for conn in connections]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        for conn in connections:
            conn.close()
    assert not errors, errors
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert SCHEMA_OBJECTS_PG <= relations(conn) and version(conn) == str(SCHEMA_VERSION)
