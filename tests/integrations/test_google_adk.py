"""unified_memory.integrations.google_adk.UnifiedMemoryService with the real google-adk, offline, on the
three memories (SQLite, PostgreSQL, the service): what ADK asks of a memory service (sessions and
event deltas added, more than once; search per app and user; direct memories; deletion), an ADK
``Runner`` whose agent finds an earlier session through ``load_memory`` or ``preload_memory``,
bad arguments, the install hint and the example."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator
from datetime import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("google.adk", reason="the google-adk extra")

from google.adk.agents import Agent  # noqa: E402
from google.adk.events.event import Event  # noqa: E402
from google.adk.memory import BaseMemoryService  # noqa: E402
from google.adk.memory.memory_entry import MemoryEntry  # noqa: E402
from google.adk.models import BaseLlm, LlmRequest, LlmResponse  # noqa: E402
from google.adk.runners import Runner  # noqa: E402
from google.adk.sessions import InMemorySessionService  # noqa: E402
from google.adk.sessions.session import Session  # noqa: E402
from google.adk.tools import load_memory, preload_memory  # noqa: E402
from google.genai import types  # noqa: E402

from unified_memory import MemoryTypeError, MemoryValueError, UnifiedMemory  # noqa: E402
from unified_memory.errors import PermissionDeniedError, StoreUnavailableError  # noqa: E402
from unified_memory.integrations.google_adk import UnifiedMemoryService  # noqa: E402

APP = "assistant"
MONDAY = 1_700_000_000.0  # 2023-11-14


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def said(event_id: str, author: str, text: str, *, when: float = MONDAY, **fields: Any) -> Event:
    role = "user" if author == "user" else "model"
    return Event(id=event_id, invocation_id="inv-1", author=author, timestamp=when,
                 content=types.Content(role=role, parts=[types.Part(text=text)]), **fields)


def parts(event_id: str, author: str, *items: types.Part, role: str = "model") -> Event:
    return Event(id=event_id, invocation_id="inv-1", author=author, timestamp=MONDAY,
                 content=types.Content(role=role, parts=list(items)))


def session(memory: Any, session_id: str, *events: Event, app: str = APP) -> Session:
    return Session(app_name=app, user_id=memory.user_id, id=session_id, events=list(events))


def search(service: UnifiedMemoryService, memory: Any, query: str, *, app: str = APP) -> list[MemoryEntry]:
    return run(service.search_memory(app_name=app, user_id=memory.user_id, query=query)).memories


def text(entry: MemoryEntry) -> str:
    return "".join(p.text or "" for p in entry.content.parts or [])


def logged(memory: Any, session_id: str | None = None, app: str = APP) -> list[tuple[Any, ...]]:
    return [(e.role, e.name, e.content, e.tool_call_id) for e in memory.scoped(agent_id=app).episodes(
        session_id=session_id)]


def test_a_session_is_logged_as_messages_and_search_answers_with_memory_entries(make_memory):
    memory = make_memory("ada")
    service = UnifiedMemoryService(memory, limit=5)
    assert isinstance(service, BaseMemoryService)
    call = types.FunctionCall(id="c1", name="note", args={"what": "sister"})
    answer = types.FunctionResponse(id="c1", name="note", response={"ok": True})
    recall = types.FunctionCall(id="c2", name="load_memory", args={"query": "sister"})
    events = [said("e1", "user", "My sister Maria lives in Lisbon"),
              parts("e2", "helper", types.Part(text="she likes port", thought=True), types.Part(text="Lovely city!")),
              parts("e3", "helper", types.Part(function_call=call)),
              parts("e4", "helper", types.Part(function_response=answer), role="user"),
              parts("e5", "helper", types.Part(function_call=recall)),  # the memory's own tool: not logged
              said("e6", "helper", "Lov", partial=True),  # a streamed fragment
              Event(id="e7", invocation_id="inv-1", author="user")]  # no content
    run(service.add_session_to_memory(session(memory, "monday", *events)))
    assert logged(memory, "monday") == [("user", None, "My sister Maria lives in Lisbon", None),
                                        ("assistant", "helper", "Lovely city!", None),
                                        ("assistant", "helper", None, None),
                                        ("tool", "note", '{"ok": true}', "c1")]
    episodes = memory.scoped(agent_id=APP).episodes(session_id="monday")
    assert episodes[2].tool_calls[0]["function"] == {"name": "note", "arguments": '{"what": "sister"}'}
    assert [e.metadata["google_adk"]["event_id"] for e in episodes] == ["e1", "e2", "e3", "e4"]
    assert {e.created_at.timestamp() for e in episodes} == {MONDAY}  # the event's time

    found = search(service, memory, "Where does my sister live?")
    assert 1 <= len(found) <= 5
    first = found[0]
    assert text(first) == "My sister Maria lives in Lisbon" and first.author == "user"
    assert first.content.role == "user" and first.id
    assert datetime.fromisoformat(first.timestamp).timestamp() == MONDAY
    assert first.custom_metadata["event_id"] == "e1" and first.custom_metadata["tier"] in (
        "long_term", "short_term", "episodic")
    reply = search(service, memory, "lovely city")[0]
    assert text(reply) == "Lovely city!" and reply.author == "helper" and reply.content.role == "model"
    assert search(service, memory, "   ") == []


def test_adding_a_session_again_logs_only_its_new_events_even_after_a_restart(make_memory):
    memory = make_memory("ada")
    service = UnifiedMemoryService(memory)
    first = [said("e1", "user", "I keep bees on the roof"), said("e2", "helper", "How many hives?")]
    for _ in range(3):  # ADK may add the session after every turn
        run(service.add_session_to_memory(session(memory, "s1", *first)))
    assert len(logged(memory, "s1")) == 2
    facts = len(memory.facts())
    changed = said("e1", "user", "I keep wasps")  # an event logged before stays as it was logged
    run(service.add_session_to_memory(session(memory, "s1", changed, first[1], said("e3", "user", "Three hives"))))
    assert [c for _, _, c, _ in logged(memory, "s1")] == ["I keep bees on the roof", "How many hives?", "Three hives"]

    again = make_memory("ada")  # a new process: what was logged is in the memory, not in the service
    restarted = UnifiedMemoryService(again)
    run(restarted.add_session_to_memory(session(again, "s1", *first, said("e3", "user", "Three hives"))))
    run(restarted.add_events_to_memory(app_name=APP, user_id=again.user_id, session_id="s1",
                                       events=[said("e3", "user", "Three hives"), said("e4", "user", "Acacia honey")],
                                       custom_metadata={"channel": "sms"}))
    assert [c for _, _, c, _ in logged(again, "s1")] == [
        "I keep bees on the roof", "How many hives?", "Three hives", "Acacia honey"]
    newest = again.scoped(agent_id=APP).episodes(session_id="s1")[-1]
    assert newest.metadata["google_adk"] == {"event_id": "e4", "author": "user", "invocation_id": "inv-1",
                                             "custom_metadata": {"channel": "sms"}}
    assert len(again.facts()) >= facts
    run(restarted.add_session_to_memory(session(again, "s2", first[0])))  # another session logs its own
    assert len(logged(again, "s2")) == 1
    run(restarted.add_session_to_memory(session(again, "s3")))  # no events: nothing to do
    assert logged(again, "s3") == []


class _Cut:
    """A memory whose write is cut short where the test says (``at``: ``"log"`` or ``"record"``)."""

    def __init__(self, inner: Any, at: str) -> None:
        self.inner, self.at = inner, at

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def scoped(self, **scope: Any) -> _Cut:
        return _Cut(self.inner.scoped(**scope), self.at)

    async def aadd_messages(self, *args: Any, **kwargs: Any) -> Any:
        if self.at == "log":
            raise StoreUnavailableError("cut before the log", field="url")
        return await self.inner.aadd_messages(*args, **kwargs)

    async def aput_item(self, namespace: Any, key: str, value: Any, **kwargs: Any) -> Any:
        if self.at == "record" and value["pending"] == []:  # the messages are logged; the record is not
            raise StoreUnavailableError("cut before the record", field="url")
        return await self.inner.aput_item(namespace, key, value, **kwargs)


@pytest.mark.parametrize("at", ["log", "record"])
def test_a_write_cut_short_is_settled_by_the_next_add(make_memory, at):
    memory = make_memory("ada")
    events = [said("e1", "user", "I keep bees on the roof"), said("e2", "helper", "Nice")]
    with pytest.raises(StoreUnavailableError):
        run(UnifiedMemoryService(_Cut(memory, at)).add_session_to_memory(session(memory, "s1", *events)))
    assert len(logged(memory, "s1")) == (0 if at == "log" else 2)
    run(UnifiedMemoryService(memory).add_session_to_memory(session(memory, "s1", *events)))
    assert [c for _, _, c, _ in logged(memory, "s1")] == ["I keep bees on the roof", "Nice"]  # once each


def test_apps_and_users_are_kept_apart(make_memory, memory_kind):
    ada, bob = make_memory("ada"), make_memory("bob")
    service = UnifiedMemoryService(ada)
    run(service.add_session_to_memory(session(ada, "g1", said("g", "user", "I keep bees on the roof"), app="garden")))
    run(service.add_session_to_memory(session(ada, "f1", said("f", "user", "My sister lives in Lisbon"), app="family")))
    assert not any("bees" in text(e) for e in search(service, ada, "bees on the roof", app="family"))
    assert any("bees" in text(e) for e in search(service, ada, "bees on the roof", app="garden"))
    shared = UnifiedMemoryService(ada, per_app=False)  # the user's apps share one memory
    assert any("bees" in text(e) for e in search(shared, ada, "bees on the roof", app="family"))

    bobs = UnifiedMemoryService(bob)
    run(bobs.add_session_to_memory(session(bob, "b1", said("b", "user", "I keep goats"), app="garden")))
    assert not any("goats" in text(e) for e in search(service, ada, "goats", app="garden"))
    assert not any("bees" in text(e) for e in search(bobs, bob, "bees on the roof", app="garden"))
    if memory_kind == "remote":  # ada's key: the service refuses bob's memories to it, reading and writing
        with pytest.raises(PermissionDeniedError):
            run(service.search_memory(app_name="garden", user_id=bob.user_id, query="goats"))
        with pytest.raises(PermissionDeniedError):
            run(service.add_session_to_memory(session(bob, "b2", said("x", "user", "I keep llamas"), app="garden")))
        assert [c for _, _, c, _ in logged(bob, None, "garden")] == ["I keep goats"]
    else:  # one file, several users: each call on its user's memory
        assert [text(e) for e in search(service, bob, "goats", app="garden")] == ["I keep goats"]
        assert not any("bees" in text(e) for e in search(service, bob, "bees on the roof", app="garden"))


def test_add_memory_stores_facts_and_delete_memory_forgets_one(make_memory):
    memory = make_memory("ada")
    service = UnifiedMemoryService(memory)
    entry = MemoryEntry(content=types.Content(parts=[types.Part(text="I prefer window seats")]), author="user",
                        custom_metadata={"importance": 0.9})
    for _ in range(2):  # a known fact is reinforced, not stored twice
        run(service.add_memory(app_name=APP, user_id=memory.user_id, memories=[entry],
                               custom_metadata={"category": "preference", "source": "crm"}))
    facts = [f for f in memory.scoped(agent_id=APP).facts() if f.text == "I prefer window seats"]
    assert len(facts) == 1 and facts[0].category == "preference" and facts[0].agent_id == APP
    assert facts[0].metadata["google_adk"]["custom_metadata"] == {"source": "crm"}
    hit = next(e for e in search(service, memory, "window seats") if text(e) == "I prefer window seats")
    assert hit.id == facts[0].id and hit.author == "user"
    run(service.delete_memory(app_name=APP, user_id=memory.user_id, memory_id=hit.id))
    assert not any(text(e) == "I prefer window seats" for e in search(service, memory, "window seats"))
    run(service.delete_memory(app_name=APP, user_id=memory.user_id, memory_id="fact_0000"))  # unknown: nothing
    run(service.delete_memory(app_name=APP, user_id=memory.user_id))  # no id: nothing

    run(service.add_session_to_memory(session(memory, "s1", said("e1", "user", "My locker code is 4471"))))
    message = memory.scoped(agent_id=APP).episodes(session_id="s1")[0]
    run(service.delete_memory(app_name=APP, user_id=memory.user_id, memory_id=message.id))
    run(service.add_session_to_memory(session(memory, "s1", said("e1", "user", "My locker code is 4471"))))
    assert logged(memory, "s1") == []  # a deleted event is not logged again


# --- what a search returns -------------------------------------------------------------------------


def test_search_returns_the_memories_that_match_the_query_themselves_and_fills_the_limit(make_memory):
    """A turn is searched with its neighbours (the memory's recall brings them along); a search
    returns only turns that match the query themselves, and still up to ``limit`` of them."""
    memory = make_memory("ada")
    service = UnifiedMemoryService(memory, limit=3, extract=False)
    events = [said("o", "user", "My orchid plant needs misting"), said("n", "helper", "Noted."),
              said("t", "user", "Thanks")]
    events += [said(f"p{i}", "user", f"I water the {name} plant on day {i}")
               for i, name in enumerate(["fern", "cactus", "basil", "ivy"])]
    run(service.add_session_to_memory(session(memory, "s1", *events)))
    recalled = memory.scoped(agent_id=APP).recall("orchid plant", limit=3, diversify=False)
    assert [h.text for h in recalled] == ["My orchid plant needs misting", "Noted.", "Thanks"]
    assert [h.components["own_match"] for h in recalled] == [True, False, False]  # came along with the orchid
    found = [text(e) for e in search(service, memory, "orchid plant")]
    assert len(found) == 3 and found[0] == "My orchid plant needs misting"
    assert all("plant" in line for line in found)
    assert [text(e) for e in search(service, memory, "noted")] == ["Noted."]


def test_search_ranks_by_relevance_without_pushing_restatements_down(make_memory):
    memory = make_memory("ada")
    said_ = ["Our flight to Oslo is booked.", "Booked.", "Our flight status to Oslo is booked."]
    run(UnifiedMemoryService(memory).add_session_to_memory(
        session(memory, "s1", *[said(f"e{i}", "user", line) for i, line in enumerate(said_)])))
    recalled = memory.scoped(agent_id=APP).recall("flight status booked")  # the memory's default: diversified
    assert [h.text for h in recalled] == ["Our flight status to Oslo is booked.", "Booked.",
                                          "Our flight to Oslo is booked."]
    assert recalled[2].components["redundancy_penalty"] > 0  # most of its words are the first's
    found = search(UnifiedMemoryService(memory), memory, "flight status booked")
    assert [text(e) for e in found] == ["Our flight status to Oslo is booked.", "Our flight to Oslo is booked.",
                                        "Booked."]
    scores = [e.custom_metadata["score"] for e in found]
    assert scores == sorted(scores, reverse=True)
    diverse = search(UnifiedMemoryService(memory, diversify=True), memory, "flight status booked")
    assert [text(e) for e in diverse] == [h.text for h in recalled]


class _Topics:
    """A stand-in embedder: one axis per topic. A dog is close to a pet (cosine 0.9); the chess
    club leans a little towards pets (cosine 0.2: weaker than the default ``min_similarity``)."""

    name, dim = "topics-3", 3

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        rows = []
        for line in texts:
            low = line.lower()
            rows.append([1.0, 0.0, 0.0] if "pet" in low else [0.9, 0.0, 0.436] if "dog" in low else
                        [0.2, 0.98, 0.0] if "chess" in low else [0.0, 0.0, 1.0])
        vectors = np.array(rows, dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_a_memory_found_by_meaning_alone_needs_min_similarity(make_memory, memory_kind):
    if memory_kind == "remote":
        pytest.skip("the module's service retrieves lexically: nothing is found by meaning alone")
    memory = make_memory("ada", retrieval="hybrid", embedder=_Topics())
    service = UnifiedMemoryService(memory, extract=False)
    run(service.add_session_to_memory(session(memory, "s1", said("d", "user", "Biscuit the dog loves the beach"))))
    run(service.add_session_to_memory(session(memory, "s2", said("c", "user", "Chess club meets on Sundays"))))
    recalled = memory.scoped(agent_id=APP).recall("Do I have a pet?")
    assert {h.text for h in recalled} == {"Biscuit the dog loves the beach", "Chess club meets on Sundays"}
    assert [text(e) for e in search(service, memory, "Do I have a pet?")] == ["Biscuit the dog loves the beach"]
    lenient = UnifiedMemoryService(memory, min_similarity=0.1)
    assert [text(e) for e in search(lenient, memory, "Do I have a pet?")] == [
        "Biscuit the dog loves the beach", "Chess club meets on Sundays"]
    strict = UnifiedMemoryService(memory, min_similarity=0.95)
    assert search(strict, memory, "Do I have a pet?") == []
    assert [text(e) for e in search(strict, memory, "chess club")] == ["Chess club meets on Sundays"]


# --- an ADK Runner whose agent finds an earlier session ------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


class _StandIn(BaseLlm):
    """Answers a question with the remembered line sharing the most words with it: from
    ``load_memory``'s answer to this question (calling it first) or from ``preload_memory``'s block."""

    model: str = "stand-in"

    async def generate_content_async(self, llm_request: LlmRequest,
                                     stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        contents = llm_request.contents
        questions = [i for i, c in enumerate(contents) if c.role == "user" and any(
            p.text and "PAST_CONVERSATIONS" not in p.text for p in c.parts or [])]
        asked = next((p.text for p in contents[questions[-1]].parts or [] if p.text), "") if questions else ""
        lines: list[str] | None = None
        for i, content in enumerate(contents):
            for part in content.parts or []:
                if part.function_response is not None and part.function_response.name == "load_memory":
                    if questions and i < questions[-1]:
                        continue  # the answer to an earlier question
                    result = part.function_response.response["result"]
                    lines = [text(m) for m in result.memories]
                elif part.text and "<PAST_CONVERSATIONS>" in part.text:
                    lines = part.text.split("<PAST_CONVERSATIONS>")[1].splitlines()
        if lines is None and asked.endswith("?") and "load_memory" in llm_request.tools_dict:
            call = types.FunctionCall(name="load_memory", args={"query": asked})
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))
            return
        words = set(_WORD.findall(asked.lower())) - {"where", "does", "my", "what", "is", "i"}
        best = max(lines or [""], key=lambda line: len(words & set(_WORD.findall(line.lower()))))
        answer = f"From memory: {best}" if words & set(_WORD.findall(best.lower())) else "Noted."
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=answer)]))


async def _turn(runner: Runner, user_id: str, session_id: str, message: str) -> str:
    answer = ""
    content = types.Content(role="user", parts=[types.Part(text=message)])
    async for event in runner.run_async(user_id=user_id, session_id=session_id, new_message=content):
        answer = "".join(p.text or "" for p in (event.content.parts or [] if event.content else [])) or answer
    return answer


@pytest.mark.parametrize("tool", [load_memory, preload_memory], ids=["load_memory", "preload_memory"])
def test_a_runner_agent_finds_an_earlier_session_through_the_memory_tools(make_memory, tool):
    memory = make_memory("ada")
    service = UnifiedMemoryService(memory, limit=4)

    async def remember_the_session(callback_context: Any) -> None:  # ADK's way: after each turn
        await callback_context.add_session_to_memory()

    agent = Agent(name="helper", model=_StandIn(), tools=[tool], after_agent_callback=remember_the_session)

    async def main() -> tuple[str, str]:
        sessions = InMemorySessionService()
        runner = Runner(app_name=APP, agent=agent, session_service=sessions, memory_service=service)
        await sessions.create_session(app_name=APP, user_id=memory.user_id, session_id="monday")
        await _turn(runner, memory.user_id, "monday", "My sister Maria lives in Lisbon")
        await _turn(runner, memory.user_id, "monday", "I'm allergic to peanuts")
        await sessions.create_session(app_name=APP, user_id=memory.user_id, session_id="tuesday")
        return (await _turn(runner, memory.user_id, "tuesday", "Where does my sister live?"),
                await _turn(runner, memory.user_id, "tuesday", "What am I allergic to?"))

    sister, allergy = run(main())
    assert sister.startswith("From memory: ") and "Maria lives in Lisbon" in sister
    assert allergy.startswith("From memory: ") and "allergic to peanuts" in allergy
    monday = [c for _, _, c, _ in logged(memory, "monday")]
    assert monday == ["My sister Maria lives in Lisbon", "Noted.", "I'm allergic to peanuts", "Noted."]  # once each


# --- arguments, the property, the install hint, the example ---------------------------------------


def test_bad_arguments_are_the_librarys_errors_naming_the_field():
    with UnifiedMemory() as mem:
        for kwargs, error, field in [(dict(memory=3), MemoryTypeError, "memory"),
                                     (dict(memory=mem, limit=0), MemoryValueError, "limit"),
                                     (dict(memory=mem, tiers=["nope"]), MemoryValueError, "tiers"),
                                     (dict(memory=mem, per_app="yes"), MemoryTypeError, "per_app"),
                                     (dict(memory=mem, extract="no"), MemoryTypeError, "extract"),
                                     (dict(memory=mem, log_tools=1), MemoryTypeError, "log_tools"),
                                     (dict(memory=mem, min_similarity=1.5), MemoryValueError, "min_similarity"),
                                     (dict(memory=mem, min_similarity="0.3"), MemoryTypeError, "min_similarity"),
                                     (dict(memory=mem, diversify="no"), MemoryTypeError, "diversify")]:
            with pytest.raises(error) as caught:
                UnifiedMemoryService(**kwargs)
            assert caught.value.field == field
        service = UnifiedMemoryService(mem)
        good = said("e1", "user", "hi")
        calls = [
            (service.add_session_to_memory({"id": "s"}), MemoryTypeError, "session"),
            (service.add_session_to_memory(Session(app_name=APP, user_id=" ada", id="s")), MemoryValueError,
             "session.user_id"),
            (service.add_session_to_memory(Session(app_name="", user_id="ada", id="s")), MemoryValueError,
             "session.app_name"),
            (service.add_session_to_memory(Session(app_name=APP, user_id="ada", id="s", events=[good, good]).model_copy(
                update={"events": [good, "hi"]})), MemoryTypeError, "session.events[1]"),
            (service.add_events_to_memory(app_name=APP, user_id="ada", events=good), MemoryTypeError, "events"),
            (service.add_events_to_memory(app_name=APP, user_id="ada", events=[good], session_id=""),
             MemoryValueError, "session_id"),
            (service.add_events_to_memory(app_name=APP, user_id="ada", events=[good], custom_metadata=[1]),
             MemoryTypeError, "custom_metadata"),
            (service.search_memory(app_name=APP, user_id="ada", query=3), MemoryTypeError, "query"),
            (service.search_memory(app_name=APP, user_id=None, query="x"), MemoryTypeError, "user_id"),
            (service.search_memory(app_name="a\x00", user_id="ada", query="x"), MemoryValueError, "app_name"),
            (service.add_memory(app_name=APP, user_id="ada", memories=["x"]), MemoryTypeError, "memories[0]"),
            (service.add_memory(app_name=APP, user_id="ada", memories=[MemoryEntry(content=types.Content(parts=[]))]),
             MemoryValueError, "memories[0].content"),
            (service.add_memory(app_name=APP, user_id="ada", memories=[MemoryEntry(
                content=types.Content(parts=[types.Part(text="x")]), custom_metadata={"importance": "high"})]),
             MemoryTypeError, "memories[0].importance"),
            (service.delete_memory(app_name=APP, user_id="ada", memory_id=7), MemoryTypeError, "memory_id"),
        ]
        for call, error, field in calls:
            with pytest.raises(error) as caught:
                run(call)
            assert caught.value.field == field, field
        assert mem.episodes() == [] and mem.facts() == []  # nothing half-written


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(adds=st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=1, max_size=6))
def test_each_event_is_logged_once_however_often_and_however_it_is_added(adds):
    """Adding prefixes of a session, whole or as event deltas, in any order and repeated, logs each
    event once, in the order it was first added."""
    events = [said(f"e{i}", "user" if i % 2 == 0 else "helper", f"message number {i}") for i in range(7)]
    with UnifiedMemory(extract_on_write=False) as mem:
        service = UnifiedMemoryService(mem, extract=False)
        expected: list[str] = []
        for upto, as_session in adds:
            chosen = events[:upto]
            if as_session:
                run(service.add_session_to_memory(session(mem, "s", *chosen)))
            else:
                run(service.add_events_to_memory(app_name=APP, user_id=mem.user_id, session_id="s", events=chosen))
            expected += [e.content.parts[0].text for e in chosen if e.content.parts[0].text not in expected]
        assert [c for _, _, c, _ in logged(mem, "s")] == expected


def test_the_example_agent_remembers_across_sessions(capsys, example):
    """``examples/google_adk_agent.py`` runs offline: Tuesday's new session answers from Monday's."""
    module = example("google_adk_agent")
    assert module.main(["google_adk_agent.py", "Where does my sister live?", "What am I allergic to?"]) == 0
    out = capsys.readouterr().out
    assert "tuesday> Where does my sister live?\n  From memory: My sister Maria lives in Lisbon" in out
    assert "From memory: I'm allergic to peanuts" in out.split("What am I allergic to?")[1]
