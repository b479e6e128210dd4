"""The user's profile: the current key facts an agent should see whatever it is asked.

A query-driven context block holds what matches the question. Some facts matter for every
question: "plan a dinner for Maria's visit" matches nothing about peanuts, yet an agent that
plans it without knowing the user is allergic to peanuts can hurt them. Peers keep such facts
in front of the model (Letta's core memory, Zep's user summary, LangMem's profiles). Here the
profile is derived, never written by hand: the user's **active** facts of the key categories
(a superseded value is out the moment the new one is stored), ordered by what costs most to
miss:

=============  =============================================================
rank           categories (``scoring.importance.CATEGORIES``)
=============  =============================================================
1. safety      ``health``: allergies, conditions, medication, diet
2. who         ``identity``: name, age, origin
3. people      ``relationship``: family and close people
4. home        ``location``
5. work        ``work``
6. standing    ``preference`` (likes, dislikes, favourites)
=============  =============================================================

Every health fact comes first, the more important first. Then the other categories take turns
in this order, the best fact of each, then the next best of each, and so on, so a tight budget
shows who the user is, their people, home, work and tastes rather than five ways of one; within a
category a fact that fills a slot ("I work at Kestrel Robotics": the employer) comes first, then
the more important, then the more recently stated one. A key fact must stand on its own, out of
the conversation it was said in; unless it fills a slot or is about health, a fact is left out
when it

- says too little ("I love to.": one content term);
- leans on what was said before it: it opens with a pronoun or a demonstrative that points back
  ("It's still a work in progress", "They're some of my fave memories", after a name or a word
  said to someone: "Caroline, they're ...");
- mostly repeats the profile so far: half or more of its terms are those of the facts already
  chosen ("Losing my job was hard" after "Lost my job as a banker, so I'm starting my own
  business"), so ten ways of saying one thing do not fill the profile.

In a group conversation (messages of several named speakers under one user), a key fact is
somebody's: when the key facts came from more than one speaker, each line says who said it
(``- Caroline: I'm keen on counseling``, the name on the fact's first message;
:attr:`~unified_memory.types.Profile.speakers`).

The user's name, when the graph knows it (``name`` relations of the user entity), is kept as
:attr:`~unified_memory.types.Profile.name`. :func:`profile_hits` turns the facts into the hits
of the context block's ``profile`` section (:mod:`unified_memory.retrieval.context`), which
takes up to ``context.profile_share`` of the budget, in this order: when the budget is tight,
the safety facts are the ones that stay.

    >>> from datetime import UTC, datetime
    >>> from unified_memory.types import Fact
    >>> def fact(i, text, category, importance=0.8):
    ...     return Fact(id=f"f{i}", user_id="ada", text=text, category=category, importance=importance,
    ...                 created_at=datetime(2024, 1, i, tzinfo=UTC), updated_at=datetime(2024, 1, i, tzinfo=UTC))
    >>> facts = [fact(1, "I love jazz", "preference"), fact(2, "I'm allergic to peanuts", "health", 0.9),
    ...          fact(3, "My sister Maria lives in Lisbon", "relationship"), fact(4, "Meeting at 3", "schedule")]
    >>> [f.text for f in key_facts(facts)]
    ["I'm allergic to peanuts", 'My sister Maria lives in Lisbon', 'I love jazz']
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from itertools import zip_longest

from scoring.text import term_set
from unified_memory.types import Fact, Profile, RecallHit

__all__ = ["PROFILE_CATEGORIES", "key_facts", "build_profile", "profile_hits", "MAX_PROFILE_FACTS"]

#: The categories of a profile, safety first (see the module docstring).
PROFILE_CATEGORIES: tuple[str, ...] = ("health", "identity", "relationship", "location", "work", "preference")
#: The most facts a profile holds (the context block shows as many as its share of the budget fits).
MAX_PROFILE_FACTS = 20
_RANK = {category: rank for rank, category in enumerate(PROFILE_CATEGORIES)}


def key_facts(facts: Sequence[Fact], *, limit: int = MAX_PROFILE_FACTS) -> list[Fact]:
    """The facts of the profile's categories among ``facts``, safety first (see above). ``facts``
    are those valid at the profile's moment, as the facts tier lists them: the active ones now,
    or, ``as_of`` a past moment, those valid then (a value superseded since among them)."""
    by_category: dict[str, list[Fact]] = {c: [] for c in PROFILE_CATEGORIES}
    for fact in facts:
        if (fact.category or "") in _RANK and (_kept_whatever(fact) or _stands_alone(fact.text)):
            by_category[fact.category or ""].append(fact)
    for category, group in by_category.items():  # health: the most important first, slot or not
        group.sort(key=lambda f: (category != "health" and not f.attribute, -f.importance,
                                  -f.updated_at.timestamp(), f.id))
    # every health fact first; then the other categories in turn, the best of each, then the next ...
    health, others = by_category.pop("health"), list(by_category.values())
    turns = [f for row in zip_longest(*others) for f in row if f is not None]
    chosen: list[Fact] = []
    said: set[str] = set()  # the terms of the facts chosen so far
    for fact in [*health, *turns]:
        if len(chosen) >= limit:
            break
        terms = term_set(fact.text)
        if _kept_whatever(fact) or len(terms - said) * 2 > len(terms):  # more than half of it is new
            chosen.append(fact)
            said |= terms
    return chosen


#: A fact with fewer distinct content terms ("I love to.", "Me too!") says too little out of its
#: conversation to stand in a profile, unless it fills a slot ("I'm Ada.": the name) or is about health.
MIN_PROFILE_TERMS = 2


#: Words that, opening a fact, point back at what was said before it: out of its conversation the
#: fact no longer says what it is about ("It's still a work in progress").
POINTING_BACK = frozenset({"it", "its", "it's", "they", "they're", "they've", "they'll", "they'd", "them",
                           "those", "these", "this", "that", "that's", "he", "he's", "she", "she's", "there's"})
_OPENING = re.compile(r"^(?:[^\W\d_]+,\s+)*([^\W\d_]+(?:['’][^\W\d_]+)?)")  # "Caroline, they're" -> "they're"


def _kept_whatever(fact: Fact) -> bool:
    """A fact that fills a slot ("I'm Ada.": the name) or is about health is a key fact as it is."""
    return bool(fact.attribute) or fact.category == "health"


def _stands_alone(text: str) -> bool:
    """Whether a fact's text says something out of its conversation: enough terms, and an opening
    that does not point back at what was said before it (a name or a word said to someone first
    skipped).

    >>> [_stands_alone(t) for t in ("I love to.", "Caroline, they're some of my fave memories.",
    ...                             "Painting landscapes is my favorite!")]
    [False, False, True]
    """
    if len(term_set(text)) < MIN_PROFILE_TERMS:
        return False
    opening = _OPENING.match(text.strip())
    return opening is None or opening.group(1).casefold().replace("\u2019", "'") not in POINTING_BACK


def build_profile(facts: Sequence[Fact], *, name: str | None = None, limit: int = MAX_PROFILE_FACTS,
                  said_by: Callable[[list[str]], Mapping[str, str]] | None = None) -> Profile:
    """The profile of these facts (the user's, as :meth:`UnifiedMemory.facts` lists them) and the
    user's ``name``. ``said_by``: the speaker's name of each of these messages that has one
    (``{message id: name}``), asked once for the first messages of the key facts; when the key
    facts were said by more than one named speaker, each of their lines says who.

    >>> build_profile([]).text
    ''
    """
    chosen = key_facts(facts, limit=limit)
    firsts = [f.source_message_ids[0] for f in chosen if f.source_message_ids]
    speakers = _speakers(chosen, said_by(firsts) if said_by is not None and firsts else {})
    lines = [f"- {speakers[f.id]}: {f.text}" if f.id in speakers else f"- {f.text}" for f in chosen]
    return Profile(text="\n".join(lines), facts=chosen, name=name, speakers=speakers)


def _speakers(facts: Sequence[Fact], said_by: Mapping[str, str]) -> dict[str, str]:
    """Who said each fact (the name on its first source message), when more than one speaker did."""
    speakers = {f.id: said_by[f.source_message_ids[0]] for f in facts
                if f.source_message_ids and f.source_message_ids[0] in said_by}
    return speakers if len(set(speakers.values())) > 1 else {}


def profile_hits(profile: Profile, query: str | None = None) -> list[RecallHit]:
    """The profile's facts as the hits of a context block's ``profile`` section, in order (a hit's
    score falls with its rank: the block's budget keeps the first). With a ``query``, safety stays
    first, then the facts that share more of its terms, whatever their category, then the rest in
    the profile's order: at a tight budget, "where does my sister live?" keeps the sister over the
    brother, and at any budget the key facts the question is about come before the others.

    >>> from datetime import UTC, datetime
    >>> when = datetime(2024, 1, 1, tzinfo=UTC)
    >>> facts = [Fact(id=f"f{i}", user_id="ada", text=t, category="relationship", importance=0.8, created_at=when,
    ...               updated_at=when)
    ...          for i, t in enumerate(["My brother Tomas lives in Porto", "My sister Maria lives in Lisbon"])]
    >>> [h.text for h in profile_hits(Profile(text="", facts=facts), "where does my sister live?")]
    ['My sister Maria lives in Lisbon', 'My brother Tomas lives in Porto']
    """
    facts = list(profile.facts)
    asked = term_set(query) if query else frozenset()
    if asked:  # safety first; then what the question is about, whatever its category; then the rest in order
        shared = {f.id: len(asked & term_set(f.text)) for f in facts}
        position = {f.id: i for i, f in enumerate(facts)}
        facts.sort(key=lambda f: (f.category != "health", -shared[f.id], position[f.id]))
    count = len(facts)
    return [RecallHit(id=f.id, tier="long_term", text=f.text, score=float(count - i),
                      components={"importance": f.importance, "category": f.category, "profile": True,
                                  **({"speaker": profile.speakers[f.id]} if f.id in profile.speakers else {})},
                      metadata=f.metadata, created_at=f.updated_at)
            for i, f in enumerate(facts)]
