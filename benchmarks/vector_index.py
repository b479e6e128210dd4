"""Vector index at scale: the exact numpy index against its approximate (IVF) mode.

    python benchmarks/vector_index.py [--sizes 100000 1000000] [--data clustered hashing]
        [--nprobe 16 32 64] [--queries 300] [--exact-queries 100] [--lists-per-sqrt 4]
        [--out benchmarks/results/vector_index.md]

For each size and data set, in fresh subprocesses (so peak RSS, ``ru_maxrss``, never mixes):

- ``clustered``: seeded unit vectors in 384-d around 2,000 Gaussian centres (noise of about the
  centre's length), queries drawn from the same mixture; ``hashing``: ``HashingEmbedder(384)`` over
  ``synthetic_facts(N)`` (what ``scale.py`` uses), queries from ``distinct_queries``;
- exact: ``NumpyVectorIndex(approximate_above=None)``, one ``upsert`` of all N (the float32
  copy), search p50/p95 over ``--exact-queries`` (limit 10 and 40);
- IVF: ``NumpyVectorIndex(approximate_above=50_000)``, one ``upsert`` (build: train + assign + pack),
  then for each ``--nprobe`` search p50/p95 over ``--queries`` (limit 10 and 40) and recall@10
  against brute force over the float32 vectors.

Peak RSS is the whole child process: the N float32 input vectors (1.5 GB at 1M, as the embedding
cache hands them over) plus the index; "RSS before" is the process with the vectors, before the index.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, publish  # noqa: E402

DIM = 384
CENTRES = 2000
NOISE = 0.05  # per component: noise length ~ 0.05 * sqrt(384) ~ 1, as long as the centre


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def clustered(n: int, queries: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CENTRES, DIM), dtype=np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)

    def draw(count: int) -> np.ndarray:
        out = np.empty((count, DIM), dtype=np.float32)
        for start in range(0, count, 100_000):
            block = out[start:start + 100_000]
            block[:] = centres[rng.integers(0, CENTRES, len(block))]
            block += NOISE * rng.standard_normal(block.shape, dtype=np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
        return out

    return draw(n), draw(queries)


def hashed(n: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    from _synthetic import distinct_queries, synthetic_facts

    from scoring.embeddings import HashingEmbedder

    embedder, facts = HashingEmbedder(DIM), synthetic_facts(n)
    data = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 20_000):
        data[start:start + 20_000] = embedder.embed(facts[start:start + 20_000])
    return data, embedder.embed(distinct_queries(queries))


def timed(index, queries: np.ndarray, limit: int) -> tuple[float, float, list]:
    times, found = [], []
    for query in queries:
        start = time.perf_counter()
        hits = index.search("bench", query, limit)
        times.append((time.perf_counter() - start) * 1000)
        found.append(hits)
    return float(np.percentile(times, 50)), float(np.percentile(times, 95)), found


def brute_force_top(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_rows = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(data), 20_000):
        scores = queries @ data[start:start + 20_000].T
        scores = np.concatenate([best_scores, scores], axis=1)
        rows = np.concatenate([best_rows, np.broadcast_to(np.arange(start, start + scores.shape[1] - k),
                                                          (len(queries), scores.shape[1] - k))], axis=1)
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        best_scores, best_rows = np.take_along_axis(scores, top, 1), np.take_along_axis(rows, top, 1)
    return best_rows


def child(args: argparse.Namespace) -> dict:
    from tiers.numpy_index import NumpyVectorIndex

    n, kind, mode = args.child
    n = int(n)
    count = max(args.queries, args.exact_queries)
    data, queries = clustered(n, count, args.seed) if kind == "clustered" else hashed(n, count)
    result = {"n": n, "data": kind, "mode": mode, "rss_before": rss_mb()}
    ids = [f"f{i}" for i in range(n)]
    exact = mode == "exact"
    index = NumpyVectorIndex(approximate_above=None if exact else args.approximate_above,
                             lists_per_sqrt=args.lists_per_sqrt)
    start = time.perf_counter()
    index.upsert("bench", ids, data)
    result["build_s"] = time.perf_counter() - start
    part = index._parts["bench"]
    result["lists"] = getattr(getattr(part, "quantizer", None), "lists", None)
    result["index_mb"] = (part.size * DIM * 2 if not exact else n * DIM * 4) / 1e6
    rows = []
    if exact:
        sample = queries[:args.exact_queries]
        p50, p95, _ = timed(index, sample, 10)
        p50_40, p95_40, _ = timed(index, sample, 40)
        rows.append({"nprobe": None, "p50": p50, "p95": p95, "p50_40": p50_40, "p95_40": p95_40, "recall": 1.0})
    else:
        sample = queries[:args.queries]
        for nprobe in args.nprobe:
            index.nprobe = nprobe
            p50, p95, found = timed(index, sample, 10)
            p50_40, p95_40, _ = timed(index, sample, 40)
            rows.append({"nprobe": nprobe, "p50": p50, "p95": p95, "p50_40": p50_40, "p95_40": p95_40,
                         "found": [[int(key[1:]) for key, _ in hits] for hits in found]})
    result["peak_rss"] = rss_mb()  # before the brute-force ground truth below
    if not exact:
        truth = brute_force_top(data, sample, 10)
        for row in rows:
            row["recall"] = float(np.mean([len(set(hits) & set(truth[q].tolist())) / 10
                                           for q, hits in enumerate(row.pop("found"))]))
    result["rows"] = rows
    return result


def table(results: list[dict]) -> str:
    head = ("| N | data | index | lists | nprobe | build s | p50 ms (k=10) | p95 ms (k=10) | p50 ms (k=40) "
            "| p95 ms (k=40) | recall@10 | index vectors MB | RSS before MB | peak RSS MB |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for res in results:
        for row in res["rows"]:
            lines.append(
                f"| {res['n']:,} | {res['data']} | {'exact' if res['mode'] == 'exact' else 'IVF'} "
                f"| {res['lists'] or '–'} | {row['nprobe'] or '–'} | {res['build_s']:.2f} | {row['p50']:.2f} "
                f"| {row['p95']:.2f} | {row['p50_40']:.2f} | {row['p95_40']:.2f} | {row['recall']:.3f} "
                f"| {res['index_mb']:.0f} | {res['rss_before']:.0f} | {res['peak_rss']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--data", nargs="+", choices=["clustered", "hashing"], default=["clustered"])
    parser.add_argument("--nprobe", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--exact-queries", type=int, default=100)
    parser.add_argument("--approximate-above", type=int, default=50_000)
    parser.add_argument("--lists-per-sqrt", type=float, default=4.0)
    parser.add_argument("--no-exact", action="store_true", help="skip the exact baseline")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "vector_index.md")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    load_before = os.getloadavg()[0]
    results = []
    for n in args.sizes:
        for kind in args.data:
            for mode in ([] if args.no_exact else ["exact"]) + ["ivf"]:
                done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", str(n), kind, mode],
                                      capture_output=True, text=True, check=True)
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(table(results[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    command = "python benchmarks/vector_index.py " + shlex.join(sys.argv[1:])
    text = "\n\n".join([
        "# Vector index: exact vs approximate (IVF)",
        f"Command: `{command.strip()}`",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"numpy {np.__version__}; library at {library_version()}",
        table(results),
        f"- 1-minute load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} (the machine is "
        "shared: other processes inflate timings).\n"
        "- build s = one `upsert` of all N vectors (IVF: train the quantizer on a 65,536 sample, assign, pack "
        "as bfloat16). recall@10 = overlap with brute-force top 10 over the float32 vectors.\n"
        "- peak RSS = whole child process, including the N float32 input vectors (`RSS before`).",
    ]) + "\n"
    publish(text, args.out)


if __name__ == "__main__":
    main()
