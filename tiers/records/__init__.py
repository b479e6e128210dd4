"""The records every layer shares, defined at the lowest layer that stores them.

- :mod:`tiers.records.types`: messages, facts, entities, triples, episodes and extractions
  (pydantic records, public as :mod:`unified_memory.types`).
- :mod:`tiers.records.values`: the rules every stored value meets (no NUL, no lone surrogate,
  bounded JSON nesting).
- :mod:`tiers.records.protocols`: what the tiers call and users plug in: token counter, embedder,
  vector index, conversation store (public as :mod:`unified_memory.protocols`).
- :mod:`tiers.records.scope`: who an item belongs to (user, agent, session).

May import: :mod:`scoring.errors` and itself; nothing else of ours.
"""
