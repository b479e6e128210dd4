"""The rule extractor without its shortcuts: every gate open, so every pattern, frame and cue
scan runs on every sentence (what the extractor did before the gates). Tests compare the fast
path with this reference; ``python tests/unified_memory/extraction/_reference.py FILE.json``
compares them over every string of a JSON file (e.g. a LoCoMo dump, not kept in the repository).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import scoring._importance_rules as importance_rules
import scoring.importance as importance
import unified_memory.extraction._changes as changes
import unified_memory.extraction._patterns as patterns
import unified_memory.extraction._slots as slots
import unified_memory.extraction.rules as rules
from unified_memory.extraction.rules import RuleExtractor
from unified_memory.types import Message

_ALWAYS = re.compile("")


def _assess(self: importance.HeuristicImportanceScorer, text: str) -> importance.ImportanceAssessment:
    """The importance scorer's assessment of a text without its one-sentence shortcut: every text is
    cut into sentences, each scored, the best one taken, plus the bonus for other informative ones."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    one = "\n" not in text and "\r" not in text and importance_rules.SPLIT.search(text) is None
    sentences = [text.strip()] if one else importance.split_sentences(text)
    parts = [self._scored(s) for s in sentences] or [(0.0, None, ("empty",))]
    best = max(parts, key=lambda p: p[0])
    extra = min(2, sum(1 for p in parts if p[0] >= 0.6) - (best[0] >= 0.6))
    if extra <= 0:
        return importance.ImportanceAssessment(*best)
    score = min(1.0, best[0] + self.multi_sentence_bonus * extra)
    return importance.ImportanceAssessment(round(score, 4), best[1], (*best[2], f"+{extra} informative"))


@contextlib.contextmanager
def ungated() -> Iterator[None]:
    """Within: every gate of the rule extractor and of the importance scorer open, and no shortcut
    taken (the reference behaviour); scorers made within score afresh (none serves a cached score)."""
    saved = [(patterns, "_GATED", patterns._GATED), (patterns, "_ORG_GATE", patterns._ORG_GATE),
             (patterns, "_TRAVEL_GATE", patterns._TRAVEL_GATE), (importance_rules, "_HEDGE_GATE",
                                                                 importance_rules._HEDGE_GATE),
             (importance, "_MEM_GATE", importance._MEM_GATE), (importance, "_DEFAULT", importance._DEFAULT),
             (importance.HeuristicImportanceScorer, "_assess", importance.HeuristicImportanceScorer._assess),
             (slots, "_GATED_FRAMES", slots._GATED_FRAMES), (changes, "_cued", changes._cued),
             (rules, "_may_split", rules._may_split), (rules, "_may_request", rules._may_request)]
    patterns._GATED = tuple((0, entry) for _, entry in patterns._GATED)
    patterns._ORG_GATE = patterns._TRAVEL_GATE = importance_rules._HEDGE_GATE = importance._MEM_GATE = _ALWAYS
    importance.HeuristicImportanceScorer._assess = _assess  # type: ignore[method-assign]
    importance._DEFAULT = importance.HeuristicImportanceScorer()  # after the line above: bound to the reference
    slots._GATED_FRAMES = tuple((0, kind, rx) for _, kind, rx in slots._GATED_FRAMES)
    changes._cued = rules._may_split = rules._may_request = lambda sentence: True
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def outputs(texts: Iterable[str]) -> list[Any]:
    """Everything the extractor says about each text: as the user's message, as the assistant's,
    and as a short answer to a question (fresh extractor: no score is served from a cache)."""
    extractor = RuleExtractor()
    question = [Message(role="assistant", content="Where do you live?")]
    out: list[Any] = []
    for text in texts:
        user = Message(role="user", content=text)
        out.append(extractor.extract(user).model_dump())
        out.append(extractor.extract(Message(role="assistant", content=text)).model_dump())
        if len(text.split()) <= 5:
            out.append(extractor.extract(user, context=question).model_dump())
    return out


def assessments(texts: Iterable[str]) -> list[importance.ImportanceAssessment]:
    """The importance scorer's assessment of each whole text (a fresh scorer: nothing from a cache)."""
    scorer = importance.HeuristicImportanceScorer()
    return [scorer.assess(text) for text in texts]


def strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def _main(path: str) -> int:
    texts = sorted({s for s in strings(json.loads(Path(path).read_text(encoding="utf-8"))) if s.strip()})
    fast, scored = outputs(texts), assessments(texts)
    with ungated():
        slow, reference = outputs(texts), assessments(texts)
    differ = sum(a != b for a, b in zip(fast, slow, strict=True))
    differ += sum(a != b for a, b in zip(scored, reference, strict=True))
    print(f"{len(texts)} texts, {len(fast)} extractions and {len(scored)} assessments, {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
