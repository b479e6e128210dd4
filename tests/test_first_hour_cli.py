"""The first hour on the command line, end to end (issue 22): the real ``unified-memory``
executable in subprocesses, in a fresh directory, each step with its exit status and
its output checked — the demo and the commands it prints, another user's demo, an
unknown user, ingesting a chat (with and without extraction), forgetting one record,
export and import as another user into the same file, a wrong ``--format``, recall
without 0-score padding, ``stats --json``, and a declined ``forget`` prompt.

Most steps use ``--retrieval lexical`` (a cold process in well under a second); one
recall runs at the default retrieval (hybrid with the embeddings extra)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
_SCRIPT = Path(sys.executable).with_name("unified-memory")
EXE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "unified_memory"]
LEX = ["--retrieval", "lexical"]
DEMO = "unified_memory_demo.db"
CHAT = [{"role": "user", "content": "Hi! I'm allergic to peanuts."},
        {"role": "assistant", "content": "Noted, no peanuts."},
        {"role": "user", "content": "My sister Maria lives in Lisbon."},
        {"role": "assistant", "content": "Lovely city."},
        {"role": "user", "content": "I work at Zillow as a software tester."},
        {"role": "assistant", "content": "Nice."}]


def cli(cwd: Path, *args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """Run ``unified-memory ARGS`` in ``cwd`` (no $UNIFIED_MEMORY_DB, no terminal)."""
    env = {k: v for k, v in os.environ.items() if k != "UNIFIED_MEMORY_DB"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([*EXE, *args], cwd=cwd, env=env, stdin=stdin, capture_output=True, text=True,
                          timeout=180)


def ok(done: subprocess.CompletedProcess[str]) -> str:
    """The output of a step that must succeed."""
    assert done.returncode == 0, f"{done.args}: exit {done.returncode}\n{done.stderr}"
    return done.stdout


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The error line of a step that must fail: exit 1, nothing on stdout, one line on stderr."""
    assert done.returncode == 1, (done.args, done.returncode, done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("unified-memory: error: "), done.stderr
    return lines[0]


def copy_memory(source: Path, target: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{source}{suffix}").exists():
            shutil.copy(f"{source}{suffix}", f"{target}{suffix}")
    return target


def score_column(table: str) -> list[str]:
    """The first column of a recall table's rows."""
    return [line.split()[0] for line in table.splitlines()[2:] if line.strip()]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, list[str]]:
    """``unified-memory demo`` in a fresh directory: the directory and the commands it prints."""
    where = tmp_path_factory.mktemp("first_hour")
    out = ok(done := cli(where, *LEX, "demo"))
    assert done.stderr == ""  # not a terminal: no progress bar
    assert out.startswith("Ingested ") and f"of user 'ada' into {DEMO}" in out.splitlines()[0]
    lines = out.splitlines()
    start = lines.index(f"Wrote user 'ada' to {DEMO}. Explore it next:")
    commands = [line.strip() for line in lines[start + 1:]]
    assert commands == [f"unified-memory --db {DEMO} --user ada facts",
                        f"unified-memory --db {DEMO} --user ada graph Maria",
                        f'unified-memory --db {DEMO} --user ada recall "who is Maria?" --retrieval lexical']
    return where, commands


def test_the_commands_the_demo_prints_show_its_memories(demo):
    where, commands = demo
    facts, graph, recall = (ok(cli(where, *shlex.split(command)[1:])) for command in commands)
    assert facts.splitlines()[0].split()[:3] == ["importance", "category", "status"]
    assert "I live in Lisbon" not in facts and "Berlin" in facts  # the move superseded Lisbon
    assert "has_sister" in graph and "Porto" in graph
    assert "Maria" in recall and "0.00" not in score_column(recall)


def test_the_demo_writes_the_user_given(tmp_path):
    out = ok(cli(tmp_path, *LEX, "--user", "bob", "demo"))
    assert f"Wrote user 'bob' to {DEMO}. Explore it next:" in out
    assert f"unified-memory --db {DEMO} --user bob facts" in out
    stats = json.loads(ok(cli(tmp_path, *LEX, "--db", DEMO, "--user", "bob", "--json", "stats")))
    assert stats["user_id"] == "bob" and stats["messages"] > 20 and stats["facts"] > 3
    line = one_line_error(cli(tmp_path, *LEX, "--db", DEMO, "--user", "ada", "facts"))
    assert "unknown user 'ada'" in line and "its users: bob" in line
    demo_json = json.loads(ok(cli(tmp_path, *LEX, "--json", "demo")))  # and back: the file is the demo's
    assert demo_json["user"] == "ada" and demo_json["path"] == DEMO


@pytest.mark.parametrize("command", [["facts"], ["recall", "peanuts"], ["context", "peanuts"], ["stats"],
                                     ["entities"], ["graph", "Maria"], ["episodes"], ["export"],
                                     ["forget", "--id", "fact_x", "--yes"]], ids=lambda c: c[0])
def test_an_unknown_user_is_one_line_naming_it(demo, command):
    where, _ = demo
    line = one_line_error(cli(where, *LEX, "--db", DEMO, "--user", "ghost", *command))
    assert line == (f"unified-memory: error: unknown user 'ghost': '{DEMO}' holds no memories of that user; "
                    "its users: ada (choose one with --user)")


def test_an_ingested_chat_becomes_facts_and_entities_unless_no_extract(tmp_path):
    (tmp_path / "chat.json").write_text(json.dumps(CHAT, indent=2))
    report = ok(cli(tmp_path, *LEX, "ingest", "chat.json"))
    assert "messages_added    6" in report and "format            openai" in report
    assert "allergic to peanuts" in ok(cli(tmp_path, *LEX, "facts"))
    entities = ok(cli(tmp_path, *LEX, "entities"))
    assert "Maria" in entities and "Lisbon" in entities
    graph = ok(cli(tmp_path, *LEX, "graph", "Maria"))
    assert "lives_in" in graph and "Lisbon" in graph
    assert "messages_skipped  6" in ok(cli(tmp_path, *LEX, "ingest", "chat.json"))  # again: nothing new
    ok(cli(tmp_path, *LEX, "--db", "history.db", "ingest", "chat.json", "--no-extract"))
    assert ok(cli(tmp_path, *LEX, "--db", "history.db", "facts")).strip() == "(no facts)"
    assert ok(cli(tmp_path, *LEX, "--db", "history.db", "entities")).strip() == "(no entities)"
    assert "(no episodes)" not in ok(cli(tmp_path, *LEX, "--db", "history.db", "episodes"))


def test_forget_one_record_of_a_user(demo, tmp_path):
    copy_memory(demo[0] / DEMO, tmp_path / "m.db")
    facts = json.loads(ok(cli(tmp_path, *LEX, "--db", "m.db", "--user", "ada", "--json", "facts")))
    gone = facts[0]
    out = ok(cli(tmp_path, *LEX, "--db", "m.db", "forget", "--user", "ada", "--id", gone["id"], "--yes"))
    assert out.startswith("forgot ") and "1 facts" in out
    left = json.loads(ok(cli(tmp_path, *LEX, "--db", "m.db", "--user", "ada", "--json", "facts")))
    assert [f["id"] for f in left] == [f["id"] for f in facts[1:]]
    assert "forget --user bob --id" in ok(cli(tmp_path, "forget", "--help"))


def test_export_then_import_as_another_user_into_the_same_file(demo, tmp_path):
    copy_memory(demo[0] / DEMO, tmp_path / "m.db")
    exported = ok(cli(tmp_path, *LEX, "--db", "m.db", "--user", "ada", "export", "ada.jsonl"))
    count = int(exported.split()[1])
    assert exported == f"exported {count} records to ada.jsonl\n" and count > 20
    imported = ok(cli(tmp_path, *LEX, "--db", "m.db", "import", "ada.jsonl", "--as-user", "bob"))
    assert imported == f"imported {count} records from ada.jsonl as user 'bob'\n"
    facts = {user: ok(cli(tmp_path, *LEX, "--db", "m.db", "--user", user, "facts", "--all")) for user in ("ada", "bob")}
    assert facts["bob"] == facts["ada"]  # the table cuts long texts to the terminal's width: the full ones in JSON
    texts = {user: [f["text"] for f in json.loads(ok(cli(tmp_path, *LEX, "--db", "m.db", "--user", user, "--json",
                                                          "facts", "--all")))] for user in ("ada", "bob")}
    assert texts["bob"] == texts["ada"] and any("Berlin" in text for text in texts["bob"])
    again = ok(cli(tmp_path, *LEX, "--db", "m.db", "import", "ada.jsonl", "--as-user", "bob"))
    assert again.startswith("imported 0 records")


@pytest.mark.parametrize(("name", "format", "actual"), [("chat.json", "locomo", "openai"),
                                                     ("chat.jsonl", "openai", "jsonl")])
def test_a_wrong_format_says_the_content_does_not_match(tmp_path, name, format, actual):
    text = "\n".join(map(json.dumps, CHAT)) if actual == "jsonl" else json.dumps(CHAT, indent=2)
    (tmp_path / name).write_text(text)
    line = one_line_error(cli(tmp_path, *LEX, "ingest", name, "--format", format))
    assert line == (f"unified-memory: error: format: the content of {name} does not match format {format!r}: "
                    f"it is {actual!r} (choose format {actual!r}, or 'auto' to detect it)")
    assert not (tmp_path / "unified_memory.db").exists()


@pytest.mark.parametrize("retrieval", [LEX, []], ids=["lexical", "default"])
def test_recall_is_not_padded_with_unrelated_rows(demo, tmp_path, retrieval):
    """Rows that match nothing of the query (score 0.00) used to fill the limit."""
    copy_memory(demo[0] / DEMO, tmp_path / "m.db")
    table = ok(cli(tmp_path, *retrieval, "--db", "m.db", "--user", "ada", "recall", "what am I allergic to?"))
    assert "peanuts" in table and "0.00" not in score_column(table), table
    hits = json.loads(ok(cli(tmp_path, *retrieval, "--db", "m.db", "--user", "ada", "--json", "recall",
                             "quantum xylophones")))
    assert all(hit["components"]["relevance"] > 0 for hit in hits)
    assert retrieval or len(hits) < 10  # at most the few faint meanings, not the limit filled


def test_stats_json_carries_what_the_table_shows(demo):
    where, _ = demo
    table = ok(cli(where, *LEX, "--db", DEMO, "--user", "ada", "stats"))
    document = json.loads(ok(cli(where, *LEX, "--db", DEMO, "--user", "ada", "--json", "stats")))
    assert document["retrieval"] == "lexical"
    assert {line.split()[0] for line in table.splitlines()} == set(document)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal (pty), which Windows lacks")
def test_a_declined_forget_prompt_deletes_nothing_and_is_no_error(demo, tmp_path):
    import pty

    copy_memory(demo[0] / DEMO, tmp_path / "m.db")
    main, terminal = pty.openpty()
    try:
        os.write(main, b"n\n")  # the answer waits in the terminal's input
        done = cli(tmp_path, *LEX, "--db", "m.db", "forget", "--user", "ada", stdin=terminal)
    finally:
        os.close(terminal)
        os.close(main)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "cancelled; nothing was deleted\n"
    assert "[y/N]" in done.stderr and "error" not in done.stderr
    stats = json.loads(ok(cli(tmp_path, *LEX, "--db", "m.db", "--user", "ada", "--json", "stats")))
    assert stats["messages"] > 20
    line = one_line_error(cli(tmp_path, *LEX, "--db", "m.db", "forget", "--user", "ada"))  # no terminal
    assert "--yes" in line
