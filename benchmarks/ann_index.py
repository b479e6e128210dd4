"""Approximate vector search: the library's binary-code scan and faiss HNSW against the exact numpy
search (and the old IVF).

    python benchmarks/ann_index.py [--data hashing:300000 minilm:50000] [--queries 300]
        [--configs exact binary:1000,2000 ivf faiss:16:100:64,128 ...] [--cache /tmp/ann_vectors]
        [--out benchmarks/results/ann_index.md]

Data sets (vectors cached as raw float32 files under ``--cache``, computed once):

- ``hashing:N``: ``HashingEmbedder(384)`` over ``synthetic_facts(N)``, queries ``distinct_queries``;
- ``minilm:N``: the bundled all-MiniLM-L6-v2 over the same texts (a few minutes for 50k on 2 cores).

Configs, each in a fresh subprocess (peak RSS, ``ru_maxrss``, never mixes):

- ``exact``: brute force (one float32 matrix-vector product per query, the numpy backend below
  ``approximate_above``);
- ``binary:D1,D2``: the numpy backend past ``approximate_above`` (``NumpyVectorIndex(approximate_above=2,
  depth=D)``, build s = encoding every vector, ``tiers.indexes.binary_codes``), searched at each depth D; then
  the partition saved and loaded as ``tiers.indexes.vector_store`` does (save s / load s: raw vectors + codes
  written, then memory-mapped);
- ``ivf``: the inverted file the numpy backend used before HNSW, ``nprobe`` 16 (its default): removed
  since, so run this config from a checkout of commit fec0012 with this script copied into it;
- ``faiss:M:efC:efS1,efS2``: ``faiss.IndexHNSWFlat(d, M, METRIC_INNER_PRODUCT)``, ``efConstruction``,
  ``efSearch``, built with one ``add`` (``--threads``, 2), searched at each efS. The library used
  such a graph for large partitions until commit 774acb2 (dropped: it lost rare facts, see
  ``needle_vectors.py``); its save / load through the removed ``tiers.hnsw_store`` is no longer
  timed here. usearch was measured by the script of commit cad04f1 (``benchmarks/results/ann_index.md``)
  and is no longer a dependency.

Queries run one at a time on one thread. recall@10 = overlap with the exact top 10 over text
queries; R@1 stored = share of stored vectors (a seeded sample) that come back first when
searched for themselves (the issue's "R@1 on stored texts", ties at score 1.0 count as found).
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


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def vectors(kind: str, n: int, queries: int, cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """The stored vectors and the text-query vectors of a data set (cached)."""
    cache.mkdir(parents=True, exist_ok=True)
    data_path, query_path = cache / f"{kind}_{n}.f32", cache / f"{kind}_q{queries}.f32"  # raw float32 rows
    if data_path.exists() and query_path.exists():
        return (np.fromfile(data_path, dtype=np.float32).reshape(-1, DIM),
                np.fromfile(query_path, dtype=np.float32).reshape(-1, DIM))
    from _synthetic import distinct_queries, synthetic_facts

    from scoring.embeddings import HashingEmbedder, SentenceTransformerEmbedder

    embedder = HashingEmbedder(DIM) if kind == "hashing" else SentenceTransformerEmbedder(batch_size=128)
    facts = synthetic_facts(n)
    data = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 5_000):
        data[start:start + 5_000] = embedder.embed(facts[start:start + 5_000])
    data.tofile(data_path)
    asked = embedder.embed(distinct_queries(queries)).astype(np.float32)
    asked.tofile(query_path)
    return data, asked


def exact_top(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ data.T
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, 1), axis=1)
    return np.take_along_axis(top, order, 1)


def build(config: str, data: np.ndarray, threads: int):
    """``(search, set_ef)``: a function ``(vector, k) -> row numbers`` over ``data`` and one
    setting the search breadth (efSearch, the scan depth; a no-op for exact and IVF)."""
    name, *params = config.split(":")
    if name == "exact":
        from tiers.indexes.numpy_index import NumpyVectorIndex

        index = NumpyVectorIndex(approximate_above=None)
        index.upsert("b", [str(i) for i in range(len(data))], data)
        return (lambda q, k: [int(key) for key, _ in index.search("b", q, k)]), (lambda ef: None)
    if name == "binary":
        from tiers.indexes.numpy_index import NumpyVectorIndex

        index = NumpyVectorIndex(approximate_above=2)
        index.upsert("b", [str(i) for i in range(len(data))], data, owned=True)  # encodes every vector
        build.part = index._parts["b"]  # type: ignore[attr-defined]  # for reopen(), after the searches

        def set_depth(depth: int) -> None:
            index.depth = depth
        return (lambda q, k: [int(key) for key, _ in index.search("b", q, k)]), set_depth
    if name == "ivf":  # the inverted file replaced by HNSW (tiers/ivf_index.py up to commit fec0012)
        from tiers.ivf_index import IvfPartition  # type: ignore[import-not-found]

        part = IvfPartition.build([str(i) for i in range(len(data))], data, np.arange(len(data)), nprobe=16)
        return (lambda q, k: [int(key) for key, _ in part.search(q, k, nprobe=16)]), (lambda ef: None)
    m, ef_c = int(params[0]), int(params[1])
    import faiss

    faiss.omp_set_num_threads(threads)
    index = faiss.IndexHNSWFlat(data.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_c
    index.add(data)
    faiss.omp_set_num_threads(1)

    def set_ef_faiss(ef: int) -> None:
        index.hnsw.efSearch = ef

    def search(q: np.ndarray, k: int) -> list[int]:
        return index.search(q[None, :], k)[1][0].tolist()
    return search, set_ef_faiss


def reopen(part) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Seconds to save an approximate partition (vectors + binary codes) as ``tiers.indexes.vector_store``
    does (under the write lock, at close), and to load it back (memory-mapped; files in the page
    cache). Ids as long as the library's (``f{i}|`` and 16 hex digits)."""
    import tempfile

    from tiers.indexes import vector_store
    from tiers.indexes.vector_partition import Partition

    size = len(part)
    saved_part = Partition.adopt([f"f{i}|0123456789abcdef" for i in range(size)], part.matrix[:size],
                                 codes=part.codes[:size])
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        vector_store.save(folder, "facts/bench", saved_part, head=1, tag="bench")
        saved = time.perf_counter() - start
        start = time.perf_counter()
        loaded = vector_store.load(folder, "facts/bench", "bench")
        assert loaded is not None and len(loaded[0]) == size
        return saved, time.perf_counter() - start


def child(args: argparse.Namespace) -> dict:
    kind, n, config = args.child
    n = int(n)
    data, queries = vectors(kind, n, args.queries, args.cache)
    name, *params = config.split(":")
    if name == "binary":  # binary:D1,D2 (default depth: the library's, 2000)
        efs, params = [int(depth) for depth in (params[0] if params else "2000").split(",")], []
    else:
        efs = [int(ef) for ef in params[2].split(",")] if len(params) > 2 else [0]
    result = {"data": f"{kind} {n:,}", "config": ":".join([name, *params[:2]]), "rss_before": rss_mb()}
    start = time.perf_counter()
    search, set_ef = build(config, data, args.threads)
    result["build_s"] = time.perf_counter() - start
    result["peak_rss"] = rss_mb()
    truth = exact_top(data, queries, 10)
    kth = np.take_along_axis(queries @ data.T, truth[:, -1:], 1)[:, 0]  # ties with the 10th count as found
    stored = np.random.default_rng(5).choice(n, size=args.queries, replace=False)
    rows = []
    for ef in efs:
        set_ef(ef)
        times, found = [], []
        for query in queries:
            begin = time.perf_counter()
            found.append(list(search(query, 10)))
            times.append((time.perf_counter() - begin) * 1000)
        firsts = [search(data[row], 1) for row in stored]
        recall = [sum(float(data[f] @ q) >= t - 1e-6 for f in hit) / 10 for hit, q, t in zip(found, queries, kth, strict=True)]
        hits = [len(first) > 0 and (first[0] == row or float(data[first[0]] @ data[row]) >= 1 - 1e-6)
                for first, row in zip(firsts, stored, strict=True)]
        rows.append({"ef": ef, "p50": float(np.percentile(times, 50)), "p95": float(np.percentile(times, 95)),
                     "recall": float(np.mean(recall)), "r1_stored": float(np.mean(hits))})
    result["rows"] = rows
    part = getattr(build, "part", None)
    result["save_s"], result["load_s"] = reopen(part) if part is not None else (None, None)
    return result


def fmt(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.2f}"


def table(results: list[dict]) -> str:
    head = ("| data | index (M:efC) | efS / depth | build s | p50 ms | p95 ms | recall@10 | R@1 stored | peak RSS MB "
            "| save s | load s |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        for row in r["rows"]:
            lines.append(f"| {r['data']} | {r['config']} | {row['ef'] or '–'} | {r['build_s']:.1f} | {row['p50']:.2f} "
                         f"| {row['p95']:.2f} | {row['recall']:.3f} | {row['r1_stored']:.3f} | {r['peak_rss']:.0f} "
                         f"| {fmt(r.get('save_s'))} | {fmt(r.get('load_s'))} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", default=["hashing:300000", "minilm:50000"])
    parser.add_argument("--configs", nargs="+", default=["exact", "faiss:16:100:64,128,256"])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2, help="threads for the HNSW build")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/ann_vectors"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "ann_index.md")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return
    load_before = os.getloadavg()[0]
    results = []
    for spec in args.data:
        kind, n = spec.split(":")
        vectors(kind, int(n), args.queries, args.cache)  # once, outside the timed children
        for config in args.configs:
            done = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--child", kind, n, config],
                                  capture_output=True, text=True, check=True)
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print("\n".join(table(results[-1:]).splitlines()[2:]), file=sys.stderr, flush=True)
    command = "python benchmarks/ann_index.py " + shlex.join(sys.argv[1:])
    text = "\n\n".join([
        "# Approximate vector search: binary codes and HNSW vs exact (and the old IVF)",
        f"Command: `{command.strip()}`",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"numpy {np.__version__}; library at {library_version()}",
        table(results),
        f"- 1-minute load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} (shared machine).\n"
        "- build s: one bulk add of all N (HNSW: 2 threads; binary: encoding the codes); p50/p95: one text query at a time, k=10, one thread.\n"
        "- recall@10 vs exact top 10 on text queries; R@1 stored: a stored vector searched for itself comes "
        "back first.\n- peak RSS: whole child process, including the N float32 input vectors.\n"
        "- save s / load s (binary only): `tiers.indexes.vector_store.save` / `load` of the partition with N ids "
        "(the reopen cost of a saved partition, memory-mapped, files in the page cache; after the peak RSS above).",
    ]) + "\n"
    publish(text, args.out)


if __name__ == "__main__":
    main()
