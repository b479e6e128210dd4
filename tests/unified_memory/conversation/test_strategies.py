"""Alquimia-style memory strategies: loading, selection, triggers, summarization, tool pairing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unified_memory.conversation.strategies import (
    MemoryMaxMessagesStrategy,
    MemoryMaxTokensStrategy,
    MemoryStrategies,
    NeuralyzerStrategy,
    StrategyOutcome,
    SummarizerStrategy,
    interactions,
    load_long_term_strategy,
    load_short_term_strategy,
    load_strategies,
)
from unified_memory.errors import ConfigError, LLMError, MemoryValueError
from unified_memory.retrieval.tokens import chars_per_token_counter, message_tokens
from unified_memory.types import Message

# ---------------------------------------------------------------- helpers


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str | None = None, calls: list[tuple[str, str]] = ()) -> Message:
    tool_calls = [{"id": cid, "type": "function", "function": {"name": name, "arguments": "{}"}}
                  for cid, name in calls] or None
    return Message(role="assistant", content=text, tool_calls=tool_calls)


def tool(cid: str, text: str = "ok", name: str | None = None, **metadata) -> Message:
    return Message(role="tool", content=text, tool_call_id=cid, name=name, metadata=metadata)


def system(text: str = "be kind") -> Message:
    return Message(role="system", content=text)


def chat(n: int) -> list[Message]:
    out = []
    for i in range(n):
        out += [user(f"question {i}"), assistant(f"answer {i}")]
    return out


def dump(messages):
    return [m.model_dump() for m in messages]


def pairing_problems(messages) -> list[str]:
    """Tool results without an earlier opening call, and calls without a result."""
    problems, open_calls = [], {}
    for i, m in enumerate(messages):
        if m.role == "assistant":
            for call in m.tool_calls or ():
                open_calls[call["id"]] = i
        elif m.role == "tool":
            if m.tool_call_id not in open_calls:
                problems.append(f"orphan result {m.tool_call_id}")
            else:
                del open_calls[m.tool_call_id]
    problems += [f"unanswered call {cid}" for cid in open_calls]
    return problems


class FakeLLM:
    """Replies from a script, records every prompt."""

    def __init__(self, replies, fail_at: int | None = None):
        self.replies = list(replies)
        self.prompts: list[list[dict]] = []
        self.fail_at = fail_at

    def complete(self, messages):
        self.prompts.append(messages)
        if self.fail_at is not None and len(self.prompts) == self.fail_at:
            raise RuntimeError("endpoint down")
        return self.replies[min(len(self.prompts), len(self.replies)) - 1]


class FakeMemory:
    def __init__(self):
        self.stored: list[list[str]] = []

    def remember_many(self, texts):
        self.stored.append(list(texts))
        return [f"fact_{i}" for i in range(len(texts))]


# ---------------------------------------------------------------- loading

SEED_SHORT = {"memory_strategy_id": "max_tokens", "memory_max_tokens": 8000, "conditions": ["message.role != 'tool'"]}
SEED_SUMMARIZER = {"long_term_memory_id": "summarizer", "interaction_threshold_qty": 15,
                   "interaction_threshold_tokens": 15000, "cod_max_loops": 3, "interaction_keep": 2,
                   "instructions": "Focus on decisions made and action items.", "store_summary_as_facts": True}
SEED_NEURALYZER = {"long_term_memory_id": "neuralyzer", "interaction_threshold_qty": 30, "interaction_keep": 5}


def test_seed_examples_load():
    short = load_short_term_strategy(json.dumps(SEED_SHORT))
    assert isinstance(short, MemoryMaxTokensStrategy)
    assert short.memory_max_tokens == 8000 and short.conditions == ["message.role != 'tool'"]
    summarizer = load_long_term_strategy(SEED_SUMMARIZER)
    assert isinstance(summarizer, SummarizerStrategy)
    assert (summarizer.cod_max_loops, summarizer.interaction_keep, summarizer.interaction_threshold_qty) == (3, 2, 15)
    assert summarizer.store_summary_as_facts
    neuralyzer = load_long_term_strategy(json.dumps(SEED_NEURALYZER))
    assert isinstance(neuralyzer, NeuralyzerStrategy)
    assert (neuralyzer.interaction_threshold_qty, neuralyzer.interaction_threshold_tokens) == (30, -1)
    both = load_strategies({"short_term": SEED_SHORT, "long_term": SEED_NEURALYZER})
    assert isinstance(both, MemoryStrategies) and both.short_term == short and both.long_term == neuralyzer


def test_defaults_follow_the_seed():
    s = SummarizerStrategy()
    assert (s.interaction_threshold_qty, s.interaction_threshold_tokens, s.cod_max_loops) == (20, 20000, 5)
    assert (s.input_tokens_threshold, s.interaction_keep, s.interaction_conditions) == (0, 0, [])
    assert (s.on_tools_success_threshold, s.on_tools_error_threshold, s.instructions) == ([], [], None)
    n = NeuralyzerStrategy()
    assert (n.interaction_threshold_qty, n.interaction_threshold_tokens) == (-1, -1)
    assert MemoryMaxTokensStrategy().memory_max_tokens == 10000
    assert MemoryMaxMessagesStrategy().memory_max_messages == 50
    assert load_strategies("{}") == MemoryStrategies()


def test_load_from_file(tmp_path):
    path = tmp_path / "strategies.json"
    path.write_text(json.dumps({"short_term": {"memory_strategy_id": "max_messages", "memory_max_messages": 7}}))
    assert load_strategies(path).short_term.memory_max_messages == 7


def test_invalid_json_file_names_file_and_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{\n  "long_term": {\n    "long_term_memory_id": "neuralyzer",,\n  }\n}\n')
    with pytest.raises(ConfigError) as info:
        load_strategies(path)
    assert str(path) in str(info.value) and "line 3" in str(info.value)


def test_invalid_field_in_file_names_file_and_field(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"long_term": {"long_term_memory_id": "summarizer", "cod_max_loops": 0}}))
    with pytest.raises(ConfigError) as info:
        load_strategies(path)
    assert str(path) in str(info.value) and "long_term.cod_max_loops" in str(info.value)
    assert info.value.field == "long_term.cod_max_loops"


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="nope.json"):
        load_strategies(tmp_path / "nope.json")


@pytest.mark.parametrize("data, field", [
    ({"long_term": {"long_term_memory_id": "summarizer", "cod_max_loops": 0}}, "long_term.cod_max_loops"),
    ({"long_term": {"long_term_memory_id": "forgetter"}}, "long_term.long_term_memory_id"),
    ({"long_term": {"interaction_keep": 3}}, "long_term.long_term_memory_id"),
    ({"short_term": {"memory_strategy_id": "max_words"}}, "short_term.memory_strategy_id"),
    ({"short_term": {"memory_strategy_id": "max_tokens", "memory_max_tokens": -2}}, "short_term.memory_max_tokens"),
    ({"short_term": {"memory_strategy_id": "max_tokens", "budget": 3}}, "short_term.budget"),
    ({"long_term": {"long_term_memory_id": "neuralyzer", "cod_max_loops": 3}}, "long_term.cod_max_loops"),
    ({"middle_term": {}}, "middle_term"),
    ({"short_term": {"memory_strategy_id": "max_tokens", "conditions": ["message.role =="]}},
     "short_term.conditions"),
])
def test_config_errors_name_the_field(data, field):
    with pytest.raises(ConfigError) as info:
        load_strategies(data)
    assert info.value.field == field
    assert str(info.value).startswith(field)
    assert isinstance(info.value, ValueError)


def test_unknown_ids_are_named_in_the_message():
    with pytest.raises(ConfigError, match="long_term_memory_id.*'summarizer', 'neuralyzer'"):
        load_long_term_strategy({"long_term_memory_id": "forgetter"})
    with pytest.raises(ConfigError, match="memory_strategy_id"):
        load_short_term_strategy('{"memory_strategy_id": "max_words"}')


@pytest.mark.parametrize("setting", ["knowledge_base", "text_splitter"])
def test_vector_store_settings_are_rejected_with_advice(setting):
    data = {"long_term_memory_id": "summarizer", setting: {"collection_id": "session-memory"}}
    with pytest.raises(ConfigError, match="store_summary_as_facts") as info:
        load_long_term_strategy(data)
    assert info.value.field == setting
    with pytest.raises(ConfigError, match="long_term.knowledge_base"):
        load_strategies({"long_term": {"long_term_memory_id": "summarizer", "knowledge_base": None}})


def test_invalid_json_string_names_the_line():
    with pytest.raises(ConfigError, match="line 2"):
        load_strategies('{"short_term":\n nope}')
    with pytest.raises(ConfigError, match="pathlib.Path"):
        load_strategies("strategies.json")


def test_direct_construction_raises_config_error():
    with pytest.raises(ConfigError) as info:
        SummarizerStrategy(cod_max_loops=0)
    assert info.value.field == "cod_max_loops"
    with pytest.raises(ConfigError) as info:
        MemoryStrategies(long_term={"long_term_memory_id": "summarizer", "cod_max_loops": 0})
    assert info.value.field == "long_term.cod_max_loops"


# ---------------------------------------------------------------- conditions


@pytest.mark.parametrize("expression", [
    "__import__('os')",
    "__import__('os').system('true')",
    "message.__class__",
    "message.content.__class__.__mro__",
    "message._secret",
    "().__class__.__bases__[0].__subclasses__()",
    "open('/etc/passwd')",
    "os.getcwd()",
    "x = 1",
    "import os",
    "message.role == 'user'; 1",
    "lambda: 1",
    "",
    "message.role ==",
])
def test_unsafe_or_invalid_conditions_are_rejected_at_construction(expression):
    with pytest.raises(ConfigError) as info:
        MemoryMaxTokensStrategy(conditions=[expression])
    assert info.value.field == "conditions"
    if expression:
        assert expression in str(info.value)
    with pytest.raises(ConfigError, match="interaction_conditions"):
        NeuralyzerStrategy(interaction_conditions=["message.role == 'user'", expression])


def test_interaction_name_is_only_for_interaction_conditions():
    with pytest.raises(ConfigError, match="interaction"):
        MemoryMaxTokensStrategy(conditions=["interaction.size > 1"])
    assert NeuralyzerStrategy(interaction_conditions=["interaction.size > 1"]).interaction_conditions


def test_runtime_condition_error_names_the_condition():
    strategy = MemoryMaxTokensStrategy(conditions=["message.nonexistent == 1"])
    with pytest.raises(MemoryValueError, match="message.nonexistent == 1"):
        strategy.select([user("hi")])
    lt = NeuralyzerStrategy(interaction_threshold_qty=1, interaction_conditions=["interaction.nope"])
    with pytest.raises(MemoryValueError) as info:
        lt.should_trigger([user("hi")])
    assert info.value.field == "interaction_conditions" and "interaction.nope" in str(info.value)


def test_conditions_see_message_attributes():
    msgs = [user("Remember: I like TEA"), Message(role="user", content="skip", metadata={"private": True}),
            Message(role="user", content="pic", images=["a.png"]), Message(role="user", name="bob", content="yo")]
    select = lambda *c: [m.content for m in MemoryMaxTokensStrategy(conditions=list(c)).select(msgs)]  # noqa: E731
    assert select("'tea' in message.content.lower()") == ["Remember: I like TEA"]
    assert select("not message.metadata.get('private', False)") == ["Remember: I like TEA", "pic", "yo"]
    assert select("message.images == 0") == ["Remember: I like TEA", "skip", "yo"]
    assert select("message.name == 'bob'") == ["yo"]
    assert select("len(message.content) > 3", "message.role == 'user'") == ["Remember: I like TEA", "skip"]


def test_dropping_tool_results_keeps_pairing():
    msgs = [user("weather?"), assistant(None, [("c1", "weather")]), tool("c1", "sunny"),
            assistant("It is sunny."), user("and lookup?"), assistant("Let me check.", [("c2", "lookup")]),
            tool("c2", "found"), assistant("Found it.")]
    out = MemoryMaxTokensStrategy(conditions=["message.role != 'tool'"]).select(msgs)
    assert [(m.role, m.content) for m in out] == [
        ("user", "weather?"), ("assistant", "It is sunny."), ("user", "and lookup?"),
        ("assistant", "Let me check."), ("assistant", "Found it.")]
    assert all(not m.tool_calls for m in out) and pairing_problems(out) == []
    assert msgs[5].tool_calls  # the input is not touched


def test_dropping_an_assistant_call_drops_its_results():
    msgs = [user("go"), assistant(None, [("c1", "secret_tool")]), tool("c1", "classified"), assistant("done")]
    out = MemoryMaxTokensStrategy(conditions=["'secret_tool' not in message.tool_names"]).select(msgs)
    assert [m.content for m in out] == ["go", "done"]


def test_a_partially_answered_call_keeps_only_answered_calls():
    msgs = [user("go"), assistant(None, [("a", "keep"), ("b", "drop")]), tool("a", "fine"), tool("b", "bad")]
    out = MemoryMaxTokensStrategy(conditions=["message.content != 'bad'"]).select(msgs)
    assert [m.role for m in out] == ["user", "assistant", "tool"]
    assert [c["id"] for c in out[1].tool_calls] == ["a"]
    assert pairing_problems(out) == []


def test_orphan_tool_results_never_reach_the_prompt():
    out = MemoryMaxMessagesStrategy().select([tool("ghost"), user("hi"), tool("ghost2")])
    assert [m.role for m in out] == ["user"]


# ---------------------------------------------------------------- short-term selection


def test_minus_one_includes_nothing_but_system_messages():
    msgs = [system(), *chat(3)]
    assert MemoryMaxTokensStrategy(memory_max_tokens=-1).select(msgs) == [msgs[0]]
    assert MemoryMaxMessagesStrategy(memory_max_messages=-1).select(msgs) == [msgs[0]]
    assert MemoryMaxTokensStrategy(memory_max_tokens=-1).select(chat(2)) == []


def test_token_budget_keeps_whole_newest_interactions():
    msgs = chat(3)
    cost = sum(message_tokens(m, chars_per_token_counter) for m in msgs[4:])
    out = MemoryMaxTokensStrategy(memory_max_tokens=cost).select(msgs)
    assert out == msgs[4:]
    assert MemoryMaxTokensStrategy(memory_max_tokens=cost - 1).select(msgs) == []
    assert MemoryMaxTokensStrategy().select(msgs) == msgs


def test_walk_stops_at_the_first_interaction_that_does_not_fit():
    msgs = [user("tiny"), user("x" * 400), user("new")]
    budget = message_tokens(msgs[0], chars_per_token_counter) + message_tokens(msgs[2], chars_per_token_counter)
    assert MemoryMaxTokensStrategy(memory_max_tokens=budget).select(msgs) == [msgs[2]]


def test_interactions_are_never_split():
    msgs = [user("q"), assistant(None, [("c", "f")]), tool("c", "r" * 40), assistant("done")]
    assert MemoryMaxMessagesStrategy(memory_max_messages=3).select(msgs) == []
    assert MemoryMaxMessagesStrategy(memory_max_messages=4).select(msgs) == msgs


def test_system_messages_are_kept_in_place_and_not_counted():
    msgs = [system("a"), user("old"), system("b"), user("new"), assistant("hi")]
    out = MemoryMaxMessagesStrategy(memory_max_messages=2).select(msgs)
    assert [m.content for m in out] == ["a", "b", "new", "hi"]


def test_a_user_message_during_an_open_call_joins_its_interaction():
    msgs = [user("q1"), assistant(None, [("c", "slow")]), user("q2"), tool("c", "r"), user("q3")]
    assert [len(g) for g in interactions(msgs)] == [4, 1]
    assert MemoryMaxMessagesStrategy(memory_max_messages=3).select(msgs) == [msgs[4]]


def test_select_accepts_dicts_and_rejects_junk():
    out = MemoryMaxMessagesStrategy().select([{"role": "user", "content": "hi"}])
    assert out == [user("hi")]
    with pytest.raises(TypeError):
        MemoryMaxMessagesStrategy().select("hi")


# ---------------------------------------------------------------- triggers


def test_qty_trigger():
    s = NeuralyzerStrategy(interaction_threshold_qty=3)
    assert s.should_trigger(chat(2)) is None
    assert s.should_trigger(chat(3)) == "interaction_threshold_qty"
    assert s.should_trigger([system(), system(), *chat(2)]) is None  # system messages are not interactions


def test_tokens_trigger():
    count = len
    msgs = chat(2)
    total = sum(message_tokens(m, count) for m in msgs)
    assert NeuralyzerStrategy(interaction_threshold_tokens=total).should_trigger(msgs, count_tokens=count) == \
        "interaction_threshold_tokens"
    assert NeuralyzerStrategy(interaction_threshold_tokens=total + 1).should_trigger(msgs, count_tokens=count) is None
    # system messages do not count
    assert NeuralyzerStrategy(interaction_threshold_tokens=total + 1).should_trigger(
        [system("x" * 500), *msgs], count_tokens=count) is None


def test_input_tokens_trigger():
    s = NeuralyzerStrategy(input_tokens_threshold=100)
    assert s.should_trigger(chat(1), input_tokens=100) is None
    assert s.should_trigger(chat(1), input_tokens=101) == "input_tokens_threshold"
    assert s.should_trigger([user("x" * 1000)]) == "input_tokens_threshold"  # estimated when not given
    assert NeuralyzerStrategy().should_trigger(chat(1), input_tokens=10**9) is None


def test_disabled_thresholds_never_fire():
    assert NeuralyzerStrategy().should_trigger(chat(200)) is None
    assert NeuralyzerStrategy(interaction_threshold_qty=0, interaction_threshold_tokens=0).should_trigger(
        chat(200)) is None
    assert SummarizerStrategy().should_trigger(chat(19)) is None
    assert SummarizerStrategy().should_trigger(chat(20)) == "interaction_threshold_qty"


def test_tool_success_trigger():
    s = NeuralyzerStrategy(on_tools_success_threshold=["checkout"])
    by_call = [user("buy"), assistant(None, [("c1", "checkout")]), tool("c1", "paid")]
    assert s.should_trigger(by_call) == "on_tools_success_threshold"
    by_name = [user("buy"), tool("zz", "paid", name="checkout")]
    assert s.should_trigger(by_name) == "on_tools_success_threshold"
    other = [user("buy"), assistant(None, [("c1", "search")]), tool("c1", "results")]
    assert s.should_trigger(other) is None
    failed = [user("buy"), assistant(None, [("c1", "checkout")]), tool("c1", "declined", error="card declined")]
    assert s.should_trigger(failed) is None


def test_tool_name_lookup_is_per_call():
    unnamed_first = Message(role="assistant", tool_calls=[
        {"id": "a", "type": "function", "function": {"arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "pay", "arguments": "{}"}}])
    msgs = [user("go"), unnamed_first, tool("a", "?"), tool("b", "paid")]
    assert NeuralyzerStrategy(on_tools_success_threshold=["pay"]).should_trigger(msgs) == \
        "on_tools_success_threshold"
    assert NeuralyzerStrategy(on_tools_success_threshold=["pay"]).should_trigger(msgs[:3]) is None


@pytest.mark.parametrize("metadata", [{"error": "boom"}, {"status": "error"}, {"is_error": True}])
def test_tool_error_trigger(metadata):
    s = NeuralyzerStrategy(on_tools_error_threshold=["checkout"])
    msgs = [user("buy"), assistant(None, [("c1", "checkout")]), tool("c1", "failed", **metadata)]
    assert s.should_trigger(msgs) == "on_tools_error_threshold"
    ok = [user("buy"), assistant(None, [("c1", "checkout")]), tool("c1", "paid", status="ok")]
    assert s.should_trigger(ok) is None


def test_interaction_conditions_restrict_what_counts():
    s = NeuralyzerStrategy(interaction_threshold_qty=2, interaction_conditions=["interaction.has_tool_calls"])
    plain = chat(5)
    assert s.should_trigger(plain) is None
    with_tools = [user("a"), assistant(None, [("1", "f")]), tool("1"), user("b"),
                  assistant(None, [("2", "g")]), tool("2")]
    assert s.should_trigger(plain + with_tools) == "interaction_threshold_qty"
    by_text = NeuralyzerStrategy(interaction_threshold_qty=2,
                                 interaction_conditions=["'remember' in interaction.user_text"])
    assert by_text.should_trigger([user("remember x"), user("hello"), user("hi")]) is None
    assert by_text.should_trigger([user("remember x"), user("hello"), user("remember y")]) == \
        "interaction_threshold_qty"
    by_message = NeuralyzerStrategy(interaction_threshold_qty=1, interaction_conditions=["message.role == 'user'",
                                                                                         "interaction.size >= 2"])
    assert by_message.should_trigger([user("a")]) is None
    assert by_message.should_trigger([user("a"), assistant("b")]) == "interaction_threshold_qty"
    index = NeuralyzerStrategy(interaction_threshold_qty=1, interaction_conditions=["interaction.index >= 3"])
    assert index.should_trigger(chat(3)) is None and index.should_trigger(chat(4)) == "interaction_threshold_qty"


def test_interaction_conditions_restrict_counted_tokens():
    s = NeuralyzerStrategy(interaction_threshold_tokens=50, interaction_conditions=["interaction.tokens < 40"])
    assert s.should_trigger([user("x" * 400), user("y")]) is None


# ---------------------------------------------------------------- long-term apply


def test_not_triggered_leaves_messages_unchanged():
    msgs = chat(3)
    out = SummarizerStrategy().apply(msgs, llm=FakeLLM(["never"]))
    assert isinstance(out, StrategyOutcome)
    assert out.triggered is None and out.messages == msgs and out.removed == [] and out.summary is None


def test_neuralyzer_keeps_the_last_n_interactions():
    msgs = [system(), *chat(6)]
    out = NeuralyzerStrategy(interaction_threshold_qty=5, interaction_keep=2).apply(msgs)
    assert out.triggered == "interaction_threshold_qty"
    assert out.messages == [msgs[0], *msgs[-4:]]
    assert out.removed == msgs[1:-4]
    assert out.summary is None and out.facts_stored == 0
    everything = NeuralyzerStrategy(interaction_keep=0).apply(msgs, force=True)
    assert everything.triggered == "force" and everything.messages == [msgs[0]]
    more_than_there = NeuralyzerStrategy(interaction_keep=50).apply(msgs, force=True)
    assert more_than_there.messages == msgs and more_than_there.removed == []


def test_summarizer_runs_chain_of_density():
    msgs = [system(), user("I'm Ada, I live in Lisbon"), assistant("Nice!"), user("Book a table at Tasca for 8pm"),
            assistant(None, [("c1", "book")]), tool("c1", "booked #42"), assistant("Booked."), user("thanks")]
    replies = ["Ada chatted.", "Ada from Lisbon chatted.", "Ada (Lisbon) booked Tasca.", "Ada (Lisbon) booked Tasca 8pm #42."]
    llm = FakeLLM(replies)
    s = SummarizerStrategy(interaction_threshold_qty=3, interaction_keep=1, cod_max_loops=3,
                           instructions="Focus on decisions made and action items.")
    before = dump(msgs)
    out = s.apply(msgs, llm=llm, previous_summary="Earlier: Ada likes jazz.")
    assert out.triggered == "interaction_threshold_qty"
    assert len(llm.prompts) == s.cod_max_loops + 1
    assert out.summary == replies[-1]
    assert out.messages == [msgs[0], msgs[-1]]
    assert out.removed == msgs[1:-1]
    for prompt in llm.prompts:
        assert prompt[0]["role"] == "system" and "Focus on decisions made and action items." in prompt[0]["content"]
        assert "Ada likes jazz" in prompt[1]["content"] and "Book a table at Tasca" in prompt[1]["content"]
        assert "called book" in prompt[1]["content"] and "booked #42" in prompt[1]["content"]
        assert "120 words" in prompt[1]["content"]
    assert "entity-sparse" in llm.prompts[0][1]["content"]
    for i, prompt in enumerate(llm.prompts[1:]):
        assert replies[i] in prompt[1]["content"]  # each pass densifies the previous summary
        assert "missing" in prompt[1]["content"]
    assert dump(msgs) == before


def test_empty_reply_keeps_the_previous_iteration():
    llm = FakeLLM(["first", "second", "   ", ""])
    out = SummarizerStrategy(cod_max_loops=3).apply(chat(2), llm=llm, force=True)
    assert out.summary == "second" and len(llm.prompts) == 4
    assert "second" in llm.prompts[3][1]["content"]


def test_llm_failure_raises_llm_error_and_leaves_input_untouched():
    msgs = chat(4)
    before = dump(msgs)
    memory = FakeMemory()
    s = SummarizerStrategy(interaction_threshold_qty=2, store_summary_as_facts=True)
    with pytest.raises(LLMError) as info:
        s.apply(msgs, llm=FakeLLM(["a", "b", "c"], fail_at=2), memory=memory)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert dump(msgs) == before and memory.stored == []


def test_summarizer_without_llm_is_extractive():
    msgs = [user("I'm allergic to peanuts."), assistant("Noted."), user("ok")]
    out = SummarizerStrategy(interaction_keep=1).apply(msgs, force=True, previous_summary="user: I live in Lisbon.")
    assert "allergic to peanuts" in out.summary and "Lisbon" in out.summary
    assert out.messages == [msgs[-1]]


def test_store_summary_as_facts():
    memory = FakeMemory()
    llm = FakeLLM(["Ada lives in Lisbon. She is allergic to peanuts!  Booked Tasca?"])
    out = SummarizerStrategy(store_summary_as_facts=True, cod_max_loops=1).apply(
        chat(2), llm=llm, memory=memory, force=True)
    assert memory.stored == [["Ada lives in Lisbon.", "She is allergic to peanuts!", "Booked Tasca?"]]
    assert out.facts_stored == 3
    with pytest.raises(MemoryValueError, match="memory"):
        SummarizerStrategy(store_summary_as_facts=True).apply(chat(2), force=True)


def test_store_summary_in_a_real_memory(mem):
    out = SummarizerStrategy(store_summary_as_facts=True).apply(
        [user("I live in Lisbon."), user("I'm allergic to peanuts.")], memory=mem, force=True)
    assert out.facts_stored >= 1
    assert mem.recall("peanuts")


def test_summarizer_with_nothing_to_remove_makes_no_summary():
    llm = FakeLLM(["x"])
    out = SummarizerStrategy(interaction_keep=5).apply(chat(2), llm=llm, force=True)
    assert out.removed == [] and out.summary is None and llm.prompts == []


def test_apply_keeps_tool_calls_with_their_results():
    msgs = [user("q1"), assistant(None, [("c", "slow")]), user("q2"), tool("c", "r"), user("q3")]
    out = NeuralyzerStrategy(interaction_keep=1).apply(msgs, force=True)
    assert out.messages == [msgs[4]]
    out = NeuralyzerStrategy(interaction_keep=2).apply(msgs, force=True)
    assert out.messages == msgs


# ---------------------------------------------------------------- properties


@st.composite
def conversations(draw):
    """Well-formed conversations: every tool call is answered (sometimes after a user message), random sizes."""
    messages: list[Message] = []
    ids = iter(range(10**6))
    if draw(st.booleans()):
        messages.append(system("s" * draw(st.integers(0, 40))))
    if draw(st.booleans()):
        messages.append(assistant("welcome" * draw(st.integers(0, 5))))
    for _ in range(draw(st.integers(0, 7))):
        messages.append(user("u" * draw(st.integers(0, 120))))
        for _ in range(draw(st.integers(0, 2))):
            calls = [(f"call{next(ids)}", draw(st.sampled_from(["search", "pay", "read"])))
                     for _ in range(draw(st.integers(1, 3)))]
            text = draw(st.one_of(st.none(), st.text(alphabet="abc ", max_size=30)))
            messages.append(assistant(text, calls))
            if draw(st.integers(0, 5)) == 0:  # the user speaks while the call is still open
                messages.append(user("meanwhile"))
            results = draw(st.permutations(calls))
            for cid, name in results:
                messages.append(tool(cid, "r" * draw(st.integers(0, 80)), name=draw(st.sampled_from([None, name]))))
                if draw(st.integers(0, 9)) == 0:
                    messages.append(system("mid"))
        if draw(st.booleans()):
            messages.append(assistant("a" * draw(st.integers(1, 100))))
    return messages


def non_system(messages):
    return [m for m in messages if m.role != "system"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.integers(-1, 400))
def test_max_tokens_select_properties(msgs, budget):
    before = dump(msgs)
    out = MemoryMaxTokensStrategy(memory_max_tokens=budget).select(msgs)
    assert dump(msgs) == before
    # all system messages, in place
    assert [m for m in out if m.role == "system"] == [m for m in msgs if m.role == "system"]
    groups = [non_system(g) for g in interactions(msgs)]
    groups = [g for g in groups if g]
    kept = non_system(out)
    # (a) a suffix of whole interactions
    suffixes = [[m for g in groups[k:] for m in g] for k in range(len(groups) + 1)]
    assert kept in suffixes
    k = suffixes.index(kept)
    # (b) within the budget; the next older interaction would not have fitted
    total = sum(message_tokens(m, chars_per_token_counter) for m in kept)
    assert total <= max(budget, 0)
    if k > 0 and budget >= 0:
        older = sum(message_tokens(m, chars_per_token_counter) for m in groups[k - 1])
        assert total + older > budget
    if budget == -1:
        assert kept == []
    # (c) tool pairing
    assert pairing_problems(out) == []


@settings(max_examples=100, deadline=None)
@given(conversations(), st.integers(-1, 12))
def test_max_messages_select_properties(msgs, limit):
    out = MemoryMaxMessagesStrategy(memory_max_messages=limit).select(msgs)
    assert len(non_system(out)) <= max(limit, 0)
    assert pairing_problems(out) == []


@settings(max_examples=100, deadline=None)
@given(conversations(), st.sampled_from(["message.role != 'tool'", "message.role != 'assistant'",
                                         "'pay' not in message.tool_names", "len(message.content) % 2 == 0",
                                         "message.name != 'search'"]))
def test_conditions_never_break_pairing(msgs, condition):
    out = MemoryMaxTokensStrategy(conditions=[condition]).select(msgs)
    assert pairing_problems(out) == []
    assert all(m.role != "tool" for m in out) or condition != "message.role != 'tool'"


@settings(max_examples=100, deadline=None)
@given(conversations(), st.integers(0, 5), st.booleans())
def test_apply_never_orphans_tool_results(msgs, keep, summarize):
    before = dump(msgs)
    strategy = (SummarizerStrategy(interaction_keep=keep) if summarize
                else NeuralyzerStrategy(interaction_keep=keep))
    llm = FakeLLM(["summary"]) if summarize else None
    out = strategy.apply(msgs, llm=llm, force=True)
    assert dump(msgs) == before
    assert pairing_problems(out.messages) == []
    assert pairing_problems(out.removed) == []
    assert sorted(map(id, out.messages + out.removed)) == sorted(map(id, msgs))
    groups = [g for g in (non_system(g) for g in interactions(msgs)) if g]
    expected = [m for g in (groups[-keep:] if keep else []) for m in g]
    assert non_system(out.messages) == expected
