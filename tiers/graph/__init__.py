"""The entities tier: entities and knowledge-graph triples.

- :mod:`~tiers.graph.entities`: entities and triples, neighbourhood queries, recall candidates.
- :mod:`~tiers.graph.batch`: the graph writes of a whole batch of extractions, set-based.

May import: :mod:`tiers.candidates`, :mod:`tiers.indexes`, :mod:`tiers.storage`, :mod:`tiers.records`, :mod:`scoring`.
"""
