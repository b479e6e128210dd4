"""@remember on agent classes: injection, extraction, scoping, failures."""

import asyncio
import doctest

import pytest

import unified_memory.agents.remember
from unified_memory import (
    ClosedError,
    MemoryTypeError,
    MemoryValueError,
    NotFoundError,
    UnifiedMemory,
    register_store,
    remember,
)


def test_doctests():
    assert doctest.testmod(unified_memory.agents.remember).failed == 0


class FakeLLM:
    """Records the system prompt of every call; answers politely."""

    def __init__(self):
        self.prompts = []

    def complete(self, system, message):
        self.prompts.append(system)
        return f"Noted: {message}"


def make_agent(store, **options):
    llm = FakeLLM()

    @remember(store, **options)
    class Assistant:
        system_prompt = "You are a helpful assistant."

        def run(self, message: str, *, user_id: str = "default") -> str:
            return llm.complete(self.system_prompt, message)

    return Assistant, llm


def test_what_one_call_tells_the_next_call_knows_also_after_a_restart(tmp_path):
    path = tmp_path / "assistant.db"
    with UnifiedMemory(path) as mem:
        Assistant, llm = make_agent(mem, top_k=5)
        agent = Assistant()
        agent.run("My name is Ada and I'm allergic to peanuts")
        agent.run("What should I cook tonight? Any peanut dishes?")
        assert "allergic to peanuts" in llm.prompts[-1]
        assert llm.prompts[-1].endswith("You are a helpful assistant.")
        assert "allergic to peanuts" in agent.memory_context
        assert agent.system_prompt == "You are a helpful assistant."  # restored after the call
        assert any("allergic to peanuts" in f.text for f in mem.facts())  # extracted now, not on window exit
    with UnifiedMemory(path) as reopened:
        Assistant, llm = make_agent(reopened)
        Assistant().run("Do I have any food allergy? peanuts?")
        assert "allergic to peanuts" in llm.prompts[-1]


def test_async_agents_work_the_same():
    mem = UnifiedMemory()
    prompts = []

    @remember(mem)
    class AsyncAssistant:
        system_prompt = "Base."

        async def arun(self, message, *, user_id="default"):
            await asyncio.sleep(0)
            prompts.append(self.system_prompt)
            return "ok"

    agent = AsyncAssistant()
    asyncio.run(agent.arun("I live in Lisbon"))
    asyncio.run(agent.arun("where do I live? Lisbon?"))
    assert "Lisbon" in prompts[-1] and agent.system_prompt == "Base."


@pytest.mark.parametrize("own_prompt", [False, True])
def test_a_raising_agent_records_nothing_and_gets_its_prompt_back(own_prompt):
    mem = UnifiedMemory()
    mem.remember("I live in Lisbon")

    @remember(mem)
    class Fragile:
        system_prompt = "Class prompt."

        def run(self, message):
            assert "Lisbon" in self.system_prompt  # the memory was injected
            raise RuntimeError("tool crashed")

    agent = Fragile()
    if own_prompt:
        agent.system_prompt = "Instance prompt."
    with pytest.raises(RuntimeError, match="tool crashed"):
        agent.run("where do I live? Lisbon?")
    assert agent.system_prompt == ("Instance prompt." if own_prompt else "Class prompt.")
    assert ("system_prompt" in vars(agent)) is own_prompt
    assert mem.episodes() == []  # no partial turn


def test_users_are_kept_apart_by_argument_or_attribute():
    mem = UnifiedMemory()
    Assistant, llm = make_agent(mem)
    agent = Assistant()
    agent.run("I'm allergic to peanuts", user_id="ada")
    agent.run("what am I allergic to? peanuts?", user_id="bob")
    assert "peanuts" not in llm.prompts[-1].split("You are")[0]
    agent.user_id = "ada"
    agent.run("what am I allergic to? peanuts?")
    assert "allergic to peanuts" in llm.prompts[-1]
    assert mem.scoped(user_id="bob").facts() == [] and mem.scoped(user_id="ada").facts()


def test_a_registered_store_name_and_a_stacked_decorator():
    register_store("user_memory", UnifiedMemory())
    calls = []

    def framework(cls):  # another framework's class decorator, applied last
        cls.framework = True
        return cls

    @framework
    @remember(store="user_memory", top_k=3)
    class Agent:
        system_prompt = ""

        def chat(self, text):
            calls.append(self.system_prompt)
            return "fine"

    Agent().chat("My favourite colour is green")
    Agent().chat("what is my favourite colour? green?")
    assert Agent.framework and "green" in calls[-1]
    assert unified_memory.agents.remember.get_store("user_memory").facts()


def test_a_memory_failure_never_breaks_the_answer(caplog):
    mem = UnifiedMemory()
    seen = []
    events = []
    mem.on_event(events.append, kinds=["agent"])
    Assistant, llm = make_agent(mem, on_error=lambda stage, exc: seen.append((stage, type(exc))))
    mem.close()
    assert Assistant().run("hello there") == "Noted: hello there"
    assert ("recall", ClosedError) in seen and ("extract", ClosedError) in seen
    assert "memory recall failed" in caplog.text
    assert [(e.kind, e.stage, e.error.split(":")[0]) for e in events] == [("agent", "failed", "recall"),
                                                                          ("agent", "failed", "extract")]
    Strict, _ = make_agent(mem, raise_errors=True)
    with pytest.raises(ClosedError):
        Strict().run("hello there")


def test_an_unknown_store_name_is_reported_at_call_time():
    seen = []
    Assistant, _ = make_agent("not-registered", on_error=lambda stage, exc: seen.append(type(exc)))
    assert Assistant().run("hi") == "Noted: hi"
    assert seen == [NotFoundError]


def test_bad_arguments_are_refused():
    with pytest.raises(MemoryValueError, match="store"):
        remember()
    with pytest.raises(MemoryValueError, match="top_k"):
        remember(UnifiedMemory(), top_k=0)
    with pytest.raises(MemoryTypeError, match="extract"):
        remember(UnifiedMemory(), extract="yes")
    with pytest.raises(MemoryValueError, match="method"):
        @remember(UnifiedMemory())
        class NoEntry:
            def answer(self, text):
                return text


def test_method_picks_the_entry_point_and_extract_false_records_nothing():
    mem = UnifiedMemory()

    @remember(mem, method="answer", extract=False)
    class Agent:
        system_prompt = "P"

        def answer(self, text):
            return self.system_prompt

    mem.remember("I keep bees")
    assert "bees" in Agent().answer("do I keep bees?")
    assert mem.episodes() == []


def test_extraction_model_extracts_the_agents_turns():
    import json

    reply = json.dumps({"facts": [{"text": "Ada's sister Maria lives in Lisbon", "importance": 0.9,
                                   "category": "relationship"}],
                        "entities": [{"name": "Maria", "type": "person", "attributes": {"relation": "sister"}}],
                        "triples": [{"subject": "Maria", "predicate": "lives_in", "object": "Lisbon"}]})
    seen = []

    def model(messages):
        seen.append(messages)
        return reply

    mem = UnifiedMemory()
    Assistant, _ = make_agent(mem, extraction_model=model)
    Assistant().run("my sister lives in Lisbon, she's called Maria")
    assert seen  # the model was asked
    assert [f.text for f in mem.facts()] == ["Ada's sister Maria lives in Lisbon"]
    assert [(t.subject, t.predicate, t.object) for t in mem.triples()] == [("Maria", "lives_in", "Lisbon")]


def test_my_name_is_ada_reaches_the_next_prompt_and_survives_a_restart(tmp_path):
    path = tmp_path / "agent.db"
    with UnifiedMemory(path) as mem:
        Assistant, llm = make_agent(mem)
        Assistant().run("My name is Ada")
        Assistant().run("What is my name?")
        assert "My name is Ada" in llm.prompts[-1]
    with UnifiedMemory(path) as mem:
        Assistant, llm = make_agent(mem)
        Assistant().run("Do you remember my name?")
        assert "My name is Ada" in llm.prompts[-1]


def test_an_agent_that_cannot_take_a_prompt_still_answers():
    mem = UnifiedMemory()
    mem.remember("I live in Lisbon")
    seen = []

    @remember(mem, on_error=lambda stage, exc: seen.append(stage))
    class Slotted:
        __slots__ = ()
        system_prompt = "fixed"

        def run(self, message):
            return self.system_prompt

    assert Slotted().run("where do I live? Lisbon?") == "fixed"
    assert seen == ["inject"]
