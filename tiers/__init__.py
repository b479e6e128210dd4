"""The rooms that hold state: the four tiers of a memory and the storage they share.

The tiers (what a memory remembers), each turning its own rows into typed recall candidates:

- :mod:`tiers.short_term`: the short-term window of each conversation; :mod:`tiers.trimming` its
  rules (whole interactions leave, never half a tool call); :mod:`tiers.summaries` the running
  summary of what left it.
- :mod:`tiers.episodic`: the episodic log, every message verbatim.
- :mod:`tiers.facts`: long-term facts, importance-scored, reinforced, superseded; their history
  and listing.
- :mod:`tiers.graph`: entities and knowledge-graph triples.
- :mod:`tiers.items`: keyed items (JSON objects under a namespace and a key).
- :mod:`tiers.sessions`: conversation session stores (memory, files, SQLite, Redis, PostgreSQL).
- :mod:`tiers.candidates`: the contract with recall: typed candidates, and what recall asks a tier.

The rooms below them:

- :mod:`tiers.records`: the records, value rules and protocols every layer shares (the lowest room).
- :mod:`tiers.storage`: the database seam and its engines, SQLite and PostgreSQL.
- :mod:`tiers.indexes`: the derived search indexes (lexical partitions, vectors, Chroma), rebuildable
  from the database.
- :mod:`tiers.maintenance`: what runs over a user's rows as a whole (export, import, deletion,
  ingest bookkeeping) and the service's API keys.

Imports point down: ``records`` ← ``storage`` ← ``indexes`` ← the modules at the top ←
``graph`` ← ``facts``; ``items``, ``sessions`` and ``maintenance`` stand beside them. Each room's
``__init__`` says what it may import, and tests/test_import_graph.py holds it to that; the
whole package imports :mod:`scoring` and never :mod:`unified_memory`.

May import (the modules at the top): :mod:`tiers.indexes`, :mod:`tiers.storage`,
:mod:`tiers.records`, :mod:`scoring`.
"""
