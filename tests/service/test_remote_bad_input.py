"""Bad input through RemoteMemory (the counterpart, for the HTTP client, of
tests/reliability/test_bad_input_api.py, which leaves RemoteMemory to this file because it
needs a running service): hypothesis mixes valid arguments with wrong types and values for
every public method. The contract: the call succeeds, or raises one of the library's caller
errors (``ValueError`` / ``TypeError``; a ``PermissionDeniedError`` only for a ``user_id``
the key does not grant) whose ``field`` is set, names one of the method's arguments and
appears in the message; never an httpx, pydantic or bare Python error; and a call that
raises wrote nothing on the server (the user's export is unchanged)."""

from __future__ import annotations

import inspect
import io
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unified_memory import PermissionDeniedError, RemoteMemory, StorageError, UnifiedMemoryError
from unified_memory.coordinator.async_api import ASYNC_TWINS

SETTINGS = dict(deadline=None, database=None, max_examples=20,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.filter_too_much])


class _Thing:
    def __repr__(self) -> str:
        return "<thing>"


WEIRD = ["", " ", "\x00", "a\x00b", "\ud800", "\x1b[31m", "x" * 300, "bogus", "../x", "a/b", "2023-13-45", "NaN"]
JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.sampled_from([0, -1, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.binary(max_size=4),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.text(max_size=3), st.one_of(st.none(), st.integers(), st.floats()), max_size=2),
    st.builds(_Thing), st.just({1, 2}), st.sampled_from(WEIRD), st.text(max_size=8),
    st.sampled_from([datetime(1, 1, 1), datetime(9999, 12, 31, tzinfo=UTC), 1e300]),
)
NOT_NONE = JUNK.filter(lambda v: v is not None)
TEXTS = st.sampled_from(["I live in Lisbon", "I keep bees", "Maria works at Acme", "hello there"])
MOMENTS = st.sampled_from([None, datetime(2024, 1, 2, tzinfo=UTC), "2024-02-29", 1.7e9])
METADATA = st.sampled_from([None, {}, {"topic": "x"}])
FLAG = st.sampled_from([None, True, False])
BOOL = st.booleans()
LIMITS = st.integers(1, 20)
OPTIONAL_LIMIT = st.one_of(st.none(), LIMITS)
MESSAGES = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": TEXTS}),
                    min_size=1, max_size=3)

# method -> (valid strategies per argument, junk overrides, argument names an error may also give)
SPECS: dict[str, tuple[dict[str, Any], dict[str, Any], set[str]]] = {
    "add_turn": (dict(user=TEXTS, assistant=st.one_of(st.none(), TEXTS), when=MOMENTS, metadata=METADATA,
                      extract=FLAG), {}, set()),
    "add_message": (dict(role=st.sampled_from(["user", "assistant"]), content=TEXTS,
                         name=st.sampled_from([None, "Ada"]), when=MOMENTS, metadata=METADATA, extract=FLAG), {},
                    {"message"}),
    "add_messages": (dict(messages=MESSAGES, extract=FLAG), {}, set()),
    "remember": (dict(text=TEXTS, importance=st.one_of(st.none(), st.floats(0, 1)),
                      category=st.sampled_from([None, "hobby"]), metadata=METADATA,
                      ttl_days=st.one_of(st.none(), st.integers(1, 365))), {}, set()),
    "remember_many": (dict(texts_or_facts=st.lists(st.one_of(TEXTS, st.builds(lambda t: {"text": t}, TEXTS)),
                                                   min_size=1, max_size=3)), {}, set()),
    "add_triple": (dict(subject=st.sampled_from(["Maria", "Ada"]), predicate=st.sampled_from(["works_at"]),
                        obj=st.sampled_from(["Acme", "Lisbon"]), confidence=st.floats(0, 1), metadata=METADATA), {},
                   set()),
    "recall": (dict(query=TEXTS, limit=LIMITS, tiers=st.sampled_from([None, "long_term", ["entity", "episodic"]]),
                    days=st.one_of(st.none(), st.floats(0.5, 30)), where=st.sampled_from([None, {"topic": "x"}]),
                    as_of=MOMENTS), {}, set()),
    "context": (dict(query=st.one_of(st.none(), TEXTS), max_tokens=st.one_of(st.none(), st.integers(50, 500)),
                     include_conversation=BOOL, limit=OPTIONAL_LIMIT, as_of=MOMENTS), {}, set()),
    "assemble_context": (dict(max_tokens=st.integers(50, 500), query=st.one_of(st.none(), TEXTS),
                              include_conversation=BOOL), {}, set()),
    "facts": (dict(include_archived=BOOL, include_inactive=BOOL, category=st.sampled_from([None, "hobby"]),
                   limit=OPTIONAL_LIMIT, order=st.sampled_from(["time", "importance"]), include_history=BOOL,
                   offset=st.integers(0, 3)), {}, set()),
    "count_facts": (dict(include_archived=BOOL, include_inactive=BOOL, category=st.sampled_from([None, "hobby"]),
                         include_history=BOOL), {}, set()),
    "entities": (dict(type=st.sampled_from([None, "person"]), limit=OPTIONAL_LIMIT), {}, set()),
    "triples": (dict(entity=st.sampled_from([None, "Maria"])), {}, set()),
    "episodes": (dict(days=st.one_of(st.none(), st.floats(0.5, 30)), session_id=st.sampled_from([None, "s1"]),
                      limit=OPTIONAL_LIMIT), {}, set()),
    "stats": ({}, {}, set()),
    "profile": (dict(as_of=MOMENTS), {}, set()),
    "export_jsonl": (dict(destination=st.builds(io.StringIO), all_users=st.just(False)), {}, set()),
    "import_jsonl": (dict(source=st.builds(lambda: io.StringIO("")), user_id=st.none()), {}, set()),
    # forget with valid arguments names a fact that is not there: never wipes the user under test
    "forget": (dict(user_id=st.none(), ids=st.just(["fact_not_there"])), {"ids": NOT_NONE}, set()),
    "put_item": (dict(namespace=st.sampled_from([("notes",), ["notes", "x"]]), key=st.sampled_from(["k1", "k 2"]),
                      value=st.sampled_from([{}, {"text": "hi"}, {"n": [1, {"a": None}]}]),
                      index=st.sampled_from([None, False, ["text"]]), ttl=st.sampled_from([None, 5, 0.5])), {}, set()),
    "get_item": (dict(namespace=st.sampled_from([("notes",), ["a", "b"]]), key=st.sampled_from(["k1", "none"]),
                      refresh_ttl=BOOL), {}, set()),
    # delete with valid arguments names an item that is not there
    "delete_item": (dict(namespace=st.just(("notes",)), key=st.just("not-there")), {}, set()),
    "search_items": (dict(namespace_prefix=st.sampled_from([(), ("notes",)]), query=st.one_of(st.none(), TEXTS),
                          filter=st.sampled_from([None, {"text": "hi"}, {"n": {"$gte": 1}}]), limit=LIMITS,
                          offset=st.integers(0, 3), refresh_ttl=BOOL), {}, set()),
    "item_namespaces": (dict(prefix=st.sampled_from([None, ("notes",), ("*",)]), suffix=st.sampled_from([None, ("x",)]),
                             max_depth=OPTIONAL_LIMIT, limit=LIMITS, offset=st.integers(0, 3)), {}, set()),
    "scoped": (dict(user_id=st.sampled_from([None, "fuzz"]), agent_id=st.sampled_from([None, "a1"]),
                    session_id=st.sampled_from([None, "s1"])), {}, set()),
    "report_failure": (dict(kind=st.just("agent"), error=st.just("recall: timeout")), {}, set()),
}
NOT_FUZZED = {"close": "no arguments", "users": "no arguments (an admin call; covered in test_remote)",
              "aclose": "no arguments"}


def _public(cls: type) -> set[str]:
    return {n for n, v in inspect.getmembers(cls) if not n.startswith("_") and callable(v)}


def test_every_public_method_is_fuzzed():
    methods = _public(RemoteMemory)
    twins = {ASYNC_TWINS[n] for n in ASYNC_TWINS if ASYNC_TWINS[n] in methods}
    assert methods - twins - set(SPECS) - set(NOT_FUZZED) == set()
    assert {n[1:] for n in twins} <= set(SPECS) | set(NOT_FUZZED)


@pytest.fixture(scope="module")
def fuzzed(service):
    key = service.create_key("fuzz")
    with RemoteMemory(service.url, key, user_id="fuzz") as mem:
        fact = mem.remember("I live in Lisbon", metadata={"topic": "x"})
        mem.add_turn("My sister Maria works at Acme", "Nice")
        mem.add_triple("Maria", "works_at", "Acme")
        yield mem, fact


def _export(mem: RemoteMemory) -> list[str]:
    out = io.StringIO()
    mem.export_jsonl(out)
    return sorted(out.getvalue().splitlines()[1:])


_ROOT = re.compile(r"[.\[]")


def _check(exc: BaseException, names: set[str], where: str) -> None:
    detail = f"{where}: {type(exc).__module__}.{type(exc).__name__}: {exc!s:.300}"
    assert isinstance(exc, UnifiedMemoryError), f"undocumented exception escaped: {detail}"
    if isinstance(exc, PermissionDeniedError):
        assert exc.field == "user_id" and "user_id" in names, detail
    elif isinstance(exc, StorageError):  # a path the file system refuses
        assert exc.field in ("destination", "source") and exc.field in names, f"not a caller error: {detail}"
    else:
        assert isinstance(exc, ValueError | TypeError), f"not a caller error: {detail}"
    assert exc.field and exc.field in str(exc), f"no field, or not in the message: {detail}"
    assert _ROOT.split(exc.field, maxsplit=1)[0] in names or exc.field in names, f"unknown field: {detail}"


def _run(name: str, call: Callable[..., Any], mem: RemoteMemory, data: st.DataObject, extra: set[str]) -> None:
    valid, junk, aliases = SPECS[name]
    kwargs: dict[str, Any] = {}
    for arg, strategy in valid.items():
        corrupt = data.draw(st.integers(0, 99), label=f"corrupt {arg}?") < 40
        kwargs[arg] = data.draw(junk.get(arg, JUNK) if corrupt else strategy, label=arg)
    before = _export(mem)
    try:
        result = call(**kwargs)
        if inspect.iscoroutine(result):
            import asyncio

            asyncio.run(result)
    except Exception as exc:  # noqa: BLE001
        _check(exc, set(valid) | aliases | extra, name)
        assert _export(mem) == before, f"{name} raised {type(exc).__name__} but wrote on the server"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SPECS))
def test_methods_raise_the_library_errors_and_write_nothing(name, fuzzed, tmp_path, monkeypatch):
    mem, _fact = fuzzed
    monkeypatch.chdir(tmp_path)  # a junk string as an export's destination is a file name here

    @settings(**SETTINGS)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        _run(name, getattr(mem, name), mem, data, set())

    run()


@pytest.mark.parametrize("name", ["arecall", "aremember", "aadd_turn", "afacts", "aforget", "aexport_jsonl"])
def test_async_twins_raise_the_same_errors(name, fuzzed, tmp_path, monkeypatch):
    mem, _fact = fuzzed
    monkeypatch.chdir(tmp_path)

    @settings(**{**SETTINGS, "max_examples": 10})
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        _run(name[1:], getattr(mem, name), mem, data, set())

    run()


def test_the_constructor_names_its_arguments(service):
    valid = dict(url=st.just(service.url), api_key=st.just("um_key"), user_id=st.just("fuzz"),
                 agent_id=st.none(), session_id=st.none(), timeout=st.just(5.0))

    @settings(**{**SETTINGS, "max_examples": 60})
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        kwargs = {arg: data.draw(JUNK if data.draw(st.integers(0, 99)) < 40 else strategy, label=arg)
                  for arg, strategy in valid.items()}
        try:
            RemoteMemory(**kwargs).close()
        except Exception as exc:  # noqa: BLE001
            _check(exc, set(valid), "RemoteMemory")

    run()
