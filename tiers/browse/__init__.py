"""Read-only queries for people looking at a memory (the web console, ``unified_memory.console``):
a filtered, sorted page of facts and how many there are, facts over time, the messages a fact came
from and the facts a message produced, conversations and their turns, and what forgetting an item
would take with it. Every query is about one user (``user_id = ?`` in every statement and join),
parameterised, and bounded (a page, a number of buckets, a capped list).

May import: :mod:`tiers.facts`, :mod:`tiers.graph`, :mod:`tiers.maintenance`, :mod:`tiers.candidates`
(the modules at the top of tiers: the episodic log), :mod:`tiers.storage`, :mod:`tiers.records`, :mod:`scoring`.
"""
