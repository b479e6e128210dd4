"""The entities tier: entities and knowledge-graph triples.

- :mod:`~tiers.graph.entities`: entities and triples, their writes, recall candidates.
- :mod:`~tiers.graph.cards`: what an entity reads as (its description and index text).
- :mod:`~tiers.graph.upkeep`: those cards derived again after an import, a reindex or an upgrade.
- :mod:`~tiers.graph.triples`: triples read back: a user's, an entity's, a neighbourhood.
- :mod:`~tiers.graph.names`: the key an entity is stored under; the user's node and its names.
- :mod:`~tiers.graph.batch`: the graph writes of a whole batch of extractions, set-based.

May import: :mod:`tiers.candidates`, :mod:`tiers.indexes`, :mod:`tiers.storage`, :mod:`tiers.records`, :mod:`scoring`.
"""
