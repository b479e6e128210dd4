"""RemoteMemory against the real service (a child process on loopback): every method round-trips
with the library's own records and the same answers a local UnifiedMemory on the server's file
gives; the async twins; scoped views; errors mapped back to the library's classes; tenancy;
``@remember`` and the memory tools over it."""

from __future__ import annotations

import asyncio
import io
import json

import httpx
import pytest

from unified_memory import (
    AuthenticationError,
    ClosedError,
    ConflictError,
    ContextBlock,
    Entity,
    Episode,
    Fact,
    MemoryClient,
    MemoryStats,
    MemoryTypeError,
    MemoryValueError,
    NotFoundError,
    PermissionDeniedError,
    RecallHit,
    RemoteMemory,
    StoredItem,
    StoreUnavailableError,
    Triple,
    UnifiedMemory,
    memory_tools,
    remember,
)
from unified_memory.coordinator.async_api import ASYNC_TWINS
from unified_memory.remote import wire
from unified_memory.service.background import free_port

# the calls the service offers (UnifiedMemory's others need the file: consolidate, ingest, neighbors, ...)
OFFERED = {"add_turn", "add_message", "add_messages", "remember", "remember_many", "add_triple", "recall", "context",
           "assemble_context", "facts", "count_facts", "entities", "triples", "episodes", "stats", "profile", "users", "export_jsonl",
           "import_jsonl", "forget", "put_item", "get_item", "delete_item", "search_items", "item_namespaces"}


@pytest.fixture(scope="module")
def keys(service):
    return {"ada": service.create_key("ada"), "bob": service.create_key("bob"), "cy": service.create_key("cy"),
            "admin": service.create_key(admin=True)}


def remote(service, key, **scope):
    return RemoteMemory(service.url, key, timeout=30, **scope)


def local(service, user):
    """The server's own file, opened here (what a local UnifiedMemory answers for the same writes)."""
    return UnifiedMemory(service.db, user_id=user, retrieval="lexical")


def rows(text: str) -> list[dict]:
    """An export's row lines (the header, with its time, left out)."""
    return [json.loads(line) for line in text.splitlines()[1:]]


@pytest.mark.slow
def test_every_method_round_trips_with_the_answers_of_a_local_memory(service, keys, tmp_path):
    with remote(service, keys["ada"], user_id="ada") as mem:
        assert isinstance(mem, MemoryClient) and mem.user_id == "ada" and mem.path is None
        turn = mem.add_turn("I live in Lisbon", "Nice", when="2024-01-02T10:00:00Z", metadata={"via": "test"})
        one = mem.add_message("user", "My sister Maria lives in Porto", name="Ada")
        two = mem.add_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hey"}])
        fact = mem.remember("I keep bees", importance=0.8, category="hobby", metadata={"topic": "bees"})
        many = mem.remember_many(["I like jazz", {"text": "I drink green tea", "importance": 0.4}])
        triple = mem.add_triple("Maria", "works_at", "Acme", confidence=0.9)
        assert len(turn) == 2 and one.startswith("msg_") and len(two) == 2
        assert fact.startswith("fact_") and len(many) == 2 and triple.startswith("tri_")
        assert mem.add_messages([]) == [] and mem.remember_many([]) == []

        with local(service, "ada") as here:
            facts = mem.facts()
            assert facts and all(isinstance(f, Fact) for f in facts)
            assert facts == here.facts()
            assert mem.facts(order="importance", limit=2) == here.facts(order="importance", limit=2)
            assert mem.facts(category="hobby") == here.facts(category="hobby") != []
            assert mem.entities() == here.entities() and all(isinstance(e, Entity) for e in mem.entities())
            assert mem.entities(limit=2) == here.entities(limit=2)
            assert mem.triples() == here.triples() and all(isinstance(t, Triple) for t in mem.triples())
            assert mem.triples("Maria") == here.triples("Maria") != []
            assert mem.episodes() == here.episodes() and all(isinstance(e, Episode) for e in mem.episodes())
            assert mem.episodes(limit=2) == here.episodes(limit=2)
            stats = mem.stats()
            assert isinstance(stats, MemoryStats) and stats == here.stats().model_copy(update={"path": None})
            block = mem.context(max_tokens=300)  # no query: recall touches nothing, so both read the same
            assert isinstance(block, ContextBlock) and block == here.context(max_tokens=300)
            assert mem.assemble_context(300) == here.assemble_context(300)

            hits = mem.recall("bees", tiers="long_term", as_of="2100-01-01")
            assert hits and all(isinstance(h, RecallHit) for h in hits)
            assert hits == here.recall("bees", tiers="long_term", as_of="2100-01-01")
            assert [h.id for h in hits] == [fact]
            assert [h.id for h in mem.recall("bees", where={"topic": "bees"})] == [fact]
            assert mem.recall("bees", where={"topic": "wasps"}) == []
            found = {(h.id, h.tier, h.text) for h in mem.recall("Maria Porto Lisbon", limit=20)}
            assert found == {(h.id, h.tier, h.text) for h in here.recall("Maria Porto Lisbon", limit=20)}
            assert "bees" in mem.context("what do I keep? bees", max_tokens=200).text

        # export: to a text stream and to a path (the same rows as the local export), then import elsewhere
        stream = io.StringIO()
        count = mem.export_jsonl(stream)
        with local(service, "ada") as here:
            expected = io.StringIO()
            assert here.export_jsonl(expected) == count > 0
        assert rows(stream.getvalue()) == rows(expected.getvalue())
        path = tmp_path / "ada.jsonl"
        assert mem.export_jsonl(path) == count and rows(path.read_text()) == rows(stream.getvalue())
        copy = remote(service, keys["cy"], user_id="cy")
        assert copy.import_jsonl(path) > 0 and copy.import_jsonl(io.StringIO(stream.getvalue())) == 0
        assert [f.text for f in copy.facts()] == [f.text for f in mem.facts()]

        # forgetting: one fact (all or nothing), then everything of a user
        with pytest.raises(NotFoundError) as caught:
            mem.forget(ids=[fact, "fact_not_there"])
        assert caught.value.field == "ids" and fact in {f.id for f in mem.facts()}
        assert mem.forget(ids=[fact])["facts"] == 1 and fact not in {f.id for f in mem.facts()}
        # any of the user's items, several at once, in one transaction: a turn's messages and an entity
        turn = mem.add_turn("My neighbour Quentin plays the oboe", "Nice")
        quentin = next(e.id for e in mem.entities() if e.name == "Quentin")
        gone = mem.forget(ids=[*turn, quentin])
        assert gone["messages"] == 2 and gone["entities"] >= 1
        assert not [e for e in mem.episodes() if "Quentin" in (e.content or "")]
        assert "Quentin" not in [e.name for e in mem.entities()]
        assert copy.forget()["facts"] > 0 and copy.stats().facts == 0 and copy.facts() == []
        copy.close()


def test_facts_pages_through_the_service(service, keys):
    with remote(service, keys["bob"], user_id="bob") as mem:
        mem.remember_many([f"Note number {i} is about topic {i}" for i in range(wire.PAGE + 5)])
        every = mem.facts(include_archived=True)  # (long_term_limit archives the oldest beyond 1000)
        stats = mem.stats()
        assert len(every) == wire.PAGE + 5 == stats.facts + stats.archived_facts
        assert len({f.id for f in every}) == len(every)
        assert mem.facts(include_archived=True, limit=wire.PAGE + 2) == every[:wire.PAGE + 2]
        assert mem.facts(include_archived=True, offset=wire.PAGE - 1, limit=3) == every[wire.PAGE - 1:wire.PAGE + 2]
        assert mem.facts(include_archived=True, offset=3) == every[3:]
        assert mem.count_facts(include_archived=True) == len(every) and mem.count_facts() == stats.facts
        with local(service, "bob") as here:
            assert every == here.facts(include_archived=True)
        mem.forget()


def test_async_twins(service, keys):
    twins = {n for n in dir(RemoteMemory) if n.startswith("a") and n[1:] in ASYNC_TWINS}
    assert twins == {ASYNC_TWINS[n] for n in OFFERED}
    assert all(hasattr(RemoteMemory, n) for n in OFFERED)

    async def main() -> None:
        async with remote(service, keys["cy"], user_id="cy", session_id="async") as mem:
            ids = await mem.aadd_turn("I live in Lisbon", "Nice")
            assert len(ids) == 2 and (await mem.aadd_message("user", "hello"))
            assert len(await mem.aadd_messages([{"role": "user", "content": "hi"}])) == 1
            fact = await mem.aremember("I keep bees")
            assert len(await mem.aremember_many(["I like jazz", "I drink tea"])) == 2
            assert (await mem.aadd_triple("Maria", "lives_in", "Porto")).startswith("tri_")
            results = await asyncio.gather(*(mem.arecall("bees", tiers="long_term") for _ in range(8)))
            assert all([h.id for h in r] == [fact] for r in results)
            assert "bees" in (await mem.acontext("bees?", max_tokens=200)).text
            assert await mem.aassemble_context(300) == mem.assemble_context(300)
            assert await mem.afacts() == mem.facts() and len(await mem.afacts(limit=1)) == 1
            assert await mem.aentities() == mem.entities() and await mem.atriples() == mem.triples()
            assert await mem.aepisodes() == mem.episodes() and await mem.astats() == mem.stats()
            out = io.StringIO()
            assert await mem.aexport_jsonl(out) == mem.export_jsonl(io.StringIO())
            assert await mem.aimport_jsonl(io.StringIO(out.getvalue())) == 0
            assert (await mem.aforget(ids=[fact]))["facts"] == 1
            with pytest.raises(PermissionDeniedError):
                await mem.ausers()
            with pytest.raises(MemoryValueError) as caught:
                await mem.arecall("bees", limit=0)
            assert caught.value.field == "limit"
            assert (await mem.aforget())["facts"] >= 2 and await mem.afacts() == []

    asyncio.run(main())
    asyncio.run(main())  # a second event loop: a fresh async client


def test_scoped_views_share_the_connection(service, keys):
    mem = remote(service, keys["admin"], user_id="ada")
    session = mem.scoped(session_id="s-2", agent_id="helper")
    assert (session.user_id, session.agent_id, session.session_id) == ("ada", "helper", "s-2")
    session.add_turn("only in session two")
    assert [m.content for m in session.episodes(session_id="s-2")] == ["only in session two"]
    assert "only in session two" in session.context(max_tokens=200).text
    assert "only in session two" not in mem.context(max_tokens=200).text  # another conversation's window
    other = mem.scoped(user_id="bob")
    assert other.user_id == "bob" and other.stats().user_id == "bob"
    other.remember("I am bob")
    assert "ada" in mem.users() and "bob" in mem.users()
    with pytest.raises(MemoryValueError) as caught:
        mem.scoped(user_id="")
    assert caught.value.field == "user_id"
    mem.close()
    with pytest.raises(ClosedError):
        session.stats()


def test_errors_map_to_the_library_classes(service, keys):
    with remote(service, keys["ada"], user_id="ada") as mem:
        for call, kind, field in [
                (lambda: mem.recall("x", tiers="bogus"), MemoryValueError, "tiers"),
                (lambda: mem.recall(3), MemoryTypeError, "query"),
                (lambda: mem.remember("x", importance=2), MemoryValueError, "importance"),
                (lambda: mem.remember_many(["ok", {"text": ""}]), MemoryValueError, "texts_or_facts[1].text"),
                (lambda: mem.add_message("robot", "hi"), MemoryValueError, "message.role"),
                (lambda: mem.add_turn("hi", extractor=object()), MemoryValueError, "extractor"),
                (lambda: mem.forget(ids=["msg_1"]), NotFoundError, "ids"),
                (lambda: mem.export_jsonl(io.StringIO(), all_users=True), MemoryValueError, "all_users"),
                (lambda: mem.remember("x" * (3 << 20)), MemoryValueError, "body"),  # the service's 413
                (lambda: mem.import_jsonl(io.StringIO("not json\n")), MemoryValueError, "source")]:
            with pytest.raises(kind) as caught:
                call()
            assert caught.value.field == field, (caught.value.field, str(caught.value))
        # a conflicting import (a fact's id with other text) is the service's 409
        mem.remember("I keep bees")
        out = io.StringIO()
        mem.export_jsonl(out)
        changed = out.getvalue().replace("I keep bees", "I keep wasps")
        with pytest.raises(ConflictError) as conflict:
            mem.import_jsonl(io.StringIO(changed))
        assert conflict.value.field and "wasps" not in [f.text for f in mem.facts()]
        with pytest.raises(PermissionDeniedError) as caught:
            mem.users()
        assert isinstance(caught.value, PermissionError)
    with remote(service, "um_not_a_key", user_id="ada") as stranger:
        with pytest.raises(AuthenticationError) as caught:
            stranger.stats()
        assert caught.value.field == "api_key" and isinstance(caught.value, PermissionError)
    with RemoteMemory(f"http://127.0.0.1:{free_port()}", "um_key", user_id="ada", timeout=2) as nowhere:
        with pytest.raises(StoreUnavailableError) as caught:
            nowhere.stats()
        assert caught.value.field == "url" and "127.0.0.1" in str(caught.value)
    for bad, field in [(dict(url="ftp://x"), "url"), (dict(api_key="two words"), "api_key"),
                       (dict(timeout=0), "timeout"), (dict(user_id=".."), "user_id")]:
        with pytest.raises(MemoryValueError) as caught:
            RemoteMemory(**{"url": service.url, "api_key": "um_key", **bad})
        assert caught.value.field == field


def test_error_answers_of_the_service_map_by_status():
    url = "http://127.0.0.1:1"
    body = {"error": {"type": "invalid", "field": "facts[0].text", "message": "facts[0].text: Input should be a "
                      "valid string"}}
    error = wire.error_from(422, body, url)
    assert type(error) is MemoryTypeError and error.field == "texts_or_facts[0].text"
    assert str(error).startswith("texts_or_facts[0].text: ")
    value = wire.error_from(422, {"error": {"type": "invalid", "field": "limit", "message": "limit: must be at "
                                            "least 1, got 0"}}, url)
    assert type(value) is MemoryValueError and value.field == "limit"
    assert type(wire.error_from(400, {"error": {"type": "malformed_json", "field": "body", "message": "x"}},
                                url)) is MemoryValueError
    assert type(wire.error_from(429, {"error": {"type": "too_many_attempts", "message": "retry"}},
                                url)) is AuthenticationError
    unavailable = wire.error_from(503, "down", url)
    assert type(unavailable) is StoreUnavailableError and url in str(unavailable)


def test_another_users_key_reveals_nothing_and_writes_nothing(service, keys):
    with remote(service, keys["ada"], user_id="ada") as ada:
        secret = ada.remember("My locker code is 4711")
        before = ada.stats()
    with remote(service, keys["bob"], user_id="ada") as bob_as_ada:
        for call in (lambda: bob_as_ada.recall("locker code"), lambda: bob_as_ada.facts(),
                     lambda: bob_as_ada.remember("I am ada now"), lambda: bob_as_ada.forget(),
                     lambda: bob_as_ada.forget(ids=[secret]), lambda: bob_as_ada.export_jsonl(io.StringIO()),
                     lambda: bob_as_ada.context("locker")):
            with pytest.raises(PermissionDeniedError) as caught:
                call()
            assert "4711" not in str(caught.value) and "locker" not in str(caught.value)
            assert caught.value.field == "user_id"
    with remote(service, keys["ada"], user_id="ada") as ada:
        assert ada.stats() == before and secret in {f.id for f in ada.facts()}


def _agent(store):
    prompts: list[str] = []

    @remember(store, top_k=5)
    class Assistant:
        system_prompt = "You are a helpful assistant."

        def run(self, message: str, *, user_id: str = "default") -> str:
            prompts.append(self.system_prompt)
            return f"Noted: {message}"

    return Assistant, prompts


def test_remember_decorator_over_remote_memory(service, keys):
    with remote(service, keys["admin"], user_id="default") as mem:
        Assistant, prompts = _agent(mem)
        agent = Assistant()
        agent.run("My name is Ada and I'm allergic to peanuts", user_id="dana")
        agent.run("What should I cook tonight? Any peanut dishes?", user_id="dana")
        assert "allergic to peanuts" in prompts[-1] and prompts[-1].endswith("You are a helpful assistant.")
        assert agent.system_prompt == "You are a helpful assistant."
        with local(service, "dana") as here:  # recorded on the server, in the user's own memory
            assert any("allergic to peanuts" in f.text for f in here.facts())
            assert [e.content for e in here.episodes()][:2] == ["My name is Ada and I'm allergic to peanuts",
                                                                 "Noted: My name is Ada and I'm allergic to peanuts"]
        assert mem.scoped(user_id="default").facts() == []

        @remember(mem)
        class AsyncAgent:
            system_prompt = ""

            async def arun(self, message: str, *, user_id: str = "default") -> str:
                return self.system_prompt

        answer = asyncio.run(AsyncAgent().arun("peanuts for dinner?", user_id="dana"))
        assert "allergic to peanuts" in answer


def test_remember_decorator_reports_a_server_failure_without_breaking_the_agent(service, caplog):
    seen = []
    with RemoteMemory(f"http://127.0.0.1:{free_port()}", "um_key", timeout=2) as down:
        @remember(down, on_error=lambda stage, exc: seen.append((stage, type(exc).__name__)))
        class Quiet:
            def run(self, message: str) -> str:
                return "still answers"

        assert Quiet().run("hello") == "still answers"
    assert seen == [("recall", "StoreUnavailableError"), ("extract", "StoreUnavailableError")]
    logged = [r.getMessage() for r in caplog.records if r.name == "unified_memory.remote"]  # report_failure
    assert any(m.startswith("agent failed for user 'default': recall: StoreUnavailableError") for m in logged)


def test_memory_tools_over_remote_memory(service, keys):
    with remote(service, keys["admin"], user_id="erin") as mem:
        remember_fact, recall = memory_tools(mem)
        assert remember_fact('{"text": "I am allergic to shellfish", "importance": 0.9}') == \
            "Remembered: I am allergic to shellfish"
        assert remember_fact(text="I am allergic to shellfish").endswith("(already known, reinforced)")
        answer = recall(query="shellfish", tiers=["long_term"])
        assert answer.startswith("1. [fact, ") and "I am allergic to shellfish" in answer and "fact_" not in answer
        with pytest.raises(MemoryValueError) as caught:
            recall(query="")
        assert caught.value.field == "arguments.query"


def test_a_user_id_with_a_slash_is_addressed_and_kept_apart(service, keys):
    """"team/alice" travels as ``team%2Falice``: one user, not the path of user "team"."""
    key = service.create_key("team/alice")
    with remote(service, key, user_id="team/alice") as alice, remote(service, keys["admin"], user_id="team") as team:
        made = alice.remember("I keep bees on the roof")
        assert [h.text for h in alice.recall("bees")] == ["I keep bees on the roof"]
        assert [f.id for f in alice.facts()] == [made] and alice.stats().facts == 1
        assert team.recall("bees") == [] and team.facts() == []  # the user "team" is another user
        with pytest.raises(PermissionError):  # alice's key does not reach "team"
            alice.scoped(user_id="team").recall("bees")
        assert sum(alice.forget(ids=[made]).values()) >= 1 and alice.facts() == []
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {key}"}) as http:
        assert http.post("/v1/users/team%2Falice/turns", json={"user": "I moved to Porto"}).status_code == 201
        assert http.get("/v1/users/team/alice/stats").status_code == 403  # unencoded: the user "team", not hers
        gone = http.delete("/v1/users/team%2Falice")
        assert gone.status_code == 200, gone.text


def test_keyed_items_round_trip_with_the_answers_of_a_local_memory(service, keys):
    ada, bob = remote(service, keys["ada"], user_id="ada"), remote(service, keys["bob"], user_id="bob")
    with ada, bob:
        ada.put_item(("notes", "home"), "n1", {"text": "I keep bees", "n": 2}, ttl=60)
        ada.put_item(["notes", "work"], "n2", {"text": "Standup at nine", "n": 5}, index=["text"])
        bob.put_item(("notes", "home"), "n1", {"text": "Bob keeps wasps"})
        item = ada.get_item(("notes", "home"), "n1")
        assert isinstance(item, StoredItem) and item.value == {"text": "I keep bees", "n": 2}
        with local(service, "ada") as here:
            assert item == here.get_item(("notes", "home"), "n1", refresh_ttl=False)
            def shown(items):  # (the fused score's recency moves with the clock between the two calls)
                return [(i.model_dump(exclude={"ranking"}), i.ranking is None) for i in items]

            assert shown(ada.search_items(("notes",), query="bees")) == shown(
                here.search_items(("notes",), query="bees", refresh_ttl=False))
            assert ada.item_namespaces() == here.item_namespaces() == [("notes", "home"), ("notes", "work")]
        found = ada.search_items(("notes",), query="bees")
        assert [i.key for i in found] == ["n1", "n2"] and found[0].score and found[1].score == 0.0
        assert [i.key for i in ada.search_items((), filter={"n": {"$gt": 3}})] == ["n2"]
        assert ada.item_namespaces(suffix=("work",), max_depth=1) == [("notes",)]
        assert bob.get_item(("notes", "home"), "n1").value == {"text": "Bob keeps wasps"}
        assert ada.get_item(("nope",), "x") is None
        with pytest.raises(MemoryValueError) as caught:
            ada.put_item(("a.b",), "k", {})
        assert caught.value.field == "namespace[0]"
        with pytest.raises(PermissionDeniedError):
            ada.scoped(user_id="bob").get_item(("notes", "home"), "n1")

        async def twins() -> None:
            await ada.aput_item(("t",), "k", {"v": 1})
            assert (await ada.aget_item(("t",), "k")).value == {"v": 1}
            assert [i.key for i in await ada.asearch_items(("t",))] == ["k"]
            assert await ada.aitem_namespaces(prefix=("t",)) == [("t",)]
            assert await ada.adelete_item(("t",), "k") is True and await ada.adelete_item(("t",), "k") is False

        asyncio.run(twins())
        # vectors and a query vector travel, and so do a filter's infinities and NaN (JSON has none)
        ada.put_item(("v",), "a", {"text": "alpha", "p": 1.5}, vectors=[[1.0, 0.0], [0.0, 1.0]])
        ada.put_item(("v",), "b", {"text": "beta", "p": 9}, vectors=[[0.6, 0.8]])
        near = ada.search_items(("v",), query="zzz", query_vector=[0.0, 1.0], filter={"p": {"$lt": float("inf")}})
        assert [(i.key, round(i.score, 5)) for i in near] == [("a", 1.0), ("b", 0.8)]
        assert near[0].ranking["dense"] == pytest.approx(1.0)
        assert ada.search_items(("v",), filter={"p": float("nan")}) == []
        with local(service, "ada") as here:
            assert [i.score for i in here.search_items(("v",), query="zzz", query_vector=[0.0, 1.0])] == \
                [i.score for i in near]
        with pytest.raises(MemoryValueError) as caught:
            ada.put_item(("v",), "c", {}, vectors=[[1.0], [1.0, 2.0]])
        assert caught.value.field == "vectors[1]"
        assert ada.delete_item(("notes", "home"), "n1") is True and ada.get_item(("notes", "home"), "n1") is None
        assert ada.forget()["keyed_items"] == 3 and ada.item_namespaces() == []
        assert bob.item_namespaces() == [("notes", "home")]


@pytest.mark.slow
def test_thousands_of_gathered_async_calls_finish(service, keys):
    """An agent (LangGraph's store, a crew) may gather thousands of calls at once: they queue on the
    client, a few dozen in flight, instead of stalling httpx's pool until requests time out."""
    with RemoteMemory(service.url, keys["cy"], user_id="cy", timeout=10) as cy:
        cy.put_item(("many",), "k", {"v": 1})

        async def gathered() -> list:
            try:  # (without the client's limit on requests in flight: stalled for minutes, then timed out)
                return await asyncio.wait_for(asyncio.gather(*(cy.aget_item(("many",), "k") for _ in range(3000))),
                                              timeout=180)
            finally:
                await cy.aclose()

        found = asyncio.run(gathered())
    assert len(found) == 3000 and all(item.value == {"v": 1} for item in found)
