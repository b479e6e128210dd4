"""Embedding-only recall at 300,000 facts for one user (issue 20's vector row).

    python benchmarks/vector_scale.py [--size 300000] [--queries 500] [--dir DIR]
        [--out benchmarks/results/vector_scale.md]

Text-like vectors: ``HashingEmbedder(384)`` (feature hashing, no model), ``retrieval="embedding"``,
the default numpy vector index (from ``approximate_above`` a scan of binary codes re-scored
exactly; saved beside the file at close and memory-mapped at reopen). Two fresh child processes,
so that each peak RSS (``ru_maxrss``) is its own:

1. *write*: ``remember_many`` of the synthetic facts (batches of 5,000) into a new file; one
   recall, which loads the user's vectors from the embedding cache and encodes their binary
   codes; then R@1 on stored texts — the query is a stored fact's exact text (a seeded sample of
   ``--queries``), is that fact (or one with the same text) first? — and recall p50 over those
   queries (``recall(q, limit=10)``); close (which saves vectors and codes).
2. *reopen*: in an interpreter that has imported the library (as ``scale.py``'s reopen), open the
   file and recall once (the saved vectors and codes are mapped and brought in step with the
   store): ``reopen + first recall``; then R@1 and p50 as above; then R@1 again
   with ``ranking.dense_ceiling=0.7``, hybrid retrieval's cap (every cosine from 0.7 up a full match,
   so near-duplicate templates tie with the exact text and other signals decide; embedding-only
   retrieval's default ceiling is 1.0).

R@1 is measured two ways: through ``recall()`` (the issue's measure, the ranking included), and of
the vector index alone (``PartitionedVectors.search``: is the fact its nearest neighbour?).

The report is a section to paste into ``benchmarks/results/issue20_scale_targets.md``, with the command and the targets.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, machine, publish  # noqa: E402
from _synthetic import distinct_queries, percentile, synthetic_facts  # noqa: E402

BATCH = 5000
DIM = 384


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class _AnonPeak:
    """The peak of the process's anonymous memory (``RssAnon``, Linux), sampled every 50 ms by a
    thread: ``ru_maxrss`` also counts the SQLite file's pages mapped into the process
    (``mmap_size``; clean, shared with the page cache), up to 1 GiB."""

    def __init__(self) -> None:
        import threading

        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    self.peak_mb = max(self.peak_mb, int(line.split()[1]) / 1024)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self._sample()

    def stop(self) -> float | None:
        """Stop sampling; the peak in MB (``None`` where ``/proc`` is missing)."""
        self._stop.set()
        self._thread.join()
        try:
            self._sample()
        except OSError:
            return None
        return self.peak_mb


def _open(spec: dict[str, Any], **ranking: float) -> Any:
    from scoring.embeddings import HashingEmbedder
    from unified_memory import UnifiedMemory
    from unified_memory.config import VectorConfig

    vectors = VectorConfig(approximate_above=spec["approximate_above"]) if spec["approximate_above"] else None
    return UnifiedMemory(spec["path"], long_term_limit=None, user_id="bench", retrieval="embedding",
                         embedder=HashingEmbedder(DIM), **({"vectors": vectors} if vectors else {}),
                         **({"ranking": ranking} if ranking else {}))


def _sample(size: int, count: int) -> list[int]:
    return sorted(random.Random(5).sample(range(size), min(count, size)))


def _measure(mem: Any, facts: list[str], ids: list[str], rows: list[int]) -> dict[str, float]:
    """R@1 on stored texts through ``recall`` and of the vector index alone (its nearest
    neighbour, or one at cosine 1), and recall p50 / p95 (ms) over the sampled facts."""
    from unified_memory.testing import internals  # a look under the memory, for measuring
    dense = internals(mem).dense
    times, first, nearest = [], 0, 0
    for row in rows:
        start = time.perf_counter()
        hits = mem.recall(facts[row], limit=10)
        times.append((time.perf_counter() - start) * 1000)
        first += bool(hits) and (hits[0].id == ids[row] or hits[0].text == facts[row])
        top = dense.partitions["facts"].search("bench", dense.query_vector(facts[row]), 1)
        nearest += bool(top) and (top[0][0] == ids[row] or top[0][1] >= 1 - 1e-6)
    return {"r1": first / len(rows), "r1_index": nearest / len(rows), "p50": percentile(times, 0.5),
            "p95": percentile(times, 0.95)}


def _partition(mem: Any) -> str:
    from unified_memory.testing import internals  # a look under the memory, for measuring
    part = internals(mem).dense.index._parts.get("facts/bench")
    return "none" if part is None else "exact" if part.codes is None else "binary codes"


def write(spec: dict[str, Any]) -> dict[str, Any]:
    facts = synthetic_facts(spec["size"])
    res: dict[str, Any] = {}
    anon = _AnonPeak()
    mem = _open(spec)
    try:
        start = time.perf_counter()
        ids: list[str] = []
        for i in range(0, len(facts), BATCH):
            ids.extend(mem.remember_many(facts[i:i + BATCH]))
        res["write_s"] = time.perf_counter() - start
        res["facts_active"] = mem.stats().facts
        Path(spec["ids"]).write_text(json.dumps(ids))
        start = time.perf_counter()
        mem.recall(distinct_queries(1)[0], limit=10)
        res["first_recall_s"] = time.perf_counter() - start
        res["partition"] = _partition(mem)
        res.update(_measure(mem, facts, ids, _sample(len(facts), spec["queries"])))
    finally:
        start = time.perf_counter()
        mem.close()
        res["close_s"] = time.perf_counter() - start
    res["rss_mb"], res["anon_mb"] = _rss_mb(), anon.stop()
    return res


def reopen(spec: dict[str, Any]) -> dict[str, Any]:
    facts = synthetic_facts(spec["size"])
    ids = json.loads(Path(spec["ids"]).read_text())
    rows = _sample(len(facts), spec["queries"])
    res: dict[str, Any] = {}
    anon = _AnonPeak()
    import faiss  # noqa: F401  # the interpreter's imports are not the reopen's cost (as in scale.py)

    import unified_memory.memory  # noqa: F401
    from scoring.embeddings import HashingEmbedder
    from unified_memory.retrieval import federation  # noqa: F401

    HashingEmbedder(DIM).embed(["warm the embedder's tokenizer"])
    start = time.perf_counter()
    with _open(spec) as mem:
        mem.recall(facts[rows[0]], limit=10)
        res["reopen_s"] = time.perf_counter() - start
        res["partition"] = _partition(mem)
        res.update(_measure(mem, facts, ids, rows))
    with _open(spec, dense_ceiling=0.7) as mem:  # the same, cosine capped at hybrid retrieval's 0.7
        res["r1_ceiling_07"] = _measure(mem, facts, ids, rows)["r1"]
    res["rss_mb"], res["anon_mb"] = _rss_mb(), anon.stop()
    return res


def spawn(phase: str, spec: dict[str, Any]) -> dict[str, Any]:
    print(f"[vector_scale] {time.strftime('%H:%M:%S')} {phase} ...", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, __file__, "--child", phase, json.dumps(spec)], capture_output=True,
                          text=True, cwd=ROOT)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{phase} failed (exit {done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    print(f"[vector_scale] {phase}: {result}", file=sys.stderr, flush=True)
    return result


def _anon(res: dict[str, Any]) -> str:
    peak = res.get("anon_mb")
    return "" if peak is None else f" (anonymous memory at most {peak:,.0f} MB; the rest: file pages, the libraries and the SQLite file mapped by mmap_size)"


def verdict(value: float, target: float, *, higher: bool = False) -> str:
    return "met" if (value >= target if higher else value <= target) else "missed"


def report(argv: list[str], args: argparse.Namespace, written: dict, reopened: dict, load: tuple) -> str:
    n = f"{args.size:,}"
    rows = [
        f"| write ({n} facts, remember_many) | {written['write_s']:,.1f} s ({args.size / written['write_s']:,.0f} facts/s) | – | – |",
        f"| first recall (vectors loaded from the cache, codes encoded) | {written['first_recall_s']:.2f} s | – | – |",
        f"| R@1 on stored texts, recall() ({written['partition']}) | {written['r1']:.3f} | >= 0.95 | "
        f"{verdict(written['r1'], 0.95, higher=True)} |",
        f"| R@1 on stored texts, the vector index alone | {written.get('r1_index', float('nan')):.3f} | – | – |",
        f"| recall p50 / p95 | {written['p50']:.2f} / {written['p95']:.2f} ms | p50 <= 10 ms | "
        f"{verdict(written['p50'], 10)} |",
        f"| close (saves vectors and codes) | {written['close_s']:.2f} s | – | – |",
        f"| peak RSS, write process | {written['rss_mb']:,.0f} MB{_anon(written)} | – | – |",
        f"| reopen + first recall ({reopened['partition']}, memory-mapped) | "
        f"{reopened['reopen_s']:.2f} s | <= 3 s | {verdict(reopened['reopen_s'], 3)} |",
        f"| R@1 on stored texts, recall(), reopened | {reopened['r1']:.3f} | >= 0.95 | "
        f"{verdict(reopened['r1'], 0.95, higher=True)} |",
        f"| R@1 on stored texts, the vector index alone, reopened | {reopened['r1_index']:.3f} | – | – |",
        f"| R@1 on stored texts, recall() with `ranking.dense_ceiling=0.7` (hybrid's), reopened | "
        f"{reopened['r1_ceiling_07']:.3f} | – | – |",
        f"| recall p50 / p95, reopened | {reopened['p50']:.2f} / {reopened['p95']:.2f} ms | p50 <= 10 ms | "
        f"{verdict(reopened['p50'], 10)} |",
        f"| peak RSS, reopen process | {reopened['rss_mb']:,.0f} MB{_anon(reopened)} | <= 1,500 MB | "
        f"{verdict(reopened['rss_mb'], 1500)} |",
    ]
    return "\n\n".join([
        f"## Embedding-only recall at {n} facts for one user (text-like vectors)",
        f"Command: `python benchmarks/vector_scale.py {shlex.join(argv)}`",
        f"Machine: {machine()}; library at {library_version()}; 1-minute load average before / after: "
        f"{load[0]:.2f} / {load[1]:.2f}.",
        f"`HashingEmbedder({DIM})`, `retrieval=\"embedding\"`, default numpy index (binary codes "
        f"past `approximate_above`); {written['facts_active']:,} active facts; {args.queries} queries, each a stored "
        "fact's exact text.",
        "| measure | value | target | |\n|---|---|---|---|\n" + "\n".join(rows),
    ]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=300_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--dir", type=Path, default=None, help="where the memory file goes (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "vector_scale.md")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the memory file in this folder; a later run with the same folder and size "
                             "skips the write phase and measures the reopen only")
    parser.add_argument("--approximate-above", type=int, default=None,
                        help="vectors.approximate_above (default: the library's), e.g. for a quick small run")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        phase, spec = args.child
        print(json.dumps((write if phase == "write" else reopen)(json.loads(spec))))
        return
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.dir) as temporary:
        folder = args.keep or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        spec = {"path": str(folder / "vectors.db"), "ids": str(folder / "ids.json"),
                "size": args.size, "queries": args.queries,
                "approximate_above": args.approximate_above}
        kept = folder / f"write-{args.size}.json"
        if args.keep and kept.exists():
            written = json.loads(kept.read_text())
        else:
            written = spawn("write", spec)
            kept.write_text(json.dumps(written))
        reopened = spawn("reopen", spec)
    text = report(sys.argv[1:], args, written, reopened, (load_before, os.getloadavg()[0]))
    publish(text, args.out)


if __name__ == "__main__":
    main()
