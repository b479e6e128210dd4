"""Speed at scale, side by side with a peer (selectools' ``UnifiedMemory``).

    python benchmarks/scale.py [--sizes 10000 100000 1000000] [--modes lexical hashing model]
        [--queries 300] [--peer-sizes 10000 100000] [--out benchmarks/results/scale.md] [--dir DIR]
        [--max-size model=10000 hashing=100000] [--write-budget 1200] [--peer-budget 300]

For each size and mode, in a fresh subprocess (so peak RSS, ``ru_maxrss`` of the child, never
mixes between runs), seeded synthetic facts (``_synthetic.py``: templates over a varied vocabulary,
plus 50 labelled "needles") go into a durable memory file with ``remember_many`` in batches of
5,000, then on the loaded file:

- single durable ``add_turn`` (user + assistant) throughput over 500 turns;
- ``recall(q, limit=10)`` p50/p95 over ``--queries`` distinct queries (one unmeasured warm-up recall
  first: it builds the in-memory indexes);
- ``context(q, max_tokens=2000)`` p50 over the first 100 queries;
- recall quality on the labelled set: R@1 / R@5 over 50 queries whose answer fact is known by
  construction (each needle is the only fact pairing its instrument with its far-away place; the
  query paraphrases the pair and never names the person, who is the answer key);
- reopen: close, open the file again, first recall (indexes rebuilt from SQLite);
- for ``hashing`` / ``model``: the same file reopened with ``retrieval="embedding"`` and with
  ``retrieval="lexical"``, recall p50 of each (so hybrid compares with its two halves on one file).

Modes: ``lexical`` (BM25 only); ``hashing`` = hybrid retrieval with ``HashingEmbedder(384)``, a cheap
deterministic embedder, to isolate the vector index (384 dims, as the bundled model); ``model`` =
hybrid with the real bundled model (only at sizes <= 10,000 unless ``--max-size`` says otherwise;
``--max-size hashing=100000`` likewise caps a mode). A run whose bulk write is
projected (from its batches so far) to take longer than ``--write-budget`` seconds stops and is
reported as not run, with the projection.

Peer: selectools ``UnifiedMemory(long_term_limit=n)`` (its default in-memory long-term store), each
fact through ``long_term.remember(fact)`` (no bulk API), on the same facts and queries at
``--peer-sizes``; a size whose writes pass ``--peer-budget`` seconds is reported as "did not finish".

The report (``--out``) holds the command line, the machine, ``library_version()`` before and after the
run, the tables and each target of the issue marked met / missed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the MiniLM model is bundled; never reach the network
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, machine, publish  # noqa: E402
from _synthetic import (  # noqa: E402
    NOUNS,
    PLACES,
    distinct_queries,
    facts_with_needles,
    labelled_needles,
    percentile,
)

BATCH = 5000
TURNS = 500
CONTEXT_QUERIES = 100
FOLLOWER_ROUNDS = 30
N_NEEDLES = 50
HASH_DIM = 384
MODES = ("lexical", "hashing", "model")


def _order(item: tuple[tuple[int, str], Any]) -> tuple[int, int]:
    (size, mode), _ = item
    return size, MODES.index(mode)


# -- one measured run, in a child process ---------------------------------------------------------


def _ms(fn: Any, items: list[str]) -> list[float]:
    out = []
    for item in items:
        t0 = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _p(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 0.5), "p95": percentile(values, 0.95)} if values else {}


def _recall_at(results: list[list[str]], keys: list[str]) -> dict[str, float]:
    """R@1 / R@5 / R@10: the fraction of queries whose answer (a text containing the key) is in the top k."""
    out = {}
    for k in (1, 5, 10):
        found = sum(any(key in text for text in texts[:k]) for texts, key in zip(results, keys, strict=True))
        out[f"r@{k}"] = found / len(keys)
    return out


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _embedder(mode: str) -> Any:
    if mode == "hashing":
        from scoring.embeddings import HashingEmbedder

        return HashingEmbedder(HASH_DIM)
    return None  # model: the memory's shared default embedder (the bundled model)


def _open(path: Path | str, mode: str, retrieval: str | None = None) -> Any:
    from unified_memory import UnifiedMemory

    retrieval = retrieval or ("lexical" if mode == "lexical" else "hybrid")
    return UnifiedMemory(path, long_term_limit=None, user_id="bench", retrieval=retrieval,
                         embedder=None if retrieval == "lexical" else _embedder(mode))


def run_ours(n: int, mode: str, n_queries: int, path: Path | str, write_budget: float) -> dict[str, Any]:
    needles = labelled_needles(N_NEEDLES)
    facts = facts_with_needles(n, needles)
    qs = distinct_queries(n_queries + 1)
    warm, qs = qs[0], qs[1:]
    res: dict[str, Any] = {"size": n, "mode": mode}
    t_start = time.perf_counter()
    mem = _open(path, mode)
    try:
        from unified_memory.testing import internals  # a look under the memory, for measuring
        dense = internals(mem).dense  # which vector index the memory chose (reporting only)
        res["index"] = type(dense.index).__name__ if dense is not None else "none (BM25 only)"
        start = time.perf_counter()
        for i in range(0, n, BATCH):
            mem.remember_many(facts[i:i + BATCH])
            done, elapsed = min(n, i + BATCH), time.perf_counter() - start
            if done < n and elapsed / done * n > write_budget:
                res.update(status="skipped", written=done, write_rate=done / elapsed,
                           reason=f"bulk write projected at {elapsed / done * n:,.0f} s "
                                  f"({done / elapsed:,.0f} facts/s after {done:,} facts) > budget "
                                  f"{write_budget:,.0f} s", wall_s=time.perf_counter() - t_start,
                           rss_mb=_rss_mb())
                return res
        res["write_rate"] = n / (time.perf_counter() - start)
        res["facts_active"] = mem.stats().facts

        start = time.perf_counter()
        for i in range(TURNS):
            mem.add_turn(f"Turn {i}: I walked past the {NOUNS[i % len(NOUNS)]} shop in {PLACES[i % 20]}",
                         "Sounds nice.")
        res["turn_rate"] = TURNS / (time.perf_counter() - start)

        t0 = time.perf_counter()
        mem.recall(warm, limit=10)
        res["first_recall_s"] = time.perf_counter() - t0
        res["recall"] = _p(_ms(lambda q: mem.recall(q, limit=10), qs))

        def context(q: str) -> None:
            assert mem.context(q, max_tokens=2000).tokens <= 2000

        res["context"] = _p(_ms(context, qs[:CONTEXT_QUERIES]))
        res["follower"] = _follower(mem, path, mode, qs)
        hits = [[h.text for h in mem.recall(nd.query, limit=10)] for nd in needles]
        res["quality"] = _recall_at(hits, [nd.key for nd in needles])
    finally:
        mem.close()

    t0 = time.perf_counter()
    with _open(path, mode) as mem:
        mem.recall(warm, limit=10)
        res["reopen_s"] = time.perf_counter() - t0
    if mode != "lexical":
        for retrieval in ("embedding", "lexical"):
            with _open(path, mode, retrieval) as mem:
                mem.recall(warm, limit=10)
                res[f"{retrieval}_only"] = _p(_ms(lambda q, m=mem: m.recall(q, limit=10), qs))
                hits = [[h.text for h in mem.recall(nd.query, limit=10)] for nd in needles]
                res[f"{retrieval}_only_quality"] = _recall_at(hits, [nd.key for nd in needles])
                if retrieval == "embedding":
                    res["vector_index_quality"] = _index_quality(mem, needles)
    res.update(status="ok", wall_s=time.perf_counter() - t_start, rss_mb=_rss_mb())
    return res


def _index_quality(mem: Any, needles: list[Any]) -> dict[str, float]:
    """R@1 on the labelled needles of the facts' vector index alone (past
    ``approximate_above``: the scan of binary codes) and of an exact search over the same stored
    vectors (one matrix-vector product per query, numpy): tells the index's losses from the embedder's."""
    import numpy as np

    from unified_memory.testing import internals  # a look under the memory, for measuring
    facts = internals(mem).dense.partitions["facts"]
    if not hasattr(facts, "partition"):  # the database search path: the vectors are a table's rows
        return {}
    name = facts.partition("bench")
    part = facts.index._parts.get(name)
    if part is None:
        return {}
    matrix, keys = part.matrix[:len(part.ids)], part.ids
    text_of = {}
    storage = internals(mem).storage

    def text(key: str | None) -> str:
        item = (key or "|").rpartition("|")[0]
        if item not in text_of:
            rows = storage.execute("SELECT text FROM facts WHERE id = ?", [item]).fetchall()
            text_of[item] = rows[0][0] if rows else ""
        return text_of[item]

    graph = exact = 0
    for needle in needles:
        vector = facts.cache.query_vector(needle.query)
        top = facts.index.search(name, vector, 1)
        graph += bool(top) and needle.key in text(top[0][0])
        exact += needle.key in text(keys[int(np.argmax(matrix @ vector))])
    return {"index_r@1": graph / len(needles), "exact_r@1": exact / len(needles),
            "index_kind": "binary codes" if part.codes is not None else "exact"}


def _follower(writer: Any, path: Path | str, mode: str, qs: list[str]) -> dict[str, float]:
    """Recall by a second connection (another process sharing the file) right after the
    writer's turn: it replays the journalled change instead of rebuilding its indexes."""
    with _open(path, mode) as other:
        other.recall(qs[0], limit=10)
        times = []
        for i, q in enumerate(qs[:FOLLOWER_ROUNDS]):
            writer.add_turn(f"Follower round {i}: I passed the {NOUNS[i % len(NOUNS)]} market", "Nice.")
            t0 = time.perf_counter()
            other.recall(q, limit=10)
            times.append((time.perf_counter() - t0) * 1000)
    return _p(times)


def run_peer(n: int, n_queries: int, budget: float) -> dict[str, Any]:
    from selectools import UnifiedMemory as PeerMemory

    needles = labelled_needles(N_NEEDLES)
    facts = facts_with_needles(n, needles)
    qs = distinct_queries(n_queries + 1)
    warm, qs = qs[0], qs[1:]
    res: dict[str, Any] = {"size": n, "mode": "selectools"}
    t_start = time.perf_counter()
    mem = PeerMemory(long_term_limit=n + 1)  # no eviction: every fact stays
    start = time.perf_counter()
    for i, fact in enumerate(facts):
        mem.long_term.remember(fact)
        if i % 500 == 499 and time.perf_counter() - start > budget:
            elapsed = time.perf_counter() - start
            res.update(status="dnf", written=i + 1, write_rate=(i + 1) / elapsed, wall_s=elapsed,
                       reason=f"did not finish in {budget:,.0f} s ({i + 1:,} of {n:,} facts written, "
                              f"{(i + 1) / elapsed:,.0f} facts/s on average)", rss_mb=_rss_mb())
            shutil.rmtree(mem.long_term.directory, ignore_errors=True)
            return res
    res["write_rate"] = n / (time.perf_counter() - start)
    mem.recall(warm, limit=10)
    res["recall"] = _p(_ms(lambda q: mem.recall(q, limit=10), qs))
    hits = [[h.content for h in mem.recall(nd.query, limit=10)] for nd in needles]
    res["quality"] = _recall_at(hits, [nd.key for nd in needles])
    res.update(status="ok", wall_s=time.perf_counter() - t_start, rss_mb=_rss_mb())
    shutil.rmtree(mem.long_term.directory, ignore_errors=True)  # its append-only daily log
    return res


def child(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["mode"] == "selectools":
        return run_peer(spec["size"], spec["queries"], spec["budget"])
    target = spec["path"]  # a file, or a PostgreSQL database (benchmarks/postgres_scale.py)
    return run_ours(spec["size"], spec["mode"], spec["queries"],
                    target if target.startswith("postgresql://") else Path(target), spec["budget"])


def spawn(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run one measurement in a fresh interpreter; its last stdout line is the JSON result."""
    t0 = time.perf_counter()
    label = f"{spec['mode']} @ {spec['size']:,}"
    print(f"[scale] {time.strftime('%H:%M:%S')} {label} ...", file=sys.stderr, flush=True)
    try:
        done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True,
                              text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {**spec, "status": "dnf", "reason": f"killed after {timeout:,.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {**spec, "status": "error", "reason": f"exit {done.returncode}: {tail}"}
    res = json.loads(lines[-1])
    print(f"[scale] {label}: {res['status']} in {time.perf_counter() - t0:,.1f} s", file=sys.stderr,
          flush=True)
    return res


# -- the report -----------------------------------------------------------------------------------


def _f(value: float | None, fmt: str = "{:,.2f}") -> str:
    return "–" if value is None else fmt.format(value)


def _get(res: dict[str, Any] | None, *keys: str) -> Any:
    for key in keys:
        if not isinstance(res, dict):
            return None
        res = res.get(key)
    return res


def verdict(value: float | None, target: float, *, higher_is_better: bool, unit: str) -> str:
    if value is None:
        return "not measured"
    if (value >= target) if higher_is_better else (value <= target):
        return "**met**"
    factor = target / value if higher_is_better else value / target
    shown = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"
    return f"**missed** by {factor:,.1f}× ({shown} vs target {target:,g} {unit})"


def targets(ours: dict[tuple[int, str], dict], peer: dict[int, dict], sizes: list[int]) -> list[list[str]]:
    """Rows of (target, where measured, measured, verdict)."""
    ok = {k: v for k, v in ours.items() if v.get("status") == "ok"}

    def at(size: int, mode: str) -> dict | None:
        return ok.get((size, mode))

    def largest(mode: str, cap: int | None = None) -> tuple[int | None, dict | None]:
        done = [s for (s, m) in ok if m == mode and (cap is None or s <= cap)]
        return (max(done), ok[(max(done), mode)]) if done else (None, None)

    def note(size: int | None, wanted: int) -> str:
        if size is None:
            return "not run"
        return f"{size:,}" + ("" if size == wanted else f" ({wanted:,} not run)")

    def judged(value: float | None, goal: float, measured_at: int | None, wanted: int, *, higher: bool = False,
               unit: str) -> str:
        if measured_at is None:
            return "not run"
        mark = verdict(value, goal, higher_is_better=higher, unit=unit)
        return mark if measured_at == wanted else f"not measured at {wanted:,}; at {measured_at:,}: {mark}"

    rows: list[list[str]] = []
    for size, goal in ((100_000, 5.0), (1_000_000, 25.0)):
        s, r = (size, at(size, "lexical")) if at(size, "lexical") else largest("lexical", size)
        v = _get(r, "recall", "p50")
        rows.append([f"lexical recall p50 ≤ {goal:g} ms at {size:,}", note(s, size), _f(v, "{:.2f} ms"),
                     judged(v, goal, s, size, unit="ms")])
    for mode in ("hashing", "model"):
        s, r = largest(mode)
        v = _get(r, "embedding_only", "p50")
        label = "HashingEmbedder-384" if mode == "hashing" else "bundled model, query embedding included"
        rows.append([f"vector recall p50 ≤ 5 ms at 1,000,000 (embedding-only, {label})", note(s, 1_000_000),
                     _f(v, "{:.2f} ms"), judged(v, 5.0, s, 1_000_000, unit="ms")])
    for (size, mode), r in sorted(ok.items(), key=_order):
        if mode == "lexical":
            continue
        hyb, emb = _get(r, "recall", "p50"), _get(r, "embedding_only", "p50")
        lex = _get(r, "lexical_only", "p50")
        if None in (hyb, emb, lex):
            continue
        goal = 2 * max(emb, lex)
        rows.append([f"hybrid p50 within 2× of the slower half ({mode})", f"{size:,}",
                     f"{hyb:.2f} ms (embedding {emb:.2f}, lexical {lex:.2f}; limit {goal:.2f})",
                     verdict(hyb, goal, higher_is_better=False, unit="ms")])
    for (size, mode), r in sorted(ok.items(), key=_order):
        if mode == "lexical":
            v = r.get("write_rate")
            rows.append(["bulk writes ≥ 20,000 facts/s (lexical)", f"{size:,}", _f(v, "{:,.0f} facts/s"),
                         verdict(v, 20_000, higher_is_better=True, unit="facts/s")])
    for (size, mode), r in sorted(ok.items(), key=_order):
        v = r.get("turn_rate")
        rows.append([f"single durable add_turn ≥ 2,000/s ({mode})", f"{size:,}", _f(v, "{:,.0f} turns/s"),
                     verdict(v, 2_000, higher_is_better=True, unit="turns/s")])
    s, r = largest("lexical")
    v = _get(r, "reopen_s")
    rows.append(["reopen a 1M file ≤ 3 s (lexical; close, open, first recall)", note(s, 1_000_000),
                 _f(v, "{:.2f} s"), judged(v, 3.0, s, 1_000_000, unit="s")])
    for mode in ("hashing", "lexical"):
        s, r = largest(mode)
        v = _get(r, "rss_mb")
        what = "384-dim vectors (hashing)" if mode == "hashing" else "lexical, no vectors"
        rows.append([f"peak RSS ≤ 2 GB at 1M, {what}", note(s, 1_000_000), _f(v, "{:,.0f} MB"),
                     judged(v, 2048, s, 1_000_000, unit="MB")])
    s, r = (100_000, at(100_000, "lexical")) if at(100_000, "lexical") else largest("lexical", 100_000)
    v = _get(r, "context", "p50")
    rows.append(["context(max_tokens=2000) p50 ≤ 10 ms at 100,000 (lexical)", note(s, 100_000),
                 _f(v, "{:.2f} ms"), judged(v, 10.0, s, 100_000, unit="ms")])
    size = 10_000 if 10_000 in peer else (min(peer) if peer else None)
    p = peer.get(size) if size is not None else None
    for mode in ("lexical", "hashing", "model"):
        r = at(size, mode) if size is not None else None
        if r is None:
            continue
        if _get(p, "status") != "ok":
            rows.append([f"recall ≥ 10× faster than selectools with better R@k ({mode})", f"{size:,}",
                         "peer did not finish", "not measured"])
            continue
        speed = p["recall"]["p50"] / r["recall"]["p50"]
        better = all(r["quality"][k] > p["quality"][k] for k in ("r@1", "r@5"))
        q = (f"R@1 {r['quality']['r@1']:.2f} vs {p['quality']['r@1']:.2f}, "
             f"R@5 {r['quality']['r@5']:.2f} vs {p['quality']['r@5']:.2f}")
        v_speed = verdict(speed, 10.0, higher_is_better=True, unit="× faster")
        rows.append([f"recall ≥ 10× faster than selectools with better R@k ({mode})", f"{size:,}",
                     f"ours {r['recall']['p50']:.2f} ms vs peer {p['recall']['p50']:.2f} ms = {speed:,.2f}× "
                     f"{'faster' if speed >= 1 else '(peer faster)'}; {q}",
                     f"speed {v_speed}; quality {'**met**' if better else '**missed**'}"])
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def report(args: argparse.Namespace, argv: list[str], ours: dict, peer: dict, versions: tuple[str, str],
           timings: list[str], started: str) -> str:
    ok_rows, skipped = [], []
    for (size, mode), r in sorted(ours.items(), key=_order):
        if r.get("status") != "ok":
            skipped.append(f"- {mode} @ {size:,}: **not run** — {r.get('reason', r.get('status'))}")
            continue
        q = r["quality"]
        emb, lex = _get(r, "embedding_only", "p50"), _get(r, "lexical_only", "p50")
        ok_rows.append([
            f"{size:,}", mode, r["index"], f"{r['write_rate']:,.0f}", f"{r['turn_rate']:,.0f}",
            f"{r['recall']['p50']:.2f} / {r['recall']['p95']:.2f}",
            "–" if emb is None else f"{emb:.2f} / {lex:.2f}",
            f"{r['context']['p50']:.2f}", f"{r['follower']['p50']:.2f}", f"{r['first_recall_s']:.2f}",
            f"{r['reopen_s']:.2f}",
            f"{r['rss_mb']:,.0f}",
            f"{q['r@1']:.2f} / {q['r@5']:.2f}", f"{r['wall_s']:,.0f}"])
    ours_table = table(["facts", "mode", "vector index", "bulk write facts/s", "add_turn turns/s",
                        "recall p50 / p95 ms", "embedding-only / lexical-only p50 ms (same file)",
                        "context p50 ms", "recall after another process's turn p50 ms",
                        "first recall after the write s", "reopen s", "peak RSS MB",
                        "R@1 / R@5", "run s"], ok_rows)
    extra = []
    for (size, mode), r in sorted(ours.items(), key=_order):
        if r.get("status") == "ok" and mode != "lexical":
            e, lq = r["embedding_only_quality"], r["lexical_only_quality"]
            extra.append(f"- {mode} @ {size:,}: R@1 / R@5 hybrid {r['quality']['r@1']:.2f} / "
                         f"{r['quality']['r@5']:.2f}, embedding-only {e['r@1']:.2f} / {e['r@5']:.2f}, "
                         f"lexical-only {lq['r@1']:.2f} / {lq['r@5']:.2f}"
                         + (f"; R@1 of the vector index alone ({vq['index_kind']}) {vq['index_r@1']:.2f}, of an "
                            f"exact search over the same stored vectors {vq['exact_r@1']:.2f}"
                            if (vq := r.get("vector_index_quality")) else ""))
    peer_rows = []
    for size, p in sorted(peer.items()):
        mine = ours.get((size, "lexical"), {})
        if p.get("status") != "ok":
            peer_rows.append([f"{size:,}", str(p.get("reason", p.get("status"))), *["–"] * 6])
            continue
        mine_ok = mine.get("status") == "ok"
        peer_rows.append([
            f"{size:,}", f"{p['write_rate']:,.0f}", f"{p['recall']['p50']:.2f} / {p['recall']['p95']:.2f}",
            f"{p['quality']['r@1']:.2f} / {p['quality']['r@5']:.2f}", f"{p['rss_mb']:,.0f}",
            f"{mine['recall']['p50']:.2f}" if mine_ok else "–",
            f"{p['recall']['p50'] / mine['recall']['p50']:,.2f}×" if mine_ok else "–",
            f"{mine['write_rate'] / p['write_rate']:,.2f}" if mine_ok else "–"])
    peer_table = table(["facts", "selectools write facts/s", "selectools recall p50 / p95 ms",
                        "selectools R@1 / R@5", "selectools peak RSS MB", "our lexical recall p50 ms",
                        "recall speed-up (peer p50 / our p50)", "write ratio (ours / peer)"], peer_rows)
    version_line = (f"`{versions[0]}`" if versions[0] == versions[1] else
                    f"`{versions[0]}` at the start, `{versions[1]}` at the end (the library changed during "
                    "the run; each row's run measured whichever code was on disk when its process started)")
    return "\n".join([
        "# Speed at scale, beside selectools",
        "",
        f"Command: `{shlex.join(['python', 'benchmarks/scale.py', *argv])}`",
        "",
        f"Machine: {machine()}; run started {started}.",
        "",
        f"Library: {version_line}. Peer: selectools {_peer_version()}.",
        "",
        "Each row ran in a fresh process (peak RSS is that process's `ru_maxrss`). Facts: seeded synthetic "
        f"templates plus {N_NEEDLES} labelled needles, written with `remember_many` in batches of {BATCH:,} "
        f"into a durable SQLite file; add_turn: {TURNS} durable user + assistant turns on the loaded file; "
        f"recall: `recall(q, limit=10)` over {args.queries} distinct queries; context: "
        f"`context(q, max_tokens=2000)` over {CONTEXT_QUERIES}; recall after another process's turn: a second "
        f"connection to the file recalls right after the first adds a turn ({FOLLOWER_ROUNDS} rounds; it "
        "replays the journalled change, see `tiers/storage/journal.py`); reopen: close, open, first recall. "
        f"`hashing` = hybrid with `HashingEmbedder({HASH_DIM})` (no model; isolates the vector index), "
        "`model` = hybrid with the bundled model. R@k: 50 queries whose answer fact is known by "
        "construction (an instrument + far-away place pair that only one fact holds; the answer is the "
        "person, never named in the query).",
        "",
        "## Our library",
        "",
        ours_table,
        "",
        *(["Quality of each half on the same file:", "", *extra, ""] if extra else []),
        *(["Not run:", "", *skipped, ""] if skipped else []),
        "## selectools `UnifiedMemory` on the same facts and queries",
        "",
        "Default configuration (in-memory long-term store, `long_term_limit` = the fact count so nothing is "
        "evicted), each fact through `long_term.remember(fact)` (it has no bulk write; each call also "
        "appends a line to its daily log file and re-sorts every entry for its eviction check, so writes "
        "slow down as it grows). Its `recall` scores only the 1,000 highest-importance entries "
        "(`store.query(limit=1000)`), so facts beyond the first 1,000 written at equal importance are "
        "never found.",
        "",
        peer_table,
        "",
        "## Targets (issue 7)",
        "",
        table(["target", "facts", "measured", "verdict"], targets(ours, peer, args.sizes)),
        "",
        "## Run times",
        "",
        *timings,
        "",
    ])


def _peer_version() -> str:
    try:
        from importlib.metadata import version

        return version("selectools")
    except Exception:  # noqa: BLE001 - only for the report
        return "unknown"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--modes", nargs="+", choices=["lexical", "hashing", "model"],
                        default=["lexical", "hashing", "model"])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--peer-sizes", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "scale.md")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the memory files go (kept); default a temporary folder, deleted after")
    parser.add_argument("--max-size", nargs="*", default=["model=10000"], metavar="MODE=N",
                        help="largest size run in a mode (default model=10000: the real model only at 10k)")
    parser.add_argument("--write-budget", type=float, default=1200.0,
                        help="skip a run whose bulk write is projected to take longer (seconds)")
    parser.add_argument("--peer-budget", type=float, default=300.0,
                        help="stop the peer's writes after this many seconds (reported as did not finish)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> str:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return ""
    limits = {mode: int(n) for mode, n in (item.split("=", 1) for item in args.max_size)}
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    load_start = os.getloadavg()
    version_start = library_version()
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="um-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    ours: dict[tuple[int, str], dict] = {}
    peer: dict[int, dict] = {}
    timings: list[str] = []

    def render() -> str:
        loads = f"load average {load_start[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end"
        return report(args, argv, ours, peer, (version_start, library_version()), timings,
                      f"{started} UTC ({loads})")

    try:
        # ours, then the peer, size by size (smallest first): a long last size cannot cost the rest
        for size in sorted(set(args.sizes) | set(args.peer_sizes)):
            for mode in args.modes if size in args.sizes else []:
                if size > limits.get(mode, size):
                    ours[(size, mode)] = {"status": "skipped",
                                          "reason": f"beyond --max-size {mode}={limits[mode]}"}
                    continue
                path = workdir / f"scale-{mode}-{size}.db"
                for stale in workdir.glob(f"{path.name}*"):
                    shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
                t0 = time.perf_counter()
                spec = {"size": size, "mode": mode, "queries": args.queries, "path": str(path),
                        "budget": args.write_budget}
                ours[(size, mode)] = spawn(spec, timeout=1.5 * args.write_budget + 900)
                timings.append(f"- {mode} @ {size:,}: {time.perf_counter() - t0:,.0f} s "
                               f"({ours[(size, mode)].get('status')})")
                if args.dir is None:
                    for done in workdir.glob(f"{path.name}*"):
                        shutil.rmtree(done) if done.is_dir() else done.unlink()
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(render() + "\n_(partial: the run is still going)_\n", encoding="utf-8")
            if size in args.peer_sizes and importlib.util.find_spec("selectools") is None:
                peer[size] = {"status": "skipped", "reason": "selectools is not installed (pip install selectools)"}
            elif size in args.peer_sizes:
                t0 = time.perf_counter()
                spec = {"size": size, "mode": "selectools", "queries": args.queries,
                        "budget": args.peer_budget}
                peer[size] = spawn(spec, timeout=args.peer_budget + 600)
                timings.append(f"- selectools @ {size:,}: {time.perf_counter() - t0:,.0f} s "
                               f"({peer[size].get('status')})")
                args.out.write_text(render() + "\n_(partial: the run is still going)_\n", encoding="utf-8")
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    text = render()
    publish(text, args.out)
    return text


if __name__ == "__main__":
    main()
