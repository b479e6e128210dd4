"""The shortcuts that keep rule extraction and importance scoring fast change no result.

Gates skip a pattern only on a sentence that cannot match it; each test compares the gated
functions with the same functions run without gates, on sentences that exercise every pattern.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoring._importance_rules as rules_module
import unified_memory.extraction._patterns as patterns_module
from scoring._importance_rules import hedged
from scoring.importance import split_sentences
from unified_memory.extraction._patterns import find_hits, mentions

SENTENCES = [
    "My full name is Ada Lovelace", "my name's ada", "I'm Ada", "Call me Bo", "my sister Maria lives in Lisbon",
    "My best friend, Jo, is great", "Maria is my older sister", "I live in Lisbon", "We moved back to Porto",
    "I lived in Paris for years", "I'm moving to Berlin", "I grew up in Ohio", "I was raised in Goa",
    "I'm originally from Spain", "She was born in Rome", "I was born in 1990", "I was born on May 3rd, 1990",
    "My bday is on 12/05", "I work at Acme as an engineer", "She worked for Google", "I was hired by Initech",
    "I got a new job at Umbrella", "I study biology at the University of Lisbon", "I work as a nurse",
    "He's now a senior software developer", "I'm a Canadian", "I'm 34 years old", "I am 34.", "I just turned 40",
    "I'm happily married", "We got engaged", "I've been vegan since 2010", "I'm on a keto diet",
    "I'm allergic to peanuts and shellfish", "Don't forget my peanut allergy", "I'm lactose intolerant",
    "I can't eat gluten", "I have type 1 diabetes", "My son is autistic", "I love jazz and I play guitar",
    "I'd like some tea", "I don't really like horror movies", "My favourite movies are Alien, Heat",
    "We adopted two dogs named Rex and Fido", "I had lunch with Jo and Sam at Acme Inc.",
    "We're visiting Kyoto next week", "I used to live in Paris", "I don't live in Paris anymore",
    "I live in Lisbon, I think", "My birthday is May 3, maybe we can celebrate then", "Perhaps",
    "I moved from Denver to Portland in June", "I quit and started as a software tester at Zillow",
    "She began working for Initech",
    "I'm not sure I work at Acme", "Kind of like jazz", "thanks!", "What's your name?", "",
]


def _variants(sentence: str) -> list[str]:
    # Under re.I "ı"/"İ" match "i", "ſ" matches "s" and the Kelvin sign matches "k": gates must see them.
    odd = sentence.replace("i", "\u0131").replace("s", "\u017f").replace("k", "\u212a").replace("I", "\u0130")
    return [sentence, sentence.lower(), sentence.upper(), sentence.title(), odd]


CORPUS = [v for s in SENTENCES for v in _variants(s)]


def _gate_bits(sentence: str) -> int:
    """The gate bits ``find_hits`` computes for a sentence (recomputed here, uncached)."""
    low = patterns_module.folded(sentence)
    bits = 0
    for word, bit in patterns_module._ELSEWHERE:
        bits |= bit if word in low else 0
    for run in patterns_module._LETTERS.findall(low):
        bits |= patterns_module._run_bits(run)
    return bits


def test_every_gated_pattern_is_exercised_and_never_skipped_where_it_matches() -> None:
    matched = set()
    for sentence in CORPUS:
        for index, (need, entry) in enumerate(patterns_module._GATED):
            if entry[-1].search(sentence):
                matched.add(index)
                assert _gate_bits(sentence) & need == need, (entry[0], sentence)
    assert matched == set(range(len(patterns_module._GATED)))


@pytest.fixture
def ungated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns_module, "_GATED", tuple((0, entry) for _, entry in patterns_module._GATED))
    monkeypatch.setattr(patterns_module, "_ORG_GATE", re.compile(""))
    monkeypatch.setattr(patterns_module, "_TRAVEL_GATE", re.compile(""))
    monkeypatch.setattr(rules_module, "_HEDGE_GATE", re.compile(""))


def _outputs() -> list[object]:
    out: list[object] = []
    for text in CORPUS:
        for s in split_sentences(text):
            out.append((find_hits(s), mentions(s), hedged(s), hedged(s.lower(), 4)))
    return out


def test_gates_change_no_result(request: pytest.FixtureRequest) -> None:
    gated = _outputs()
    request.getfixturevalue("ungated")
    assert _outputs() == gated
    assert any(hits for hits, *_ in gated) and any(found for _, found, *_ in gated)


def test_the_run_cache_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns_module, "_RUN_BITS", {})
    for n in range(50_010):
        patterns_module._run_bits(f"w{n}")
    assert len(patterns_module._RUN_BITS) <= 50_000
    assert patterns_module._run_bits("allergies") == patterns_module._run_bits("allergies") != 0


# Words that trigger patterns, their neighbours in real sentences, and odd casings and letters.
_VOCAB = sorted({w for s in SENTENCES for w in re.findall(r"[\w'/]+|[,.;:!?-]", s)}
                | {"my", "I", "I'm", "we're", "is", "am", "was", "named", "called", "the", "a", "and", "not",
                   "never", "used", "to", "in", "at", "as", "with", "from", "Maria", "Acme", "Lisbon", "dog",
                   "cats", "husband", "wife", "kid", "doctor", "teacher", "German", "vegetarian", "celiac",
                   "allergy", "Allergic", "\u0130", "\u0131", "\u017f", "\u212a", "favorite", "favourite"})


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=14))
def test_gates_never_skip_a_pattern_that_matches_random_sentences(words: list[str]) -> None:
    sentence = " ".join(words)
    low, bits = patterns_module.folded(sentence), _gate_bits(sentence)
    for need, entry in patterns_module._GATED:
        if entry[-1].search(sentence):
            assert bits & need == need, (entry[0], sentence)
    if patterns_module._ORG.search(sentence):
        assert patterns_module._ORG_GATE.search(sentence)
    if patterns_module._TRAVEL.search(sentence):
        assert patterns_module._TRAVEL_GATE.search(low)
