"""Core benchmark: write N synthetic facts into a durable memory file, then time recall.

Usage::

    python benchmarks/core.py --facts 100000 --queries 300

Reports bulk write throughput (``remember_many``), single ``add_turn`` throughput,
lexical recall p50/p95 (limit 10) and ``context(max_tokens=2000)`` p50, and writes
the lines to ``benchmarks/results/core.md``. Facts come from seeded templates with
a varied vocabulary, so runs are repeatable.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _synthetic import NOUNS, PLACES, percentile, queries, synthetic_facts  # noqa: E402

from unified_memory import UnifiedMemory  # noqa: E402


def run(n_facts: int, n_queries: int, path: Path) -> list[str]:
    lines = []
    facts = synthetic_facts(n_facts)
    with UnifiedMemory(path, long_term_limit=None, user_id="bench", retrieval="lexical") as mem:
        start = time.perf_counter()
        for i in range(0, n_facts, 5000):
            mem.remember_many(facts[i:i + 5000])
        elapsed = time.perf_counter() - start
        lines.append(f"bulk write (remember_many, batches of 5000): {n_facts} facts in {elapsed:.1f} s = "
                     f"{n_facts / elapsed:,.0f} facts/s")

        turns = 500
        start = time.perf_counter()
        for i in range(turns):
            mem.add_turn(f"Turn {i}: I walked past the {NOUNS[i % len(NOUNS)]} shop in {PLACES[i % 20]}",
                         "Sounds nice.")
        elapsed = time.perf_counter() - start
        lines.append(f"single add_turn (user + assistant, durable): {turns / elapsed:,.0f} turns/s")

        qs = queries(n_queries)
        mem.recall(qs[0])  # the first recall builds the in-memory index from the file
        timings = []
        for q in qs:
            t0 = time.perf_counter()
            mem.recall(q, limit=10)
            timings.append((time.perf_counter() - t0) * 1000)
        lines.append(f"lexical recall (limit 10) over {n_facts} facts: p50 {percentile(timings, 0.5):.2f} ms, "
                     f"p95 {percentile(timings, 0.95):.2f} ms ({n_queries} queries)")

        ctx = []
        for q in qs[:100]:
            t0 = time.perf_counter()
            block = mem.context(q, max_tokens=2000)
            ctx.append((time.perf_counter() - t0) * 1000)
            assert block.tokens <= 2000
        lines.append(f"context(max_tokens=2000) over {n_facts} facts: p50 {percentile(ctx, 0.5):.2f} ms, "
                     f"p95 {percentile(ctx, 0.95):.2f} ms")
    start = time.perf_counter()
    with UnifiedMemory(path, long_term_limit=None, user_id="bench", retrieval="lexical") as mem:
        mem.recall("vintage bicycles in Lisbon")
    lines.append(f"reopen + first recall (rebuilds the index from SQLite): {time.perf_counter() - start:.2f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "core.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lines = run(args.facts, args.queries, Path(tmp) / "bench.db")
    header = (f"# Core benchmark\n\nCommand: `python benchmarks/core.py --facts {args.facts} --queries "
              f"{args.queries}`\n\nMachine: {platform.processor() or platform.machine()}, "
              f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d')}\n\n")
    for line in lines:
        print(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(header + "\n".join(f"- {line}" for line in lines) + "\n")


if __name__ == "__main__":
    main()
