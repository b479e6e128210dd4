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

Within a rank the more important fact comes first, then the more recently stated one. A fact
that says too little on its own ("I love to.": one content term) is left out, unless it fills a
slot or is about health. The
user's name, when the graph knows it (``name`` relations of the user entity), is kept as
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

from collections.abc import Sequence

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
    chosen = [f for f in facts if (f.category or "") in _RANK and _says_enough(f)]
    chosen.sort(key=lambda f: (_RANK[f.category or ""], -f.importance, -f.updated_at.timestamp(), f.id))
    return chosen[:limit]


#: A fact with fewer distinct content terms ("I love to.", "Me too!") says too little out of its
#: conversation to stand in a profile, unless it fills a slot ("I'm Ada.": the name) or is about health.
MIN_PROFILE_TERMS = 2


def _says_enough(fact: Fact) -> bool:
    return bool(fact.attribute) or fact.category == "health" or len(term_set(fact.text)) >= MIN_PROFILE_TERMS


def build_profile(facts: Sequence[Fact], *, name: str | None = None, limit: int = MAX_PROFILE_FACTS) -> Profile:
    """The profile of these facts (the user's, as :meth:`UnifiedMemory.facts` lists them) and the
    user's ``name``.

    >>> build_profile([]).text
    ''
    """
    chosen = key_facts(facts, limit=limit)
    return Profile(text="\n".join(f"- {f.text}" for f in chosen), facts=chosen, name=name)


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
                      components={"importance": f.importance, "category": f.category, "profile": True},
                      metadata=f.metadata, created_at=f.updated_at)
            for i, f in enumerate(facts)]
