"""The library's approximate vector search (a scan of binary codes, re-scored exactly) against its
exact search, on the needles HNSW lost (issue 20).

    python benchmarks/binary_index.py [--kind hashing|minilm] [--sizes 100000 300000]
        [--depths 1000 2000 4000] [--extra /tmp/needle_minilm] [--out benchmarks/results/binary_index.md]

Data as ``needle_vectors.py`` (``--kind hashing``: ``HashingEmbedder(384)``) or ``needle_minilm.py``
(``--kind minilm``: the bundled all-MiniLM-L6-v2; ``HF_HUB_OFFLINE=1``): vectors of
``synthetic_facts(N)`` (seed 7; raw float32 chunks cached under ``--extra``, see
``needle_minilm.fact_vectors``) with the 50 labelled needles (seed 23) placed at
``facts_with_needles``' positions; the 300 ordinary queries ``distinct_queries(300)``.

At each size, one exact ``NumpyVectorIndex(approximate_above=None)`` and, for each ``--depths`` D, a
``NumpyVectorIndex(approximate_above=2, depth=D)`` (one ``upsert(..., owned=True)``: the partition
turns approximate, encoding every vector once; both indexes adopt the same read-only matrix), then:

- needle R@1 / R@10: the needle fact first / in the top 10 for its query;
- text recall@10: overlap of the 300 ordinary queries' top 10 with the exact top 10 (ties with the
  exact 10th score count as found, as in ``ann_index.py``);
- stored self R@1: 300 seeded stored vectors (``default_rng(5)``) searched with themselves come back
  first (or one at cosine 1);
- p50 / p95 ms of ``index.search(partition, q, 10)`` over the 300 ordinary queries, one at a time;
- encode s: the ``owned`` upsert that encodes the partition (``tiers.indexes.binary_codes.encode``).

At the largest size the binary rows are timed again without faiss (``tiers.indexes.binary_codes.faiss_or_none``
patched to return ``None``: the numpy scan a machine without faiss runs). Markdown to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

import needle_minilm as nm  # noqa: E402
from _report import library_version, machine, publish  # noqa: E402
from _synthetic import labelled_needles, needle_positions  # noqa: E402
from needle_vectors import _rank_hits  # noqa: E402

PARTITION = "facts/bench"
STORED = 300


def _timed(index, queries: np.ndarray, limit: int = 10) -> tuple[list[list[tuple[str, float]]], list[float]]:  # type: ignore[no-untyped-def]
    found, times = [], []
    for query in queries:
        began = time.perf_counter()
        found.append(index.search(PARTITION, query, limit))
        times.append((time.perf_counter() - began) * 1000)
    return found, times


def measure(index, matrix: np.ndarray, needle_queries: np.ndarray, answers: list[int],  # type: ignore[no-untyped-def]
            text_queries: np.ndarray, kth: np.ndarray | None, stored: np.ndarray) -> dict[str, float]:
    """Needle R@1 / R@10, text recall@10 against ``kth`` (the exact 10th scores; ``None``: exact
    itself, 1.0), stored self R@1 and p50 / p95 ms over the text queries."""
    index.search(PARTITION, text_queries[0], 10)  # warm: the first search pays for lazy imports
    needles = [[int(key) for key, _ in hits] for hits in _timed(index, needle_queries)[0]]
    text, times = _timed(index, text_queries)
    recall = 1.0 if kth is None else float(np.mean([
        sum(float(matrix[int(key)] @ q) >= t - 1e-6 for key, _ in hits) / 10
        for hits, q, t in zip(text, text_queries, kth, strict=True)]))
    firsts = [index.search(PARTITION, matrix[row], 1) for row in stored]
    self_r1 = float(np.mean([bool(first) and (int(first[0][0]) == row or first[0][1] >= 1 - 1e-6)
                             for first, row in zip(firsts, stored, strict=True)]))
    return {"r1": _rank_hits(needles, answers, 1), "r10": _rank_hits(needles, answers, 10), "recall": recall,
            "self": self_r1, "p50": float(np.percentile(times, 50)), "p95": float(np.percentile(times, 95))}


def _index(matrix: np.ndarray, depth: int | None) -> tuple[object, float]:
    from tiers.indexes.numpy_index import NumpyVectorIndex

    index = NumpyVectorIndex(approximate_above=None) if depth is None else \
        NumpyVectorIndex(approximate_above=2, depth=depth)
    began = time.perf_counter()
    index.upsert(PARTITION, [str(i) for i in range(len(matrix))], matrix, owned=True)
    return index, time.perf_counter() - began


def row(n: int, search: str, depth: str, m: dict[str, float], extra: str = "–") -> str:
    return (f"| {n:,} | {search} | {depth} | {m['r1']:.2f} | {m['r10']:.2f} | {m['recall']:.3f} | {m['self']:.3f} "
            f"| {m['p50']:.2f} | {m['p95']:.2f} | {extra} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", choices=["hashing", "minilm"], default="hashing")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--depths", type=int, nargs="+", default=[1000, 2000, 4000])
    parser.add_argument("--cache", type=Path, nargs="*", default=[Path("/tmp/ann_vectors"), Path("/tmp/i20ann")],
                        help="folders of ann_index.py's {kind}_{N}.f32 caches")
    parser.add_argument("--extra", type=Path, default=Path("/tmp/needle_minilm"), help="where vectors are cached")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "binary_index.md")
    args = parser.parse_args()
    from tiers.indexes import binary_codes

    load_before = os.getloadavg()
    model = nm._embedder(args.kind)

    def embed(texts: list[str]) -> np.ndarray:
        return np.asarray(model.embed(texts), dtype=np.float32)

    needles = labelled_needles(50)
    needle_queries = embed([needle.query for needle in needles])
    needle_facts = embed([needle.fact for needle in needles])
    vectors = nm.fact_vectors(args.kind, max(args.sizes), args.cache, args.extra, embed)
    text_queries = nm.query_vectors(args.kind, args.cache, args.extra, embed)
    faiss_present = binary_codes.faiss_or_none() is not None
    lines = ["| facts | search | depth | needle R@1 | needle R@10 | text recall@10 | stored self R@1 | p50 ms "
             "| p95 ms | encode s |", "|---|---|---|---|---|---|---|---|---|---|"]
    numpy_rows: list[str] = []
    for n in sorted(args.sizes):
        answers = needle_positions(n, len(needles))
        matrix = vectors[:n].copy()
        matrix[answers] = needle_facts
        matrix.setflags(write=False)  # shared by the indexes below: none may write it
        stored = np.random.default_rng(5).choice(n, size=STORED, replace=False)
        exact, _ = _index(matrix.copy(), None)
        truth = _timed(exact, text_queries)[0]
        kth = np.array([hits[-1][1] for hits in truth], dtype=np.float32)
        lines.append(row(n, "exact", "–", measure(exact, matrix, needle_queries, answers, text_queries, None,
                                                  stored)))
        print(lines[-1], file=sys.stderr, flush=True)
        del exact
        for depth in args.depths:
            index, encoded = _index(matrix.copy(), depth)
            assert index.approximate(PARTITION)
            result = measure(index, matrix, needle_queries, answers, text_queries, kth, stored)
            lines.append(row(n, "binary codes" + ("" if faiss_present else " (numpy scan)"), f"{depth:,}", result,
                             f"{encoded:.2f}"))
            print(lines[-1], file=sys.stderr, flush=True)
            if n == max(args.sizes) and faiss_present:
                saved = binary_codes.faiss_or_none
                binary_codes.faiss_or_none = lambda: None  # type: ignore[assignment]
                try:
                    result = measure(index, matrix, needle_queries, answers, text_queries, kth, stored)
                finally:
                    binary_codes.faiss_or_none = saved  # type: ignore[assignment]
                numpy_rows.append(row(n, "binary codes, numpy scan (no faiss)", f"{depth:,}", result))
                print(numpy_rows[-1], file=sys.stderr, flush=True)
            del index
    load_after = os.getloadavg()
    command = "python benchmarks/binary_index.py " + shlex.join(sys.argv[1:])
    label = {"hashing": "`HashingEmbedder(384)`", "minilm": "all-MiniLM-L6-v2 (384)"}[args.kind]
    text = "\n\n".join([
        f"# Binary-code scan vs exact search ({args.kind} vectors)",
        f"Command: `{command.strip()}`",
        f"Machine: {machine()}; numpy {np.__version__}, faiss "
        f"{getattr(binary_codes.faiss_or_none(), '__version__', 'not installed')}; library at {library_version()}.",
        f"Load average (1 / 5 / 15 min) before: {' / '.join(f'{x:.2f}' for x in load_before)}; after: "
        f"{' / '.join(f'{x:.2f}' for x in load_after)} (a shared 2-core machine: latencies are indicative).",
        f"{label} vectors of `synthetic_facts(N)` with the 50 labelled needles at `facts_with_needles`' positions; "
        f"300 ordinary queries (`distinct_queries(300)`). Binary rows: `NumpyVectorIndex(approximate_above=2, "
        f"depth=D)`, a scan of {binary_codes.BITS}-bit codes for the D nearest, re-scored exactly; exact rows: "
        "`NumpyVectorIndex(approximate_above=None)`.",
        "\n".join(lines + numpy_rows),
        "- needle R@1 / R@10: the needle fact first / in the top 10 for its query (50 needles).\n"
        "- text recall@10: overlap with the exact top 10 (ties with the exact 10th score count as found).\n"
        f"- stored self R@1: {STORED} seeded stored vectors searched with themselves come back first (or one at "
        "cosine 1).\n"
        "- p50 / p95: one `index.search(partition, q, 10)` at a time over the 300 ordinary queries, after one "
        "warm-up search.\n"
        "- encode s: the `upsert(..., owned=True)` that adopts the N vectors and encodes them all "
        "(`tiers.indexes.binary_codes.encode`).\n"
        "- numpy scan rows: the same index with `tiers.indexes.binary_codes.faiss_or_none` patched to return `None` "
        "(the scan without faiss `knn_hamming`), at the largest size only.",
    ]) + "\n"
    publish(text, args.out)


if __name__ == "__main__":
    main()
