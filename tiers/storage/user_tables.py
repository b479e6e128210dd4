"""Which tables hold a user's data: discovered from the database's catalog (every table with a
``user_id`` column, :meth:`~tiers.storage.backend.Storage.table_infos`, so a table added later by another
module is covered), ordered
so that a table comes after the tables its foreign keys reference. Export, import
(:mod:`tiers.maintenance.row_export`) and deletion (:mod:`tiers.maintenance.deletion`) all work from this list.

    >>> from tiers.storage.backend import Storage
    >>> [t.name for t in export_tables(Storage(None))][:3]
    ['messages', 'window', 'facts']
"""

from __future__ import annotations

from tiers.storage.backend import Storage
from tiers.storage.table_info import Column, TableInfo, quote_name

__all__ = ["Column", "TableInfo", "DERIVED_TABLES", "DERIVED_PREFIX", "is_derived", "user_tables", "export_tables", "users_in", "quote_name"]

#: Tables derived from the others (rebuilt on demand): deleted with their user, never exported.
DERIVED_TABLES = frozenset({"embeddings", "index_journal", "index_snapshots"})
#: The database search path's tables (:mod:`tiers.storage.pg_search_schema`) are derived too.
DERIVED_PREFIX = "search_"


def is_derived(name: str) -> bool:
    """Whether the table ``name`` is derived from the others (see :data:`DERIVED_TABLES`).

    >>> is_derived("embeddings"), is_derived("search_postings"), is_derived("facts")
    (True, True, False)
    """
    return name in DERIVED_TABLES or name.startswith(DERIVED_PREFIX)
# Preferred order of the known tables (foreign keys still come first).
_PREFERRED = ("messages", "window", "facts", "entities", "triples", "summaries")


def user_tables(storage: Storage) -> list[TableInfo]:
    """Every table with a ``user_id`` column, referenced tables before the tables
    referencing them (known tables in a fixed order, others by name).

    >>> from tiers.storage.backend import Storage
    >>> [t.name for t in user_tables(Storage(None))]
    ['messages', 'window', 'facts', 'entities', 'triples', 'summaries', 'keyed_items', 'embeddings',
     'index_journal', 'index_snapshots']
    """
    infos = storage.table_infos()
    rank = {name: i for i, name in enumerate(_PREFERRED)}
    pending = sorted(infos, key=lambda n: (is_derived(n), rank.get(n, len(rank)), n))
    ordered: list[str] = []
    while pending:
        ready = next((n for n in pending if all(t in ordered or t == n or t not in infos
                                                for _, t, _ in infos[n].references)), pending[0])
        ordered.append(ready)
        pending.remove(ready)
    return [infos[n] for n in ordered]


def export_tables(storage: Storage) -> list[TableInfo]:
    """The user-scoped tables that are exported (all but :data:`DERIVED_TABLES`).

    >>> from tiers.storage.backend import Storage
    >>> "embeddings" in [t.name for t in export_tables(Storage(None))]
    False
    """
    return [t for t in user_tables(storage) if not is_derived(t.name)]


def users_in(storage: Storage) -> list[str]:
    """Every user with a row in an exported table, sorted.

    >>> from tiers.storage.backend import Storage
    >>> users_in(Storage(None))
    []
    """
    found: set[str] = set()
    for table in export_tables(storage):
        found.update(r[0] for r in storage.execute(f"SELECT DISTINCT user_id FROM {quote_name(table.name)}"))
    return sorted(found)
