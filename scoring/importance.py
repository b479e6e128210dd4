"""Heuristic importance scoring: how worth remembering is a piece of text?

Each sentence is matched against precompiled cue rules (first-person facts about
identity, health, relationships, location, work, preferences, schedule, goals,
possessions and life events). A rule's weight is its category's base weight plus
a small offset, then adjusted for negation in the cue's clause, hedging, questions
and requests to the assistant, and whether the sentence is about the speaker
("I", "my sister"), a named third person ("Maria") or nobody in particular. The
text scores the max over its sentences plus a small bonus per extra informative
sentence. Deliberate calls: a negated health cue ("I'm not allergic to anything")
keeps ~0.72, still worth keeping; a negated name ("my name is not important") is
low; "I'm <word>" is a name only when the word is capitalised and not a common
word, so "i'm ada" in all lower case is not recognised as a name (by design).

    >>> score_importance("My name is Ada") >= 0.85
    True
    >>> score_importance("thanks!") < 0.1
    True

This module imports only :mod:`unified_memory.errors` from the project.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from unified_memory.errors import invalid, wrong_type

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

_COMMON = frozenset("""a an the and or but so not no yes ok okay sure fine good great bad well very really
just also still here there back home now then sorry glad happy sad tired hungry thirsty busy ready done
new old free sick ill bored excited nervous scared afraid worried confused lost alone cold hot warm late
early going trying looking getting doing thinking coming leaving working feeling being having talking
about with from for into onto in on at to of by as if than that this these those it its what which who
whom whose when where why how all any some every each both either neither few many much more most other
such only own same too can will would should could might must may shall do does did is are was were am
be been i me my mine we us our you your he him his she her they them their there's it's that's what's
let's yesterday today tomorrow tonight monday tuesday wednesday thursday friday saturday sunday january
february march april june july august september october november december hi hello hey thanks thank
please maybe probably perhaps actually basically literally totally definitely honestly afraid sorry
pretty quite kind sort like love hate want need know think guess hope wish wonder mean interested
curious happy unhappy stressed fine alright right wrong correct sure unsure certain aware available
finished almost about already always never sometimes often usually currently finally okay anyway
grateful thankful impressed surprised shocked worried single married divorced engaged vegan vegetarian
allergic pregnant diabetic retired unemployed student fan big huge little small home out off up down over
under again after before because since while until though although yet call name""".split())
_NEG = re.compile(r"\b(?:not|no|never|no\s+longer|neither|nor|without|cannot)\b|n't\b", re.I)
_FIRST = re.compile(r"\b(?:i|i'm|im|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|ours|us)\b", re.I)
_PRONOUN = re.compile(r"\b(?:he|she|they|his|her|their|him|them)\b", re.I)
_CAPWORD = re.compile(r"\b[A-Z][a-z'-]+")
_NAMED_START = re.compile(r"\W*(?!(?:The|This|That|These|Those|It|There|Here|What|Some|Most|Many|All|Every)\b)"
                          r"[A-Z][a-z'-]+(?:'s|\s+(?:is|was|has|had|lives|works|loves|likes|hates|moved|got|"
                          r"just|studies|said|told|wants|can't|doesn't|and|will|recently))\b")
_HEDGE = re.compile(r"\b(?:maybe|perhaps|probably|possibly|might|i\s+think|i\s+guess|i\s+suppose|"
                    r"i\s+believe|not\s+sure|kind\s+of|sort\s+of)\b", re.I)
_QSTART = re.compile(r"^\W*(?:what|what's|whats|where|where's|when|who|who's|whom|whose|why|how|how's|which|"
                     r"can|could|would|will|should|shall|do|does|did|is|isn't|are|aren't|was|were|am|may|"
                     r"have|has|any|wanna|help|write|tell\s+me|give\s+me|show\s+me|explain|translate|"
                     r"summari[sz]e|generate|draft|make|create|list|find|search|compose|fix|rewrite|suggest|"
                     r"recommend|book|send|check|convert|calculate|describe|define)\b", re.I)
_MEMREQ = re.compile(r"\b(?:remember|note|keep\s+in\s+mind|don't\s+forget|make\s+a\s+note|for\s+the\s+record|"
                     r"just\s+so\s+you\s+know|fyi|for\s+future\s+reference)\b", re.I)
_SUBORD = re.compile(r"\b(?:because|since|as|given\s+that|cause)\s*$", re.I)
_CLAUSE_CUT = re.compile(r".*(?:[,;:]|\bbut\b|\band\b)", re.I | re.S)
_SMALLTALK = frozenset("""hi hello hey heya hiya yo howdy sup thanks thank you thx ty cheers ok okay k kk
cool nice great awesome sure yes yeah yep yup no nope nah lol lmao haha hahaha hehe good morning evening
night afternoon day bye goodbye see ya later cya welcome np no problem sounds perfect alright right got it
gotcha wow oh ah ahh hmm um uh please sorry fine well how are doing what's whats up is going thats that's
so much a lot very true agreed exactly interesting indeed same here too lovely amazing bro dude man and
all the best take care again appreciate""".split())
_ABBREV = re.compile(r"(?:\b(?:mr|mrs|ms|dr|st|prof|jr|sr|vs|etc|e\.g|i\.e|inc|ltd|co|no|approx)\.)$", re.I)
_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\s*\n+\s*")
_WORDS = re.compile(r"[a-z0-9']+")

_REL = (r"(?:mom|mum|mother|dad|father|parents?|sister|brother|siblings?|wife|husband|partner|spouse|"
        r"girlfriend|boyfriend|fianc[eé]e?|sons?|daughters?|kids?|children|child|baby|grand(?:ma|pa|mother|"
        r"father|son|daughter|parents|kids|children)|aunt|uncle|cousin|niece|nephew|in-laws|"
        r"(?:mother|father|sister|brother)-in-law|(?:best\s+)?friends?|roommate|flatmate|boss|manager|"
        r"coworker|colleague|neighbou?r|therapist|mentor|ex)")
_JOB = (r"(?:engineer|developer|programmer|designer|teacher|professor|lecturer|nurse|doctor|physician|surgeon|"
        r"dentist|lawyer|attorney|accountant|architect|scientist|researcher|analyst|consultant|manager|"
        r"director|chef|cook|waiter|waitress|bartender|barista|pilot|firefighter|police\s+officer|soldier|"
        r"farmer|writer|author|journalist|editor|artist|musician|photographer|student|intern|mechanic|"
        r"electrician|plumber|carpenter|pharmacist|therapist|psychologist|vet|veterinarian|librarian|cashier|"
        r"entrepreneur|founder|ceo|cto|freelancer|translator|paramedic|driver|clerk|technician|actor|actress|"
        r"dancer|coach|tutor|banker|economist|physicist|chemist|biologist|mathematician|secretary|"
        r"receptionist|caregiver|midwife|social\s+worker|hairdresser|baker|contractor|realtor|recruiter|"
        r"marketer|salesperson|sales\s+rep)")
_IM = r"(?:i'?m|i\s+am|we'?re|we\s+are)"
_CAP = r"(?=(?-i:[A-Z]))"
_TIME = (r"\b(?:on|next|this|every|by|until|coming)\s+(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|"
         r"\b(?:tomorrow|tonight|next\s+(?:week|month|year|weekend)|this\s+(?:weekend|evening|afternoon)|"
         r"every\s+(?:day|morning|evening|night|week))\b|\b(?:at|by|before|after|around)\s+\d{1,2}"
         r"(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.)|\b(?:jan(?:uary)?|feb(?:ruary)?|march|april|may|june|july|"
         r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?\s+\d{1,2}(?:st|nd|rd|th)?"
         r"\b|\b\d{1,2}(?:st|nd|rd|th)?\s+of\s+[a-z]+\b|\b\d{4}-\d\d-\d\d\b")

# (rule, category, offset from the category weight, negation mode, pattern). Modes: "pre" looks for a
# negation just before the cue in its clause, "any" also inside the match, "none" never (the cue is negative).
_RULES: tuple[tuple[str, str, float, str, str], ...] = (
    ("name_is", "identity", 0.0, "none", r"\bmy\s+(?:full\s+|first\s+|real\s+|last\s+|nick)?name\s*(?:'s|is)\s+"),
    ("im_name", "identity", 0.0, "none", r"\b(?:i'?m|i\s+am|call\s+me|they\s+call\s+me)\s+(?=\w)"),
    ("age", "identity", -0.05, "pre", r"\b(?:i'?m|i\s+am)\s+\d{1,3}(?:\s*(?:years?[\s-]*old|yo|y/o)\b|\s*(?:[.!,;]|$))"
     r"|\bi\s+(?:just\s+)?turned\s+\d{1,3}\b"),
    ("born", "identity", -0.05, "pre", r"\bi\s+was\s+born\b|\bmy\s+(?:pronouns|nationality|native\s+language|"
     r"mother\s+tongue|ethnicity|religion)\b|\bi\s+identify\s+as\b|\bi\s+speak\s+\w+"),
    ("allergy", "health", 0.0, "any", r"\b(?:not\s+)?(?:allerg\w*|intoleran\w*|anaphyla\w*|epi-?pen|c[o]?eliac)"),
    ("condition", "health", 0.0, "pre", r"\b(?:diabet\w*|asthma\w*|pregnan\w*|diagnosed|epilep\w*|adhd|autis\w*|"
     r"dyslexi\w*|migraines?|hypertension|blood\s+pressure|cancer|chemo\w*|arthritis|insulin|inhaler|"
     r"disabilit\w*|disabled|wheelchair|chronic\s+\w+|depression|bipolar|ptsd|ocd|surgery|blood\s+type|"
     r"hearing\s+aid|deaf|heart\s+condition|crohn's|ibs|lupus|an(?:a)?emi\w*)\b"),
    ("medication", "health", -0.05, "pre", r"\b(?:medications?|meds|prescri\w+|antidepressants?|"
     r"i\s+take\s+\w+\s+(?:daily|every|for|twice|each))\b"),
    ("diet", "health", 0.0, "any", _IM + r"\s+(?:not\s+)?(?:a\s+|an\s+|strictly\s+|fully\s+|now\s+|mostly\s+)?"
     r"(?:vegan|vegetarian|pescatarian|keto|kosher|halal|lactose\W?intolerant|gluten\W?free|dairy\W?free|"
     r"teetotal|sober|paleo)\b|\b(?:on|follow)\s+a\s+[\w-]+\s+diet\b"),
    ("cant_eat", "health", 0.0, "none", r"\bi\s+(?:(?:can't|cannot|can\s+not|shouldn't|mustn't|must\s+not)\s+"
     r"(?:eat|drink|have|tolerate|digest|consume)|(?:don't|do\s+not|never)\s+(?:eat|drink|consume))"
     r"(?:\s+(?!(?:it|this|that|much|anything|any|a|an|the|to|too|you|there|here|now|after|before|late|"
     r"well|right)\b)\w|\s*(?:[.!,;]|$))|\bi\s+avoid\s+(?:eating\s+)?(?:gluten|dairy|meat|pork|beef|sugar|"
     r"alcohol|caffeine|nuts|shellfish|eggs|soy|lactose)"),
    ("rel_named", "relationship", 0.05, "pre", r"\bmy\s+(?:(?:best|older|younger|little|big|twin|step|late|"
     r"baby|new)\s+)?" + _REL + r"(?:'s\s+name\s+is|,|\s+named|\s+called)?\s+" + _CAP),
    ("rel_status", "relationship", 0.05, "any", _IM + r"\s+(?:not\s+)?(?:(?:now|happily|recently|newly|still|"
     r"getting)\s+)?(?:married|single|divorced|engaged|widowed|separated|dating|in\s+a\s+relationship|"
     r"a\s+(?:single\s+)?(?:mom|mum|dad|parent|mother|father|grandparent|widow(?:er)?))\b|\bi\s+have\s+"
     r"(?:a|an|one|two|three|four|five|six|\d+)\s+(?:kids?|children|sons?|daughters?|sisters?|brothers?|"
     r"siblings|grandchildren|grandkids|twins)\b|\b(?:got|getting)\s+(?:married|engaged|divorced)\b"),
    ("rel_pred", "relationship", -0.08, "pre", r"\bmy\s+(?:[\w-]+\s+)?" + _REL + r"(?:'s)?\s+(?:(?-i:[A-Z])\w+\s+)?"
     r"(?:is|was|has|lives|works|loves|likes|hates|studies|just|recently|got|moved|turned|wants|plays|owns|"
     r"can't|cannot|doesn't|name)\b"),
    ("rel_mention", "relationship", -0.25, "pre", r"\bmy\s+(?:[\w-]+\s+)?" + _REL + r"\b"),
    ("residence", "location", 0.0, "pre", r"\b(?:live|lives|living|reside|resides|residing|based|settled|located)"
     r"\s+(?:in|at|near|outside|just\s+outside|close\s+to)\b|\b(?:moved|moving|relocat\w+|move)\s+(?:back\s+)?"
     r"(?:to|from|here|there|into|abroad)\b|\bgrew\s+up\b|\bhometown\b|\bmy\s+(?:home\s+)?address\b|"
     r"\b(?:i'?m|i\s+am|we'?re|we\s+are|she's|he's|is|are)\s+(?:originally\s+)?from\s+" + _CAP),
    ("in_place", "location", -0.2, "pre", _IM + r"\s+(?:currently\s+|now\s+)?(?:in|at)\s+" + _CAP),
    ("job_title", "work", 0.0, "any", r"\b(?:i'?m|i\s+am|is|she's|he's|was|work\s+as)\s+(?:not\s+)?(?:a|an)\s+"
     r"(?:[\w-]+\s+){0,2}?" + _JOB + r"s?\b"),
    ("work", "work", 0.0, "pre", r"\b(?:work|works|working|worked)\s+(?:at|for|as|in|from\s+home|remotely|"
     r"part[\s-]time|full[\s-]time|night\s+shifts?|freelance)\b|\bmy\s+(?:job|career|employer|company|"
     r"workplace|profession|occupation|salary|shift|startup|business)\b|\b(?:employed|hired)\s+(?:at|by|as)\b|"
     + _IM + r"\s+(?:self[\s-]employed|freelanc\w+|unemployed|retired|between\s+jobs)\b|\bi\s+(?:study|teach|"
     r"major)\b|\b(?:studying|majoring)\s+(?:at|in)\b|\bmy\s+major\b|\bi\s+graduated\b|\bfor\s+a\s+living\b|"
     r"\b(?:started|got|landed|quit|lost|left|accepted)\s+(?:a\s+|my\s+|the\s+|this\s+)?(?:new\s+)?"
     r"(?:job|position|role)\b"),
    ("likes", "preference", 0.02, "any", r"\bi\s+(?:(?:really|also|absolutely|just|totally|honestly|genuinely|"
     r"truly|do|kinda|still|especially|don't|do\s+not|never|no\s+longer|particularly)\s+)*(?:love|like|enjoy|"
     r"adore|prefer|hate|dislike|detest|loathe|despise)\b|\bi\s+(?:can't|cannot)\s+stand\b"),
    ("favorite", "preference", 0.04, "pre", r"\bfav(?:ou?rite|e)\s+\w+|" + _IM + r"\s+(?:a\s+)?(?:(?:huge|big|"
     r"massive|great)\s+)?fan\s+of\b|" + _IM + r"\s+(?:really\s+|so\s+)?(?:into|obsessed\s+with|passionate\s+"
     r"about|addicted\s+to)\b|\bnot\s+a\s+fan\s+of\b|\bmy\s+(?:hobby|hobbies|passion)\b|\bin\s+my\s+(?:free|"
     r"spare)\s+time\b"),
    ("birthday", "schedule", 0.05, "pre", r"\b(?:my|our)\s+(?:\w+\s+)?(?:birthday|bday|anniversary)\b|"
     r"\bbirthday\s+is\b"),
    ("remind", "schedule", 0.05, "pre", r"\bremind\s+me\b|\bset\s+a\s+reminder\b|\bi\s+(?:need|have)\s+to\s+"
     r"remember\b"),
    ("sched_event", "schedule", -0.15, "pre", r"\b(?:my|our|i\s+have\s+(?:an?|my)|i've\s+got\s+(?:an?|my))\s+"
     r"(?:[\w']+\s+)?(?:exams?|tests?|appointments?|meetings?|interviews?|flights?|deadlines?|wedding|"
     r"surgery|presentation|check-?up|dentist|class|lessons?|game|concert|party|trip|vacation|holiday|shift|"
     r"due\s+date|recital|reservation|graduation|conference|match|race|marathon)\b"),
    ("goal", "goal", 0.02, "any", _IM + r"\s+(?:currently\s+|now\s+|also\s+)?(?:training|preparing|saving(?:\s+up)?|"
     r"studying|applying)\s+for\b|\bmy\s+(?:\w+\s+)?(?:goal|dream|ambition|resolution)s?\b|\bi(?:'d\s+love|"
     r"\s+would\s+love|\s+want|\s+plan|\s+hope|\s+intend|\s+aspire|\s+aim|\s+dream)\s+to\s+(?:become|"
     r"be\s+(?:a|an|able)|learn|lose|gain|run|finish|start|quit|stop|save|buy|move|travel|visit|improve|"
     r"master|build|launch|open|retire|pass|complete|get\s+(?:better|fit|a\s+job|into|promoted|married)|"
     r"write\s+a\s+(?:book|novel))\b|" + _IM + r"\s+(?:learning|teaching\s+myself|trying\s+to\s+(?:lose|quit|"
     r"learn|get|stop|save|become|improve))\b"),
    ("attempt", "goal", -0.16, "pre", _IM + r"\s+(?:trying|hoping|planning|aiming|going\s+to\s+try)\s+to\b"),
    ("pet", "possession", 0.0, "pre", r"\b(?:i|we)\s+(?:have|own|got|bought|drive|ride|adopted|rescued|just\s+got|"
     r"just\s+bought|just\s+adopted)\s+(?:a|an|two|three|four|\d+)\s+(?:[\w-]+\s+){0,2}?(?:dogs?|cats?|"
     r"pupp(?:y|ies)|kittens?|pets?|birds?|parrots?|rabbits?|bunn(?:y|ies)|hamsters?|guinea\s+pigs?|fish|"
     r"horses?|snakes?|lizards?|turtles?|cars?|trucks?|bikes?|motorcycles?|houses?|apartments?|condos?|"
     r"boats?|teslas?|piano|guitar)\b|\bmy\s+(?:dog|cat|puppy|kitten|pet|parrot|rabbit|hamster|horse)s?\b"),
    ("my_thing", "possession", -0.2, "pre", r"\bmy\s+(?:car|bike|house|apartment|flat|laptop|phone)\b"),
    ("life_event", "event", 0.05, "pre", r"\b(?:got|getting)\s+(?:promoted|fired|laid\s+off|hired|accepted|"
     r"a\s+promotion|a\s+raise)\b|\b(?:i|we)\s+(?:just\s+|recently\s+|finally\s+)?(?:graduated|had\s+a\s+baby|"
     r"gave\s+birth|retired|passed\s+(?:my|the)|failed\s+(?:my|the)|broke\s+up|broke\s+my|adopted|"
     r"bought\s+a\s+(?:house|home|car|flat)|started\s+(?:a|my)\s+(?:new\s+)?(?:job|business|company)|"
     r"lost\s+my|won\s+(?:a|the)|launched|published|got\s+into)\b|\bpassed\s+away\b|\b(?:died|funeral|"
     r"miscarriage)\b|\bi'?m\s+expecting\b"),
    ("travel", "event", -0.15, "pre", r"\b(?:visiting|visited|visit|trip\s+to|travel(?:l?ing|l?ed)?\s+to|"
     r"flying\s+to|flew\s+to|vacation\s+in|holiday\s+in|going\s+to\s+" + _CAP + r"|went\s+to\s+" + _CAP + r")"),
    ("time", "schedule", -0.3, "pre", _TIME),
)
_RULE_INFO = {name: (cat, off, neg) for name, cat, off, neg, _ in _RULES}
# One combined regex finds where cues start; each rule is then tried anchored there, so two rules that
# start at the same word ("I'm" + vegan / a name / a job) both get their chance.
_CUES = re.compile("|".join(f"(?:{pat})" for *_, pat in _RULES), re.I)
_EACH = tuple((name, re.compile(pat, re.I)) for name, _, _, _, pat in _RULES)
_NEXT_WORD = re.compile(r"\s*([\w'-]+)")
_GENERIC_OBJ = frozenset("it this that you your yours these those them what how when the".split())


def _next_word(s: str, pos: int) -> str:
    m = _NEXT_WORD.match(s, pos)
    return m.group(1) if m else ""


def _check(rule: str, s: str, m: re.Match[str]) -> tuple[float, str] | None:
    """Rule-specific validation of a cue: ``(multiplier, note)`` or None to drop the cue."""
    word = _next_word(s, m.end())
    low = word.lower()
    if rule in ("name_is", "rel_named") or (rule == "rel_pred" and m.group(0).lower().endswith("name")):
        if rule == "name_is" and low in ("not", "isn't", "none", "no", "irrelevant", "unimportant"):
            return 0.25, "negated name"
        if not word or low in _COMMON or (rule == "rel_named" and not word[0].isupper()):
            return None
    elif rule == "im_name":
        if not word or low in _COMMON or low.endswith("ing") or s.isupper():
            return None
        if not m.group(0).lower().startswith(("call", "they")) and not word[0].isupper():
            return None
    elif rule == "likes":
        if low in _GENERIC_OBJ or not word:
            return 0.45, "generic object"
    return 1.0, ""


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
    for piece in _SPLIT.split(text):
        piece = piece.strip()
        if not piece:
            continue
        if out and _ABBREV.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return out


class HeuristicImportanceScorer:
    """The default importance scorer: a callable ``str -> float`` in [0, 1].

    ``category_weights`` overrides the base weight of any category in
    :data:`CATEGORIES` (``general`` is the weight of a first-person statement with no cue);
    ``multi_sentence_bonus`` is added per extra informative sentence (at most two).

    >>> scorer = HeuristicImportanceScorer({"preference": 0.5})
    >>> scorer("I love jazz") < 0.7 <= HeuristicImportanceScorer()("I love jazz")
    True
    """

    def __init__(self, category_weights: Mapping[str, float] | None = None, *,
                 multi_sentence_bonus: float = 0.04) -> None:
        weights = dict(DEFAULT_CATEGORY_WEIGHTS)
        for key, value in (category_weights or {}).items():
            if key not in weights:
                raise invalid("category_weights", f"unknown category {key!r}; expected one of {CATEGORIES}")
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise invalid("category_weights", f"{key} must be a number in [0, 1], got {value!r}")
            weights[key] = float(value)
        if isinstance(multi_sentence_bonus, bool) or not isinstance(multi_sentence_bonus, int | float) \
                or not 0.0 <= multi_sentence_bonus <= 0.5:
            raise invalid("multi_sentence_bonus", f"must be a number in [0, 0.5], got {multi_sentence_bonus!r}")
        self.category_weights = weights
        self.multi_sentence_bonus = float(multi_sentence_bonus)

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
        text = text.replace("\u2019", "'").replace("\u2018", "'")
        parts = [self._sentence(s) for s in split_sentences(text)]
        if not parts:
            return ImportanceAssessment(0.0, None, ("empty",))
        best = max(parts, key=lambda p: p.score)
        extra = min(2, sum(1 for p in parts if p.score >= 0.6) - (best.score >= 0.6))
        if extra <= 0:
            return best
        score = min(1.0, best.score + self.multi_sentence_bonus * extra)
        return ImportanceAssessment(round(score, 4), best.category, (*best.reasons, f"+{extra} informative"))

    def _sentence(self, s: str) -> ImportanceAssessment:
        words = _WORDS.findall(s.lower())
        if len(s) < 4 or not words:
            return ImportanceAssessment(0.02, None, ("too short",))
        if all(w in _SMALLTALK for w in words):
            return ImportanceAssessment(0.03, None, ("small talk",))
        first = _FIRST.search(s) is not None
        named = first or _PRONOUN.search(s) is not None or _NAMED_START.match(s) is not None or any(
            w.lower() not in _COMMON for w in _CAPWORD.findall(s, 1))
        mem = _MEMREQ.search(s)
        mem_at = mem.start() if mem else len(s) + 1
        question_at = len(s) + 1
        if _QSTART.match(s):
            question_at = 0
        elif s.rstrip().endswith("?"):
            cut = _CLAUSE_CUT.match(s, 0, len(s.rstrip()) - 1)
            question_at = cut.end() if cut else 0
        cues: list[tuple[float, str, str]] = []  # (weight, category, reason)
        pos = 0
        found: list[tuple[str, re.Match[str]]] = []
        while (hit := _CUES.search(s, pos)) is not None:
            pos = hit.start() + 1
            found.extend((rule, m) for rule, rx in _EACH if (m := rx.match(s, hit.start())) is not None)
        for rule, m in found:
            checked = _check(rule, s, m)
            if checked is None:
                continue
            mult, note = checked
            cat, off, neg_mode = _RULE_INFO[rule]
            weight = min(1.0, max(0.0, self.category_weights[cat] + off)) * mult
            reason = f"{cat}:{rule}" + (f" ({note})" if note else "")
            window = s[max(0, m.start() - 28):m.start()]
            window = window[cut.end():] if (cut := _CLAUSE_CUT.match(window)) else window
            if neg_mode != "none" and (_NEG.search(window) or (neg_mode == "any" and _NEG.search(m.group(0)))):
                weight *= _NEGATED[cat]
                reason += " negated"
            if m.start() >= question_at and m.start() < mem_at and not _SUBORD.search(window):
                weight *= 0.35
                reason += " in question"
            cues.append((weight, cat, reason))
        reasons: list[str] = []
        if cues:
            cues.sort(reverse=True)
            score, category = cues[0][0], cues[0][1]
            reasons.extend(c[2] for c in cues[:3])
            others = [c[0] for c in cues if not c[2].startswith("schedule:time")]
            if len(others) < len(cues) and others:  # a cue plus a date/time: a commitment or plan
                score = max(score, min(others[0] + 0.15, 0.85))
        else:
            category = "general" if first else None
            score = self.category_weights["general"] if first else (0.25 if named else 0.15)
            if first and len(words) >= 6 and re.search(r"\d|\s[A-Z]", s):
                score += 0.05
            if question_at <= len(s):
                score *= 0.5
                reasons.append("question or request")
        if cues and not first:
            score *= 0.65 if named else 0.45
            reasons.append("third person" if named else "not about a person")
        if _HEDGE.search(s):
            score *= 0.9
            reasons.append("hedged")
        if mem and not s.rstrip().endswith("?") and len(words) >= 4:
            score = max(score, 0.75)
            reasons.append("explicit request to remember")
        return ImportanceAssessment(round(min(1.0, max(0.0, score)), 4), category, tuple(reasons))


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
