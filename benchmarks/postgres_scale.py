"""The scale benchmark on PostgreSQL beside SQLite: the same facts, turns and queries
(benchmarks/scale.py's ``run_ours``, each run in a fresh interpreter) on a SQLite file and on a
PostgreSQL database, at each size.

    python benchmarks/postgres_scale.py --sizes 10000 100000 --out benchmarks/results/postgres_scale.md
    python benchmarks/postgres_scale.py --url postgresql://user@host/postgres   # a server of yours
    python benchmarks/postgres_scale.py --mode hashing --pgvector   # hybrid, and the database search path

Without ``--url`` a PostgreSQL 15 server is started on loopback for the run (tests/pg_server.py,
``fsync=off``: durability is not what is measured). Each PostgreSQL run gets a new database.
``--pgvector`` adds a third backend: a PostgreSQL with pgvector (tests/pgvector_server.py), where
the memory searches in the database (docs/design/pg-search.md). ``--mode hashing`` runs hybrid
retrieval with the feature-hashing embedder (benchmarks/scale.py's modes).
Targets: recall p50 on PostgreSQL within 2x of SQLite at 100,000 facts (issue 19; issue 39 for the
database search path, with embeddings).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402
from _report import library_version, machine  # noqa: E402


def new_database(base: str, prefix: str = "scale") -> str:
    """A new, empty database on ``base``'s server (named ``prefix_`` and a random suffix): its URL."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
    return f"{base.rsplit('/', 1)[0]}/{name}"


def _row(size: int, backend: str, res: dict[str, Any]) -> str:
    if res.get("status") != "ok":
        return f"| {size:,} | {backend} | {res.get('status')}: {res.get('reason', '')} |||||||||"
    q = res["quality"]
    return (f"| {size:,} | {backend} | {res['write_rate']:,.0f} | {res['turn_rate']:,.0f} | "
            f"{res['recall']['p50']:.2f} / {res['recall']['p95']:.2f} | {res['context']['p50']:.2f} | "
            f"{res['follower']['p50']:.2f} | {res['reopen_s']:.2f} | {q['r@1']:.2f} / {q['r@5']:.2f} | "
            f"{res['rss_mb']:,.0f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--url", help="a PostgreSQL server's database to create databases from")
    parser.add_argument("--mode", default="lexical", choices=["lexical", "hashing"],
                        help="lexical (BM25), or hybrid with the feature-hashing embedder")
    parser.add_argument("--pgvector", action="store_true",
                        help="also a PostgreSQL with pgvector: the database search path")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "postgres_scale.md")
    args = parser.parse_args(argv)
    server = None
    base = args.url
    if base is None:
        from tests.pg_server import start_postgres

        server = start_postgres(Path(tempfile.mkdtemp(prefix="um-pg-scale-")))
        base = server.url
    vector_server = None
    backends = ["sqlite", "postgresql"]
    if args.pgvector:
        from tests.pgvector_server import MISSING, find_bindir, start_pgvector_server

        if find_bindir() is None:
            parser.error(f"--pgvector: {MISSING}")
        vector_server = start_pgvector_server("um-pgv-scale-")
        backends.append("pgvector")
    work = Path(tempfile.mkdtemp(prefix="um-scale-"))
    results: dict[tuple[int, str], dict[str, Any]] = {}
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    try:
        for size in args.sizes:
            for backend in backends:
                target = (str(work / f"scale-{size}.db") if backend == "sqlite" else new_database(base)
                          if backend == "postgresql" else new_database(vector_server.url))
                spec = {"size": size, "mode": args.mode, "queries": args.queries, "path": target, "budget": 3600.0}
                results[(size, backend)] = scale.spawn(spec, timeout=7200)
    finally:
        if server is not None:
            server.stop()
        if vector_server is not None:
            vector_server.stop()
    lines = [
        "# Scale on PostgreSQL beside SQLite (issue 19)", "",
        f"`python benchmarks/postgres_scale.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
        f"{started} UTC, {machine()}, library {library_version()}. "
        + ("Lexical retrieval (BM25)" if args.mode == "lexical" else
           "Hybrid retrieval, feature-hashing embedder") + ", one process, "
        "the server on loopback (PostgreSQL 15, fsync off; `pgvector`: PostgreSQL 17 with pgvector, the "
        "database search path). Columns as in benchmarks/scale.py: bulk "
        "`remember_many` facts/s; durable `add_turn`/s; `recall(limit=10)` p50 / p95 ms; `context(2,000 tokens)` "
        "p50 ms; a second connection's recall right after the writer's turn (follows the journal) p50 ms; "
        "reopen + first recall s; needle R@1 / R@5; peak RSS MB.", "",
        "| facts | backend | write/s | turns/s | recall p50 / p95 ms | context p50 ms | follower p50 ms | "
        "reopen s | R@1 / R@5 | RSS MB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_row(size, backend, results[(size, backend)]) for size in args.sizes for backend in backends]
    verdicts = []
    for size in args.sizes:
        lite = results[(size, "sqlite")]
        for backend in backends[1:]:
            pg = results[(size, backend)]
            if lite.get("status") == pg.get("status") == "ok":
                ratio = pg["recall"]["p50"] / lite["recall"]["p50"]
                verdicts.append(f"- {size:,} facts: recall p50 on {backend} is {ratio:.2f}x SQLite's"
                                + (" (target at 100,000: within 2x: **met**)" if size == 100_000 and ratio <= 2
                                   else " (target at 100,000: within 2x: **missed**)" if size == 100_000 else ""))
    lines += ["", *verdicts, ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
