"""Fuzzing every file reader (issue 8): bad input files are refused cleanly.

Each reader gets hypothesis-generated mutations of a VALID file (truncated, bytes
flipped / inserted / deleted, invalid UTF-8, a wrong JSON type at a random field
path, a missing or an extra key, huge numbers, NaN / Infinity literals, recursion
bombs, an empty file) plus fixed cases (a directory, an unreadable file, a symlink
loop). The outcome must be success or a documented error (a ``UnifiedMemoryError``)
whose message names the file — and, for JSON syntax errors, the line. Never a
``RecursionError``, ``UnicodeDecodeError``, ``json.JSONDecodeError``, ``KeyError``,
``sqlite3.DatabaseError`` ... escaping. A refused import / ingest writes nothing
(the store's rows are compared before and after), and a refused file (the memory
database, session files, logs, saved memories) keeps its bytes, its mtime and its
siblings.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import io
import json
import os
import re
import sqlite3
import stat
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import scaled
from unified_memory import MemoryValueError, UnifiedMemory, UnifiedMemoryError
from unified_memory.testing import internals

# -- the outcome of one read -------------------------------------------------------------

TALLY: Counter[str] = Counter()
READERS: set[str] = set()
# Deterministic examples (reproducible in CI); UM_RELIABILITY_RANDOM=1 explores new ones on each run.
FUZZ = settings(max_examples=scaled(100), deadline=None, derandomize=not os.environ.get("UM_RELIABILITY_RANDOM"),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
BOMB = b"[" * 100_000
FIELD: list[str] = []  # ``names=FIELD``: the error must name its field (data from a store, not a file)


def _line_of(text: str) -> int | None:
    """The line named by a message: ``path:3: ...`` or ``..., line 3...``."""
    found = re.search(r"(?::(\d+):|\bline (\d+))", text)
    return int(found.group(1) or found.group(2)) if found else None


def outcome(reader: str, call: Callable[[], Any], *, names: str | list[str],
            json_line: int | None = None, any_line: bool = False, tally: bool = True) -> Any:
    """Run ``call``: its result, or ``None`` after a documented refusal.

    The refusal must be a :class:`UnifiedMemoryError` whose message holds one of
    ``names`` (the file) and, when ``json_line`` is given (the first line of a JSON
    Lines file that is not JSON), a line number no later than it (an earlier line may
    be refused first); with ``any_line`` (a JSON document that is not JSON), a line.
    ``tally=False``: a follow-up on an input already counted (reading back what was accepted)."""
    if tally:
        READERS.add(reader.split(" (")[0])
        TALLY["inputs"] += 1
    wanted = [names] if isinstance(names, str) else list(names)
    try:
        result = call()
    except UnifiedMemoryError as exc:
        message = str(exc)
        if names is FIELD:  # data that came from a store, not a file: the error names the field
            assert exc.field and message.startswith(exc.field.split(".")[0]), \
                f"{reader}: the error does not name the field: {message!r}"
        else:
            assert any(name in message for name in wanted), \
                f"{reader}: the error does not name the file: {message!r}"
        if json_line is not None:
            line = _line_of(message)
            assert line is not None and (any_line or line <= json_line), \
                f"{reader}: the error names no line (the first bad line is {json_line}): {message!r}"
        TALLY["refused"] += tally
        return None
    except BaseException as exc:  # noqa: BLE001 - anything else is the bug under test
        if isinstance(exc, KeyboardInterrupt):
            raise
        pytest.fail(f"{reader}: undocumented {type(exc).__name__} escaped: {exc!r:.300}\n"
                    + "".join(traceback.format_exception(exc))[-3000:])
    TALLY["accepted"] += tally
    return result


def first_bad_line(data: bytes) -> int | None:
    """The first line of a JSON Lines text that is not JSON (``None``: all are, or not UTF-8)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            try:
                json.loads(line)
            except (ValueError, RecursionError):
                return number
    return None


def json_error_line(data: bytes) -> int | None:
    """The line of a whole-document JSON syntax error (``None``: valid, deep or not UTF-8)."""
    try:
        json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError:
        return None
    except json.JSONDecodeError as exc:
        return exc.lineno
    except (ValueError, RecursionError):
        return None
    return None


# -- mutations -------------------------------------------------------------------------

_NAN, _INF, _NINF, _HUGE, _SURROGATE, _DEEP = ("\x00NAN", "\x00INF", "\x00NINF", "\x00HUGE", "\x00SUR", "\x00DEEP")
_DIGITS = "\x00DIGITS"
_LITERALS = {_NAN: "NaN", _INF: "Infinity", _NINF: "-Infinity", _HUGE: "1" + "0" * 400, _DIGITS: "9" * 5000,
             _SURROGATE: '"\\ud800"', _DEEP: "[" * 900 + "]" * 900}
WEIRD = [None, True, False, 0, -1, 2**63, -(2**63) - 1, 2**64, 1e308, -0.0, 1.5, "", "x", "x" * 5000, "\u2028",
         "not " * 5000 + "True", "-" * 100_000 + "1", "1+" * 50_000 + "1",  # parser bombs (strategy conditions)
         [], {}, [[[]]], {"$base64": "!!"}, {"a": {"b": None}}, _NAN, _INF, _NINF, _HUGE, _DIGITS, _SURROGATE,
         _DEEP]


def _dump(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    for marker, literal in _LITERALS.items():
        text = text.replace(json.dumps(marker), literal)
    return text


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    _get(value, path[:-1])[path[-1]] = new
    return value


@st.composite
def _structural(draw: st.DrawFn, doc: Any) -> Any:
    """A copy of a parsed JSON document with one structural change."""
    doc = json.loads(json.dumps(doc))
    how = draw(st.sampled_from(["type", "type", "type", "drop", "extra"]))
    if how == "type":
        path = draw(st.sampled_from(_paths(doc)))
        return _set(doc, path, draw(st.sampled_from(WEIRD)))
    dicts = [p for p in _paths(doc) if isinstance(_get(doc, p), dict) and (how == "extra" or _get(doc, p))]
    if not dicts:
        return doc
    target = _get(doc, draw(st.sampled_from(dicts)))
    if how == "drop":
        del target[draw(st.sampled_from(sorted(target)))]
    else:
        target[draw(st.sampled_from(["zz_extra", "kind", "format", "version", "type", "v"]))] = \
            draw(st.sampled_from(WEIRD))
    return doc


@st.composite
def mutated(draw: st.DrawFn, valid: bytes, kind: str = "json") -> tuple[str, bytes]:
    """``(mutation, bytes)``: a damaged copy of ``valid`` (``kind``: json, jsonl or bytes)."""
    choices = ["truncate", "flip", "insert", "delete", "utf8", "empty", "bomb", "valid"]
    if kind in ("json", "jsonl"):
        choices += ["structure"] * 6
    if kind == "jsonl":
        choices += ["lines"]
    how = draw(st.sampled_from(choices))
    size = len(valid)
    at = draw(st.integers(0, max(size - 1, 0)))
    if how == "truncate":
        return how, valid[:at]
    if how == "flip":
        data = bytearray(valid)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, size - 1))
            data[i] ^= draw(st.integers(1, 255))
        return how, bytes(data)
    if how == "insert":
        return how, valid[:at] + draw(st.binary(min_size=1, max_size=16)) + valid[at:]
    if how == "delete":
        return how, valid[:at] + valid[at + draw(st.integers(1, 64)):]
    if how == "utf8":
        return how, valid[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])) + valid[at:]
    if how == "empty":
        return how, draw(st.sampled_from([b"", b"\n", b"   ", b"\x00" * 64]))
    if how == "bomb":
        if kind == "jsonl":
            lines = valid.split(b"\n")
            lines[draw(st.integers(0, len(lines) - 1))] = BOMB
            return how, b"\n".join(lines)
        return how, valid[:at] + BOMB + valid[at:]
    if how == "valid":
        return how, valid
    if how == "lines":
        lines = [line for line in valid.split(b"\n") if line]
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["dup", "swap", "drop", "blank"]))
        if op == "dup":
            lines.insert(j, lines[i])
        elif op == "swap":
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "drop":
            del lines[i]
        else:
            lines.insert(i, b"   ")
        return f"lines-{op}", b"\n".join(lines) + b"\n"
    # structure: a wrong type / missing key / extra key at a random field path
    if kind == "jsonl":
        lines = valid.decode("utf-8").split("\n")
        numbered = [i for i, line in enumerate(lines) if line.strip()]
        i = draw(st.sampled_from(numbered))
        lines[i] = _dump(draw(_structural(json.loads(lines[i]))))
        return how, "\n".join(lines).encode("utf-8", "surrogatepass")
    return how, _dump(draw(_structural(json.loads(valid)))).encode("utf-8", "surrogatepass")


# -- file-system fixed cases ------------------------------------------------------------

def special_paths(tmp: Path, valid: bytes, name: str) -> list[tuple[str, Path]]:
    """A directory, an unreadable file (not as root) and a symlink loop, each at a path
    named like the real file."""
    cases = []
    folder = tmp / "special-dir" / name
    folder.mkdir(parents=True)
    cases.append(("directory", folder))
    if os.geteuid() != 0:
        locked = tmp / "special-locked" / name
        locked.parent.mkdir()
        locked.write_bytes(valid)
        locked.chmod(0)
        cases.append(("unreadable", locked))
    loop = tmp / "special-loop" / name
    loop.parent.mkdir()
    os.symlink(loop.parent / "other", loop)
    os.symlink(loop, loop.parent / "other")
    cases.append(("symlink loop", loop))
    return cases


def fingerprint(folder: Path) -> dict[str, tuple[int, str]]:
    """Every entry under ``folder``: (mtime_ns, sha256 or kind)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                digest = "unreadable"
        else:
            digest = "link" if stat.S_ISLNK(info.st_mode) else "dir"
        found[str(path.relative_to(folder))] = (info.st_mtime_ns, digest)
    return found


def rows_of(mem: UnifiedMemory) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the memory's file (derived tables too)."""
    storage = internals(mem).storage
    catalog = ("SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema()" if storage.dialect.postgres
               else "SELECT name FROM sqlite_master WHERE type = 'table'")
    names = [r["name"] for r in storage.query(catalog)]
    return {name: sorted(map(repr, storage.execute(f'SELECT * FROM "{name}"').fetchall())) for name in names}


def stored(mem: UnifiedMemory) -> dict[str, list[tuple[Any, ...]]]:
    """The user tables' rows, without the ``ingested`` table that ``ingest`` creates empty."""
    return {k: v for k, v in rows_of(mem).items() if k != "ingested" or v}


def exercise(mem: UnifiedMemory, users: list[str]) -> None:
    """Read back what an accepted file stored, as a user would."""
    for user in users or [mem.user_id]:
        view = mem.scoped(user_id=user)
        view.facts()
        view.episodes()
        view.recall("Lisbon bees sister")
        view.entities()
        view.context("Where do I live?")


@pytest.fixture(autouse=True)
def _in_a_scratch_directory(tmp_path_factory, monkeypatch) -> None:
    """A file naming a relative path (a state's ``log_base_path``) writes under a scratch directory."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))


# -- import_jsonl ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def export_bytes() -> bytes:
    with UnifiedMemory(user_id="ada") as mem:
        mem.remember("I live in Lisbon and my sister Eva works at Google", metadata={"src": "chat"})
        mem.add_messages([{"role": "user", "content": "I keep bees"},
                          {"role": "assistant", "content": "Nice!", "metadata": {"k": [1, 2]}}])
        out = io.StringIO()
        mem.export_jsonl(out)
    return out.getvalue().encode("utf-8")


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_import_jsonl_refuses_bad_exports_whole(tmp_path_factory, export_bytes, data) -> None:
    how, body = data.draw(mutated(export_bytes, "jsonl"), label="mutation")
    folder = tmp_path_factory.mktemp("import")
    source = folder / "export.jsonl"
    source.write_bytes(body)
    with UnifiedMemory(user_id="bob") as mem:
        mem.remember("Bob already knows this")
        before = rows_of(mem)
        count = outcome("UnifiedMemory.import_jsonl", lambda: mem.import_jsonl(source),
                        names=str(source), json_line=first_bad_line(body))
        if count is None:
            assert rows_of(mem) == before, f"{how}: a refused import wrote rows"
        else:
            outcome("UnifiedMemory (after import_jsonl)", lambda: exercise(mem, ["ada", "bob"]), names=str(source), tally=False)


@pytest.mark.parametrize("where", ["text", "metadata"])
def test_import_jsonl_refuses_a_nul_in_text_or_in_json_naming_the_line(tmp_path, export_bytes, where) -> None:
    """Every store refuses a NUL character in text and inside JSON (PostgreSQL can hold neither):
    an export that holds one (written by hand, or by a version that let it through) is refused
    whole, naming the file, the line, the column and the row."""
    lines = export_bytes.decode("utf-8").splitlines()
    number = next(n for n, line in enumerate(lines, start=1) if '"kind":"facts"' in line)
    row = json.loads(lines[number - 1])
    if where == "text":
        row["row"]["text"] = "I live in Lis\x00bon"
    else:
        row["row"]["metadata"] = json.dumps({"src": "ch\x00at"})
    lines[number - 1] = json.dumps(row)
    source = tmp_path / "export.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with UnifiedMemory(user_id="bob") as mem:
        mem.remember("Bob already knows this")
        before = rows_of(mem)
        with pytest.raises(MemoryValueError) as caught:
            mem.import_jsonl(source)
        message = str(caught.value)
        assert caught.value.field == "source" and f"{source}, line {number}" in message
        assert f"facts.{where}" in message and row["row"]["id"] in message and "NUL" in message
        assert rows_of(mem) == before


# -- ingest ----------------------------------------------------------------------------

_OPENAI = [{"role": "system", "content": "be brief"},
           {"role": "user", "content": [{"type": "text", "text": "I live in Lisbon"},
                                        {"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
            "created_at": "2024-05-01T10:00:00Z", "metadata": {"k": 1}},
           {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
           {"role": "tool", "tool_call_id": "c1", "content": "ok", "timestamp": 1714557600}]
_CHATS = {
    "chat.json": json.dumps(_OPENAI, indent=1),
    "chats.json": json.dumps([{"id": "c1", "user_id": "ada", "messages": _OPENAI},
                              {"session_id": "s2", "messages": _OPENAI[1:2]}]),
    "chat.jsonl": "\n".join(json.dumps({**m, "conversation_id": f"c{i % 2}", "user_id": "ada"})
                            for i, m in enumerate(_OPENAI)) + "\n",
    "locomo.json": json.dumps([{"sample_id": "s1", "conversation": {
        "speaker_a": "Ada", "speaker_b": "Bo", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ada", "text": "I keep bees", "dia_id": "D1:1"},
                      {"speaker": "Bo", "text": "Nice", "blip_caption": "a photo of bees", "img_url": ["u"]}],
        "session_2": [{"speaker": "Bo", "text": "Hello"}]}}], indent=1),
}


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(_CHATS)))
def test_ingest_refuses_bad_chat_files_whole(tmp_path_factory, data, name) -> None:
    valid = _CHATS[name].encode("utf-8")
    kind = "jsonl" if name.endswith(".jsonl") else "json"
    how, body = data.draw(mutated(valid, kind), label="mutation")
    source = tmp_path_factory.mktemp("ingest") / name
    source.write_bytes(body)
    line = first_bad_line(body) if kind == "jsonl" else json_error_line(body)
    with UnifiedMemory(user_id="bob") as mem:
        mem.remember("Bob already knows this")
        before = stored(mem)
        report = outcome("UnifiedMemory.ingest", lambda: mem.ingest(source), names=str(source), json_line=line,
                         any_line=kind == "json")
        if report is None:
            assert stored(mem) == before, f"{how}: a refused ingest wrote rows"
        else:
            outcome("UnifiedMemory (after ingest)", lambda: exercise(mem, report.users), names=str(source), tally=False)


# -- fixed file-system cases for every path reader ------------------------------------

def test_path_readers_refuse_special_files(tmp_path, export_bytes) -> None:
    from tiers.sessions import JSONConversationStore
    from unified_memory import Conversation
    from unified_memory.compat._marsys_kg import MemoryManager
    from unified_memory.conversation.strategies import load_strategies

    for what, path in special_paths(tmp_path, export_bytes, "file.jsonl"):
        with UnifiedMemory() as mem:
            outcome(f"import_jsonl ({what})", lambda p=path: mem.import_jsonl(p), names=str(path))
            outcome(f"ingest ({what})", lambda p=path: mem.ingest(p), names=str(path))
        outcome(f"load_strategies ({what})", lambda p=path: load_strategies(p), names=str(path))
        outcome(f"MemoryManager.load_from_file ({what})", lambda p=path: MemoryManager().load_from_file(p),
                names=str(path))
        before = fingerprint(tmp_path)
        outcome(f"UnifiedMemory(path) ({what})", lambda p=path: UnifiedMemory(p).close(), names=str(path))
        assert fingerprint(tmp_path) == before
    # a conversation log / a session file that is a directory, unreadable or a loop
    for what, path in special_paths(tmp_path / "logs", b'{"type":"reset","v":1}\n', "s1.jsonl"):
        before = fingerprint(path.parent)
        outcome(f"Conversation.restore_from_log ({what})",
                lambda p=path: Conversation.restore_from_log("s1", str(p.parent)), names=str(path))
        assert fingerprint(path.parent) == before
    store = JSONConversationStore(tmp_path / "store")
    target = store.path("s1")
    target.parent.mkdir(parents=True)
    for what, path in special_paths(tmp_path / "sessions", b"{}", "s1.json"):
        if target.exists() or target.is_symlink():
            target.unlink() if not target.is_dir() or target.is_symlink() else target.rmdir()
        os.symlink(path, target) if what != "directory" else target.mkdir()
        before = fingerprint(tmp_path / "store")
        outcome(f"JSONConversationStore.load ({what})", lambda: store.load("s1"), names=str(target))
        outcome(f"JSONConversationStore.list ({what})", lambda: store.list(), names=str(target))
        assert fingerprint(tmp_path / "store") == before


# -- the MARSYS compat facade's saved memories ----------------------------------------

@pytest.fixture(scope="module")
def marsys_files(tmp_path_factory) -> dict[str, bytes]:
    from unified_memory.compat.marsys import MemoryManager

    folder = tmp_path_factory.mktemp("marsys")
    files = {}
    for kind in ("conversation_history", "kg"):
        manager = MemoryManager(memory_type=kind, description="System prompt")
        manager.add(role="user", content="My sister Maria lives in Lisbon.")
        manager.add(role="assistant", content={"answer": [1, 2]})
        target = folder / f"{kind}.json"
        manager.save_to_file(target, additional_state={"planning": {"step": 2}})
        files[kind] = target.read_bytes()
    return files


@FUZZ
@given(data=st.data(), kind=st.sampled_from(["conversation_history", "kg"]))
def test_marsys_load_from_file_refuses_bad_files_whole(tmp_path_factory, marsys_files, data, kind) -> None:
    from unified_memory.compat.marsys import MemoryManager

    how, body = data.draw(mutated(marsys_files[kind]), label="mutation")
    source = tmp_path_factory.mktemp("marsys-load") / "memory.json"
    source.write_bytes(body)
    manager = MemoryManager(memory_type=kind, description="Kept")
    manager.add(role="user", content="I keep bees")
    before = (manager.get_messages(), manager.facts() if kind == "kg" else None)
    folder = fingerprint(source.parent)
    state = outcome("MemoryManager.load_from_file", lambda: manager.load_from_file(source), names=str(source),
                    json_line=json_error_line(body), any_line=True)
    assert fingerprint(source.parent) == folder, f"{how}: loading changed the folder"
    if state is None:
        assert (manager.get_messages(), manager.facts() if kind == "kg" else None) == before, \
            f"{how}: a refused file was half-loaded"
    else:
        outcome("MemoryManager (after load_from_file)", lambda: (manager.get_messages(), manager.retrieve_all()),
                names=str(source), tally=False)


# -- strategy configs -------------------------------------------------------------------

_STRATEGIES = {
    "strategies.json": json.dumps({
        "short_term": {"memory_strategy_id": "max_tokens", "memory_max_tokens": 8000,
                       "conditions": ["message.role != 'system'"]},
        "long_term": {"long_term_memory_id": "summarizer", "cod_max_loops": 2, "interaction_keep": 3}}, indent=2),
    "short.json": json.dumps({"memory_strategy_id": "max_messages", "memory_max_messages": 20}, indent=2),
    "long.json": json.dumps({"long_term_memory_id": "neuralyzer", "interaction_keep": 5}, indent=2),
}


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(_STRATEGIES)))
def test_strategy_loaders_refuse_bad_config_files(tmp_path_factory, data, name) -> None:
    from unified_memory.conversation.strategies import (
        load_long_term_strategy,
        load_short_term_strategy,
        load_strategies,
    )

    loader = {"strategies.json": load_strategies, "short.json": load_short_term_strategy,
              "long.json": load_long_term_strategy}[name]
    how, body = data.draw(mutated(_STRATEGIES[name].encode()), label="mutation")
    source = tmp_path_factory.mktemp("strategy") / name
    source.write_bytes(body)
    outcome(loader.__name__, lambda: loader(source), names=str(source), json_line=json_error_line(body), any_line=True)
    try:  # the same document given as JSON text: errors name the field, never escape
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return
    outcome(f"{loader.__name__} (text)", lambda: loader(text), names=["source", "strategy", "short_term",
                                                                      "long_term", "memory_", "conditions",
                                                                      "interaction", "cod_", ":"], tally=False)


# -- conversation stores ------------------------------------------------------------------

@pytest.fixture(scope="module")
def session_file(tmp_path_factory) -> bytes:
    from tiers.sessions import JSONConversationStore
    from unified_memory import Conversation

    store = JSONConversationStore(tmp_path_factory.mktemp("session-valid"))
    conv = Conversation(session_id="s1", system_prompt="be brief")
    conv.add(role="user", content="I keep bees")
    conv.add(role="assistant", content="Nice!", metadata={"k": [1, 2.5]})
    conv.save(store)
    return store.path("s1").read_bytes()


@FUZZ
@given(data=st.data())
def test_json_session_store_refuses_bad_files_untouched(tmp_path_factory, session_file, data) -> None:
    from tiers.sessions import JSONConversationStore
    from unified_memory import Conversation

    how, body = data.draw(mutated(session_file), label="mutation")
    store = JSONConversationStore(tmp_path_factory.mktemp("sessions"), clock=lambda: 1.0)
    target = store.path("s1")
    target.parent.mkdir(parents=True)
    target.write_bytes(body)
    before = fingerprint(store.directory)
    loaded = outcome("JSONConversationStore.load", lambda: [store.load("s1")], names=str(target))
    if loaded is None:
        assert fingerprint(store.directory) == before, f"{how}: a refused session file was changed or removed"
    elif loaded[0] is not None:  # None: expired (the file is removed, as documented)
        outcome("Conversation.load (JSON store)", lambda: Conversation.load(store, "s1"), names=FIELD, tally=False)
    listed = outcome("JSONConversationStore.list", lambda: store.list(), names=str(target), tally=False)
    if listed is None:
        assert fingerprint(store.directory) == before, f"{how}: a refused session file was changed or removed"


@FUZZ
@given(data=st.data())
def test_sqlite_session_rows_with_bad_json_are_refused(tmp_path_factory, session_file, data) -> None:
    from tiers.sessions import SQLiteConversationStore
    from unified_memory import Conversation

    state_text = json.dumps(json.loads(session_file)["state"]).encode()
    how, body = data.draw(mutated(state_text), label="mutation")
    db = tmp_path_factory.mktemp("sqlite-sessions") / "sessions.db"
    with SQLiteConversationStore(db) as store:
        store.save("s1", {"summary": None, "messages": []})
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        value: Any = body
        with contextlib.suppress(UnicodeDecodeError):
            value = body.decode("utf-8")
        conn.execute("UPDATE conversation_sessions SET state = ?", [value])
    with SQLiteConversationStore(db) as store:
        state = outcome("SQLiteConversationStore.load", lambda: store.load("s1"), names=str(db))
        if state is not None:
            outcome("Conversation.load (SQLite store)", lambda: Conversation.load(store, "s1"), names=FIELD, tally=False)


# -- the conversation log ---------------------------------------------------------------

@pytest.fixture(scope="module")
def log_file(tmp_path_factory) -> bytes:
    from unified_memory import Conversation

    folder = tmp_path_factory.mktemp("log-valid")
    conv = Conversation(session_id="s1", log_base_path=str(folder), system_prompt="be brief")
    first = conv.add(role="user", content="I keep bees")
    conv.add(role="assistant", content="Nice!", metadata={"k": 1})
    conv.update(first, content="I keep bees and wasps")
    conv.set_summary("bees")
    conv.remove(first)
    conv.add(role="user", content="é" * 3)
    conv.reset()
    conv.add(role="user", content="again")
    return (folder / "s1.jsonl").read_bytes()


@FUZZ
@given(data=st.data())
def test_conversation_log_refuses_bad_lines_untouched(tmp_path_factory, log_file, data) -> None:
    from unified_memory import Conversation
    from unified_memory.conversation.log import ConversationLog

    how, body = data.draw(mutated(log_file, "jsonl"), label="mutation")
    folder = tmp_path_factory.mktemp("log")
    path = folder / "s1.jsonl"
    path.write_bytes(body)
    before = fingerprint(folder)
    bad = first_bad_line(body)
    torn = bad is not None and bad == len(body.split(b"\n")) and not body.endswith(b"\n")
    conv = outcome("Conversation.restore_from_log", lambda: Conversation.restore_from_log("s1", str(folder)),
                   names=str(path), json_line=None if torn else bad)
    assert fingerprint(folder) == before, f"{how}: reading the log changed it"
    if conv is not None:
        outcome("Conversation (after restore_from_log)", lambda: (conv.context(), conv.to_dict()), names=str(path), tally=False)
    # appending cuts a torn last line at most: every complete line stays as it was
    log = ConversationLog(folder, "s1")
    if outcome("ConversationLog.append", lambda: log.append({"type": "summary", "summary": "x"}) or True,
               names=str(path), tally=False) is None and fingerprint(folder) != before:
        pytest.fail(f"{how}: a refused append changed the log")
    kept = body[:body.rfind(b"\n") + 1]
    assert path.read_bytes().startswith(kept), f"{how}: appending rewrote complete lines of the log"


# -- lexical index snapshots ----------------------------------------------------------

@pytest.fixture(scope="module")
def snapshot_parts() -> tuple[bytes, bytes]:
    from scoring.lexical import LexicalIndex
    from tiers.indexes import snapshots

    index = LexicalIndex()
    index.add_many([(f"f{i}", f"I keep {i} bees in Lisbon, café {i % 3}") for i in range(12)])
    index.remove("f3")
    header, blob = snapshots.encode(index.state())
    return header.encode("utf-8"), blob


@FUZZ
@given(data=st.data(), part=st.sampled_from(["header", "arrays"]))
def test_damaged_index_snapshots_are_ignored(snapshot_parts, data, part) -> None:
    """A damaged snapshot is not used (the index is rebuilt from the store), never a crash."""
    from scoring.lexical import LexicalIndex
    from tiers.indexes import snapshots
    from tiers.storage.backend import Storage

    header, blob = snapshot_parts
    how, body = data.draw(mutated(header if part == "header" else blob, "json" if part == "header" else "bytes"),
                          label="mutation")
    value: Any = body
    if part == "header":
        with contextlib.suppress(UnicodeDecodeError):
            value = body.decode("utf-8")
    storage = Storage(None)
    with storage.atomic():
        storage.execute("INSERT INTO index_snapshots (user_id, kind, head, header, arrays) VALUES (?, ?, ?, ?, ?)",
                        ["ada", "facts", 0, value if part == "header" else header.decode(),
                         blob if part == "header" else value])
    READERS.add("tiers.indexes.snapshots.load")
    TALLY["inputs"] += 1
    try:
        found = snapshots.load(storage, "ada", "facts")
        if found is None:
            TALLY["refused"] += 1
            return
        try:  # what tiers.indexes.partitions does with it
            index = LexicalIndex.from_state(found[0])
        except ValueError:
            TALLY["refused"] += 1
            return
        index.search("bees Lisbon café")
        index.add_many([("new", "bees again")])
        index.remove("f1")
        index.search("bees")
        TALLY["accepted"] += 1
    except BaseException as exc:  # noqa: BLE001
        pytest.fail(f"snapshot ({how} {part}): {type(exc).__name__} escaped: {exc!r:.300}\n"
                    + "".join(traceback.format_exception(exc))[-2000:])


# -- the token-count cache -----------------------------------------------------------------

@FUZZ
@given(body=st.binary(max_size=4096) | st.sampled_from([b"", b"\x00" * 100, b"cl100k " * 50]))
def test_corrupt_tiktoken_cache_is_refused_not_used(tmp_path_factory, monkeypatch, body) -> None:
    import tiktoken.registry

    from unified_memory.errors import DependencyError
    from unified_memory.retrieval import tokens

    encoding = next((e for e in ("r50k_base", "p50k_base", "gpt2") if e not in tiktoken.registry.ENCODINGS), None)
    if encoding is None:
        pytest.skip("every encoding is already loaded in this process")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("tiktoken")))
    paths = [Path(p) for p in tokens.tiktoken_cache_paths(encoding)]
    for path in paths:
        path.write_bytes(body)
    before = fingerprint(paths[0].parent)
    reason = tokens.tiktoken_unavailable_reason(encoding)
    assert reason is not None and str(paths[0]) in reason
    assert tokens.make_token_counter("auto", encoding)("hello world") >= 1
    outcome("make_token_counter (corrupt tiktoken cache)", lambda: tokens.make_token_counter("tiktoken", encoding),
            names=str(paths[0]))
    assert fingerprint(paths[0].parent) == before
    with pytest.raises(DependencyError):
        tokens.make_token_counter("tiktoken", encoding)


def test_tiktoken_cache_special_files(tmp_path, monkeypatch) -> None:
    from unified_memory.retrieval import tokens

    for what, path in special_paths(tmp_path, b"x", "cache"):
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(path.parent))
        for target in tokens.tiktoken_cache_paths("r50k_base"):
            if what == "directory":
                Path(target).mkdir(exist_ok=True)
            elif not os.path.lexists(target):
                os.symlink(path, target)
        before = fingerprint(path.parent)
        assert tokens.make_token_counter("auto", "r50k_base")("hi") >= 1, what
        outcome(f"make_token_counter ({what})", lambda: tokens.make_token_counter("tiktoken", "r50k_base"),
                names=str(path.parent))
        assert fingerprint(path.parent) == before


# -- the SQLite memory file --------------------------------------------------------------

@pytest.fixture(scope="module")
def memory_db(tmp_path_factory) -> bytes:
    path = tmp_path_factory.mktemp("db-valid") / "memory.db"
    with UnifiedMemory(path, user_id="ada") as mem:
        mem.remember("I live in Lisbon and my sister Eva works at Google")
        mem.add_messages([{"role": "user", "content": "I keep bees " * 50}, {"role": "assistant", "content": "Nice!"}])
        for i in range(30):
            mem.remember(f"Fact number {i}: I like colour {i} " + "x" * 200)
        internals(mem).storage.checkpoint()
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return path.read_bytes()


def _open_and_use(path: Path) -> None:
    with UnifiedMemory(path, user_id="ada") as mem:
        exercise(mem, ["ada"])
        mem.remember("I also keep wasps")
        mem.export_jsonl(io.StringIO())


@pytest.mark.sqlite_only  # the bytes of a SQLite file (PostgreSQL: tests/tiers/test_pg_schema.py)
@FUZZ
@given(data=st.data())
def test_damaged_memory_files_are_refused_untouched(tmp_path_factory, memory_db, data) -> None:
    how, body = data.draw(mutated(memory_db, "bytes"), label="mutation")
    folder = tmp_path_factory.mktemp("db")
    path = folder / "memory.db"
    path.write_bytes(body)
    before = fingerprint(folder)
    opened = outcome("UnifiedMemory(path)", lambda: UnifiedMemory(path, user_id="ada"), names=str(path))
    if opened is None:
        assert fingerprint(folder)["memory.db"] == before["memory.db"], f"{how}: a refused memory file was changed"
        after = fingerprint(folder)  # the refusing UnifiedMemory closed its connection: no -wal / -shm left
        assert after == before, f"{how}: a refused memory file was changed, or siblings left: {before} -> {after}"
        return
    with opened:
        outcome("UnifiedMemory (a damaged file that opened)", lambda: exercise(opened, ["ada"]), names=str(path), tally=False)


def _sqlite_file(path: Path, *statements: str) -> Path:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        for statement in statements:
            conn.execute(statement)
    return path


@pytest.mark.sqlite_only  # SQLite files (PostgreSQL's foreign and newer schemas: tests/tiers/test_pg_schema.py)
def test_foreign_and_newer_memory_files_are_refused_untouched(tmp_path, memory_db) -> None:
    """Fixed cases: not SQLite, another application's database, a newer or unreadable schema
    version, a WAL of garbage, every truncation length class."""
    import random

    rng = random.Random(8)
    cases: dict[str, Callable[[Path], Any]] = {
        "random bytes": lambda p: p.write_bytes(rng.randbytes(8192)),
        "text named memory.db": lambda p: p.write_text("my notes: buy milk\n"),
        "json named memory.db": lambda p: p.write_text('{"kind": "header"}\n'),
        "sqlite magic only": lambda p: p.write_bytes(b"SQLite format 3\x00"),
        "header of 100 bytes": lambda p: p.write_bytes(memory_db[:100]),
        "first page": lambda p: p.write_bytes(memory_db[:4096]),
        "half the file": lambda p: p.write_bytes(memory_db[:len(memory_db) // 2]),
        "all but one byte": lambda p: p.write_bytes(memory_db[:-1]),
        "another application": lambda p: _sqlite_file(p, "CREATE TABLE invoices (id INTEGER, total REAL)"),
        "a meta table of another application": lambda p: _sqlite_file(
            p, "CREATE TABLE meta (key TEXT, value TEXT)", "CREATE TABLE orders (id INTEGER)"),
        "newer schema": lambda p: (p.write_bytes(memory_db),
                                   _sqlite_file(p, "UPDATE meta SET value = '999' WHERE key = 'schema_version'")),
        "schema version not a number": lambda p: (
            p.write_bytes(memory_db), _sqlite_file(p, "UPDATE meta SET value = 'one' WHERE key = 'schema_version'")),
        "no schema version": lambda p: (
            p.write_bytes(memory_db), _sqlite_file(p, "DELETE FROM meta WHERE key = 'schema_version'")),
        "application_id of another application": lambda p: (
            p.write_bytes(memory_db), _sqlite_file(p, "PRAGMA application_id = 1234",
                                                   "CREATE TABLE other_app (x)", "DROP TABLE meta")),
    }
    for what, make in cases.items():
        folder = tmp_path / what.replace(" ", "-")
        folder.mkdir()
        path = folder / "memory.db"
        make(path)
        before = fingerprint(folder)
        opened = outcome(f"UnifiedMemory(path) ({what})", lambda p=path: _open_and_use(p) or True, names=str(path))
        if opened is None:
            assert fingerprint(folder) == before, f"{what}: a refused memory file was changed"
    # a write-ahead log of garbage next to a valid file: SQLite ignores the frames it cannot verify
    folder = tmp_path / "garbage-wal"
    folder.mkdir()
    path = folder / "memory.db"
    path.write_bytes(memory_db)
    Path(f"{path}-wal").write_bytes(rng.randbytes(32 * 1024))
    outcome("UnifiedMemory(path) (a WAL of garbage)", lambda: _open_and_use(path) or True, names=str(path))
    with UnifiedMemory(path, user_id="ada") as mem:
        assert any("Lisbon" in f.text for f in mem.facts()), "the valid database was lost to a garbage WAL"


def _corrupt_table(path: Path, table: str) -> None:
    """Overwrite the root page of ``table`` with garbage (the schema stays readable)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", [table]).fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with open(path, "r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(b"\xa5" * size)


@pytest.mark.sqlite_only  # a SQLite file's pages and its -wal / -shm
def test_refused_memory_file_leaves_no_wal_behind(tmp_path, memory_db) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(memory_db)
    _corrupt_table(path, "sqlite_sequence")
    before = fingerprint(tmp_path)
    assert outcome("UnifiedMemory(path) (a damaged sqlite_sequence)", lambda: UnifiedMemory(path),
                   names=str(path), tally=False) is None
    assert fingerprint(tmp_path) == before, "the refused file's connection is still open (-wal / -shm left)"


@pytest.mark.slow
@pytest.mark.sqlite_only  # a SQLite file's pages
def test_damaged_tables_are_refused_or_reported(tmp_path, memory_db) -> None:
    """A damaged page in each table: opening or using the memory raises StorageError naming the file."""
    probe = tmp_path / "probe.db"
    probe.write_bytes(memory_db)
    with contextlib.closing(sqlite3.connect(probe)) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE rootpage > 1 ORDER BY name")]
    for table in tables:
        folder = tmp_path / f"damaged-{table}"
        folder.mkdir()
        path = folder / "memory.db"
        path.write_bytes(memory_db)
        _corrupt_table(path, table)
        outcome(f"UnifiedMemory(path) (damaged {table})", lambda p=path: _open_and_use(p) or True,
                names=str(path))
        gc.collect()


# -- the command line's file arguments ------------------------------------------------------

@FUZZ
@given(data=st.data(), command=st.sampled_from(["import", "ingest"]))
def test_cli_refuses_bad_input_files_cleanly(tmp_path_factory, export_bytes, data, command, capsys) -> None:
    from unified_memory.cli import main

    name, valid, kind = (("export.jsonl", export_bytes, "jsonl") if command == "import"
                         else ("chat.jsonl", _CHATS["chat.jsonl"].encode(), "jsonl"))
    how, body = data.draw(mutated(valid, kind), label="mutation")
    folder = tmp_path_factory.mktemp("cli")
    source = folder / name
    source.write_bytes(body)
    db = folder / "memory.db"
    READERS.add(f"unified-memory {command}")
    TALLY["inputs"] += 1
    capsys.readouterr()
    code = main(["--db", str(db), command, str(source)])
    err = capsys.readouterr().err
    assert code in (0, 1), f"{how}: exit status {code}: {err}"
    assert "unexpected" not in err and "Traceback" not in err, f"{how}: {err}"
    if code == 0:
        TALLY["accepted"] += 1
        return
    TALLY["refused"] += 1
    assert str(source) in err, f"{how}: the error does not name the file: {err!r}"
    assert not db.exists() and not Path(f"{db}-wal").exists(), f"{how}: a refused {command} left a memory file"


def test_cli_refuses_special_and_missing_files(tmp_path, capsys) -> None:
    from unified_memory.cli import main

    db = tmp_path / "memory.db"
    for what, path in [("missing", tmp_path / "nope.jsonl"), *special_paths(tmp_path, b"{}", "in.jsonl")]:
        for command in ("import", "ingest"):
            capsys.readouterr()
            code = main(["--db", str(db), command, str(path)])
            err = capsys.readouterr().err
            assert code == 1 and str(path) in err and "unexpected" not in err, (what, command, err)
            assert not db.exists(), (what, command)


@pytest.mark.sqlite_only  # a --db file that is not SQLite
def test_cli_refuses_a_db_that_is_not_a_memory_file(tmp_path, capsys) -> None:
    """A --db that is not a memory file is refused and left as it was."""
    from unified_memory.cli import main

    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    chat = tmp_path / "chat.json"
    chat.write_text(_CHATS["chat.json"])
    before = fingerprint(tmp_path)
    code = main(["--db", str(notes), "ingest", str(chat)])
    err = capsys.readouterr().err
    assert code == 1 and str(notes) in err and "unexpected" not in err, err
    assert fingerprint(tmp_path) == before


@pytest.mark.slow
@pytest.mark.sqlite_only  # the bytes of a SQLite file
def test_cli_refuses_damaged_memory_files_untouched(tmp_path, memory_db, export_bytes, capsys) -> None:
    from unified_memory.cli import main

    export = tmp_path / "export.jsonl"
    export.write_bytes(export_bytes)
    damaged = {"random bytes": os.urandom(4096), "truncated": memory_db[:len(memory_db) // 3],
               "a JSON file": b'{"kind": "header"}\n'}
    for what, body in damaged.items():
        folder = tmp_path / what.replace(" ", "-")
        folder.mkdir()
        db = folder / "memory.db"
        db.write_bytes(body)
        before = fingerprint(folder)
        for argv in (["facts"], ["recall", "Lisbon"], ["export", "-"], ["import", str(export)],
                     ["forget", "--user", "ada", "--yes"]):
            READERS.add(f"unified-memory --db {argv[0]}")
            TALLY["inputs"] += 1
            capsys.readouterr()
            code = main(["--db", str(db), *argv])
            err = capsys.readouterr().err
            assert code == 1 and "unexpected" not in err and str(db) in err, (what, argv, err)
            TALLY["refused"] += 1
            gc.collect()
            assert fingerprint(folder) == before, (what, argv)


# -- fixes pending in files another change is editing -------------------------------------

def test_import_jsonl_recursion_bomb_on_an_ingested_line(tmp_path, export_bytes) -> None:
    source = tmp_path / "export.jsonl"
    source.write_bytes(export_bytes + BOMB + b'"ingested"\n')
    with UnifiedMemory() as mem:
        outcome("UnifiedMemory.import_jsonl (bomb on an ingested line)", lambda: mem.import_jsonl(source),
                names=str(source), json_line=first_bad_line(source.read_bytes()), tally=False)


def test_import_jsonl_list_line_mentioning_ingested(tmp_path, export_bytes) -> None:
    source = tmp_path / "export.jsonl"
    source.write_bytes(b'["ingested"]\n' + export_bytes)
    with UnifiedMemory() as mem:
        outcome("UnifiedMemory.import_jsonl (a list line mentioning ingested)", lambda: mem.import_jsonl(source),
                names=str(source), tally=False)


# -- the figures ----------------------------------------------------------------------------

def test_zz_report_figures(figures) -> None:
    """Runs last in this module: what the fuzzers above tried."""
    if not TALLY:
        pytest.skip("no fuzzer ran")
    figures("bad input files", readers=len(READERS), mutations=TALLY["inputs"], refused=TALLY["refused"],
            accepted=TALLY["accepted"])
