"""Keyed items: JSON objects a caller stores under a namespace and a key (LangGraph's store,
CrewAI's and ADK's records ride on them).

- :mod:`~tiers.items.keyed_items`: put, get, list, search and delete, per user.
- :mod:`~tiers.items.checks`: their rules, pure, shared by a local memory and the client.
- :mod:`~tiers.items.vectors`: the vectors a caller's embedder made of an item's fields.

May import: :mod:`tiers.storage`, :mod:`tiers.records`, :mod:`scoring`.
"""
