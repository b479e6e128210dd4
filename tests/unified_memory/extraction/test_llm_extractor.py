"""LLMExtractor: strict JSON replies, one retry, then the offline fallback."""

from __future__ import annotations

import doctest
import json
from collections import deque
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import unified_memory.extraction.llm_extractor as extraction_module
from unified_memory import UnifiedMemory
from unified_memory.errors import MemoryTypeError, MemoryValueError
from unified_memory.extraction.llm_extractor import LLMExtractor, extraction_schema, parse_reply
from unified_memory.extraction.rules import RuleExtractor
from unified_memory.protocols import Extractor
from unified_memory.types import ExtractedEntity, ExtractedFact, ExtractedTriple, Extraction, Message


class ScriptedLLM:
    """Returns queued replies in order (an Exception in the queue is raised); records prompts."""

    def __init__(self, *replies: str | Exception, default: str | None = None) -> None:
        self.replies: deque[str | Exception] = deque(replies)
        self.default = default
        self.prompts: list[list[dict[str, Any]]] = []

    def complete(self, messages: Any) -> str:
        self.prompts.append([dict(m) for m in messages])
        if not self.replies:
            if self.default is None:
                raise AssertionError("the fake LLM was called more often than scripted")
            return self.default
        reply = self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        return reply


SISTER = {
    "facts": [{"text": "My sister Maria lives in Lisbon", "importance": 0.8, "category": "relationship",
               "subject": "Maria", "attribute": "residence", "value": "Lisbon"}],
    "entities": [{"name": "Maria", "type": "person", "attributes": {"relation": "sister"}},
                 {"name": "Lisbon", "type": "place", "attributes": {}}],
    "triples": [{"subject": "user", "predicate": "has_sister", "object": "Maria"},
                {"subject": "Maria", "predicate": "lives_in", "object": "Lisbon"}],
}
VALID = json.dumps(SISTER)
MESSAGE = Message(role="user", content="My sister Maria lives in Lisbon")


def expected_sister() -> Extraction:
    return Extraction(
        facts=[ExtractedFact(text="My sister Maria lives in Lisbon", importance=0.8, category="relationship",
                             subject="Maria", attribute="residence", value="Lisbon")],
        entities=[ExtractedEntity(name="Maria", type="person", attributes={"relation": "sister"}),
                  ExtractedEntity(name="Lisbon", type="place")],
        triples=[ExtractedTriple(subject="user", predicate="has_sister", object="Maria"),
                 ExtractedTriple(subject="Maria", predicate="lives_in", object="Lisbon")],
    )


def with_fact(**changes: Any) -> str:
    reply = json.loads(VALID)
    reply["facts"][0].update(changes)
    return json.dumps(reply)


def without_fact_field(name: str) -> str:
    reply = json.loads(VALID)
    del reply["facts"][0][name]
    return json.dumps(reply)


def test_valid_json_becomes_facts_entities_and_triples() -> None:
    llm = ScriptedLLM(VALID)
    extractor = LLMExtractor(llm)
    assert isinstance(extractor, Extractor)
    assert extractor.extract(MESSAGE) == expected_sister()
    assert (extractor.calls, extractor.retries, extractor.fallbacks, extractor.last_error) == (1, 0, 0, None)


def test_the_prompt_carries_the_schema_the_message_and_its_context() -> None:
    llm = ScriptedLLM(VALID)
    LLMExtractor(llm).extract(Message(role="user", content="Lisbon"),
                              context=[Message(role="assistant", content="Where does Maria live?")])
    [[system, user]] = llm.prompts
    assert system["role"] == "system" and json.dumps(extraction_schema(), separators=(",", ":")) in system["content"]
    assert '"additionalProperties":false' in system["content"]  # extra="forbid" reaches the model
    for name in ("importance", "category", "attributes", "predicate"):
        assert name in system["content"]
    assert user["role"] == "user"
    assert "[assistant] Where does Maria live?" in user["content"]
    assert user["content"].rstrip().endswith("Lisbon")


@pytest.mark.parametrize("wrap", [
    "```json\n{}\n```",
    "```\n{}\n```",
    "Here is the extraction:\n```JSON\n{}\n```\nHope that helps!",
    "Sure! {}",
    "  {}  \n",
])
def test_fenced_or_wrapped_json_is_accepted(wrap: str) -> None:
    extractor = LLMExtractor(ScriptedLLM(wrap.replace("{}", VALID)))
    assert extractor.extract(MESSAGE) == expected_sister()
    assert extractor.retries == 0


def test_malformed_then_valid_retries_once_and_says_what_was_wrong() -> None:
    llm = ScriptedLLM('{"facts": [', VALID)
    extractor = LLMExtractor(llm)
    assert extractor.extract(MESSAGE) == expected_sister()
    assert (extractor.calls, extractor.retries, extractor.fallbacks) == (2, 1, 0)
    retry = llm.prompts[1]
    assert retry[:2] == llm.prompts[0]
    assert retry[2] == {"role": "assistant", "content": '{"facts": ['}
    assert retry[3]["role"] == "user"
    assert "invalid" in retry[3]["content"].lower() and "json" in retry[3]["content"].lower()
    assert "EOF" in retry[3]["content"] or "Invalid JSON" in retry[3]["content"]


def test_malformed_twice_falls_back_to_the_rule_extractor() -> None:
    llm = ScriptedLLM("not json at all", "still not json")
    extractor = LLMExtractor(llm)
    assert extractor.extract(MESSAGE) == RuleExtractor().extract(MESSAGE)
    assert (extractor.calls, extractor.retries, extractor.fallbacks) == (2, 1, 1)
    assert "no JSON object" in (extractor.last_error or "")


@pytest.mark.parametrize(("bad", "complaint"), [
    (with_fact(importance=1.5), "facts.0.importance"),
    (with_fact(importance=-0.1), "facts.0.importance"),
    (with_fact(importance="0.5"), "facts.0.importance"),  # strict: no silent coercion
    (without_fact_field("text"), "facts.0.text"),
    (without_fact_field("importance"), "facts.0.importance"),
    (with_fact(mood="happy"), "facts.0.mood"),  # extra="forbid"
    (json.dumps({"facts": []}), "entities"),  # partial: a list is missing
    (json.dumps({**SISTER, "entities": [{"name": "Maria", "attributes": {"pets": ["cat"]}}]}), "entities.0"),
    (json.dumps([SISTER]), "reply"),
])
def test_invalid_fields_are_retried_with_the_error_named(bad: str, complaint: str) -> None:
    llm = ScriptedLLM(bad, VALID)
    extractor = LLMExtractor(llm)
    assert extractor.extract(MESSAGE) == expected_sister()
    assert extractor.retries == 1 and extractor.fallbacks == 0
    assert complaint in llm.prompts[1][-1]["content"]


def test_invalid_fields_twice_fall_back_and_nothing_half_valid_is_kept() -> None:
    half = json.loads(VALID)
    half["facts"].append({"text": "I am 200% sure", "importance": 2})
    llm = ScriptedLLM(json.dumps(half), json.dumps(half))
    extractor = LLMExtractor(llm)
    out = extractor.extract(MESSAGE)
    assert out == RuleExtractor().extract(MESSAGE)
    assert all(f.text != "I am 200% sure" for f in out.facts)
    assert extractor.fallbacks == 1 and "facts.1.importance" in (extractor.last_error or "")


def test_empty_strings_are_skipped_not_errors() -> None:
    reply = json.loads(VALID)
    reply["facts"].append({"text": "  ", "importance": 0.5, "category": None})
    reply["entities"].append({"name": "", "type": "person", "attributes": {}})
    reply["triples"].append({"subject": "user", "predicate": " ", "object": "x"})
    extractor = LLMExtractor(ScriptedLLM(json.dumps(reply)))
    assert extractor.extract(MESSAGE) == expected_sister()
    assert extractor.retries == 0


def test_predicates_with_spaces_become_snake_case() -> None:
    reply = {"facts": [], "entities": [], "triples": [{"subject": "Maria", "predicate": "lives in",
                                                      "object": "Lisbon"}]}
    out = LLMExtractor(ScriptedLLM(json.dumps(reply))).extract(MESSAGE)
    assert out.triples[0].predicate == "lives_in"


def test_an_llm_that_raises_falls_back_at_once() -> None:
    llm = ScriptedLLM(ConnectionError("endpoint down"))
    extractor = LLMExtractor(llm)
    assert extractor.extract(MESSAGE) == RuleExtractor().extract(MESSAGE)
    assert (extractor.calls, extractor.retries, extractor.fallbacks) == (1, 0, 1)
    assert "ConnectionError: endpoint down" in (extractor.last_error or "")


def test_a_custom_fallback_and_no_retries() -> None:
    class Nothing:
        def extract(self, message: Message, *, context: Any = ()) -> Extraction:
            return Extraction()

    extractor = LLMExtractor(ScriptedLLM("nope"), fallback=Nothing(), max_retries=0)
    assert extractor.extract(MESSAGE) == Extraction()
    assert (extractor.calls, extractor.retries, extractor.fallbacks) == (1, 0, 1)


def test_more_retries_when_asked() -> None:
    extractor = LLMExtractor(ScriptedLLM("x", "y", VALID), max_retries=2)
    assert extractor.extract(MESSAGE) == expected_sister()
    assert (extractor.calls, extractor.retries, extractor.fallbacks) == (3, 2, 0)


def test_an_empty_message_does_not_call_the_model() -> None:
    llm = ScriptedLLM()
    assert LLMExtractor(llm).extract(Message(role="assistant", content=None)) == Extraction()
    assert llm.prompts == []


def test_a_plain_callable_is_a_model() -> None:
    assert LLMExtractor(lambda messages: VALID).extract(MESSAGE) == expected_sister()


def test_bad_arguments_name_the_field() -> None:
    with pytest.raises(MemoryTypeError) as caught:
        LLMExtractor(42)
    assert caught.value.field == "llm"
    with pytest.raises(MemoryTypeError) as caught:
        LLMExtractor(lambda m: "", fallback=object())
    assert caught.value.field == "fallback"
    with pytest.raises(MemoryValueError) as caught:
        LLMExtractor(lambda m: "", max_retries=-1)
    assert caught.value.field == "max_retries"
    with pytest.raises(MemoryTypeError) as caught:
        LLMExtractor(lambda m: "").extract("text")  # type: ignore[arg-type]
    assert caught.value.field == "message"


def test_parse_reply_rejects_non_objects() -> None:
    with pytest.raises(ValueError, match="no JSON object"):
        parse_reply("no braces here")
    with pytest.raises(ValueError, match="object"):
        parse_reply("[]")


def test_end_to_end_through_unified_memory() -> None:
    llm = ScriptedLLM(VALID, default='{"facts": [], "entities": [], "triples": []}')
    extractor = LLMExtractor(llm)
    with UnifiedMemory(extractor=extractor) as mem:
        mem.add_turn("My sister Maria lives in Lisbon", "Nice", extract=True)
        facts = mem.facts()
        assert [f.text for f in facts] == ["My sister Maria lives in Lisbon"]
        assert facts[0].category == "relationship" and facts[0].importance == pytest.approx(0.8)
        triples = {(t.subject, t.predicate, t.object) for t in mem.triples()}
        assert ("Maria", "lives_in", "Lisbon") in triples
        assert ("has_sister", "Maria") in {(t.predicate, t.object) for t in mem.triples()}
        assert "Maria" in {e.name for e in mem.entities()}
    assert llm.prompts, "the memory asked the LLM"
    assert "My sister Maria lives in Lisbon" in llm.prompts[0][1]["content"]
    assert extractor.fallbacks == 0


def test_end_to_end_fallback_still_stores_what_the_rules_find() -> None:
    extractor = LLMExtractor(ScriptedLLM(default="I am a teapot"))
    with UnifiedMemory(extractor=extractor) as mem:
        mem.add_turn("My sister Maria lives in Lisbon", "Nice", extract=True)
        assert [f.text for f in mem.facts()] == ["My sister Maria lives in Lisbon"]
    assert extractor.fallbacks >= 1


_json_ish = st.builds(json.dumps, st.dictionaries(
    st.sampled_from(["facts", "entities", "triples"]),
    st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=8)), max_size=3)))
_replies = st.one_of(st.text(), st.from_regex(r"\A```json\n\{.*\}\n```\Z"), _json_ish)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_replies, min_size=2, max_size=2))
def test_arbitrary_replies_never_raise(replies: list[str]) -> None:
    extractor = LLMExtractor(ScriptedLLM(*replies))
    out = extractor.extract(MESSAGE)
    assert isinstance(out, Extraction)
    assert extractor.calls + extractor.fallbacks >= 1


def test_docstring_examples_run() -> None:
    assert doctest.testmod(extraction_module).failed == 0


def test_an_update_the_model_reports_supersedes_the_old_value() -> None:
    """The schema carries ``replaces``: the model names the old value, memory supersedes the fact that held it."""
    first = json.dumps({"facts": [{"text": "I drive a Honda Civic", "importance": 0.7, "subject": "user",
                                   "attribute": "car", "value": "Honda Civic"}], "entities": [], "triples": []})
    second = json.dumps({"facts": [{"text": "I sold the Civic and bought a Kia Niro", "importance": 0.7,
                                    "subject": "user", "attribute": "vehicle", "value": "Kia Niro",
                                    "replaces": ["Civic"]}], "entities": [], "triples": []})
    assert "replaces" in extraction_schema()["$defs"]["FactReply"]["properties"]
    llm = ScriptedLLM(first, second, default='{"facts": [], "entities": [], "triples": []}')
    with UnifiedMemory(extractor=LLMExtractor(llm)) as mem:
        mem.add_turn("I drive a Honda Civic", "Nice", extract=True)
        mem.add_turn("I sold the Civic and bought a Kia Niro", "Congrats", extract=True)
        history = {f.text: f for f in mem.facts(include_history=True)}
        assert history["I drive a Honda Civic"].status == "superseded"
        assert history["I drive a Honda Civic"].superseded_by == history["I sold the Civic and bought a Kia Niro"].id
        assert mem.recall("which car do I drive", tiers="long_term")[0].text == "I sold the Civic and bought a Kia Niro"
    assert '"replaces"' in llm.prompts[0][0]["content"]
