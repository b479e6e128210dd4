"""Who a statement is about: the subject before a verb, the owner of a noun, and whether a
preference word ("like", "love") is a verb of its subject.

Private: used by :mod:`unified_memory.extraction._patterns`, with the word lists both share.
Each question is asked at a place in a sentence and answered from the text right before it,
in time that does not grow with the sentence (a long message can hold thousands of such
places): :func:`subject` and :func:`possessor` read the 80 characters before the place, and
the one question that reaches back to the start of a clause — does "and started at Zillow"
share the "I" of "I quit the hospital and started at Zillow"? — is answered from an index of
the sentence built once (:func:`shares_i`).

    >>> subject("My sister Maria lives in Lisbon", 16)
    Subject(key='maria', relation='sister', name='Maria')
    >>> subject("I quit the hospital and started at Zillow", 24)
    Subject(key='user', relation=None, name=None)
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass

__all__ = ["Subject", "subject", "possessor", "verb_use", "shares_i", "tail", "COMMON", "NATIONALITIES",
           "REL", "REL_WORDS", "PET_WORDS", "ADJ", "NAME", "SHARED_I"]

COMMON = frozenset("""a an the and or but so not no yes ok okay sure fine good great bad well very really just
also still here there back home now then sorry glad happy sad tired hungry busy ready done new old free sick
bored excited nervous scared afraid worried confused lost alone cold hot late early going trying looking getting
doing thinking coming working feeling being having about with from for into in on at to of by as if than that
this these those it its what which who when where why how all any some every each both many much more most
other such only own same too can will would should could might must may do does did is are was were am be been
i me my mine we us our you your he him his she her they them their yesterday today tomorrow tonight monday
tuesday wednesday thursday friday saturday sunday january february march april june july august september
october november december hi hello hey thanks thank please maybe probably perhaps actually honestly pretty
quite like love hate want need know think guess hope wish mean interested curious alright right sure unsure
finally anyway single married divorced engaged vegan vegetarian allergic pregnant retired unemployed student
fan out off up down over again after before because since while until though yet call name lol haha""".split())
NATIONALITIES = frozenset("""american british english scottish irish welsh canadian mexican brazilian argentinian
chilean colombian peruvian spanish portuguese french german italian dutch belgian swiss austrian swedish
norwegian danish finnish polish czech russian ukrainian greek turkish israeli egyptian moroccan nigerian kenyan
south indian pakistani bangladeshi chinese japanese korean vietnamese thai filipino indonesian malaysian
australian kiwi african asian european latino latina hispanic jewish muslim christian catholic hindu buddhist
atheist""".split())
REL_WORDS = """mom mum mother dad father parents sister brother sibling wife husband partner spouse girlfriend
boyfriend fiance fiancee son daughter kid child baby grandma grandpa grandmother grandfather grandson
granddaughter aunt uncle cousin niece nephew friend roommate flatmate boss manager coworker colleague neighbor
neighbour therapist mentor""".split()
PET_WORDS = "dog cat puppy kitten parrot rabbit hamster horse bird turtle snake lizard fish pony".split()
REL = r"(?:best\s+friend|" + "|".join(REL_WORDS + PET_WORDS) + ")"
ADJ = r"(?:(?:best|older|younger|little|big|twin|step|late|baby|new|ex|oldest|youngest|eldest)[\s-]+)?"
NAME = r"(?-i:[A-Z][a-z-]+(?:\s+[A-Z][a-z-]+)?)"

_SUBJECT = re.compile(
    r"(?:\b(?P<i>i|we)|\bmy\s+" + ADJ + r"(?P<rel>" + REL + r")(?:,?\s+(?P<rname>" + NAME + r"))?|(?P<name>"
    + NAME + r")|\b(?P<pro>he|she|they|it|you))(?:'s)?(?:\s*(?:'m|'re|'ve|'s|'d|'ll)|\s+(?:and\s+i|\w+ly|just|now|"
    r"also|still|already|recently|finally|currently|really|then|soon|will|have|has|had|am|is|are|was|were|been|do|"
    r"does|did|not|don't|doesn't|didn't|can't|cannot|never|no\s+longer|used\s+to|got|going|gonna|to|want|plan|"
    r"planning|can|originally|absolutely|totally|truly|especially|definitely))*[\s,]*$", re.I)
_POSSESSOR = re.compile(r"(?:\bmy\s+" + ADJ + r"(?P<rel>" + REL + r")(?:\s+(?P<rname>" + NAME + r"))?'s|(?P<name>"
                        + NAME + r")'s|\b(?P<my>my|our))\s+(?:(?:all[\s-]time|new|current|real|very|own)\s+)?$", re.I)
_PAUSE, _SPACES = re.compile(r"[,;:]|\bbut\b|\bso\b"), re.compile(r"\s+")
_AND_I = re.compile(r"\band\s+i\b", re.I)
# "like" after these is a preposition ("Sounds like fun", "stuff, like my bowl", "feels like home")
_LIKE_WORDS = "sounds? sounded looks? looked seems? seemed feels? felt smells? tastes? more something anything " \
              "nothing stuff things kinda exactly lot"
_LIKE_AS = re.compile(r"(?:,|\b(?:" + "|".join(_LIKE_WORDS.split()) + r"))\s*$", re.I)
_LIKE_REACH = max(len(w.rstrip("?")) for w in _LIKE_WORDS.split())  # the longest of those words
_BASE_FORMS = frozenset("love like enjoy adore prefer hate dislike detest loathe".split())
_HELPER = re.compile(r"\b(?:do|does|did|don't|doesn't|didn't|will|would|can|could|should|might|must|to)\b|'ll|'d", re.I)

#: A verb after "and" whose clause began with "I" / "we": "I quit the hospital and started as a tester at
#: Zillow". The question this pattern asks of the text before a verb is what :func:`shares_i` answers.
SHARED_I = re.compile(r"(?:^|[.;!?]\s+)\W*(?:i|we)\s+(?!(?:am|'m|was|is)\b)[^.;!?,]*?\band\s+"
                      r"(?:then\s+|now\s+|also\s+|just\s+|recently\s+|finally\s+)?$", re.I)
# Its parts: the clause's "I"/"we" (after the start or a mark then whitespace, through a run of non-word
# characters), no [.;!?,] until "and", then "and", maybe one of the adverbs, and whitespace.
_I_WE = re.compile(r"(?:i|we)\s+(?!(?:am|'m|was|is)\b)", re.I)
_OPENS, _MARK, _NON_WORD = re.compile(r"[.;!?]\s"), re.compile(r"[.;!?,]"), re.compile(r"\W+")
_AND_END = re.compile(r"\band$", re.I)
_ADVERBS = "then now also just recently finally".split()
_ADVERB_END = re.compile(r"\b(?:" + "|".join(_ADVERBS) + r")$", re.I)


@dataclass(frozen=True)
class Subject:
    """Who a statement is about: ``key`` is the fact slot's subject ("user", "sister", "maria");
    ``relation`` the relation to the user; ``name`` the person's name when known."""

    key: str
    relation: str | None = None
    name: str | None = None

    @property
    def is_user(self) -> bool:
        """True for the speaker themselves ("I", "we")."""
        return self.key == "user"


def tail(sentence: str, start: int, size: int = 80) -> str:
    """The (whole) words of the ``size`` characters before ``start``: a subject sits right before its verb."""
    if start <= size:
        return sentence[:start]
    pre = sentence[start - size:start]
    return pre[pre.find(" ") + 1:] if " " in pre else ""


def subject(sentence: str, start: int) -> Subject | None:
    """Who does what the verb at ``start`` says ("I", "my sister", "Maria", an "I" shared over "and")?"""
    pre = tail(sentence, start)
    m = _SUBJECT.search(pre)
    if m is None:  # "Allergic to nuts." has an implicit "I"; "I quit my job and started at Acme" shares it
        if not _PAUSE.split(pre)[-1].strip() or shares_i(sentence, start):
            return Subject("user")
        return None
    if m.group("i") or _AND_I.search(m.group(0)):
        return Subject("user")
    if m.group("rel"):
        rel = _SPACES.sub("_", m.group("rel").lower())
        name = m.group("rname")
        return Subject(name.lower() if name else rel, rel, name)
    name = m.group("name")
    if name and name.split()[0].lower() not in COMMON and name.lower() not in NATIONALITIES:
        return Subject(name.lower(), None, name)
    return None


def possessor(pre: str) -> Subject | None:
    """Whose is the noun right after ``pre`` ("my ...", "my sister's ...", "Maria's ...")?"""
    m = _POSSESSOR.search(pre)
    if m is None:
        return None
    if m.group("rel"):
        rel = _SPACES.sub("_", m.group("rel").lower())
        name = m.group("rname")
        return Subject(name.lower() if name else rel, rel, name)
    if m.group("name") and m.group("name").split()[0].lower() not in COMMON:
        return Subject(m.group("name").lower(), None, m.group("name"))
    return Subject("user") if m.group("my") else None


def verb_use(sentence: str, m: re.Match[str]) -> bool:
    """Whether a preference's trigger (a match whose group "obj" follows its verb) is a verb of its subject:
    not "Sounds like fun", "stuff, like my bowl" (prepositions), "Unconditional love is", "Maria like"
    (a name takes "loves" but "Maria does love")."""
    verb = sentence[m.start():m.start("obj")].split()[0].casefold()  # not m.group(0): it may run far
    # _LIKE_AS ends at the verb: whitespace, and before it a comma or one of its words
    if verb == "like" and _LIKE_AS.search(sentence, max(0, _space_before(sentence, m.start()) - _LIKE_REACH),
                                          m.start()):
        return False
    if verb not in _BASE_FORMS:
        return True
    pre = tail(sentence, m.start())
    found = _SUBJECT.search(pre)
    if found is None or not found.group("name") or found.group("rel") or _AND_I.search(found.group(0)):
        return True
    return bool(_HELPER.search(found.group(0))) or pre[:found.start()].rstrip().casefold().endswith(" and")


def shares_i(sentence: str, start: int) -> bool:
    """Whether :data:`SHARED_I` matches ``sentence[:start]`` (a clause that began with "I"/"we" goes
    on with "and" right before ``start``), without scanning the clause: the text before ``start``
    ends with "and" (and maybe an adverb), and the last clause head before that "and" comes after
    the last [.;!?,] mark before it.

    >>> shares_i("I quit the hospital and started at Zillow", 24), shares_i("She quit and started", 14)
    (True, False)
    """
    found = _and_before(sentence, start)
    if found is None:
        return False
    heads, marks = _clause_index(sentence)
    head = bisect.bisect_left(heads, found)  # heads[head - 1]: the last head before "and"
    mark = bisect.bisect_left(marks, found)
    return head > 0 and (mark == 0 or heads[head - 1] > marks[mark - 1])


def _space_before(text: str, end: int) -> int:
    """Where the run of whitespace that ends at ``end`` starts (``end`` when there is none)."""
    while end and text[end - 1].isspace():
        end -= 1
    return end


def _and_before(sentence: str, end: int) -> int | None:
    """Where "and" starts when ``sentence[:end]`` ends with "and", maybe one of the adverbs, and
    whitespace (how :data:`SHARED_I` ends), else None. Each pattern reads a few characters."""
    cut = _space_before(sentence, end)
    if cut == end:
        return None
    stops = [cut]
    adverb = _ADVERB_END.search(sentence, max(0, cut - max(map(len, _ADVERBS))), cut)
    if adverb is not None and _space_before(sentence, adverb.start()) < adverb.start():
        stops.append(_space_before(sentence, adverb.start()))
    for stop in stops:
        if _AND_END.search(sentence, max(0, stop - 3), stop):
            return stop - 3
    return None


@functools.lru_cache(maxsize=16)
def _clause_index(sentence: str) -> tuple[list[int], list[int]]:
    """Where the clauses of ``sentence`` that start with "I"/"we" start (their "I"/"we": after the
    start of the sentence or a [.;!?] mark and whitespace, through non-word characters only) and where
    its [.;!?,] marks are, both in order. Built once per sentence, in one pass over each."""
    heads = [0] if _I_WE.match(sentence) else []
    for run in _NON_WORD.finditer(sentence):
        at = run.end()
        if (run.start() == 0 or _OPENS.search(sentence, run.start(), at)) and _I_WE.match(sentence, at):
            heads.append(at)
    return heads, [m.start() for m in _MARK.finditer(sentence)]
