"""Bad input through the HTTP service (issue 17): property-based fuzzing of every endpoint.

The endpoints are enumerated from the server's own ``/openapi.json``, so a new route cannot
be silently skipped: :data:`ENDPOINTS` must describe every operation the server documents
(and nothing else). For each one hypothesis sends requests that are valid but for one thing
(or, for the open routes, requests whose extra input must be ignored):

* a malformed body (not JSON, truncated, not UTF-8), a JSON body that is not an object,
  an empty body, a wrong ``Content-Type``, a body over the size limit (with and without
  ``Content-Length``);
* a wrong type for one field (nested ones too: ``messages[0].role``, ``facts[1].text``), an
  unknown field, NaN / Infinity / huge numbers;
* strange strings in one field: NUL, control characters, lone surrogates (``\\ud800`` in the
  JSON), bidi marks, emoji, empty and huge strings (these may be accepted);
* bad query parameters (``limit=0``, ``offset=-1``, ``limit=abc``, ``days=nan``, bad
  ``agent_id`` / ``session_id``), bad path user ids (NUL, control characters, invalid UTF-8,
  too long) and unknown fact ids (another user's included);
* no key, a malformed or unknown key, another user's key;
* for ``POST /import``: files that are not exports, damaged lines, conflicting rows.

The contract: never a 5xx; a refusal is a documented status (400 / 401 / 403 / 404 / 409 /
413 / 422, see ``unified_memory.service.errors``) with a JSON body ``{"error": {"type",
"field", "message"}}`` whose ``field`` is set for 422 and names the offending field; and a
refused request writes nothing: a digest of every table of the server's SQLite file, read
through a separate connection while the server runs, is unchanged (on PostgreSQL: of every
table of the server's database, read in one snapshot through a psycopg connection of its own). Inputs that must be
refused (wrong types, unknown fields, malformed bodies, bad keys, ...) are never accepted.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability.conftest import one_per_backend, scaled
from tests.reliability.table_digest import reader, table_digests

pytest.importorskip("fastapi", reason="the service needs the server extra")
httpx = pytest.importorskip("httpx")

from unified_memory.service.background import ServiceProcess  # noqa: E402

SETTINGS = dict(deadline=None, derandomize=False, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
MAX_BODY = 65536
DOCUMENTED = {400, 401, 403, 404, 409, 413, 422}
USER = "/v1/users/{user_id}"

# -- what each endpoint takes ----------------------------------------------------------------

MESSAGE = {"messages[0].role": "str!", "messages[0].content": "str", "messages[0].name": "str",
           "messages[0].when": "moment", "messages[0].metadata": "dict", "messages[0].tool_calls": "list",
           "messages[0].tool_call_id": "str"}
FACT = {"facts[1].text": "str!", "facts[1].importance": "float", "facts[1].category": "str",
        "facts[1].metadata": "dict", "facts[1].ttl_days": "float", "facts[0]": "fact"}


@dataclass
class Endpoint:
    """One documented operation: a valid request and the kinds of its inputs."""

    body: dict[str, Any] | None = None          # a valid JSON body (None: the route takes none)
    fields: dict[str, str] = field(default_factory=dict)   # body field path -> kind
    query: dict[str, str] = field(default_factory=dict)    # query parameter -> kind
    scoped: bool = True        # under /v1/users/{user_id}: agent_id / session_id, keys, path user ids
    admin: bool = False        # needs an admin key
    open: bool = False         # no key needed; extra input is ignored
    fact_path: bool = False    # has {fact_id}
    jsonl: bool = False        # the body is JSON Lines (import)


ENDPOINTS: dict[tuple[str, str], Endpoint] = {
    ("POST", f"{USER}/turns"): Endpoint({"user": "hello"}, {
        "user": "str!", "assistant": "str", "when": "moment", "metadata": "dict", "extract": "bool"}),
    ("POST", f"{USER}/messages"): Endpoint({"messages": [{"role": "user", "content": "hi"}]}, {
        "messages": "list!", "extract": "bool", **MESSAGE}),
    ("POST", f"{USER}/facts"): Endpoint({"text": "I keep bees"}, {
        "text": "str!", "importance": "float", "category": "str", "metadata": "dict", "ttl_days": "float"}),
    ("POST", f"{USER}/facts/batch"): Endpoint({"facts": ["I row", {"text": "I swim"}]}, {"facts": "list!", **FACT}),
    ("POST", f"{USER}/triples"): Endpoint({"subject": "Ada", "predicate": "knows", "object": "Bob"}, {
        "subject": "str!", "predicate": "str!", "object": "str!", "confidence": "float", "metadata": "dict"}),
    ("POST", f"{USER}/recall"): Endpoint({"query": "bees"}, {
        "query": "str!", "limit": "int!", "tiers": "tiers", "days": "float", "where": "dict", "as_of": "moment"}),
    ("POST", f"{USER}/context"): Endpoint({"query": "bees"}, {
        "query": "str", "max_tokens": "int", "include_conversation": "bool!", "limit": "int", "as_of": "moment"}),
    ("POST", f"{USER}/import"): Endpoint(jsonl=True),
    # a valid body names no item of the user (404, nothing deleted): the fuzzer never forgets what it reads
    ("POST", f"{USER}/forget"): Endpoint({"ids": ["fact_not_there"]}, {"ids": "list!", "ids[0]": "str"}),
    ("PUT", f"{USER}/items"): Endpoint({"namespace": ["notes"], "key": "k", "value": {"text": "hi"}}, {
        "namespace": "labels!", "key": "str!", "value": "dict!", "index": "index", "ttl": "float"}),
    ("POST", f"{USER}/items/get"): Endpoint({"namespace": ["notes"], "key": "k"}, {
        "namespace": "labels!", "key": "str!", "refresh_ttl": "bool"}),
    # a valid body names no item (nothing deleted): the fuzzer never deletes what it reads
    ("POST", f"{USER}/items/delete"): Endpoint({"namespace": ["notes"], "key": "not-there"}, {
        "namespace": "labels!", "key": "str!"}),
    ("POST", f"{USER}/items/search"): Endpoint({"namespace_prefix": ["notes"], "query": "hi"}, {
        "namespace_prefix": "labels", "query": "str", "filter": "dict", "limit": "int", "offset": "int",
        "refresh_ttl": "bool"}),
    ("POST", f"{USER}/items/namespaces"): Endpoint({"prefix": ["notes"]}, {
        "prefix": "labels", "suffix": "labels", "max_depth": "int", "limit": "int", "offset": "int"}),
    ("GET", f"{USER}/facts"): Endpoint(query={"limit": "int", "offset": "offset", "category": "str",
                                             "include_archived": "bool", "include_inactive": "bool",
                                             "include_history": "bool"}),
    ("GET", f"{USER}/entities"): Endpoint(query={"type": "str", "limit": "int"}),
    ("GET", f"{USER}/triples"): Endpoint(query={"entity": "str"}),
    ("GET", f"{USER}/episodes"): Endpoint(query={"days": "float", "session": "str", "limit": "int"}),
    ("GET", f"{USER}/profile"): Endpoint(query={"as_of": "moment"}),
    ("GET", f"{USER}/stats"): Endpoint(),
    ("GET", f"{USER}/export"): Endpoint(),
    ("DELETE", f"{USER}/facts/{{fact_id}}"): Endpoint(fact_path=True),
    # a valid correction changes nothing a later case reads (the same importance and category)
    ("PATCH", f"{USER}/facts/{{fact_id}}"): Endpoint({"importance": 0.5}, {
        "text": "str", "importance": "float", "category": "str"}, fact_path=True),
    ("GET", f"{USER}/facts/{{fact_id}}/history"): Endpoint(fact_path=True),
    ("DELETE", USER): Endpoint(),
    ("GET", "/v1/users"): Endpoint(scoped=False, admin=True),
    ("GET", "/healthz"): Endpoint(scoped=False, open=True),
    ("GET", "/readyz"): Endpoint(scoped=False, open=True),
}

# -- what bad input looks like ---------------------------------------------------------------

WEIRD = ["", " ", "\t\n", "\x00", "a\x00b", "\ud800", "x\udfffy", "\x1b[31mred", "\x7f", "\u202e", "\ufeff",
         "\U0001f642" * 50, "e\u0301", "\uffff", "x" * 20_000, "null", "{", "' OR 1=1 --", "%00", "../x"]
STRANGE_TEXT = st.one_of(st.sampled_from(WEIRD), st.text(st.characters(codec=None, exclude_categories=()),
                                                          max_size=20))
WRONG: dict[str, list[Any]] = {
    "str!": [None, 1, 1.5, True, [], {}, ["a"]], "str": [1, 1.5, True, [], {}, ["a"]],
    "float": ["1", True, [], {}, "nan"], "int": [1.5, "1", True, [], {}], "int!": [None, 1.5, "1", True, [], {}],
    "bool": [1, 0, "true", [], {}], "bool!": [None, 1, "true", [], {}], "dict": [[], "x", 1, True, [["a", 1]]],
    "moment": [True, [], {}], "tiers": [1, True, {}, [1], [None]], "list!": [None, {}, "x", 1, []],
    "list": [{}, "x", 1, [1], ["x"]], "fact": [1, True, None, [], {}],
    "labels!": [None, {}, "x", 1, [], [1], [""], ["a.b"], ["a\x00"]], "labels": [{}, "x", 1, [1], [""], ["a.b"]],
    "dict!": [None, [], "x", 1, True], "index": [1, "x", True, [1], {}, ["a..b"]],
}
# numbers JSON can say that Python's json reads (NaN, Infinity) and numbers too big for any field
NUMBER_LITERALS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 40, "-" + "9" * 40]
BAD_QUERY: dict[str, list[str]] = {
    "int": ["0", "-1", "abc", "1.5", "", "1e3", "9" * 40, "NaN"],
    "offset": ["-1", "abc", "1.5", "9" * 40 + "x"],
    "float": ["abc", "nan", "-1", "-inf", "0x10", "1,5"],  # (inf days: all of them)
    "bool": ["maybe", "2", "yes please", "[]"],
    "moment": ["yesterday", "2024-13-01", "nan", "1700000000", "", "2024-02-30T25:00", "0x10"],
}
BAD_USER_IDS = ["%00", "a%00b", "%01x", "x%7f", "%20ada", "ada%20", "%ff", "%ed%a0%80", "%c3", "x" * 300,
                "%09tab", "%1b%5b31m"]
BAD_KEYS: list[str | bytes | None] = [None, "", "Bearer", "Bearer  x", "Basic dXNlcjpwdw==", "Bearer um_nope",
                                      "Bearer um_000000000000_xxxx", "bearer " + "x" * 5000,
                                      "Bearer \u00e9t\u00e9".encode(), b"Bearer \xff\xfe"]
MALFORMED = [b"{", b'{"text": ', b'{"text": "x",}', b"\xff\xfe\x00", b"text=hello", b"{'text': 'x'}",
             b'{"text": "x"} {"text": "y"}', b"\x00" * 10, b'{"text": "\\ud8"}', b"[1, 2"]
NOT_OBJECTS = [b"[]", b"[{}]", b"1", b'"text"', b"null", b"true", b"", b"   "]
WRONG_TYPES = ["text/plain", "application/xml", "application/x-www-form-urlencoded",
               "multipart/form-data; boundary=xyz", "application/octet-stream"]

# -- the server and its file -----------------------------------------------------------------


@dataclass
class Fuzzed:
    """The running server, its keys, a few stored ids, and what the tests saw."""

    service: ServiceProcess
    http: httpx.Client
    keys: dict[str, str]
    ids: dict[str, str]
    export: str
    db: Any  # a sqlite3 connection to the file, or a psycopg connection to the database
    counts: dict[str, int] = field(default_factory=lambda: {"requests": 0, "refused": 0, "accepted": 0})


@pytest.fixture(scope="module")
def servers(tmp_path_factory) -> Iterator[Any]:
    """One fuzzed server per backend for the module, started when a test first asks for it."""
    with one_per_backend(tmp_path_factory, "service-fuzz", fuzzed_server) as server_on:
        yield server_on


@pytest.fixture
def fuzzed(servers, storage_backend, request) -> Fuzzed:
    """The fuzzed server on a SQLite file, or on a PostgreSQL database of its own (``storage_backend``)."""
    return servers(storage_backend, request)


@contextlib.contextmanager
def fuzzed_server(path: Path | str) -> Iterator[Fuzzed]:
    """The service on ``path`` (a file or a database URL), two users' keys and an admin key, a few rows."""
    args = ["--retrieval", "lexical", "--max-body-bytes", str(MAX_BODY), "--max-failed-auth", "1000000", "--no-mcp"]
    with ServiceProcess(path, args=args) as service:
        keys = {"ada": service.create_key("ada"), "bob": service.create_key("bob"),
                "admin": service.create_key(admin=True)}
        http = httpx.Client(base_url=service.url, timeout=60)
        auth = {"Authorization": f"Bearer {keys['ada']}"}
        ids = {"ada_fact": http.post("/v1/users/ada/facts", json={"text": "I keep bees"}, headers=auth).json()["id"],
               "bob_fact": http.post("/v1/users/bob/facts", json={"text": "Bob's secret"},
                                     headers={"Authorization": f"Bearer {keys['bob']}"}).json()["id"]}
        http.post("/v1/users/ada/turns", json={"user": "I live in Lisbon", "assistant": "Nice"}, headers=auth)
        http.post("/v1/users/ada/triples", json={"subject": "Ada", "predicate": "knows", "object": "Bob"},
                  headers=auth)
        export = http.get("/v1/users/ada/export", headers=auth).text
        db = reader(path)
        assert {"facts", "messages", "api_keys"} <= set(table_digests(db)), "the digest does not see the memory's tables"
        try:
            yield Fuzzed(service, http, keys, ids, export, db)
        finally:
            db.close()
            http.close()


def spec_operations(fuzz: Fuzzed) -> set[tuple[str, str]]:
    spec = fuzz.http.get("/openapi.json").json()
    return {(method.upper(), path) for path, item in spec["paths"].items() for method in item}


@pytest.mark.slow
def test_every_documented_route_has_a_fuzz_strategy(fuzzed):
    documented = spec_operations(fuzzed)
    assert documented - set(ENDPOINTS) == set(), "routes without a fuzz strategy"
    assert set(ENDPOINTS) - documented == set(), "fuzz strategies for routes the server does not document"


# -- one bad request -------------------------------------------------------------------------


@dataclass
class Case:
    """A request and what must come of it."""

    why: str
    method: str
    path: str
    query: str = ""
    content: bytes | Iterator[bytes] | None = None
    headers: dict[str, Any] = field(default_factory=dict)
    refuse: frozenset[int] | None = None   # must be refused with one of these (None: may be accepted)
    field: str | None = None               # a 422 must name this field (or one inside it)


def _pct(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def _set(body: Any, path: str, value: Any) -> None:
    """Set ``messages[0].role``-style ``path`` in ``body``."""
    steps: list[str | int] = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", path)]
    target = body
    for step in steps[:-1]:
        target = target[step]
    target[steps[-1]] = value


def _json_bytes(body: Any, raw: dict[str, str] | None = None) -> bytes:
    """``body`` as JSON; ``raw`` replaces placeholder strings by literal JSON text (NaN, 1e400, ...)."""
    text = json.dumps(body)
    for placeholder, literal in (raw or {}).items():
        text = text.replace(json.dumps(placeholder), literal)
    return text.encode("utf-8", "surrogatepass")


def _names(value: str, expected: str) -> bool:
    return value == expected or value.startswith((expected + ".", expected + "["))


def draw_case(data: st.DataObject, key: tuple[str, str], fuzz: Fuzzed) -> Case:
    method, template = key
    spec = ENDPOINTS[key]
    user = "ada"
    path = template.replace("{user_id}", user).replace("{fact_id}", fuzz.ids["ada_fact"])
    auth = {"Authorization": f"Bearer {fuzz.keys['admin' if spec.admin else 'ada']}"}
    kinds = ["auth"] if not spec.open else ["ignored"]
    if spec.scoped:
        kinds += ["user_id", "scope"]
    if spec.body is not None:
        kinds += ["malformed", "not_object", "content_type", "too_large", "wrong_type", "unknown", "number",
                  "strange"]
    if spec.query:
        kinds += ["query"] * 3
    if spec.fact_path:
        kinds += ["fact_id"] * 3
    if spec.jsonl:
        kinds += ["jsonl"] * 4
    kind = data.draw(st.sampled_from(kinds), label="kind")
    body = json.loads(json.dumps(spec.body)) if spec.body is not None else None
    content = _json_bytes(body) if body is not None else fuzz.export.encode() if spec.jsonl else None
    json_headers = {**auth, "Content-Type": "application/json"} if body is not None else auth

    if kind == "ignored":
        query = data.draw(st.sampled_from(["", "?limit=abc", "?x=%00", "?" + "a" * 3000]))
        return Case("extra input on an open route", method, path, query, b'{"junk": [1, 2]}',
                    {"Authorization": "Bearer junk", "Content-Type": "text/plain"})
    if kind == "auth":
        choice = data.draw(st.sampled_from(BAD_KEYS + ["bob"]), label="key")
        if choice == "bob":
            return Case("another user's key", method, path, content=content, refuse=frozenset({403}),
                        headers={**json_headers, "Authorization": f"Bearer {fuzz.keys['bob']}"})
        headers = {k: v for k, v in json_headers.items() if k != "Authorization"}
        if choice is not None:
            headers["Authorization"] = choice
        return Case(f"key {choice!r:.40}", method, path, content=content, headers=headers, refuse=frozenset({401}))
    if kind == "user_id":
        bad = data.draw(st.sampled_from(BAD_USER_IDS), label="user_id")
        return Case(f"user id {bad!r:.40}", method, path.replace("/ada", "/" + bad, 1), content=content,
                    headers={**json_headers, "Authorization": f"Bearer {fuzz.keys['admin']}"},
                    refuse=frozenset(DOCUMENTED), field="user_id")
    if kind == "scope":
        name = data.draw(st.sampled_from(["agent_id", "session_id"]))
        bad = data.draw(st.sampled_from(["%00", "x%01", "%20x", "x" * 300, "%ff", "%ed%a0%80", "", "%0a"]))
        return Case(f"{name}={bad:.40}", method, path, f"?{name}={bad}", content, json_headers,
                    refuse=frozenset({400, 422}), field=name)
    if kind == "query":
        name = data.draw(st.sampled_from(sorted(spec.query)), label="param")
        kind_of = spec.query[name]
        if kind_of == "str":
            value = _pct(data.draw(STRANGE_TEXT, label="value"))
            return Case(f"{name}=<strange>", method, path, f"?{name}={value}", None, auth, None, name)
        value = data.draw(st.sampled_from(BAD_QUERY[kind_of]), label="value")
        return Case(f"{name}={value:.40}", method, path, f"?{name}={quote(value)}", None, auth,
                    frozenset({422}), name)
    if kind == "fact_id":
        fact = data.draw(st.one_of(st.sampled_from([fuzz.ids["bob_fact"], "fact_0", "fact_", "msg_x", "x" * 600]),
                                   STRANGE_TEXT.filter(lambda t: t not in ("", ".", "..") and "/" not in t)))
        head, _, tail = path.partition(fuzz.ids["ada_fact"])  # the id's segment, whatever follows it
        return Case(f"fact id {fact!r:.40}", method, head + _pct(fact) + tail, content=content,
                    headers=json_headers, refuse=frozenset({404, 422}), field="fact_id")
    if kind == "jsonl":
        return _jsonl_case(data, method, path, auth, fuzz)
    if kind == "malformed":
        return Case("malformed JSON", method, path, content=data.draw(st.sampled_from(MALFORMED)),
                    headers=json_headers, refuse=frozenset({400, 422}), field="body")
    if kind == "not_object":
        return Case("not an object", method, path, content=data.draw(st.sampled_from(NOT_OBJECTS)),
                    headers=json_headers, refuse=frozenset({400, 422}), field="body")
    if kind == "content_type":
        kind_header = data.draw(st.sampled_from(WRONG_TYPES))
        return Case(f"Content-Type {kind_header}", method, path, content=content,
                    headers={**auth, "Content-Type": kind_header}, refuse=frozenset({400, 415, 422}), field="body")
    if kind == "too_large":
        huge = _json_bytes({**(body or {}), "padding": "x" * (MAX_BODY + 10)})
        streamed = data.draw(st.booleans(), label="streamed")
        chunks = iter([huge[i:i + 8192] for i in range(0, len(huge), 8192)]) if streamed else huge
        return Case(f"over the limit (streamed={streamed})", method, path, content=chunks, headers=json_headers,
                    refuse=frozenset({413}), field="body")
    name = data.draw(st.sampled_from(sorted(spec.fields)), label="field")
    kind_of = spec.fields[name]
    if kind == "wrong_type":
        value = data.draw(st.sampled_from(WRONG[kind_of]), label="value")
        _set(body, name, value)
        return Case(f"{name}={value!r:.40}", method, path, content=_json_bytes(body), headers=json_headers,
                    refuse=frozenset({422}), field=name)
    if kind == "unknown":
        parent = name.rsplit(".", 1)[0] if "." in name else ""
        unknown = data.draw(st.sampled_from(["bogus", "Text", "user_id", "x" * 200, "\u00e9", "__class__"]))
        _set(body, f"{parent}.{unknown}" if parent else unknown, 1)
        return Case(f"unknown field {unknown!r:.40}", method, path, content=_json_bytes(body), headers=json_headers,
                    refuse=frozenset({422}), field=f"{parent}.{unknown}" if parent else unknown)
    if kind == "number":
        literal = data.draw(st.sampled_from(NUMBER_LITERALS), label="literal")
        _set(body, name, "__number__")
        return Case(f"{name}={literal:.20}", method, path, content=_json_bytes(body, {"__number__": literal}),
                    headers=json_headers, refuse=None if kind_of == "float" else frozenset({422}), field=name)
    value = data.draw(STRANGE_TEXT, label="value")
    _set(body, name, value)
    return Case(f"{name}=<strange>", method, path, content=_json_bytes(body), headers=json_headers, field=name)


def _jsonl_case(data: st.DataObject, method: str, path: str, auth: dict[str, str], fuzz: Fuzzed) -> Case:
    lines = fuzz.export.splitlines()
    header, rows = json.loads(lines[0]), [json.loads(line) for line in lines[1:]]
    how = data.draw(st.sampled_from(["not_utf8", "empty", "no_header", "bad_header", "garbage_line", "bad_kind",
                                     "bad_column", "bad_value", "conflict", "surrogate"]), label="jsonl")
    at = data.draw(st.integers(0, len(rows) - 1), label="row")
    if how == "not_utf8":
        content = fuzz.export.encode() + b"\xff\xfe\n"
    elif how == "empty":
        content = data.draw(st.sampled_from([b"", b"\n\n", b"   "]))
    elif how == "no_header":
        content = "\n".join(lines[1:]).encode()
    elif how == "bad_header":
        header = {**header, data.draw(st.sampled_from(["format", "version", "schema_version"])): "bogus"}
        content = "\n".join([json.dumps(header), *lines[1:]]).encode()
    elif how == "garbage_line":
        content = "\n".join([*lines[:at + 1], data.draw(st.sampled_from(["{", "[]", "1", "nul", '{"kind"}'])),
                             *lines[at + 1:]]).encode()
    else:
        row = rows[at]
        if how == "bad_kind":
            row["kind"] = data.draw(st.sampled_from(["bogus", "api_keys", "sqlite_master", "", None]))
        elif how == "bad_column":
            row["row"]["no_such_column"] = 1
        elif how == "bad_value":
            column = data.draw(st.sampled_from(sorted(row["row"])), label="column")
            row["row"][column] = data.draw(st.sampled_from([[1], {"a": 1}, True]), label="value")
        elif how == "conflict":  # an id that is there, with other content
            row = next(r for r in rows[at:] + rows if {"id", "text", "content", "object"} & set(r["row"]) >= {"id"}
                       and len({"text", "content", "object"} & set(r["row"])) == 1)
            column = next(c for c in ("text", "content", "object") if c in row["row"])
            row["row"][column] = f"other {row['row'][column]}"
        else:
            column = next((c for c in ("text", "content", "object", "name") if c in row["row"]), None)
            if column is None:
                row["row"]["id"] = "\ud800"
            else:
                row["row"][column] = "bad \ud800 text"
        content = "\n".join([lines[0], *(json.dumps(r) for r in rows)]).encode("utf-8", "surrogatepass")
    refuse = None if how == "bad_value" else frozenset({409}) if how == "conflict" else frozenset({400, 409, 422})
    return Case(f"import: {how} at {at}", method, path, content=content,
                headers={**auth, "Content-Type": "application/x-ndjson"}, refuse=refuse)


# -- the contract ----------------------------------------------------------------------------


def send(fuzz: Fuzzed, case: Case) -> httpx.Response:
    return fuzz.http.request(case.method, case.path + case.query, content=case.content, headers=case.headers)


def check(fuzz: Fuzzed, case: Case, state: dict[str, dict[str, str]]) -> None:
    """Assert the contract for one answered case (``state["digest"]``: the file before it, then after it)."""
    answer = send(fuzz, case)
    fuzz.counts["requests"] += 1
    before = state["digest"]
    state["digest"] = after = table_digests(fuzz.db)  # the next case compares with this, whatever happens here
    where = f"{case.why}: {case.method} {case.path[:120]}{case.query[:120]} -> {answer.status_code} {answer.text[:300]}"
    assert answer.status_code < 500, f"{where}\nserver log:\n{fuzz.service.log()[-3000:]}"
    if answer.status_code < 400:
        assert case.refuse is None, f"accepted what must be refused: {where}"
        fuzz.counts["accepted"] += 1
        return
    fuzz.counts["refused"] += 1
    assert answer.status_code in DOCUMENTED, where
    if case.refuse is not None:
        assert answer.status_code in case.refuse, where
    body = answer.json()
    error = body["error"]
    assert {"type", "field", "message"} <= set(error) and isinstance(error["message"], str) and error["type"], where
    if answer.status_code == 422:
        assert error["field"], f"a 422 must name the field: {where}"
        if case.field is not None:
            assert _names(error["field"], case.field), f"the field should be {case.field!r}: {where}"
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    assert not changed, f"a refused request wrote to the file (tables {changed}): {where}"


def fuzz_operation(fuzz: Fuzzed, key: tuple[str, str], examples: int) -> None:
    state = {"digest": table_digests(fuzz.db)}

    @settings(max_examples=examples, **SETTINGS)  # type: ignore[arg-type]
    @given(st.data())
    def run(data: st.DataObject) -> None:
        case = draw_case(data, key, fuzz)
        check(fuzz, case, state)

    run()


@pytest.mark.parametrize("operation", sorted(ENDPOINTS), ids=lambda k: f"{k[0]} {k[1]}")
def test_bad_input_is_refused_with_a_documented_error_and_writes_nothing(fuzzed, operation, figures):
    before = dict(fuzzed.counts)
    fuzz_operation(fuzzed, operation, scaled(40 if ENDPOINTS[operation].body is not None else 20))
    figures("service_bad_input", operation=" ".join(operation),
            **{k: v - before[k] for k, v in fuzzed.counts.items()})


@pytest.mark.slow
def test_the_seeded_rows_survive_the_fuzzing(fuzzed):
    """Nothing the fuzzer sent removed what was there (bob's fact, reached through ada's path, included)."""
    auth = {"Authorization": f"Bearer {fuzzed.keys['admin']}"}
    assert fuzzed.ids["bob_fact"] in {f["id"] for f in fuzzed.http.get("/v1/users/bob/facts", headers=auth)
                                      .json()["facts"]}
    assert fuzzed.service.healthy()



def test_the_digest_sees_an_accepted_write(fuzzed):
    """The "writes nothing" check can fail: a write the server accepts changes the digest."""
    before = table_digests(fuzzed.db)
    answer = fuzzed.http.post("/v1/users/ada/facts", json={"text": "I also keep wasps"},
                              headers={"Authorization": f"Bearer {fuzzed.keys['ada']}"})
    assert answer.status_code in (200, 201), answer.text
    after = table_digests(fuzzed.db)
    assert before["facts"] != after["facts"]
