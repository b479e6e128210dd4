"""The update corpus (tests/data/updates.json) keeps its size, its spread and the guarantees
benchmarks/updates.py relies on, so it cannot silently shrink or grow ambiguous."""

from __future__ import annotations

import doctest
import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from scoring.text import analyze

ROOT = Path(__file__).resolve().parents[1]
CORPUS = json.loads((ROOT / "tests" / "data" / "updates.json").read_text(encoding="utf-8"))
CASES = CORPUS["cases"]
FIELDS = {"id", "attribute", "detail", "phrasing", "old_value", "new_value", "old_statement", "new_statement",
          "question", "first_conversation", "second_conversation"}
NUMBERS = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"}
CUES = {  # what each phrasing of change must say
    "from_to": r"\bfrom\b.*\bto\b",
    "no_longer": r"\bno longer\b",
    "not_anymore": r"(?:\bnot\b|n't\b).*\banymore\b",
    "used_to": r"\bused to\b",
    "switched": r"\b(?:switched|changed)\b.*\bto\b",
    "sold_bought": r"\bsold\b.*\bbought\b",
    "left_new": r"\bleft\b.*\bnew\b",
    "gave_up_instead": r"\bgave up\b.*\binstead\b",
    "now": r"\bnow\b",
    "count": r"\b(?:another|more|added|down to|only|left|now)\b",
}


def _benchmark():
    spec = importlib.util.spec_from_file_location("updates_benchmark", ROOT / "benchmarks" / "updates.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


BENCH = _benchmark()
names = BENCH.names


def test_size_and_spread():
    attributes = Counter(c["attribute"] for c in CASES)
    phrasings = Counter(c["phrasing"] for c in CASES)
    assert len(CASES) >= 150
    assert len(attributes) >= 12 and min(attributes.values()) >= 10, attributes
    assert len(phrasings) >= 8 and min(phrasings.values()) >= 5, phrasings
    assert set(phrasings) == set(CORPUS["phrasings"]) == set(CUES)
    assert {"residence", "job", "relationship", "diet", "vehicle", "device", "pets", "favourite", "schedule",
            "contact", "learning", "role"} <= set(attributes)


def test_no_two_cases_alike():
    assert len({c["id"] for c in CASES}) == len(CASES)
    for field in ("old_statement", "new_statement", "question"):
        assert len({c[field].lower() for c in CASES}) == len(CASES), field


def test_timeline():
    assert CORPUS["days_between_conversations"] >= 28  # a month apart
    assert CORPUS["minutes_between_turns"] > 0 and CORPUS["question_after_minutes"] > 0
    assert "T" in CORPUS["start"] and CORPUS["start"].endswith("+00:00")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case(case):
    old, new = case["old_value"], case["new_value"]
    assert set(case) == FIELDS
    assert old and new and not names(old, new) and not names(new, old)
    # the old statement names only the old value, as current; the new one names the new value
    assert names(case["old_statement"], old) and not names(case["old_statement"], new)
    assert not BENCH.PAST_MARKERS.search(case["old_statement"])
    assert names(case["new_statement"], new)
    assert re.search(CUES[case["phrasing"]], case["new_statement"], re.I), case["phrasing"]
    if case["phrasing"] == "now":
        assert not names(case["new_statement"], old)
    if case["phrasing"] == "count":
        assert {old.lower(), new.lower()} <= NUMBERS
    # the question names neither value and is worded unlike either statement
    question = case["question"]
    assert question.endswith("?") or question.endswith(".")
    assert not names(question, old) and not names(question, new)
    for statement in (case["old_statement"], case["new_statement"]):
        q, s = set(analyze(question)), set(analyze(statement))
        assert question.lower().rstrip("?.") not in statement.lower()
        assert len(q & s) / len(q | s) < 0.7, statement


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_conversations(case):
    old, new = case["old_value"], case["new_value"]
    for turns, statement in ((case["first_conversation"], case["old_statement"]),
                             (case["second_conversation"], case["new_statement"])):
        assert all(isinstance(t, list) and len(t) == 2 and all(isinstance(x, str) and x for x in t) for t in turns)
        users = [user for user, _ in turns]
        assert users.count(statement) == 1
        at = users.index(statement)
        fillers = turns[:at] + turns[at + 1:]
        assert 2 <= len(fillers) <= 4
        assert 0 < at < len(turns) - 1, "unrelated turns before and after the statement"
        for user, assistant in fillers:
            assert not any(names(text, value) for text in (user, assistant) for value in (old, new)), user
        assert not names(turns[at][1], old) and not names(turns[at][1], new), "replies name no value"


def test_questions_are_not_all_lexical_matches():
    """Enough questions share no term with the new statement, so lexical matching alone cannot pass."""
    apart = sum(not set(analyze(c["question"])) & set(analyze(c["new_statement"])) for c in CASES)
    assert apart >= 0.3 * len(CASES)


def test_benchmark_definitions():
    assert doctest.testmod(BENCH, optionflags=doctest.ELLIPSIS).failed == 0
