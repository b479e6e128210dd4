"""The rule extractor's shortcuts (word gates before regex scans, one tokenisation per sentence)
change no result: its full output (facts with importance, category, slot and confidence; entities;
triples; values replaced) equals the reference's, every gate open, over a large varied corpus —
the synthetic benchmark facts, the update and first-hour corpora, the docs' quoted examples, the
extraction tests' sentences in odd casings — and over random sentences built from the rules' words."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import unified_memory.extraction._changes as changes
import unified_memory.extraction._patterns as patterns
import unified_memory.extraction._slots as slots
import unified_memory.extraction.rules as rules
from tests.unified_memory.extraction._reference import assessments, outputs, strings, ungated
from tests.unified_memory.extraction.test_rules_speed import CORPUS as ODD_CASINGS
from unified_memory.types import Extraction

pytestmark = pytest.mark.sqlite_only  # pure functions: no storage

ROOT = Path(__file__).resolve().parents[3]


def _synthetic() -> list[str]:
    spec = importlib.util.spec_from_file_location("synthetic", ROOT / "benchmarks" / "_synthetic.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("synthetic", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return [*module.synthetic_facts(1500), *module.synthetic_facts(500, seed=3),
            *(n.fact for n in module.labelled_needles(100)), *module.queries(200)]


def _docs() -> list[str]:
    found: set[str] = set()
    for path in [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]:
        found.update(re.findall(r"\"([A-Z][^\"\n]{4,200})\"", path.read_text(encoding="utf-8")))
    return sorted(found)


def _data() -> list[str]:
    texts: set[str] = set()
    for name in ("updates.json", "first_hour.json"):
        texts.update(s for s in strings(json.loads((ROOT / "tests" / "data" / name).read_text(encoding="utf-8")))
                     if s.strip())
    return sorted(texts)


CORPUS = [*_synthetic(), *_data(), *_docs(), *ODD_CASINGS]


def test_the_corpus_is_large_and_exercises_the_rules() -> None:
    assert len(CORPUS) > 3000
    found = outputs(CORPUS[:0] + _data())
    assert sum(1 for out in found for f in out["facts"] if f["attribute"]) > 200
    assert sum(1 for out in found for f in out["facts"] if f["replaces"]) > 50


@pytest.mark.slow
def test_fast_path_equals_reference_on_the_corpus() -> None:
    fast = outputs(CORPUS)
    with ungated():
        slow = outputs(CORPUS)
    assert len(fast) == len(slow)
    for text_out, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert a == b, text_out


def test_importance_assessments_equal_the_reference_on_the_corpus() -> None:
    """The importance scorer's shortcuts (its gates, one sentence scored without the many-sentence
    bookkeeping) change no score, category or reason, of whole texts of one or several sentences."""
    texts = [*CORPUS, *(" ".join(CORPUS[i:i + 3]) for i in range(0, len(CORPUS), 7)),
             *("\n".join(CORPUS[i:i + 2]) for i in range(0, len(CORPUS), 11))]
    fast = assessments(texts)
    with ungated():
        slow = assessments(texts)
    assert sum(a.reasons != b.reasons for a, b in zip(fast, slow, strict=True)) == 0
    assert fast == slow


def test_records_built_without_validation_are_valid() -> None:
    """The extractor builds its records as trusted (no per-field validation): each one is what
    validating its values gives, so a value pydantic would refuse or convert cannot slip through."""
    for dumped in outputs(CORPUS):
        assert Extraction.model_validate(dumped).model_dump() == dumped
        assert all(type(f["importance"]) in (float, type(None)) and type(f["confidence"]) is float
                   for f in dumped["facts"])


def test_ungated_really_opens_the_gates() -> None:
    """The reference is a different path: with the gates open the skipped scans run."""
    sentence = "My dentist collects digital chess sets in Porto every summer"
    assert not changes._cued(sentence) and not rules._may_split(sentence) and not rules._may_request(sentence)
    with ungated():
        assert changes._cued(sentence) and rules._may_split(sentence) and rules._may_request(sentence)
        assert all(need == 0 for need, *_ in slots._GATED_FRAMES)
        assert all(need == 0 for need, _ in patterns._GATED)
        # the choices remembered per gate bits are the ungated ones: every pattern and frame, whatever the bits
        assert len(patterns._chosen(0)) == len(patterns._GATED) and len(slots._frames(0)) == len(slots._FRAMES)
    assert len(patterns._chosen(0)) < len(patterns._GATED) and len(slots._frames(0)) < len(slots._FRAMES)


# The words the gates look for, their neighbours, names, numbers, punctuation and odd letters.
VOCAB = sorted({*changes.CUE_HEADS, "cancelled", "canceled", "anymore", "any", "more", "longer", "up", "rid",
                "over", "to", "from", "and", "but", "so", "plus", "also", "then", "now", "I", "i", "we", "We",
                "remember", "note", "keep", "in", "mind", "that", ";", "-", " - ", "\u2013", "\u2014", ",", ".",
                "my", "our", "is", "are", "I'm", "I've", "used", "not", "don't", "live", "work", "at", "as",
                "Lisbon", "Porto", "Acme", "Civic", "Honda", "Maria", "sister", "wife", "dog", "three", "cats",
                "coach", "Petra", "iPhone", "vegan", "allergic", "peanuts", "love", "jazz", "every", "Monday",
                "7", "pm", "2019", "a", "the", "with", "Jo", "visiting", "Kyoto", "maybe", "think",
                "\u0131", "\u0130", "\u017f", "\u212a", "N\u0131ck", "\u017fold", "mo\u212aed", "left", "Left"}
               | {w for needs in slots._FRAME_NEEDS for group in needs for w in group})


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=16),
       case=st.sampled_from(["", "lower", "upper", "title"]))
def test_fast_path_equals_reference_on_random_sentences(words: list[str], case: str) -> None:
    text = " ".join(words)
    text = getattr(text, case)() if case else text
    fast = outputs([text]), assessments([text])
    with ungated():
        assert (outputs([text]), assessments([text])) == fast
