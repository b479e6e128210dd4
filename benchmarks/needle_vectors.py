"""Are the labelled needles lost by the vectors or by the graph? (issue 20, the 1M hashing row)

    python benchmarks/needle_vectors.py [--sizes 10000 200000 1000000] [--graph-sizes 200000]
        [--graphs 16:100 32:200] [--ef 128 512 2048]

``scale.py``'s hashing rows write ``facts_with_needles(n)`` (seed 7) and ask the 50 labelled needle
queries (``labelled_needles``, seed 23): each query's answer is the one fact pairing its instrument
with its far-away place. Here the same facts and queries are embedded with the same
``HashingEmbedder(384)``, without a memory, and

- exact search (numpy, every fact scored) gives R@1 / R@10 of the needle fact at each ``--sizes``;
- at ``--graph-sizes``, a faiss HNSW graph (``faiss.IndexHNSWFlat(384, M, METRIC_INNER_PRODUCT)``,
  :func:`build_graph`) is filled as the library's background build used to fill it (chunks of 4,096 in
  insertion order) for each ``--graphs`` ``M:efConstruction``, then searched at each ``--ef``: R@1 /
  R@10, and "self" = the share of needles found first when searched with their own vector
  (reachability in the graph).

These HNSW rows are why the library dropped its graph (commit 774acb2): the approximate search of
large partitions is now a scan of binary codes, measured by ``binary_index.py`` on the same data.

Printed as a markdown table; nothing is written.
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

from _synthetic import labelled_needles, needle_positions, synthetic_facts  # noqa: E402

DIM = 384
SLICE = 20_000
BUILD_CHUNK = 4096  # what the library's background HNSW build added at once (tiers/hnsw_build.py, removed)


class Graph:
    """A bare faiss HNSW graph searched as the library's ``HnswPartition`` searched it (until commit
    774acb2): the graph returns ``limit`` labels at breadth ``max(ef_search, limit)``, re-scored
    exactly and ordered by score, then by insertion. Ids are row numbers as strings."""

    def __init__(self, matrix: np.ndarray, graph, ef_search: int = 128) -> None:  # type: ignore[no-untyped-def]
        self.matrix, self.graph, self.ef_search = matrix, graph, ef_search

    def search(self, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
        import faiss

        params = faiss.SearchParametersHNSW()
        params.efSearch = max(self.ef_search, limit)
        vector = np.ascontiguousarray(vector, dtype=np.float32)
        labels = self.graph.search(vector[None, :], limit, params=params)[1][0]
        labels = labels[labels >= 0]
        scores = self.matrix[labels] @ vector
        best = np.lexsort((labels, -scores))
        return [(str(labels[i]), float(scores[i])) for i in best]


def graph_needles(part: Graph, queries: np.ndarray, needle_vectors: np.ndarray,
                  answers: list[int]) -> tuple[list[list[int]], float]:
    """The graph's top-10 rows for each needle query, and the share of needles found first from
    their own vector (reachability)."""
    found = [[int(key) for key, _ in part.search(query, 10)] for query in queries]
    own = sum(part.search(vector, 1)[0][0] == str(answer) for vector, answer in zip(needle_vectors, answers, strict=True))
    return found, own / len(answers)


def build_graph(matrix: np.ndarray, connectivity: int, construction: int) -> tuple[Graph, float]:
    """An HNSW graph of ``matrix``'s rows (``faiss.IndexHNSWFlat``, inner product, 2 threads),
    filled in chunks of :data:`BUILD_CHUNK` in order, and the seconds it took."""
    import faiss

    faiss.omp_set_num_threads(2)
    graph = faiss.IndexHNSWFlat(matrix.shape[1], connectivity, faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = construction
    began = time.perf_counter()
    for start in range(0, len(matrix), BUILD_CHUNK):
        graph.add(np.ascontiguousarray(matrix[start:start + BUILD_CHUNK]))
    return Graph(matrix, graph), time.perf_counter() - began


def _rank_hits(found: list[list[int]], answers: list[int], k: int) -> float:
    return sum(answer in hits[:k] for hits, answer in zip(found, answers, strict=True)) / len(answers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 200_000, 1_000_000])
    parser.add_argument("--graph-sizes", type=int, nargs="*", default=[200_000])
    parser.add_argument("--graphs", nargs="*", default=["16:100"], help="M:efConstruction of each graph")
    parser.add_argument("--ef", type=int, nargs="+", default=[128, 512, 2048])
    args = parser.parse_args()
    from scoring.embeddings import HashingEmbedder

    embedder, needles = HashingEmbedder(DIM), labelled_needles(50)
    queries = embedder.embed([needle.query for needle in needles])
    largest = max([*args.sizes, *args.graph_sizes])
    base = synthetic_facts(largest)
    vectors = np.empty((largest, DIM), dtype=np.float32)
    for start in range(0, largest, SLICE):
        vectors[start:start + SLICE] = embedder.embed(base[start:start + SLICE])
    needle_vectors = embedder.embed([needle.fact for needle in needles])
    print("| facts | search | R@1 | R@10 | self |\n|---|---|---|---|---|")
    for n in sorted(set(args.sizes) | set(args.graph_sizes)):
        answers = needle_positions(n, len(needles))
        kept = vectors[answers].copy()
        vectors[answers] = needle_vectors
        matrix = vectors[:n]
        if n in args.sizes:
            scores = queries @ matrix.T
            found = [list(np.argsort(-row, kind="stable")[:10]) for row in scores]
            print(f"| {n:,} | exact | {_rank_hits(found, answers, 1):.2f} | {_rank_hits(found, answers, 10):.2f} | – |",
                  flush=True)
        for spec in args.graphs if n in args.graph_sizes else []:
            connectivity, construction = (int(x) for x in spec.split(":"))
            part, built = build_graph(matrix, connectivity, construction)
            for ef in args.ef:
                part.ef_search = ef
                found, self_found = graph_needles(part, queries, needle_vectors, answers)
                print(f"| {n:,} | HNSW M{connectivity} efC{construction} efS{ef} (built in {built:,.0f} s) | "
                      f"{_rank_hits(found, answers, 1):.2f} | {_rank_hits(found, answers, 10):.2f} | "
                      f"{self_found:.2f} |", flush=True)
        vectors[answers] = kept


if __name__ == "__main__":
    main()
