"""Recall latency on one long conversation, query embedding included (target: p50 <= 15 ms at 600 turns).

    python benchmarks/recall_latency.py [--data PATH/locomo_dev.json] [--turns 600] [--queries 200]
        [--retrieval hybrid [lexical ...]] [--threads 1 2] [--out benchmarks/results/recall_latency.md]

Conversation: with ``--data`` (default ``/work/shared/data/locomo/locomo_dev.json`` when it exists) the
first ``--turns`` LoCoMo turns, conversations concatenated in order (loaded as in ``benchmarks/locomo.py``);
queries = the data's questions, distinct strings in file order. Without data (``--data none`` or a
missing default): a seeded synthetic conversation (hobbies, places, people, dates) and seeded distinct
synthetic questions. Dataset text is only read, never written to the repository or the report.

For each retrieval mode and each ``--threads`` value (``torch.set_num_threads`` before the run):

1. a fresh in-memory ``UnifiedMemory(None, user_id="bench", retrieval=mode)``; every turn goes in through
   ``add_message("user", text, name=speaker, when=..., metadata={"dia_id": ...})`` ("ingest s");
2. one warm-up ``recall`` on a string that is not a measured query, not measured ("warm-up s"; it
   builds derived indexes; the model itself is loaded once per process before the first run);
3. each query once: ``mem.recall(q, limit=10)`` timed with ``time.perf_counter()`` -> p50 / p95 / mean.
   The memory's query-embedding cache (``EmbeddingCache.query_vector``: an in-memory LRU of the last 256
   query strings, per memory, keyed by the exact string) is fresh and every measured query is a distinct
   string never recalled before, so every measured recall embeds its query; the report shows the
   embedder's call count during the measured recalls to prove it;
4. the query embedding alone: right after each recall, the same query through the embedder the memory
   uses (``embedder.embed([q])``, the process-wide ``shared_default_embedder()``, which has no cache)
   -> "embed p50"; "rest p50" = median over queries of (recall ms - embed ms), i.e. everything but
   the embedding. Interleaving keeps both timings under the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the MiniLM model is bundled; never reach the network
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, publish  # noqa: E402
from locomo import Turn, load_turns  # noqa: E402

from unified_memory import UnifiedMemory  # noqa: E402

DEFAULT_DATA = Path("/work/shared/data/locomo/locomo_dev.json")
TARGET_MS = 15.0
WARMUP_QUERY = "warm-up query that is never measured"

PEOPLE = ["Maya", "Jon", "Priya", "Tomas", "Aiko", "Lena", "Omar", "Grace", "Diego", "Nina", "Felix", "Zara"]
RELATIONS = ["my sister", "my brother", "my boss", "my neighbour", "my cousin", "my coach", "my landlord",
             "my best friend", "my grandmother", "my roommate"]
HOBBIES = ["pottery", "rock climbing", "sourdough baking", "birdwatching", "salsa dancing", "chess",
           "trail running", "watercolour painting", "beekeeping", "kayaking", "knitting", "astronomy",
           "woodworking", "jazz piano", "urban sketching", "gardening", "surfing", "photography"]
PLACES = ["Lisbon", "Porto", "Berlin", "Oslo", "Kyoto", "Austin", "Lyon", "Turin", "Ghent", "Quito", "Perth",
          "Dakar", "Hanoi", "Bergen", "Split", "Cusco", "Tartu", "Malmo", "Leeds", "Graz"]
EVENTS = ["a workshop", "a marathon", "a wedding", "a job interview", "a concert", "a book club meeting",
          "a family dinner", "a hackathon", "a camping trip", "a charity run", "an exhibition", "a street festival"]
FEELINGS = ["excited", "nervous", "exhausted", "proud", "relieved", "curious", "a bit homesick", "thrilled"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


# -- workload ------------------------------------------------------------------------------------


def synthetic_conversation(n: int, seed: int = 7) -> list[Turn]:
    """Two speakers chatting in sessions of 12-25 turns, a few days apart; seeded, so repeatable."""
    rng = random.Random(seed)
    a, b = rng.sample(PEOPLE, 2)
    shapes = [
        lambda: f"I started {rng.choice(HOBBIES)} with {rng.choice(RELATIONS)} last week, I feel {rng.choice(FEELINGS)}.",
        lambda: f"We are going to {rng.choice(PLACES)} on {rng.randint(1, 28)} {rng.choice(MONTHS)} for {rng.choice(EVENTS)}.",
        lambda: f"{rng.choice(RELATIONS).capitalize()} just moved to {rng.choice(PLACES)} and loves {rng.choice(HOBBIES)}.",
        lambda: f"Did you ever try {rng.choice(HOBBIES)}? {rng.choice(PEOPLE)} says it's great in {rng.choice(PLACES)}.",
        lambda: f"I went to {rng.choice(EVENTS)} with {rng.choice(PEOPLE)} and felt {rng.choice(FEELINGS)} afterwards.",
        lambda: f"My plan for {rng.choice(MONTHS)}: more {rng.choice(HOBBIES)} and less work, maybe a trip to {rng.choice(PLACES)}.",
        lambda: f"That sounds {rng.choice(['amazing', 'tough', 'fun', 'wild', 'lovely'])}! How did {rng.choice(RELATIONS)} take it?",
    ]
    turns: list[Turn] = []
    start, session = datetime(2023, 1, 3, 18, 0, tzinfo=UTC), 0
    while len(turns) < n:
        session += 1
        date = start.strftime("%I:%M %p on %d %B, %Y")
        for i in range(min(rng.randint(12, 25), n - len(turns))):
            turns.append(Turn(f"D{session}:{i + 1}", (a, b)[i % 2], rng.choice(shapes)(),
                              start + timedelta(minutes=i), session, date))
        start += timedelta(days=rng.randint(2, 9), hours=rng.randint(-3, 3))
    return turns


def synthetic_questions(n: int, seed: int = 11) -> list[str]:
    """``n`` distinct seeded questions about the synthetic conversation's vocabulary."""
    rng = random.Random(seed)
    shapes = [
        lambda: f"When did {rng.choice(PEOPLE)} go to {rng.choice(PLACES)}?",
        lambda: f"Who started {rng.choice(HOBBIES)} with {rng.choice(RELATIONS)}?",
        lambda: f"What hobby does {rng.choice(RELATIONS)} have in {rng.choice(PLACES)}?",
        lambda: f"How did {rng.choice(PEOPLE)} feel after {rng.choice(EVENTS)}?",
        lambda: f"What are the plans for {rng.choice(MONTHS)} involving {rng.choice(HOBBIES)}?",
    ]
    out: dict[str, None] = {}
    while len(out) < n:
        out[rng.choice(shapes)()] = None
    return list(out)


def locomo_workload(path: Path, n_turns: int, n_queries: int) -> tuple[list[Turn], list[str], int]:
    """The first ``n_turns`` turns (conversations in order), the first ``n_queries`` distinct questions
    (those of the conversations used first, then the others) and how many conversations were used."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    turns: list[Turn] = []
    used = 0
    for sample in samples:
        if len(turns) >= n_turns:
            break
        turns += load_turns(sample)
        used += 1
    questions = dict.fromkeys(qa["question"] for sample in samples[:used] + samples[used:]
                              for qa in sample["qa"] if qa.get("question"))
    questions.pop(WARMUP_QUERY, None)
    return turns[:n_turns], list(questions)[:n_queries], used


# -- measurement ---------------------------------------------------------------------------------


def embedder_calls(mem: UnifiedMemory) -> int | None:
    """How often the memory's embedding cache called the embedder (None when lexical / not exposed)."""
    dense = getattr(getattr(mem, "_backend", None), "dense", None)
    return getattr(getattr(dense, "cache", None), "embed_calls", None)


def run_once(turns: list[Turn], queries: list[str], retrieval: str, threads: int | None) -> dict:
    """One fresh memory: ingest, warm up, time every query's recall (and its embedding alone)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    row: dict = {"retrieval": retrieval, "threads": torch.get_num_threads(), "turns": len(turns),
                 "queries": len(queries)}
    start = time.perf_counter()
    mem = UnifiedMemory(None, user_id="bench", retrieval=retrieval)
    for t in turns:
        mem.add_message("user", t.text, name=t.speaker, when=t.when, metadata={"dia_id": t.dia_id})
    row["ingest_s"] = time.perf_counter() - start
    with mem:
        start = time.perf_counter()
        mem.recall(WARMUP_QUERY, limit=10)
        row["warmup_s"] = time.perf_counter() - start
        from unified_memory.testing import internals  # a look under the memory, for measuring
        dense = internals(mem).dense  # the memory's own embedder, to time the query embedding alone
        embedder = dense.embedder if dense is not None else None
        timings, embeds = [], []
        for q in queries:
            calls = embedder_calls(mem)
            t0 = time.perf_counter()
            mem.recall(q, limit=10)
            timings.append((time.perf_counter() - t0) * 1000)
            if calls is not None:
                row["embed_calls"] = row.get("embed_calls", 0) + embedder_calls(mem) - calls
            if embedder is not None:  # right after, so both see the same machine load
                t0 = time.perf_counter()
                embedder.embed([q])
                embeds.append((time.perf_counter() - t0) * 1000)
        row.setdefault("embed_calls", None)
        row["mode"] = mem.retrieval
    row.update(p50=float(np.percentile(timings, 50)), p95=float(np.percentile(timings, 95)),
               mean=float(np.mean(timings)))
    if embeds:
        row["embed_p50"] = float(np.percentile(embeds, 50))
        row["rest_p50"] = float(np.percentile(np.subtract(timings, embeds), 50))
    return row


# -- report --------------------------------------------------------------------------------------


def table(rows: list[dict]) -> str:
    lines = ["| retrieval | torch threads | turns | queries | recall p50 ms | p95 ms | mean ms | "
             "query embed p50 ms | rest p50 ms | embedder calls / queries | ingest s | warm-up s | "
             f"p50 <= {TARGET_MS:g} ms |",
             "|---" * 13 + "|"]
    for r in rows:
        embed = r.get("embed_p50")
        rest = "–" if embed is None else f"{r['rest_p50']:.2f}"
        calls = "–" if r["embed_calls"] is None else f"{r['embed_calls']} / {r['queries']}"
        lines.append(
            f"| {r['mode']} | {r['threads']} | {r['turns']} | {r['queries']} | {r['p50']:.2f} | {r['p95']:.2f} | "
            f"{r['mean']:.2f} | {'–' if embed is None else f'{embed:.2f}'} | "
            f"{rest} | {calls} | {r['ingest_s']:.2f} | "
            f"{r['warmup_s']:.2f} | {'yes' if r['p50'] <= TARGET_MS else 'no'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA) if DEFAULT_DATA.exists() else "none",
                        help="LoCoMo json; 'none' = synthetic conversation")
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--retrieval", nargs="+", default=["hybrid"], help="one or more retrieval modes")
    parser.add_argument("--threads", type=int, nargs="+", default=[0],
                        help="torch.set_num_threads(N) before each run (0 = torch's default)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "recall_latency.md")
    args = parser.parse_args(argv)

    import torch  # noqa: F401  (imported before any thread setting so set_num_threads applies everywhere)

    version = library_version()
    if args.data.lower() != "none":
        data = Path(args.data)
        turns, queries, used = locomo_workload(data, args.turns, args.queries)
        source = f"`{data.name}` (LoCoMo): first {len(turns)} turns of {used} conversation(s), {len(queries)} distinct questions"
    else:
        turns, queries = synthetic_conversation(args.turns), synthetic_questions(args.queries)
        source = f"synthetic (seeded): {len(turns)} turns, {len(queries)} distinct questions"
    print(source, file=sys.stderr)

    model_load = None
    if any(r != "lexical" for r in args.retrieval):  # load the shared model once, outside every run
        from unified_memory.retrieval.method import shared_default_embedder

        embedder = shared_default_embedder()
        if embedder is not None:
            start = time.perf_counter()
            embedder.embed(["load the model"])
            model_load = time.perf_counter() - start

    load_before = os.getloadavg()[0]
    rows = []
    for retrieval in args.retrieval:
        for threads in args.threads:
            rows.append(run_once(turns, queries, retrieval, threads or None))
            r = rows[-1]
            print(f"{r['mode']} threads={r['threads']}: p50 {r['p50']:.2f} ms", file=sys.stderr)

    notes = [
        f"Workload: {source}; `recall(q, limit=10)`, one call per query, each query a distinct string.",
        "Query cache: each run uses a fresh memory whose query-embedding LRU (per memory, exact string) has "
        "never seen the measured queries, so every measured recall embeds its query; "
        "'embedder calls / queries' counts the embedder calls made during the measured recalls.",
        "query embed p50 = `embedder.embed([q])` alone for the same queries (the embedder the memory uses, "
        "no cache), timed right after each recall; rest p50 = median over queries of (recall - embed): "
        "retrieval, fusion and hit building without the embedding.",
        "ingest s = all add_message calls; warm-up s = the first (unmeasured) recall on a fresh memory"
        + (f"; model load (once per process, before the runs): {model_load:.2f} s." if model_load else "."),
    ]
    notes.append(f"1-minute load average before / after the runs: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
                 f"(other processes on these {os.cpu_count()} CPUs inflate the timings, most with 2+ threads).")
    now = library_version()
    if now.split("sources ")[-1] != version.split("sources ")[-1]:
        notes.append(f"WARNING: the library's sources changed during the run (now {now}).")
    text = "\n\n".join([
        "# Recall latency (query embedding included)",
        f"Command: `python {' '.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}`",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, torch {torch.__version__}, "
        f"{datetime.now().date().isoformat()}; library at {version}",
        f"Target: recall p50 <= {TARGET_MS:g} ms on a 600-turn conversation, query embedding included.",
        table(rows), "\n".join(f"- {n}" for n in notes)]) + "\n"
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
