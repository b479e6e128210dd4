"""The default, offline fact/entity/triple extractor: :class:`RuleExtractor`.

Deterministic regex rules, no model. Each informative sentence of a message
becomes one :class:`~unified_memory.types.ExtractedFact` (the user's own
wording), with a slot ``(subject, attribute, value)`` when one is recognised so a
newer fact can supersede an older one: ``("user", "residence", "Lisbon")``,
``("maria", "job_title", "nurse")``, ``("wife", "name", "Jo")``.

Choices worth knowing:

* Multi-valued facts (allergies, intolerances, foods avoided, likes and
  dislikes, medical conditions, pets) get ``attribute=None``: a second allergy
  must not supersede the first. Their relations still appear as triples
  (``allergic_to``, ``likes``, ``has_condition``, ``has_dog``...).
* A negated statement ("I don't live in Paris anymore", "I'm not allergic to
  anything") is kept as a fact without a slot and yields no triple.
* One fact per statement. A sentence is cut into clauses at "and I", "but I",
  "; " and dashes when each side says something of its own ("I live in Lisbon
  and I work at Acme" gives two facts, so a later employer supersedes Acme); a
  side that leans on the other ("... and I visit her") stays with it. When one
  clause fills several slots ("I work at Acme as an engineer") the first one is
  the fact's slot; the others are triples.
* Objects stop at the clause boundary ("peanuts, so never suggest ..." gives
  ``peanuts``), and a bare reminder of something said before ("Remember my
  allergy.") is neither a fact nor a triple.
* Only ``user`` messages yield facts about the user. In other roles "I" is the
  assistant (or a tool), so only statements about named third persons are kept.
* ``message.name`` (a speaker name) is the subject of the user's triples and
  entities, and of the fact slots (case-folded: ``"caroline"``), so that in a
  conversation of several speakers one's new home does not supersede another's;
  without a name the slot's subject is ``"user"`` (pass the name on every message
  or on none).
* Dates, weekdays and months are never entities; they stay in the fact text.
* A short answer to the assistant's question ("Where do you live?" -> "Lisbon")
  becomes a templated fact ("I live in Lisbon") with confidence 0.8.
* A message is read up to :data:`MAX_CHARS` (20,000) characters, cut after the
  last sentence that ends within them (or, when none does, after the last whole
  word): facts about a person are told in short statements, and the work per
  message stays bounded. Below the bound it grows linearly with the length, whatever
  the text (no pattern rescans what it has read). No LoCoMo turn comes near the
  bound (the longest has 1,423 characters).

    >>> from unified_memory.types import Message
    >>> out = RuleExtractor().extract(Message(role="user", content="My sister Maria lives in Lisbon."))
    >>> [(t.subject, t.predicate, t.object) for t in out.triples]
    [('user', 'has_sister', 'Maria'), ('Maria', 'lives_in', 'Lisbon')]
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from scoring._importance_rules import REMINDER, SPLIT, hedged
from scoring.importance import HeuristicImportanceScorer, assess_importance, split_sentences
from tiers.graph.entities import single_valued
from unified_memory.errors import wrong_type
from unified_memory.extraction._changes import replaced
from unified_memory.extraction._patterns import (
    ATTRIBUTE_CATEGORY,
    COMMON,
    RUN_START,
    Hit,
    find_hits,
    letter_runs,
    mentions,
)
from unified_memory.extraction._slots import slot_hits
from unified_memory.protocols import ImportanceScorer
from unified_memory.types import (
    ExtractedEntity,
    ExtractedFact,
    ExtractedTriple,
    Extraction,
    Message,
    trusted_record,
)

__all__ = ["RuleExtractor", "MAX_CHARS"]

#: The characters of a message rule extraction reads at most (see the module docstring).
MAX_CHARS = 20_000

_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|our|us)\b", re.I)
# Where a sentence may hold two statements: "I live in Lisbon and I work at Acme", "...; I'm 34", " - ".
_CLAUSE_SPLIT = re.compile(RUN_START + r"(?:\s*(?:;|\s[-\u2013\u2014]+\s|[\u2013\u2014])\s*(?:(?:and|but|so|plus)\s+"
                           r"(?=(?:i|we)\b))?|,?\s+(?:and|but|so|plus)\s+(?:also\s+|then\s+|now\s+)?(?=(?:i|we)\b))", re.I)
_SPLIT_MARKS, _JOINS, _SELF = frozenset(";-\u2013\u2014"), frozenset({"and", "but", "so", "plus"}), frozenset({"i", "we"})
_F = "hi|hello|hey|hiya|ok|okay|oh|so|well|yes|yeah|yep|great|perfect|cool|nice|sure|btw|also|anyway|and|but"
_FILLER = re.compile(rf"(?:(?:{_F})(?:\s+there)?(?:\s*[,!:]|\s+(?=(?:{_F})\b))\s*)+", re.I)
_THEM = re.compile(r"\b(?:he|she|him|her|they|them)\b", re.I)  # "... and I visit her": leans on the clause before
_QSTART = re.compile(r"^\W*(?:what|what's|where|when|who|whom|whose|why|how|which|can|could|would|will|should|"
                     r"do|does|did|is|are|was|were|am|have|has|tell|give|show|write|explain|help)\b", re.I)
_WH_STATEMENT = re.compile(r"^\W*(?:what|where|when|who|why|how|which)\s+(?!(?:is|are|was|were|do|does|did|can|"
                           r"could|would|should|will)\b)\w", re.I)  # "When I was ten, I moved ..."
_BOUNDARY = re.compile(r"[,;:]|\bbut\b|\bso\b", re.I)
_MEMORY_REQUEST = re.compile(r"\b(?:remember|note|keep\s+in\s+mind)\s+(?:that\s+)?", re.I)
_REQUEST_WORDS = frozenset({"remember", "note", "keep"})  # a run of letters each request starts with
# assistant question -> (template for the user's short answer, what to strip from the answer)
_QUESTIONS: tuple[tuple[re.Pattern[str], str, str], ...] = tuple((re.compile(q, re.I), t, strip) for q, t, strip in (
    (r"\bwhere\s+(?:do\s+you\s+live|are\s+you\s+(?:based|living))\b|\bwhat\s+city\s+do\s+you\s+live",
     "I live in {}", r"(?:i\s+live\s+)?(?:in\s+)?"),
    (r"\bwhere\s+are\s+you\s+from\b|\bwhere\s+did\s+you\s+grow\s+up\b", "I'm from {}", r"(?:i'm\s+from\s+|from\s+)?"),
    (r"\bwhat(?:'s|\s+is)\s+your\s+name\b|\bwhat\s+should\s+i\s+call\s+you\b", "My name is {}",
     r"(?:it's\s+|i'm\s+|my\s+name\s+is\s+)?"),
    (r"\bwhere\s+do\s+you\s+work\b|\bwho\s+do\s+you\s+work\s+for\b", "I work at {}", r"(?:at\s+|for\s+)?"),
    (r"\bwhat\s+do\s+you\s+do\s+for\s+(?:a\s+living|work)\b|\bwhat(?:'s|\s+is)\s+your\s+(?:job|occupation)\b",
     "I work as {}", r"(?:i'm\s+|i\s+am\s+)?"),
    (r"\bhow\s+old\s+are\s+you\b", "I'm {} years old", r"(?:i'm\s+)?"),
    (r"\bwhen\s+is\s+your\s+birthday\b", "My birthday is {}", r"(?:it's\s+|on\s+)?"),
    (r"\bwhat(?:'s|\s+is)\s+your\s+fav(?:ou?rite|e)\s+(\w+)", "My favorite {0} is {1}", r"(?:it's\s+|probably\s+)?"),
))



def _one_name_per_relation(hits: list[Hit]) -> list[Hit]:
    """One hit per relation the sentence states: where the speaker's slot (a single-valued
    relation named by its attribute) and another pattern name the same attribute and value, the
    one the graph keeps single-valued stays (a new value must end the old): the named relation
    when it is single-valued ("My birthday is May 3": ``birthday``), else the slot ("My favorite
    band is Big Thief": ``favorite_band``, single-valued).

    >>> from unified_memory.extraction._patterns import find_hits
    >>> from unified_memory.extraction._slots import slot_hits
    >>> def kept(sentence):
    ...     return sorted({h.predicate for h in _one_name_per_relation(find_hits(sentence) + slot_hits(sentence))})
    >>> kept("My birthday is May 3."), kept("My favorite band is Big Thief.")
    (['birthday'], ['favorite_band'])
    """
    def key(hit: Hit) -> tuple[Any, str, str]:
        return hit.who, hit.attribute or hit.predicate, hit.value.casefold()

    slots = {key(h) for h in hits if h.extra.get("frame") == "slot"}
    named = {key(h): single_valued(h.predicate) for h in hits if h.extra.get("frame") != "slot" and key(h) in slots}
    return [h for h in hits if key(h) not in named
            or (h.extra.get("frame") == "slot") != named[key(h)]]

class RuleExtractor:
    """Offline, deterministic :class:`~unified_memory.protocols.Extractor` built on regex rules.

    ``importance_scorer`` (default :class:`~scoring.importance.HeuristicImportanceScorer`) fills
    each fact's ``importance``. A sentence no pattern recognises is still proposed (without a
    slot) when the heuristic finds it informative, or when a custom scorer rates it 0.5 or more;
    the caller's importance threshold then decides what is kept.

    >>> from unified_memory.types import Message
    >>> fact = RuleExtractor().extract(Message(role="user", content="I just moved to Berlin")).facts[0]
    >>> (fact.subject, fact.attribute, fact.value, fact.category)
    ('user', 'residence', 'Berlin', 'location')
    """

    def __init__(self, importance_scorer: ImportanceScorer | None = None) -> None:
        if importance_scorer is not None and not callable(importance_scorer):
            raise wrong_type("importance_scorer", "a callable str -> float", importance_scorer)
        self.importance_scorer: ImportanceScorer = importance_scorer or HeuristicImportanceScorer()

    def __repr__(self) -> str:
        return f"RuleExtractor(importance_scorer={self.importance_scorer!r})"

    def extract(self, message: Message, *, context: Sequence[Message] = ()) -> Extraction:
        """Propose facts, entities and triples from one message (``context``: the messages before it).

        >>> from unified_memory.types import Message
        >>> ex = RuleExtractor().extract(Message(role="user", content="Lisbon"),
        ...     context=[Message(role="assistant", content="Where do you live?")])
        >>> ex.facts[0].text, ex.facts[0].value
        ('I live in Lisbon', 'Lisbon')
        """
        if not isinstance(message, Message):
            raise wrong_type("message", "Message", message)
        original = _read_part(message.text())
        text = original.replace("\u2019", "'").replace("\u2018", "'")  # same length: sentences line up
        if not text.strip():
            return Extraction()
        is_user = message.role == "user"
        speaker = (message.name or "").strip() or "user" if is_user else "user"
        out = _Builder(speaker)
        sentences = split_sentences(text)
        wordings = sentences if original == text else split_sentences(original)
        retired: list[str] = []  # values the message says are no longer current
        for sentence, wording in zip(sentences, wordings, strict=True):
            changes = replaced(sentence) if is_user and _question_start(sentence) > 0 else []
            retired += [c for c in changes if c not in retired]
            spans = _clauses(sentence) if is_user else [(0, len(sentence))]
            for start, end in spans:
                filler = _FILLER.match(sentence, start, end)  # "Hi, I'm Ada": the fact is "I'm Ada"
                start = filler.end() if filler and filler.end() < end else start
                clause = wording[start:end].strip(" ,;:-\u2013\u2014")
                clause = clause[:1].upper() + clause[1:] if start else clause
                self._sentence(sentence[start:end].strip(" ,;:-\u2013\u2014"), is_user, out, clause,
                               changed=bool(changes))
        if retired and out.facts:  # the message's last statement of a value holds the new one ("sold X and bought Y")
            holder = next((f for f in reversed(out.facts) if f.attribute), out.facts[-1])
            holder.replaces = retired
        for fact in out.facts:  # with a partner now, "I'm single" is history
            if fact.attribute == "partner" and "single" not in fact.replaces:
                fact.replaces = [*fact.replaces, "single"]
        if is_user and not out.facts and context:
            self._short_answer(text.strip(), context[-1], out)
        if speaker != "user" and any(t.subject == speaker for t in out.triples.values()):
            out.entity(speaker, "person", {"relation": "self"})
        return trusted_record(Extraction, facts=out.facts, entities=list(out.entities.values()),
                              triples=list(out.triples.values()))

    def _importance(self, text: str) -> float | None:
        value = float(self.importance_scorer(text))
        return None if math.isnan(value) else min(1.0, max(0.0, value))

    def _sentence(self, sentence: str, is_user: bool, out: _Builder, wording: str | None = None, *,
                  changed: bool = False) -> None:
        asked = _question_start(sentence)
        request = _MEMORY_REQUEST.search(sentence) if _may_request(sentence) else None
        told = request.end() if request else len(sentence) + 1
        hits = find_hits(sentence) + (slot_hits(sentence) if is_user else [])
        hits = [h for h in _one_name_per_relation(hits) if h.start < asked or h.start >= told]
        if not is_user:  # "I" / "my" is the assistant's: keep statements about named third persons only
            hits = [h for h in hits if not h.who.is_user and h.who.relation is None]
        if not hits and REMINDER.match(sentence):  # "Remember my allergy.": nothing new to store
            return
        for name, kind in mentions(sentence):
            out.entity(name, kind, {})
        for hit in hits:
            if not hit.negated:
                out.add_hit(hit)
        slots = [h for h in hits if h.attribute and not h.negated]
        primary = next((h for h in slots if h.attribute != "relation"), slots[0] if slots else None)
        scorer = self.importance_scorer
        heuristic = isinstance(scorer, HeuristicImportanceScorer)
        assessment = (scorer.assess(sentence) if isinstance(scorer, HeuristicImportanceScorer)
                      else assess_importance(sentence))
        importance = assessment.score if heuristic else self._importance(sentence)
        if changed and importance is not None:  # a change to what was told is as worth keeping as the fact
            importance = max(importance, 0.8)
        elif heuristic and primary is not None and primary.extra.get("frame") == "slot" and importance is not None:
            importance = max(importance, 0.75)  # "my car is ...": an attribute of the speaker, kept like one
        if primary is None and not hits:  # no pattern: keep it if the heuristic or the given scorer rates it
            informative = assessment.score >= 0.7 or (assessment.category not in (None, "general")
                                                      and assessment.score >= 0.5)
            informative = informative or (not heuristic and importance is not None and importance >= 0.5)
            informative = informative or changed  # a change to something told before is worth keeping
            if not (is_user and informative and asked > 0):
                return
        subject = (primary or hits[0]).who.key if (primary or hits) else (
            "user" if _FIRST_PERSON.search(sentence) else None)
        if subject == "user" and out.speaker != "user":  # one speaker's update is not another's
            subject = out.speaker.casefold()
        attribute = primary.attribute if primary else None
        value = primary.value if primary else None
        if primary and attribute == "relation":  # "my sister Maria": (maria, relation, sister)
            value = primary.who.relation
        category = ATTRIBUTE_CATEGORY.get(attribute or "") or ("preference" if attribute and attribute.startswith(
            "favorite_") else None) or (hits[0].category if hits else None) or assessment.category
        if primary and primary.who.relation and attribute in ("name", "relation"):
            category = "relationship"
        out.facts.append(trusted_record(  # valid by construction (strings, a score in [0, 1] or None)
            ExtractedFact, text=wording or sentence, importance=importance, category=category, subject=subject,
            attribute=attribute, value=value, replaces=[],
            confidence=0.7 if hedged(sentence, (primary or hits[0]).start if hits else 0) else 1.0))

    def _short_answer(self, answer: str, previous: Message, out: _Builder) -> None:
        """Turn a short answer to the assistant's question into a templated fact, when it is one."""
        words = answer.rstrip(".!").split()
        if previous.role != "assistant" or not 1 <= len(words) <= 5 or answer.endswith("?"):
            return
        for pattern, template, strip in _QUESTIONS:
            m = pattern.search(previous.text())
            if m is None:
                continue
            value = re.sub(r"^" + strip, "", answer.rstrip(".!"), flags=re.I).strip()
            if not value or value.split()[0].lower() in COMMON or len(value.split()) > 4:
                return
            sentence = template.format(m.group(1).lower(), value) if m.groups() else template.format(value)
            before = len(out.facts)
            self._sentence(sentence, True, out)
            for fact in out.facts[before:]:
                fact.confidence = 0.8
            return


def _read_part(text: str) -> str:
    """What rule extraction reads of a message: all of it up to :data:`MAX_CHARS` characters; of a longer
    one, the sentences (or lines) that end within them, else the whole words that do, else the characters.

    >>> len(_read_part("I live in Lisbon. " * 1200)), len(_read_part("x" * 30000))
    (19998, 20000)
    """
    if len(text) <= MAX_CHARS:
        return text
    head = text[:MAX_CHARS + 1]  # one more: a sentence that ends right at the bound is whole
    ends = [m.end() for m in SPLIT.finditer(head)]  # after a sentence's mark and the whitespace after it
    cut = min(MAX_CHARS, max(ends[-1] if ends else 0, head.rfind("\n") + 1))
    if cut == 0:  # no sentence ends within the bound: up to the last whitespace
        cut = MAX_CHARS
        while cut and not head[cut].isspace():
            cut -= 1
    return text[:cut or MAX_CHARS]


def _question_start(sentence: str) -> int:
    """Where the question or request part of a sentence starts (``len(sentence)`` when there is none).

    >>> _question_start("I'm vegan, can you suggest recipes?")
    10
    """
    m = _QSTART.match(sentence)
    if m and (sentence.rstrip().endswith("?") or not _WH_STATEMENT.match(sentence)):
        return 0
    if sentence.rstrip().endswith("?"):
        cuts = list(_BOUNDARY.finditer(sentence))
        return cuts[-1].end() if cuts else 0
    return len(sentence)


def _may_request(sentence: str) -> bool:
    """Could :data:`_MEMORY_REQUEST` match? Each request starts with one of its words (a necessary condition)."""
    return not letter_runs(sentence).isdisjoint(_REQUEST_WORDS)


def _may_split(sentence: str) -> bool:
    """Could :data:`_CLAUSE_SPLIT` cut ``sentence``? It needs ";" or a dash, or "and"/"but"/"so"/"plus"
    and then "I"/"we" as words (a necessary condition: the scan itself is the slow part)."""
    if _SPLIT_MARKS.intersection(sentence):
        return True
    runs = letter_runs(sentence)
    return not runs.isdisjoint(_JOINS) and not runs.isdisjoint(_SELF)


def _clauses(sentence: str) -> list[tuple[int, int]]:
    """Spans of the statements in a sentence: it is cut at "and I", "; ", " - "... where both sides say
    something on their own (a recognised relation, or an informative statement); a side that does not
    ("and I visit her every other weekend") stays with the clause before it.

    >>> s = "I live in Lisbon and I work at Acme"
    >>> [s[a:b] for a, b in _clauses(s)]
    ['I live in Lisbon', 'I work at Acme']
    """
    if not _may_split(sentence):
        return [(0, len(sentence))]
    cuts = list(_CLAUSE_SPLIT.finditer(sentence))
    if not cuts:
        return [(0, len(sentence))]
    spans: list[list[int]] = []
    for start, end in zip([0, *(c.end() for c in cuts)], [*(c.start() for c in cuts), len(sentence)], strict=True):
        piece = sentence[start:end]
        alone = bool(find_hits(piece)) or bool(slot_hits(piece)) or assess_importance(piece).score >= 0.7
        if spans and (not alone or _THEM.search(piece)):
            spans[-1][1] = end
        elif spans and not spans[-1][2]:  # the clause before says nothing on its own: it joins this one
            spans[-1][1:] = [end, 1]
        else:
            spans.append([start, end, int(alone)])
    return [(a, b) for a, b, _ in spans]


class _Builder:
    """Collects entities and triples (deduplicated, in first-seen order) and facts."""

    def __init__(self, speaker: str) -> None:
        self.speaker = speaker
        self.facts: list[ExtractedFact] = []
        self.entities: dict[str, ExtractedEntity] = {}
        self.triples: dict[tuple[str, str, str], ExtractedTriple] = {}

    def entity(self, name: str, kind: str, attributes: dict[str, Any]) -> None:
        name = name.strip()
        if not name:
            return
        known = self.entities.get(name.lower())
        if known is None:
            self.entities[name.lower()] = trusted_record(ExtractedEntity, name=name, type=kind,
                                                         attributes=dict(attributes))  # a name: not empty
            return
        known.attributes = {**known.attributes, **attributes}
        if known.type == "thing" and kind != "thing":
            known.type = kind

    def triple(self, subject: str, predicate: str, obj: str, *, single: bool = False) -> None:
        if not (subject and predicate and obj):
            return
        known = self.triples.get((subject, predicate, obj))
        if known is None:
            self.triples[subject, predicate, obj] = trusted_record(
                ExtractedTriple, subject=subject, predicate=predicate, object=obj, confidence=1.0, single=single)
        elif single:
            known.single = True

    def add_hit(self, hit: Hit) -> None:
        who = hit.who
        display = self.speaker if who.is_user else who.name or f"{self.speaker}'s {who.relation or who.key}"
        if who.name and hit.attribute != "relation":
            attrs = {"relation": who.relation} if who.relation else {}
            if hit.attribute:
                attrs[hit.attribute] = hit.value
            self.entity(who.name, "animal" if who.relation in _ANIMALS else "person", attrs)
        if hit.attribute == "relation":
            kind = "animal" if hit.kind == "animal" or who.relation in _ANIMALS else "person"
            self.entity(hit.value, kind, {"relation": who.relation})
            self.triple(self.speaker, hit.predicate, hit.value)
            return
        if hit.predicate == "name" and not who.is_user:
            self.entity(hit.value, "person", {"relation": who.relation} if who.relation else {})
            return  # "my wife's name is Jo": has_wife already says it
        if hit.predicate == "name":
            self.entity(hit.value, "person", {"relation": "self"})
        elif hit.kind in ("place", "organization") and hit.value[:1].isupper():
            self.entity(hit.value, hit.kind, {})
        elif hit.kind == "animal":
            self.entity(hit.value, "animal", dict(hit.extra))
        self.triple(display, hit.predicate, hit.value, single=hit.extra.get("frame") == "slot")


_ANIMALS = frozenset("dog cat puppy kitten parrot rabbit hamster horse bird turtle snake lizard fish pony".split())
