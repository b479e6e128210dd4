"""Benchmark :class:`scoring.lexical.LexicalIndex` at 100k short documents.

Run: ``python3 benchmarks/lexical_index.py [--docs 100000] [--queries 500] [--seed 7]``

Documents are seeded synthetic sentences of 10-15 words: a Zipf-distributed
vocabulary of pseudo-words mixed with English stopwords and contractions.
Prints one line per measurement: wall-clock time, and CPU time of this process
in brackets (steadier when the machine is shared).
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


class Clock:
    """Wall and CPU seconds since construction."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def timed_searches(index: LexicalIndex, queries: list[str], limit: int | None = 10) -> str:
    wall, cpu = [], []
    for q in queries:
        clock = Clock()
        index.search(q, limit)
        w, c = clock.stop()
        wall.append(w)
        cpu.append(c)
    (w50, w95), (c50, c95) = (np.percentile(np.array(x) * 1000, [50, 95]) for x in (wall, cpu))
    return f"p50 {w50:.3f} ms, p95 {w95:.3f} ms (cpu p50 {c50:.3f} ms, p95 {c95:.3f} ms)"


def rate(n: int, seconds: tuple[float, float], unit: str) -> str:
    return f"{seconds[0]:.2f}s = {n / seconds[0]:,.0f} {unit}/s (cpu {seconds[1]:.2f}s = {n / seconds[1]:,.0f}/s)"


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

    items = [(f"d{i}", d) for i, d in enumerate(bulk)]
    index = LexicalIndex()
    clock = Clock()
    index.add_many(items)
    print(f"add_many (cold stem cache): {args.docs:,} docs in {rate(args.docs, clock.stop(), 'docs')} "
          f"[{len(index._vocab):,} terms]")
    index = LexicalIndex()
    clock = Clock()
    index.add_many(items)
    print(f"add_many (warm stem cache): {args.docs:,} docs in {rate(args.docs, clock.stop(), 'docs')}")
    clock = Clock()
    n_terms = sum(len(analyze(d)) for d in bulk)
    elapsed = clock.stop()
    print(f"analyze (warm cache): {n_terms / elapsed[0] / 1e6:.2f}M index terms/s, "
          f"{rate(args.docs, elapsed, 'docs')}")
    print(f"search after bulk load ({len(index):,} docs): {timed_searches(index, queries)}")

    clock = Clock()
    for i, d in enumerate(singles):
        if i % 10 == 9:
            index.add(f"d{rng.randrange(args.docs)}", d)  # replace an old document
        else:
            index.add(f"s{i}", d)
    print(f"add (single): {len(singles):,} interleaved adds in {rate(len(singles), clock.stop(), 'adds')} "
          f"[{index._postings.n_pending:,} postings pending]")
    print(f"search after {len(singles):,} single adds ({len(index):,} docs): {timed_searches(index, queries)}")

    removed = [f"d{i}" for i in rng.sample(range(args.docs), args.docs // 10)]
    clock = Clock()
    for key in removed:
        index.remove(key)
    print(f"remove: {len(removed):,} removals in {rate(len(removed), clock.stop(), 'removes')}")
    print(f"search after removals ({len(index):,} docs): {timed_searches(index, queries)}")

    clock = Clock()
    index.compact()
    print(f"compact: {clock.stop()[0]:.3f}s")
    print(f"search after compact: {timed_searches(index, queries)}")
    print(f"search limit=None: {timed_searches(index, queries, limit=None)}")


if __name__ == "__main__":
    main()
