"""The tables of the database search path on PostgreSQL (docs/design/pg-search.md).

With the ``vector`` extension (pgvector) in the database, a memory on PostgreSQL keeps its
search indexes in tables, written in the same transaction as the rows they index, instead of
in each process's memory:

- ``search_docs``: one row per indexed document of a tier (``kind``: ``facts``,
  ``archived_facts``, ``entities``, ``messages``), with its length in terms and an insertion
  order (``seq``: BM25 ties rank the older document first, as in-process);
- ``search_postings``: one row per (document, term) with the term's frequency, the
  document's length and order copied in, so a query reads one index range per query term;
- ``search_terms``: how many documents of the user's tier hold each term (BM25's ``df``);
- ``search_stats``: documents and total length per user and tier (``N`` and ``avgdl``). Its row
  also says the user's tier is filled: a user without one is filled from the tier's rows
  on first use (:mod:`tiers.indexes.sql_lexical`), once for every host;
- ``search_models``: one vector table per embedding model (``search_vectors_<hash>``, its
  dimension fixed, with an HNSW index for cosine distance over the rows of large users' tiers),
  and ``search_filled``: which users' tiers each vector table holds, and which of them are large.

Every table is derived from the tiers' rows (:data:`tiers.storage.user_tables.DERIVED_PREFIX`):
never exported, deleted with its user, rebuilt by ``reindex``.

    >>> [s.split("(")[0].split()[5] for s in statements(SEARCH_PG)][:4]
    ['search_docs', 'search_docs_seq', 'search_postings', 'search_postings_doc']
    >>> vector_table("all-MiniLM-L6-v2")
    'search_vectors_a2ecbc46b38c'
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from scoring.errors import StorageError
from tiers.storage.pg_schema import statements

__all__ = ["SEARCH_PG", "SEARCH_VERSION", "MIN_PGVECTOR", "vector_table", "vector_table_ddl", "extension_state", "prepare_search",
           "statements"]

#: The version of these tables, in ``meta`` under ``search_schema``.
SEARCH_VERSION = 1
#: The oldest pgvector used: 0.8.0 brought the iterative index scans a filtered HNSW search needs.
MIN_PGVECTOR = (0, 8, 0)


def _version(text: str) -> tuple[int, ...]:
    """``"0.8.2"`` as ``(0, 8, 2)`` (a part that is not a number counts as 0).

    >>> _version("0.8.2") >= MIN_PGVECTOR, _version("0.7.4") >= MIN_PGVECTOR
    (True, False)
    """
    return tuple(int(part) if part.isdigit() else 0 for part in text.split("."))

SEARCH_PG = """
CREATE TABLE IF NOT EXISTS search_docs (
    user_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    length INTEGER NOT NULL,
    seq BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (user_id, kind, id)
);
CREATE INDEX IF NOT EXISTS search_docs_seq ON search_docs(user_id, kind, seq);
CREATE TABLE IF NOT EXISTS search_postings (
    user_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    term TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    tf INTEGER NOT NULL,
    length INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (user_id, kind, term, id) INCLUDE (tf, length, seq)
);
CREATE INDEX IF NOT EXISTS search_postings_doc ON search_postings(user_id, kind, id);
CREATE TABLE IF NOT EXISTS search_terms (
    user_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    term TEXT COLLATE "C" NOT NULL,
    df INTEGER NOT NULL,
    PRIMARY KEY (user_id, kind, term)
);
CREATE TABLE IF NOT EXISTS search_stats (
    user_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    docs BIGINT NOT NULL,
    total_length BIGINT NOT NULL,
    PRIMARY KEY (user_id, kind)
);
CREATE TABLE IF NOT EXISTS search_models (
    table_name TEXT COLLATE "C" PRIMARY KEY,
    model TEXT COLLATE "C" NOT NULL,
    dims INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS search_filled (
    user_id TEXT COLLATE "C" NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    part TEXT COLLATE "C" NOT NULL,
    approximate BOOLEAN NOT NULL DEFAULT false,
    PRIMARY KEY (user_id, kind, part)
)
"""

_TABLE = re.compile(r"search_vectors_[0-9a-f]{12}")


def vector_table(model: str) -> str:
    """The name of the vector table of ``model``: ``search_vectors_`` and 12 hex digits of its hash
    (a name built only from hex digits: safe to write into DDL and queries)."""
    return "search_vectors_" + hashlib.blake2b(model.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def vector_table_ddl(table: str, dims: int) -> list[str]:
    """The statements that create the vector table ``table`` of ``dims`` dimensions and its HNSW
    index (cosine distance), if missing. The index holds only the rows marked ``approximate``:
    those of users' tiers too large to compare every vector (:mod:`tiers.indexes.db_vectors`), so
    the many small users never pay for HNSW inserts."""
    if not _TABLE.fullmatch(table) or isinstance(dims, bool) or not isinstance(dims, int) or not 0 < dims <= 16000:
        raise ValueError(f"vector table {table!r} of {dims!r} dimensions")
    return [f'CREATE TABLE IF NOT EXISTS {table} (user_id TEXT COLLATE "C" NOT NULL, kind TEXT COLLATE "C" NOT NULL, '
            f'id TEXT COLLATE "C" NOT NULL, embedding vector({dims}) NOT NULL, '
            "approximate BOOLEAN NOT NULL DEFAULT false, PRIMARY KEY (user_id, kind, id))",
            f"CREATE INDEX IF NOT EXISTS {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) "
            "WHERE approximate"]


def extension_state(conn: Any) -> tuple[str | None, str | None]:
    """``(installed version, available version)`` of the ``vector`` extension in this database
    (``None`` for either when it is not)."""
    row = conn.execute("SELECT (SELECT extversion FROM pg_extension WHERE extname = 'vector'), "
                       "(SELECT default_version FROM pg_available_extensions WHERE name = 'vector')").fetchone()
    return row[0], row[1]


def prepare_search(conn: Any, where: str) -> str | None:
    """Make the database search path ready on ``conn`` (autocommit): create the ``vector``
    extension when the server has it and we may, then the tables of :data:`SEARCH_PG`, in one
    transaction holding the schema lock. Returns ``None`` when ready, else why not (the memory
    then searches in-process: pgvector not installed on the server, or no right to create it)."""
    import psycopg

    from tiers.storage.pg_schema import LOCK_KEY

    installed, available = extension_state(conn)
    if installed is None and available is None:
        return (f"{where}: the server has no pgvector (the 'vector' extension): searching in-process "
                "(install pgvector on the server and CREATE EXTENSION vector, see docs/deployment.md)")
    version = installed or available or ""
    if _version(version) < MIN_PGVECTOR:
        return (f"{where}: pgvector {version} is older than {'.'.join(map(str, MIN_PGVECTOR))} (its HNSW scans "
                "cannot filter by user): searching in-process (ALTER EXTENSION vector UPDATE)")
    ready = conn.execute("SELECT value FROM meta WHERE key = 'search_schema'").fetchone()
    if installed is not None and ready is not None and ready[0] == str(SEARCH_VERSION):
        return None  # already there: opening writes nothing
    errors = psycopg.errors
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s || current_schema()))", [LOCK_KEY])
            if installed is None:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            for statement in statements(SEARCH_PG):
                conn.execute(statement)
            conn.execute("INSERT INTO meta (key, value) VALUES ('search_schema', %s) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value", [str(SEARCH_VERSION)])
    except errors.InsufficientPrivilege as exc:
        return (f"{where}: pgvector is on the server but this role may not create it ({exc.diag.message_primary}): "
                "searching in-process (as an administrator: CREATE EXTENSION vector)")
    except errors.Error as exc:
        raise StorageError(f"path: {where}: could not create the search tables: {exc}", field="path") from None
    return None
