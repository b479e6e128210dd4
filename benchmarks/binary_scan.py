"""How the binary codes were chosen: an exhaustive scan of binary codes, then exact re-scoring
(issue 20; the needles HNSW loses, see ``needle_minilm.py``).

    HF_HUB_OFFLINE=1 python benchmarks/binary_scan.py [--kind minilm|hashing] [--size 100000]
        [--depths 200 1000 3000]

The same facts, needles and 300 ordinary queries as ``needle_minilm.py`` (its vector caches). Each
vector gets a code: ``sign384`` = the sign bit of each dimension, ``simhash512`` = the signs of 512
seeded random projections (packed, 64 bytes). A query's code is compared with every stored code
(Hamming distance, numpy ``bitwise_count``); the ``depth`` nearest are re-scored with their float
vectors and the best 10 returned. Reported: the needles' R@1 / R@10, the ordinary queries' recall@10
against the exact top 10, and numpy milliseconds per query (faiss ``IndexBinaryFlat`` is faster;
timing it is separate). An exhaustive scan cannot stop early the way a graph search can.

The library adopted the SimHash variant with 1,024 projections (``tiers.indexes.binary_codes``, seed 5, faiss
``knn_hamming`` when installed); ``binary_index.py`` measures that index itself against exact search.
This script stays the standalone comparison of code kinds and depths.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import needle_minilm as nm  # noqa: E402
from _synthetic import labelled_needles, needle_positions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=["minilm", "hashing"], default="minilm")
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--depths", type=int, nargs="+", default=[200, 1000, 3000])
    parser.add_argument("--cache", type=Path, nargs="+", default=[Path("/tmp/i20ann")])
    parser.add_argument("--extra", type=Path, default=Path("/tmp/needle_minilm"))
    args = parser.parse_args()
    model = nm._embedder(args.kind)

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(model.embed(texts), dtype=np.float32)

    needles = labelled_needles(50)
    queries, facts = embed([x.query for x in needles]), embed([x.fact for x in needles])
    vectors = nm.fact_vectors(args.kind, args.size, args.cache, args.extra, embed)
    answers = np.array(needle_positions(args.size, 50))
    vectors[answers] = facts
    texts = nm.query_vectors(args.kind, args.cache, args.extra, embed)
    projection = np.random.default_rng(5).standard_normal((vectors.shape[1], 512)).astype(np.float32)

    def exact(q: np.ndarray, k: int) -> np.ndarray:
        scores = vectors @ q
        top = np.argpartition(-scores, k)[:k]
        return top[np.argsort(-scores[top], kind="stable")]

    print("| code | depth | needle R@1 / R@10 | text recall@10 | numpy ms/query |\n|---|---|---|---|---|")
    for name in ("sign384", "simhash512"):
        def code(x: np.ndarray, name: str = name) -> np.ndarray:
            return np.packbits((x @ projection if name == "simhash512" else x) > 0, axis=-1)

        codes = code(vectors)
        for depth in args.depths:
            def search(q: np.ndarray, k: int, depth: int = depth, codes: np.ndarray = codes,
                       code=code) -> np.ndarray:  # type: ignore[no-untyped-def]
                distance = np.bitwise_count(codes ^ code(q)).sum(1, dtype=np.int32)
                candidates = np.argpartition(distance, depth)[:depth]
                order = np.argsort(-(vectors[candidates] @ q), kind="stable")[:k]
                return candidates[order]

            r1 = np.mean([search(q, 10)[0] == a for q, a in zip(queries, answers, strict=True)])
            r10 = np.mean([a in search(q, 10) for q, a in zip(queries, answers, strict=True)])
            recall = np.mean([len(set(exact(q, 10)) & set(search(q, 10))) / 10 for q in texts])
            start = time.perf_counter()
            for q in texts[:100]:
                search(q, 10)
            ms = (time.perf_counter() - start) * 10
            print(f"| {name} | {depth} | {r1:.2f} / {r10:.2f} | {recall:.3f} | {ms:.2f} |")
    r1 = np.mean([exact(q, 10)[0] == a for q, a in zip(queries, answers, strict=True)])
    r10 = np.mean([a in exact(q, 10) for q, a in zip(queries, answers, strict=True)])
    print(f"| exact | – | {r1:.2f} / {r10:.2f} | 1.000 | – |")


if __name__ == "__main__":
    main()
