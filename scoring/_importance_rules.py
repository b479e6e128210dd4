"""Word lists, cue rules and their trigger index for :mod:`scoring.importance`.

Private: the tables here may change. Each cue rule (``_RULES``) is tried only where one of its
trigger words starts (:data:`TRIGGERS`), which keeps scoring fast.

    >>> sorted(name for name, _ in TRIGGERS["allergic", None])
    ['allergy']
"""

from __future__ import annotations

import itertools
import re

__all__ = ["ABBREV", "AUX", "BOUNDARY", "CAPWORD", "CHECKED", "COMMON", "FIRST", "MEMREQ", "MEM_KEYS",
           "NAMED_START", "NEG", "NEG_WORDS", "PRONOUNS", "PUNCT", "QWORDS", "REMINDER", "RULE_INFO", "SMALLTALK",
           "SPLIT", "SUBORD", "TOKEN", "TRIGGERS", "WH", "check", "hedged"]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


COMMON = _words("""a an the and or but so not no yes ok okay sure fine good great bad well very really just also
still here there back home now then sorry glad happy sad tired hungry thirsty busy ready done new old free sick
ill bored excited nervous scared afraid worried confused lost alone cold hot warm late early going trying looking
getting doing thinking coming leaving working feeling being having talking about with from for into onto in on at
to of by as if than that this these those it its what which who whom whose when where why how all any some every
each both either neither few many much more most other such only own same too can will would should could might
must may shall do does did is are was were am be been i me my mine we us our you your he him his she her they
them their there's it's that's what's let's yesterday today tomorrow tonight monday tuesday wednesday thursday
friday saturday sunday january february march april june july august september october november december hi
hello hey thanks thank please maybe probably perhaps actually basically literally totally definitely honestly
pretty quite kind sort like love hate want need know think guess hope wish wonder mean interested curious unhappy
stressed alright right wrong correct unsure certain aware available finished almost already always never
sometimes often usually currently finally anyway grateful thankful impressed surprised shocked single married
divorced engaged vegan vegetarian allergic pregnant diabetic retired unemployed student fan big huge little small
out off up down over under again after before because since while until though although yet call name""")
SMALLTALK = _words("""hi hello hey heya hiya yo howdy sup thanks thank you thx ty cheers ok okay k kk cool nice
great awesome sure yes yeah yep yup no nope nah lol lmao haha hahaha hehe good morning evening night afternoon day
bye goodbye see ya later cya welcome np problem sounds perfect alright right got it gotcha wow oh ah ahh hmm um uh
please sorry fine well how are doing what's whats up is going that's thats so much a lot very true agreed exactly
interesting indeed same here too lovely amazing bro dude man and all the best take care again appreciate it's""")
FIRST = _words("i i'm im i've i'd i'll me my mine myself we we're we've our ours us")
PRONOUNS = _words("he she they his her their him them he's she's they're")
QWORDS = _words("""what what's whats where where's when who who's whom whose why how how's which can could would
will should shall do does did is isn't are aren't was were am may have has any wanna help write tell give show
explain translate summarize summarise generate draft make create list find search compose fix rewrite suggest
recommend book send check convert calculate describe define""")
WH = _words("what where when who whom whose why how which")
AUX = _words("is are was were do does did can could would should will shall may might has have am 's")
_HEDGE = re.compile(r"\b(?:maybe|perhaps|probably|possibly|might|i\s+think|i\s+guess|i\s+suppose|i\s+believe|"
                    r"not\s+sure|kind\s+of|sort\s+of)\b", re.I)
# Each hedge holds one of these words; under re.I a few non-ASCII letters match ASCII ones (_FOLD spells them).
_HEDGE_GATE = re.compile("maybe|perhaps|probably|possibly|might|think|guess|suppose|believe|sure|kind|sort")
_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})
_CLAUSE = re.compile(r"[,;:]|\s[-–—]+\s|\b(?:but|and|so)\b", re.I)
_WORD = re.compile(r"[\w']+")
NEG_WORDS = _words("not no never neither nor without cannot")
SUBORD = _words("because since as cause given that")
BOUNDARY = _words(", ; : but and")
PUNCT = _words(", ; : ?")
_GENERIC_OBJ = _words("it this that you your yours these those them what how when the")
MEM_KEYS = ("remember", "note", "mind", "forget", "record", "know", "fyi", "reference")
MEMREQ = re.compile(r"\b(?:remember|note|keep\s+in\s+mind|don't\s+forget|make\s+a\s+note|for\s+the\s+record|"
                     r"just\s+so\s+you\s+know|fyi|for\s+future\s+reference)\b")
# "Remember my allergy.", "Don't forget that!": a reminder of something already said, with nothing new in it
# (at most one word after the possessive: "don't forget my peanut allergy" names the allergen, so it is news).
REMINDER = re.compile(
    r"^\W*(?:(?:please|pls|plz|also|and|oh|so|but|just|again|ok|okay|and\s+also)\W+)*(?:please\s+)?"
    r"(?:remember|recall|(?:don't|do\s+not|never)\s+forget|(?:keep|bear)\s+in\s+mind|mind|note|take\s+note\s+of|"
    r"think\s+(?:of|about)|consider)\s+(?:about\s+)?(?:(?:my|our|the|his|her|their)\s+[\w'-]+|that|this|"
    r"it|these|those|what\s+i\s+(?:said|told\s+you|mentioned)(?:\s+(?:before|earlier))?)"
    r"(?:\W+(?:please|pls|too|as\s+well|also|ok|okay|right|thanks|again|when\s+you\s+(?:suggest|plan|cook)\w*))*"
    r"\W*$", re.I)
NEG = re.compile(r"\b(?:not|no|never|no\s+longer|neither|nor|without|cannot)\b|n't\b")
NAMED_START = re.compile(r"\W*(?!(?:The|This|That|These|Those|It|There|Here|What|Some|Most|Many|All|Every)\b)"
                          r"[A-Z][a-z'-]+(?:'s|\s+(?:is|was|has|had|lives|works|loves|likes|hates|moved|got|"
                          r"just|studies|said|told|wants|can't|doesn't|and|will|recently))\b")
_MY_BEFORE = re.compile(r"\b(?:my|our|i\s+have|i've\s+got|i\s+got)\s+(?:(?:an?|my|the)\s+)?(?:[\w']+\s+)?\Z", re.I)
CAPWORD = re.compile(r"\b[A-Z][a-z'-]+")
TOKEN = re.compile(r"[a-z0-9][a-z0-9']*|[,;:?]")
ABBREV = re.compile(r"\b(?:mr|mrs|ms|dr|st|prof|jr|sr|vs|etc|e\.g|i\.e|inc|ltd|co|no|approx)\.$", re.I)
SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+")
_NEXT_WORD = re.compile(r"\s*([\w'-]+)")


def _alt(words: str) -> str:
    """A regex alternation of space-separated words."""
    return "(?:" + "|".join(words.split()) + ")"


_REL_WORDS = """mom mum mother dad father parent parents sister brother sibling siblings wife husband partner spouse
girlfriend boyfriend fiance fiancee fiancé fiancée son sons daughter daughters kid kids children child baby grandma
grandpa grandmother grandfather grandson granddaughter grandparents grandkids grandchildren aunt uncle cousin niece
nephew friend friends roommate flatmate boss manager coworker colleague neighbor neighbour therapist mentor ex"""
_REL = r"(?:(?:best\s+)?friends?|(?:mother|father|sister|brother)-in-law|in-laws|" + _alt(_REL_WORDS)[3:]
_REL_ADJ = r"(?:(?:best|older|younger|little|big|twin|step|late|baby|new)\s+)?"
_MY_REL = "my:" + "|".join(_REL_WORDS.split() + "best older younger little big twin step late new".split())
_JOB = r"(?:police\s+officer|social\s+worker|sales\s+rep|" + _alt("""engineer developer programmer designer teacher
professor lecturer nurse doctor physician surgeon dentist lawyer attorney accountant architect scientist researcher
analyst consultant manager director chef cook waiter waitress bartender barista pilot firefighter soldier farmer
writer author journalist editor artist musician photographer student intern mechanic electrician plumber carpenter
pharmacist therapist psychologist vet veterinarian librarian cashier entrepreneur founder ceo cto freelancer
translator paramedic driver clerk technician actor actress dancer coach tutor banker economist physicist chemist
biologist mathematician secretary receptionist caregiver midwife hairdresser baker contractor realtor recruiter
marketer salesperson""")[3:]
_IM = r"(?:i'?m|i\s+am|we'?re|we\s+are)"
_LANGUAGES = _alt("""english spanish french german portuguese italian mandarin chinese japanese korean arabic russian
hindi dutch polish greek turkish swedish""")
_CONDITIONS = """colorblind colourblind diabetes diabetic asthma asthmatic pregnant pregnancy diagnosed epilepsy
epileptic adhd autism autistic dyslexia dyslexic migraine migraines hypertension cancer chemo chemotherapy arthritis
insulin inhaler disability disabilities disabled wheelchair depression bipolar ptsd ocd surgery deaf crohn's ibs
lupus anemia anaemia anemic"""
_EVENTS = """exam exams test tests appointment appointments meeting meetings interview interviews flight flights
deadline deadlines wedding surgery presentation checkup check dentist class lesson lessons game concert party trip
vacation holiday shift due recital reservation graduation conference match race marathon"""
_PETS = r"""dogs? cats? pupp(?:y|ies) kittens? pets? birds? parrots? rabbits? bunn(?:y|ies) hamsters? guinea\s+pigs?
fish horses? snakes? lizards? turtles? cars? trucks? bikes? motorcycles? houses? apartments? condos? boats? teslas?
piano guitar retrievers? labradors? poodles? terriers? beagles?"""
_HAVE = "have|own|got|bought|drive|ride|adopted|rescued|just"
_DID = "just|recently|finally|graduated|had|gave|retired|passed|failed|broke|adopted|bought|started|lost|won|" \
       "launched|published|got"
_MONTHS = " ".join(f"{m}:#" for m in """jan january feb february march april may june july aug august sep sept
september oct october nov november dec december""".split())
_DAYS = " ".join(f"{w}:{d}day" for w in "on next this every by until coming".split()
                 for d in "mon tues wednes thurs fri satur sun".split())

# (rule, category, offset from the category weight, negation mode, triggers, pattern). The pattern is matched
# on the lower-cased sentence only where a trigger starts: "word", or "word:next1|next2" (that word followed by
# one of those); "IM" stands for i'm / i am / we're / we are, "#" for a number. Negation modes: "pre" looks
# just before the cue in its clause, "any" also inside it, "none" never (the cue itself is negative).
_RULES: tuple[tuple[str, str, float, str, str, str], ...] = (
    ("name_is", "identity", 0.0, "none", "my:name|name's|full|first|real|last|nickname",
     r"my\s+(?:full\s+|first\s+|real\s+|last\s+|nick)?name\s*(?:'s|is)\s+"),
    ("im_name", "identity", 0.0, "none", "IM call:me they:call", r"(?:i'?m|i\s+am|call\s+me|they\s+call\s+me)\s+(?=\w)"),
    ("age", "identity", -0.05, "pre", "IM:# i:turned|just",
     r"(?:i'?m|i\s+am)\s+\d{1,3}(?:\s*(?:years?[\s-]*old|yo|y/o)\b|\s*(?:[.!,;]|$))|i\s+(?:just\s+)?turned\s+\d{1,3}\b"),
    ("born", "identity", -0.05, "pre", "i:was|identify|speak my:pronouns|nationality|native|mother|ethnicity|religion",
     r"i\s+was\s+born\b|my\s+(?:pronouns|nationality|native\s+language|mother\s+tongue|ethnicity|religion)\b|"
     r"i\s+identify\s+as\b|i\s+speak\s+(?:fluent\s+|some\s+)?" + _LANGUAGES + r"\b"),
    ("allergy", "health", 0.0, "pre", "allergy allergies allergic allergen allergens intolerant intolerance "
     "anaphylaxis anaphylactic epipen epi celiac coeliac", r"(?:allerg|intoleran|anaphyla|epi-?pen|c(?:o)?eliac)"),
    ("condition", "health", 0.0, "pre", _CONDITIONS + " blood hearing heart chronic", _alt(_CONDITIONS)[:-1]
     + r"|blood\s+(?:pressure|type)|hearing\s+aid|heart\s+condition|chronic\s+\w+)\b"),
    ("medication", "health", -0.05, "pre", "medication medications meds prescribed prescription antidepressants i:take",
     r"(?:medications?|meds|prescribed|prescription|antidepressants|i\s+take\s+\w+\s+(?:daily|every|for|twice|each))\b"),
    ("diet", "health", 0.0, "any", "IM:not|a|an|strictly|fully|now|mostly|vegan|vegetarian|pescatarian|keto|kosher|"
     "halal|lactose|gluten|dairy|teetotal|sober|paleo on:a follow:a i've:been i:have",
     r"(?:i'?m|i\s+am|we'?re|we\s+are|i've\s+been|i\s+have\s+been)\s+(?:not\s+)?(?:a\s+|an\s+|strictly\s+|fully\s+|"
     r"now\s+|mostly\s+)?(?:vegan|vegetarian|pescatarian|keto|kosher|halal|lactose\W?intolerant|gluten\W?free|"
     r"dairy\W?free|teetotal|sober|paleo)\b|(?:on|follow)\s+a\s+[\w-]+\s+diet\b"),
    ("cant_eat", "health", 0.0, "none", "i:can't|cannot|can|shouldn't|mustn't|must|don't|do|never|avoid",
     r"i\s+(?:(?:can't|cannot|can\s+not|shouldn't|mustn't|must\s+not)\s+(?:eat|drink|have|tolerate|digest|consume)|"
     r"(?:don't|do\s+not|never)\s+(?:eat|drink|consume))(?:\s+(?!(?:it|this|that|much|anything|any|a|an|the|to|too|"
     r"you|there|here|now|after|before|late|well|right)\b)\w|\s*(?:[.!,;]|$))|i\s+avoid\s+(?:eating\s+)?(?:gluten|"
     r"dairy|meat|pork|beef|sugar|alcohol|caffeine|nuts|shellfish|eggs|soy|lactose)"),
    ("rel_named", "relationship", 0.05, "pre", _MY_REL,
     r"my\s+" + _REL_ADJ + _REL + r"(?:'s\s+name\s+is|,|\s+named|\s+called)?\s+(?=\w)"),
    ("rel_status", "relationship", 0.05, "any", "IM:not|now|happily|recently|newly|still|getting|married|single|"
     "divorced|engaged|widowed|separated|dating|in|a i:have got:married|engaged|divorced getting:married|engaged|"
     "divorced", _IM + r"\s+(?:not\s+)?(?:(?:now|happily|recently|newly|still|getting)\s+)?(?:married|single|"
     r"divorced|engaged|widowed|separated|dating|in\s+a\s+relationship|a\s+(?:single\s+)?(?:mom|mum|dad|parent|"
     r"mother|father|grandparent|widow(?:er)?))\b|i\s+have\s+(?:a|an|one|two|three|four|five|six|\d+)\s+(?:kids?|"
     r"children|sons?|daughters?|sisters?|brothers?|siblings|grandchildren|grandkids|twins)\b|(?:got|getting)\s+"
     r"(?:married|engaged|divorced)\b"),
    ("is_my_rel", "relationship", 0.0, "pre", "is:my", r"is\s+my\s+" + _REL_ADJ + _REL + r"\b"),
    ("rel_pred", "relationship", -0.08, "pre", _MY_REL, r"my\s+(?:[\w-]+\s+)?" + _REL + r"(?:'s)?\s+(?:\w+\s+)?(?:is|"
     r"was|has|lives|works|loves|likes|hates|studies|just|recently|got|moved|turned|wants|plays|owns|can't|cannot|"
     r"doesn't)\b"),
    ("rel_mention", "relationship", -0.25, "pre", _MY_REL, r"my\s+(?:[\w-]+\s+)?" + _REL + r"\b"),
    ("residence", "location", 0.0, "pre", "live lives living lived reside resides residing based settled located moved "
     "moving relocated relocating relocate move grew hometown my:address|home", r"(?:live|lives|living|lived|reside|"
     r"resides|residing|based|settled|located)\s+(?:in|at|near|outside|just\s+outside|close\s+to)\b|(?:moved|moving|"
     r"relocat\w+|move)\s+(?:back\s+)?(?:to|from|here|there|into|abroad)\b|grew\s+up\b|hometown\b|my\s+(?:home\s+)?"
     r"address\b"),
    ("from_place", "location", 0.0, "pre", "IM:from|originally is:from|originally are:from|originally "
     "she's:from|originally he's:from|originally",
     r"(?:i'?m|i\s+am|we'?re|we\s+are|she's|he's|is|are)\s+(?:originally\s+)?from\s+(?=\w)"),
    ("in_place", "location", -0.2, "pre", "IM:currently|now|in|at",
     _IM + r"\s+(?:currently\s+|now\s+)?(?:in|at)\s+(?=\w)"),
    ("job_title", "work", 0.0, "any", "IM:not|a|an is:not|a|an she's:not|a|an he's:not|a|an was:not|a|an work:as",
     r"(?:i'?m|i\s+am|is|she's|he's|was|work\s+as)\s+(?:not\s+)?(?:a|an)\s+(?:[\w-]+\s+){0,2}?" + _JOB + r"s?\b"),
    ("work", "work", 0.0, "pre", "work works working worked my:job|career|employer|company|workplace|profession|"
     "occupation|salary|shift|startup|business|major employed:at|by|as hired:at|by|as IM:self|freelance|freelancing|"
     "freelancer|unemployed|retired|between i:study|teach|major|graduated studying:at|in majoring:at|in for:a "
     "started got landed quit lost left accepted began beginning starting", r"(?:work|works|working|worked)\s+"
     r"(?:at|for|as|in|from\s+home|"
     r"remotely|part[\s-]time|full[\s-]time|night\s+shifts?|freelance)\b|my\s+(?:job|career|employer|company|"
     r"workplace|profession|occupation|salary|shift|startup|business|major)\b|(?:employed|hired)\s+(?:at|by|as)\b|"
     + _IM + r"\s+(?:self[\s-]employed|freelanc\w+|unemployed|retired|between\s+jobs)\b|i\s+(?:study|teach|major|"
     r"graduated)\b|(?:studying|majoring)\s+(?:at|in)\b|for\s+a\s+living\b|(?:started|got|landed|quit|lost|left|"
     r"accepted)\s+(?:a\s+|my\s+|the\s+|this\s+)?(?:new\s+)?(?:job|position|role)\b|(?:started|starting|began|"
     r"beginning)\s+(?:work(?:ing)?\s+(?:at|for)|as\s+(?:a|an))\s"),
    ("likes", "preference", 0.02, "any", "i:really|also|absolutely|just|totally|honestly|genuinely|truly|do|kinda|"
     "still|especially|don't|never|no|particularly|love|like|enjoy|adore|prefer|hate|dislike|detest|loathe|despise|"
     "can't|cannot", r"i\s+(?:(?:really|also|absolutely|just|totally|honestly|genuinely|truly|do|kinda|still|"
     r"especially|don't|do\s+not|never|no\s+longer|particularly)\s+)*(?:love|like|enjoy|adore|prefer|hate|dislike|"
     r"detest|loathe|despise)\b|i\s+(?:can't|cannot)\s+stand\b"),
    ("favorite", "preference", 0.04, "pre", "fav favorite favourite fave IM:a|huge|big|massive|great|fan|really|so|"
     "into|obsessed|passionate|addicted|die|lifelong not:a my:hobby|hobbies|passion|all|fav|favorite|favourite|fave "
     "in:my", r"fav(?:ou?rite|e)\s+\w+|" + _IM + r"\s+(?:a\s+)?(?:(?:huge|big|massive|great|die-hard|lifelong)\s+)?"
     r"(?:fan\s+of\b|(?:[\w-]+\s+){1,2}fan\b)|" + _IM + r"\s+(?:really\s+|so\s+)?(?:into|obsessed\s+with|"
     r"passionate\s+about|addicted\s+to)\b|not\s+a\s+fan\s+of\b|my\s+(?:hobby|hobbies|passion)\b|in\s+my\s+(?:free|"
     r"spare)\s+time\b|my\s+(?:all[\s-]time\s+)?fav"),
    ("fear", "preference", -0.03, "pre", "IM:deathly|really|very|so|afraid|scared|terrified|frightened|also phobia",
     _IM + r"\s+(?:\w+\s+)?(?:afraid|scared|terrified|frightened)\s+of\b|phobia\b"),
    ("birthday", "schedule", 0.05, "pre", "birthday my:birthday|bday|anniversary|wedding|# our:birthday|anniversary|"
     "wedding|#", r"(?:my|our)\s+(?:\w+\s+)?(?:birthday|bday|anniversary)\b|birthday\s+is\b"),
    ("remind", "schedule", 0.05, "pre", "remind set:a i:need|have",
     r"remind\s+me\b|set\s+a\s+reminder\b|i\s+(?:need|have)\s+to\s+remember\b"),
    ("sched_event", "schedule", -0.15, "pre", _EVENTS, _alt(_EVENTS) + r"\b"),
    ("goal", "goal", 0.02, "any", "training preparing saving studying applying IM:learning|teaching|trying "
     "my:goal|goals|dream|dreams|ambition|resolution|biggest|main|new|big|career|fitness|ultimate i'd:love "
     "i:would|want|plan|hope|intend|aspire|aim|dream", r"(?:training|preparing|saving(?:\s+up)?|studying|applying)"
     r"\s+for\b|my\s+(?:\w+\s+)?(?:goal|dream|ambition|resolution)s?\b|i(?:'d\s+love|\s+would\s+love|\s+want|"
     r"\s+plan|\s+hope|\s+intend|\s+aspire|\s+aim|\s+dream)\s+to\s+(?:become|be\s+(?:a|an|able)|learn|lose|gain|"
     r"run|finish|start|quit|stop|save|buy|move|travel|visit|improve|master|build|launch|open|retire|pass|complete|"
     r"get\s+(?:better|fit|a\s+job|into|promoted|married)|write\s+a\s+(?:book|novel))\b|" + _IM + r"\s+(?:learning|"
     r"teaching\s+myself|trying\s+to\s+(?:lose|quit|learn|get|stop|save|become|improve))\b"),
    ("attempt", "goal", -0.16, "pre", "IM:trying|hoping|planning|aiming|going",
     _IM + r"\s+(?:trying|hoping|planning|aiming|going\s+to\s+try)\s+to\b"),
    ("pet", "possession", 0.0, "pre", f"i:{_HAVE} we:{_HAVE} my:dog|dogs|cat|cats|puppy|kitten|pet|pets|parrot|"
     "rabbit|hamster|horse", r"(?:i|we)\s+(?:have|own|got|bought|drive|ride|adopted|rescued|just\s+got|just\s+bought|"
     r"just\s+adopted)\s+(?:a|an|two|three|four|\d+)\s+(?:[\w-]+\s+){0,2}?" + _alt(_PETS) + r"\b|my\s+(?:dog|cat|"
     r"puppy|kitten|pet|parrot|rabbit|hamster|horse)s?\b|(?:i|we)\s+have\s+(?:a|an)\s+(?:[\w-]+\s+){0,3}?(?:called|"
     r"named)\s+\w|(?:i|we)\s+(?:drive|ride|own)\s+(?:a|an)\s+\w"),
    ("my_thing", "possession", -0.2, "pre", "my:car|bike|house|apartment|flat|laptop|phone",
     r"my\s+(?:car|bike|house|apartment|flat|laptop|phone)\b"),
    ("life_event", "event", 0.05, "pre", f"i:{_DID} we:{_DID} got:promoted|fired|laid|hired|accepted|a "
     "getting:promoted|fired|laid|hired|accepted|a passed:away died funeral miscarriage IM:expecting",
     r"(?:got|getting)\s+(?:promoted|fired|laid\s+off|hired|accepted|a\s+promotion|a\s+raise)\b|(?:i|we)\s+(?:just\s+|"
     r"recently\s+|finally\s+)?(?:graduated|had\s+a\s+baby|gave\s+birth|retired|passed\s+(?:my|the)|failed\s+"
     r"(?:my|the)|broke\s+up|broke\s+my|adopted|bought\s+a\s+(?:house|home|car|flat)|started\s+(?:a|my)\s+(?:new\s+)?"
     r"(?:job|business|company)|got\s+my\s+(?:[\w']+\s+)?(?:license|licence|degree|diploma|visa|citizenship|phd|"
     r"masters|green\s+card|certification)|lost\s+my|won\s+(?:a|the)|launched|published|got\s+into)\b|passed\s+"
     r"away\b|(?:died|funeral|miscarriage)\b|" + _IM + r"\s+expecting\b"),
    ("travel", "event", -0.15, "pre", "visiting visited visit trip travel traveling travelling traveled travelled "
     "flying flew vacation holiday", r"(?:visiting|visited|visit|trip\s+to|travel(?:l?ing|l?ed)?\s+to|flying\s+to|"
     r"flew\s+to|vacation\s+in|holiday\s+in)\b"),
    ("went_place", "event", -0.15, "pre", "going:to went:to", r"(?:going|went)\s+to\s+(?=\w)"),
    ("routine", "schedule", -0.15, "pre", "i:usually|always|normally|typically|often|regularly|generally",
     r"i\s+(?:usually|always|normally|typically|often|regularly|generally)\s+(?!(?:forget|think|feel|wonder|get|"
     r"say|mean|have\s+to)\b)\w"),
    ("time", "schedule", -0.3, "pre", "tomorrow tonight # next:week|month|year|weekend this:weekend|evening|afternoon "
     f"every:day|morning|evening|night|week at:# by:# before:# after:# around:# {_DAYS} {_MONTHS}",
     r"(?:on|next|this|every|by|until|coming)\s+(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|(?:tomorrow|tonight|"
     r"next\s+(?:week|month|year|weekend)|this\s+(?:weekend|evening|afternoon)|every\s+(?:day|morning|evening|night|"
     r"week))\b|(?:at|by|before|after|around)\s+\d{1,2}(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.)|(?:jan(?:uary)?|"
     r"feb(?:ruary)?|march|april|may|june|july|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|"
     r"dec(?:ember)?)\.?\s+\d{1,2}(?:st|nd|rd|th)?\b|\d{1,2}(?:st|nd|rd|th)?\s+of\s+(?:jan|feb|mar|apr|may|jun|jul|"
     r"aug|sep|oct|nov|dec)[a-z]*\b|\d{4}-\d\d-\d\d\b"),
)
RULE_INFO = {name: (cat, off, neg) for name, cat, off, neg, _, _ in _RULES}
TRIGGERS: dict[tuple[str, str | None], tuple[tuple[str, re.Pattern[str]], ...]] = {}
for _name, _c, _o, _n, _spec, _pat in _RULES:
    _rx = re.compile(_pat)
    for _item in _spec.split():
        _head, _, _tails = _item.partition(":")
        for _h in ("i'm", "we're") if _head == "IM" else (_head,):
            for _t in _tails.split("|") if _tails else (None,):
                TRIGGERS[_h, _t] = (*TRIGGERS.get((_h, _t), ()), (_name, _rx))
_CAP_RULES = frozenset({"rel_named", "from_place", "in_place", "went_place"})
CHECKED = _CAP_RULES | {"name_is", "im_name", "sched_event", "likes"}


def check(rule: str, s: str, m: re.Match[str], shouted: bool | None = None) -> tuple[float, str] | None:
    """Rule-specific validation of a cue: ``(multiplier, note)``, or None to drop the cue. ``shouted``:
    whether ``s`` is all capitals (``s.isupper()``, which the caller of many cues computes once)."""
    if shouted is None:
        shouted = s.isupper()
    nxt = _NEXT_WORD.match(s, m.end())
    word = nxt.group(1) if nxt else ""
    low = word.lower()
    if rule == "name_is":
        if low in ("not", "isn't", "none", "no", "irrelevant", "unimportant"):
            return 0.25, "negated name"
        if not word or low in COMMON:
            return None
    elif rule in _CAP_RULES or rule == "im_name":  # a name must follow: capitalised, not a common word
        if not word or low in COMMON or shouted or (rule == "im_name" and low.endswith("ing")):
            return None
        if not word[0].isupper() and not m.group(0).startswith(("call", "they")):
            return None
    elif rule == "sched_event" and not _my_before(s, m.start()):
        return None
    elif rule == "likes" and (low in _GENERIC_OBJ or not word):
        return 0.45, "generic object"
    return 1.0, ""


def _my_before(s: str, at: int) -> bool:
    """Does :data:`_MY_BEFORE` match the text before ``at`` ("my exam", "I have a big interview")? Each of
    its matches ends with whitespace and spans at most four words, so only those four are searched."""
    if not at or not s[at - 1].isspace():
        return False
    start = at
    for _ in range(4):  # back over four runs of whitespace and the words before them
        while start and s[start - 1].isspace():
            start -= 1
        while start and not s[start - 1].isspace():
            start -= 1
    return _MY_BEFORE.search(s, start, at) is not None


def hedged(text: str, at: int = 0) -> bool:
    """Does a hedge ("maybe", "I think") qualify what is said at offset ``at``?

    A hedge in a later, long clause is about something else ("My birthday is on May 3, maybe we can
    celebrate then"); a short trailing one still qualifies the statement ("I live in Lisbon, I think").

    >>> hedged("I live in Lisbon, I think"), hedged("My birthday is May 3, maybe we can celebrate then")
    (True, False)
    """
    if _HEDGE_GATE.search((text if text.isascii() else text.translate(_FOLD)).lower()) is None:
        return False  # most sentences hold no hedge word at all
    # One pass over the clause marks after ``at`` (none overlaps a hedge), beside the hedges: ``last``
    # is the last mark before the hedge, ``mark`` the first after it; each clause is measured once.
    marks = _CLAUSE.finditer(text, at)
    last, mark = None, next(marks, None)
    measured = None
    for m in _HEDGE.finditer(text):
        while mark is not None and mark.end() <= m.start():
            last, mark = mark, next(marks, None)
        if last is None:  # no mark between ``at`` and the hedge: same clause
            return True
        clause = (last.end(), mark.start() if mark is not None else len(text))
        if clause != measured:
            if _fewer_words(text, *clause, 5):  # a short clause of its own (", I think")
                return True
            measured = clause
    return False


def _fewer_words(text: str, start: int, end: int, count: int) -> bool:
    """Are there fewer than ``count`` words in ``text[start:end]``? (Reads at most ``count`` of them.)"""
    return sum(1 for _ in itertools.islice(_WORD.finditer(text, start, end), count)) < count

