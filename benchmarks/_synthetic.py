"""Seeded synthetic workloads shared by the benchmarks (``core.py``, ``scale.py``).

Facts come from templates over a varied vocabulary, so runs are repeatable; "needles"
are facts with a known answer by construction, for a small labelled recall-quality set.

    >>> facts = synthetic_facts(3)
    >>> len(facts), facts == synthetic_facts(3)
    (3, True)
    >>> len(set(distinct_queries(200))) == 200
    True
    >>> needles = labelled_needles(50)
    >>> len({n.key for n in needles}), all(n.key in n.fact and n.key not in n.query for n in needles)
    (50, True)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SUBJECTS = ["my sister", "my brother", "my boss", "my neighbour", "my friend", "my dentist", "my cousin",
            "my coach", "my landlord", "my teacher", "the project lead", "our accountant"]
VERBS = ["likes", "hates", "collects", "studies", "repairs", "paints", "photographs", "teaches", "sells",
         "grows", "cooks", "writes about", "reviews", "imports", "restores"]
ADJECTIVES = ["vintage", "organic", "rare", "handmade", "Italian", "Japanese", "electric", "antique", "tiny",
              "giant", "blue", "spicy", "digital", "wooden", "ceramic", "silver", "seasonal", "local"]
NOUNS = ["bicycles", "guitars", "orchids", "watches", "cameras", "teapots", "maps", "stamps", "kites", "lamps",
         "novels", "cheeses", "motorbikes", "violins", "sculptures", "puzzles", "typewriters", "carpets",
         "telescopes", "recipes", "chess sets", "surfboards", "posters", "coins"]
PLACES = ["Lisbon", "Porto", "Berlin", "Oslo", "Kyoto", "Austin", "Lyon", "Turin", "Ghent", "Quito", "Perth",
          "Dakar", "Hanoi", "Bergen", "Split", "Cusco", "Tartu", "Malmo", "Leeds", "Graz"]
WHEN = ["on weekends", "every summer", "since 2019", "after work", "twice a month", "during winter",
        "on Sunday mornings", "when travelling", "for charity", "with the kids"]


def synthetic_facts(n: int, seed: int = 7) -> list[str]:
    """``n`` seeded facts such as "My boss repairs antique bicycles in Lisbon every summer (note 996)"."""
    rng = random.Random(seed)
    facts = []
    for i in range(n):
        facts.append(f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(ADJECTIVES)} "
                     f"{rng.choice(NOUNS)} in {rng.choice(PLACES)} {rng.choice(WHEN)} (note {i})")
    return facts


def _query_shapes(rng: random.Random) -> list:
    return [
        lambda: f"who {rng.choice(VERBS)} {rng.choice(NOUNS)}?",
        lambda: f"{rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} in {rng.choice(PLACES)}",
        lambda: f"what does {rng.choice(SUBJECTS)} do {rng.choice(WHEN)}",
        lambda: f"{rng.choice(NOUNS)} {rng.choice(PLACES)}",
    ]


def queries(n: int, seed: int = 11) -> list[str]:
    """``n`` seeded queries over the facts' vocabulary (strings may repeat)."""
    rng = random.Random(seed)
    shapes = _query_shapes(rng)
    return [rng.choice(shapes)() for _ in range(n)]


def distinct_queries(n: int, seed: int = 11) -> list[str]:
    """``n`` distinct seeded queries (so no recall is served by a per-query cache)."""
    rng = random.Random(seed)
    shapes = _query_shapes(rng)
    seen: dict[str, None] = {}
    while len(seen) < n:
        seen.setdefault(rng.choice(shapes)(), None)
    return list(seen)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- labelled needles ---------------------------------------------------------------------------

NEEDLE_FIRST = ["Zoltan", "Ingrid", "Thaddeus", "Oksana", "Bartholomew", "Esperanza", "Leopold", "Marisol",
                "Casimir", "Henrietta", "Ignatius", "Ludmila", "Evander", "Philippa", "Octavian", "Rosalind",
                "Cornelius", "Svetlana", "Percival", "Guinevere", "Anselm", "Beatrix", "Desmond", "Clementine",
                "Fitzgerald"]
NEEDLE_LAST = ["Varga", "Okonkwo", "Lindqvist", "Bellweather", "Quispe", "Nakagawa", "Dubrovsky", "Achterberg",
               "Moreau", "Castellanos"]
INSTRUMENTS = ["bandoneon", "theremin", "sitar", "oud", "didgeridoo", "harpsichord", "banjo", "bagpipes",
               "marimba", "accordion"]
FAR_PLACES = ["Reykjavik", "Ushuaia", "Tromso", "Valparaiso", "Zanzibar", "Tbilisi", "Windhoek", "Ulaanbaatar",
              "Nuuk", "Yerevan"]
NEEDLE_FACTS = [
    "{name}, a friend of {subject}, plays the {instrument} in {place} {when}",
    "{subject} met {name}, who plays the {instrument} in a small band in {place}",
    "{name} has played the {instrument} at a cafe in {place} {when}",
    "{subject} says {name} gives {instrument} lessons in {place}",
]
NEEDLE_QUERIES = [
    "who plays the {instrument} in {place}?",
    "which person performs {instrument} music in {place}",
    "{instrument} player in {place}",
    "someone in {place} who knows the {instrument}",
]


@dataclass(frozen=True)
class Needle:
    """A fact whose answer is known by construction: only this fact pairs its instrument with its
    place (each instrument and each place is shared by several needles, so a query needs both),
    and ``key`` (the person's name) appears in the fact but never in the query."""

    fact: str
    query: str
    key: str


def labelled_needles(k: int = 50, seed: int = 23) -> list[Needle]:
    """``k`` (<= 100) needles with distinct names and distinct (instrument, place) pairs."""
    rng = random.Random(seed)
    names = [f"{first} {last}" for first in NEEDLE_FIRST for last in NEEDLE_LAST]
    rng.shuffle(names)
    pairs = [(i, p) for i in INSTRUMENTS for p in FAR_PLACES]
    rng.shuffle(pairs)
    needles = []
    for j in range(k):
        instrument, place = pairs[j]
        slots = {"name": names[j], "subject": rng.choice(SUBJECTS), "instrument": instrument, "place": place,
                 "when": rng.choice(WHEN)}
        fact = rng.choice(NEEDLE_FACTS).format(**slots)
        needles.append(Needle(fact[0].upper() + fact[1:], rng.choice(NEEDLE_QUERIES).format(**slots), names[j]))
    return needles


def needle_positions(n: int, count: int) -> list[int]:
    """Where :func:`facts_with_needles` puts ``count`` needles among ``n`` facts (evenly spread)."""
    step = n // count
    return [j * step + step // 2 for j in range(count)]


def facts_with_needles(n: int, needles: list[Needle], seed: int = 7) -> list[str]:
    """``n`` facts: the synthetic ones with the needles spread evenly through them (replacing)."""
    facts = synthetic_facts(n, seed)
    if needles and n >= len(needles):
        for position, needle in zip(needle_positions(n, len(needles)), needles, strict=True):
            facts[position] = needle.fact
    return facts
