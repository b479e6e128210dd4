"""What runs over a user's rows as a whole, and the service's keys.

- :mod:`~tiers.maintenance.row_export` and :mod:`~tiers.maintenance.row_import`: a user's rows out
  and back in, every reference resolved inside the importing user; :mod:`~tiers.maintenance.row_parsing`
  checks an export's lines before anything is written.
- :mod:`~tiers.maintenance.deletion`: deleting a user's rows, or some items with what derives from them.
- :mod:`~tiers.maintenance.ingested`: which messages of a chat-log file were already ingested.
- :mod:`~tiers.maintenance.keys`: the memory service's API keys, kept in the memory's database.

May import: :mod:`tiers.indexes`, :mod:`tiers.storage`, :mod:`tiers.records`, :mod:`scoring`.
"""
