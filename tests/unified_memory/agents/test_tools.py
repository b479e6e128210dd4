"""The remember / recall tools: OpenAI schemas, argument checks, readable recall, scoping, tool calls."""

from __future__ import annotations

import doctest
import json
import re
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import unified_memory.agents.tools as tools_module
from unified_memory import MemoryTypeError, MemoryValueError, UnifiedMemory
from unified_memory.agents.tools import MemoryTool, memory_tools, recall_tool, remember_tool, run_tool_call

JSON_TYPES = {"object", "string", "number", "integer", "array", "boolean", "null"}


def check_schema(schema: dict, path: str = "parameters") -> None:
    """A small structural check of the JSON Schema subset the tools use."""
    assert schema["type"] in JSON_TYPES, path
    if schema["type"] == "object":
        props = schema["properties"]
        assert isinstance(props, dict)
        assert set(schema.get("required", [])) <= set(props), path
        assert schema.get("additionalProperties") is False, path
        for key, sub in props.items():
            assert isinstance(sub.get("description"), str) and sub["description"], f"{path}.{key}"
            check_schema(sub, f"{path}.{key}")
    if schema["type"] == "array":
        check_schema(schema["items"], f"{path}.items")
    if "enum" in schema:
        assert isinstance(schema["enum"], list) and schema["enum"]
    for bound in ("minimum", "maximum"):
        if bound in schema:
            assert isinstance(schema[bound], int | float)


def texts(mem: UnifiedMemory) -> list[str]:
    return [f.text for f in mem.facts(include_inactive=True)]


# -- schemas -----------------------------------------------------------------------------------


def test_schemas_are_openai_tools_with_valid_json_schemas(mem):
    tools = memory_tools(mem)
    assert [t.name for t in tools] == ["remember", "recall"]
    for tool in tools:
        schema = tool.schema()
        assert set(schema) == {"type", "function"} and schema["type"] == "function"
        function = schema["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", function["name"])
        assert len(function["description"]) > 40
        check_schema(function["parameters"])
        assert json.loads(json.dumps(schema)) == schema  # plain JSON
    remember, recall = (t.schema()["function"]["parameters"] for t in tools)
    assert remember["required"] == ["text"] and set(remember["properties"]) == {"text", "importance", "category"}
    assert recall["required"] == ["query"] and set(recall["properties"]) == {"query", "limit", "tiers"}
    assert recall["properties"]["tiers"]["items"]["enum"] == ["long_term", "entity", "episodic", "short_term"]
    assert recall["properties"]["limit"]["default"] == 5


def test_schema_is_a_copy(mem):
    tool = recall_tool(mem)
    tool.schema()["function"]["parameters"]["required"].clear()
    with pytest.raises(MemoryValueError):
        tool({})


def test_prefix_names_and_limit(mem):
    assert [t.name for t in memory_tools(mem, prefix="memory")] == ["memory_remember", "memory_recall"]
    assert [t.name for t in memory_tools(mem, prefix="mem-")] == ["mem-remember", "mem-recall"]
    assert recall_tool(mem, limit=3).schema()["function"]["parameters"]["properties"]["limit"]["default"] == 3
    with pytest.raises(MemoryValueError) as err:
        remember_tool(mem, name="no spaces allowed")
    assert err.value.field == "name"
    with pytest.raises(MemoryValueError) as err:
        recall_tool(mem, limit=0)
    assert err.value.field == "limit"


# -- remember and recall -----------------------------------------------------------------------


def test_round_trip_through_json_string_arguments(mem):
    remember, recall = memory_tools(mem)
    out = remember(json.dumps({"text": "I'm allergic to peanuts", "importance": 0.9, "category": "health"}))
    assert out == "Remembered: I'm allergic to peanuts"
    [fact] = mem.facts()
    assert fact.importance >= 0.9 and fact.category == "health"
    answer = recall('{"query": "peanuts", "tiers": ["long_term"]}')
    assert re.fullmatch(r"1\. \[fact, 2023-11-14\] I'm allergic to peanuts \(score 0\.\d\d\)", answer)


def test_remember_says_when_a_fact_was_known_or_replaced(mem, clock):
    remember = remember_tool(mem)
    assert remember(text="I live in Lisbon") == "Remembered: I live in Lisbon"
    assert remember(text="I live in Lisbon") == "Remembered: I live in Lisbon (already known, reinforced)"
    clock.advance(days=3)
    assert remember(text="I live in Berlin") == "Remembered: I live in Berlin (replaces an older fact)"
    assert remember(text="  I like jazz  ") == "Remembered: I like jazz"


def test_recall_output_is_readable_and_has_no_ids(mem, clock):
    mem.add_turn("My sister Maria lives in Lisbon.", "Lovely city.")
    mem.add_message("user", "I'm allergic to\npeanuts", name="Ada")
    mem.remember("Maria has a dog called Biscuit")
    recall = recall_tool(mem, limit=20)
    answer = recall(query="Maria Lisbon peanuts Biscuit")
    lines = answer.splitlines()
    assert len(lines) == len(mem.recall("Maria Lisbon peanuts Biscuit", limit=20)) > 3
    for i, line in enumerate(lines, 1):
        assert re.fullmatch(rf"{i}\. \[(fact|entity|past conversation|current conversation), 2023-11-14\] "
                            r".+ \(score \d+\.\d\d\)", line), line
    for marker in ("fact_", "msg_", "ent_", "tri_"):
        assert marker not in answer
    assert "[fact, 2023-11-14] Maria has a dog called Biscuit" in answer
    # the turn and the fact extracted from it as it was written are one source: one line, either form
    assert ("user: My sister Maria lives in Lisbon." in answer) != ("] My sister Maria lives in Lisbon." in answer)
    assert "Ada: I'm allergic to ⏎ peanuts" in answer  # the speaker, and one line per hit (⏎: its line break)
    assert "assistant: Lovely city." in answer


def test_recall_marks_superseded_facts_and_says_when_nothing_matches(mem, clock):
    recall = recall_tool(mem)
    assert recall(query="where do I   live") == 'No memories match "where do I live".'
    mem.remember("I live in Lisbon")
    clock.advance(days=1)
    mem.remember("I live in Berlin")
    lines = recall(query="live", tiers=["long_term"]).splitlines()
    assert lines[0].startswith("1. [fact, 2023-11-15] I live in Berlin")
    assert lines[1].startswith("2. [fact, 2023-11-14, superseded] I live in Lisbon")


def test_recall_limit_and_tiers(mem):
    for i in range(6):
        mem.remember(f"Project alpha milestone number {i} is scheduled")
    recall = recall_tool(mem, limit=2)
    assert len(recall(query="project alpha milestone", tiers=["long_term"]).splitlines()) == 2
    assert len(recall(query="project alpha milestone", limit=4, tiers=["long_term"]).splitlines()) == 4
    assert "[fact" not in recall(query="project alpha milestone", tiers=["entity", "episodic"])


def test_null_optional_arguments_count_as_absent(mem):
    remember, recall = memory_tools(mem)
    assert remember('{"text": "I like jazz", "importance": null, "category": null}') == "Remembered: I like jazz"
    assert recall({"query": "jazz", "limit": None, "tiers": None}).startswith("1. [fact")
    assert recall({"query": "jazz", "limit": 3.0}).startswith("1. ")  # an integral float is an integer


def test_tools_act_on_their_scope_only(mem):
    ada, bob = mem.scoped(user_id="ada"), mem.scoped(user_id="bob")
    remember_tool(ada)(text="I'm allergic to peanuts")
    assert recall_tool(bob)(query="allergic peanuts") == 'No memories match "allergic peanuts".'
    assert "peanuts" in recall_tool(ada)(query="allergic peanuts")
    assert bob.facts() == [] and mem.facts() == []


# -- tool calls --------------------------------------------------------------------------------


def test_run_tool_call_with_a_dict_and_an_sdk_like_object(mem):
    tools = memory_tools(mem, prefix="memory")
    call = {"id": "call_1", "type": "function",
            "function": {"name": "memory_remember", "arguments": '{"text": "I work at Acme"}'}}
    assert run_tool_call(tools, call) == {"role": "tool", "tool_call_id": "call_1",
                                          "content": "Remembered: I work at Acme"}
    sdk_call = SimpleNamespace(id="call_2", type="function", function=SimpleNamespace(
        name="memory_recall", arguments='{"query": "Acme", "tiers": ["long_term"]}'))
    message = run_tool_call(tools, sdk_call)
    assert message["role"] == "tool" and message["tool_call_id"] == "call_2"
    assert re.fullmatch(r"1\. \[fact, 2023-11-14\] I work at Acme \(score 0\.\d\d\)", message["content"])


def test_run_tool_call_refuses_unknown_tools_and_malformed_calls(mem):
    tools = memory_tools(mem)
    with pytest.raises(MemoryValueError) as err:
        run_tool_call(tools, {"id": "c", "function": {"name": "forget", "arguments": "{}"}})
    assert err.value.field == "tool" and "forget" in str(err.value) and "remember" in str(err.value)
    with pytest.raises(MemoryTypeError) as err:
        run_tool_call(tools, {"function": {"name": "recall", "arguments": "{}"}})
    assert err.value.field == "call.id"
    with pytest.raises(MemoryValueError) as err:
        run_tool_call(tools, {"id": "c"})
    assert err.value.field == "call.function"


# -- bad arguments -----------------------------------------------------------------------------

BAD_REMEMBER = [
    ('{"text": "I like jazz"', MemoryValueError, "arguments"),  # truncated JSON
    ('["I like jazz"]', MemoryTypeError, "arguments"),
    (42, MemoryTypeError, "arguments"),
    ("{}", MemoryValueError, "arguments.text"),
    ("", MemoryValueError, "arguments.text"),
    ({"text": "   "}, MemoryValueError, "arguments.text"),
    ({"text": 3}, MemoryTypeError, "arguments.text"),
    ({"text": None}, MemoryTypeError, "arguments.text"),
    ({"text": "I like jazz", "importance": 1.5}, MemoryValueError, "arguments.importance"),
    ({"text": "I like jazz", "importance": "high"}, MemoryTypeError, "arguments.importance"),
    ({"text": "I like jazz", "importance": True}, MemoryTypeError, "arguments.importance"),
    ('{"text": "I like jazz", "importance": NaN}', MemoryValueError, "arguments.importance"),
    ({"text": "I like jazz", "category": ["a"]}, MemoryTypeError, "arguments.category"),
    ({"text": "I like jazz", "metadata": {}}, MemoryValueError, "arguments.metadata"),
]


@pytest.mark.parametrize(("arguments", "error", "field"), BAD_REMEMBER)
def test_bad_remember_arguments_name_the_field_and_write_nothing(mem, arguments, error, field):
    with pytest.raises(error) as err:
        remember_tool(mem)(arguments)
    assert err.value.field == field and str(err.value).startswith(field)
    assert texts(mem) == [] and mem.entities() == []


BAD_RECALL = [
    ({"query": ""}, MemoryValueError, "arguments.query"),
    ({"q": "jazz"}, MemoryValueError, "arguments.q"),
    ({"query": "jazz", "q": None}, MemoryValueError, "arguments.q"),
    ({"query": "jazz", "limit": 10**40}, MemoryValueError, "arguments.limit"),
    ({"query": "jazz", "limit": 0}, MemoryValueError, "arguments.limit"),
    ({"query": "jazz", "limit": 21}, MemoryValueError, "arguments.limit"),
    ({"query": "jazz", "limit": 2.5}, MemoryTypeError, "arguments.limit"),
    ({"query": "jazz", "limit": "3"}, MemoryTypeError, "arguments.limit"),
    ({"query": "jazz", "tiers": "long_term"}, MemoryTypeError, "arguments.tiers"),
    ({"query": "jazz", "tiers": []}, MemoryValueError, "arguments.tiers"),
    ({"query": "jazz", "tiers": ["facts"]}, MemoryValueError, "arguments.tiers[0]"),
    ({"query": "jazz", "tiers": ["entity", "entity"]}, MemoryValueError, "arguments.tiers"),
]


@pytest.mark.parametrize(("arguments", "error", "field"), BAD_RECALL)
def test_bad_recall_arguments_name_the_field(mem, arguments, error, field):
    mem.remember("I like jazz")
    before = [f.access_count for f in mem.facts()]
    with pytest.raises(error) as err:
        recall_tool(mem)(json.dumps(arguments))
    assert err.value.field == field
    assert [f.access_count for f in mem.facts()] == before  # nothing recalled, nothing touched


def test_keywords_merge_with_arguments(mem):
    remember = remember_tool(mem)
    assert remember({"text": "I like jazz"}, category="taste") == "Remembered: I like jazz"
    assert mem.facts()[0].category == "taste"
    with pytest.raises(MemoryValueError):
        remember({"text": "I like blues"}, mood="happy")
    assert texts(mem) == ["I like jazz"]


# -- properties and doctests -------------------------------------------------------------------

WORDS = st.lists(st.text("bcdfghjklmnprstvz", min_size=4, max_size=8).map(lambda w: w[:2] + "a" + w[2:]),
                 min_size=1, max_size=4).map(" ".join)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=WORDS)
def test_anything_remembered_through_the_tool_is_recalled_by_its_text(clock, text):
    with UnifiedMemory(clock=clock) as mem:
        remember, recall = memory_tools(mem)
        assert remember(json.dumps({"text": text})) == f"Remembered: {text}"
        answer = recall(json.dumps({"query": text}))
        assert f"] {text} (score" in answer
        assert "fact_" not in answer


def test_doctests():
    result = doctest.testmod(tools_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5 and result.failed == 0


def test_memory_tool_is_a_frozen_value(mem):
    tool = recall_tool(mem)
    with pytest.raises(AttributeError):
        tool.name = "other"  # type: ignore[misc]
    assert isinstance(tool, MemoryTool) and "handler" not in repr(tool)
