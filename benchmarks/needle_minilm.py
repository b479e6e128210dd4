"""Do the labelled needles get lost by HNSW with the real model too? (needle_vectors.py with MiniLM)

    HF_HUB_OFFLINE=1 python benchmarks/needle_minilm.py [--sizes 10000 50000 100000] [--graph-sizes ...]
        [--ef 128 512] [--kind minilm|hashing] [--cache /tmp/ann_vectors /tmp/i20ann]
        [--extra /tmp/needle_minilm]

``needle_vectors.py`` found that on ``HashingEmbedder(384)`` vectors of ``facts_with_needles`` the
exact search finds the 50 labelled needles (R@1 ~0.90) but a default HNSW graph (M16, efC100,
efS128) does not (R@1 0.36 at 10k, 0.02 at 200k). This script repeats it with the bundled
all-MiniLM-L6-v2 (``scoring.embeddings.default_embedder``; ``--kind hashing`` runs the identical
code on hashing vectors, for a same-size comparison):

- fact vectors of ``synthetic_facts(N)`` (seed 7) come from ``ann_index.py``'s cache (raw float32
  rows, ``{kind}_{N}.f32``, the largest file found in the ``--cache`` folders, prefix-valid since
  ``synthetic_facts`` is a seeded stream); facts beyond it are embedded here in chunks of 5,000 and
  kept under ``--extra`` (``{kind}_facts_{start}_{stop}.f32``), so a run can be resumed;
- the 50 needle facts and queries (``labelled_needles``, seed 23) are embedded here and placed at
  ``facts_with_needles``' positions, as ``needle_vectors.py`` does;
- the 300 ordinary text queries are ``ann_index.py``'s (``distinct_queries(300)``, cached as
  ``{kind}_q300.f32``).

At each size: exact R@1 / R@10 of the needle fact for its query; at each ``--graph-sizes`` (default:
all sizes) a bare faiss HNSW graph (``needle_vectors.build_graph``: ``faiss.IndexHNSWFlat``, M16,
efConstruction 100 unless ``--graph``) filled in chunks of 4,096 in insertion order, searched at each
``--ef`` as the library searched its graph until commit 774acb2: needle R@1 / R@10, needle
"self" (found first from its own vector), recall@10 of the 300 ordinary queries against the exact
top 10 (ties with the 10th count as found, as in ``ann_index.py``), and "self" on 300 seeded stored
ordinary facts. Printed as a markdown table; nothing else is written (except the --extra cache).

The library has since replaced the graph by a scan of binary codes (``tiers.indexes.binary_codes``), which
``binary_index.py`` measures on the same vectors.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _synthetic import distinct_queries, labelled_needles, needle_positions, synthetic_facts  # noqa: E402
from ann_index import exact_top  # noqa: E402
from needle_vectors import DIM, _rank_hits, build_graph, graph_needles  # noqa: E402

EMBED_CHUNK = 5_000
QUERIES = 300


def _embedder(kind: str):
    from scoring.embeddings import HashingEmbedder, default_embedder

    if kind == "hashing":
        return HashingEmbedder(DIM)
    embedder = default_embedder()
    if embedder is None:
        raise SystemExit("the embeddings extra is not installed")
    return embedder


def _cached(kind: str, folders: list[Path]) -> np.ndarray:
    """The largest ``{kind}_{N}.f32`` of ann_index.py found (``(0, DIM)`` if none)."""
    best: Path | None = None
    for folder in folders:
        for path in folder.glob(f"{kind}_*.f32"):
            stem = path.stem.split("_", 1)[1]
            if stem.isdigit() and (best is None or int(stem) > int(best.stem.split("_", 1)[1])):
                best = path
    if best is None:
        return np.empty((0, DIM), dtype=np.float32)
    print(f"cached fact vectors: {best}", file=sys.stderr, flush=True)
    return np.fromfile(best, dtype=np.float32).reshape(-1, DIM)


def fact_vectors(kind: str, n: int, folders: list[Path], extra: Path, embed) -> np.ndarray:
    cached = _cached(kind, folders)[:n]
    out = np.empty((n, DIM), dtype=np.float32)
    out[:len(cached)] = cached
    if len(cached) < n:
        extra.mkdir(parents=True, exist_ok=True)
        facts = synthetic_facts(n)
        began = time.perf_counter()
        for start in range(len(cached), n, EMBED_CHUNK):
            stop = min(n, start + EMBED_CHUNK)
            path = extra / f"{kind}_facts_{start}_{stop}.f32"
            if path.exists():
                out[start:stop] = np.fromfile(path, dtype=np.float32).reshape(-1, DIM)
                continue
            out[start:stop] = embed(facts[start:stop])
            out[start:stop].tofile(path)
            print(f"embedded facts {start:,}-{stop:,} ({time.perf_counter() - began:.0f} s)", file=sys.stderr,
                  flush=True)
    return out


def query_vectors(kind: str, folders: list[Path], extra: Path, embed) -> np.ndarray:
    for folder in [*folders, extra]:
        path = folder / f"{kind}_q{QUERIES}.f32"
        if path.exists():
            return np.fromfile(path, dtype=np.float32).reshape(-1, DIM)
    extra.mkdir(parents=True, exist_ok=True)
    asked = np.asarray(embed(distinct_queries(QUERIES)), dtype=np.float32)
    asked.tofile(extra / f"{kind}_q{QUERIES}.f32")
    return asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--graph-sizes", type=int, nargs="*", default=None, help="default: every --sizes")
    parser.add_argument("--graph", default="16:100", help="M:efConstruction")
    parser.add_argument("--ef", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--kind", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--cache", type=Path, nargs="*", default=[Path("/tmp/ann_vectors"), Path("/tmp/i20ann")])
    parser.add_argument("--extra", type=Path, default=Path("/tmp/needle_minilm"))
    args = parser.parse_args()
    graph_sizes = args.sizes if args.graph_sizes is None else args.graph_sizes
    embedder = _embedder(args.kind)

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(embedder.embed(texts), dtype=np.float32)

    needles = labelled_needles(50)
    needle_queries = embed([needle.query for needle in needles])
    needle_vectors = embed([needle.fact for needle in needles])
    largest = max([*args.sizes, *graph_sizes])
    vectors = fact_vectors(args.kind, largest, args.cache, args.extra, embed)
    text_queries = query_vectors(args.kind, args.cache, args.extra, embed)
    connectivity, construction = (int(x) for x in args.graph.split(":"))
    print(f"| {args.kind} facts | search | needle R@1 | needle R@10 | needle self | text recall@10 | stored self |\n"
          "|---|---|---|---|---|---|---|", flush=True)
    for n in sorted(set(args.sizes) | set(graph_sizes)):
        answers = needle_positions(n, len(needles))
        kept = vectors[answers].copy()
        vectors[answers] = needle_vectors
        matrix = vectors[:n]
        found = exact_top(matrix, needle_queries, 10).tolist()
        print(f"| {n:,} | exact | {_rank_hits(found, answers, 1):.2f} | {_rank_hits(found, answers, 10):.2f} "
              "| – | – | – |", flush=True)
        if n in graph_sizes:
            truth = exact_top(matrix, text_queries, 10)
            kth = np.take_along_axis(text_queries @ matrix.T, truth[:, -1:], 1)[:, 0]
            stored = np.random.default_rng(5).choice(n, size=QUERIES, replace=False)
            part, built = build_graph(matrix, connectivity, construction)
            for ef in args.ef:
                part.ef_search = ef
                found, self_found = graph_needles(part, needle_queries, needle_vectors, answers)
                text = [[int(key) for key, _ in part.search(query, 10)] for query in text_queries]
                recall = np.mean([sum(float(matrix[f] @ q) >= t - 1e-6 for f in hit) / 10
                                  for hit, q, t in zip(text, text_queries, kth, strict=True)])
                firsts = [part.search(matrix[row], 1) for row in stored]
                stored_self = np.mean([bool(first) and (int(first[0][0]) == row
                                                        or float(matrix[int(first[0][0])] @ matrix[row]) >= 1 - 1e-6)
                                       for first, row in zip(firsts, stored, strict=True)])
                print(f"| {n:,} | HNSW M{connectivity} efC{construction} efS{ef} (built in {built:,.0f} s) | "
                      f"{_rank_hits(found, answers, 1):.2f} | {_rank_hits(found, answers, 10):.2f} | "
                      f"{self_found:.2f} | {recall:.3f} | {stored_self:.3f} |", flush=True)
        vectors[answers] = kept


if __name__ == "__main__":
    main()
