"""The command line on a PostgreSQL database (``--db postgresql://…``): the reading commands,
export and import, forget, stats, and the URL's password never printed."""

from __future__ import annotations

import json

import pytest

from unified_memory import UnifiedMemory
from unified_memory.cli import main
from unified_memory.demo import ingest_sample

pytest.importorskip("psycopg")


def run_json(capsys, *argv: str):
    code = main(["--json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "secret" not in out + err
    return json.loads(out)


def test_the_commands_work_on_a_postgresql_database(pg_url, tmp_path, capsys):
    url = pg_url.replace("postgres@", "postgres:secret@")  # trust auth: any password passes
    with UnifiedMemory(url, user_id="ada", short_term_limit=6, retrieval="lexical") as mem:
        ingest_sample(mem)
    db = ["--db", url, "--user", "ada", "--retrieval", "lexical"]
    hits = run_json(capsys, *db, "recall", "allergic to peanuts")
    assert hits and any("peanut" in hit["text"].lower() for hit in hits)
    assert run_json(capsys, *db, "facts")
    assert run_json(capsys, *db, "entities")
    assert run_json(capsys, *db, "episodes")
    context = run_json(capsys, *db, "context", "Maria", "--max-tokens", "300")
    assert context["tokens"] <= 300
    stats = run_json(capsys, *db, "stats")
    assert stats["facts"] > 0 and ":***@" in stats["path"]
    export = tmp_path / "ada.jsonl"
    assert run_json(capsys, *db, "export", str(export))["records"] > 0
    imported = run_json(capsys, "--db", url, "--user", "bob", "import", str(export), "--as-user", "bob")
    assert imported["records"] > 0
    forgot = run_json(capsys, *db[:2], "forget", "--user", "bob", "--yes")
    assert forgot
    with UnifiedMemory(pg_url, user_id="bob", retrieval="lexical") as mem:
        assert mem.facts() == [] and mem.episodes() == []
    code = main(["--db", url, "--user", "ghost", "facts"])
    err = capsys.readouterr().err
    assert code == 1 and "ghost" in err and "secret" not in err
