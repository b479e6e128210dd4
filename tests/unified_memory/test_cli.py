"""The ``unified-memory`` command line: every command in-process through ``main([...])``,
its ``--json`` output, its ``--help``, bad input as one line on stderr, and
``python -m unified_memory`` in a subprocess."""

from __future__ import annotations

import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from unified_memory import UnifiedMemory
from unified_memory.cli import main
from unified_memory.cli._format import ProgressBar, format_table, progress
from unified_memory.demo import ingest_sample

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("demo", "recall", "context", "facts", "entities", "graph", "episodes", "stats", "reindex",
            "ingest", "export", "import", "forget")
LEX = ["--retrieval", "lexical"]

# The command line takes a memory *file* (--db, $UNIFIED_MEMORY_DB): it checks that the file
# exists, the tests copy it with shutil, and ``python -m unified_memory`` opens it in a child.
pytestmark = pytest.mark.sqlite_only




@pytest.fixture(scope="module")
def demo_file(tmp_path_factory) -> Path:
    """The demo's memory (user ada), built once with lexical retrieval."""
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    with UnifiedMemory(path, user_id="ada", short_term_limit=6, retrieval="lexical") as mem:
        ingest_sample(mem)
    return path


@pytest.fixture
def db(demo_file, tmp_path, monkeypatch) -> Path:
    """A private copy of the demo memory, also in ``$UNIFIED_MEMORY_DB``."""
    path = tmp_path / "memory.db"
    shutil.copy(demo_file, path)
    monkeypatch.setenv("UNIFIED_MEMORY_DB", str(path))
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv: str):
    code, out, err = run(capsys, "--json", *argv)
    assert code == 0, err
    return json.loads(out)


def one_line_error(code: int, err: str, expected_code: int = 1) -> str:
    assert code == expected_code
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("unified-memory: error: ")
    assert "Traceback" not in err
    return lines[0]


# -- help ---------------------------------------------------------------------------------------


def test_program_help_lists_every_command(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    assert out.startswith("usage: unified-memory")
    for command in COMMANDS:
        assert command in out
    assert "--db" in out and "--json" in out and "--retrieval" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_has_help(capsys, command):
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    assert out.startswith(f"usage: unified-memory {command}")
    assert "--json" in out


# -- demo ---------------------------------------------------------------------------------------


def test_demo_shows_facts_graph_recalls_and_context(capsys, tmp_path):
    path = tmp_path / "demo.db"
    code, out, err = run(capsys, *LEX, "demo", str(path))
    assert code == 0, err
    assert path.exists()
    assert "Long-term facts:" in out and "I live in Lisbon" in out and "superseded" in out
    assert "Entity graph:" in out and "has_sister" in out
    assert "recall 'who is Maria?':" in out and "relevance" in out
    assert "section" in out and "<memory>" in out and "lexical retrieval" in out
    assert main([*LEX, "demo", str(path)]) == 0  # runs again over its own file


def test_demo_json_has_every_part(capsys, tmp_path):
    data = run_json(capsys, *LEX, "demo", str(tmp_path / "demo.db"))
    assert set(data) >= {"path", "messages", "stats", "facts", "entities", "triples", "recalls", "context"}
    assert data["stats"]["user_id"] == "ada" and data["stats"]["superseded_facts"] >= 1
    assert {"Lisbon", "Berlin"} <= {t["object"] for t in data["triples"]}
    assert all(set(r) == {"query", "hits"} for r in data["recalls"])
    hits = [h for r in data["recalls"] for h in r["hits"]]
    assert hits and all("relevance" in h["components"] for h in hits)
    assert data["context"]["tokens"] <= data["context"]["max_tokens"] == 250
    assert set(data["context"]["sections"]) >= {"facts", "entities", "episodes"}


def test_demo_defaults_to_the_demo_file_not_the_environment(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("UNIFIED_MEMORY_DB", str(tmp_path / "precious.db"))
    code, _, err = run(capsys, *LEX, "demo")
    assert code == 0, err
    assert (tmp_path / "unified_memory_demo.db").exists()
    assert not (tmp_path / "precious.db").exists()


def test_demo_refuses_to_overwrite_another_memory_or_file(capsys, tmp_path):
    other = tmp_path / "bob.db"
    with UnifiedMemory(other, user_id="bob", retrieval="lexical") as mem:
        mem.remember("I keep bees")
    line = one_line_error(*run(capsys, *LEX, "demo", str(other))[::2])
    assert "the demo did not write (users bob)" in line
    text = tmp_path / "notes.txt"
    text.write_text("my notes")
    one_line_error(*run(capsys, *LEX, "--db", str(text), "demo")[::2])
    assert text.read_text() == "my notes"
    with UnifiedMemory(other, user_id="bob", retrieval="lexical") as mem:
        assert [f.text for f in mem.facts()] == ["I keep bees"]


def test_demo_writes_the_user_given_and_says_how_to_explore_it(capsys, tmp_path):
    path = tmp_path / "demo.db"
    code, out, err = run(capsys, *LEX, "--user", "bob", "demo", str(path))
    assert code == 0, err
    assert f"of user 'bob' into {path}" in out.splitlines()[0]
    tail = out.splitlines()[-4:]
    assert tail[0] == f"Wrote user 'bob' to {path}. Explore it next:"
    assert tail[1:] == [f"  unified-memory --db {path} --user bob facts",
                        f"  unified-memory --db {path} --user bob graph Maria",
                        f'  unified-memory --db {path} --user bob recall "who is Maria?" --retrieval lexical']
    with UnifiedMemory(path, retrieval="lexical") as mem:
        assert mem.users() == ["bob"] and mem.scoped(user_id="bob").stats().facts > 3
    # the printed commands show something
    facts = run_json(capsys, *LEX, "--db", str(path), "--user", "bob", "facts")
    assert any("Maria" in f["text"] for f in facts)
    code, out, _ = run(capsys, *LEX, "--db", str(path), "--user", "bob", "graph", "Maria")
    assert code == 0 and "has_sister" in out and "Porto" in out


def test_demo_without_user_writes_the_samples_user_and_json_names_user_path_and_commands(capsys, tmp_path):
    path = tmp_path / "demo.db"
    assert main([*LEX, "--user", "bob", "demo", str(path)]) == 0  # an earlier demo of another user is replaced
    capsys.readouterr()
    data = run_json(capsys, *LEX, "demo", str(path))
    assert data["user"] == "ada" and data["path"] == str(path) and data["stats"]["user_id"] == "ada"
    assert data["next"][0] == f"unified-memory --db {path} --user ada facts"
    with UnifiedMemory(path, retrieval="lexical") as mem:
        assert mem.users() == ["ada"]


# -- reading commands ------------------------------------------------------------------------------


def test_recall_prints_a_table_with_score_components(capsys, db):
    code, out, err = run(capsys, *LEX, "--user", "ada", "recall", "who is Maria?", "--limit", "3")
    assert code == 0, err
    header = out.splitlines()[0].split()
    assert header == ["score", "tier", "relevance", "importance", "recency", "text"]
    assert "Maria" in out and len(out.strip().splitlines()) <= 2 + 3


def test_recall_json_with_tiers_days_and_options_after_the_command(capsys, db):
    hits = run_json(capsys, "recall", "Maria", "--tiers", "entity", "long_term", "--limit", "4",
                    "--user", "ada", *LEX)
    assert 0 < len(hits) <= 4
    assert {h["tier"] for h in hits} <= {"entity", "long_term"}
    assert set(hits[0]) >= {"id", "tier", "text", "score", "components", "created_at"}
    assert run_json(capsys, *LEX, "--user", "ada", "recall", "Maria", "--days", "1") == []  # sample is from 2024


def test_recall_for_a_user_without_a_match_finds_nothing(capsys, db):
    code, out, _ = run(capsys, *LEX, "--user", "ada", "recall", "xylophones")
    assert code == 0 and out.strip() == "(no hits)"


def test_context_shows_sections_and_the_block(capsys, db):
    code, out, err = run(capsys, *LEX, "--user", "ada", "context", "plan a dinner for Maria", "--max-tokens", "120")
    assert code == 0, err
    assert out.splitlines()[0].endswith("of 120 tokens")
    assert "section" in out and "<memory>" in out
    block = run_json(capsys, *LEX, "--user", "ada", "context", "Maria", "--max-tokens", "120")
    assert block["tokens"] <= 120 and block["query"] == "Maria"
    assert set(block["sections"]["facts"]) >= {"budget", "tokens", "items"}


def test_facts_by_importance_with_category_all_and_limit(capsys, db):
    active = run_json(capsys, *LEX, "--user", "ada", "facts")
    assert active and all(f["status"] == "active" for f in active)
    importances = [f["importance"] for f in active]
    assert importances == sorted(importances, reverse=True)
    everything = run_json(capsys, *LEX, "--user", "ada", "facts", "--all", "--category", "location")
    assert {f["status"] for f in everything} == {"active", "superseded"}
    assert all(f["category"] == "location" for f in everything)
    assert len(run_json(capsys, *LEX, "--user", "ada", "facts", "--limit", "2")) == 2
    code, out, _ = run(capsys, *LEX, "--user", "ada", "facts", "--all")
    assert code == 0 and "superseded" in out and out.splitlines()[0].split()[:3] == ["importance", "category", "status"]


def test_entities_with_type(capsys, db):
    people = run_json(capsys, *LEX, "--user", "ada", "entities", "--type", "person")
    assert {"Maria", "Tom"} <= {e["name"] for e in people}
    assert all(e["type"] == "person" for e in people)
    code, out, _ = run(capsys, *LEX, "--user", "ada", "entities")
    assert code == 0 and "Porto" in out and "mentions" in out


def test_graph_follows_depth(capsys, db):
    near = run_json(capsys, *LEX, "--user", "ada", "graph", "Maria")
    far = run_json(capsys, *LEX, "--user", "ada", "graph", "Maria", "--depth", "2")
    assert {(t["subject"], t["object"]) for t in near} >= {("Maria", "Porto"), ("Ada", "Maria")}  # the user, named
    assert len(far) > len(near)
    code, out, _ = run(capsys, *LEX, "--user", "ada", "graph", "Maria")
    assert code == 0 and "lives_in" in out and "Porto" in out


def test_episodes_by_session(capsys, db):
    everything = run_json(capsys, *LEX, "--user", "ada", "episodes")
    first = run_json(capsys, *LEX, "--user", "ada", "episodes", "--session", "2024-03-02")
    assert 0 < len(first) < len(everything)
    assert {e["session_id"] for e in first} == {"2024-03-02"}
    assert len(run_json(capsys, *LEX, "--user", "ada", "episodes", "--limit", "2")) == 2
    code, out, _ = run(capsys, *LEX, "--user", "ada", "episodes", "--days", "3")
    assert code == 0 and out.strip() == "(no episodes)"


def test_stats_and_the_database_from_the_environment(capsys, db):
    stats = run_json(capsys, *LEX, "--user", "ada", "stats")
    assert stats["path"] == str(db) and stats["user_id"] == "ada"
    assert stats["messages"] > 20 and stats["facts"] > 3
    assert stats["retrieval"] == "lexical"  # what the table shows, the JSON carries
    code, out, _ = run(capsys, *LEX, "--user", "ada", "stats")
    assert code == 0 and "retrieval" in out and "superseded_facts" in out
    assert {line.split()[0] for line in out.splitlines()} == set(stats)


def test_db_option_beats_the_environment(capsys, db, tmp_path, monkeypatch):
    monkeypatch.setenv("UNIFIED_MEMORY_DB", str(tmp_path / "elsewhere.db"))
    assert run_json(capsys, *LEX, "--db", str(db), "--user", "ada", "stats")["path"] == str(db)


def test_reindex_one_user_and_all_users(capsys, db):
    assert run_json(capsys, *LEX, "--user", "ada", "reindex") == {"users": 1, "retrieval": "lexical"}
    with UnifiedMemory(db, user_id="bob", retrieval="lexical") as mem:
        mem.remember("I keep bees")
    code, out, _ = run(capsys, *LEX, "reindex", "--all-users")
    assert code == 0 and out.startswith("reindexed 2 users")


@pytest.mark.slow
@pytest.mark.embeddings
def test_recall_with_the_default_retrieval(capsys, db):
    """The one test without --retrieval lexical: auto (hybrid with the embeddings extra)."""
    hits = run_json(capsys, "--user", "ada", "recall", "what food should I avoid?", "--limit", "3")
    assert any("peanuts" in h["text"] for h in hits)


READING = [["recall", "Maria"], ["context", "Maria"], ["facts"], ["entities"], ["graph", "Maria"], ["episodes"],
           ["stats"], ["export"], ["forget", "--id", "fact_x", "--yes"]]


@pytest.mark.parametrize("command", READING, ids=lambda c: c[0])
def test_an_unknown_user_is_a_one_line_error_on_every_reading_command(capsys, db, command):
    with UnifiedMemory(db, user_id="bob", retrieval="lexical") as mem:
        mem.remember("I keep bees")
    for argv in (["--user", "ghost", *command], [*command[:1], "--user", "ghost", *command[1:]]):
        code, out, err = run(capsys, *LEX, *argv)
        line = one_line_error(code, err)
        assert out == ""
        assert f"unknown user 'ghost': '{db}' holds no memories of that user; its users: ada, bob" in line


def test_an_unknown_user_is_not_created_by_reading(capsys, db):
    run(capsys, *LEX, "--user", "ghost", "recall", "Maria")
    with UnifiedMemory(db, retrieval="lexical") as mem:
        assert mem.users() == ["ada"]


def test_writing_commands_accept_a_new_user(capsys, db, tmp_path):
    assert run_json(capsys, *LEX, "--user", "newcomer", "reindex") == {"users": 1, "retrieval": "lexical"}
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "I keep bees."}]))
    assert run_json(capsys, *LEX, "--user", "newcomer", "ingest", str(chat))["messages_added"] == 1
    assert run_json(capsys, *LEX, "--user", "newcomer", "stats")["messages"] == 1


# -- ingest, export, import, forget ------------------------------------------------------------------


def test_ingest_an_openai_file_with_a_json_report(capsys, tmp_path):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "My sister Maria lives in Lisbon."},
                                {"role": "assistant", "content": "Lovely city."}]))
    memory = tmp_path / "m.db"
    report = run_json(capsys, *LEX, "--db", str(memory), "--user", "ada", "ingest", str(chat))
    assert report["format"] == "openai" and report["messages_added"] == 2 and report["users"] == ["ada"]
    code, out, _ = run(capsys, *LEX, "--db", str(memory), "--user", "ada", "ingest", str(chat), "--format", "openai")
    assert code == 0 and "messages_skipped  2" in out
    assert run_json(capsys, *LEX, "--db", str(memory), "--user", "ada", "stats")["messages"] == 2


def test_ingest_extracts_facts_and_entities_unless_no_extract(capsys, tmp_path):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "I'm allergic to peanuts."},
                                {"role": "assistant", "content": "Noted."},
                                {"role": "user", "content": "My sister Maria lives in Lisbon."}]))
    extracted, history = tmp_path / "extracted.db", tmp_path / "history.db"
    assert run_json(capsys, *LEX, "--db", str(extracted), "ingest", str(chat))["messages_added"] == 3
    facts = [f["text"] for f in run_json(capsys, *LEX, "--db", str(extracted), "facts")]
    assert "I'm allergic to peanuts." in facts
    assert {"Maria", "Lisbon"} <= {e["name"] for e in run_json(capsys, *LEX, "--db", str(extracted), "entities")}
    assert run_json(capsys, *LEX, "--db", str(history), "ingest", str(chat), "--no-extract")["messages_added"] == 3
    assert run_json(capsys, *LEX, "--db", str(history), "facts") == []
    assert run_json(capsys, *LEX, "--db", str(history), "entities") == []
    assert run_json(capsys, *LEX, "--db", str(history), "stats")["messages"] == 3


def test_ingest_a_missing_file(capsys, tmp_path):
    memory = tmp_path / "m.db"
    line = one_line_error(*run(capsys, *LEX, "--db", str(memory), "ingest", str(tmp_path / "nope.json"))[::2])
    assert "nope.json: no such file" in line
    assert not memory.exists()


def test_ingest_malformed_json_names_the_line_and_writes_nothing(capsys, tmp_path):
    bad = tmp_path / "chat.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n{"role": oops}\n')
    memory = tmp_path / "m.db"
    line = one_line_error(*run(capsys, *LEX, "--db", str(memory), "ingest", str(bad))[::2])
    assert "chat.jsonl:2" in line
    assert not memory.exists()


@pytest.mark.parametrize(("name", "format", "actual"), [("chat.json", "locomo", "openai"),
                                                     ("chat.jsonl", "openai", "jsonl")])
def test_ingest_with_the_wrong_format_says_the_content_does_not_match(capsys, tmp_path, name, format, actual):
    chat = tmp_path / name
    messages = [{"role": "user", "content": "I keep bees."}, {"role": "assistant", "content": "Nice."}]
    chat.write_text("\n".join(map(json.dumps, messages)) if actual == "jsonl" else json.dumps(messages, indent=2))
    memory = tmp_path / "m.db"
    line = one_line_error(*run(capsys, *LEX, "--db", str(memory), "ingest", str(chat), "--format", format)[::2])
    assert line == (f"unified-memory: error: format: the content of {chat} does not match format {format!r}: "
                    f"it is {actual!r} (choose format {actual!r}, or 'auto' to detect it)")
    assert "malformed" not in line and not memory.exists()


def test_export_to_a_file_then_import_as_another_user(capsys, db, tmp_path):
    dump = tmp_path / "ada.jsonl"
    result = run_json(capsys, *LEX, "--user", "ada", "export", str(dump))
    assert result["records"] > 20 and dump.exists()
    target = tmp_path / "copy.db"
    imported = run_json(capsys, *LEX, "--db", str(target), "import", str(dump), "--as-user", "eve")
    assert imported == {"path": str(dump), "records": result["records"], "user": "eve"}
    assert run_json(capsys, *LEX, "--db", str(target), "--user", "eve", "stats")["messages"] > 20
    code, out, _ = run(capsys, *LEX, "--db", str(target), "import", str(dump), "--as-user", "eve")
    assert code == 0 and out.startswith("imported 0 records")  # already there


def test_export_to_stdout_is_json_lines(capsys, db):
    code, out, err = run(capsys, *LEX, "--user", "ada", "export", "--all-users")
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert records[0]["kind"] == "header" and len(records) > 20
    assert err.startswith(f"exported {len(records) - 1} records")


def test_import_a_bad_file_is_one_line_and_writes_nothing(capsys, tmp_path):
    bad = tmp_path / "dump.jsonl"
    bad.write_text('{"kind": "header"}\n{not json\n')
    memory = tmp_path / "m.db"
    line = one_line_error(*run(capsys, *LEX, "--db", str(memory), "import", str(bad))[::2])
    assert "dump.jsonl" in line and "line" in line
    assert not memory.exists()
    one_line_error(*run(capsys, *LEX, "--db", str(memory), "import", str(tmp_path / "missing.jsonl"))[::2])


def test_forget_refuses_without_yes_when_stdin_is_not_a_terminal(capsys, db, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    line = one_line_error(*run(capsys, *LEX, "forget", "--user", "ada")[::2])
    assert "--yes" in line
    assert run_json(capsys, *LEX, "--user", "ada", "stats")["messages"] > 20


def test_forget_an_unknown_user(capsys, db):
    line = one_line_error(*run(capsys, *LEX, "forget", "--user", "nobody", "--yes")[::2])
    assert "unknown user 'nobody'" in line


def test_forget_needs_a_user_or_ids(capsys, db):
    line = one_line_error(*run(capsys, *LEX, "forget", "--yes")[::2], expected_code=2)
    assert "--user U" in line and "--id ID" in line


def test_forget_a_user_with_yes(capsys, db):
    counts = run_json(capsys, *LEX, "forget", "--user", "ada", "--yes")
    assert counts["messages"] > 20 and counts["facts"] > 3
    line = one_line_error(*run(capsys, *LEX, "--user", "ada", "stats")[::2])
    assert "unknown user 'ada'" in line and "no memories of any user" in line
    with UnifiedMemory(db, user_id="ada", retrieval="lexical") as mem:
        stats = mem.stats()
    assert stats.messages == stats.facts == stats.entities == stats.triples == 0


def test_forget_ids_after_confirming_on_a_terminal(capsys, db, monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    facts = run_json(capsys, *LEX, "--user", "ada", "facts")
    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    code, out, err = run(capsys, *LEX, "--user", "ada", "forget", "--id", facts[0]["id"])
    assert code == 0 and out == "cancelled; nothing was deleted\n"  # declining is no error
    assert err.endswith("? [y/N] ") and "error" not in err
    monkeypatch.setattr(sys, "stdin", Terminal("no\n"))
    assert run_json(capsys, *LEX, "--user", "ada", "forget", "--id", facts[0]["id"]) == {"cancelled": True}
    assert len(run_json(capsys, *LEX, "--user", "ada", "facts")) == len(facts)
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    code, out, err = run(capsys, *LEX, "--user", "ada", "forget", "--id", facts[0]["id"], "--id", facts[1]["id"])
    assert code == 0 and "[y/N]" in err and out.startswith("forgot") and "2 facts" in out
    assert len(run_json(capsys, *LEX, "--user", "ada", "facts")) == len(facts) - 2
    line = one_line_error(*run(capsys, *LEX, "--user", "ada", "forget", "--id", "fact_nope", "--yes")[::2])
    assert "fact_nope" in line


def test_forget_ids_of_a_user_named_after_the_command(capsys, db):
    facts = run_json(capsys, *LEX, "--user", "ada", "facts")
    with UnifiedMemory(db, user_id="bob", retrieval="lexical") as mem:
        bees = mem.remember("I keep bees")
    counts = run_json(capsys, *LEX, "forget", "--user", "ada", "--id", facts[0]["id"], "--yes")
    assert counts["facts"] == 1
    left = run_json(capsys, *LEX, "--user", "ada", "facts")
    assert [f["id"] for f in left] == [f["id"] for f in facts[1:]]
    line = one_line_error(*run(capsys, *LEX, "forget", "--user", "ada", "--id", bees, "--yes")[::2])
    assert bees in line and "'ada'" in line  # another user's record is not ada's
    assert run_json(capsys, *LEX, "forget", "--user", "bob", "--id", bees, "--yes")["facts"] == 1
    assert run_json(capsys, *LEX, "--user", "ada", "stats")["messages"] > 20  # ada kept the rest


def test_forget_help_shows_both_forms_with_examples(capsys):
    code, out, _ = run(capsys, "forget", "--help")
    assert code == 0
    assert out.startswith("usage: unified-memory forget [--user U] [--id ID [--id ID ...]] [--yes]")
    assert "examples:" in out
    assert "unified-memory forget --user bob " in out and "unified-memory forget --user bob --id " in out


def test_import_as_another_user_into_the_same_file(capsys, db, tmp_path):
    dump = tmp_path / "ada.jsonl"
    exported = run_json(capsys, *LEX, "--user", "ada", "export", str(dump))["records"]
    imported = run_json(capsys, *LEX, "import", str(dump), "--as-user", "bob")
    assert imported == {"path": str(dump), "records": exported, "user": "bob"}
    ada, bob = (run_json(capsys, *LEX, "--user", user, "facts", "--all") for user in ("ada", "bob"))
    assert sorted(f["text"] for f in bob) == sorted(f["text"] for f in ada)
    assert not {f["id"] for f in bob} & {f["id"] for f in ada}  # fresh ids
    code, out, _ = run(capsys, *LEX, "import", str(dump), "--as-user", "bob")
    assert code == 0 and out.startswith("imported 0 records")  # already there


# -- bad input ----------------------------------------------------------------------------------------


def test_unknown_command_and_option_are_usage_errors(capsys, db):
    assert "invalid choice: 'remind'" in one_line_error(*run(capsys, "remind")[::2], expected_code=2)
    assert "--colour" in one_line_error(*run(capsys, "facts", "--colour")[::2], expected_code=2)
    one_line_error(*run(capsys, "recall", "x", "--limit", "0")[::2], expected_code=2)
    one_line_error(*run(capsys, "--retrieval", "magic", "stats")[::2], expected_code=2)
    one_line_error(*run(capsys)[::2], expected_code=2)


def test_profile_shows_the_users_name_and_key_facts_safety_first(capsys, db):
    code, out, err = run(capsys, *LEX, "--user", "ada", "profile")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Ada" and "allergic to peanuts" in lines[1]
    data = run_json(capsys, *LEX, "--user", "ada", "profile")
    assert data["name"] == "Ada" and data["facts"][0]["category"] == "health"
    old = run_json(capsys, *LEX, "--user", "ada", "profile", "--as-of", "2000-01-01")
    assert old["facts"] == []


@pytest.mark.parametrize("port", ["99999", "70000", "65536", "0", "-1"])
def test_a_port_out_of_range_is_a_usage_error_not_another_port(capsys, db, port):
    line = one_line_error(*run(capsys, "serve", "--port", port)[::2], expected_code=2)
    assert "--port" in line and port in line


@pytest.mark.parametrize("command", [["stats"], ["facts"], ["recall", "peanuts"], ["forget", "--id", "f1", "--yes"]])
def test_an_empty_user_is_an_error_not_the_default_user(capsys, db, command):
    line = one_line_error(*run(capsys, *LEX, "--user", "", *command)[::2], expected_code=2)
    assert "--user: must not be empty" in line
    line = one_line_error(*run(capsys, *LEX, *command[:1], "--user", "  ", *command[1:])[::2], expected_code=2)
    assert "--user: must not be empty" in line


def test_a_missing_memory_file_is_not_created(capsys, tmp_path):
    missing = tmp_path / "none.db"
    line = one_line_error(*run(capsys, *LEX, "--db", str(missing), "facts")[::2])
    assert "no memory file" in line and not missing.exists()


@pytest.mark.parametrize("content", [b"just some notes\n", None])
def test_a_foreign_database_file_is_refused(capsys, tmp_path, content):
    path = tmp_path / "foreign.db"
    if content is None:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE invoices (id INTEGER)")
        conn.close()
    else:
        path.write_bytes(content)
    line = one_line_error(*run(capsys, *LEX, "--db", str(path), "stats")[::2])
    assert "foreign.db" in line
    if content is None:  # refused before any table of ours was created
        with sqlite3.connect(path) as conn:
            assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["invoices"]
        conn.close()
    else:
        assert path.read_bytes() == content


def test_library_errors_are_one_line(capsys, db):
    line = one_line_error(*run(capsys, *LEX, "--user", " ada", "stats")[::2])
    assert "user_id" in line


def test_unexpected_errors_show_a_traceback_only_with_debug(capsys, db, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("kaput")

    monkeypatch.setattr(UnifiedMemory, "stats", boom)
    line = one_line_error(*run(capsys, *LEX, "--user", "ada", "stats")[::2])
    assert "RuntimeError: kaput" in line and "--debug" in line
    with pytest.raises(RuntimeError, match="kaput"):
        main([*LEX, "--debug", "--user", "ada", "stats"])


# -- formatting -------------------------------------------------------------------------------------


def test_tables_align_and_truncate_to_the_width():
    text = format_table(["score", "tier", "text"], [[0.5, "entity", "x" * 200], [12.25, "long_term", "short"]],
                        width=50)
    lines = text.splitlines()
    assert all(len(line) <= 50 for line in lines)
    assert lines[2].endswith("…") and lines[2].startswith(" 0.50  entity")
    assert lines[3].startswith("12.25  long_term  short")


def test_the_progress_bar_draws_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    quiet = io.StringIO()
    with progress(4, stream=quiet) as bar:
        bar(2, 4)
    assert quiet.getvalue() == ""
    screen = Terminal()
    with ProgressBar(40, stream=screen, width=10) as bar:
        bar(12, 40)
        bar(40, None)
    assert screen.getvalue() == "\r[###       ] 12/40\r[##########] 40/40\n"


# -- python -m unified_memory ------------------------------------------------------------------------


def test_python_dash_m_runs_the_command_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    helped = subprocess.run([sys.executable, "-m", "unified_memory", "--help"], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=120)
    assert helped.returncode == 0, helped.stderr
    assert "usage: unified-memory" in helped.stdout and "recall" in helped.stdout
    path = tmp_path / "demo.db"
    demo = subprocess.run([sys.executable, "-m", "unified_memory", "--retrieval", "lexical", "demo", str(path)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert demo.returncode == 0, demo.stderr
    assert "facts" in demo.stdout and "I live in Lisbon" in demo.stdout and path.exists()
    assert demo.stderr == ""  # stderr is not a terminal: no progress bar


def test_ingest_with_redact_secrets_stores_no_secret(capsys, tmp_path):
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "Mail me at ada@example.com, key sk-proj-abc123def456ghi789jkl0"},
                                {"role": "assistant", "content": "Noted."}]))
    target = tmp_path / "m.db"
    code, _, err = run(capsys, *LEX, "--db", str(target), "--redact-secrets", "ingest", str(chat))
    assert code == 0, err
    stored = run(capsys, *LEX, "--db", str(target), "export")[1]
    assert "[REDACTED:email]" in stored and "ada@example.com" not in stored and "sk-proj-" not in stored
    assert not [p for p in tmp_path.glob("m.db*") if b"ada@example.com" in p.read_bytes()]
