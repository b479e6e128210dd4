"""Patterns and small parsers behind :class:`unified_memory.extraction.rules.RuleExtractor`.

Private: the shapes here may change. :func:`find_hits` turns one sentence into
:class:`Hit` records (who, predicate, value, slot attribute), :func:`mentions`
finds entities that carry no relation of their own ("with Jo", "Acme Inc").

    >>> [(h.who.key, h.predicate, h.value) for h in find_hits("my sister Maria lives in Lisbon")]
    [('maria', 'has_sister', 'Maria'), ('maria', 'lives_in', 'Lisbon')]
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Subject", "Hit", "find_hits", "mentions", "clean_value", "folded", "letter_runs",
           "ATTRIBUTE_CATEGORY", "COMMON", "GateChoices"]

_T = TypeVar("_T")

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
_REL_WORDS = """mom mum mother dad father parents sister brother sibling wife husband partner spouse girlfriend
boyfriend fiance fiancee son daughter kid child baby grandma grandpa grandmother grandfather grandson
granddaughter aunt uncle cousin niece nephew friend roommate flatmate boss manager coworker colleague neighbor
neighbour therapist mentor""".split()
_PET_WORDS = "dog cat puppy kitten parrot rabbit hamster horse bird turtle snake lizard fish pony".split()
REL = r"(?:best\s+friend|" + "|".join(_REL_WORDS + _PET_WORDS) + ")"
_ADJ = r"(?:(?:best|older|younger|little|big|twin|step|late|baby|new|ex|oldest|youngest|eldest)[\s-]+)?"
_NAME = r"(?-i:[A-Z][a-z-]+(?:\s+[A-Z][a-z-]+)?)"
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
_LIST = r"(?P<obj>[^.;:!?()\"]+)"
ATTRIBUTE_CATEGORY = {
    "name": "identity", "age": "identity", "birthplace": "identity", "birth_year": "identity",
    "residence": "location", "hometown": "location", "employer": "work", "job_title": "work", "school": "work",
    "relationship_status": "relationship", "relation": "relationship", "diet": "health", "birthday": "schedule"}

# (predicate, attribute, object kind, category, subject mode, pattern with a group "obj"). "@" in a predicate
# or attribute is replaced by a group of the match ("rel", "thing"); attribute None: many values may hold at
# once (allergies, likes), so no slot. Subject modes: "subj" the subject before the verb, "poss" the owner of
# the noun the match starts at ("my sister's birthday"), "user" the speaker, "rel" the named relative.
_PREDICATES: tuple[tuple[str, str | None, str, str, str, str], ...] = (
    ("name", "name", "name", "identity", "poss", r"\b(?:(?:full|first|real|last|nick)\s*)?name\s*(?:'s|is)\s+(?P<obj>" + _NAME
     + r"|[a-z]+\b)"),
    ("name", "name", "name", "identity", "user", r"(?:\bi'm|\bi\s+am|\bcall\s+me)\s+(?P<obj>" + _NAME + r")"),
    ("has_@", "relation", "relative", "relationship", "rel", r"\bmy\s+" + _ADJ + r"(?P<rel>" + REL + r")(?:'s\s+name\s+is|,"
     r"|\s+named|\s+called)?\s+(?P<obj>" + _NAME + r")"),
    ("has_@", "relation", "relative", "relationship", "rel", r"(?P<obj>" + _NAME + r")\s+is\s+my\s+" + _ADJ + r"(?P<rel>"
     + REL + r")\b"),
    ("lives_in", "residence", "place", "location", "subj", r"\b(?:live|lives|living|reside|resides|residing|based|settled|"
     r"moved|relocated)\s+(?:back\s+)?(?:in|to|into)\s+" + _OBJ),
    ("lives_in", "residence", "place", "location", "subj", r"\b(?:moved|relocated)\s+(?:back\s+)?(?:away\s+)?from\s+"
     r"[^,.;]+?\s+(?:to|into)\s+" + _OBJ),
    ("lived_in", None, "place", "location", "subj", r"\blived\s+in\s+" + _OBJ),
    ("moving_to", None, "place", "location", "subj", r"\b(?:moving|relocating|move)\s+(?:back\s+)?to\s+" + _OBJ),
    ("grew_up_in", "hometown", "place", "location", "subj", r"\b(?:grew\s+up|was\s+raised)\s+in\s+" + _OBJ),
    ("is_from", "hometown", "place", "location", "subj", r"(?:'m|\bam|\bis|\bare|'re|\bwas)\s+(?:originally\s+)?from\s+"
     r"(?P<obj>" + _NAME + r")"),
    ("born_in", "birthplace", "place", "identity", "subj", r"\bwas\s+born\s+in\s+(?P<obj>" + _NAME + r")"),
    ("born_in_year", "birth_year", "value", "identity", "subj", r"\bwas\s+born\s+in\s+(?P<obj>\d{4})\b"),
    ("birthday", "birthday", "value", "schedule", "subj", r"\bwas\s+born\s+on\s+(?P<obj>" + _DATE + r")"),
    ("birthday", "birthday", "value", "schedule", "poss", r"\b(?:birthday|bday)\s+is\s+(?:on\s+)?(?P<obj>" + _DATE + r")"),
    ("works_at", "employer", "organization", "work", "subj", r"\b(?:work|works|working)\s+(?:at|for)\s+" + _OBJ),
    ("worked_at", None, "organization", "work", "subj", r"\bworked\s+(?:at|for)\s+" + _OBJ),
    ("works_at", "employer", "organization", "work", "subj", r"\b(?:employed|hired)\s+(?:at|by)\s+" + _OBJ),
    ("works_at", "employer", "organization", "work", "subj", r"\b(?:got|started|landed|accepted)\s+(?:a\s+|an\s+|the\s+)?"
     r"(?:new\s+)?(?:job|position|role|offer)\s+(?:at|with)\s+" + _OBJ),
    ("works_at", "employer", "organization", "work", "subj", r"\b(?:started|starting|began|beginning)\s+(?:work(?:ing)?\s+"
     r"(?:at|for)|as\s+(?:a|an)\s+[^,.;]+?\s+(?:at|with|for))\s+" + _OBJ),
    ("studies_at", "school", "organization", "work", "subj", r"\b(?:study|studies|studying|student)\s+(?:[a-z]+\s+){0,3}?"
     r"at\s+" + _OBJ),
    ("works_as", "job_title", "value", "work", "subj", r"\b(?:work|works|working)\s+(?:at|for)\s+[^,.;]+?\s+as\s+"
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
    ("allergic_to", None, "list", "health", "subj", r"\b(?P<obj>(?:[\w-]+\s+){0,2}[\w-]+)\s+(?:allergy|allergies)\b"),
    ("intolerant_to", None, "list", "health", "subj", r"\b(?P<obj>[\w-]+)\s+intoleran(?:t|ce)\b"),
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
     r"(?:[\w-]+\s+){0,2}?(?P<rel>(?:" + "|".join(_PET_WORDS) + r"|retriever|labrador|poodle|terrier|beagle)"
     r"(?:s|es)?)\s+(?:named|called)\s+(?P<obj>" + _NAME + r"(?:(?:\s*,\s*|\s+and\s+)" + _NAME + r")*)"),
)
_COMPILED = tuple((p, a, k, c, mode, re.compile(rx, re.I)) for p, a, k, c, mode, rx in _PREDICATES)
# Gates: a pattern runs only where each group of its gate has a word in the folded sentence ("=word": a whole
# run of letters). Each group is necessary for a match, so gates change no result; they spare ~40 scans.
_SOME_BE, _IM, _RELS = "'m am is 's", "i'm am call", "=" + " =".join(_REL_WORDS + _PET_WORDS)
_JOB_WORDS = re.findall(r"[a-z]+", _JOB.split("?(?:", 1)[1])
_PETS = [*_PET_WORDS, "retriever", "labrador", "poodle", "terrier", "beagle"]
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
_SUBJECT = re.compile(
    r"(?:\b(?P<i>i|we)|\bmy\s+" + _ADJ + r"(?P<rel>" + REL + r")(?:,?\s+(?P<rname>" + _NAME + r"))?|(?P<name>"
    + _NAME + r")|\b(?P<pro>he|she|they|it|you))(?:'s)?(?:\s*(?:'m|'re|'ve|'s|'d|'ll)|\s+(?:and\s+i|\w+ly|just|now|"
    r"also|still|already|recently|finally|currently|really|then|soon|will|have|has|had|am|is|are|was|were|been|do|"
    r"does|did|not|don't|doesn't|didn't|can't|cannot|never|no\s+longer|used\s+to|got|going|gonna|to|want|plan|"
    r"planning|can|originally|absolutely|totally|truly|especially|definitely))*[\s,]*$", re.I)
_POSSESSOR = re.compile(r"(?:\bmy\s+" + _ADJ + r"(?P<rel>" + REL + r")(?:\s+(?P<rname>" + _NAME + r"))?'s|(?P<name>"
                        + _NAME + r")'s|\b(?P<my>my|our))\s+(?:(?:all[\s-]time|new|current|real|very|own)\s+)?$", re.I)
_NEG = re.compile(r"\b(?:not|never|no\s+longer)\b|n't\b|\bcannot\b", re.I)
_CUT_WORDS = ("but|because|since|with|for|as|where|which|who|so|when|while|although|though|until|now|anymore|"
              "nowadays|currently|lately|already|again|anyway|if|than|right|these|last|next|this|every|tomorrow|"
              r"yesterday|today|tonight|over|after|before|very|too|a\s+lot|so\s+much")
_CUT = re.compile(r"\s+(?:and|" + _CUT_WORDS + r")\b.*$", re.I)
_CUT_PHRASE = re.compile(r"\s+(?:" + _CUT_WORDS + r")\b.*$", re.I)
_PLACE_CUT = re.compile(r"\s+(?:in|at|on|from|to|by)\b.*$", re.I)
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
                  r"|\b(?!The\b)(?:[A-Z][\w&-]*\s+){1,3}(?:Inc|Ltd|LLC|Corp|Corporation|Company|University|College|"
                  r"Institute|Bank|Hospital|Labs|Group|Foundation|School|Academy)\b")
_WITH = re.compile(r"\b(?:dinner|lunch|breakfast|coffee|drinks|met|meeting|talked|spoke|went|hung\s+out|hanging\s+out|"
                   r"dating|live|lives|living|married|travel\w*|chatted|played|stayed|staying)\b[^.,;!?]{0,30}?\bwith\s+"
                   r"(?P<obj>" + _NAME + r"(?:(?:\s*,\s*|\s+and\s+)" + _NAME + r")*)", re.I)
_TRAVEL = re.compile(r"\b(?P<verb>visit|visiting|visited|trip\s+to|travel(?:l?ing|l?ed)?\s+to|flying\s+to|"
                     r"flew\s+to|fly\s+to|went\s+to|going\s+to|vacation\s+in|holiday\s+in)\s+(?P<obj>" + _NAME + r")",
                     re.I)
# Where an object runs into the next clause: "peanuts, so never ...", "jazz - mostly bebop", "jazz and I play".
_CLAUSE_END = re.compile(r"\s*(?:[;:\u2013\u2014]|\s-+\s|,?\s+(?:so|but|because|'?cause|since|which|who|whereas|"
                         r"although|though|while|yet|unless|except|especially|mostly|plus)\b|,?\s+and\s+(?:i|i'm|"
                         r"i've|i'd|we|we're|my|our|he|she|they|it|it's|that|this|so|then|also|now)\b|,\s*(?:i|i'm|"
                         r"we|my|it|it's|not|just|maybe|probably|too|as\s+well|like|if|when)\b).*$", re.I | re.S)
_ITEMS = re.compile(r"\s*,\s*(?:(?:and|or)\s+)?|\s+(?:and|or|&)\s+", re.I)
_AND_SPLIT = re.compile(r"\s*,\s*|\s+and\s+")
_ARTICLE, _PAUSE = re.compile(r"^(?:the|a|an)\s+", re.I), re.compile(r"[,;:]|\bbut\b|\bso\b")
# A verb after "and" whose clause began with "I" / "we": "I quit the hospital and started as a tester at Zillow".
_SHARED_I = re.compile(r"(?:^|[.;!?]\s+)\W*(?:i|we)\s+(?!(?:am|'m|was|is)\b)[^.;!?,]*?\band\s+"
                       r"(?:then\s+|now\s+|also\s+|just\s+|recently\s+|finally\s+)?$", re.I)
_AND_I, _USED_TO = re.compile(r"\band\s+i\b", re.I), re.compile(r"\bused\s+to\s+$", re.I)
_SPACES, _NON_WORD = re.compile(r"\s+"), re.compile(r"\W+")
_FORGET = re.compile(r"(?:n't|\bnot|\bnever)\s+forget\b", re.I)  # "don't forget my peanut allergy" is no negation
_PAST = {"lives_in": "lived_in", "works_at": "worked_at"}  # "I used to live in Paris" is not where I live
# "like" after these is a preposition ("Sounds like fun", "stuff, like my bowl", "feels like home")
_LIKE_AS = re.compile(r"(?:,|\b(?:sounds?|sounded|looks?|looked|seems?|seemed|feels?|felt|smells?|tastes?|more|"
                      r"something|anything|nothing|stuff|things|kinda|exactly|lot))\s*$", re.I)
_CLAUSE_OBJECT = re.compile(r"\s*(?:how|what|why|when|where|who|whether|if|it's|it\s+is)\b", re.I)
_BASE_FORMS = frozenset("love like enjoy adore prefer hate dislike detest loathe".split())
_HELPER = re.compile(r"\b(?:do|does|did|don't|doesn't|didn't|will|would|can|could|should|might|must|to)\b|'ll|'d", re.I)


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


def _tail(sentence: str, start: int, size: int = 80) -> str:
    """The (whole) words of the ``size`` characters before ``start``: a subject sits right before its verb."""
    if start <= size:
        return sentence[:start]
    pre = sentence[start - size:start]
    return pre[pre.find(" ") + 1:] if " " in pre else ""


def _subject(sentence: str, start: int) -> Subject | None:
    pre = _tail(sentence, start)
    m = _SUBJECT.search(pre)
    if m is None:  # "Allergic to nuts." has an implicit "I"; "I quit my job and started at Acme" shares it
        if not _PAUSE.split(pre)[-1].strip() or _SHARED_I.search(sentence[:start]):
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
        owner = _possessor(_tail(sentence, m.start()) + " ".join(words[:keep]) + " ")
        before += " ".join(words[:keep])
    value = clean_value(raw, kind)
    low = value.lower()
    head = low.split()[0] if low.split() else ""
    if not head or low in _GENERIC or head in _GENERIC:
        return []
    if kind in _NAMED_OBJECT and (head in COMMON or low in NATIONALITIES):
        return []
    groups = m.groupdict()
    rel = _NON_WORD.sub("_", (groups.get("rel") or groups.get("thing") or "").lower()).strip("_")
    if kind == "animal" and rel.endswith("s") and rel[:-1] in _PET_WORDS + ["retriever", "terrier", "poodle"]:
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
        who = _possessor(_tail(sentence, m.start()))
    else:
        who = _subject(sentence, m.start())
    if who is None or (pred in ("likes", "dislikes") and not _verb_use(sentence, m)):
        return []
    window = before.split(",")[-1]
    negated = _NEG.search(_FORGET.sub("", window)) is not None and pred not in ("avoids", "dislikes")
    return [Hit(m.start(), who, p, value, a, kind, cat, negated, {"species": rel} if kind == "animal" else {})]


def _verb_use(sentence: str, m: re.Match[str]) -> bool:
    """Whether a preference's trigger is a verb of its subject: not "Sounds like fun", "stuff, like my bowl"
    (prepositions), "Unconditional love is", "Maria like" (a name takes "loves" but "Maria does love")."""
    verb = m.group(0).split()[0].casefold()
    if verb == "like" and _LIKE_AS.search(sentence[:m.start()]):
        return False
    if verb not in _BASE_FORMS:
        return True
    pre = _tail(sentence, m.start())
    found = _SUBJECT.search(pre)
    if found is None or not found.group("name") or found.group("rel") or _AND_I.search(found.group(0)):
        return True
    return bool(_HELPER.search(found.group(0))) or pre[:found.start()].rstrip().casefold().endswith(" and")


def _possessor(pre: str) -> Subject | None:
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
    return [(n, t) for n, t in found if n.split()[0].lower() not in COMMON]
