"""Patterns and small parsers behind :class:`unified_memory.extraction.rules.RuleExtractor`.

Private: the shapes here may change. :func:`find_hits` turns one sentence into
:class:`Hit` records (who, predicate, value, slot attribute), :func:`mentions`
finds entities that carry no relation of their own ("with Jo", "Acme Inc"). Who a
hit is about is read by :mod:`unified_memory.extraction._subjects`. The work of
both grows linearly with the length of a sentence: no pattern is tried where it
would rescan a run of whitespace or a long word, and the unanchored parts of the
patterns are bounded (see ``RUN_START``, ``_WORDISH`` and ``_GAP``).

    >>> [(h.who.key, h.predicate, h.value) for h in find_hits("my sister Maria lives in Lisbon")]
    [('maria', 'has_sister', 'Maria'), ('maria', 'lives_in', 'Lisbon')]
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from unified_memory.extraction._subjects import (
    ADJ,
    COMMON,
    NAME,
    NATIONALITIES,
    PET_WORDS,
    REL,
    REL_WORDS,
    Subject,
    possessor,
    subject,
    tail,
    verb_use,
)

__all__ = ["Subject", "Hit", "find_hits", "mentions", "clean_value", "folded", "letter_runs",
           "ATTRIBUTE_CATEGORY", "COMMON", "GateChoices", "RUN_START", "MAX_VALUE"]

_T = TypeVar("_T")

_JOB = (r"(?:(?:[\w-]+\s+){0,2}?(?:engineer|developer|programmer|designer|teacher|professor|lecturer|nurse|"
        r"doctor|physician|surgeon|dentist|lawyer|attorney|accountant|architect|scientist|researcher|analyst|"
        r"consultant|manager|director|chef|cook|waiter|waitress|bartender|barista|pilot|firefighter|officer|"
        r"soldier|farmer|writer|author|journalist|editor|artist|musician|photographer|student|intern|mechanic|"
        r"electrician|plumber|carpenter|tester|pharmacist|therapist|psychologist|vet|veterinarian|librarian|cashier|"
        r"entrepreneur|founder|ceo|cto|freelancer|translator|paramedic|driver|clerk|technician|actor|actress|"
        r"dancer|coach|tutor|banker|economist|physicist|chemist|biologist|mathematician|secretary|receptionist|"
        r"caregiver|midwife|worker|hairdresser|baker|contractor|realtor|recruiter|marketer|salesperson))")
_DATE = (r"(?:(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?"
         r"(?:,?\s+\d{4})?|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
         r"[a-z]*(?:,?\s+\d{4})?|\d{4}-\d\d-\d\d|\d{1,2}/\d{1,2}(?:/\d{2,4})?)")
_OBJ = r"(?P<obj>[^,.;:!?()\"]+)"
# Unanchored parts are bounded, so that the scan from each place a pattern is tried is bounded too
# (extraction stays linear in the length of a sentence): a word before a trigger ("peanut allergy") has at
# most 64 characters (taken whole: whitespace follows it), what lies between two triggers ("moved from X
# to") at most 200.
_WORDISH, _GAP = r"[\w-]{1,64}+", r"[^,.;]{1,200}?"
_LIST = r"(?P<obj>[^.;:!?()\"]+)"
#: The longest value (a place, a name, a food...) a hit carries: longer, it is no value but a run of text.
MAX_VALUE = 100
ATTRIBUTE_CATEGORY = {
    "name": "identity", "age": "identity", "birthplace": "identity", "birth_year": "identity",
    "residence": "location", "hometown": "location", "employer": "work", "job_title": "work", "school": "work",
    "relationship_status": "relationship", "relation": "relationship", "diet": "health", "birthday": "schedule"}

# (predicate, attribute, object kind, category, subject mode, pattern with a group "obj"). "@" in a predicate
# or attribute is replaced by a group of the match ("rel", "thing"); attribute None: many values may hold at
# once (allergies, likes), so no slot. Subject modes: "subj" the subject before the verb, "poss" the owner of
# the noun the match starts at ("my sister's birthday"), "user" the speaker, "rel" the named relative.
_PREDICATES: tuple[tuple[str, str | None, str, str, str, str], ...] = (
    ("name", "name", "name", "identity", "poss", r"\b(?:(?:full|first|real|last|nick)\s*)?name\s*(?:'s|is)\s+(?P<obj>" + NAME
     + r"|[a-z]+\b)"),
    ("name", "name", "name", "identity", "user", r"(?:\bi'm|\bi\s+am|\bcall\s+me)\s+(?P<obj>" + NAME + r")"),
    ("has_@", "relation", "relative", "relationship", "rel", r"\bmy\s+" + ADJ + r"(?P<rel>" + REL + r")(?:'s\s+name\s+is|,"
     r"|\s+named|\s+called)?\s+(?P<obj>" + NAME + r")"),
    ("has_@", "relation", "relative", "relationship", "rel", r"(?P<obj>" + NAME + r")\s+is\s+my\s+" + ADJ + r"(?P<rel>"
     + REL + r")\b"),
    ("lives_in", "residence", "place", "location", "subj", r"\b(?:live|lives|living|reside|resides|residing|based|settled|"
     r"moved|relocated)\s+(?:back\s+)?(?:in|to|into)\s+" + _OBJ),
    ("lives_in", "residence", "place", "location", "subj", r"\b(?:moved|relocated)\s+(?:back\s+)?(?:away\s+)?from\s+"
     + _GAP + r"\s+(?:to|into)\s+" + _OBJ),
    ("lived_in", None, "place", "location", "subj", r"\blived\s+in\s+" + _OBJ),
    ("moving_to", None, "place", "location", "subj", r"\b(?:moving|relocating|move)\s+(?:back\s+)?to\s+" + _OBJ),
    ("grew_up_in", "hometown", "place", "location", "subj", r"\b(?:grew\s+up|was\s+raised)\s+in\s+" + _OBJ),
    ("is_from", "hometown", "place", "location", "subj", r"(?:'m|\bam|\bis|\bare|'re|\bwas)\s+(?:originally\s+)?from\s+"
     r"(?P<obj>" + NAME + r")"),
    ("born_in", "birthplace", "place", "identity", "subj", r"\bwas\s+born\s+in\s+(?P<obj>" + NAME + r")"),
    ("born_in_year", "birth_year", "value", "identity", "subj", r"\bwas\s+born\s+in\s+(?P<obj>\d{4})\b"),
    ("birthday", "birthday", "value", "schedule", "subj", r"\bwas\s+born\s+on\s+(?P<obj>" + _DATE + r")"),
    ("birthday", "birthday", "value", "schedule", "poss", r"\b(?:birthday|bday)\s+is\s+(?:on\s+)?(?P<obj>" + _DATE + r")"),
    ("works_at", "employer", "organization", "work", "subj", r"\b(?:work|works|working)\s+(?:at|for)\s+" + _OBJ),
    ("worked_at", None, "organization", "work", "subj", r"\bworked\s+(?:at|for)\s+" + _OBJ),
    ("works_at", "employer", "organization", "work", "subj", r"\b(?:employed|hired)\s+(?:at|by)\s+" + _OBJ),
    ("works_at", "employer", "organization", "work", "subj", r"\b(?:got|started|landed|accepted)\s+(?:a\s+|an\s+|the\s+)?"
     r"(?:new\s+)?(?:job|position|role|offer)\s+(?:at|with)\s+" + _OBJ),
    ("works_at", "employer", "organization", "work", "subj", r"\b(?:started|starting|began|beginning)\s+(?:work(?:ing)?\s+"
     r"(?:at|for)|as\s+(?:a|an)\s+" + _GAP + r"\s+(?:at|with|for))\s+" + _OBJ),
    ("studies_at", "school", "organization", "work", "subj", r"\b(?:study|studies|studying|student)\s+(?:[a-z]+\s+){0,3}?"
     r"at\s+" + _OBJ),
    ("works_as", "job_title", "value", "work", "subj", r"\b(?:work|works|working)\s+(?:at|for)\s+" + _GAP + r"\s+as\s+"
     r"(?:a|an)\s+(?P<obj>" + _JOB + r")s?\b"),
    ("works_as", "job_title", "value", "work", "subj", r"\b(?:work|works|working)\s+as\s+(?:a|an)\s+(?P<obj>" + _JOB + r")s?\b"),
    ("works_as", "job_title", "value", "work", "subj", r"\b(?:started|starting|began|beginning)\s+(?:work(?:ing)?\s+)?"
     r"as\s+(?:a|an)\s+(?P<obj>" + _JOB + r")s?\b"),
    ("works_as", "job_title", "value", "work", "subj", r"(?:'m|\bam|\bis|'s)\s+(?:now\s+)?(?:a|an)\s+(?P<obj>" + _JOB
     + r")s?\b"),
    ("nationality", "nationality", "nationality", "identity", "user", r"(?:\bi'm|\bi\s+am)\s+(?:a\s+|an\s+)?"
     r"(?P<obj>" + "|".join(NATIONALITIES) + r")\b"),
    ("age", "age", "value", "identity", "subj", r"(?:'m|\bam|\bis|'s)\s+(?P<obj>\d{1,3})\s*(?:years?[\s-]*old|yo|y/o)\b"),
    ("age", "age", "value", "identity", "subj", r"\bi(?:'m|\s+am)\s+(?P<obj>\d{1,3})\s*(?:[.!,;]|$)"),
    ("age", "age", "value", "identity", "subj", r"\bturned\s+(?P<obj>\d{1,3})\b"),
    ("relationship_status", "relationship_status", "value", "relationship", "subj", r"(?:'m|\bam|\bare|'re|\bis|'s)\s+"
     r"(?:now\s+|happily\s+|recently\s+|newly\s+)?(?P<obj>married|single|divorced|engaged|widowed|separated|"
     r"in\s+a\s+relationship)\b"),
    ("relationship_status", "relationship_status", "value", "relationship", "subj", r"\bgot\s+(?P<obj>married|engaged|"
     r"divorced)\b"),
    ("diet", "diet", "value", "health", "subj", r"(?:'m|\bam|\bare|'re|\bis|'ve\s+been|\bhave\s+been)\s+(?:a\s+|an\s+|"
     r"strictly\s+|now\s+|fully\s+|mostly\s+)?(?P<obj>vegan|vegetarian|pescatarian|keto|kosher|halal|paleo|"
     r"flexitarian)\b"),
    ("diet", "diet", "value", "health", "subj", r"\b(?:on|follow)\s+a\s+(?P<obj>[\w-]+)\s+diet\b"),
    ("allergic_to", None, "list", "health", "subj", r"\b(?:allergic|allergy|allergies)\s+to\s+" + _LIST),
    ("allergic_to", None, "list", "health", "subj", r"\b(?P<obj>(?:" + _WORDISH + r"\s+){0,2}" + _WORDISH
     + r")\s+(?:allergy|allergies)\b"),
    ("intolerant_to", None, "list", "health", "subj", r"\b(?P<obj>" + _WORDISH + r")\s+intoleran(?:t|ce)\b"),
    ("avoids", None, "list", "health", "subj", r"\b(?:can't|cannot|can\s+not|don't|do\s+not|never|shouldn't)\s+(?:eat|drink|"
     r"have|consume)\s+" + _LIST),
    ("has_condition", None, "value", "health", "subj", r"\b(?:have|has|'ve\s+got|suffer\s+from|suffers\s+from|diagnosed\s+"
     r"with)\s+(?:type\s+[12]\s+|severe\s+|mild\s+|chronic\s+)?(?P<obj>diabetes|asthma|epilepsy|adhd|autism|"
     r"celiac\s+disease|hypertension|high\s+blood\s+pressure|arthritis|migraines|depression|anxiety|crohn's|ibs|"
     r"lupus|cancer|dyslexia)\b"),
    ("has_condition", None, "value", "health", "subj", r"(?:'m|\bam|\bis|'s)\s+(?P<obj>pregnant|diabetic|asthmatic|"
     r"epileptic|colou?rblind|deaf|blind|autistic|dyslexic)\b"),
    ("likes", None, "list", "preference", "subj", r"(?<!'d\s)(?<!would\s)\b(?:love|loves|like|likes|enjoy|enjoys|adore|"
     r"adores|prefer|prefers)\s+" + _LIST),
    ("dislikes", None, "list", "preference", "subj", r"\b(?:hate|hates|dislike|dislikes|detest|detests|loathe|loathes|"
     r"can't\s+stand|don't\s+(?:really\s+)?like|doesn't\s+like|do\s+not\s+like|don't\s+enjoy)\s+" + _LIST),
    ("favorite_@", "favorite_@", "phrase", "preference", "poss", r"\bfav(?:ou?rite|e)\s+(?P<thing>[a-z]+(?:\s+[a-z]+)?)"
     r"\s+(?:is|are|was)\s+" + _OBJ),
    ("has_@", None, "animal", "possession", "subj", r"\b(?:have|has|got|adopted)\s+(?:a|an|two|three|four|\d+)\s+"
     r"(?:[\w-]+\s+){0,2}?(?P<rel>(?:" + "|".join(PET_WORDS) + r"|retriever|labrador|poodle|terrier|beagle)"
     r"(?:s|es)?)\s+(?:named|called)\s+(?P<obj>" + NAME + r"(?:(?:\s*,\s*|\s+and\s+)" + NAME + r")*)"),
)
_COMPILED = tuple((p, a, k, c, mode, re.compile(rx, re.I)) for p, a, k, c, mode, rx in _PREDICATES)
# Gates: a pattern runs only where each group of its gate has a word in the folded sentence ("=word": a whole
# run of letters). Each group is necessary for a match, so gates change no result; they spare ~40 scans.
_SOME_BE, _IM, _RELS = "'m am is 's", "i'm am call", "=" + " =".join(REL_WORDS + PET_WORDS)
_JOB_WORDS = re.findall(r"[a-z]+", _JOB.split("?(?:", 1)[1])
_PETS = [*PET_WORDS, "retriever", "labrador", "poodle", "terrier", "beagle"]
_GATE_SPECS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("name", ("name",)), ("name", (_IM,)), ("has_@", ("my", _RELS)), ("has_@", ("my", "is", _RELS)),
    ("lives_in", ("liv resid based settled moved relocated", "in to")),
    ("lives_in", ("moved relocated", "from", "to")), ("lived_in", ("lived",)),
    ("moving_to", ("mov relocating", "to")), ("grew_up_in", ("grew raised",)), ("is_from", ("from",)),
    ("born_in", ("born",)), ("born_in_year", ("born",)), ("birthday", ("born",)), ("birthday", ("birthday bday",)),
    ("works_at", ("work",)), ("worked_at", ("worked",)), ("works_at", ("employed hired",)),
    ("works_at", ("job position role offer",)), ("works_at", ("start began beginning", "at with for")),
    ("studies_at", ("stud",)), ("works_as", ("work", "as")),
    ("works_as", ("work", "as")), ("works_as", ("start began beginning", "as")), ("works_as", (_SOME_BE, " ".join(f"={j} ={j}s" for j in _JOB_WORDS))),
    ("nationality", ("i'm am", "=" + " =".join(sorted(NATIONALITIES)))),
    ("age", (_SOME_BE, "year yo y/o")), ("age", ("i'm am",)), ("age", ("turned",)),
    ("relationship_status", ("married single divorced engaged widowed separated relationship",)),
    ("relationship_status", ("got", "married engaged divorced")),
    ("diet", ("vegan vegetarian pescatarian keto kosher halal paleo flexitarian",)), ("diet", ("diet",)),
    ("allergic_to", ("allerg",)), ("allergic_to", ("allerg",)), ("intolerant_to", ("intoleran",)),
    ("avoids", ("can do never shouldn't", "eat drink have consume")),
    ("has_condition", ("have has 've suffer diagnosed", "=diabetes =asthma =epilepsy =adhd =autism =celiac =high "
                       "=hypertension =arthritis =migraines =depression =anxiety =crohn =ibs =lupus =cancer =dyslexia")),
    ("has_condition", (_SOME_BE, "pregnant diabetic asthmatic epileptic blind deaf autistic dyslexic")),
    ("likes", ("love like enjoy adore prefer",)), ("dislikes", ("hate like detest loathe stand enjoy",)),
    ("favorite_@", ("fav",)), ("has_@", ("named called", " ".join(f"={p} ={p}s ={p}es" for p in _PETS))),
)
assert [p for p, _ in _GATE_SPECS] == [p[0] for p in _PREDICATES]
_GROUPS = [(n, group.split()) for n, (_, groups) in enumerate(_GATE_SPECS) for group in groups]
_BITS: dict[str, int] = {}  # gate word -> a bit for each group it belongs to
for _bit, (_, _group) in enumerate(_GROUPS):
    _BITS.update({w: _BITS.get(w, 0) | 1 << _bit for w in _group})
_NEEDS = [sum(1 << b for b, (n, _) in enumerate(_GROUPS) if n == i) for i in range(len(_GATE_SPECS))]
# A gate word of letters only lies inside one run of letters: look each run up once (_run_bits).
_IN_RUNS = tuple((w, b) for w, b in sorted(_BITS.items()) if w.isalpha())
_ELSEWHERE = tuple((w, b) for w, b in sorted(_BITS.items()) if w[0] != "=" and not w.isalpha())
_RUN_BITS: dict[str, int] = {}  # run of letters -> its gate bits (a cache, cleared when it grows large)
_GATED = tuple(zip(_NEEDS, _COMPILED, strict=True))
_LETTERS = re.compile(r"[a-z]+")  # _FOLD: the non-ASCII letters that re.I matches to ASCII ones
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_ORG_GATE = re.compile("University|College|Institute|Bank|School|Academy|Inc|Ltd|LLC|Corp|Company|Hospital|Labs|"
                       "Group|Foundation")  # case-sensitive, as _ORG is
_TRAVEL_GATE = re.compile("visit|trip|travel|fl[ye]|went|going|vacation|holiday")  # on the folded sentence
_NAMED_OBJECT = frozenset({"name", "relative", "animal"})
_NEG = re.compile(r"\b(?:not|never|no\s+longer)\b|n't\b|\bcannot\b", re.I)
_CUT_WORDS = ("but|because|since|with|for|as|where|which|who|so|when|while|although|though|until|now|anymore|"
              "nowadays|currently|lately|already|again|anyway|if|than|right|these|last|next|this|every|tomorrow|"
              r"yesterday|today|tonight|over|after|before|very|too|a\s+lot|so\s+much")
# RUN_START: a match never starts inside a run of whitespace, only at its first character. Each pattern that
# starts with whitespace matches from there whenever it matches from inside (the run's start can take the
# run in), with the same end; tried inside, each start would rescan the rest of the run (a long run would
# cost its square). Every match ends after its whitespace, so a next match never starts inside a run either.
RUN_START = r"(?!(?<=\s)\s)"
_CUT = re.compile(RUN_START + r"\s+(?:and|" + _CUT_WORDS + r")\b.*$", re.I)
_CUT_PHRASE = re.compile(RUN_START + r"\s+(?:" + _CUT_WORDS + r")\b.*$", re.I)
_PLACE_CUT = re.compile(RUN_START + r"\s+(?:in|at|on|from|to|by)\b.*$", re.I)
_LEAD = re.compile(r"^(?:(?:a|an|the|my|some|severe|mild|bad|serious|slight|life-threatening|deadly|terrible|"
                   r"food|seasonal|minor|known|multiple|several|all|to|i|have|has|had|got|really|also|just|eating|"
                   r"drinking)\s+)+", re.I)
_CAPRUN = re.compile(r"(?-i:[A-Z0-9][\w'&.-]*)(?:\s+(?:(?:of|the|de|da|do|del|la|le|von|van|y|&)\s+)?"
                     r"(?-i:[A-Z0-9][\w'&.-]*))*")
_GENERIC = frozenset("""it this that these those them you your him her anything everything something nothing much
any what how when to one stuff things idea and or is was were are be been why where who which whether everywhere anywhere
somewhere everyone everybody anyone someone do does did would has have had that's it's thanks thank huh
oh yeah yes lol haha""".split())
_ORG = re.compile(r"\b(?:University|College|Institute|Bank|School|Academy)\s+of\s+(?:the\s+)?[A-Z]\w+(?:\s+[A-Z]\w+)?"
                  r"|\b(?!The\b)(?:[A-Z][\w&-]{0,63}+\s+){1,3}(?:Inc|Ltd|LLC|Corp|Corporation|Company|University|College|"
                  r"Institute|Bank|Hospital|Labs|Group|Foundation|School|Academy)\b")
_WITH = re.compile(r"\b(?:dinner|lunch|breakfast|coffee|drinks|met|meeting|talked|spoke|went|hung\s+out|hanging\s+out|"
                   r"dating|live|lives|living|married|travel\w*|chatted|played|stayed|staying)\b[^.,;!?]{0,30}?\bwith\s+"
                   r"(?P<obj>" + NAME + r"(?:(?:\s*,\s*|\s+and\s+)" + NAME + r")*)", re.I)
_TRAVEL = re.compile(r"\b(?P<verb>visit|visiting|visited|trip\s+to|travel(?:l?ing|l?ed)?\s+to|flying\s+to|"
                     r"flew\s+to|fly\s+to|went\s+to|going\s+to|vacation\s+in|holiday\s+in)\s+(?P<obj>" + NAME + r")",
                     re.I)
# Where an object runs into the next clause: "peanuts, so never ...", "jazz - mostly bebop", "jazz and I play".
# The whitespace before a mark is taken by the leading \s* (a "(?<=\s)" stands for the \s+ it ends with):
# a second, nested run of whitespace would make a long run cost its cube.
_CLAUSE_END = re.compile(RUN_START + r"\s*(?:[;:\u2013\u2014]|(?<=\s)-+\s|(?:,\s+|(?<=\s))(?:so|but|because|'?cause|since|"
                         r"which|who|whereas|although|though|while|yet|unless|except|especially|mostly|plus)\b|"
                         r"(?:,\s+|(?<=\s))and\s+(?:i|i'm|i've|i'd|we|we're|my|our|he|she|they|it|it's|that|this|so|"
                         r"then|also|now)\b|,\s*(?:i|i'm|we|my|it|it's|not|just|maybe|probably|too|as\s+well|like|if|"
                         r"when)\b).*$", re.I | re.S)
_ITEMS = re.compile(RUN_START + r"(?:\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or|&)\s+)", re.I)
_AND_SPLIT = re.compile(RUN_START + r"(?:\s*,\s*|\s+and\s+)")
_ARTICLE, _USED_TO = re.compile(r"^(?:the|a|an)\s+", re.I), re.compile(r"\bused\s+to\s+$", re.I)
_NON_WORD = re.compile(r"\W+")
_FORGET = re.compile(r"(?:n't|\bnot|\bnever)\s+forget\b", re.I)  # "don't forget my peanut allergy" is no negation
_PAST = {"lives_in": "lived_in", "works_at": "worked_at"}  # "I used to live in Paris" is not where I live
_CLAUSE_OBJECT = re.compile(r"\s*(?:how|what|why|when|where|who|whether|if|it's|it\s+is)\b", re.I)


@dataclass
class Hit:
    """One relation found in a sentence."""

    start: int
    who: Subject
    predicate: str
    value: str
    attribute: str | None
    kind: str
    category: str
    negated: bool = False
    extra: dict[str, str] = field(default_factory=dict)


def clean_value(raw: str, kind: str) -> str:
    """Trim a captured object to its value ("Acme as an engineer" -> "Acme").

    >>> clean_value("the University of Lisbon since 2019", "organization")
    'University of Lisbon'
    """
    raw = raw.strip().strip("'\"[]")
    if kind in ("place", "organization", "name"):
        raw = _ARTICLE.sub("", raw)
        cap = _CAPRUN.match(raw)
        if cap:
            return cap.group(0).rstrip(".")
        raw = _PLACE_CUT.sub("", _CUT.sub("", raw))
        words = raw.split()[:4]
        return " ".join(words).title() if len(words) == 1 else " ".join(words)
    if kind == "nationality":
        return raw.title()
    raw = _LEAD.sub("", (_CUT_PHRASE if kind == "phrase" else _CUT).sub("", raw))
    return " ".join(raw.split()[:5]).strip(" '-[]")


def find_hits(sentence: str) -> list[Hit]:
    """Every relation the patterns recognise in one sentence, in order of position.

    >>> [(h.predicate, h.value, h.attribute) for h in find_hits("I work at Acme as an engineer")]
    [('works_at', 'Acme', 'employer'), ('works_as', 'engineer', 'job_title')]
    """
    hits: list[Hit] = []
    low = folded(sentence)
    bits = 0
    for word, bit in _ELSEWHERE:
        bits |= bit if word in low else 0
    for run in letter_runs(sentence):
        found = _RUN_BITS.get(run)  # one lookup: another thread may clear the cache meanwhile
        bits |= _run_bits(run) if found is None else found
    for pred, attr, kind, cat, mode, rx in _chosen(bits):
        for m in rx.finditer(sentence):
            if pred in ("likes", "dislikes") and not verb_use(sentence, m):
                continue  # a preposition, not a verb (the same for every item of the match)
            if kind in ("list", "animal"):
                whole = _CLAUSE_END.sub("", m.group("obj"))
                if _CLAUSE_OBJECT.match(whole):  # "I love how you tell stories and teach people": no list of things
                    continue
                for item in _ITEMS.split(whole):
                    sub = _one(sentence, m, pred, attr, "value" if kind == "list" else kind, cat, mode, item)
                    hits.extend(sub)
                continue
            hits.extend(_one(sentence, m, pred, attr, kind, cat, mode, _CLAUSE_END.sub("", m.group("obj"))))
    hits.sort(key=lambda h: h.start)
    return hits


class GateChoices(Generic[_T]):
    """The entries of a gated table (rows ``(need bits, ...)``, in order) whose needs a sentence's
    gate ``bits`` hold, as ``pick(row)``, remembered per ``bits`` value: a few hundred combinations
    occur, and a lookup is cheaper than testing every gate. ``table()`` is read on each call
    (tests swap a module's table for an ungated one); choices made from another table are dropped.

    >>> choose = GateChoices(lambda: ((0b01, "a"), (0b11, "b"), (0, "c")), lambda row: row[1])
    >>> choose(0b01), choose(0b11)
    (('a', 'c'), ('a', 'b', 'c'))
    """

    def __init__(self, table: Callable[[], Sequence[Any]], pick: Callable[[Any], _T]) -> None:
        self._table, self._pick = table, pick
        self._made_from: object = None
        self._chosen: dict[int, tuple[_T, ...]] = {}

    def __call__(self, bits: int) -> tuple[_T, ...]:
        gated, chosen = self._table(), self._chosen
        if self._made_from is not gated or len(chosen) >= 4096:
            chosen.clear()
            self._made_from = gated
        found = chosen.get(bits)
        if found is None:
            found = chosen[bits] = tuple(self._pick(row) for row in gated if bits & row[0] == row[0])
        return found


#: The patterns of :data:`_GATED` whose gates a sentence's bits open, in order.
_chosen: GateChoices[tuple[str, str | None, str, str, str, re.Pattern[str]]] = GateChoices(
    lambda: _GATED, lambda row: row[1])


def _run_bits(run: str) -> int:
    """The gate bits of one run of letters: the groups of the words inside it, and of ``=run`` itself."""
    bits = _BITS.get("=" + run, 0)
    for word, bit in _IN_RUNS:
        bits |= bit if word in run else 0
    if len(_RUN_BITS) >= 50_000:
        _RUN_BITS.clear()
    _RUN_BITS[run] = bits
    return bits


@functools.lru_cache(maxsize=256)
def letter_runs(sentence: str) -> frozenset[str]:
    """The runs of letters of ``sentence`` folded as :func:`folded` does (what a case-insensitive
    word of ASCII letters can match). Each module's gates look words up here; the few calls of one
    extraction share one computation.

    >>> sorted(letter_runs("I'm in Lisbon, not Porto"))
    ['i', 'in', 'lisbon', 'm', 'not', 'porto']
    """
    return frozenset(_LETTERS.findall(folded(sentence)))


def folded(sentence: str) -> str:
    """``sentence`` lower-cased, with the non-ASCII letters that match ASCII ones under re.I spelt in ASCII."""
    return (sentence if sentence.isascii() else sentence.translate(_FOLD)).lower()


def _one(sentence: str, m: re.Match[str], pred: str, attr: str | None, kind: str, cat: str, mode: str,
         raw: str) -> list[Hit]:
    """The hit for one captured object (none when the object or the subject is not usable)."""
    owner, before = None, sentence[max(0, m.start() - 20):m.start("obj")]
    if m.end("obj") < m.end():  # the object precedes its trigger ("my peanut allergy"): the words right before it
        words = raw.split()
        keep = len(words)
        while keep and words[keep - 1].lower() not in COMMON and "'" not in words[keep - 1]:
            keep -= 1
        raw = _LEAD.sub("", " ".join(words[keep:]) + " ")
        owner = possessor(tail(sentence, m.start()) + " ".join(words[:keep]) + " ")
        before += " ".join(words[:keep])
    value = clean_value(raw, kind)
    low = value.lower()
    head = low.split()[0] if low.split() else ""
    if not head or low in _GENERIC or head in _GENERIC or len(value) > MAX_VALUE:
        return []
    if kind in _NAMED_OBJECT and (head in COMMON or low in NATIONALITIES):
        return []
    named = m.re.groupindex  # not m.groupdict(): it would copy the object (one per item) again and again
    rel = next((m.group(g) for g in ("rel", "thing") if g in named and m.group(g)), "")
    rel = _NON_WORD.sub("_", rel.lower()).strip("_")
    if kind == "animal" and rel.endswith("s") and rel[:-1] in PET_WORDS + ["retriever", "terrier", "poodle"]:
        rel = rel[:-1]
    if pred == "favorite_@" and len(rel) > 3 and rel.endswith("s") and not rel.endswith(("ss", "series")):
        rel = rel[:-1]  # "favorite movies" and "favorite movie" are one slot
    p, a = pred.replace("@", rel), attr.replace("@", rel) if attr else None
    if p in _PAST and _USED_TO.search(sentence[max(0, m.start() - 12):m.start()]):
        p, a = _PAST[p], None
    if owner is not None:
        who: Subject | None = owner
    elif mode == "rel":
        who = Subject(low, rel, value)
    elif mode == "user":
        who = Subject("user")
    elif mode == "poss":
        who = possessor(tail(sentence, m.start()))
    else:
        who = subject(sentence, m.start())
    if who is None:
        return []
    window = before.split(",")[-1]
    negated = _NEG.search(_FORGET.sub("", window)) is not None and pred not in ("avoids", "dislikes")
    return [Hit(m.start(), who, p, value, a, kind, cat, negated, {"species": rel} if kind == "animal" else {})]


def mentions(sentence: str) -> list[tuple[str, str]]:
    """Entities named without a relation of their own: ``(name, type)`` pairs.

    >>> mentions("I had lunch with Jo at Acme Inc.")
    [('Acme Inc', 'organization'), ('Jo', 'person')]
    """
    low = folded(sentence)
    found = [(m.group(0).strip(), "organization") for m in _ORG.finditer(sentence)] if _ORG_GATE.search(
        sentence) else []
    if _TRAVEL_GATE.search(low):
        found += [(m.group("obj"), "place") for m in _TRAVEL.finditer(sentence)]
    if "with" in low:
        found += [(name, "person") for m in _WITH.finditer(sentence) for name in _AND_SPLIT.split(m.group("obj"))]
    return [(n, t) for n, t in found if n.split()[0].lower() not in COMMON and len(n) <= MAX_VALUE]
