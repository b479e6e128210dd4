"""Benchmark :class:`scoring.lexical.LexicalIndex` at 100k short documents.

Run: ``python3 benchmarks/lexical_index.py [--docs 100000] [--queries 500] [--seed 7]``

Documents are seeded synthetic sentences of 10-15 words: a Zipf-distributed
vocabulary of pseudo-words mixed with English stopwords and contractions.
Prints one line per measurement.
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np

from scoring.lexical import LexicalIndex
from scoring.text import analyze

STOP = ["the", "i", "am", "is", "a", "to", "of", "and", "my", "in", "I'm", "don't", "we're", "it's"]


def make_vocabulary(rng: random.Random, size: int) -> list[str]:
    onsets, vowels, codas = "b c d f g h k l m n p r s t v w z br st tr pl ch sh".split(), "aeiou", ["", "n", "r", "s", "l"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas)
                          for _ in range(rng.randint(1, 3))))
    return sorted(words)


def make_sentences(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    cum = np.cumsum(weights / weights.sum())
    out = []
    for _ in range(n):
        length = rng.randint(10, 15)
        picks = np.searchsorted(cum, [rng.random() for _ in range(length)])
        words = [STOP[rng.randrange(len(STOP))] if rng.random() < 0.3 else vocab[min(i, len(vocab) - 1)]
                 for i in picks.tolist()]
        out.append(" ".join(words).capitalize() + ".")
    return out


def timed_searches(index: LexicalIndex, queries: list[str], limit: int = 10) -> tuple[float, float]:
    times = []
    for q in queries:
        t = time.perf_counter()
        index.search(q, limit)
        times.append(time.perf_counter() - t)
    p50, p95 = np.percentile(np.array(times) * 1000, [50, 95])
    return float(p50), float(p95)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--singles", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    vocab = make_vocabulary(rng, 30_000)
    docs = make_sentences(rng, vocab, args.docs + args.singles)
    bulk, singles = docs[: args.docs], docs[args.docs:]
    queries = [" ".join(rng.sample(vocab[:5000], rng.randint(2, 5))) for _ in range(args.queries)]
    queries += [" ".join(rng.sample(vocab[:50], 3)) for _ in range(args.queries // 10)]  # common words

    n_tokens = sum(len(d.split()) for d in bulk)
    t = time.perf_counter()
    for d in bulk:
        analyze(d)
    dt = time.perf_counter() - t
    print(f"analyze: {n_tokens / dt / 1e6:.2f}M tokens/s ({len(bulk) / dt:,.0f} docs/s, warm cache)")

    index = LexicalIndex()
    t = time.perf_counter()
    index.add_many((f"d{i}", d) for i, d in enumerate(bulk))
    dt = time.perf_counter() - t
    print(f"add_many: {len(bulk):,} docs in {dt:.2f}s = {len(bulk) / dt:,.0f} docs/s "
          f"({len(index._post_slot):,} postings, {len(index._vocab):,} terms)")
    p50, p95 = timed_searches(index, queries)
    print(f"search after bulk load ({len(index):,} docs): p50 {p50:.3f} ms, p95 {p95:.3f} ms")

    merges = 0
    t = time.perf_counter()
    for i, d in enumerate(singles):
        before = len(index._post_slot)
        if i % 10 == 9:
            index.add(f"d{rng.randrange(args.docs)}", d)  # replace an old document
        else:
            index.add(f"s{i}", d)
        merges += len(index._post_slot) != before
    dt = time.perf_counter() - t
    print(f"add (single): {len(singles):,} interleaved adds in {dt:.2f}s = {len(singles) / dt:,.0f} adds/s "
          f"({merges} merges, {index._n_pending:,} postings pending)")
    p50, p95 = timed_searches(index, queries)
    print(f"search after {len(singles):,} single adds ({len(index):,} docs): p50 {p50:.3f} ms, p95 {p95:.3f} ms")

    removed = [f"d{i}" for i in rng.sample(range(args.docs), args.docs // 10)]
    t = time.perf_counter()
    for key in removed:
        index.remove(key)
    dt = time.perf_counter() - t
    print(f"remove: {len(removed):,} removals in {dt:.3f}s = {len(removed) / dt:,.0f} removes/s")
    p50, p95 = timed_searches(index, queries)
    print(f"search after removals ({len(index):,} docs): p50 {p50:.3f} ms, p95 {p95:.3f} ms")

    t = time.perf_counter()
    index.compact()
    print(f"compact: {time.perf_counter() - t:.3f}s")
    p50, p95 = timed_searches(index, queries)
    print(f"search after compact: p50 {p50:.3f} ms, p95 {p95:.3f} ms")
    p50, p95 = timed_searches(index, queries, limit=None)  # type: ignore[arg-type]
    print(f"search limit=None: p50 {p50:.3f} ms, p95 {p95:.3f} ms")


if __name__ == "__main__":
    main()
