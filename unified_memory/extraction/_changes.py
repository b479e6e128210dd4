"""Change statements: which earlier values a sentence says are no longer current.

Private: used by :class:`unified_memory.extraction.rules.RuleExtractor`. A change is
told in everyday phrasing — "from X to Y", "no longer", "not ... anymore", "used
to", "sold / left / gave up / quit X", "X and I broke up", "X left the company" —
and :func:`replaced` returns the words that name the old value X, for long-term
memory to find the fact that stated it (:meth:`tiers.facts.long_term.LongTermFacts.add`
supersedes a current fact of the same person that names all of them).

    >>> replaced("I sold the Civic and bought a Subaru Outback.")
    ['Civic']
    >>> replaced("We moved from Porto to Ghent over the holidays.")
    ['Porto']
    >>> replaced("I don't call mum on Sunday anymore, it's Saturday afternoons now.")
    ['call mum Sunday']
    >>> replaced("Dr. Morales used to be my dentist; I go to Dr. Chu now.")
    ['Morales']
    >>> replaced("I live in Lisbon.")
    []
"""

from __future__ import annotations

import re

from unified_memory.extraction._patterns import folded, letter_runs
from unified_memory.extraction._slots import MAX_SENTENCE

__all__ = ["replaced", "CHANGE_CUE"]

_VERBS = (r"moved|move|went|go|switched|switch|changed|change|upgraded|downgraded|relocated|promoted|shifted|"
          r"swapped|traded|transferred|careers?|converted|graduated")
_OLD = r"(?P<old>(?:[^,.;:!?()\"]|[.:](?=\w))+?)"
_END = r"(?=\s*(?:[,.;:!?()\"](?!\w)|\s[-\u2013\u2014]+\s|$|\s+(?:and|but|so|now|because|since|after|last|this|in\s+"
_END += r"(?:the\s+)?(?:spring|summer|autumn|fall|winter|january|february|march|april|may|june|july|august|"
_END += r"september|october|november|december|\d{4})\b)))"
# Each pattern's group "old" holds the phrase that names the old value.
_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p, re.I) for p in (
    # "moved from Porto to Ghent", "my extension went from 4417 to 5820", "careers from paralegal to designer"
    r"\b(?:" + _VERBS + r")\b[^.;!?]*?\bfrom\s+(?:being\s+)?" + _OLD + r"\s+(?:to|into|for)\s+\S",
    # "I no longer live in Leeds", "I'm no longer on keto", "no longer use the Kindle"
    r"\bno\s+longer\s+(?!(?:employs?|sees?|coach(?:es|ing)?|my|our|home|together)\b)" + _OLD + _END,
    # "Pemberton Library no longer employs me", "Elif is no longer my partner", "Priya and I are no longer"
    r"(?:^|[;,.]\s*|\band\s+)(?P<old>[A-Z0-9](?:[^,.;:!?()\"]|[.:](?=\w))*?)(?<!\bI)(?<!\bwe)\s+"
    r"(?:is|are|was|were|'s|'re)?\s*no\s+longer\b",
    # "I'm not in Denver anymore", "I don't drive the Mazda anymore"
    r"(?:\bnot|n't|\bnever)\s+" + _OLD + r"\s+(?:any\s*more|any\s+longer)\b",
    # "555-0143 isn't my number anymore", "Declan isn't my husband anymore"
    r"(?:^|[;,.]\s*)(?P<old>[A-Z0-9][^,.;:!?()\"]*?)\s+(?:isn't|aren't|wasn't|is\s+not|are\s+not)\b[^.;]*?"
    r"\b(?:any\s*more|any\s+longer)\b",
    # "I used to live in Calgary", "I used to date Lucas"
    r"\b(?:i|we)\s+used\s+to\s+" + _OLD + _END,
    # "Bilal used to be my boyfriend", "Running club used to be at 6 pm", "That 0161 number used to be mine"
    r"(?:^|[;,.]\s*)(?!(?:I|We|we)\s)(?P<old>[A-Z0-9][^,.;:!?()\"]*?)\s+used\s+to\s+(?:be\s+)?"
    r"(?P<what>(?:[^,.;:!?()\"]|[.:](?=\w))*?)" + _END,
    # "I sold the Civic", "I left St. Brigid's", "gave up the BMW", "quit nursing", "broke up with Marco"
    r"\b(?:sold|left|quit|ditched|dropped|gave\s+up(?:\s+on)?|stopped|broke\s+up\s+with|split\s+(?:up\s+)?from|"
    r"divorced|dumped|moved\s+out\s+of|got\s+rid\s+of|cancelled|canceled|"
    r"lost(?!\s+(?:in|track|touch|interest|weight|sleep|count|it|myself|my\s+(?:mind|way|temper|voice))\b))\s+"
    + _OLD + _END,
    # "Marco and I broke up", "Karen left the company", "Vince Tate sold the building"
    r"(?:^|[;,.]\s*)(?P<old>(?-i:(?:(?:Dr|Mr|Mrs|Ms|Miss|Prof)\.?\s+)?[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?))"
    r"(?:\s+and\s+(?:i|we))?\s+(?:broke\s+up|split\s+up|left|sold|retired|quit|moved\s+away)\b",
))
_NOT_ANYMORE = 3  # the index of "not ... anymore" in _PATTERNS
#: Words in a sentence that say something changed (cheap test before the patterns).
CHANGE_CUE = re.compile(r"\b(?:from|no\s+longer|any\s*more|any\s+longer|used\s+to|sold|left|quit|ditched|dropped|"
                        r"gave\s+up|stopped|broke\s+up|split|divorced|dumped|moved|got\s+rid|cancel+ed|lost|"
                        r"retired|took\s+over)\b", re.I)
# The first words of CHANGE_CUE's phrases as runs of letters (see letter_runs): a sentence without one of them
# (or a run starting "cancel") cannot match it, so the scan is skipped (that scan is the slow part).
CUE_HEADS = frozenset("from no any anymore used sold left quit ditched dropped gave stopped broke split divorced "
                      "dumped moved got lost retired took".split())
_TITLES = frozenset("dr mr mrs ms miss prof the a an my our his her their".split())
_CAPITAL = re.compile(r"(?-i:\b[a-z]?[A-Z][\w'&.-]*|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\+?\d[\d\s-]{2,}\d)")
_WORDS = re.compile(r"[\w'@.+-]+")
# Words that only carry the sentence (never a value): function words, common verbs, time words.
_FILLER = frozenset("""
i i'm i've im we we're me my our us you your he she it they them his her their its this that these those the a an
is are was were be been being am do does did doing done have has had having get got go goes going gone went
to in on at for of from with by into onto about as and or but so than then there here up out over off any some
no not never don't doesn't didn't isn't aren't wasn't anymore longer more used use using need needs needed
really just still even also again ever every much very all both only now anymore one ones thing things stuff
way time times day days back new old current currently mine myself ourselves own
live lives living lived stay staying cook cooking work working make making take taking took keep keeping
moved went switched changed upgraded relocated from sold left gave quit stopped
company club building job jobs team firm office hobby behind place places home house flat apartment city town
eat eating ate drink drinking follow following date dating see seeing play playing own owning
""".split())


def replaced(sentence: str) -> list[str]:
    """The phrases naming values that ``sentence`` says are no longer current: the
    capitalised names, numbers and addresses of the old part when it has some, else its
    content words (see the module docstring)."""
    if len(sentence) > MAX_SENTENCE or not _cued(sentence) or not CHANGE_CUE.search(sentence):
        return []  # a statement of a change is short (and the patterns' cost grows with the square)
    found: list[str] = []
    for number, pattern in enumerate(_PATTERNS):
        for m in pattern.finditer(sentence):
            old = m.group("old")
            if number == _NOT_ANYMORE and re.match(r"(?i)(?:my|our)\s", old):
                continue  # "isn't my husband anymore": the role, not its value
            if "what" in m.groupdict() and m.group("what") and not re.match(r"(?i)(?:my|mine|our|the)\b",
                                                                               m.group("what").strip()):
                old = f"{old} {m.group('what')}"  # "Running club used to be at 6 pm"
            key = _key(old, initial=m.start("old") == 0 or sentence[:m.start("old")].rstrip().endswith((";", ",", ".")))
            if key and all(_generic(w) for w in _WORDS.findall(key)):
                # "Yoga moved from Tuesday": a weekday or a time names a value with what it is the time of
                topic = _key(re.split(r"[;,]", sentence[:m.start("old")])[-1])
                key = f"{topic} {key}" if topic and not all(_generic(w) for w in topic.split()) else ""
            if key and key.casefold() not in (k.casefold() for k in found):
                found.append(key)
    return found


def _cued(sentence: str) -> bool:
    """Does ``sentence`` hold a word that CHANGE_CUE could start at (a necessary condition)?"""
    return not letter_runs(sentence).isdisjoint(CUE_HEADS) or "cancel" in folded(sentence)


def _key(phrase: str, *, initial: bool = False) -> str:
    """The words of ``phrase`` that name a value: its names ("the Civic" -> "Civic", "Dr. Singh" -> "Singh"),
    numbers and addresses; when it has none (or only weekday / month names), its content words."""
    names = [w.strip(".'") for w in _CAPITAL.findall(phrase)]
    names = [w for w in names if w and w.casefold().rstrip(".") not in _TITLES and w.casefold() not in _FILLER]
    words = [w.strip(".'-") for w in _WORDS.findall(phrase)]
    words = [w for w in words if w and w.casefold() not in _FILLER and w.casefold() not in _TITLES]
    if initial and names and words and names[0] == words[0] and any(w[:1].islower() for w in words[1:]):
        names = names[1:]  # "Running club used to ...": a capital that only starts the sentence
    if names and not all(_generic(w) for w in names):
        return " ".join(w for w in names if not _generic(w))
    return " ".join(words[:6])


_GENERIC = frozenset("""monday tuesday wednesday thursday friday saturday sunday january february march april
may june july august september october november december i""".split())


def _generic(word: str) -> bool:
    """Weekdays, months and numbers of up to three digits name a value only with the words around them."""
    low = word.casefold()
    return low in _GENERIC or (low.isdigit() and len(low) < 4)
