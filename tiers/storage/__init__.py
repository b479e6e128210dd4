"""The database every tier lives in: the seam and its two engines.

- :mod:`tiers.storage.backend`: :class:`~tiers.storage.backend.Storage`, the seam the tiers talk
  to, whichever database it is.
- SQLite, the embedded default: :mod:`~tiers.storage.sqlite_backend`, :mod:`~tiers.storage.schema`
  (tables, versions, migrations), :mod:`~tiers.storage.sqlite_catalog`, :mod:`~tiers.storage.damage`
  (telling a damaged file from other errors).
- PostgreSQL: :mod:`~tiers.storage.postgres_backend`, :mod:`~tiers.storage.pg_schema`,
  :mod:`~tiers.storage.pg_catalog`, :mod:`~tiers.storage.pg_spares` (spare connections for
  readers), :mod:`~tiers.storage.pg_listener` (waking followers on commit).
- Both: :mod:`~tiers.storage.dialect` (the SQL they spell differently), :mod:`~tiers.storage.rows`
  (ids, JSON columns, filters), :mod:`~tiers.storage.table_info` and
  :mod:`~tiers.storage.user_tables` (which tables hold a user's rows), :mod:`~tiers.storage.writers`
  (writer turns per file), :mod:`~tiers.storage.journal` (what each write changed, for the
  other processes).

May import: :mod:`tiers.records`, :mod:`scoring`.
"""
