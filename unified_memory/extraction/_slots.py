"""Everyday attributes of the speaker: the slots that "my car is ...", "I use an iPhone",
"we have three cats" and "I'm dating Mei" fill, so that a later value supersedes them.

Private: used by :mod:`unified_memory.extraction.rules`. :func:`slot_hits` returns
:class:`~unified_memory.extraction._patterns.Hit` records about the user whose
attribute names the slot: a possessed noun ("my swim coach" -> ``swim_coach``), a
kind of device or vehicle known by its brand ("an iPhone 12" -> ``phone``), what is
counted ("three cats" -> ``number_of_cats``), a partner, a sport, an instrument, a
language being learnt. Their triples are named by the attribute (``swim_coach``) and marked
single-valued (:attr:`~tiers.records.types.ExtractedTriple.single`): a new value ends the old.

    >>> [(h.attribute, h.value) for h in slot_hits("My swim coach is Petra.")]
    [('swim_coach', 'Petra')]
    >>> [(h.attribute, h.value) for h in slot_hits("I switched to a Pixel 8 last month.")]
    [('phone', 'Pixel 8')]
    >>> [(h.attribute, h.value) for h in slot_hits("We adopted another cat, so now we have three.")]
    [('number_of_cats', 'three')]
"""

from __future__ import annotations

import re

from unified_memory.extraction._patterns import MAX_VALUE, GateChoices, Hit, Subject, clean_value, letter_runs

__all__ = ["slot_hits", "MAX_SENTENCE"]

_USER = Subject("user")
#: Longer sentences fill no slot (a statement of one attribute is short; the frames backtrack).
MAX_SENTENCE = 400
_FRAME = {"frame": "slot"}  # Hit.extra of the hits found here
# Kinds of things people own one of at a time, by brand or product line.
_BRANDS: dict[str, tuple[str, ...]] = {
    "phone": ("iphone", "pixel", "galaxy", "oneplus", "motorola", "nokia", "xperia", "huawei", "xiaomi",
              "fairphone", "android phone", "flip phone", "smartphone", "mobile phone"),
    "computer": ("macbook", "thinkpad", "xps", "chromebook", "surface", "mac mini", "imac", "mac studio",
                 "dell", "lenovo", "laptop", "desktop", "zenbook", "spectre", "framework laptop"),
    "tablet": ("ipad", "galaxy tab", "tablet"),
    "e_reader": ("kindle", "kobo", "e-reader", "ereader", "nook"),
    "headphones": ("airpods", "sony wh", "bose", "headphones", "earbuds", "sennheiser"),
    "watch": ("apple watch", "fitbit", "garmin", "withings", "smartwatch", "fitness tracker", "galaxy watch"),
    "console": ("playstation", "xbox", "nintendo switch", "steam deck", "console"),
    "camera": ("canon", "nikon", "fujifilm", "sony a7", "leica", "gopro", "camera"),
    "car": ("honda", "toyota", "ford", "tesla", "volvo", "kia", "hyundai", "mazda", "bmw", "audi", "skoda",
            "volkswagen", "vw", "golf", "peugeot", "renault", "subaru", "jeep", "chrysler", "prius", "polestar",
            "nissan", "fiat", "mercedes", "minivan", "suv", "car"),
    "milk": ("whole milk", "oat milk", "soy milk", "almond milk", "skim milk", "skimmed milk", "semi-skimmed milk",
             "lactose-free milk", "coconut milk", "rice milk"),
    "bike": ("trek", "cannondale", "brompton", "specialized", "giant", "vespa", "yamaha", "ducati",
             "harley", "bike", "bicycle", "scooter", "motorbike", "motorcycle"),
}
_KIND_OF = sorted(((w, kind) for kind, words in _BRANDS.items() for w in words), key=lambda p: -len(p[0]))
_SPORTS = frozenset("""tennis padel squash badminton golf football soccer rugby cricket basketball baseball
volleyball hockey netball table-tennis pickleball handball climbing bouldering running swimming cycling
boxing karate judo""".split())
_INSTRUMENTS = frozenset("""piano violin viola cello bass guitar drums ukulele harp flute clarinet saxophone
trumpet trombone banjo mandolin accordion keyboard synth oboe""".split())
_GAMES = frozenset("chess backgammon go bridge poker scrabble checkers mahjong".split())
_LANGUAGES = frozenset("""spanish french german italian portuguese japanese chinese mandarin cantonese korean
arabic russian dutch swedish norwegian danish finnish polish greek turkish hindi hebrew latin python rust java
javascript typescript golang kotlin swift""".split())
_PARTNERS = {"girlfriend": "partner", "boyfriend": "partner", "partner": "partner", "husband": "partner",
             "wife": "partner", "spouse": "partner", "fiance": "partner", "fiancee": "partner",
             "other half": "partner", "significant other": "partner"}
# Possessed nouns that are not an attribute of the speaker (people have many of them, or the
# rule extractor's own patterns read them: names, favourites, relatives).
_NOT_SLOTS = frozenset("""name names favourite favorite fave friend friends sister brother mom mum mother dad
father parents son daughter kids kid children child cousin aunt uncle niece nephew grandma grandpa neighbour
neighbor colleague colleagues coworker roommate flatmate doctor's allergy allergies question point idea
guess bad fault pleasure turn plan plans life problem issue mistake thing things hobby hobbies""".split())
_CANON = {"smartwatch": "watch", "cell": "phone", "mobile": "phone", "smartphone": "phone", "laptop": "computer",
          "automobile": "car", "landlady": "landlord", "gp": "gp", "beehive": "hive", "beehives": "hives",
          "home": "residence", "place": "residence", "apartment": "residence", "flat": "residence",
          "workplace": "employer", "employer": "employer", "job": "job_title", "title": "job_title",
          "motorbike": "bike", "motorbikes": "bikes", "bunnies": "rabbits", "bunny": "rabbit", "allegiance": "team",
          "boss": "manager", "colour": "color"}
_DROP_MODS = frozenset("new current only go to own real actual main usual regular present now".split())
_NUMBER = (r"(?:\d{1,3}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a\s+dozen|"
           r"thirteen|fourteen|fifteen|twenty)")
_NOUN = r"(?P<noun>[a-z][a-z-]*?(?:s|es|en|ren|ish|fish|sheep|deer)?)"
_VAL = r"(?P<obj>[^,;:!?()\"]+?)"
_VAL_END = r"(?=\s*(?:[,;:!?()\"]|(?<!\bDr)(?<!\bMr)(?<!\bMrs)(?<!\bMs)(?<!\bSt)\.(?:\s|$)|\s[-\u2013\u2014]\s|$|\s+(?:now|these\s+days|nowadays|instead|" \
           r"anymore|at\s+the\s+moment|at\s+home|at\s+the\s+(?:start|end|beginning)|over\s+the|for\s+(?:the|my|work|school)|because|but|and\s+(?:i|we|it)|" \
           r"which|who|since|last\s+\w+|this\s+\w+|in\s+the\s+\w+)\b))"

_FRAMES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((kind, re.compile(rx, re.I)) for kind, rx in (
    # my swim coach is Petra / our team lead changed from Ahmed to Sofia / my landlord changed to Mrs. Brennan
    ("poss", r"\b(?:my|our)\s+(?P<noun>(?:[\w'-]+\s+){0,2}?[\w'-]+)\s+(?:now\s+)?(?:is|are|was\s+changed\s+to|"
             r"changed\s+(?:from\s+[^,;.]+?\s+)?to|went\s+from\s+[^,;.]+?\s+to)\s+(?:now\s+)?(?:an?\s+|the\s+)?"
     + _VAL + _VAL_END),
    # Marta is my girlfriend now / Dr. Castillo is my cardiologist / Edmonton is where I live
    ("rev", r"(?:^|[;,.]\s+|\band\s+)(?P<obj>(?-i:(?:(?:Dr|Mr|Mrs|Ms|Prof)\.?\s+)?[A-Z][\w.'&-]*(?:\s+[A-Z][\w.'&-]*)"
            r"{0,3}))\s+(?:is|are)\s+(?:now\s+)?my\s+(?P<noun>(?:[\w'-]+\s+){0,2}[\w'-]+?)(?=\s+now\b|\s*[,.;!?]|$)"),
    # changed my email to ... / switched my piano lesson to Saturday mornings / switched trainers to Kofi
    ("chg", r"\b(?:changed|switched|moved)\s+(?:my|our)\s+(?P<noun>(?:[\w'-]+\s+){0,2}?[\w'-]+)\s+to\s+"
            r"(?:my\s+new\s+\w+,?\s+)?(?:an?\s+|the\s+)?" + _VAL + _VAL_END),
    ("chg", r"\b(?:switched|changed)\s+(?P<noun>trainers|coaches|doctors|dentists|teams|allegiance|careers|"
            r"jobs|gyms|banks|lessons)\s+to\s+(?:an?\s+|the\s+)?" + _VAL + _VAL_END),
    # I use an iPhone 12 / I switched to a Pixel 8 / I drive a Honda Civic / we have a Chrysler minivan
    ("thing", r"\b(?:use|using|have|has|'ve\s+got|got|own|bought|buy|drive|driving|ride|riding|lease|leasing|"
              r"wear|wearing|drink|drinking|read\s+on|game\s+on|games\s+on|play\s+games\s+on|shoot\s+(?:photos\s+)?with|"
              r"commute\s+(?:in|on)|get\s+around\s+on|cycle\s+to\s+work\s+on|switched\s+to|upgraded\s+to|"
              r"moved\s+to|changed\s+to|now\s+it's|it's\s+now|on)\s+(?:an?\s+|the\s+|my\s+)?"
              r"(?:(?:old|new|little|diesel|electric|used|rescue)\s+)?" + _VAL + _VAL_END),
    # we have three cats / I speak three languages / now run four hives / down to two motorbikes
    ("count", r"\b(?:have|has|own|keep|run|speak|do|are|there\s+are|down\s+to|up\s+to|it's)\s+(?:only\s+)?"
              r"(?P<obj>" + _NUMBER + r")\b(?!\s+of\b)(?:\s+(?:[a-z-]+\s+){0,2}?" + _NOUN + r")?(?=\s|[,.;!?]|$)"),
    ("count", r"\b(?P<obj>" + _NUMBER + r")\s+(?:left|in\s+the\s+\w+\s+now|now)\b"),
    # my running club meets at 6 pm / my shift starts at 7 am
    ("poss", r"\b(?:my|our)\s+(?P<noun>(?:[\w'-]+\s+){0,2}?[\w'-]+)\s+(?:now\s+)?(?:meets|starts|begins|runs|takes\s+place)"
             r"\s+(?:now\s+)?(?P<obj>(?:at|on|every)\s+[^,;:!?()\"]+?)" + _VAL_END),
    # I walk the dog at 5:30 / I call my mum every Sunday / I swim before work at 6:00
    ("when", r"\b(?:i|we)\s+(?P<noun>(?:[a-z]+\s+){1,4}?)(?:at|on|every)\s+(?P<obj>\d{1,2}(?::\d\d)?\s*(?:am|pm)?|"
             r"(?:mon|tues|wednes|thurs|fri|satur|sun)day\w*)\b"),
    # reach me on WhatsApp at +34 ... / write to marco@bellini.studio
    ("reach", r"\b(?:reach|call|text|contact|email|e-mail|write\s+to)\s+me\s+(?:on\s+(?P<noun>[\w-]+)\s+)?(?:at|on)\s+"
              r"(?P<obj>\+?[\w.@+-][\w.@+ -]*?\w)" + _VAL_END),
    # New number: 555-0199 / my new mobile number is +44 7700 900123 (the noun left out: a phone's)
    ("number", r"\bnew\s+(?:(?P<noun>phone|mobile|cell|work|home|landline)\s+)?(?:phone\s+)?number(?:\s+is)?\s*[:=]?\s*"
               r"(?P<obj>\+?\d[\d ().-]{3,}\d)"),
    # I support Arsenal / I root for the White Sox / I'm a Leeds United fan
    ("team", r"\b(?:support|supports|root\s+for|cheer\s+(?:for|on)|follow|a\s+fan\s+of)\s+(?:the\s+)?"
             r"(?P<obj>(?-i:[A-Z][\w.'&-]*(?:\s+[A-Z][\w.'&-]*){0,3}))"),
    ("team", r"(?:'m|\bam)\s+an?\s+(?P<obj>(?-i:[A-Z][\w.'&-]*(?:\s+[A-Z][\w.'&-]*){0,3}))\s+(?:fan|supporter)\b"),
    # I report to Yvonne
    ("boss", r"\breport(?:s|ing)?\s+to\s+(?P<obj>(?-i:[A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*)?))"),
    # I eat vegan / I eat plant-based now
    ("diet", r"\b(?:eat|eating|went|switched\s+to|changed\s+to)\s+(?:fully\s+|strictly\s+|mostly\s+)?(?P<obj>vegan|"
             r"vegetarian|plant-based|pescatarian|keto|paleo|flexitarian|raw|low-carb|gluten-free|halal|kosher)\b"),
    # I'm dating Mei / I'm with Selin / now I'm in a relationship with Carla / I'm engaged to Rafael
    ("partner", r"(?:\bi'm|\bi\s+am|\bwe're)\s+(?:now\s+)?(?:dating|seeing|with|engaged\s+to|married\s+to|"
                r"in\s+a\s+relationship\s+with|going\s+out\s+with)\s+(?:a\s+(?:woman|man|guy|girl)\s+named\s+)?"
                r"(?P<obj>(?-i:[A-Z][a-z'-]+))"),
    ("partner", r"\b(?:started\s+(?:seeing|dating)|remarried,?\s+to|dating|(?:'ve|have)\s+been\s+(?:seeing|dating))"
                r"\s+(?P<obj>(?-i:[A-Z][a-z'-]+))"),
    # I'm doing the DASH diet / now I'm following a low-sodium renal diet / I'm on the Whole30 plan
    ("diet", r"\b(?:on|follow|follows|following|doing|do|started|trying)\s+(?:a|an|the)\s+(?P<obj>[\w-]+(?:\s+[\w-]+){0,2}?)"
             r"\s+(?:diet|plan|regime|regimen)\b"),
    # I play padel / I'm learning Rust / I'm taking cello lessons / I'm studying for the CFA
    ("play", r"\b(?:play|plays|playing)\s+(?:the\s+|an?\s+)?(?:[\w-]+\s+)?(?P<obj>[a-z-]+)\b"),
    ("learn", r"\b(?:learning|learn|studying|taking)\s+(?:to\s+)?(?:the\s+|an?\s+)?(?P<obj>[\w-]+)"),
    # home is Limerick / home for me is Leeds / Edmonton is where I live / our address to Glendale
    ("home", r"\bhome(?:\s+for\s+(?:me|us))?\s+is\s+(?:now\s+)?(?:in\s+)?(?P<obj>(?-i:[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?))"),
    ("home", r"(?P<obj>(?-i:[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?))\s+is\s+where\s+(?:i|we)\s+(?:live|reside)"),
    ("home", r"\b(?:have|'ve\s+got|own|rent|renting|owning|bought|took\s+a\s+lease)\s+(?:an?\s+|the\s+)?"
             r"(?:[\w-]+\s+){0,2}?(?P<what>flat|apartment|house|cottage|condo|studio|place|home|lease|cabin)\s+in\s+"
             r"(?P<obj>(?-i:[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?))"),
    ("home", r"(?:\bi'm|\bi\s+am|\bwe're)\s+(?:now\s+)?(?:in|based\s+in)\s+(?P<obj>(?-i:[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?))"),
    # I'm a nurse at St. Brigid's / I joined Crestview Academy / a role at Greenline / I'm at the Ashby museum
    ("work", r"(?:\bi'm|\bi\s+am|\bnow\s+i'm)\s+(?:now\s+)?(?:an?\s+)?(?:[\w-]+\s+){0,3}?at\s+(?:the\s+)?"
             r"(?P<obj>(?-i:[A-Z][\w.'&-]*(?:\s+[A-Za-z][\w.'&-]*){0,3}))"),
    ("work", r"\b(?:joined|hired\s+at|hired\s+by|job\s+at|role\s+at|position\s+at|teach\s+\w+\s+at|drive\s+for|"
             r"workplace\s+is|employer\s+is)\s+(?:the\s+)?(?P<obj>(?-i:[A-Z][\w.'&-]*(?:\s+[A-Z][\w.'&-]*){0,3}))"),
))


def _canon(noun: str) -> str | None:
    words = [w for w in re.split(r"[\s-]+", noun.casefold().strip()) if w and w not in _DROP_MODS]
    if words and words[0] in ("favourite", "favorite", "fave") and len(words) > 1:
        return "favorite_" + "_".join(words[1:])  # the rule extractor's own name for it
    if not words or words in (["day"], ["week"], ["night"]) or any(w in _NOT_SLOTS for w in words) \
            or re.search(r"\s(?-i:[A-Z])", noun):
        return None  # "my sister Maria is ...": a person, not an attribute
    joined = " ".join(words)
    if joined in _PARTNERS:
        return _PARTNERS[joined]
    words[-1] = _CANON.get(words[-1], words[-1])
    return "_".join(words)


_KIND_RX = tuple((word, re.compile(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])"), kind) for word, kind in _KIND_OF)


# Brands that are also everyday words: a brand only when capitalised ("my Surface", not "a black surface").
_WORD_BRANDS = frozenset("surface galaxy pixel golf giant specialized trek canon spectre framework".split())


def _kind(value: str) -> str | None:
    """The kind of thing ``value`` is, by a brand or product word among its first three words
    ("bed using a laptop" is a bed)."""
    low = value.casefold()
    for word, rx, kind in _KIND_RX:
        # the word itself must be in the value for its pattern to match: test that first (50x faster)
        if word in low and (m := rx.search(low)) and low.count(" ", 0, m.start()) < 3 and (
                word not in _WORD_BRANDS or value[m.start()].isupper()):
            return kind
    return None


def _counted(sentence: str) -> str | None:
    """What a bare number counts: the sentence's first plural noun ("the rabbits had babies; we have seven"),
    before or after the number, else the thing there is another of ("another cat, so now we have three")."""
    plurals: list[str] = re.findall(r"\b([a-z]{3,}(?:s|es|fish|sheep|deer|geese|mice|children))\b", sentence.casefold())
    nouns = [w for w in plurals if w not in ("was", "has", "is", "does", "goes", "yes", "this", "his", "its", "plus",
                                             "less", "glass", "class", "address", "business", "sometimes", "always")]
    if nouns:
        return nouns[0]
    singular: list[str] = re.findall(r"\banother\s+([a-z]{3,})\b", sentence.casefold())
    return singular[-1] + "s" if singular else None


def _needs(*groups: str) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(g.split()) for g in groups)


# For each frame of :data:`_FRAMES`, words it cannot match without: for every group, a sentence it
# matches holds one of the group's words as a whole ``\w+`` run, so as a whole run of letters (each of these
# words is bounded by ``\b``, whitespace or punctuation in its frame). Only ASCII sentences are tested this
# way (there, ``re.I`` is ASCII case folding); any other sentence goes through every frame.
_FRAME_NEEDS: tuple[tuple[frozenset[str], ...], ...] = (
    _needs("my our", "is are was changed went"),
    _needs("my", "is are"),
    _needs("changed switched moved", "my our", "to"),
    _needs("switched changed", "to"),
    _needs("use using have has ve got own bought buy drive driving ride riding lease leasing wear wearing drink "
           "drinking read game games play shoot commute get cycle switched upgraded moved changed now it on"),
    _needs("have has own keep run speak do are there down up it"),
    _needs("left now"),
    _needs("my our", "meets starts begins runs takes"),
    _needs("i we", "at on every"),
    _needs("me", "at on"),
    _needs("new", "number"),
    _needs("support supports root cheer follow fan"),
    _needs("fan supporter"),
    _needs("report reports reporting", "to"),
    _needs("vegan vegetarian plant pescatarian keto paleo flexitarian raw low gluten halal kosher"),
    _needs("i we"),
    _needs("seeing dating remarried"),
    _needs("diet plan regime regimen"),
    _needs("play plays playing"),
    _needs("learning learn studying taking"),
    _needs("home", "is"),
    _needs("where"),
    _needs("flat apartment house cottage condo studio place home lease cabin", "in"),
    _needs("i we", "in"),
    _needs("i", "at"),
    _needs("joined hired job role position teach drive workplace employer"),
)
assert len(_FRAME_NEEDS) == len(_FRAMES)
# The same test as bits: each group of each frame gets a bit; a word holds the bits of the groups it is in,
# and a frame runs when the sentence's words hold all of its groups' bits (one dict lookup per word).
_GROUP_OF = [(n, group) for n, needs in enumerate(_FRAME_NEEDS) for group in needs]
_WORD_BITS: dict[str, int] = {}
for _bit, (_, _group) in enumerate(_GROUP_OF):
    for _w in _group:
        _WORD_BITS[_w] = _WORD_BITS.get(_w, 0) | 1 << _bit
#: Per frame, (the bits it needs, kind, pattern); a need of 0 runs the frame on every sentence.
_GATED_FRAMES: tuple[tuple[int, str, re.Pattern[str]], ...] = tuple(
    (sum(1 << b for b, (n, _) in enumerate(_GROUP_OF) if n == i), kind, rx) for i, (kind, rx) in enumerate(_FRAMES))

_NOT_A_VALUE = frozenset("""so very really too pretty quite always never still just also more most less like key
important awesome amazing great cool cute good bad nice fine okay ok it there here open closed
full doing coming getting going being paying consuming comforting inspiring special perfect beautiful lovely hard
tough easy busy crazy huge big small everything something nothing all both super""".split())
_NOT_WHEN = frozenset("the a an my our his her their to and usually always often also still now then go".split())
_WHEN = re.compile(r"(?i)(?:every\s+|on\s+)?(?:(?:mon|tues|wednes|thurs|fri|satur|sun)days?|\d{1,2}(?::\d\d)?\s*"
                   r"(?:am|pm|h)?)\b")
_FROM = re.compile(r"(?i)\bfrom\s+(?:[\w-]+\s+){0,2}$")  # "went from dating Chloe to ...": the old value
_PAST = re.compile(r"(?i)(?:\bnot\b|n't\b|\bnever\b|\bno\s+longer\b|\bused\s+to\b|\blost\b|\bquit\b)")


def slot_hits(sentence: str) -> list[Hit]:
    """The speaker's attributes in one sentence (see the module docstring). A value the
    sentence denies or puts in the past ("I don't drive the Mazda anymore", "I used to
    play bass") fills no slot."""
    if len(sentence) > MAX_SENTENCE:  # not an everyday statement; and the frames' cost grows with the square
        return []
    hits: list[Hit] = []
    bits = -1  # a non-ASCII sentence goes through every frame
    if sentence.isascii():
        bits = 0
        get = _WORD_BITS.get
        for word in letter_runs(sentence):  # each needed word, bounded in its frame, is one of these runs
            bits |= get(word, 0)
    for kind, rx in _frames(bits):  # those without a missing word they cannot match without
        for m in rx.finditer(sentence):
            hit = _hit(sentence, kind, m)
            before = sentence[:max(hit.start, m.start("obj"))] if hit is not None else ""
            clause = re.split(r"[;,]|\s[-\u2013\u2014]\s", before)[-1]
            if hit is not None and not _PAST.search(clause) and not _FROM.search(clause):
                hits.append(hit)
    known = {h.value.casefold() for h in hits if h.attribute in _BRANDS}
    hits = [h for h in hits if h.attribute in _BRANDS or h.value.casefold() not in known]  # the kind wins
    hits.sort(key=lambda h: h.start)
    return hits


#: The frames of :data:`_GATED_FRAMES` whose needs a sentence's bits hold, in order, as (kind, regex).
_frames: GateChoices[tuple[str, re.Pattern[str]]] = GateChoices(lambda: _GATED_FRAMES, lambda row: row[1:])


def _make(m: re.Match[str], attribute: str | None, value: str, category: str,
          predicate: str | None = None) -> Hit | None:
    """A slot hit (none without an attribute or a value, or with a value too long to be one); its triple's
    predicate is the attribute (unless ``predicate`` is given), single-valued."""
    if not attribute or not value or len(value) > MAX_VALUE:
        return None
    return Hit(m.start(), _USER, predicate or attribute, value, attribute, "value", category, extra=_FRAME)


def _hit(sentence: str, kind: str, m: re.Match[str]) -> Hit | None:
    raw = m.group("obj").strip()
    word = raw.casefold()
    if kind == "count":
        noun = m.groupdict().get("noun")
        if "speak" in m.group(0).casefold() and not noun:
            noun = "languages"
        noun = noun if noun and noun.endswith(("s", "fish", "sheep", "deer")) else _counted(sentence)
        noun = _CANON.get(noun, noun) if noun else None
        return _make(m, "number_of_" + noun if noun else None, raw, "possession")
    if kind == "when":
        words = [w for w in m.group("noun").casefold().split() if w not in _NOT_WHEN]
        return _make(m, "schedule_" + re.sub(r"_(?:day|time|night)$", "", "_".join(words)) if words else None, raw,
                     "schedule")
    if kind == "number":  # "new number: ..." is the phone number's new value, unless it names another
        return _make(m, (m.groupdict().get("noun") or "phone").casefold() + "_number", raw, "contact")
    if kind == "reach":
        noun = (m.groupdict().get("noun") or "").casefold()
        what = "email" if "@" in raw else "number"
        return _make(m, f"{noun}_{what}" if noun and noun != what else what, raw, "contact")
    if kind in ("team", "boss") and word.split("'")[0] in ("i", "we", "you", "he", "she", "they", "it"):
        return None  # "all the support I got" is no team
    if kind in ("team", "boss", "diet"):
        attribute = {"team": "team", "boss": "manager", "diet": "diet"}[kind]
        return _make(m, attribute, clean_value(raw, "name") if kind != "diet" else raw, "health" if kind == "diet"
                     else "preference", "diet" if kind == "diet" else None)
    if kind in ("partner", "home", "work"):
        attribute = {"partner": "partner", "home": "residence", "work": "employer"}[kind]
        if kind == "home" and ((m.groupdict().get("what") or "").casefold() == "cabin" or re.search(
                r"(?i)\b(?:holiday|vacation|summer|beach|weekend)\s+(?:house|home|cabin|cottage|place)", m.group(0))):
            attribute = "second_home"
        value = clean_value(raw, "place" if kind == "home" else "organization" if kind == "work" else "name")
        category = {"partner": "relationship", "home": "location", "work": "work"}[kind]
        return _make(m, attribute, value, category, {"residence": "lives_in", "employer": "works_at"}.get(attribute))
    if kind == "play":
        return _make(m, "sport" if word in _SPORTS else "instrument" if word in _INSTRUMENTS
                     else "game" if word in _GAMES else None, raw, "preference")
    if kind == "learn":
        return _make(m, "learning_language" if word in _LANGUAGES else "learning_instrument"
                     if word in _INSTRUMENTS else None, raw, "preference")
    value = clean_value(re.sub(r"(?i)^(?:in|on|at|called|named)\s+", "", raw), "phrase")
    if not value or len(value.split()) > 6 or (kind == "poss" and value.split()[0] in _NOT_A_VALUE) or (
            kind in ("poss", "rev") and value.casefold() in ("this", "that", "these", "those", "it", "here", "there")):
        return None  # "my family is so important", "my pups are doing better": how it is, not what it is
    if kind in ("poss", "chg") and (org := re.search(r"\s+at\s+(?P<org>(?-i:[A-Z][\w.'&-]*(?:\s+[A-Z][\w.'&-]*)*))", value)):
        return _make(m, "employer", org.group("org"), "work", "works_at")  # "my job is X at Y"
    if kind == "thing":
        return _make(m, _kind(value), value, "possession")
    slot = _canon(m.group("noun"))
    if slot == "address" and not re.search(r"\d", value) and value[:1].isupper():
        return _make(m, "residence", value, "location", "lives_in")  # "changed our address to Glendale"
    if slot and kind == "chg" and slot.endswith("s") and not slot.endswith("ss"):
        slot = slot[:-1]  # "switched trainers to Kofi": the trainer
    if slot and _WHEN.match(value):  # "my gym day is Friday", "our standup to 9:15": when it happens
        slot = "schedule_" + re.sub(r"_(?:day|days|time|night|nights|slot)$", "", slot)
    # No category of its own: the importance assessment's (an appointment is a schedule, an email a contact)
    return _make(m, slot, value, "")
