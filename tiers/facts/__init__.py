"""The long-term facts tier.

- :mod:`~tiers.facts.long_term`: facts scored by importance, reinforced when restated,
  superseded when contradicted, archived past the limit.
- :mod:`~tiers.facts.writes`: a new fact matched against the stored ones: reinforced, superseding, or inserted.
- :mod:`~tiers.facts.history`: what replaced a superseded fact, and which turns stated one.
- :mod:`~tiers.facts.listing`: ``facts()``'s filters as SQL, a page at a time.
- :mod:`~tiers.facts.access`: recall's reinforcement of the facts it returns, written in batches.

May import: :mod:`tiers.graph` (a fact's slot and its triples), :mod:`tiers.candidates`,
:mod:`tiers.indexes`, :mod:`tiers.storage`, :mod:`tiers.records`, :mod:`scoring`.
"""
