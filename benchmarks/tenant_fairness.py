"""One tenant's slow writes beside another tenant's reads (security issue 36, finding 2): while
tenant A sends large messages back to back, how long does tenant B wait for a recall?

    python benchmarks/tenant_fairness.py [--db PATH | --db postgresql://...] [--seed-turns 200]
        [--recalls 600] [--flooders 2] [--message-kb 100] [--max-seconds 120] [--shapes list person travel prose]
        [--retrieval lexical]
        [--before benchmarks/results/tenant_fairness_before.md] [--out benchmarks/results/tenant_fairness.md]

1. **Serve.** ``ServiceProcess`` runs ``unified-memory serve --retrieval lexical --no-mcp`` in a child
   process on 127.0.0.1 (a fresh SQLite file in a temporary folder, or the PostgreSQL database ``--db``
   names; its tables are emptied of A's and B's rows first) and one API key is created for each tenant.
2. **Seed.** Tenant B writes ``--seed-turns`` short turns through the service (``POST /v1/users/B/turns``,
   extraction on, as by default): facts about friends, places and habits, so a recall has something to
   rank. One recall warms B's indexes.
3. **Baseline.** ``--recalls`` recalls of B (``POST /v1/users/B/recall``, limit 10, queries drawn from what
   B said), one at a time on one keep-alive connection, no other traffic: latency per request.
4. **Flood.** ``--flooders`` threads send tenant A's turns back to back (``POST /v1/users/A/turns``), each a
   user message of about ``--message-kb`` KB in one of the ``--shapes`` in turn (``list``: "I like tea, "
   repeated; ``person``: "My sister Maria lives in Lisbon. " repeated; ``travel``: a repeated travel sentence;
   ``prose``: a repeated sentence naming people and places), each with a unique marker. Once
   A's first turn is under way, B's recalls run as in the baseline; the phase ends after ``--recalls``
   recalls or ``--max-seconds`` (then the recalls done are reported). The flooders finish their turn in
   flight and stop.

B's recall latency (p50, p95, max) with and without the flood is the figure; the target is a p95 under
100 ms during the flood. A's turns (how many, their latency) say how hard the service was working.
``--before`` embeds the results table of an earlier report of this script (the code before a change).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, machine, publish  # noqa: E402
from _synthetic import percentile  # noqa: E402

TARGET_P95_MS = 100.0
REQUEST_TIMEOUT = 900.0  # a turn of A on slow code may take minutes; it is measured, not cut off
FRIENDS = ["Maria", "Jonas", "Priya", "Tomas", "Aiko", "Leila", "Omar", "Greta", "Ines", "Rafael"]
PLACES = ["Lisbon", "Oslo", "Porto", "Kyoto", "Nairobi", "Quito", "Tallinn", "Cork", "Perth", "Graz"]
THINGS = ["chess", "jazz", "climbing", "pottery", "sailing", "tango", "birdwatching", "baking", "cycling", "opera"]
FOODS = ["green tea", "olives", "dumplings", "ramen", "figs", "paella", "kimchi", "pretzels", "mango", "lentils"]


def b_turns(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """``n`` short turns of tenant B (a user message and a reply)."""
    shapes = [
        lambda: f"My friend {rng.choice(FRIENDS)} lives in {rng.choice(PLACES)} and loves {rng.choice(THINGS)}.",
        lambda: f"I had {rng.choice(FOODS)} for lunch today, then went {rng.choice(THINGS)} with {rng.choice(FRIENDS)}.",
        lambda: f"Next month I am flying to {rng.choice(PLACES)} to see {rng.choice(FRIENDS)}.",
        lambda: f"I am allergic to {rng.choice(FOODS)} and I avoid it at restaurants.",
        lambda: f"My favourite hobby this year is {rng.choice(THINGS)}.",
    ]
    return [(rng.choice(shapes)(), "Noted.") for _ in range(n)]


def b_queries(n: int, rng: random.Random) -> list[str]:
    shapes = [
        lambda: f"Where does {rng.choice(FRIENDS)} live?",
        lambda: f"Who lives in {rng.choice(PLACES)}?",
        lambda: f"What am I allergic to? {rng.choice(FOODS)}",
        lambda: f"Which hobby do I like, {rng.choice(THINGS)}?",
        lambda: f"When am I flying to {rng.choice(PLACES)}?",
    ]
    return [rng.choice(shapes)() for _ in range(n)]


SHAPES = {
    "list": "I like tea, ",
    "person": "My sister Maria lives in Lisbon. ",
    "travel": "I went to Paris last year and I loved it. ",
    "prose": "Yesterday I walked the dog along the river, met Jonas from work, and we talked about "
             "moving to Berlin next spring because the rent in Munich is too high. ",
}


def a_message(index: int, kb: int, shapes: list[str] | None = None) -> tuple[str, str]:
    """Tenant A's ``index``-th message, about ``kb`` KB, and its shape's name (taken in turn from ``shapes``)."""
    size = kb * 1000
    names = shapes or list(SHAPES)
    name = names[index % len(names)]
    unit = SHAPES[name]
    marker = f"[turn zq{index}zq] "
    return marker + unit * max(1, (size - len(marker)) // len(unit)), name


class Timed:
    """Latencies (ms) and failures of one kind of request."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self.errors: list[str] = []
        self.lock = threading.Lock()

    def add(self, ms: float, status: int, text: str = "") -> None:
        with self.lock:
            if 200 <= status < 300:
                self.ms.append(ms)
            else:
                self.errors.append(f"{status} {text[:200]}")


def recalls(client: Any, url: str, key: str, queries: list[str], deadline: float | None) -> Timed:
    timed = Timed()
    for query in queries:
        if deadline is not None and time.monotonic() > deadline:
            break
        start = time.perf_counter()
        answer = client.post(f"{url}/v1/users/B/recall", json={"query": query, "limit": 10},
                             headers={"Authorization": f"Bearer {key}"})
        timed.add((time.perf_counter() - start) * 1000, answer.status_code, answer.text)
    return timed


def flood(url: str, key: str, kb: int, first: int, step: int, stop: threading.Event, started: threading.Event,
          timed: Timed, shapes: dict[str, int], chosen: list[str]) -> None:
    import httpx

    index = first
    with httpx.Client(timeout=REQUEST_TIMEOUT) as client:
        while not stop.is_set():
            text, shape = a_message(index, kb, chosen)
            index += step
            started.set()
            start = time.perf_counter()
            try:
                answer = client.post(f"{url}/v1/users/A/turns", json={"user": text, "assistant": "OK."},
                                     headers={"Authorization": f"Bearer {key}"})
                timed.add((time.perf_counter() - start) * 1000, answer.status_code, answer.text)
            except httpx.HTTPError as exc:
                timed.add((time.perf_counter() - start) * 1000, 0, f"{type(exc).__name__}: {exc}")
            with timed.lock:
                shapes[shape] = shapes.get(shape, 0) + 1


def empty_database(db: str) -> None:
    """A PostgreSQL database given by URL: forget tenants A and B (an earlier run's rows)."""
    from unified_memory import UnifiedMemory

    with UnifiedMemory(db, retrieval="lexical") as mem:
        for user in ("A", "B"):
            if user in mem.users():
                mem.forget(user_id=user)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from unified_memory.service.background import ServiceProcess

    rng = random.Random(36)
    work = Path(tempfile.mkdtemp(prefix="tenant-fairness-"))
    db: str = args.db or str(work / "memory.db")
    if db.startswith("postgresql://"):
        empty_database(db)
    result: dict[str, Any] = {"db": "PostgreSQL" if db.startswith("postgresql://") else "SQLite"}
    server_args = ["--retrieval", args.retrieval, "--no-mcp", "--log-level", "warning"]
    with ServiceProcess(db, args=server_args, log_path=work / "server.log", startup_timeout=300) as service:
        key_a, key_b = service.create_key("A"), service.create_key("B")
        url = service.url
        with httpx.Client(timeout=REQUEST_TIMEOUT) as client:
            start = time.perf_counter()
            for user, reply in b_turns(args.seed_turns, rng):
                answer = client.post(f"{url}/v1/users/B/turns", json={"user": user, "assistant": reply},
                                     headers={"Authorization": f"Bearer {key_b}"})
                answer.raise_for_status()
            result["seed_s"] = time.perf_counter() - start
            recalls(client, url, key_b, b_queries(5, rng), None)  # warm: B's indexes built
            result["baseline"] = recalls(client, url, key_b, b_queries(args.recalls, rng), None)

            stop, started, a_timed = threading.Event(), threading.Event(), Timed()
            shapes: dict[str, int] = {}
            threads = [threading.Thread(target=flood, args=(url, key_a, args.message_kb, i, args.flooders, stop,
                                                            started, a_timed, shapes, args.shapes), daemon=True)
                       for i in range(args.flooders)]
            flood_start = time.perf_counter()
            for thread in threads:
                thread.start()
            started.wait(60)
            time.sleep(0.3)  # A's first turn is being read and extracted
            deadline = time.monotonic() + args.max_seconds
            result["flood"] = recalls(client, url, key_b, b_queries(args.recalls, rng), deadline)
            stop.set()
            for thread in threads:
                thread.join(REQUEST_TIMEOUT)
            result["flood_s"] = time.perf_counter() - flood_start
            result["a"], result["shapes"] = a_timed, shapes
        if service.process is not None and service.process.poll() is not None:
            raise RuntimeError(f"the service died:\n{service.log()}")
        result["server_errors"] = [line for line in service.log().splitlines() if "Traceback" in line]
    return result


def _row(phase: str, timed: Timed, a: Timed | None, target: bool) -> str:
    ms = timed.ms
    p95 = percentile(ms, 0.95) if ms else float("nan")
    cells = [phase, str(len(ms)), str(len(timed.errors)),
             f"{percentile(ms, 0.5):.1f}" if ms else "–", f"{p95:.1f}" if ms else "–",
             f"{max(ms):.1f}" if ms else "–"]
    if a is not None:
        cells += [str(len(a.ms)), str(len(a.errors)), f"{percentile(a.ms, 0.5):.0f}" if a.ms else "–",
                  f"{max(a.ms):.0f}" if a.ms else "–"]
    else:
        cells += ["–", "–", "–", "–"]
    cells.append(("**met**" if p95 < TARGET_P95_MS else "**not met**") if target and ms else "–")
    return "| " + " | ".join(cells) + " |"


HEADER = ("| phase | B recalls | B errors | B recall p50 ms | B recall p95 ms | B recall max ms | A turns done | "
          "A errors | A turn p50 ms | A turn max ms | p95 < 100 ms |\n|---|---|---|---|---|---|---|---|---|---|---|")


def report(args: argparse.Namespace, argv: list[str], result: dict[str, Any], load: tuple[float, float]) -> str:
    command = " ".join(["python benchmarks/tenant_fairness.py", *argv]).strip()
    shapes = ", ".join(f"{name} {count}" for name, count in sorted(result["shapes"].items())) or "none"
    lines = [
        "# Tenant fairness: one tenant's large writes beside another's recalls",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine()}",
        "",
        f"Library: `{library_version()}`",
        "",
        f"Storage: {result['db']}; retrieval {args.retrieval}; the service in a child process (`ServiceProcess`), "
        "one uvicorn process.",
        "",
        f"Target: tenant B's recall p95 < {TARGET_P95_MS:.0f} ms while tenant A floods the service with "
        f"{args.message_kb} KB messages.",
        "",
        "## Results",
        "",
        HEADER,
        _row("baseline (no other traffic)", result["baseline"], None, False),
        _row(f"A floods ({args.flooders} threads, {args.message_kb} KB turns)", result["flood"], result["a"], True),
        "",
        f"- B: {args.seed_turns} turns seeded through the service in {result['seed_s']:.1f} s; recalls one at a "
        "time on one keep-alive connection (httpx), limit 10.",
        f"- A: {len(result['a'].ms)} turns answered during the flood phase ({result['flood_s']:.1f} s, "
        f"the turns in flight at its end included); shapes sent: {shapes}.",
        f"- 1-minute load average before / after: {load[0]:.2f} / {load[1]:.2f} (other processes on these cores "
        "inflate the timings).",
    ]
    errors = result["baseline"].errors + result["flood"].errors + result["a"].errors
    if errors:
        lines.append(f"- Errors (first 3): {errors[:3]}")
    if result["server_errors"]:
        lines.append(f"- The server logged {len(result['server_errors'])} tracebacks.")
    if args.before:
        before = Path(args.before).read_text(encoding="utf-8")
        found = re.search(r"Command: `[^`]*`", before)
        library = re.search(r"Library: `[^`]*`", before)
        table = before.split("## Results", 1)[1].split("\n- ", 1)[0].strip() if "## Results" in before else ""
        lines += ["", f"## Before (from `{Path(args.before).name}`)", "",
                  found.group(0) if found else "", "", library.group(0) if library else "", "", table]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="a postgresql:// URL or a SQLite path (default: a fresh file in a temp dir)")
    parser.add_argument("--seed-turns", type=int, default=200)
    parser.add_argument("--recalls", type=int, default=600)
    parser.add_argument("--flooders", type=int, default=2, help="threads sending A's turns back to back")
    parser.add_argument("--message-kb", type=int, default=100)
    parser.add_argument("--max-seconds", type=float, default=120.0, help="at most this long for B's flood recalls")
    parser.add_argument("--shapes", nargs="+", choices=list(SHAPES), default=list(SHAPES),
                        help="the shapes of A's messages, sent in turn")
    parser.add_argument("--retrieval", choices=("lexical", "hybrid"), default="lexical")
    parser.add_argument("--before", help="an earlier report of this script to embed")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "tenant_fairness.md"))
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    result = run(args)
    publish(report(args, argv, result, (load_before, os.getloadavg()[0])), Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
