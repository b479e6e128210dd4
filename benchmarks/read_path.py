"""Read path at scale: ``recall(q, limit=10)`` and ``context(q, max_tokens=2000)`` on one file.

    python benchmarks/read_path.py [--facts 100000] [--queries 100] [--file /tmp/read_path_100000.db]
        [--mode lexical|hashing] [--profile recall|context] [--top 30] [--dump results.json] [--breakdown]

Builds the file once (seeded ``_synthetic.py`` facts through ``remember_many`` in batches of 5,000,
``retrieval="lexical"``, then 500 turns, as ``scale.py``'s lexical mode; ``--mode hashing``: hybrid retrieval
with ``HashingEmbedder(384)`` as ``scale.py``'s hashing mode, default file ``/tmp/read_path_hashing_<n>.db``) and reuses it on later runs (delete it to
rebuild). Then opens it, runs one unmeasured warm-up recall (it builds the in-memory indexes) and
times ``--queries`` distinct queries for each call: p50 / p95 wall milliseconds, plus the CPU
seconds of the whole loop (steadier on a shared machine). ``--profile`` runs cProfile over the same
loop of one call instead and prints the ``--top`` functions by cumulative and by own time.
``--breakdown`` splits the CPU time of ``context`` into its stages instead (each tier's search with its
lexical index and row reads, scoring, diversity, hit records, assembly; wrapped calls, so the total runs a
little slower than unwrapped). ``--dump`` writes every hit (id, text, score) and every context text instead (on a copy of the file, with a
fixed clock and no reinforcement recorded), to compare two versions of the code on one file.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _synthetic import NOUNS, PLACES, distinct_queries, facts_with_needles, labelled_needles, percentile  # noqa: E402

BATCH = 5000


MODE = "lexical"  # or "hashing" (--mode)


def _open(path: Path, clock: Any = None) -> Any:
    from unified_memory import UnifiedMemory

    if MODE == "hashing":
        from scoring.embeddings import HashingEmbedder

        return UnifiedMemory(path, long_term_limit=None, user_id="bench", retrieval="hybrid",
                             embedder=HashingEmbedder(384), clock=clock)
    return UnifiedMemory(path, long_term_limit=None, user_id="bench", retrieval="lexical", clock=clock)


def dump(path: Path, qs: list[str], out: Path) -> None:
    """Every hit (text, score) and context text, on a copy of the file with a fixed clock and the
    recalls' reinforcement not recorded, so two versions of the code compare on the same state."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / path.name
        shutil.copy(path, copy)
        with _open(copy, clock=lambda: 1.9e9) as mem:
            from unified_memory.testing import internals  # a look under the memory, for measuring
            internals(mem).facts.touch = lambda *a, **k: None
            result = {"recall": [[[h.id, h.text, h.score] for h in mem.recall(q, limit=10)] for q in qs],
                      "context": [mem.context(q, max_tokens=2000).text for q in qs]}
    out.write_text(json.dumps(result, indent=0))


def breakdown(mem: Any, qs: list[str]) -> None:
    """CPU milliseconds per ``context`` call spent in each stage (nested stages are also in their parent's)."""
    from tiers import short_term
    from tiers.facts import long_term
    from tiers.graph import entities
    from tiers.indexes import documents, partitions
    from unified_memory.coordinator import read_api
    from unified_memory.retrieval import federation

    spent: dict[str, float] = {}

    def wrap(owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - start
        setattr(owner, name, timed)

    stages = [(read_api.ReadingAPI, "recall", "recall (all of it)"),
              (long_term.LongTermFacts, "recall_candidates", "  facts: search + candidates"),
              (entities.EntityGraph, "recall_candidates", "  entities: search + candidates"),
              (short_term.ShortTermWindow, "recall_candidates", "  messages: search + candidates"),
              (partitions.PartitionedIndex, "search", "    lexical index searches"),
              (documents.DocumentIndex, "_rows", "    row reads"),
              (federation, "_diverse", "  diversity"), (federation, "_recall_hit", "  hit records"),
              (read_api, "assemble", "assembly")]
    for owner, name, label in stages:
        wrap(owner, name, label)
    start = time.process_time()
    for q in qs:
        mem.context(q, max_tokens=2000)
    total = time.process_time() - start
    print(f"context cpu {total / len(qs) * 1000:6.2f} ms/query ({len(qs)} queries)")
    for _, _, label in stages:
        print(f"{label:34s} {spent.get(label, 0.0) / len(qs) * 1000:6.2f}")
    covered = sum(spent.get(label, 0.0) for _, _, label in stages[1:4] + stages[6:8])
    print(f"{'  scoring and the rest of recall':34s} {(spent['recall (all of it)'] - covered) / len(qs) * 1000:6.2f}")


def build(path: Path, n: int) -> None:
    """Write ``n`` facts into ``path`` unless the file is already there."""
    if path.exists():
        return
    facts = facts_with_needles(n, labelled_needles(50))
    tmp = path.with_name(path.name + ".building")
    for leftover in tmp.parent.glob(tmp.name + "*"):
        leftover.unlink()
    start = time.perf_counter()
    with _open(tmp) as mem:
        for i in range(0, n, BATCH):
            mem.remember_many(facts[i:i + BATCH])
        for i in range(500):  # as scale.py does before it measures reads: a full short-term window
            mem.add_turn(f"Turn {i}: I walked past the {NOUNS[i % len(NOUNS)]} shop in {PLACES[i % 20]}",
                         "Sounds nice.")
    print(f"built {n:,} facts in {time.perf_counter() - start:,.1f} s", flush=True)
    for leftover in sorted(tmp.parent.glob(tmp.name + "*")):
        leftover.rename(path.with_name(path.name + leftover.name[len(tmp.name):]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--file", type=Path, default=None)
    parser.add_argument("--mode", choices=["lexical", "hashing"], default="lexical")
    parser.add_argument("--profile", choices=["recall", "context"], default=None)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--dump", type=Path, default=None)
    parser.add_argument("--breakdown", action="store_true")
    args = parser.parse_args(argv)
    global MODE
    MODE = args.mode
    path = args.file or Path(f"/tmp/read_path_{'hashing_' if MODE == 'hashing' else ''}{args.facts}.db")
    build(path, args.facts)
    qs = distinct_queries(args.queries + 1)
    warm, qs = qs[0], qs[1:]
    if args.dump:
        dump(path, qs, args.dump)
        return
    with _open(path) as mem:
        t0 = time.perf_counter()
        mem.recall(warm, limit=10)
        print(f"open + first recall: {time.perf_counter() - t0:.2f} s")
        calls = {"recall": lambda q: mem.recall(q, limit=10),
                 "context": lambda q: mem.context(q, max_tokens=2000)}
        for _ in range(2):  # warm the caches of both calls once
            for q in qs[:10]:
                calls["recall"](q), calls["context"](q)
        if args.breakdown:
            breakdown(mem, qs)
            return
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for q in qs:
                calls[args.profile](q)
            prof.disable()
            stats = pstats.Stats(prof).strip_dirs()
            stats.sort_stats("cumulative").print_stats(args.top)
            stats.sort_stats("tottime").print_stats(args.top)
            return
        for name, fn in calls.items():
            times = []
            cpu = time.process_time()
            for q in qs:
                t0 = time.perf_counter()
                fn(q)
                times.append((time.perf_counter() - t0) * 1000)
            cpu = time.process_time() - cpu
            print(f"{name:8s} p50 {percentile(times, 0.5):6.2f} ms  p95 {percentile(times, 0.95):6.2f} ms  "
                  f"cpu {cpu / len(qs) * 1000:6.2f} ms/query  ({len(qs)} queries, {args.facts:,} facts)")


if __name__ == "__main__":
    main()
