"""The HTTP service in the test process (``create_app`` under Starlette's ``TestClient``, and raw ASGI
calls where a test needs a body streamed in parts or a header no HTTP client sends): every route of
``/v1/users/{user_id}`` and ``/v1/users`` with what it stores and answers, the error format of every
refusal (status, ``type``, the ``field`` at fault, the request id), the gatekeeper's answers (keys,
users, admin routes, ``/mcp``, paths and queries that are not UTF-8), the body limits and timeout of
``BodyLimit``, the access log, and ``ServiceSettings``.

test_http_api.py drives the same routes through a child process; this module runs them where coverage
sees them, and adds the cases only an in-process app reaches (a library error of every class, a
closed memory, an internal failure, a stalled body).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from tests.service.conftest import bearer
from unified_memory import UnifiedMemory
from unified_memory.errors import (
    ClosedError,
    ConfigError,
    ConflictError,
    ConstraintError,
    DependencyError,
    LLMError,
    MemoryTypeError,
    MemoryValueError,
    NotFoundError,
    StorageError,
    StorageUnavailableError,
    UnifiedMemoryError,
)
from unified_memory.extraction.rules import RuleExtractor

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from unified_memory.service.app import ServiceSettings, create_app  # noqa: E402
from unified_memory.service.errors import error_body, field_of_location, status_of  # noqa: E402

BODY_LIMIT = 4096  # the in-process services' max_body_bytes: small, so a test crosses it cheaply
HEX_ID = re.compile(r"^[0-9a-f]{32}$")
FUNCTION_FIXTURE = settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])


@dataclass
class Service:
    """One in-process service: its memory, the client, a key for ada, one for bob and an admin key."""

    memory: UnifiedMemory
    app: Any
    http: TestClient
    ada: dict[str, str]
    bob: dict[str, str]
    admin: dict[str, str]

    def error(self, answer: httpx.Response, status: int) -> dict[str, Any]:
        """The error object of a refusal, after checking its status and the request id it carries."""
        assert answer.status_code == status, answer.text
        assert answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert error["request_id"] == answer.headers["x-request-id"]
        assert set(error) == {"type", "field", "message", "request_id"}
        return dict(error)

    def ok(self, answer: httpx.Response, status: int = 200) -> Any:
        assert answer.status_code == status, answer.text
        return answer.json()

    def stats(self, user: str = "ada") -> dict[str, Any]:
        return dict(self.ok(self.http.get(f"/v1/users/{user}/stats", headers=self.admin)))


@pytest.fixture
def make_service(tmp_path) -> Iterator[Any]:
    """Services over fresh files (lexical retrieval, bodies up to :data:`BODY_LIMIT`, failures per
    address enough for any test); each is shut down (its memory closed) after the test."""
    opened: list[TestClient] = []
    counter = itertools.count()

    def make(*, extractor: Any = None, **chosen: Any) -> Service:
        memory = UnifiedMemory(str(tmp_path / f"m{next(counter)}.db"), retrieval="lexical", extractor=extractor)
        app = create_app(memory, settings={"mcp": False, "max_body_bytes": BODY_LIMIT, "max_failed_auth": 1000,
                                           **chosen})
        keys = app.state.keys
        client = TestClient(app, raise_server_exceptions=False)  # a failure is answered, as by uvicorn
        client.__enter__()
        opened.append(client)
        return Service(memory, app, client, bearer(keys.create("ada")[1]), bearer(keys.create("bob")[1]),
                       bearer(keys.create(None, admin=True)[1]))

    yield make
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def svc(make_service) -> Service:
    return make_service()


# -- raw ASGI: bodies in parts, stalls, headers an HTTP client would not send --------------------

@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def asgi(app: Any, method: str, path: str, *, headers: Sequence[tuple[bytes, bytes]] = (),
         chunks: Sequence[bytes] = (b"",), stall_after: int | None = None, query: bytes = b"") -> Answer:
    """Call ``app`` once: the body is sent in ``chunks``; after ``stall_after`` chunks nothing more
    comes (the receive waits until the app gives up)."""

    async def run() -> Answer:
        parts = list(chunks) or [b""]
        sent = 0
        messages: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if stall_after is not None and sent >= stall_after:
                await asyncio.sleep(30)
            if sent < len(parts):
                sent += 1
                return {"type": "http.request", "body": parts[sent - 1], "more_body": sent < len(parts)}
            await asyncio.sleep(30)  # the body is whole: wait for a disconnect that never comes
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            messages.append(message)

        raw_path = path.encode("latin-1")
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": path.encode("latin-1").decode("utf-8", "replace"), "raw_path": raw_path,
                 "query_string": query, "root_path": "", "headers": list(headers),
                 "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
        await asyncio.wait_for(app(scope, receive, send), 20)
        start = next(m for m in messages if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
        return Answer(start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, body)

    return asyncio.run(run())


def key_header(headers: dict[str, str]) -> tuple[bytes, bytes]:
    return b"authorization", headers["Authorization"].encode()


# -- writing and reading ---------------------------------------------------------------------------------

def test_turns_messages_facts_and_triples_are_stored_as_sent(svc):
    """Each write route answers the ids it wrote, and the reading routes give back what was written."""
    http, ada = svc.http, svc.ada
    turn = svc.ok(http.post("/v1/users/ada/turns", json={
        "user": "My sister Maria lives in Lisbon", "assistant": "Noted", "when": "2024-03-01T12:00:00Z",
        "metadata": {"channel": "sms"}}, headers=ada), 201)["ids"]
    call = {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    messages = svc.ok(http.post("/v1/users/ada/messages", json={"messages": [
        {"role": "assistant", "content": None, "tool_calls": [call], "when": "2024-03-02T00:00:00Z"},
        {"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "weather", "when": 1709424000.0},
    ], "extract": False}, headers=ada), 201)["ids"]
    fact = svc.ok(http.post("/v1/users/ada/facts", json={
        "text": "I keep bees", "importance": 0.9, "category": "hobby", "metadata": {"hives": 2}, "ttl_days": 30},
        headers=ada), 201)["id"]
    batch = svc.ok(http.post("/v1/users/ada/facts/batch", json={"facts": [
        "I play the cello", {"text": "I drink green tea", "category": "food"}]}, headers=ada), 201)["ids"]
    triple = svc.ok(http.post("/v1/users/ada/triples", json={
        "subject": "Ada", "predicate": "works_with", "object": "Grace", "confidence": 0.7}, headers=ada), 201)["id"]

    episodes = svc.ok(http.get("/v1/users/ada/episodes", headers=ada))["episodes"]
    assert [e["id"] for e in episodes] == turn + messages  # oldest first
    assert (episodes[0]["content"], episodes[0]["metadata"]) == ("My sister Maria lives in Lisbon", {"channel": "sms"})
    assert episodes[0]["created_at"].startswith("2024-03-01T12:00:00")
    assert episodes[2]["content"] is None and episodes[2]["tool_calls"] == [call]
    assert (episodes[3]["tool_call_id"], episodes[3]["name"]) == ("c1", "weather")
    assert episodes[3]["created_at"].startswith("2024-03-03T00:00:00")  # a number is a Unix time
    assert len(svc.ok(http.get("/v1/users/ada/episodes", params={"limit": 1}, headers=ada))["episodes"]) == 1

    facts = {f["id"]: f for f in svc.ok(http.get("/v1/users/ada/facts", params={"limit": 1000}, headers=ada))["facts"]}
    assert {fact, *batch} <= set(facts)
    assert (facts[fact]["category"], facts[fact]["metadata"], facts[fact]["importance"]) == ("hobby", {"hives": 2}, 0.9)
    assert facts[fact]["expires_at"] is not None
    assert facts[batch[1]]["text"] == "I drink green tea" and facts[batch[1]]["category"] == "food"
    food = svc.ok(http.get("/v1/users/ada/facts", params={"category": "food"}, headers=ada))
    assert (food["total"], [f["id"] for f in food["facts"]]) == (1, [batch[1]])

    relations = svc.ok(http.get("/v1/users/ada/triples", params={"entity": "Grace"}, headers=ada))["triples"]
    assert triple in {t["id"] for t in relations}
    mine = next(t for t in relations if t["id"] == triple)
    assert (mine["predicate"], mine["confidence"]) == ("works_with", 0.7)
    names = {e["name"] for e in svc.ok(http.get("/v1/users/ada/entities", headers=ada))["entities"]}
    assert {"Ada", "Grace"} <= names
    people = svc.ok(http.get("/v1/users/ada/entities", params={"limit": 1}, headers=ada))["entities"]
    assert len(people) == 1

    stats = svc.stats()
    assert stats["path"] is None  # the server's file system is not the caller's business
    assert stats["messages"] == 4 and stats["facts"] == len(facts) and stats["triples"] >= 1
    assert svc.stats("bob")["messages"] == 0  # nothing of ada's reached bob


def test_recall_and_context_answer_what_the_user_stored(svc):
    """``POST /recall`` finds the user's fact (and only in the tiers asked), ``POST /context`` puts it in a
    block within the budget, and neither reaches another user's facts."""
    http, ada = svc.http, svc.ada
    kept = svc.ok(http.post("/v1/users/ada/facts", json={"text": "I am allergic to peanuts"}, headers=ada), 201)["id"]
    svc.ok(http.post("/v1/users/bob/facts", json={"text": "I am allergic to shellfish"}, headers=svc.bob), 201)
    hits = svc.ok(http.post("/v1/users/ada/recall", json={
        "query": "allergic", "limit": 5, "tiers": "long_term", "diversify": False}, headers=ada))["hits"]
    assert [h["id"] for h in hits] == [kept] and hits[0]["tier"] == "long_term"
    assert svc.ok(http.post("/v1/users/ada/recall", json={"query": "allergic", "tiers": ["episodic"]},
                            headers=ada))["hits"] == []  # no conversation was logged
    block = svc.ok(http.post("/v1/users/ada/context", json={"query": "peanuts allergic", "max_tokens": 200},
                             headers=ada))
    assert "peanuts" in block["text"] and "shellfish" not in block["text"]
    assert block["tokens"] <= block["max_tokens"] == 200
    bad = svc.error(http.post("/v1/users/ada/recall", json={"query": "x", "tiers": ["nope"]}, headers=ada), 422)
    assert bad["type"] == "invalid" and bad["field"].startswith("tiers")


_users = itertools.count()


@FUNCTION_FIXTURE
@given(count=st.integers(0, 12), limit=st.integers(1, 8), start=st.integers(0, 14))
def test_walking_the_fact_pages_gives_every_fact_once_in_order(svc, count, limit, start):
    """``GET /facts``: following ``next_offset`` from any offset lists the rest of the facts in the
    order of the whole listing, each page within ``limit``, ``total`` the number stored."""
    user = f"pager-{next(_users)}"
    if count:
        svc.ok(svc.http.post(f"/v1/users/{user}/facts/batch", json={
            "facts": [f"Fact {i} about the garden" for i in range(count)]}, headers=svc.admin), 201)
    every = svc.ok(svc.http.get(f"/v1/users/{user}/facts", params={"limit": 1000}, headers=svc.admin))
    assert every["total"] == count == len(every["facts"]) and every["next_offset"] is None
    walked: list[str] = []
    offset: int | None = start
    while offset is not None:
        page = svc.ok(svc.http.get(f"/v1/users/{user}/facts", params={"limit": limit, "offset": offset},
                                   headers=svc.admin))
        assert page["total"] == count and len(page["facts"]) <= limit
        walked += [f["id"] for f in page["facts"]]
        assert page["next_offset"] in (None, offset + len(page["facts"]))
        offset = page["next_offset"]
    assert walked == [f["id"] for f in every["facts"]][start:]



def test_facts_listing_options_choose_the_facts(svc):
    """``GET /facts``: ``order``, ``include_history`` and friends choose and rank the facts; a bad parameter
    is 422 naming it."""
    http, ada = svc.http, svc.ada
    svc.ok(http.post("/v1/users/ada/facts", json={"text": "I live in Lisbon", "importance": 0.2}, headers=ada), 201)
    svc.ok(http.post("/v1/users/ada/facts", json={"text": "I am allergic to peanuts", "importance": 0.95},
                     headers=ada), 201)
    svc.ok(http.post("/v1/users/ada/facts", json={"text": "I live in Porto"}, headers=ada), 201)  # replaces Lisbon
    ranked = svc.ok(http.get("/v1/users/ada/facts", params={"order": "importance"}, headers=ada))["facts"]
    assert ranked[0]["text"] == "I am allergic to peanuts"
    current = {f["text"] for f in svc.ok(http.get("/v1/users/ada/facts", headers=ada))["facts"]}
    history = svc.ok(http.get("/v1/users/ada/facts", params={"include_history": "true", "include_inactive": "true",
                                                             "include_archived": "true"}, headers=ada))
    assert "I live in Lisbon" not in current and "I live in Porto" in current
    assert {f["text"] for f in history["facts"]} == current | {"I live in Lisbon"} and history["total"] == 3
    for params, field in (({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"offset": -1}, "offset"),
                          ({"order": "random"}, "order"), ({"include_history": "perhaps"}, "include_history")):
        error = svc.error(http.get("/v1/users/ada/facts", params=params, headers=ada), 422)
        assert (error["type"], error["field"]) == ("invalid", field), params
        assert error["message"].startswith(f"{field}: ")


def test_scoping_by_agent_and_session_query_parameters(svc):
    """``agent_id`` / ``session_id`` scope a call as ``UnifiedMemory.scoped`` does; a bad scope id is 422
    naming the parameter."""
    http, ada = svc.http, svc.ada
    svc.ok(http.post("/v1/users/ada/facts", params={"agent_id": "planner"}, json={"text": "I prefer aisle seats"},
                     headers=ada), 201)
    svc.ok(http.post("/v1/users/ada/turns", params={"session_id": "s1"}, json={"user": "hello there"}, headers=ada), 201)
    svc.ok(http.post("/v1/users/ada/turns", params={"session_id": "s2"}, json={"user": "good morning"}, headers=ada), 201)
    assert svc.ok(http.get("/v1/users/ada/facts", params={"agent_id": "writer"}, headers=ada))["total"] == 0
    assert svc.ok(http.get("/v1/users/ada/facts", params={"agent_id": "planner"}, headers=ada))["total"] == 1
    in_s2 = svc.ok(http.get("/v1/users/ada/episodes", params={"session": "s2"}, headers=ada))["episodes"]
    assert [e["content"] for e in in_s2] == ["good morning"]
    bad = svc.error(http.get("/v1/users/ada/episodes", params={"session": " "}, headers=ada), 422)
    assert bad["field"] == "session"  # the query parameter's name, not the library's session_id
    scope = svc.error(http.get("/v1/users/ada/stats", params={"agent_id": "x" * 300}, headers=ada), 422)
    assert scope["field"] == "agent_id"


# -- keyed items ----------------------------------------------------------------------------------------

def test_keyed_items_put_get_search_list_and_delete(svc):
    """The keyed-item routes store, read, filter (a ``$float`` on the wire), list and delete items of the
    key's user only."""
    http, ada = svc.http, svc.ada
    for key, value in (("tea", {"kind": "drink", "rating": 5}), ("coffee", {"kind": "drink", "rating": 2}),
                       ("bread", {"kind": "food", "rating": 4})):
        assert svc.ok(http.put("/v1/users/ada/items", json={"namespace": ["prefs", "kitchen"], "key": key,
                                                            "value": value}, headers=ada)) == {"stored": True}
    svc.ok(http.put("/v1/users/ada/items", json={"namespace": ["notes"], "key": "n", "value": {"t": "x"},
                                                 "index": False, "ttl": 60}, headers=ada))
    item = svc.ok(http.post("/v1/users/ada/items/get", json={"namespace": ["prefs", "kitchen"], "key": "tea",
                                                             "refresh_ttl": False}, headers=ada))["item"]
    assert (item["namespace"], item["key"], item["value"]) == (["prefs", "kitchen"], "tea", {"kind": "drink", "rating": 5})
    assert svc.ok(http.post("/v1/users/bob/items/get", json={"namespace": ["prefs", "kitchen"], "key": "tea"},
                            headers=svc.bob)) == {"item": None}  # another user's items are not bob's

    drinks = svc.ok(http.post("/v1/users/ada/items/search", json={
        "namespace_prefix": ["prefs"], "filter": {"kind": "drink", "rating": {"$gte": 3}}}, headers=ada))["items"]
    assert [i["key"] for i in drinks] == ["tea"]
    below_inf = svc.ok(http.post("/v1/users/ada/items/search", json={
        "namespace_prefix": ["prefs"], "filter": {"rating": {"$lt": {"$float": "inf"}}}, "limit": 2, "offset": 1},
        headers=ada))["items"]
    assert len(below_inf) == 2
    bad = svc.error(http.post("/v1/users/ada/items/search", json={"filter": {"rating": {"$near": 1}}}, headers=ada),
                    422)
    assert bad["field"] == "filter.rating" and "$near" in bad["message"]

    spaces = svc.ok(http.post("/v1/users/ada/items/namespaces", json={}, headers=ada))["namespaces"]
    assert sorted(spaces) == [["notes"], ["prefs", "kitchen"]]
    assert svc.ok(http.post("/v1/users/ada/items/namespaces", json={"prefix": ["prefs"], "max_depth": 1},
                            headers=ada))["namespaces"] == [["prefs"]]
    assert svc.ok(http.post("/v1/users/ada/items/namespaces", json={"suffix": ["kitchen"]},
                            headers=ada))["namespaces"] == [["prefs", "kitchen"]]

    assert svc.ok(http.post("/v1/users/ada/items/delete", json={"namespace": ["prefs", "kitchen"], "key": "tea"},
                            headers=ada)) == {"deleted": True}
    assert svc.ok(http.post("/v1/users/ada/items/delete", json={"namespace": ["prefs", "kitchen"], "key": "tea"},
                            headers=ada)) == {"deleted": False}
    assert svc.ok(http.post("/v1/users/ada/items/get", json={"namespace": ["prefs", "kitchen"], "key": "tea"},
                            headers=ada)) == {"item": None}


# -- forgetting ------------------------------------------------------------------------------------------

def test_forgetting_one_fact_some_items_or_a_whole_user(svc):
    """``DELETE /facts/{id}``, ``POST /forget`` (all or nothing) and ``DELETE /v1/users/{user}`` delete what
    they name and what derives from it, never another user's rows."""
    http, ada = svc.http, svc.ada
    first = svc.ok(http.post("/v1/users/ada/facts", json={"text": "I keep bees"}, headers=ada), 201)["id"]
    second = svc.ok(http.post("/v1/users/ada/facts", json={"text": "I play the cello"}, headers=ada), 201)["id"]
    turn = svc.ok(http.post("/v1/users/ada/turns", json={"user": "My favourite colour is teal"}, headers=ada), 201)["ids"]
    bobs = svc.ok(http.post("/v1/users/bob/facts", json={"text": "I keep goats"}, headers=svc.bob), 201)["id"]
    assert svc.stats()["facts"] == 3  # the turn's extracted fact too

    assert svc.ok(http.delete(f"/v1/users/ada/facts/{first}", headers=ada))["deleted"]["facts"] == 1
    for unknown in (first, bobs, "msg_123", "nothing"):  # gone, another user's, not a fact, not an id
        error = svc.error(http.delete(f"/v1/users/ada/facts/{unknown}", headers=ada), 404)
        assert (error["type"], error["field"]) == ("not_found", "fact_id")
        assert "bob" not in error["message"]

    # one id of another user: 404 naming ids, and nothing is deleted
    error = svc.error(http.post("/v1/users/ada/forget", json={"ids": [second, bobs]}, headers=ada), 404)
    assert (error["type"], error["field"]) == ("not_found", "ids")
    blank = svc.error(http.post("/v1/users/ada/forget", json={"ids": [second, ""]}, headers=ada), 422)
    assert blank["field"] == "ids[1]"
    assert svc.error(http.post("/v1/users/ada/forget", json={"ids": []}, headers=ada), 422)["field"] == "ids"
    assert svc.stats()["facts"] == 2 and svc.stats("bob")["facts"] == 1

    deleted = svc.ok(http.post("/v1/users/ada/forget", json={"ids": [second, turn[0]]}, headers=ada))["deleted"]
    assert deleted["facts"] == 2 and deleted["messages"] == 1  # the message takes the fact extracted from it
    assert svc.stats()["facts"] == 0 and svc.stats()["messages"] == 0

    svc.ok(http.post("/v1/users/ada/facts/batch", json={"facts": ["a fact", "another fact"]}, headers=ada), 201)
    svc.ok(http.put("/v1/users/ada/items", json={"namespace": ["n"], "key": "k", "value": {}}, headers=ada))
    everything = svc.ok(http.delete("/v1/users/ada", headers=ada))["deleted"]
    assert everything["facts"] == 2
    assert svc.stats()["facts"] == 0 and svc.stats("bob")["facts"] == 1
    assert svc.ok(http.post("/v1/users/ada/items/get", json={"namespace": ["n"], "key": "k"}, headers=ada))["item"] is None
    assert svc.ok(http.get("/v1/users/ada/stats", headers=ada))["user_id"] == "ada"  # the key still works


# -- export and import ------------------------------------------------------------------------------------

def test_export_streams_json_lines_that_import_into_another_user(svc):
    """``GET /export`` streams JSON Lines that ``POST /import`` takes into another user; a conflicting or
    broken line is refused naming the line."""
    http = svc.http
    svc.ok(http.post("/v1/users/ada/facts/batch", json={"facts": ["I keep bees", "I play the cello"]},
                     headers=svc.ada), 201)
    svc.ok(http.put("/v1/users/ada/items", json={"namespace": ["n"], "key": "k", "value": {"a": 1}}, headers=svc.ada))
    exported = http.get("/v1/users/ada/export", headers=svc.ada)
    assert exported.status_code == 200
    assert exported.headers["content-type"] == "application/x-ndjson"
    assert exported.headers["content-disposition"] == 'attachment; filename="memory-ada.jsonl"'
    rows = [json.loads(line) for line in exported.text.splitlines()]
    assert rows[0]["kind"] == "header" and rows[0]["users"] == ["ada"]
    assert sorted(r["row"]["text"] for r in rows if r["kind"] == "facts") == ["I keep bees", "I play the cello"]

    imported = svc.ok(http.post("/v1/users/bob/import", content=exported.content, headers=svc.bob))["imported"]
    assert imported == len(rows) - 1
    assert {f["text"] for f in svc.ok(http.get("/v1/users/bob/facts", headers=svc.bob))["facts"]} == {
        "I keep bees", "I play the cello"}
    assert svc.ok(http.post("/v1/users/bob/items/get", json={"namespace": ["n"], "key": "k"},
                            headers=svc.bob))["item"]["value"] == {"a": 1}
    assert svc.ok(http.post("/v1/users/ada/import", content=exported.content, headers=svc.ada)) == {"imported": 0}

    changed = [dict(r) for r in rows]
    fact_line = next(i for i, r in enumerate(changed) if r["kind"] == "facts")
    changed[fact_line] = {**changed[fact_line], "row": {**changed[fact_line]["row"], "text": "I keep wasps"}}
    conflict = svc.error(http.post("/v1/users/ada/import", content="\n".join(json.dumps(r) for r in changed),
                                   headers=svc.ada), 409)
    assert conflict["type"] == "conflict" and f"line {fact_line + 1}:" in conflict["message"]
    broken = svc.error(http.post("/v1/users/ada/import", content=exported.text.splitlines()[0] + "\n{not json\n",
                                 headers=svc.ada), 422)
    assert broken["type"] == "invalid" and "line 2: not valid JSON" in broken["message"]
    assert svc.stats()["facts"] == 2 and svc.stats("bob")["facts"] == 2


@FUNCTION_FIXTURE
@given(lengths=st.lists(st.one_of(st.integers(0, 40), st.integers(BODY_LIMIT - 2, BODY_LIMIT + 2)), min_size=1,
                        max_size=6),
       cuts=st.lists(st.integers(1, 3 * BODY_LIMIT), max_size=4))
def test_an_import_line_over_the_body_limit_is_refused_naming_it(svc, lengths, cuts):
    """Whatever parts the body arrives in, ``POST /import`` answers 413 naming the first line over
    ``max_body_bytes`` when there is one (a line of exactly the limit passes), and never imports."""
    body = b"\n".join(b"x" * n for n in lengths) + b"\n"
    points = sorted({min(c, len(body)) for c in cuts} | {0, len(body)})
    chunks = [body[a:b] for a, b in itertools.pairwise(points)]
    answer = asgi(svc.app, "POST", "/v1/users/ada/import", headers=[key_header(svc.ada)], chunks=chunks)
    over = [i for i, n in enumerate(lengths, 1) if n > BODY_LIMIT]
    if over:
        assert answer.status == 413, answer.body
        error = answer.json()["error"]
        assert (error["type"], error["field"]) == ("too_large", "body")
        assert error["message"].startswith(f"line {over[0]} of the import is over {BODY_LIMIT} bytes")
    else:
        assert answer.status == 422, answer.body  # read whole, then refused by the import's own checks
        error = answer.json()["error"]
        assert error["type"] == "invalid" and error["message"].startswith("source: <stream>")


# -- the error format ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("route", "body", "field"), [
    ("facts", {"text": "x", "bogus": 1}, "bogus"),
    ("facts", {"text": 5}, "text"),
    ("facts", {"text": "x", "importance": 1.5}, "importance"),
    ("facts", {"text": "  "}, "text"),
    ("facts", {"text": "x", "metadata": {"k": "\x00"}}, "metadata"),
    ("facts/batch", {"facts": ["ok", {"text": 3}]}, "facts[1].text"),
    ("facts/batch", {"facts": ["ok", ""]}, "facts[1]"),
    ("facts/batch", {"facts": []}, "facts"),
    ("turns", {"assistant": "hi"}, "user"),
    ("turns", {"user": "hi", "when": "yesterday-ish"}, "when"),
    ("messages", {"messages": [{"role": "user", "content": "x", "when": "nope"}]}, "messages[0].when"),
    ("messages", {"messages": [{"role": "user", "content": 1}]}, "messages[0].content"),
    ("messages", {"messages": [{"role": "user", "content": "x"}, {"role": "robot", "content": "x"}]},
     "messages[1].role"),
    ("triples", {"subject": "Ada", "predicate": "knows", "object": ""}, "object"),
    ("triples", {"subject": "Ada", "predicate": "knows", "object": "Bo", "confidence": "high"}, "confidence"),
    ("recall", {"query": "x", "limit": 0}, "limit"),
    ("context", {"max_tokens": "many"}, "max_tokens"),
    ("items/get", {"namespace": ["n"]}, "key"),
])
def test_a_refused_body_is_422_naming_the_field_and_writes_nothing(svc, route, body, field):
    """A body the schema or the library refuses is 422 ``invalid`` naming the request's own field (not the
    library's argument), and nothing is written."""
    error = svc.error(svc.http.post(f"/v1/users/ada/{route}", json=body, headers=svc.ada), 422)
    assert (error["type"], error["field"]) == ("invalid", field), error
    assert error["message"].startswith(f"{field}: ") or error["message"].startswith(f"{field} "), error
    stats = svc.stats()
    assert (stats["facts"], stats["messages"], stats["triples"]) == (0, 0, 0)


def test_several_schema_errors_name_the_most_specific_and_count_the_rest(svc):
    """With several errors the message names one field and counts the others; a JSON body that is not an
    object (or no body) is 400 ``malformed_json`` naming ``body``, as docs/service.md says."""
    error = svc.error(svc.http.post("/v1/users/ada/facts", json={"text": 1, "bogus": 2, "category": 3},
                                    headers=svc.ada), 422)
    assert error["message"].endswith("(and 2 more)")
    for body in ([1, 2], "just a string", None, 7):  # JSON, but not an object
        answer = svc.http.post("/v1/users/ada/facts", json=body, headers=svc.ada)
        not_object = svc.error(answer, answer.status_code)
        assert (answer.status_code, not_object["type"]) == (400, "malformed_json"), answer.text
        assert not_object["message"].endswith(
            {list: "got an array", int: "got a number", type(None): "there is no body"}.get(type(body), "")), answer.text
        assert not_object["field"] == "body"


@pytest.mark.parametrize("body", [b"{bad", b'{"text": "x",}', b"\xff\xfe", b'{"text": "caf\xe9"}'])
def test_a_body_that_is_not_json_in_utf8_is_400_malformed_json(svc, body):
    """Bodies that are not JSON, or not UTF-8, are 400 ``malformed_json`` naming ``body``."""
    answer = svc.http.post("/v1/users/ada/facts", content=body,
                           headers={**svc.ada, "Content-Type": "application/json"})
    error = svc.error(answer, 400)
    assert (error["type"], error["field"]) == ("malformed_json", "body")
    assert svc.stats()["facts"] == 0


def test_unknown_routes_and_methods(svc):
    """An unknown route is 404 ``not_found``, a wrong method 405 ``method_not_allowed`` with ``Allow``, in
    the one error format."""
    missing = svc.error(svc.http.get("/v1/users/ada/nothing-here", headers=svc.ada), 404)
    assert missing["type"] == "not_found" and missing["field"] is None
    assert svc.error(svc.http.get("/nowhere"), 404)["type"] == "not_found"  # open paths answer the same way
    wrong = svc.error(svc.http.delete("/v1/users/ada/stats", headers=svc.ada), 405)
    assert wrong["type"] == "method_not_allowed"
    assert "GET" in svc.http.delete("/v1/users/ada/stats", headers=svc.ada).headers["allow"]


class FailingExtractor(RuleExtractor):
    """The rules, except that a message saying ``provider down`` fails as an LLM provider would."""

    def extract(self, message: Any, *, context: Any = ()) -> Any:
        if "provider down" in (message.content or ""):
            raise LLMError("the extraction model answered 502")
        return super().extract(message, context=context)


def test_library_failures_map_to_500_and_503_and_are_logged(make_service, caplog):
    """A library error of the server's own (an LLM failure) is 500 and logged with the request id; a closed
    memory is 503 ``unavailable``, and ``/readyz`` says so while ``/healthz`` still answers."""
    svc = make_service(extractor=FailingExtractor())
    with caplog.at_level(logging.ERROR, logger="unified_memory.service"):
        error = svc.error(svc.http.post("/v1/users/ada/turns", json={"user": "provider down: I live in Porto"},
                                        headers=svc.ada), 500)
    assert error["type"] == "internal"
    assert svc.stats()["messages"] == 0  # the turn failed whole
    assert any(error["request_id"] in r.getMessage() and "LLMError" in r.getMessage() for r in caplog.records)
    assert svc.ok(svc.http.get("/readyz")) == {"status": "ready"}
    assert svc.ok(svc.http.get("/healthz")) == {"status": "ok"}

    svc.memory.close()  # the file can no longer be used: 503, and readiness says why
    closed = svc.error(svc.http.get("/v1/users/ada/stats", headers=svc.ada), 503)
    assert closed["type"] == "unavailable"
    assert svc.error(svc.http.get("/v1/users/ada/export", headers=svc.ada), 503)["type"] == "unavailable"
    ready = svc.http.get("/readyz")
    assert (ready.status_code, ready.json()) == (503, {"status": "unavailable", "reason": "ClosedError"})
    assert svc.ok(svc.http.get("/healthz")) == {"status": "ok"}  # the process still answers


def test_an_unexpected_failure_is_500_without_its_details(svc, monkeypatch, caplog):
    """An exception outside the library's classes is 500 ``internal`` with the request id (header and body)
    and without its text, which goes to the log."""
    async def broken(self: Any) -> Any:
        raise RuntimeError("password=hunter2 in a traceback")

    monkeypatch.setattr(UnifiedMemory, "astats", broken)
    with caplog.at_level(logging.ERROR, logger="unified_memory.service"):
        answer = svc.http.get("/v1/users/ada/stats", headers={**svc.ada, "X-Request-ID": "trace-42"})
    error = svc.error(answer, 500)
    assert error == {"type": "internal", "field": None, "message": "internal error; see the server log",
                     "request_id": "trace-42"}
    assert "hunter2" not in answer.text
    assert any("trace-42" in r.getMessage() and r.exc_info for r in caplog.records)  # the log has the traceback


@pytest.mark.parametrize(("error", "status", "kind"), [
    (NotFoundError("x"), 404, "not_found"), (ConflictError("x"), 409, "conflict"),
    (MemoryValueError("x"), 422, "invalid"), (MemoryTypeError("x"), 422, "invalid"), (ConfigError("x"), 422, "invalid"),
    (StorageError("x"), 503, "unavailable"), (ClosedError("x"), 503, "unavailable"),
    (ConstraintError("x"), 503, "unavailable"), (StorageUnavailableError("x"), 503, "unavailable"),
    (DependencyError("x"), 503, "unavailable"), (LLMError("x"), 500, "internal"),
    (UnifiedMemoryError("x"), 500, "internal"),
])
def test_every_library_error_class_has_its_status(error, status, kind):
    """``status_of``: each of the library's error classes has its documented status and type."""
    assert status_of(error) == (status, kind)


_NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: s not in ("str", "int", "float", "bool", "none", "bytes", "list", "dict", "tuple", "set"))


@given(where=st.sampled_from(["body", "query", "path", "header"]),
       parts=st.lists(st.one_of(_NAME, st.integers(0, 99)), max_size=5),
       tags=st.lists(st.sampled_from(["str", "int", "FactIn", "function-after[check()]", "dict[str,any]"]),
                     max_size=2))
def test_a_schema_location_becomes_the_field_it_names(where, parts, tags):
    """``field_of_location``: names joined with dots, list positions in brackets, the location's
    kind and pydantic's union-member tags left out."""
    expected = ""
    for part in parts:
        expected += f"[{part}]" if isinstance(part, int) else (f".{part}" if expected else part)
    location = [where, *tags, *parts] if parts else [where, *tags]
    assert field_of_location(location) == (expected or None)


def test_the_error_body_has_the_request_id_only_when_there_is_one():
    """``error_body`` leaves ``request_id`` out when there is none."""
    assert error_body("invalid", "m", "f") == {"error": {"type": "invalid", "field": "f", "message": "m"}}
    assert error_body("invalid", "m", None, "r1")["error"]["request_id"] == "r1"


# -- request ids and the access log ---------------------------------------------------------------------------

@FUNCTION_FIXTURE
@given(given_id=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=140))
def test_a_request_id_is_kept_when_it_is_a_short_token_else_made(svc, given_id):
    """``X-Request-ID``: echoed (in the header and the error body) when it is 1-128 of
    ``[A-Za-z0-9._:-]``, else replaced by a new id."""
    answer = asgi(svc.app, "GET", "/v1/users/ada/stats", headers=[(b"x-request-id", given_id.encode())])
    echoed = answer.headers["x-request-id"]
    assert answer.status == 401 and answer.json()["error"]["request_id"] == echoed
    if re.fullmatch(r"[A-Za-z0-9._:-]{1,128}", given_id):
        assert echoed == given_id
    else:
        assert HEX_ID.match(echoed)


def test_the_access_log_has_one_line_per_request_without_the_key(svc, caplog):
    """One JSON access-log line per request, with the key id and user it was authenticated as, never the
    key."""
    with caplog.at_level(logging.INFO, logger="unified_memory.service.access"):
        svc.http.post("/v1/users/ada/facts", json={"text": "I keep bees"}, headers={**svc.ada, "X-Request-ID": "r-1"})
        svc.http.get("/v1/users/ada/stats", headers=bearer("um_nope"))
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "unified_memory.service.access"]
    written, refused = lines[-2], lines[-1]
    assert {k: written[k] for k in ("request_id", "method", "path", "status", "user")} == {
        "request_id": "r-1", "method": "POST", "path": "/v1/users/ada/facts", "status": 201, "user": "ada"}
    assert written["key_id"] and written["client"] == "testclient" and written["ms"] >= 0
    assert (refused["status"], refused["user"], refused["key_id"]) == (401, None, None)
    secret = svc.ada["Authorization"].split()[1]
    assert all(secret not in r.getMessage() for r in caplog.records)


# -- the gatekeeper --------------------------------------------------------------------------------------------

def test_keys_are_checked_before_anything_is_read(svc):
    """401 with ``WWW-Authenticate`` for a missing, malformed, unknown or revoked key; 403 for another
    user's path or an admin route; an admin key acts for anyone; open routes need no key."""
    http = svc.http
    for headers, message in (({}, "missing API key"), (bearer("um_x_y"), "invalid API key"),
                             ({"Authorization": "Basic YWRhOnB3"}, "invalid API key"),
                             ({"Authorization": "Bearer "}, "invalid API key")):
        answer = http.post("/v1/users/ada/facts", json={"text": "I keep bees"}, headers=headers)
        error = svc.error(answer, 401)
        assert (error["type"], error["field"]) == ("unauthorized", "authorization")
        assert error["message"].startswith(message) and answer.headers["www-authenticate"] == "Bearer"
    other = svc.error(http.post("/v1/users/bob/facts", json={"text": "I keep bees"}, headers=svc.ada), 403)
    assert (other["type"], other["field"]) == ("forbidden", "user_id") and "bob" not in other["message"]
    not_admin = svc.error(http.get("/v1/users", headers=svc.ada), 403)
    assert (not_admin["type"], not_admin["field"]) == ("forbidden", "authorization")
    assert svc.stats()["facts"] == 0 and svc.stats("bob")["facts"] == 0

    svc.ok(http.post("/v1/users/carol/facts", json={"text": "I keep bees"}, headers=svc.admin), 201)  # admin: anyone
    assert svc.ok(http.get("/v1/users", headers=svc.admin)) == {"users": ["carol"]}
    revoked = svc.app.state.keys.create("dave")
    svc.app.state.keys.revoke(revoked[0].id)
    assert svc.error(http.get("/v1/users/dave/stats", headers=bearer(revoked[1])), 401)["type"] == "unauthorized"
    # the open routes need no key
    assert http.get("/healthz").status_code == 200 and http.get("/openapi.json").status_code == 200


def test_a_user_id_with_a_slash_is_one_path_segment(make_service):
    """A user id holding ``/`` (sent as ``%2F``) is routed as one segment, and its key reaches no other
    user."""
    svc = make_service()
    team = bearer(svc.app.state.keys.create("team/ada")[1])
    http = svc.http
    stored = svc.ok(http.post("/v1/users/team%2Fada/facts", json={"text": "I keep goats"}, headers=team), 201)["id"]
    listed = svc.ok(http.get("/v1/users/team%2Fada/facts", headers=team))["facts"]
    assert [f["id"] for f in listed] == [stored]
    assert svc.ok(http.get("/v1/users/team%2Fada/stats", headers=team))["user_id"] == "team/ada"
    assert svc.ok(http.delete(f"/v1/users/team%2Fada/facts/{stored}", headers=team))["deleted"]["facts"] == 1
    exported = http.get("/v1/users/team%2Fada/export", headers=team)
    assert exported.headers["content-disposition"] == 'attachment; filename="memory-team_ada.jsonl"'
    for elsewhere in ("/v1/users/team/stats", "/v1/users/ada/stats", "/v1/users/team%2Fbob/stats"):
        assert svc.error(http.get(elsewhere, headers=team), 403)["type"] == "forbidden", elsewhere
    assert svc.ok(http.get("/v1/users/ada/stats", headers=svc.ada))["facts"] == 0


def test_paths_and_query_parameters_that_are_not_utf8_are_400(svc):
    """A user id or a query parameter that is not UTF-8 once decoded is 400 naming it, not a scope of
    U+FFFD."""
    path = asgi(svc.app, "GET", "/v1/users/%FF/stats", headers=[key_header(svc.admin)])
    assert path.status == 400
    assert {k: path.json()["error"][k] for k in ("type", "field")} == {"type": "malformed_path", "field": "user_id"}
    for query, field in ((b"agent_id=%FF", "agent_id"), (b"limit=1&session_id=%C3%28", "session_id"),
                         (b"=%FF", "query"), (b"%FF=1", "\ufffd")):
        answer = asgi(svc.app, "GET", "/v1/users/ada/stats", headers=[key_header(svc.ada)], query=query)
        assert answer.status == 400, query
        error = answer.json()["error"]
        assert (error["type"], error["field"]) == ("malformed_query", field), query
    fine = asgi(svc.app, "GET", "/v1/users/ada/stats", headers=[key_header(svc.ada)], query=b"agent_id=caf%C3%A9+x")
    assert fine.status == 200 and fine.json()["user_id"] == "ada"


def test_mcp_acts_for_the_key_user_or_the_user_an_admin_names(make_service):
    """``/mcp`` acts for the key's user (scoped by ``agent_id``), or for the user an admin key names in
    ``X-User-Id``; any other naming is refused."""
    svc = make_service(mcp=True)
    accept = {"Accept": "application/json, text/event-stream"}

    def remember(text: str) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "remember", "arguments": {"text": text}}}

    http = svc.http
    as_ada = svc.ok(http.post("/mcp", json=remember("I like sencha"), headers={**svc.ada, **accept}))
    assert as_ada["result"]["structuredContent"]["text"] == "I like sencha"
    same = svc.ok(http.post("/mcp", json=remember("I like oolong"), headers={**svc.ada, **accept, "X-User-Id": "ada"}))
    assert not same["result"]["isError"]
    svc.ok(http.post("/mcp?agent_id=helper", json=remember("I like rooibos"),
                     headers={**svc.admin, **accept, "X-User-Id": "bob"}))
    refused = svc.ok(http.post("/mcp", json=remember(" "), headers={**svc.ada, **accept}))["result"]
    assert refused["isError"] and refused["structuredContent"]["error"]["field"] == "text"

    assert {f["text"] for f in svc.ok(http.get("/v1/users/ada/facts", headers=svc.ada))["facts"]} == {
        "I like sencha", "I like oolong"}
    assert [f["text"] for f in svc.ok(http.get("/v1/users/bob/facts", headers=svc.bob))["facts"]] == ["I like rooibos"]
    assert svc.ok(http.get("/v1/users/bob/facts", params={"agent_id": "other"}, headers=svc.bob))["total"] == 0

    unnamed = svc.error(http.post("/mcp", json=remember("x"), headers={**svc.admin, **accept}), 400)
    assert (unnamed["type"], unnamed["field"]) == ("invalid", "x-user-id")
    other = svc.error(http.post("/mcp", json=remember("x"), headers={**svc.ada, **accept, "X-User-Id": "bob"}), 403)
    assert other["type"] == "forbidden" and "bob" not in other["message"]
    assert svc.error(http.post("/mcp", json=remember("x"), headers=accept), 401)["field"] == "authorization"
    not_utf8 = asgi(svc.app, "POST", "/mcp", headers=[key_header(svc.admin), (b"x-user-id", b"\xff")],
                    chunks=[json.dumps(remember("x")).encode()])
    assert not_utf8.status == 400 and not_utf8.json()["error"]["type"] == "malformed_path"
    assert svc.stats("bob")["facts"] == 1


# -- body limits and the body timeout ---------------------------------------------------------------------------

@FUNCTION_FIXTURE
@given(size=st.one_of(st.integers(0, 100), st.integers(BODY_LIMIT - 3, BODY_LIMIT + 3), st.integers(5000, 9000)),
       cuts=st.lists(st.integers(1, 9000), max_size=3), declared=st.booleans())
def test_a_body_over_the_limit_is_413_however_it_arrives(svc, size, cuts, declared):
    """A body of ``size`` bytes (``Content-Length`` declared or not, in any parts) is refused with 413
    exactly when it is over ``max_body_bytes``, and the route does not run."""
    body = b'{"query": "' + b"q" * (size - 13) + b'"}' if size >= 14 else b"{" * size  # JSON from 14 bytes on
    assert len(body) == size
    points = sorted({min(c, size) for c in cuts} | {0, size})
    headers = [key_header(svc.ada), (b"content-type", b"application/json")]
    if declared:
        headers.append((b"content-length", str(size).encode()))
    answer = asgi(svc.app, "POST", "/v1/users/ada/recall", headers=headers,
                  chunks=[body[a:b] for a, b in itertools.pairwise(points)])
    if size > BODY_LIMIT:
        assert answer.status == 413, answer.body
        assert answer.json()["error"] == {"type": "too_large", "field": "body",
                                          "message": f"request body over {BODY_LIMIT} bytes",
                                          "request_id": answer.headers["x-request-id"]}
    else:
        assert answer.status == (200 if size >= 14 else 400), answer.body  # the route's answer


def test_a_content_length_that_is_not_a_number_is_refused(svc):
    """A ``Content-Length`` that is not a number is refused as too large before the route runs."""
    answer = asgi(svc.app, "POST", "/v1/users/ada/facts", chunks=[b'{"text": "I keep bees"}'],
                  headers=[key_header(svc.ada), (b"content-type", b"application/json"), (b"content-length", b"-1")])
    assert answer.status == 413 and answer.json()["error"]["type"] == "too_large"
    assert svc.stats()["facts"] == 0


def test_imports_have_their_own_body_limit(make_service):
    """``POST /import`` bodies are limited by ``max_import_bytes`` (declared or streamed), each line by
    ``max_body_bytes``."""
    svc = make_service(max_body_bytes=1024, max_import_bytes=2048)
    lines = b"\n".join([b"x" * 1000] * 3)  # every line within max_body_bytes, the body over max_import_bytes
    answer = asgi(svc.app, "POST", "/v1/users/ada/import", headers=[key_header(svc.ada)], chunks=[lines])
    assert answer.status == 413
    assert answer.json()["error"]["message"] == "request body over 2048 bytes"
    declared = asgi(svc.app, "POST", "/v1/users/ada/import", chunks=[b""],
                    headers=[key_header(svc.ada), (b"content-length", b"4000")])
    assert declared.status == 413
    within = asgi(svc.app, "POST", "/v1/users/ada/import", headers=[key_header(svc.ada)], chunks=[b"x" * 1500])
    assert within.status == 413 and within.json()["error"]["message"].startswith("line 1 of the import")


@pytest.mark.parametrize(("route", "first"), [("facts", b'{"text": "I keep'), ("import", b'{"kind": "header"')])
def test_a_body_that_stalls_is_408_and_closes_the_connection(make_service, route, first):
    """A body with no new part for ``body_timeout`` seconds is 408 ``timeout`` with ``Connection: close``,
    whether the route parses JSON or streams the body."""
    svc = make_service(body_timeout=0.2)
    answer = asgi(svc.app, "POST", f"/v1/users/ada/{route}", chunks=[first, b"never sent"], stall_after=1,
                  headers=[key_header(svc.ada), (b"content-type", b"application/json")])
    assert answer.status == 408, answer.body
    assert answer.headers["connection"] == "close"
    error = answer.json()["error"]
    assert (error["type"], error["field"]) == ("timeout", "body") and "0.2 s" in error["message"]
    assert svc.stats()["facts"] == 0


# -- settings ---------------------------------------------------------------------------------------------------

def test_settings_are_checked_when_the_app_is_made(tmp_path):
    """``create_app`` refuses bad settings naming the field; the app owns the memory and closes it at
    shutdown."""
    memory = UnifiedMemory(str(tmp_path / "m.db"), retrieval="lexical")
    for wrong, field in (({"trusted_proxies": ["10.0.0.0/8", "proxy.example"]}, "settings.trusted_proxies"),
                         ({"max_body_bytes": 10}, "settings.max_body_bytes"), ({"colour": "red"}, "settings.colour")):
        with pytest.raises(ConfigError) as refused:
            create_app(memory, settings=wrong)
        assert refused.value.field is not None and refused.value.field.startswith(field), refused.value.field
        with pytest.raises(ValidationError, match=r"'nope' \(item 1\) is not an IP address"):
            ServiceSettings(trusted_proxies=["*", "nope"])
    with pytest.raises(MemoryTypeError) as wrong_type:
        create_app(memory, settings=[("mcp", False)])  # type: ignore[arg-type]
    assert wrong_type.value.field == "settings"
    chosen = ServiceSettings(trusted_proxies=["*", "127.0.0.1", "::1", "10.0.0.0/8"], mcp=False)
    app = create_app(memory, settings=chosen)
    assert app.state.settings is chosen
    with TestClient(app) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert "/mcp" not in {getattr(r, "path", None) for r in app.routes}
    with pytest.raises(ClosedError):  # the app owned the memory: closed when it shut down
        memory.stats()


# -- the API's own documentation: offline, with the Bearer scheme and our error bodies -----------

def test_the_docs_page_loads_everything_from_the_service_itself(svc):
    """``/docs`` works without the internet: every script, style sheet and image it names is served
    here (no CDN), with its media type; ``/redoc`` (a CDN page) is not served."""
    http = svc.http
    page = http.get("/docs")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    named = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", page.text)
    assert named and all(url.startswith("/") and not url.startswith("//") for url in named), named
    assert "cdn" not in page.text.lower()
    for url in named:
        answer = http.get(url)
        assert answer.status_code == 200, url
        assert answer.headers["content-type"].split(";")[0] in ("text/javascript", "text/css", "image/png")
        assert len(answer.content) > 100
    assert http.get("/docs/assets/swagger-ui-bundle.js").text.lstrip().startswith("/*")
    assert http.get("/docs/assets/__init__.py").status_code == 404  # only the named files
    assert http.get("/docs/assets/..%2F..%2Fmain.py").status_code == 404
    assert http.get("/redoc").status_code == 404


def test_the_openapi_document_declares_the_bearer_key_and_our_error_bodies(svc):
    """Swagger's "Authorize" sends the key: the document declares the Bearer scheme, required by
    every operation but the open ones. Every operation under /v1 documents our refusals
    (``{"error": {type, field, message}}``), FastAPI's own 422 body nowhere."""
    spec = svc.http.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": spec["components"]["securitySchemes"]["bearer"]["description"]}
    assert spec["security"] == [{"bearer": []}]
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    error = spec["components"]["schemas"]["ErrorBody"]
    assert error["properties"]["error"]["$ref"].endswith("/ErrorDetail")
    assert set(spec["components"]["schemas"]["ErrorDetail"]["required"]) == {"type", "field", "message"}
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if path in ("/healthz", "/readyz"):
                assert operation["security"] == [], path
                continue
            assert path.startswith("/v1/"), path
            assert "security" not in operation  # the document's default: the Bearer key
            for status in ("400", "401", "403", "404", "409", "413", "422"):
                body = operation["responses"][status]["content"]["application/json"]["schema"]
                assert body == {"$ref": "#/components/schemas/ErrorBody"}, (method, path, status)
    refused = svc.http.post("/v1/users/ada/facts", json={"text": 1}, headers=svc.ada)
    assert refused.status_code == 422 and set(refused.json()["error"]) >= {"type", "field", "message"}


def test_the_profile_route_gives_the_users_key_facts_and_names_a_bad_moment(svc):
    http = svc.http
    svc.ok(http.post("/v1/users/ada/facts", json={"text": "I'm allergic to peanuts"}, headers=svc.ada), 201)
    svc.ok(http.post("/v1/users/ada/facts", json={"text": "I love jazz"}, headers=svc.ada), 201)
    svc.ok(http.post("/v1/users/bob/facts", json={"text": "I'm allergic to cats"}, headers=svc.bob), 201)
    profile = svc.ok(http.get("/v1/users/ada/profile", headers=svc.ada))
    assert [f["text"] for f in profile["facts"]][:1] == ["I'm allergic to peanuts"]
    assert "cats" not in profile["text"] and profile["text"].startswith("- I'm allergic to peanuts")
    assert svc.ok(http.get("/v1/users/ada/profile", params={"as_of": "2000-01-01"}, headers=svc.ada))["facts"] == []
    error = svc.error(http.get("/v1/users/ada/profile", params={"as_of": "yesterday-ish"}, headers=svc.ada), 422)
    assert error["field"] == "as_of"
    assert svc.error(http.get("/v1/users/bob/profile", headers=svc.ada), 403)["type"] == "forbidden"
