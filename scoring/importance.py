"""Heuristic importance scoring: how worth remembering is a piece of text?

Each sentence is matched against cue rules (first-person facts about identity,
health, relationships, location, work, preferences, schedule, goals, possessions
and life events). A cue weighs its category's base weight plus a small offset,
then is adjusted for a negation in its clause, hedging ("maybe", "I think"),
questions and requests to the assistant, and whether the sentence is about the
speaker ("I", "my sister"), a named third person ("Maria") or nobody. A text
scores the max over its sentences plus a small bonus per extra informative one.

Deliberate calls: a negated health cue ("I'm not allergic to anything") keeps
~0.72 (still worth keeping); a negated residence ("I don't live in Paris
anymore") ~0.72; a negated name ("my name is not important") ~0.23; "I'm <Word>"
is a name only when the word is capitalised and not a common word, so an
all-lower-case "i'm ada" is not read as a name. A sentence that starts with a cue
has an implicit "I" ("Allergic to nuts."). A hedge counts only for the clause it
qualifies ("My birthday is May 3, maybe we can celebrate then" is not hedged), and
a bare reminder of something said before ("Remember my allergy.") scores 0.2: it
carries no new information. Rules are tried only at their trigger words, so
scoring stays fast (tens of thousands of short texts a second).

    >>> score_importance("My name is Ada") >= 0.85
    True
    >>> score_importance("thanks!") < 0.1
    True

The word lists and cue rules live in :mod:`scoring._importance_rules`; besides
them this module imports only :mod:`scoring.errors` from the project.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from scoring._importance_rules import (
    ABBREV,
    AUX,
    BOUNDARY,
    CAPWORD,
    CHECKED,
    COMMON,
    FIRST,
    MEM_KEYS,
    MEMREQ,
    NAMED_START,
    NEG,
    NEG_WORDS,
    PRONOUNS,
    PUNCT,
    QWORDS,
    REMINDER,
    RULE_INFO,
    SMALLTALK,
    SPLIT,
    SUBORD,
    TOKEN,
    TRIGGERS,
    WH,
    check,
    hedged,
)
from scoring.errors import invalid, wrong_type

__all__ = ["CATEGORIES", "DEFAULT_CATEGORY_WEIGHTS", "ImportanceAssessment", "HeuristicImportanceScorer",
           "assess_importance", "score_importance", "split_sentences"]

CATEGORIES: tuple[str, ...] = ("identity", "health", "relationship", "location", "work", "preference",
                               "schedule", "goal", "possession", "event", "general")
DEFAULT_CATEGORY_WEIGHTS: dict[str, float] = {
    "identity": 0.9, "health": 0.9, "relationship": 0.8, "location": 0.85, "work": 0.8,
    "preference": 0.78, "schedule": 0.8, "goal": 0.78, "possession": 0.75, "event": 0.75, "general": 0.3}
# How much of a cue's weight survives a negation in its clause, per category.
_NEGATED = {"identity": 0.25, "health": 0.8, "relationship": 0.85, "location": 0.85, "work": 0.85,
            "preference": 0.95, "schedule": 0.7, "goal": 0.7, "possession": 0.7, "event": 0.7}

_ASK_CUT = re.compile(r"[,;:]|\b(?:but|and)\b")  # where the asking part of "I'm vegan, can you ...?" may start
_DIGIT_OR_NAME = re.compile(r"\d|\s[A-Z]")
_STARTS = frozenset({head for head, _ in TRIGGERS} | {"i", "we", "im"})  # the words a cue rule can start at
_DIGITS = frozenset("0123456789")  # ... and numbers ("#")
_WHOLE = re.Match.group  # called with no group: the whole match
_MEM_GATE = re.compile("|".join(map(re.escape, MEM_KEYS)))  # one of MEM_KEYS in the text: MEMREQ may match


def _negated_before(texts: list[str], idx: list[int], j: int) -> bool:
    """Is there a negation among the five tokens before word ``j`` (``texts[idx[j]]``), in its clause?

    The word itself must not be a negation; a clause starts at "but"/"and" or after punctuation.

    >>> texts = "i do n't really live here , but i".split()
    >>> _negated_before(texts, [0, 1, 2, 3, 4, 5, 7, 8], 4), _negated_before(texts, [0, 1, 2, 3, 4, 5, 7, 8], 7)
    (True, False)
    """
    i = idx[j]
    for jj in range(j, -1, -1):
        p = idx[jj]
        if p < i - 5:
            return False
        word = texts[p]
        if word in NEG_WORDS or word.endswith("n't"):  # the last negation so far
            return p < i
        if (p and texts[p - 1] in PUNCT) or word in BOUNDARY:  # the clause starts here
            return False
    return False


@dataclass(frozen=True)
class ImportanceAssessment:
    """A score in [0, 1], the category of the strongest cue (None: nothing informative) and why.

    >>> a = assess_importance("I'm allergic to peanuts")
    >>> (a.category, a.score >= 0.8)
    ('health', True)
    """

    score: float
    category: str | None
    reasons: tuple[str, ...] = ()


def split_sentences(text: str) -> list[str]:
    """Split text into trimmed sentences (on . ! ? and newlines, not after Dr./e.g./...).

    >>> split_sentences("Hi! I live in Lisbon. Dr. Who is great")
    ['Hi!', 'I live in Lisbon.', 'Dr. Who is great']
    """
    out: list[str] = []
    for line in text.splitlines():
        held: list[str] = []  # the pieces of the sentence being read (never joined across a line break)
        for piece in SPLIT.split(line):
            piece = piece.strip()
            if not piece:
                continue
            if held and not _abbreviated(held[-1]):
                out.append(" ".join(held))  # joined once: "Dr. Dr. Dr. ..." costs no more than its length
                held = []
            held.append(piece)
        if held:
            out.append(" ".join(held))
    return out


def _abbreviated(piece: str) -> bool:
    """Does ``piece`` end with an abbreviation ("Dr.", "e.g.")? :data:`ABBREV` matches at most its last
    7 characters (and ``\\b`` sees the one before), so only those are searched, whatever the length."""
    return piece.endswith(".") and ABBREV.search(piece, max(0, len(piece) - 7)) is not None


class HeuristicImportanceScorer:
    """The default importance scorer: a callable ``str -> float`` in [0, 1].

    ``category_weights`` overrides the base weight of any category in :data:`CATEGORIES`
    (``general`` is the weight of a first-person statement with no cue);
    ``multi_sentence_bonus`` is added per extra informative sentence (at most two).

    >>> HeuristicImportanceScorer({"preference": 0.5})("I love jazz") < 0.7 <= score_importance("I love jazz")
    True
    """

    def __init__(self, category_weights: Mapping[str, float] | None = None, *,
                 multi_sentence_bonus: float = 0.04) -> None:
        weights = dict(DEFAULT_CATEGORY_WEIGHTS)
        for key, value in dict(category_weights or {}).items():
            if key not in weights:
                raise invalid("category_weights", f"unknown category {key!r}; expected one of {CATEGORIES}")
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise invalid("category_weights", f"{key} must be a number in [0, 1], got {value!r}")
            weights[key] = float(value)
        bonus = multi_sentence_bonus
        if isinstance(bonus, bool) or not isinstance(bonus, int | float) or not 0.0 <= bonus <= 0.5:
            raise invalid("multi_sentence_bonus", f"must be a number in [0, 0.5], got {bonus!r}")
        self.category_weights = weights
        self.multi_sentence_bonus = float(bonus)
        # Summaries and eviction re-score the same texts again and again: remember them.
        self._scored = functools.lru_cache(maxsize=16384)(self._sentence)
        self._assessed = functools.lru_cache(maxsize=16384)(self._assess)

    def __call__(self, text: str) -> float:
        return self.assess(text).score

    def __repr__(self) -> str:
        return f"HeuristicImportanceScorer(multi_sentence_bonus={self.multi_sentence_bonus})"

    def assess(self, text: str) -> ImportanceAssessment:
        """Score ``text`` and say which category and cues drove the score.

        >>> HeuristicImportanceScorer().assess("I moved to Berlin").category
        'location'
        """
        if not isinstance(text, str):
            raise wrong_type("text", "str", text)
        return self._assessed(text)

    def _assess(self, text: str) -> ImportanceAssessment:
        text = text.replace("\u2019", "'").replace("\u2018", "'")
        one = "\n" not in text and "\r" not in text and SPLIT.search(text) is None
        if one:  # one sentence: its own assessment (what the general case below gives for a single part)
            return ImportanceAssessment(*self._scored(text.strip()))
        sentences = split_sentences(text)
        parts = [self._scored(s) for s in sentences] or [(0.0, None, ("empty",))]
        best = max(parts, key=lambda p: p[0])
        extra = min(2, sum(1 for p in parts if p[0] >= 0.6) - (best[0] >= 0.6))
        if extra <= 0:
            return ImportanceAssessment(*best)
        score = min(1.0, best[0] + self.multi_sentence_bonus * extra)
        return ImportanceAssessment(round(score, 4), best[1], (*best[2], f"+{extra} informative"))

    @staticmethod
    def _named(s: str, words: list[str]) -> bool:
        """Does a sentence without "I"/"my" name someone (a capitalised name, or he/she/they)?"""
        return any(w in PRONOUNS for w in words) or NAMED_START.match(s) is not None or any(
            w.lower() not in COMMON for w in CAPWORD.findall(s, 1))

    def _cues(self, s: str, low: str, question_at: int, mem_at: int,
              toks: list[re.Match[str]], texts: list[str]) -> tuple[list[tuple[float, str, str, int]], bool]:
        """Every cue of a sentence as ``(weight, category, reason, offset)``, and whether one starts the sentence
        (``toks``: the :data:`TOKEN` matches of ``low``, ``texts`` their strings)."""
        idx = [i for i, t in enumerate(texts) if t not in PUNCT]
        cues: list[tuple[float, str, str, int]] = []
        implicit, shouted = False, s.isupper()  # all capitals: a capital marks no name (asked once, not per cue)
        for j in [j for j, i in enumerate(idx) if texts[i] in _STARTS or texts[i][0] in _DIGITS]:
            i = idx[j]
            key = texts[i]
            head, k = ("#" if key[0].isdigit() else key), j + 1  # the trigger: this word and the next
            if head in ("i", "we") and k < len(idx) and texts[idx[k]] in ("am", "are"):
                head, k = ("i'm" if head == "i" else "we're"), k + 1
            elif head == "im":
                head = "i'm"
            nxt = texts[idx[k]] if k < len(idx) else None
            if nxt is not None:
                nxt = "#" if nxt[0].isdigit() else nxt[:-2] if nxt.endswith("'s") else nxt
            candidates = TRIGGERS.get((head, None), ())
            if nxt is not None and (head, nxt) in TRIGGERS:
                candidates += TRIGGERS[head, nxt]
            for rule, rx in candidates:
                m = rx.match(low, toks[i].start())
                checked = None if m is None else check(rule, s, m, shouted) if rule in CHECKED else (1.0, "")
                if m is None or checked is None:
                    continue
                cat, off, neg_mode = RULE_INFO[rule]
                weight = min(1.0, max(0.0, self.category_weights[cat] + off)) * checked[0]
                reason = f"{cat}:{rule}" + (f" ({checked[1]})" if checked[1] else "")
                if neg_mode != "none" and (_negated_before(texts, idx, j) or (
                        neg_mode == "any" and NEG.search(m.group(0)))):
                    weight *= _NEGATED[cat]
                    reason += " negated"
                if question_at <= m.start() < mem_at and not (i and texts[i - 1] in SUBORD):
                    weight *= 0.35
                    reason += " in question"
                cues.append((weight, cat, reason, m.start()))
                implicit = implicit or m.start() == 0
        return cues, implicit

    def _sentence(self, s: str) -> tuple[float, str | None, tuple[str, ...]]:
        low = s.lower()
        if len(low) != len(s):  # a few characters change length when lower-cased; keep offsets aligned
            s = "".join(c if len(c.lower()) == 1 else " " for c in s)
            low = s.lower()
        toks = list(TOKEN.finditer(low))
        texts = list(map(_WHOLE, toks))  # each match's text
        words = [w for w in texts if w not in PUNCT]
        if len(s) < 4 or not words:
            return 0.02 if s else 0.0, None, ("too short",)
        if SMALLTALK.issuperset(words):
            return 0.03, None, ("small talk",)
        first = not FIRST.isdisjoint(words)
        if REMINDER.match(low):  # "Remember my allergy.": points at something said before, says nothing new
            return 0.2, None, ("reminder without new information",)
        mem = MEMREQ.search(low) if _MEM_GATE.search(low) else None
        question_at = len(s) + 1
        if words[0] in QWORDS and (words[0] not in WH or low.rstrip().endswith("?") or (
                len(words) > 1 and words[1] in AUX)):  # but "When I was ten, I moved..." is a statement
            question_at = 0
        elif low.rstrip().endswith("?"):  # "I'm vegan, can you ...?": only the last clause asks
            question_at = max((m.end() for m in _ASK_CUT.finditer(low)), default=0)
        cues, implicit = self._cues(s, low, question_at, mem.start() if mem else len(s) + 1, toks, texts)
        reasons: list[str] = []
        category: str | None
        cue_at = 0
        if cues:
            cues.sort(key=lambda c: c[:3], reverse=True)
            score, category, cue_at = cues[0][0], cues[0][1], cues[0][3]
            reasons.extend(c[2] for c in cues[:3])
            others = [c[0] for c in cues if not c[2].startswith("schedule:time")]
            if others and len(others) < len(cues):  # a cue plus a date or time: a commitment or plan
                score = max(score, min(others[0] + 0.15, 0.85))
            if not first and not implicit:
                named = self._named(s, words)
                score *= 0.65 if named else 0.45
                reasons.append("third person" if named else "not about a person")
        else:
            category = "general" if first else None
            score = self.category_weights["general"] if first else (0.25 if self._named(s, words) else 0.15)
            if first and len(words) >= 6 and _DIGIT_OR_NAME.search(s):
                score += 0.05
            if question_at <= len(s):
                score *= 0.5
                reasons.append("question or request")
        if hedged(low, cue_at):
            score *= 0.9
            reasons.append("hedged")
        if mem and not low.rstrip().endswith("?") and len(words) >= 4:
            score = max(score, 0.75)
            reasons.append("explicit request to remember")
        return round(min(1.0, max(0.0, score)), 4), category, tuple(reasons)


_DEFAULT = HeuristicImportanceScorer()


def assess_importance(text: str) -> ImportanceAssessment:
    """Assess ``text`` with the default :class:`HeuristicImportanceScorer`.

    >>> assess_importance("what's the weather?").score < 0.3
    True
    """
    return _DEFAULT.assess(text)


def score_importance(text: str) -> float:
    """How worth remembering ``text`` is, in [0, 1], by the default heuristic scorer.

    >>> score_importance("I work at Acme as an engineer") >= 0.7
    True
    """
    return _DEFAULT.assess(text).score
