"""Ingesting chat-log files: formats, detection, idempotence, resumption, errors.

Every file here is synthetic (LoCoMo-shaped samples are made up; the dataset itself
is never read by the tests)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unified_memory import UnifiedMemory
from unified_memory.coordinator.writer import Writer
from unified_memory.errors import MemoryValueError
from unified_memory.io.chat_formats import detect_format, parse_locomo_date
from unified_memory.io.ingest import IngestReport, ingest_file, read_chat_file
from unified_memory.testing import internals

ROOT = Path(__file__).resolve().parents[3]


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def locomo_sample(sample_id: str, speakers=("Ann", "Ben"), sessions=2, turns=3, start_day=8) -> dict:
    """A made-up sample in the LoCoMo shape."""
    a, b = speakers
    conv: dict = {"speaker_a": a, "speaker_b": b}
    for n in range(1, sessions + 1):
        conv[f"session_{n}_date_time"] = f"1:56 pm on {start_day + n - 1} May, 2023"
        conv[f"session_{n}"] = [
            {"speaker": (a, b)[i % 2], "dia_id": f"D{n}:{i + 1}", "text": f"{sample_id} session {n} turn {i + 1}"}
            for i in range(turns)]
    return {"sample_id": sample_id, "conversation": conv, "qa": []}


def all_messages(mem: UnifiedMemory, user: str):
    return mem.scoped(user_id=user).episodes()


def count_messages(mem: UnifiedMemory) -> int:
    return internals(mem).storage.execute("SELECT COUNT(*) FROM messages").fetchone()[0]


@pytest.fixture
def memory(clock):
    with UnifiedMemory(clock=clock, user_id="me") as mem:
        yield mem


# -- formats -----------------------------------------------------------------------------------


def test_openai_list_of_messages(memory, tmp_path):
    path = write_json(tmp_path / "chat.json", [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                     {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}],
         "created_at": "2024-01-02T03:04:05Z", "name": "ada"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}], "timestamp": 1704164646},
        {"role": "tool", "tool_call_id": "c1", "content": "a cat", "when": 1704164647.5, "refusal": None},
        {"role": "assistant", "content": "A cat.", "metadata": {"source": "test"}},
    ])
    report = ingest_file(memory, path)
    assert report == IngestReport(str(path), "openai", 1, 1, 5, 0, ["me"])
    episodes = memory.episodes()
    assert [e.role for e in episodes] == ["system", "user", "assistant", "tool", "assistant"]
    user = episodes[1]
    assert user.content == "What is this?" and user.images == ["https://x/cat.png"] and user.name == "ada"
    assert user.created_at == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert episodes[2].tool_calls[0]["id"] == "c1" and episodes[2].created_at.timestamp() == 1704164646
    assert episodes[3].tool_call_id == "c1" and episodes[3].created_at.timestamp() == 1704164647.5
    assert episodes[4].metadata == {"source": "test"}
    assert {e.session_id for e in episodes} == {None}


def test_openai_messages_object_and_conversation_list(memory, tmp_path):
    single = write_json(tmp_path / "one.json", {"messages": [{"role": "user", "content": "solo"}]})
    assert ingest_file(memory, single).messages_added == 1
    many = write_json(tmp_path / "many.json", [
        {"id": "c-1", "user_id": "ada", "messages": [{"role": "user", "content": "ada one"}]},
        {"session_id": "s-9", "user_id": "bob", "messages": [{"role": "user", "content": "bob nine"}]},
        {"messages": [{"role": "user", "content": "anonymous"}, {"role": "assistant", "content": "ok"}]},
    ])
    report = ingest_file(memory, many)
    assert (report.conversations, report.sessions, report.messages_added) == (3, 3, 4)
    assert report.users == ["ada", "bob", "me"]
    assert [(e.content, e.session_id) for e in all_messages(memory, "ada")] == [("ada one", "c-1")]
    assert [(e.content, e.session_id) for e in all_messages(memory, "bob")] == [("bob nine", "s-9")]
    mine = [(e.content, e.session_id) for e in memory.episodes()]
    assert mine == [("solo", None), ("anonymous", "conversation_2"), ("ok", "conversation_2")]


def test_jsonl_messages_grouped_by_conversation(memory, tmp_path):
    path = write_jsonl(tmp_path / "log.jsonl", [
        {"conversation_id": "a", "role": "user", "content": "a1"},
        {"conversation_id": "b", "role": "user", "content": "b1"},
        {"conversation_id": "a", "role": "assistant", "content": "a2"},
        {"session_id": "b", "role": "assistant", "content": "b2"},
    ])
    report = ingest_file(memory, path)
    assert (report.format, report.conversations, report.sessions, report.messages_added) == ("jsonl", 2, 2, 4)
    assert [m.content for m in memory.scoped(session_id="a").window()] == ["a1", "a2"]
    assert [m.content for m in memory.scoped(session_id="b").window()] == ["b1", "b2"]


def test_jsonl_one_conversation_without_ids_and_blank_lines(memory, tmp_path):
    path = tmp_path / "log.ndjson"
    path.write_text('{"role": "user", "content": "one"}\n\n{"role": "assistant", "content": "two"}\n')
    report = ingest_file(memory, path)
    assert (report.format, report.sessions, report.messages_added) == ("jsonl", 1, 2)
    assert [m.content for m in memory.window()] == ["one", "two"]


def test_jsonl_conversation_per_line(memory, tmp_path):
    path = write_jsonl(tmp_path / "convs.jsonl", [
        {"id": "x", "user_id": "ada", "messages": [{"role": "user", "content": "x1"}]},
        {"messages": [{"role": "user", "content": "y1"}, {"role": "assistant", "content": "y2"}]},
    ])
    report = ingest_file(memory, path)
    assert (report.conversations, report.sessions, report.messages_added) == (2, 2, 3)
    assert [(e.content, e.session_id) for e in all_messages(memory, "ada")] == [("x1", "x")]
    assert [(e.content, e.session_id) for e in memory.episodes()] == [("y1", "conversation_1"),
                                                                       ("y2", "conversation_1")]


def test_locomo_samples_go_to_separate_users_and_sessions(memory, tmp_path):
    first = locomo_sample("s-1", ("Ann", "Ben"))
    first["conversation"]["session_1"][1].update(img_url=["https://x/dog.jpg"], blip_caption="a photo of a dog")
    path = write_json(tmp_path / "locomo.json", [first, locomo_sample("s-2", ("Cat", "Dan"), sessions=1)])
    report = ingest_file(memory, path)
    assert report == IngestReport(str(path), "locomo", 2, 3, 9, 0, ["s-1", "s-2"])
    episodes = all_messages(memory, "s-1")
    assert [(e.session_id, e.name, e.role) for e in episodes] == [
        ("session_1", "Ann", "user"), ("session_1", "Ben", "assistant"), ("session_1", "Ann", "user"),
        ("session_2", "Ann", "user"), ("session_2", "Ben", "assistant"), ("session_2", "Ann", "user")]
    start = datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp()
    assert [e.created_at.timestamp() - start for e in episodes] == [0, 60, 120, 86400, 86460, 86520]
    assert episodes[1].content == "s-1 session 1 turn 2 [shares a photo of a dog]"
    assert episodes[1].images == ["https://x/dog.jpg"]
    assert episodes[0].metadata == {"dia_id": "D1:1", "sample_id": "s-1"}
    assert [e.content for e in all_messages(memory, "s-2")] == [f"s-2 session 1 turn {i}" for i in (1, 2, 3)]
    assert memory.episodes() == []
    hits = memory.scoped(user_id="s-1").recall("dog photo", limit=1)
    assert hits[0].metadata["dia_id"] == "D1:2"


def test_locomo_date_parsing():
    assert parse_locomo_date("10:04 am on 19 January, 2024") == datetime(2024, 1, 19, 10, 4, tzinfo=UTC).timestamp()
    assert parse_locomo_date("12:00 pm on 1 June, 2023") == datetime(2023, 6, 1, 12, 0, tzinfo=UTC).timestamp()


def test_user_id_argument_overrides_the_file(memory, tmp_path):
    path = write_json(tmp_path / "locomo.json", [locomo_sample("s-1"), locomo_sample("s-2")])
    report = ingest_file(memory, path, user_id="everyone")
    assert report.users == ["everyone"] and report.messages_added == 12
    assert len(all_messages(memory, "everyone")) == 12 and all_messages(memory, "s-1") == []


@pytest.mark.parametrize(("name", "data", "expected"), [
    ("a.json", [{"role": "user", "content": "hi"}], "openai"),
    ("a.json", {"messages": [{"role": "user", "content": "hi"}]}, "openai"),
    ("a.json", [{"messages": [{"role": "user", "content": "hi"}]}], "openai"),
    ("a.json", [locomo_sample("s")], "locomo"),
    ("a.txt", locomo_sample("s"), "locomo"),
    ("a.jsonl", [{"role": "user", "content": "hi"}], "jsonl"),
    ("a.txt", "jsonl-lines", "jsonl"),
])
def test_auto_detection(memory, tmp_path, name, data, expected):
    path = tmp_path / name
    if name.endswith(".jsonl"):
        write_jsonl(path, data)
    elif data == "jsonl-lines":
        write_jsonl(path, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    else:
        write_json(path, data)
    assert detect_format(str(path), path.read_text()) == expected
    report = ingest_file(memory, path)
    assert report.format == expected and report.messages_added > 0


def test_explicit_format_is_used(memory, tmp_path):
    path = write_jsonl(tmp_path / "log.txt", [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert ingest_file(memory, path, format="jsonl").messages_added == 2


# -- idempotence and resumption ----------------------------------------------------------------


def test_second_ingest_adds_nothing_and_recall_is_unchanged(memory, tmp_path):
    path = write_json(tmp_path / "locomo.json", [locomo_sample("s-1"), locomo_sample("s-2")])
    first = ingest_file(memory, path)
    view = memory.scoped(user_id="s-1")
    before = [(h.id, h.text) for h in view.recall("session turn", limit=20)]
    again = ingest_file(memory, path)
    assert (first.messages_added, first.messages_skipped) == (12, 0)
    assert (again.messages_added, again.messages_skipped) == (0, 12)
    assert [(h.id, h.text) for h in view.recall("session turn", limit=20)] == before
    assert count_messages(memory) == 12


def test_a_moved_or_renamed_file_is_recognised(memory, tmp_path):
    (tmp_path / "downloads").mkdir()
    path = write_json(tmp_path / "downloads" / "chat.json", [{"role": "user", "content": "hello"}])
    assert ingest_file(memory, path).messages_added == 1
    moved = tmp_path / "elsewhere.json"
    moved.write_bytes(path.read_bytes())
    path.unlink()
    assert ingest_file(memory, moved).messages_skipped == 1
    assert count_messages(memory) == 1


def test_the_same_file_for_another_user_is_ingested_again(memory, tmp_path):
    path = write_json(tmp_path / "chat.json", [{"role": "user", "content": "hello"}])
    ingest_file(memory, path)
    assert ingest_file(memory, path, user_id="other").messages_added == 1
    assert ingest_file(memory.scoped(user_id="other"), path).messages_added == 0


def test_an_extended_file_adds_only_the_new_part(memory, tmp_path):
    sample = locomo_sample("s-1", sessions=2)
    path = write_json(tmp_path / "locomo.json", [sample])
    assert ingest_file(memory, path).messages_added == 6
    bigger = locomo_sample("s-1", sessions=3)
    write_json(path, [bigger, locomo_sample("s-2", sessions=1)])
    report = ingest_file(memory, path)
    assert (report.messages_added, report.messages_skipped) == (6, 6)
    assert [e.session_id for e in all_messages(memory, "s-1")].count("session_3") == 3
    assert len(all_messages(memory, "s-2")) == 3

    log = write_jsonl(tmp_path / "log.jsonl", [{"role": "user", "content": "one"}])
    assert ingest_file(memory, log).messages_added == 1
    with log.open("a") as handle:
        handle.write(json.dumps({"role": "assistant", "content": "two"}) + "\n")
    report = ingest_file(memory, log)
    assert (report.messages_added, report.messages_skipped) == (1, 1)
    assert [m.content for m in memory.window()] == ["one", "two"]


def test_repeated_messages_are_all_kept(memory, tmp_path):
    path = write_json(tmp_path / "chat.json", [{"role": "user", "content": "ok"}] * 3)
    assert ingest_file(memory, path).messages_added == 3
    assert ingest_file(memory, path).messages_added == 0


def test_progress_is_called_after_each_session(memory, tmp_path):
    path = write_json(tmp_path / "locomo.json", [locomo_sample("s-1", sessions=2), locomo_sample("s-2", sessions=1)])
    seen = []
    ingest_file(memory, path, progress=lambda done, total: seen.append((done, total, count_messages(memory))))
    assert seen == [(1, 3, 3), (2, 3, 6), (3, 3, 9)]


def test_resume_after_an_interruption(memory, tmp_path):
    path = write_json(tmp_path / "locomo.json", [locomo_sample("s-1", sessions=3), locomo_sample("s-2")])

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ingest_file(memory, path, progress=stop)
    assert count_messages(memory) == 3
    report = ingest_file(memory, path)
    assert (report.messages_added, report.messages_skipped) == (12, 3)
    texts = [e.content for user in ("s-1", "s-2") for e in all_messages(memory, user)]
    assert len(texts) == len(set(texts)) == 15


def test_a_failed_write_leaves_neither_messages_nor_keys(memory, tmp_path, monkeypatch):
    path = write_json(tmp_path / "locomo.json", [locomo_sample("s-1", sessions=2)])

    original = Writer.write_messages

    def broken(self, messages, **options):
        original(self, messages, **options)  # written (and its savepoint released), then the transaction fails
        raise RuntimeError("disk full")

    monkeypatch.setattr(Writer, "write_messages", broken)
    with pytest.raises(RuntimeError):
        ingest_file(memory, path)
    assert count_messages(memory) == 0
    assert internals(memory).ingested.count() == 0
    assert memory.scoped(user_id="s-1").recall("session turn") == []
    monkeypatch.undo()
    assert ingest_file(memory, path).messages_added == 6
    assert count_messages(memory) == 6


def test_a_killed_process_resumes_without_duplicates(tmp_path, storage_backend, request):
    path = write_json(tmp_path / "locomo.json", [locomo_sample("s-1", sessions=3), locomo_sample("s-2", sessions=2)])
    # The child opens the database itself: on PostgreSQL by its URL (it cannot see the test's mapping of paths).
    db = request.getfixturevalue("pg_url") if storage_backend == "postgresql" else str(tmp_path / "memory.db")
    script = textwrap.dedent(f"""
        import os, signal
        from unified_memory import UnifiedMemory
        from unified_memory.io.ingest import ingest_file
        mem = UnifiedMemory({db!r}, retrieval="lexical")
        ingest_file(mem, {str(path)!r}, progress=lambda done, total: os.kill(os.getpid(), signal.SIGKILL))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, timeout=120)
    assert result.returncode == -9, result.stderr.decode()
    with UnifiedMemory(db, retrieval="lexical") as mem:
        assert count_messages(mem) == 3
        report = ingest_file(mem, path)
        assert (report.messages_added, report.messages_skipped) == (12, 3)
        texts = [e.content for user in ("s-1", "s-2") for e in all_messages(mem, user)]
        assert len(texts) == len(set(texts)) == 15


# -- bad input ---------------------------------------------------------------------------------


def test_missing_file(memory, tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(MemoryValueError, match=r"^path: " + str(path).replace("\\", "\\\\") + ": no such file"):
        ingest_file(memory, path)


def test_malformed_json_names_the_line(memory, tmp_path):
    path = tmp_path / "chat.json"
    path.write_text('[\n  {"role": "user", "content": "hi"},\n  {"role": "user" "content": "x"}\n]\n')
    with pytest.raises(MemoryValueError) as caught:
        ingest_file(memory, path)
    assert str(caught.value).startswith(f"{path}:3: malformed JSON")
    assert isinstance(caught.value, ValueError)


def test_bad_jsonl_line_names_its_number(memory, tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text('{"role": "user", "content": "a"}\n\n{"role": "user", "content": }\n')
    with pytest.raises(MemoryValueError, match="^" + str(path) + ":3: malformed JSON"):
        ingest_file(memory, path)
    path.write_text('{"role": "user", "content": "a"}\n{"role": "robot", "content": "b"}\n')
    with pytest.raises(MemoryValueError, match="^" + str(path) + ":2: message.role: Input should be"):
        ingest_file(memory, path)
    path.write_text('{"role": "user", "content": "a"}\n[1, 2]\n')
    with pytest.raises(MemoryValueError, match="^" + str(path) + ":2: expected a JSON object"):
        ingest_file(memory, path)


def test_bad_role_names_its_location(memory, tmp_path):
    conversations = [{"messages": [{"role": "user", "content": "fine"}]} for _ in range(3)]
    conversations[2]["messages"] += [{"role": "user", "content": "x"}] * 4 + [{"role": "robot", "content": "x"}]
    path = write_json(tmp_path / "chat.json", conversations)
    with pytest.raises(MemoryValueError) as caught:
        ingest_file(memory, path)
    assert str(caught.value).startswith(f"{path}: conversations[2].messages[5].role: Input should be")
    assert caught.value.field == "conversations[2].messages[5].role"


@pytest.mark.parametrize(("data", "where"), [
    ([{"role": "user"}], "messages[0].content: required for a user message"),
    ([{"role": "user", "content": 3}], "messages[0].content: Input should be a valid string"),
    ([{"role": "user", "content": [{"type": "audio"}]}], "messages[0].content[0].type: expected a text"),
    ([{"role": "user", "content": "x", "created_at": "yesterday"}], "messages[0].created_at: not an ISO 8601"),
    ([{"role": "user", "content": "x", "metadata": [1]}], "messages[0].metadata: expected dict"),
    ([{"user_id": " ", "messages": []}], "conversations[0].user_id: must be"),
    ([{"messages": "hi"}], "conversations[0].messages: expected a list"),
    ([3], "messages[0]: expected a message object"),
    ("hello", "expected a list of messages or conversations"),
])
def test_structurally_wrong_openai_files(memory, tmp_path, data, where):
    path = write_json(tmp_path / "chat.json", data)
    with pytest.raises(MemoryValueError) as caught:
        ingest_file(memory, path, format="openai")
    assert str(caught.value).startswith(f"{path}: {where}")


def test_structurally_wrong_locomo_files(memory, tmp_path):
    sample = locomo_sample("s-1")
    sample["conversation"]["session_2"][1]["speaker"] = "Zed"
    path = write_json(tmp_path / "locomo.json", [locomo_sample("s-0"), sample])
    with pytest.raises(MemoryValueError, match=r": samples\[1\]\.conversation\.session_2\[1\]\.speaker: expected one"):
        ingest_file(memory, path)
    sample = locomo_sample("s-1")
    sample["conversation"]["session_1_date_time"] = "someday"
    write_json(path, [sample])
    with pytest.raises(MemoryValueError, match=r"session_1_date_time: expected a date"):
        ingest_file(memory, path)
    write_json(path, [{"conversation": {}}])
    with pytest.raises(MemoryValueError, match=r"samples\[0\]\.sample_id: required"):
        ingest_file(memory, path, format="locomo")


OPENAI_CHAT = [{"role": "user", "content": "I keep bees"}, {"role": "assistant", "content": "Nice"}]


@pytest.mark.parametrize(("name", "actual", "format"), [
    ("chat.json", "openai", "locomo"), ("chat.json", "openai", "jsonl"),
    ("chat.jsonl", "jsonl", "openai"), ("log.txt", "jsonl", "locomo"), ("log.txt", "jsonl", "openai"),
    ("locomo.json", "locomo", "openai"), ("locomo.json", "locomo", "jsonl"),
])
def test_a_file_of_another_format_says_which_it_is(memory, tmp_path, name, actual, format):
    path = tmp_path / name
    if actual == "jsonl":
        write_jsonl(path, OPENAI_CHAT)
    else:
        path.write_text(json.dumps([locomo_sample("s-1")] if actual == "locomo" else OPENAI_CHAT, indent=2))
    with pytest.raises(MemoryValueError) as caught:
        ingest_file(memory, path, format=format)
    assert str(caught.value) == (f"format: the content of {path} does not match format {format!r}: it is "
                                 f"{actual!r} (choose format {actual!r}, or 'auto' to detect it)")
    assert caught.value.field == "format" and isinstance(caught.value, ValueError)
    assert count_messages(memory) == 0
    assert ingest_file(memory, path, format=actual).messages_added > 0


def test_a_file_of_another_format_that_is_also_bad_in_its_own(memory, tmp_path):
    path = write_json(tmp_path / "chat.json", [{"role": "robot", "content": "hi"}])
    with pytest.raises(MemoryValueError) as caught:
        ingest_file(memory, path, format="locomo")
    assert str(caught.value).startswith(f"format: the content of {path} does not match format 'locomo'; read as "
                                        f"'openai', the format it looks like, it fails too: {path}: "
                                        "messages[0].role: Input should be")


def test_text_of_no_format_reports_what_the_format_given_trips_on(memory, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("just some notes\n")
    for format in ("openai", "jsonl", "locomo"):
        with pytest.raises(MemoryValueError, match=f"^{path}:1: malformed JSON"):
            ingest_file(memory, path, format=format)


def test_nothing_is_written_when_any_part_is_bad(memory, tmp_path):
    good = [locomo_sample(f"s-{i}") for i in range(3)]
    good[2]["conversation"]["session_2"][2]["text"] = None
    path = write_json(tmp_path / "locomo.json", good)
    with pytest.raises(MemoryValueError, match=r"samples\[2\]\.conversation\.session_2\[2\]\.text"):
        ingest_file(memory, path)
    assert count_messages(memory) == 0
    assert internals(memory).ingested.count() == 0


def test_bad_arguments(memory, tmp_path):
    path = write_json(tmp_path / "chat.json", [{"role": "user", "content": "hi"}])
    with pytest.raises(MemoryValueError, match="^format: must be one of"):
        ingest_file(memory, path, format="csv")
    with pytest.raises(TypeError, match="progress"):
        ingest_file(memory, path, progress="bar")
    with pytest.raises(ValueError, match="user_id"):
        ingest_file(memory, path, user_id="")
    with pytest.raises(TypeError, match="memory"):
        ingest_file(object(), path)
    with pytest.raises(MemoryValueError, match="is a directory"):
        ingest_file(memory, tmp_path)
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(MemoryValueError, match="not UTF-8"):
        read_chat_file(tmp_path / "bin.json")
    assert count_messages(memory) == 0


# -- property ----------------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"), max_size=30)
_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]), "content": _text})
_conversation = st.fixed_dictionaries({"messages": st.lists(_message, min_size=1, max_size=6)},
                                      optional={"user_id": st.sampled_from(["u1", "u2"])})


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(conversations=st.lists(_conversation, min_size=1, max_size=4))
def test_any_conversation_list_round_trips_and_reingests_to_nothing(tmp_path_factory, conversations):
    path = write_json(tmp_path_factory.mktemp("prop") / "chats.json", conversations)
    with UnifiedMemory(user_id="me", short_term_limit=1000) as mem:
        report = ingest_file(mem, path)
        total = sum(len(c["messages"]) for c in conversations)
        assert (report.messages_added, report.sessions) == (total, len(conversations))
        for i, conv in enumerate(conversations):
            view = mem.scoped(user_id=conv.get("user_id", "me"), session_id=f"conversation_{i}")
            expected = [(m["role"], m["content"]) for m in conv["messages"]]
            assert [(m.role, m.content) for m in view.window()] == expected
            assert [(e.role, e.content) for e in view.episodes(session_id=f"conversation_{i}")] == expected
        assert count_messages(mem) == total
        again = ingest_file(mem, path)
        assert (again.messages_added, again.messages_skipped) == (0, total)
        assert count_messages(mem) == total
