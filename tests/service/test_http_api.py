"""Every endpoint of the HTTP API, driven with httpx against the real server on loopback
(issue 17): what each one writes and answers, paging, scoping by agent / session, export and
import, forgetting, the operations routes and the OpenAPI document, request ids. Tenancy and
the limits are in test_http_access.py.

Each test works on users of its own, so the module can share one server.
"""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pytest

from tests.service.conftest import bearer
from unified_memory import UnifiedMemory

JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def admin(service) -> str:
    return service.create_key(admin=True)


def client_for(service, key: str) -> httpx.Client:
    return httpx.Client(base_url=service.url, headers=bearer(key), timeout=60)


def ok(answer: httpx.Response, status: int = 200) -> Any:
    assert answer.status_code == status, answer.text
    return answer.json()


# -- writing ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_turns_and_messages_round_trip_through_episodes(service):
    key = service.create_key("turner")
    with client_for(service, key) as http:
        turn = ok(http.post("/v1/users/turner/turns", json={
            "user": "I live in Lisbon", "assistant": "Noted", "when": "2024-03-01T12:00:00Z",
            "metadata": {"channel": "sms"}}), 201)["ids"]
        assert len(turn) == 2 and all(i.startswith("msg_") for i in turn)
        call = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}
        sent = [{"role": "user", "content": "Weather in Lisbon?"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "content": "sunny, 24C", "tool_call_id": "call_1", "name": "weather"},
                {"role": "assistant", "content": "It is sunny.", "metadata": {"model": "m1"}}]
        ids = ok(http.post("/v1/users/turner/messages", json={"messages": sent}), 201)["ids"]
        assert len(ids) == 4
        episodes = ok(http.get("/v1/users/turner/episodes"))["episodes"]
    assert [e["id"] for e in episodes] == turn + ids
    first, reply = episodes[0], episodes[1]
    assert (first["role"], first["content"], first["metadata"]) == ("user", "I live in Lisbon", {"channel": "sms"})
    assert first["created_at"].startswith("2024-03-01T12:00:00")
    assert (reply["role"], reply["content"]) == ("assistant", "Noted")
    by_id = {e["id"]: e for e in episodes}
    assert by_id[ids[1]]["tool_calls"] == [call] and by_id[ids[1]]["content"] is None
    assert (by_id[ids[2]]["tool_call_id"], by_id[ids[2]]["name"], by_id[ids[2]]["content"]) == (
        "call_1", "weather", "sunny, 24C")
    assert by_id[ids[3]]["metadata"] == {"model": "m1"}
    assert {e["user_id"] for e in episodes} == {"turner"}


def test_facts_paging_category_and_delete(service):
    key = service.create_key("pager")
    with client_for(service, key) as http:
        made = [ok(http.post("/v1/users/pager/facts", json={
            "text": f"Fact number {i} about gardening", "importance": 0.5, "category": "hobby" if i % 2 else "misc",
            "metadata": {"n": i}}), 201)["id"] for i in range(7)]
        one = ok(http.post("/v1/users/pager/facts", json={"text": "My cat is called Tom", "ttl_days": 30}), 201)["id"]
        every = ok(http.get("/v1/users/pager/facts", params={"limit": 1000}))
        assert every["total"] == 8 and every["next_offset"] is None
        assert {f["id"] for f in every["facts"]} == {*made, one}
        stored = {f["id"]: f for f in every["facts"]}
        assert stored[made[3]]["metadata"] == {"n": 3} and stored[made[3]]["category"] == "hobby"
        assert stored[one]["expires_at"] is not None
        pages, offset = [], 0
        while offset is not None:
            page = ok(http.get("/v1/users/pager/facts", params={"limit": 3, "offset": offset}))
            assert page["total"] == 8 and len(page["facts"]) <= 3
            pages.append([f["id"] for f in page["facts"]])
            offset = page["next_offset"]
        assert [len(p) for p in pages] == [3, 3, 2]
        assert [i for p in pages for i in p] == [f["id"] for f in every["facts"]]  # same order, no gaps
        beyond = ok(http.get("/v1/users/pager/facts", params={"offset": 50}))
        assert beyond == {"facts": [], "total": 8, "next_offset": None}
        hobby = ok(http.get("/v1/users/pager/facts", params={"category": "hobby"}))
        assert hobby["total"] == 3 and {f["category"] for f in hobby["facts"]} == {"hobby"}

        assert ok(http.post("/v1/users/pager/recall", json={"query": "cat Tom"}))["hits"][0]["id"] == one
        deleted = ok(http.delete(f"/v1/users/pager/facts/{one}"))["deleted"]
        assert deleted["facts"] == 1
        assert one not in {h["id"] for h in ok(http.post("/v1/users/pager/recall", json={"query": "cat Tom"}))["hits"]}
        assert ok(http.get("/v1/users/pager/facts"))["total"] == 7
        for unknown in (one, "fact_nope", "msg_0", "x"):
            gone = http.delete(f"/v1/users/pager/facts/{unknown}")
            assert gone.status_code == 404 and gone.json()["error"]["type"] == "not_found"
        assert ok(http.get("/v1/users/pager/facts"))["total"] == 7


def test_deleting_a_fact_takes_what_derives_from_it(service):
    """A fact extracted from a turn: deleting it leaves the turn, and recall no longer finds the fact."""
    key = service.create_key("deriver")
    with client_for(service, key) as http:
        ok(http.post("/v1/users/deriver/turns", json={"user": "My favourite colour is teal"}), 201)
        facts = ok(http.get("/v1/users/deriver/facts"))["facts"]
        assert len(facts) == 1
        fact = facts[0]["id"]
        assert fact in {h["id"] for h in ok(http.post("/v1/users/deriver/recall", json={
            "query": "favourite colour", "tiers": "long_term"}))["hits"]}
        assert ok(http.delete(f"/v1/users/deriver/facts/{fact}"))["deleted"]["facts"] == 1
        assert ok(http.post("/v1/users/deriver/recall", json={"query": "favourite colour",
                                                              "tiers": "long_term"}))["hits"] == []
        assert ok(http.get("/v1/users/deriver/stats"))["facts"] == 0
        assert len(ok(http.get("/v1/users/deriver/episodes"))["episodes"]) == 1


def test_forget_items_in_one_transaction(service):
    """``POST /forget``: messages, facts and entities of the user at once, and what derives from them;
    an unknown id or another user's id deletes nothing (404 naming ``ids``)."""
    key, other = service.create_key("forgetter"), service.create_key("bystander")
    with client_for(service, key) as http, client_for(service, other) as them:
        theirs = ok(them.post("/v1/users/bystander/facts", json={"text": "I keep bees"}), 201)["id"]
        turn = ok(http.post("/v1/users/forgetter/turns", json={"user": "My cousin Ottilie lives in Graz"}), 201)["ids"]
        fact = ok(http.post("/v1/users/forgetter/facts", json={"text": "I like lindy hop"}), 201)["id"]
        for ids in ([fact, "fact_nope"], [fact, theirs]):
            refused = http.post("/v1/users/forgetter/forget", json={"ids": ids})
            assert refused.status_code == 404 and refused.json()["error"]["field"] == "ids"
            assert "bees" not in refused.text
        assert len(ok(http.get("/v1/users/forgetter/facts"))["facts"]) == 2  # nothing deleted
        gone = ok(http.post("/v1/users/forgetter/forget", json={"ids": [*turn, fact]}))["deleted"]
        assert gone["messages"] == 1 and gone["facts"] == 2  # the turn's fact went with it
        assert ok(http.get("/v1/users/forgetter/episodes"))["episodes"] == []
        left = ok(http.post("/v1/users/forgetter/recall", json={
            "query": "cousin Ottilie Graz lindy hop", "tiers": ["long_term", "episodic", "short_term"]}))["hits"]
        assert left == []
        assert [f["id"] for f in ok(them.get("/v1/users/bystander/facts"))["facts"]] == [theirs]


def test_fact_batch_is_all_or_none(service):
    key = service.create_key("batcher")
    with client_for(service, key) as http:
        ids = ok(http.post("/v1/users/batcher/facts/batch", json={"facts": [
            "I keep bees", {"text": "I grow tomatoes", "importance": 0.9, "category": "garden"}]}), 201)["ids"]
        assert len(ids) == 2
        refused = http.post("/v1/users/batcher/facts/batch", json={"facts": [
            "I play chess", {"text": "I swim"}, {"text": ""}, "I ski"]})
        assert refused.status_code == 422
        assert refused.json()["error"]["field"] == "facts[2].text", refused.text
        refused = http.post("/v1/users/batcher/facts/batch", json={"facts": ["I row", {"text": "x", "importance": 7}]})
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "facts[1].importance", refused.text
        texts = [f["text"] for f in ok(http.get("/v1/users/batcher/facts"))["facts"]]
    assert sorted(texts) == ["I grow tomatoes", "I keep bees"]


def test_triples_and_entities(service):
    key = service.create_key("grapher")
    with client_for(service, key) as http:
        made = ok(http.post("/v1/users/grapher/triples", json={
            "subject": "Ada", "predicate": "works_at", "object": "Analytical Engines Ltd", "confidence": 0.8,
            "metadata": {"source": "cv"}}), 201)["id"]
        ok(http.post("/v1/users/grapher/triples", json={"subject": "Bob", "predicate": "knows", "object": "Carol"}), 201)
        every = ok(http.get("/v1/users/grapher/triples"))["triples"]
        assert {t["id"] for t in every} >= {made} and len(every) == 2
        ada = ok(http.get("/v1/users/grapher/triples", params={"entity": "Ada"}))["triples"]
        assert [(t["subject"], t["predicate"], t["object"], t["confidence"], t["metadata"]) for t in ada] == [
            ("Ada", "works_at", "Analytical Engines Ltd", 0.8, {"source": "cv"})]
        names = {e["name"] for e in ok(http.get("/v1/users/grapher/entities"))["entities"]}
        assert {"Ada", "Analytical Engines Ltd", "Bob", "Carol"} <= names
        assert len(ok(http.get("/v1/users/grapher/entities", params={"limit": 2}))["entities"]) == 2


# -- reading ---------------------------------------------------------------------------------

def test_recall_limit_tiers_days_where_and_as_of(service):
    key = service.create_key("recaller")
    with client_for(service, key) as http:
        ok(http.post("/v1/users/recaller/turns", json={"user": "I live in Lisbon", "when": "2024-01-01T00:00:00Z"}), 201)
        ok(http.post("/v1/users/recaller/turns", json={"user": "I live in Porto", "when": "2024-04-01T00:00:00Z"}), 201)
        for i in range(5):
            ok(http.post("/v1/users/recaller/facts", json={"text": f"I like jazz record {i}",
                                                           "metadata": {"shelf": "top" if i == 3 else "low"}}), 201)

        def recall(**body: Any) -> list[dict[str, Any]]:
            return ok(http.post("/v1/users/recaller/recall", json=body))["hits"]  # type: ignore[no-any-return]

        hits = recall(query="jazz record")
        assert hits and all(set(h) >= {"id", "tier", "text", "score", "components", "metadata", "created_at"}
                            for h in hits)
        assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
        assert len(recall(query="jazz record", limit=2)) == 2
        assert {h["tier"] for h in recall(query="jazz record", tiers=["long_term"])} == {"long_term"}
        assert {h["tier"] for h in recall(query="live", tiers="short_term")} == {"short_term"}
        assert [h["text"] for h in recall(query="jazz", where={"shelf": "top"}, tiers="long_term")] == [
            "I like jazz record 3"]
        assert [h["text"] for h in recall(query="where do I live?", tiers="long_term")][0] == "I live in Porto"
        assert [h["text"] for h in recall(query="where do I live?", tiers="long_term", as_of="2024-02-01")] == [
            "I live in Lisbon"]
        recent = {h["text"] for h in recall(query="live jazz", days=30)}
        assert "I live in Porto" not in recent and "I live in Lisbon" not in recent
        assert any("jazz" in t for t in recent)


def test_context_query_budget_and_conversation(service):
    key = service.create_key("contexter")
    with client_for(service, key) as http:
        for i in range(30):
            ok(http.post("/v1/users/contexter/facts", json={"text": f"Peanut allergy note {i}: avoid satay sauce"}), 201)
        ok(http.post("/v1/users/contexter/turns", json={"user": "Zebra crossing chat", "assistant": "Sure"}), 201)
        for budget in (30, 80, 400):
            block = ok(http.post("/v1/users/contexter/context", json={"query": "peanut", "max_tokens": budget}))
            assert block["tokens"] <= budget and block["max_tokens"] == budget
            assert set(block) >= {"text", "tokens", "sections", "hits"} and block["query"] == "peanut"
        assert "Peanut" in block["text"] and block["hits"]
        with_talk = ok(http.post("/v1/users/contexter/context", json={"max_tokens": 400}))
        without = ok(http.post("/v1/users/contexter/context", json={"max_tokens": 400, "include_conversation": False}))
        assert "Zebra crossing chat" in with_talk["text"]
        assert "Zebra crossing chat" not in without["text"]
        assert without["sections"].get("conversation", {"tokens": 0})["tokens"] == 0


def test_stats_counts_and_hides_the_path(service):
    key = service.create_key("counter")
    with client_for(service, key) as http:
        ok(http.post("/v1/users/counter/turns", json={"user": "hello", "assistant": "hi"}), 201)
        ok(http.post("/v1/users/counter/facts", json={"text": "I keep bees"}), 201)
        ok(http.post("/v1/users/counter/triples", json={"subject": "a", "predicate": "b", "object": "c"}), 201)
        stats = ok(http.get("/v1/users/counter/stats"))
    assert (stats["user_id"], stats["messages"], stats["facts"], stats["triples"]) == ("counter", 2, 1, 1)
    assert stats["path"] is None and str(service.db) not in json.dumps(stats)


# -- export, import, forgetting --------------------------------------------------------------

def _rows(jsonl: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in jsonl.splitlines() if line.strip()]
    return lines[0], lines[1:]


def test_export_import_and_conflicts(service, admin):
    key = service.create_key("exporter")
    with client_for(service, key) as http, client_for(service, admin) as root:
        ok(http.post("/v1/users/exporter/turns", json={"user": "I live in Lisbon", "assistant": "Nice"}), 201)
        ok(http.post("/v1/users/exporter/facts", json={"text": "I keep bees", "metadata": {"k": "v"}}), 201)
        ok(http.post("/v1/users/exporter/triples", json={"subject": "Ada", "predicate": "knows", "object": "Bob"}), 201)
        answer = http.get("/v1/users/exporter/export")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/x-ndjson")
        header, rows = _rows(answer.text)
        assert header["kind"] == "header" and header["users"] == ["exporter"]
        assert rows and all(set(r) == {"kind", "row"} and r["row"]["user_id"] == "exporter" for r in rows)
        assert {"messages", "facts", "triples"} <= {r["kind"] for r in rows}
        with UnifiedMemory(service.db, user_id="exporter", retrieval="lexical") as local:
            buffer = io.StringIO()
            count = local.export_jsonl(buffer)
        local_header, local_rows = _rows(buffer.getvalue())
        assert rows == local_rows and count == len(rows)
        assert {k: v for k, v in header.items() if k != "exported_at"} == {
            k: v for k, v in local_header.items() if k != "exported_at"}

        imported = ok(root.post("/v1/users/importer/import", content=answer.content), 200)["imported"]
        assert imported == len(rows)
        assert ok(root.post("/v1/users/importer/import", content=answer.content), 200)["imported"] == 0
        copied = ok(root.get("/v1/users/importer/facts"))["facts"]
        assert [(f["text"], f["metadata"]) for f in copied] == [
            (f["text"], f["metadata"]) for f in ok(http.get("/v1/users/exporter/facts"))["facts"]]
        assert [h["text"] for h in ok(root.post("/v1/users/importer/recall", json={
            "query": "bees", "tiers": "long_term"}))["hits"]] == ["I keep bees"]
        again_header, again = _rows(root.get("/v1/users/importer/export").text)
        assert len(again) == len(rows) and again_header["users"] == ["importer"]

        before = root.get("/v1/users/importer/export").text
        fact = next(r for r in again if r["kind"] == "facts")
        fact["row"]["text"] = "I keep wasps"  # the same id with other content
        conflicting = "\n".join(json.dumps(x) for x in [again_header, fact]) + "\n"
        refused = root.post("/v1/users/importer/import", content=conflicting.encode())
        assert refused.status_code == 409 and refused.json()["error"]["type"] == "conflict", refused.text
        assert _rows(root.get("/v1/users/importer/export").text)[1] == _rows(before)[1]


def test_forget_user_then_recall_is_empty(service, admin):
    key = service.create_key("forgetful")
    with client_for(service, key) as http, client_for(service, admin) as root:
        ok(http.post("/v1/users/forgetful/turns", json={"user": "My PIN is 4711", "assistant": "ok"}), 201)
        ok(http.post("/v1/users/forgetful/facts", json={"text": "I keep bees"}), 201)
        assert "forgetful" in ok(root.get("/v1/users"))["users"]
        deleted = ok(http.delete("/v1/users/forgetful"))["deleted"]
        assert deleted["messages"] == 2 and deleted["facts"] >= 1
        assert ok(http.post("/v1/users/forgetful/recall", json={"query": "PIN bees"}))["hits"] == []
        assert ok(http.get("/v1/users/forgetful/facts"))["total"] == 0
        assert ok(http.get("/v1/users/forgetful/episodes"))["episodes"] == []
        assert "forgetful" not in ok(root.get("/v1/users"))["users"]
        assert _rows(http.get("/v1/users/forgetful/export").text)[1] == []


def test_users_listing_is_for_admin_keys_only(service, admin):
    key = service.create_key("lister")
    with client_for(service, key) as http, client_for(service, admin) as root:
        ok(http.post("/v1/users/lister/facts", json={"text": "hello"}), 201)
        assert "lister" in ok(root.get("/v1/users"))["users"]
        refused = http.get("/v1/users")
        assert refused.status_code == 403 and "lister" not in refused.text
        assert refused.json()["error"]["type"] == "forbidden"


# -- scoping ---------------------------------------------------------------------------------

SCOPES: list[dict[str, str]] = [{}, {"agent_id": "bot1"}, {"agent_id": "bot2"}, {"session_id": "s1"},
                                {"agent_id": "bot1", "session_id": "s2"}]


def test_agent_and_session_parameters_scope_like_scoped(service, tmp_path):
    """The same writes through HTTP and through ``UnifiedMemory.scoped`` show the same things in every scope."""
    key = service.create_key("scoper")
    with client_for(service, key) as http, UnifiedMemory(tmp_path / "local.db", user_id="scoper",
                                                         retrieval="lexical") as local:
        for n, scope in enumerate(SCOPES):
            label = "-".join(scope.values()) or "base"
            ok(http.post("/v1/users/scoper/facts", params=scope, json={"text": f"beekeeping note {label}"}), 201)
            ok(http.post("/v1/users/scoper/turns", params=scope, json={"user": f"turn {n} about bees {label}"}), 201)
            view = local.scoped(user_id="scoper", **scope)
            view.remember(f"beekeeping note {label}")
            view.add_turn(f"turn {n} about bees {label}")
        for scope in SCOPES:
            view = local.scoped(user_id="scoper", **scope)
            facts = sorted(f["text"] for f in ok(http.get("/v1/users/scoper/facts", params=scope))["facts"])
            assert facts == sorted(f.text for f in view.facts()), scope
            hits = sorted(h["text"] for h in ok(http.post("/v1/users/scoper/recall", params=scope,
                                                          json={"query": "bees beekeeping", "limit": 50}))["hits"])
            assert hits == sorted(h.text for h in view.recall("bees beekeeping", limit=50)), scope
            episodes = [e["content"] for e in ok(http.get("/v1/users/scoper/episodes", params=scope))["episodes"]]
            assert episodes == [e.content for e in view.episodes()], scope
        stored = {f["text"]: f for f in ok(http.get("/v1/users/scoper/facts", params={"agent_id": "bot1"}))["facts"]}
        assert stored["beekeeping note bot1"]["agent_id"] == "bot1"
        bot2 = {f["text"] for f in ok(http.get("/v1/users/scoper/facts", params={"agent_id": "bot2"}))["facts"]}
        assert "beekeeping note bot1" not in bot2 and "beekeeping note bot2" in bot2


# -- operations ------------------------------------------------------------------------------

def test_health_readiness_docs_and_openapi(service):
    with httpx.Client(base_url=service.url) as http:
        assert ok(http.get("/healthz")) == {"status": "ok"}
        assert ok(http.get("/readyz")) == {"status": "ready"}
        docs = http.get("/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()
        spec = ok(http.get("/openapi.json"))
    documented = {(method.upper(), path) for path, item in spec["paths"].items() for method in item}
    expected = {("POST", f"/v1/users/{{user_id}}{p}") for p in (
        "/turns", "/messages", "/facts", "/facts/batch", "/triples", "/recall", "/context", "/import")}
    expected |= {("GET", f"/v1/users/{{user_id}}{p}") for p in (
        "/facts", "/entities", "/triples", "/episodes", "/stats", "/export")}
    expected |= {("DELETE", "/v1/users/{user_id}/facts/{fact_id}"), ("DELETE", "/v1/users/{user_id}"),
                 ("GET", "/v1/users"), ("GET", "/healthz"), ("GET", "/readyz")}
    assert expected <= documented, expected - documented
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            assert operation.get("summary"), (method, path)


def test_every_route_of_the_app_is_documented(service):
    from unified_memory.service.app import create_app
    from unified_memory.service.routes import admin_router, router

    with UnifiedMemory(retrieval="lexical") as memory:
        app = create_app(memory, settings={"mcp": False})
        every = [*app.routes, *router.routes, *admin_router.routes]
        routes = {(m, r.path) for r in every if getattr(r, "include_in_schema", False) and hasattr(r, "path")
                  for m in getattr(r, "methods", ()) if m != "HEAD"}
    spec = httpx.get(f"{service.url}/openapi.json").json()
    documented = {(method.upper(), path) for path, item in spec["paths"].items() for method in item}
    assert routes == documented


def test_request_id_is_echoed_and_generated(service):
    key = service.create_key("tracer")
    with client_for(service, key) as http:
        answer = http.get("/v1/users/tracer/stats", headers={"X-Request-ID": "trace-42.a:b"})
        assert answer.headers["x-request-id"] == "trace-42.a:b"
        refused = http.post("/v1/users/tracer/facts", json={"text": 1}, headers={"X-Request-ID": "trace-43"})
        assert refused.headers["x-request-id"] == "trace-43" and refused.json()["error"]["request_id"] == "trace-43"
        made = http.get("/healthz")
        assert len(made.headers["x-request-id"]) >= 16
        assert http.get("/healthz").headers["x-request-id"] != made.headers["x-request-id"]
        odd = http.get("/healthz", headers={"X-Request-ID": "bad id with spaces"}).headers["x-request-id"]
        assert odd != "bad id with spaces" and " " not in odd
    assert '"request_id": "trace-42.a:b"' in service.log()
