"""Embedding ingestion vs. the model's own batch throughput (target: >= 0.90).

    python benchmarks/embedding_ingestion.py [--facts 2000] [--plain-encode]
        [--out benchmarks/results/embedding_ingestion.md]

Facts: ``--facts`` seeded facts from :func:`_synthetic.synthetic_facts`. The bundled
all-MiniLM-L6-v2 model (``shared_default_embedder()``) is loaded, and its query path
(ONNX) and the model warmed up, before anything is timed. Rows, run back to back:

1. **model, fact texts** — ``SentenceTransformer.encode(facts, batch_size=64,
   normalize_embeddings=True)``: the model's own batch throughput, texts/s.
2. **UnifiedMemory** — ``UnifiedMemory(<tmp>/mem.db, retrieval="hybrid", long_term_limit=None)``
   with ``embedder=`` a thin wrapper of the shared embedder that records the texts it gets
   (same model, same cache key); ``remember_many(facts)`` then the first ``recall`` (which
   embeds what was written: the facts, and the entity documents built from their
   relations). Texts embedded = the embedding cache's ``embedded`` counter
   (``internals(mem).dense.cache.embedded``; the query itself excluded).
3. **model, the same texts** — ``encode(batch_size=64)`` over exactly the documents row 2
   embedded (facts + entity documents, which are longer): the fair baseline for row 2.
4. **EmbeddingCache.vectors** — the cache alone on a fresh SQLite file, over the fact texts.

Ratios: ingestion facts/s over row 1 (the issue's wording: facts written per second vs the
model's sentences per second), and texts embedded/s over row 3 (same texts, same moment).
``--plain-encode`` makes the embedder hand every call to ``SentenceTransformer.encode``
(the behaviour before length-grouped batches) for an A/B comparison.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the MiniLM model is bundled; never reach the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _report import library_version, publish  # noqa: E402
from _synthetic import synthetic_facts  # noqa: E402

from tiers.indexes.embedding_cache import EmbeddingCache  # noqa: E402
from tiers.storage.backend import Storage  # noqa: E402
from unified_memory import UnifiedMemory  # noqa: E402
from unified_memory.retrieval.method import shared_default_embedder  # noqa: E402

TARGET = 0.90
BATCH = 64


class RecordingEmbedder:
    """Delegates to an embedder and records the texts and seconds of each call.

    >>> from scoring.embeddings import HashingEmbedder
    >>> rec = RecordingEmbedder(HashingEmbedder(8))
    >>> rec.embed(["a b", "c"]).shape, rec.batches
    ((2, 8), [['a b', 'c']])
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.calls: list[tuple[int, float]] = []
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Any:
        start = time.perf_counter()
        vectors = self.inner.embed(texts)
        self.calls.append((len(texts), time.perf_counter() - start))
        self.batches.append(list(texts))
        return vectors


def model_rate(model: Any, texts: list[str]) -> tuple[float, float]:
    """The model's own ``encode(batch_size=64)`` over ``texts``: (seconds, texts/s).

    >>> model_rate(None, [])
    (0.0, 0.0)
    """
    if not texts:
        return 0.0, 0.0
    start = time.perf_counter()
    model.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True,
                 show_progress_bar=False)
    seconds = time.perf_counter() - start
    return seconds, len(texts) / seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=2000)
    parser.add_argument("--plain-encode", action="store_true",
                        help="embed through SentenceTransformer.encode (no length-grouped batches)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "embedding_ingestion.md")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]

    embedder = shared_default_embedder()
    if embedder is None:
        print("the embeddings extra is not installed", file=sys.stderr)
        return 2
    if args.plain_encode:
        embedder._token_lengths = lambda model, texts: None  # type: ignore[method-assign]
    facts = synthetic_facts(args.facts)
    start = time.perf_counter()
    model = embedder.model
    load_s = time.perf_counter() - start
    torch = sys.modules["torch"]
    embedder.embed(["warm up the query path"])  # ONNX query encoder set up once per process
    model.encode(facts[:256], batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False)

    # 1. the model on the fact texts
    model_s, model_tps = model_rate(model, facts)

    # 2. the library: remember_many + first recall
    recorder = RecordingEmbedder(embedder)
    with tempfile.TemporaryDirectory() as folder:
        mem = UnifiedMemory(os.path.join(folder, "mem.db"), retrieval="hybrid", long_term_limit=None,
                            embedder=recorder)
        try:
            start = time.perf_counter()
            mem.remember_many(facts)
            write_s = time.perf_counter() - start
            start = time.perf_counter()
            mem.recall("who repairs bicycles?")
            recall_s = time.perf_counter() - start
            from unified_memory.testing import internals  # a look under the memory, for measuring
            cache = internals(mem).dense.cache
            queries = sum(1 for n, _ in recorder.calls if n == 1)  # the query (documents come in batches)
            embedded = cache.embedded - queries
        finally:
            mem.close()
    documents = [text for batch in recorder.batches if len(batch) > 1 for text in batch]
    embed_s = sum(s for n, s in recorder.calls if n > 1)
    total_s = write_s + recall_s
    ingest_fps = len(facts) / total_s
    ingest_tps = embedded / total_s

    # 3. the model on the same texts the library embedded
    same_s, same_tps = model_rate(model, documents)

    # 4. EmbeddingCache.vectors alone
    with tempfile.TemporaryDirectory() as folder:
        storage = Storage(os.path.join(folder, "cache.db"))
        try:
            alone = EmbeddingCache(storage, embedder)
            start = time.perf_counter()
            alone.vectors("bench", facts)
            cache_s = time.perf_counter() - start
        finally:
            storage.close()
    cache_tps = len(facts) / cache_s
    load_after = os.getloadavg()[0]

    def ok(ratio: float) -> str:
        return "yes" if ratio >= TARGET else "**no**"

    n_fact_docs = len(facts)
    lines = [
        "# Embedding ingestion vs. the model's own batch throughput",
        "",
        f"Command: `python benchmarks/embedding_ingestion.py --facts {args.facts}"
        f"{' --plain-encode' if args.plain_encode else ''}`",
        "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {torch.__version__} ({torch.get_num_threads()} threads); library at {library_version()}; "
        f"1-minute load average {load_before:.2f} before / {load_after:.2f} after; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"Target: ingestion >= {TARGET:.0%} of the model's `encode(batch_size={BATCH})` on the same texts. "
        f"Embedder: {'plain `SentenceTransformer.encode` (before)' if args.plain_encode else 'length-grouped batches'}.",
        "",
        "| row | texts | seconds | texts/s | facts/s | ratio | >= 0.90 |",
        "|---|---|---|---|---|---|---|",
        f"| (1) model `encode`, fact texts | {len(facts)} | {model_s:.2f} | {model_tps:.0f} | – | 1.00 | – |",
        f"| (2) `remember_many` + first `recall` (write {write_s:.2f} s, recall {recall_s:.2f} s) | "
        f"{embedded} | {total_s:.2f} | {ingest_tps:.0f} | {ingest_fps:.0f} | "
        f"{ingest_fps / model_tps:.2f} facts/s vs (1) | {ok(ingest_fps / model_tps)} |",
        f"| (2) texts embedded/s vs (3), end to end | {embedded} | {total_s:.2f} | {ingest_tps:.0f} | – | "
        f"**{ingest_tps / same_tps:.2f}** | {ok(ingest_tps / same_tps)} |",
        f"| (2) inside `embed` calls only vs (3) | {len(documents)} | {embed_s:.2f} | "
        f"{len(documents) / embed_s:.0f} | – | {len(documents) / embed_s / same_tps:.2f} | "
        f"{ok(len(documents) / embed_s / same_tps)} |",
        f"| (3) model `encode`, the same texts as (2) | {len(documents)} | {same_s:.2f} | {same_tps:.0f} | – | 1.00 | – |",
        f"| (4) `EmbeddingCache.vectors`, fact texts | {n_fact_docs} | {cache_s:.2f} | {cache_tps:.0f} | – | "
        f"{cache_tps / model_tps:.2f} vs (1) | {ok(cache_tps / model_tps)} |",
        "",
        f"- (2) embedded {embedded} document texts ({len(facts)} facts + {embedded - len(facts)} entity and other "
        f"documents) in {sum(1 for n, _ in recorder.calls if n > 1)} embedder calls "
        f"({', '.join(f'{n} texts in {sec:.2f} s' for n, sec in recorder.calls if n > 1)}); the query is excluded.",
        f"- Model load {load_s:.2f} s and warm-up (the query path and 256 texts) excluded. Rows run back to back "
        "in the order 1, 2, 3, 4: on a shared 2-CPU machine other jobs slow every row (baselines included).",
        "- Entity documents are longer than facts (up to 256 tokens), so texts/s over (2) is only comparable "
        "with (3), the model on the same texts; facts/s vs (1) is the issue's end-to-end wording.",
    ]
    publish("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
