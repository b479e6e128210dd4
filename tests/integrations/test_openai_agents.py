"""The OpenAI Agents SDK session (unified_memory.integrations.openai_agents) with the real SDK,
offline, on the three memories (``make_memory``: SQLite, PostgreSQL, the service): what the SDK's
tests ask of its own sessions (items back in order, ``limit`` as the latest N however many items
there are, ``SessionSettings`` as the default limit and the ``RunConfig`` override, ``pop_item``
/ ``clear_session``, concurrent pops, separate sessions and users, the ``Runner`` carrying
history between runs, concurrent writers, unicode), then what this session adds: every kind of
item round-trips exactly, compaction never splits a tool call from its result and loses
nothing, turns reach the long-term tiers. Checks of arguments alone run on one memory."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the openai-agents extra")

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.memory import Session, SessionSettings  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

from unified_memory import MemoryTypeError, MemoryValueError, UnifiedMemory  # noqa: E402
from unified_memory.integrations.openai_agents import MemorySession  # noqa: E402

set_tracing_disabled(True)


def run(coro):
    return asyncio.run(coro)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: str, item_id: str = "msg_1") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Lisbon"}') -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments,
            "id": f"fc_{call_id}", "status": "completed"}


def result(call_id: str, output: str = "sunny") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


REASONING = {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Check the weather."}],
             "encrypted_content": "gAAAA-opaque"}
WEB_SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed",
              "action": {"type": "search", "query": "weather Lisbon"}}


class FakeModel(Model):
    """Calls ``get_weather`` when the newest user message asks about the weather, else answers
    with how many items it was sent (so a test sees the history the session gave the Runner)."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None, **_: Any):
        items = input if isinstance(input, list) else [user(input)]
        self.inputs.append(items)
        last = items[-1]
        if tools and last.get("type") != "function_call_output" and "weather" in json.dumps(last):
            output: list[Any] = [ResponseFunctionToolCall(id="fc_1", call_id=f"call_{len(self.inputs)}",
                                                          name="get_weather", arguments='{"city": "Lisbon"}',
                                                          type="function_call", status="completed")]
        else:
            output = [ResponseOutputMessage(id="msg_1", type="message", role="assistant", status="completed",
                                            content=[ResponseOutputText(type="output_text", annotations=[],
                                                                        text=f"seen {len(items)} items")])]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):
        raise NotImplementedError


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


_SESSIONS = itertools.count(1)
#: hypothesis on the three memories: one memory per test (a fixture), a session of its own per example
_EVERY_MEMORY = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def fresh(memory: Any, **options: Any) -> MemorySession:
    """A session no other example used."""
    return MemorySession(f"s{next(_SESSIONS)}", memory=memory, **options)


# -- what the SDK's own session tests ask, on every memory ----------------------------------------

def test_it_is_an_sdk_session_and_keeps_items_in_order(make_memory):
    session = MemorySession("s1", memory=make_memory())
    assert isinstance(session, Session)
    assert run(session.get_items()) == []
    items = [user("Hello"), reply("Hi there!"), user("How are you?"), reply("Fine.", "msg_2")]
    run(session.add_items(items))
    assert run(session.get_items()) == items
    run(session.add_items([]))  # nothing to add: nothing changes
    assert run(session.get_items()) == items


@settings(max_examples=12, **_EVERY_MEMORY)
@given(size=st.integers(0, 12), limit=st.none() | st.integers(-3, 16), default=st.none() | st.integers(0, 16))
@example(size=6, limit=10, default=None)  # fewer items than the limit, more than half of it
@example(size=6, limit=None, default=10)
@example(size=5, limit=2, default=4)
def test_limit_is_the_latest_n_items_however_many_there_are(make_memory, size, limit, default):
    """``get_items(limit)``: the latest ``limit`` items, all of them when there are fewer; 0:
    none; negative: all. ``limit=None`` takes ``session_settings.limit`` (None: all)."""
    session = fresh(make_memory(), session_settings={"limit": default}, extract=False)
    items = [user(f"message {i}") for i in range(size)]
    run(session.add_items(items))
    n = default if limit is None else limit
    expected = items if n is None or n < 0 else items[max(0, size - n):] if n else []
    assert run(session.get_items(limit)) == expected


def test_the_runner_takes_the_sessions_limit_and_a_run_configs_over_it(make_memory):
    model = FakeModel()
    agent = Agent(name="assistant", instructions="Be brief.", model=model)
    session = MemorySession("s1", memory=make_memory(), session_settings=SessionSettings(limit=3))
    run(session.add_items([user(f"turn {i}") for i in range(8)]))
    run(Runner.run(agent, "next", session=session))
    assert model.inputs[0] == [user("turn 5"), user("turn 6"), user("turn 7"), user("next")]
    run(Runner.run(agent, "again", session=session, run_config=RunConfig(session_settings=SessionSettings(limit=1))))
    assert [item.get("role") for item in model.inputs[1]] == ["assistant", "user"]  # the last reply, the new turn
    assert model.inputs[1][0]["content"][0]["text"] == "seen 4 items" and model.inputs[1][1] == user("again")


def test_pop_item_returns_the_newest_and_none_when_empty_and_clear_session_empties_it(make_memory):
    mem = make_memory()
    session = MemorySession("s1", memory=mem)
    assert run(session.pop_item()) is None
    run(session.add_items([user("one"), reply("two")]))
    assert run(session.pop_item()) == reply("two")
    assert run(session.get_items()) == [user("one")]
    run(session.clear_session())
    assert run(session.get_items()) == [] and run(session.pop_item()) is None
    run(session.add_items([user("three")]))
    assert run(session.get_items()) == [user("three")]
    # cleared, not forgotten: the memory still holds what was said (forget deletes it)
    assert "one" in [e.content for e in mem.episodes()]


def test_concurrent_pops_return_each_item_once(make_memory):
    """Two session objects on one session (two workers) popping at once: every item comes back
    exactly once, as from the SDK's SQLAlchemy session."""
    mem = make_memory()
    one, two = MemorySession("s1", memory=mem), MemorySession("s1", memory=mem)
    run(one.add_items([user(f"m{i}") for i in range(4)]))

    async def pop_at_once() -> list[Any]:
        return await asyncio.gather(*(session.pop_item() for session in (one, two, one, two, one)))

    popped = run(pop_at_once())
    assert sorted(item["content"] for item in popped if item is not None) == ["m0", "m1", "m2", "m3"]
    assert popped.count(None) == 1 and run(two.get_items()) == []


def test_sessions_and_users_are_apart_and_a_new_session_object_sees_the_same_items(make_memory):
    ada, bob = make_memory("ada"), make_memory("bob")
    run(MemorySession("a", memory=ada).add_items([user("in a")]))
    run(MemorySession("b", memory=ada).add_items([user("in b"), reply("ok")]))
    assert run(MemorySession("a", memory=ada).get_items()) == [user("in a")]
    assert run(MemorySession("b", memory=ada).get_items()) == [user("in b"), reply("ok")]
    assert run(MemorySession("a", memory=bob).get_items()) == []  # another user's session of that id
    assert run(MemorySession("a", memory=bob).pop_item()) is None
    assert run(MemorySession("a", memory=ada).get_items()) == [user("in a")]


def test_sessions_persist_across_processes(tmp_path):
    path = tmp_path / "memory.db"
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:
        run(MemorySession("a", memory=mem).add_items([user("in a"), reply("ok")]))
    with UnifiedMemory(path, user_id="ada", retrieval="lexical") as mem:
        assert run(MemorySession("a", memory=mem).get_items()) == [user("in a"), reply("ok")]
        assert run(MemorySession("a", memory=mem, user_id="bob").get_items()) == []


def test_the_runner_carries_history_between_runs_and_logs_tool_calls_with_their_results(make_memory):
    model = FakeModel()
    agent = Agent(name="assistant", instructions="Be brief.", model=model, tools=[get_weather])
    session = MemorySession("chat-1", memory=make_memory())
    first = run(Runner.run(agent, "My name is Ada and I'm allergic to peanuts", session=session))
    assert first.final_output == "seen 1 items"
    second = run(Runner.run(agent, "What's the weather in Lisbon?", session=session))
    items = run(session.get_items())
    kinds = [item.get("type", "message") for item in items]
    assert kinds == ["message", "message", "message", "function_call", "function_call_output", "message"]
    assert items[4]["output"] == "sunny in Lisbon" and items[3]["call_id"] == items[4]["call_id"]
    assert second.final_output == "seen 5 items"  # the model was sent the first run's history too
    assert model.inputs[1][0] == user("My name is Ada and I'm allergic to peanuts")


def test_concurrent_writers_lose_nothing(make_memory):
    session = MemorySession("s1", memory=make_memory(), extract=False)

    async def write_all() -> None:
        await asyncio.gather(*(session.add_items([user(f"message {i}")]) for i in range(12)))

    run(write_all())
    assert sorted(item["content"] for item in run(session.get_items())) == sorted(f"message {i}" for i in range(12))


def test_one_session_object_serves_threads_each_with_its_own_event_loop(make_memory):
    """As with ``Runner.run_sync`` from several threads: every thread's items are kept."""
    session = MemorySession("s1", memory=make_memory(), extract=False)
    failures: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            for i in range(3):
                asyncio.run(session.add_items([user(f"{name} {i}")]))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(name,)) for name in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    assert sorted(item["content"] for item in run(session.get_items())) == [
        f"{name} {i}" for name in ("one", "two") for i in range(3)]


def test_unicode_and_special_characters_round_trip(make_memory):
    text = "héllo 👋 \u4e2d\u6587 \"quotes\" 'apostrophes' \\ back\nslash; DROP TABLE x; -- </memory>"
    session = MemorySession("s1", memory=make_memory())
    items = [user(text), reply(text), call("c1", arguments=json.dumps({"q": text})), result("c1", text)]
    run(session.add_items(items))
    assert run(session.get_items()) == items


# -- checks of arguments (no storage involved: one memory) -----------------------------------------

def test_session_settings_default_and_are_checked_as_the_sdks_own_sessions_do():
    from agents import SQLiteSession

    sdk = SQLiteSession("sdk")
    with UnifiedMemory(retrieval="lexical") as mem:
        session = MemorySession("s1", memory=mem)
        assert session.session_settings == sdk.session_settings == SessionSettings()
        kept = SessionSettings(limit=2)
        assert MemorySession("s2", memory=mem, session_settings=kept).session_settings is kept
        from_dict = MemorySession("s3", memory=mem, session_settings={"limit": 0}).session_settings
        assert from_dict == SessionSettings(limit=0) and from_dict.resolve({"limit": 4}).limit == 4
        with pytest.raises(TypeError) as sdk_error:
            SQLiteSession("sdk", session_settings={"limitt": 1})
        with pytest.raises(MemoryTypeError) as caught:
            MemorySession("s4", memory=mem, session_settings={"limitt": 1})
        assert caught.value.field == "session_settings" and str(sdk_error.value) in str(caught.value)
        with pytest.raises(MemoryValueError) as bad_value:
            MemorySession("s5", memory=mem, session_settings={"limit": "many"})
        assert bad_value.value.field == "session_settings.limit"
        with pytest.raises(MemoryTypeError, match="session_settings"):
            MemorySession("s6", memory=mem, session_settings=5)
        # set afterwards, as the SDK's EncryptedSession sets its underlying session's
        session.session_settings = {"limit": 1}
        assert session.session_settings == SessionSettings(limit=1)
        session.session_settings = None
        assert session.session_settings == SessionSettings()
        with pytest.raises(MemoryTypeError, match="limitt"):
            session.session_settings = {"limitt": 1}
    sdk.close()


def test_bad_input_is_the_librarys_errors_naming_the_field_and_writes_nothing():
    with UnifiedMemory(retrieval="lexical") as mem:
        session = MemorySession("s1", memory=mem)
        with pytest.raises(MemoryTypeError, match=r"items\[1\]"):
            run(session.add_items([user("fine"), "not an item"]))
        with pytest.raises(MemoryValueError, match=r"items\[1\]"):
            run(session.add_items([user("fine"), {"type": "x", "value": float("nan")}]))
        with pytest.raises(MemoryValueError, match=r"items\[1\]"):
            run(session.add_items([user("fine"), user("bad \x00 byte")]))
        with pytest.raises(MemoryTypeError, match="items"):
            run(session.add_items(user("not a list")))
        assert run(session.get_items()) == [] and mem.episodes() == []
        with pytest.raises(MemoryTypeError, match="memory"):
            MemorySession("s1", memory=object())
        with pytest.raises(MemoryValueError, match="session_id"):
            MemorySession("  ", memory=mem)
        for bad in ("2", 2.0, True):
            with pytest.raises(MemoryTypeError, match="limit"):
                run(session.get_items(limit=bad))


# -- what this session adds -------------------------------------------------------------------------

def test_every_kind_of_item_round_trips_exactly(make_memory):
    items = [{"role": "developer", "content": "Be brief."},
             {"role": "user", "content": [{"type": "input_text", "text": "What's the weather?"}]},
             REASONING, call("c1"), result("c1", "sunny"), WEB_SEARCH,
             {"type": "computer_call", "call_id": "cc1", "id": "cu_1", "status": "completed",
              "action": {"type": "click", "x": 1, "y": 2, "button": "left"}, "pending_safety_checks": []},
             {"type": "computer_call_output", "call_id": "cc1", "output": {"type": "computer_screenshot",
                                                                           "image_url": "data:image/png;base64,AA"}},
             {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "late"}]},
             {"type": "some_future_item", "id": "x_1", "payload": {"nested": [1, 2.5, None, True]}},
             reply("It's sunny.")]
    session = MemorySession("s1", memory=make_memory())
    run(session.add_items(items))
    assert run(session.get_items()) == items
    assert run(session.pop_item()) == items[-1]
    assert run(session.get_items()) == items[:-1]


_ITEMS = st.one_of(
    st.builds(user, st.text(min_size=1, max_size=40).filter(str.strip)),
    st.builds(reply, st.text(min_size=1, max_size=40).filter(str.strip)),
    st.builds(call, st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True)),
    st.builds(result, st.from_regex(r"call_[a-z0-9]{1,8}", fullmatch=True), st.text(min_size=1, max_size=40)),
    st.just(REASONING), st.just(WEB_SEARCH))


@pytest.mark.slow
@settings(max_examples=10, **_EVERY_MEMORY)
@given(st.lists(st.tuples(st.lists(_ITEMS, max_size=4), st.integers(0, 2)), max_size=4))
def test_any_items_added_and_popped_come_back_exactly_as_a_list_would_hold_them(make_memory, steps):
    """The session behaves as a list: add appends, pop takes the last (surrogate-free text: the
    memory refuses lone surrogates as it refuses them everywhere)."""
    steps = [([item for item in batch if _clean(item)], pops) for batch, pops in steps]
    session = fresh(make_memory(), extract=False)
    expected: list[dict[str, Any]] = []
    for batch, pops in steps:
        run(session.add_items(batch))
        expected += batch
        for _ in range(pops):
            assert run(session.pop_item()) == (expected.pop() if expected else None)
        assert run(session.get_items()) == expected


def _clean(item: dict[str, Any]) -> bool:
    text = json.dumps(item, ensure_ascii=False)
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text) and "\\u0000" not in text


def test_compaction_folds_older_items_into_a_summary_never_splits_a_tool_pair_and_deletes_nothing(make_memory):
    mem = make_memory()
    session = MemorySession("s1", memory=mem, compaction={"token_threshold": 400}, extract=False,
                            compact_fn=lambda messages, prompt: f"{len(messages)} earlier messages")
    added: list[dict[str, Any]] = []
    for turn in range(8):
        batch = [user(f"question {turn} " * 8), call(f"c{turn}"), result(f"c{turn}", "sunny " * 10),
                 reply(f"answer {turn} " * 8, f"msg_{turn}")]
        run(session.add_items(batch))
        added += batch
        items = run(session.get_items())
        calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
        results = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
        assert calls == results  # never a call without its result, nor a result without its call
    assert items[0]["role"] == "user" and "earlier messages" in items[0]["content"]
    assert items[1:] == added[len(added) - len(items) + 1:]  # the newest items, whole
    assert len(items) < len(added)
    assert run(session.get_items(2)) == items[-2:] and run(session.get_items(len(items) + 5)) == items
    logged = [e for e in mem.episodes(limit=1000) if not e.metadata.get("openai_session")]
    assert len(logged) == len(added)  # nothing deleted: the episodic log has every item


def test_turns_feed_the_long_term_tiers_and_a_later_session_recalls_them(make_memory):
    mem = make_memory()
    agent = Agent(name="assistant", instructions="Be brief.", model=FakeModel())
    run(Runner.run(agent, "I'm allergic to peanuts", session=MemorySession("monday", memory=mem)))
    assert any("peanuts" in f.text for f in mem.facts())
    later = mem.scoped(session_id="tuesday")
    assert "peanuts" in later.context("what am I allergic to?", max_tokens=200).text


def test_the_example_agent_remembers_across_sessions(capsys, example):
    """``examples/openai_agents_sdk.py`` runs offline: Tuesday's new session answers from Monday's."""
    module = example("openai_agents_sdk")
    assert module.main(["openai_agents_sdk.py"]) == 0
    out = capsys.readouterr().out
    assert "tuesday> What am I allergic to?\n  From memory: I'm allergic to peanuts" in out
