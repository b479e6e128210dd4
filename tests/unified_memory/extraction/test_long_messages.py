"""Long messages (security issue 36): the work of rule extraction, importance scoring and secret
redaction grows linearly with the length of a message, whatever its shape, and a message longer
than the rule extractor's bound is read up to the bound.

No test here times anything. Work is counted: the characters each regex search may scan (its
string, or the part between ``pos`` and ``endpos``) and each anchored match reads, through counting
stand-ins for the compiled patterns of the modules involved; the characters of the strings whose
methods are called, and of the matches whose groups are all copied (``sys.setprofile``); and one
per Python call. Ten times the text must cost about ten times the work: a search of the text
before each match (the bug of issue 36: "I like " + "tea, " * 20000 took 18 s) costs a hundred
times. A pattern's own backtracking is not counted that way: the patterns rewritten so they cannot
backtrack over a run again and again are checked equal to their plain forms instead (below), and
``benchmarks/long_messages.py`` times every shape.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoring._importance_rules as importance_rules
import scoring.importance as importance
import unified_memory.extraction._changes as changes
import unified_memory.extraction._patterns as patterns
import unified_memory.extraction._slots as slots
import unified_memory.extraction._subjects as subjects
import unified_memory.extraction.rules as rules
import unified_memory.privacy.secrets as secrets
from unified_memory.extraction.rules import MAX_CHARS, RuleExtractor
from unified_memory.types import Message

pytestmark = pytest.mark.sqlite_only  # pure functions: no storage

ROOT = Path(__file__).resolve().parents[3]
MODULES = (patterns, subjects, slots, changes, rules, importance, importance_rules, secrets)


def _benchmark_shapes() -> dict[str, tuple[str, Callable[[int], str]]]:
    """The message shapes of ``benchmarks/long_messages.py`` (one list: the benchmark times them)."""
    spec = importlib.util.spec_from_file_location("long_messages_benchmark", ROOT / "benchmarks" / "long_messages.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shapes: dict[str, tuple[str, Callable[[int], str]]] = module.SHAPES
    return shapes


SHAPES = _benchmark_shapes()
SMALL, LARGE = 2_000, 20_000  # ten times the text, both within the rule extractor's bound
assert LARGE <= MAX_CHARS
# The work of ten times the text is about 10 times the work when it grows linearly (up to 15 when a longer
# random text opens more of the extractor's word gates), about 100 times when it grows with the square.
LINEAR = 20


class _Counted:
    """A compiled pattern that adds to ``meter`` the characters each call may scan (a search, the whole
    part of the string between ``pos`` and ``endpos``: all of it when nothing matches)."""

    def __init__(self, rx: re.Pattern[str], meter: list[int]) -> None:
        self._rx, self._meter = rx, meter

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rx, name)

    def _scan(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> None:
        self._meter[0] += max(0, min(endpos, len(string)) - pos)

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._scan(string, pos, endpos)
        return self._rx.search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        return self._anchored(self._rx.match(string, pos, endpos))

    def fullmatch(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        return self._anchored(self._rx.fullmatch(string, pos, endpos))

    def _anchored(self, found: re.Match[str] | None) -> re.Match[str] | None:
        """An anchored attempt reads what it matches (how far a failing one read is not known: one)."""
        self._meter[0] += 1 + (found.end() - found.start() if found else 0)
        return found

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._scan(string, pos, endpos)
        return self._rx.finditer(string, pos, endpos)

    def findall(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Any:
        self._scan(string, pos, endpos)
        return self._rx.findall(string, pos, endpos)

    def sub(self, repl: Any, string: str, count: int = 0) -> Any:
        self._scan(string)
        return self._rx.sub(repl, string, count)

    def subn(self, repl: Any, string: str, count: int = 0) -> Any:
        self._scan(string)
        return self._rx.subn(repl, string, count)

    def split(self, string: str, maxsplit: int = 0) -> Any:
        self._scan(string)
        return self._rx.split(string, maxsplit)


def _counted(value: Any, meter: list[int]) -> Any:
    """``value`` with every compiled pattern in it (also inside tuples and dicts) counted."""
    if isinstance(value, re.Pattern):
        return _Counted(value, meter)
    if isinstance(value, tuple):
        return tuple(_counted(item, meter) for item in value)
    if isinstance(value, dict) and any(isinstance(v, re.Pattern | tuple) for v in value.values()):
        return {key: _counted(item, meter) for key, item in value.items()}
    return value


_COPIES = frozenset({"groupdict", "groups", "expand"})  # the methods of a match that copy all its groups


@contextmanager
def _metered(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Within: ``meter[0]`` counts work (see the module docstring) done by the modules in ``MODULES``."""
    meter = [0]
    for module in MODULES:
        for name, value in list(vars(module).items()):
            counted = _counted(value, meter)
            if counted is not value and not isinstance(value, ModuleType):
                monkeypatch.setattr(module, name, counted)
    monkeypatch.setattr(importance, "_DEFAULT", importance.HeuristicImportanceScorer())  # no cached scores

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            meter[0] += 1
        elif event == "c_call":
            receiver = getattr(arg, "__self__", None)
            if isinstance(receiver, str):
                meter[0] += len(receiver)
            elif isinstance(receiver, re.Match):  # groupdict() copies every group; start() reads a number
                meter[0] += receiver.end() - receiver.start() if arg.__name__ in _COPIES else 1

    sys.setprofile(profile)
    try:
        yield meter
    finally:
        sys.setprofile(None)


def _work(monkeypatch: pytest.MonkeyPatch, run: Callable[[str], object], text: str) -> int:
    patterns.letter_runs.cache_clear()
    subjects._clause_index.cache_clear()
    with monkeypatch.context() as patch, _metered(patch) as meter:
        run(text)
    return meter[0]


def _extract(text: str) -> object:
    return RuleExtractor().extract(Message(role="user", content=text))


def _growth(monkeypatch: pytest.MonkeyPatch, run: Callable[[str], object], shape: str) -> float:
    build = SHAPES[shape][1]
    return _work(monkeypatch, run, build(LARGE)) / max(1, _work(monkeypatch, run, build(SMALL)))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_rule_extraction_work_grows_linearly(monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    assert _growth(monkeypatch, _extract, shape) < LINEAR, SHAPES[shape][0]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_importance_scoring_work_grows_linearly(monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    assert _growth(monkeypatch, lambda t: importance.HeuristicImportanceScorer().assess(t), shape) < LINEAR


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_secret_redaction_work_grows_linearly(monkeypatch: pytest.MonkeyPatch, shape: str) -> None:
    assert _growth(monkeypatch, secrets.SecretRedactor(), shape) < LINEAR


def test_the_meter_tells_a_rescan_from_a_look_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The meter itself: searching the text before each match again (the bug of issue 36) grows with the
    square of the length; searching a few characters back, linearly."""
    def rescan(text: str) -> None:
        for m in patterns._NON_WORD.finditer(text):
            patterns._LETTERS.search(text[:m.start()])

    def look_back(text: str) -> None:
        for m in patterns._NON_WORD.finditer(text):
            patterns._LETTERS.search(text, max(0, m.start() - 3), m.start())

    assert _work(monkeypatch, rescan, "a " * 1000) / _work(monkeypatch, rescan, "a " * 100) > 50
    assert _work(monkeypatch, look_back, "a " * 1000) / _work(monkeypatch, look_back, "a " * 100) < 12


# -- what a long message gives ------------------------------------------------------------------------------

FACTS = "My sister Maria lives in Lisbon. I work at Acme as an engineer. I'm allergic to peanuts.\n"


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_long_message_keeps_its_first_facts_and_stays_within_bounds(shape: str) -> None:
    text = FACTS + SHAPES[shape][1](3 * MAX_CHARS) + "\nI live in Porto."
    out = RuleExtractor().extract(Message(role="user", content=text))
    found = {(f.subject, f.attribute, f.value) for f in out.facts}
    assert {("maria", "residence", "Lisbon"), ("user", "employer", "Acme")} <= found
    assert ("user", "residence", "Porto") not in found  # beyond the bound: not read
    assert any(t.predicate == "allergic_to" and t.object == "peanuts" for t in out.triples)
    assert all(len(f.text) <= MAX_CHARS for f in out.facts)
    values = [f.value or "" for f in out.facts] + [t.object for t in out.triples] + [e.name for e in out.entities]
    assert all(len(v) <= patterns.MAX_VALUE for v in values)


def test_the_bound_cuts_after_a_sentence_else_a_word() -> None:
    sentences = "I live in Lisbon. " * 2000
    read = rules._read_part(sentences)
    assert len(read) <= MAX_CHARS and read.endswith("Lisbon. ") and sentences.startswith(read)
    words = rules._read_part("lisbon " * 5000)
    assert len(words) <= MAX_CHARS and words.rstrip().endswith("lisbon")
    assert rules._read_part("x" * (MAX_CHARS + 5)) == "x" * MAX_CHARS
    assert rules._read_part("short") == "short"


def test_a_value_longer_than_a_value_is_none() -> None:
    out = RuleExtractor().extract(Message(role="user", content="I live in " + "Abcdefghij" * 20 + " now"))
    assert not any(f.value for f in out.facts) and not out.triples and not out.entities


_PREFIXES = ["My sister Maria lives in Lisbon.", "I work at Acme as an engineer.", "I'm allergic to peanuts.",
             "I moved to Berlin last year.", "My favourite band is Big Thief.", "We adopted two dogs named Rex and Fido.",
             "I quit the hospital and started as a tester at Zillow.", "Hi, I'm Ada.", "I'd like some tea.",
             "I don't live in Paris anymore.", "My swim coach is Petra.", "I sold the Civic and bought a Subaru."]


def _facts(text: str) -> set[tuple[Any, ...]]:
    out = RuleExtractor().extract(Message(role="user", content=text))
    return {(f.text, f.subject, f.attribute, f.value) for f in out.facts}


@settings(max_examples=60, deadline=None)
@given(prefix=st.lists(st.sampled_from(_PREFIXES), min_size=1, max_size=4),
       shape=st.sampled_from(sorted(SHAPES)), size=st.integers(0, 4000))
def test_filler_after_a_message_loses_none_of_its_facts(prefix: list[str], shape: str, size: int) -> None:
    """Within the bound, text on the lines after a message adds facts at most: it takes none away."""
    head = " ".join(prefix)
    assert _facts(head) <= _facts(head + "\n" + SHAPES[shape][1](size))


# -- the patterns made linear equal their plain forms ----------------------------------------------------------

# The patterns as they were written before they were made linear (each scan from inside a run of whitespace,
# or of the text before a place, again and again).
_PLAIN_CUT_WORDS = patterns._CUT_WORDS
PLAIN = {
    "_CUT": re.compile(r"\s+(?:and|" + _PLAIN_CUT_WORDS + r")\b.*$", re.I),
    "_CUT_PHRASE": re.compile(r"\s+(?:" + _PLAIN_CUT_WORDS + r")\b.*$", re.I),
    "_PLACE_CUT": re.compile(r"\s+(?:in|at|on|from|to|by)\b.*$", re.I),
    "_CLAUSE_END": re.compile(r"\s*(?:[;:\u2013\u2014]|\s-+\s|,?\s+(?:so|but|because|'?cause|since|which|who|whereas|"
                              r"although|though|while|yet|unless|except|especially|mostly|plus)\b|,?\s+and\s+(?:i|"
                              r"i'm|i've|i'd|we|we're|my|our|he|she|they|it|it's|that|this|so|then|also|now)\b|,\s*"
                              r"(?:i|i'm|we|my|it|it's|not|just|maybe|probably|too|as\s+well|like|if|when)\b).*$",
                              re.I | re.S),
    "_ITEMS": re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or|&)\s+", re.I),
    "_AND_SPLIT": re.compile(r"\s*,\s*|\s+and\s+"),
    "_CLAUSE_SPLIT": re.compile(r"\s*(?:;|\s[-\u2013\u2014]+\s|[\u2013\u2014])\s*(?:(?:and|but|so|plus)\s+"
                                r"(?=(?:i|we)\b))?|,?\s+(?:and|but|so|plus)\s+(?:also\s+|then\s+|now\s+)?"
                                r"(?=(?:i|we)\b)", re.I),
}
_LIKE_AS = re.compile(r"(?:,|\b(?:sounds?|sounded|looks?|looked|seems?|seemed|feels?|felt|smells?|tastes?|more|"
                      r"something|anything|nothing|stuff|things|kinda|exactly|lot))\s*$", re.I)


def _plain_hedged(text: str, at: int = 0) -> bool:
    """:func:`scoring._importance_rules.hedged` as it was: each hedge rescans the clause marks from ``at``."""
    if not importance_rules._HEDGE.search(text):
        return False
    for m in importance_rules._HEDGE.finditer(text):
        later = list(importance_rules._CLAUSE.finditer(text, at, m.start()))
        if not later:
            return True
        end = importance_rules._CLAUSE.search(text, m.end())
        if len(importance_rules._WORD.findall(text, later[-1].end(), end.start() if end else len(text))) < 5:
            return True
    return False


def _plain_split_sentences(text: str) -> list[str]:
    """:func:`scoring.importance.split_sentences` as it was: the sentence grows by a copy per abbreviation."""
    out: list[str] = []
    for line in text.splitlines():
        joinable = False
        for piece in importance_rules.SPLIT.split(line):
            piece = piece.strip()
            if piece and joinable and out[-1].endswith(".") and importance_rules.ABBREV.search(out[-1]):
                out[-1] = f"{out[-1]} {piece}"
            elif piece:
                out.append(piece)
                joinable = True
    return out


# Whitespace runs, marks, the words these patterns look for, and letters re.I matches to ASCII ones.
_PIECES = [" ", "  ", "\t", "\n", " \u00a0 ", ",", ";", ":", ".", "!", "?", "-", " - ", "--", "\u2013", "\u2014", "'",
           "\"", "a", "x", "so", "and", "or", "&", "plus", "i", "I", "we", "We", "i'm", "it", "then", "now", "just",
           "also", "recently", "am", "'m", "was", "is", "like", "sounds", "stuff", "something", "maybe", "think",
           "I think", "kind of", "but", "my", "our", "i have", "i've got", "the", "an", "exam", "Dr.", "e.g.",
           "approx.", "in", "at", "to", "because", "with", "\u0130", "\u0131", "\u017f", "\u212a", "sort of", "as"]
_TEXTS = st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(["", " ", ""])), max_size=14).map(
    lambda pairs: "".join(a + b for a, b in pairs))


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(text=_TEXTS)
def test_patterns_made_linear_equal_their_plain_forms(text: str) -> None:
    for name in ("_CUT", "_CUT_PHRASE", "_PLACE_CUT", "_CLAUSE_END"):
        assert getattr(patterns, name).sub("", text) == PLAIN[name].sub("", text), name
    for name in ("_ITEMS", "_AND_SPLIT"):
        assert getattr(patterns, name).split(text) == PLAIN[name].split(text), name
    assert [m.span() for m in rules._CLAUSE_SPLIT.finditer(text)] == [
        m.span() for m in PLAIN["_CLAUSE_SPLIT"].finditer(text)]
    for at in range(len(text) + 1):
        assert subjects.shares_i(text, at) == bool(subjects.SHARED_I.search(text[:at])), at
        assert importance_rules._my_before(text, at) == bool(importance_rules._MY_BEFORE.search(text[:at])), at
        lo = max(0, subjects._space_before(text, at) - subjects._LIKE_REACH)
        assert bool(subjects._LIKE_AS.search(text, lo, at)) == bool(_LIKE_AS.search(text[:at])), at
    for at in (0, len(text) // 3, len(text)):
        assert importance_rules.hedged(text, at) == _plain_hedged(text, at)
    assert importance.split_sentences(text) == _plain_split_sentences(text)


def test_shared_i_reaches_back_to_the_clause_start() -> None:
    sentence = "Well. I quit the hospital after " + "many long years " * 50 + "and started at Zillow"
    start = sentence.index("started")
    assert subjects.shares_i(sentence, start) and subjects.SHARED_I.search(sentence[:start])
    assert not subjects.shares_i(sentence.replace("I quit", "She quit"), start)
    assert not subjects.shares_i(sentence.replace("years and", "years, and"), start + 1)


_WORD_PIECES = ["a", "b-c", "-", "--x", " ", "  ", "\t", "allergy", "allergies", "intolerant", "nut", "Acme", "Inc",
                "moved", "from", "to", "as", "an", "engineer", "at", "started", "work", "Paris", ",", "."]


@settings(max_examples=1500, deadline=None)
@given(words=st.lists(st.sampled_from(_WORD_PIECES), max_size=14))
def test_bounded_patterns_equal_the_unbounded_ones_within_their_bounds(words: list[str]) -> None:
    """The words and gaps the patterns now bound (64 and 200 characters) are shorter here: same matches."""
    text = " ".join(words)
    for *_, rx in patterns._COMPILED:
        plain = re.compile(rx.pattern.replace(patterns._WORDISH, r"[\w-]+").replace(patterns._GAP, r"[^,.;]+?"),
                           rx.flags)
        assert [m.groupdict() for m in rx.finditer(text)] == [m.groupdict() for m in plain.finditer(text)]
    plain_org = re.compile(patterns._ORG.pattern.replace(r"[\w&-]{0,63}+", r"[\w&-]*"))
    assert [m.span() for m in patterns._ORG.finditer(text.title())] == [
        m.span() for m in plain_org.finditer(text.title())]


def test_the_benchmark_runs_and_reports(tmp_path: Path) -> None:
    """``benchmarks/long_messages.py``, tiny: it writes its report (command, machine, tables, target)."""
    out = tmp_path / "long_messages.md"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "long_messages.py"), "--sizes", "300", "3000",
                           "--shapes", "like_tea", "spaces", "--retrieval", "lexical", "--dir", str(tmp_path),
                           "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    for expected in ("# Long messages", "Command: `python benchmarks/long_messages.py --sizes 300 3000", "Machine:",
                     "Library: `git ", "## add_turn, retrieval=lexical (seconds)", "| 0.3 KB | 3 KB |",
                     "| like_tea: ", "## Pieces alone on 3 KB", "within the 2 s target"):
        assert expected in text, expected
