"""Several hosts on one PostgreSQL memory: each a process with its own HOME, cache folder and
working directory, sharing nothing but the database (and, with ``--chroma``, a Chroma server).

Each host, for ``--seconds``: remembers facts that carry a code of their own, for a user of its
own and for one user every host writes ("team"); after each write it appends the code to its
acknowledgement log (written and flushed once ``remember`` returned: an acknowledged write); and
it looks for the newest code another host acknowledged, by recall of the "team" user, until it
finds it: how long after the write it was found is the freshness. With ``--kill`` one host is
SIGKILLed half-way, mid-write. At the end every acknowledged code must be stored exactly once.

    python benchmarks/multihost.py --hosts 4 --seconds 30 --out benchmarks/results/multihost.md
    python benchmarks/multihost.py --url postgresql://user@db/memory --hosts 4 --kill

Without ``--url`` a PostgreSQL 15 server is started for the run (tests/pg_server.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEAM = "team"


def code(host: int, n: int) -> str:
    """A word no text holds by chance, for host ``host``'s ``n``-th write: one term, which no
    stemmer shortens (two codes that stem alike would be one fact restated, and reinforced).

    >>> code(3, 18)
    'zq03n000018'
    """
    return f"zq{host:02d}n{n:06d}"


def worker(host: int, url: str, seconds: float, folder: Path, retrieval: str, chroma: str | None,
           embedder: str = "model") -> None:
    """One host's loop (runs in its own process)."""
    sys.path.insert(0, str(ROOT))
    from unified_memory import UnifiedMemory

    options: dict[str, Any] = {"retrieval": retrieval}
    if embedder == "hashing":  # vectors without a model to load: what the hosts share is the point here
        from scoring.embeddings import HashingEmbedder

        options["embedder"] = HashingEmbedder(256)
    if chroma:
        host_name, port = chroma.rsplit(":", 1)
        options["vectors"] = {"backend": "chroma", "chroma_host": host_name, "chroma_port": int(port)}
    acks = open(folder / f"acks-{host}.log", "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    stats: dict[str, Any] = {"writes": 0, "recalls": 0, "errors": 0, "fresh": [], "error_kinds": {},
                             "error_samples": []}
    n = 0
    with UnifiedMemory(url, user_id=TEAM, **options) as mem:
        mem.recall("warm up")  # a host that has been up a while: its model loaded (seconds, once)
        deadline = time.time() + seconds
        own = mem.scoped(user_id=f"host{host}")
        pending: tuple[str, float] | None = None  # (code, acknowledged at) of another host, not found yet
        while time.time() < deadline:
            n += 1
            word = code(host, n)
            try:
                (mem if n % 2 else own).remember(f"Host {host} noted item {word} for the record")
                acks.write(f"{word} {time.time():.6f} {TEAM if n % 2 else f'host{host}'}\n")
                stats["writes"] += 1
            except Exception as exc:  # counted, and the run goes on
                stats["errors"] += 1
                stats["error_samples"] = (stats["error_samples"] + [f"{type(exc).__name__}: {exc}"[:300]])[:3]
                stats["error_kinds"][type(exc).__name__] = stats["error_kinds"].get(type(exc).__name__, 0) + 1
            if pending is None:
                pending = _newest_team_code(folder, host)
            if pending is not None:
                try:
                    hits = mem.recall(pending[0], limit=3)
                    stats["recalls"] += 1
                    if any(pending[0] in hit.text for hit in hits):
                        stats["fresh"].append(time.time() - pending[1])
                        pending = None
                except Exception as exc:
                    stats["errors"] += 1
                    stats["error_samples"] = (stats["error_samples"] + [f"{type(exc).__name__}: {exc}"[:300]])[:3]
                    stats["error_kinds"][type(exc).__name__] = stats["error_kinds"].get(type(exc).__name__, 0) + 1
    acks.close()
    (folder / f"stats-{host}.json").write_text(json.dumps(stats))


def _newest_team_code(folder: Path, me: int) -> tuple[str, float] | None:
    """The newest code another host acknowledged for the team user (read from its log)."""
    best: tuple[str, float] | None = None
    for log in folder.glob("acks-*.log"):
        if log.name == f"acks-{me}.log":
            continue
        lines = log.read_text(encoding="utf-8").splitlines()
        for line in reversed(lines[-6:]):
            parts = line.split()
            if len(parts) == 3 and parts[2] == TEAM:
                if best is None or float(parts[1]) > best[1]:
                    best = (parts[0], float(parts[1]))
                break
    return best


def run(url: str, *, hosts: int, seconds: float, kill: bool, retrieval: str = "lexical",
        chroma: str | None = None, embedder: str = "model") -> dict[str, Any]:
    """Start the hosts, wait, check the database; returns the figures."""
    folder = Path(tempfile.mkdtemp(prefix="um-hosts-"))
    processes = []
    for host in range(hosts):
        home = folder / f"host{host}"
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "UNIFIED_MEMORY_CACHE": str(home / "cache"),
               "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
               # several hosts share this machine's cores: one thread each for the model (as one per core on real hosts)
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(host), "--url", url,
                   "--seconds", str(seconds), "--folder", str(folder), "--retrieval", retrieval,
                   "--embedder", embedder]
        if chroma:
            command += ["--chroma", chroma]
        processes.append(subprocess.Popen(command, cwd=home, env=env, stderr=subprocess.PIPE))
    started = time.time()
    killed = None
    if kill:  # once the victim is writing (its model loaded): a few acknowledged writes, then mid-stream
        killed = hosts - 1
        log = folder / f"acks-{killed}.log"
        limit = time.time() + seconds + 120
        while time.time() < limit and processes[killed].poll() is None and (
                not log.exists() or log.read_text(encoding="utf-8").count("\n") < 20):
            time.sleep(0.05)
        time.sleep(seconds / 4)
        processes[killed].send_signal(signal.SIGKILL)
    failures = []
    for host, process in enumerate(processes):
        _, err = process.communicate(timeout=seconds + 300)
        if process.returncode != 0 and host != killed:
            failures.append(f"host {host} exited {process.returncode}: {err.decode(errors='replace')[-2000:]}")
    elapsed = time.time() - started
    return _check(url, folder, hosts, elapsed, killed, failures)


def _check(url: str, folder: Path, hosts: int, elapsed: float, killed: int | None,
           failures: list[str]) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tiers.storage.backend import Storage

    acked: dict[str, str] = {}
    by_host = [0] * hosts
    for host in range(hosts):
        log = folder / f"acks-{host}.log"
        for line in log.read_text(encoding="utf-8").splitlines() if log.exists() else []:
            parts = line.split()
            if len(parts) == 3:  # a line cut by the kill was not acknowledged
                acked[parts[0]] = parts[2]
                by_host[host] += 1
    storage = Storage(url)
    try:
        stored: dict[str, int] = {}
        for text, in storage.execute("SELECT text FROM facts WHERE text LIKE 'Host % noted item zq%'"):
            word = text.split(" item ", 1)[1].split()[0]
            stored[word] = stored.get(word, 0) + 1
    finally:
        storage.close()
    stats = [json.loads((folder / f"stats-{h}.json").read_text()) for h in range(hosts)
             if (folder / f"stats-{h}.json").exists()]
    fresh = sorted(f for s in stats for f in s["fresh"])
    writes = sum(s["writes"] for s in stats)
    recalls = sum(s["recalls"] for s in stats)
    return {
        "hosts": hosts, "seconds": round(elapsed, 1), "killed": killed, "failures": failures,
        "acknowledged": len(acked), "acknowledged_by_host": by_host, "stored": sum(stored.values()),
        "lost": sorted(w for w in acked if w not in stored),
        "duplicated": sorted(w for w, c in stored.items() if c > 1),
        "writes_per_s": round(writes / elapsed, 1), "recalls_per_s": round(recalls / elapsed, 1),
        "errors": sum(s["errors"] for s in stats),
        "error_kinds": {k: v for s in stats for k, v in s["error_kinds"].items()},
        "error_samples": [m for s in stats for m in s["error_samples"]][:5],
        "freshness_n": len(fresh),
        "freshness_p50_ms": round(1000 * statistics.median(fresh), 1) if fresh else None,
        "freshness_p95_ms": round(1000 * fresh[int(0.95 * (len(fresh) - 1))], 1) if fresh else None,
        "freshness_max_ms": round(1000 * fresh[-1], 1) if fresh else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a PostgreSQL database (default: a server started for the run)")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--kill", action="store_true", help="SIGKILL one host half-way")
    parser.add_argument("--retrieval", default="lexical")
    parser.add_argument("--chroma", metavar="HOST:PORT", help="vectors on this Chroma server")
    parser.add_argument("--embedder", choices=["model", "hashing"], default="model",
                        help="the vectors' embedder: the bundled model (default), or feature hashing (no model to load)")
    parser.add_argument("--out", help="append the figures to this Markdown file")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.url, args.seconds, Path(args.folder), args.retrieval, args.chroma, args.embedder)
        return 0
    server = None
    url = args.url
    if url is None:
        sys.path.insert(0, str(ROOT))
        from tests.pg_server import create_database, start_postgres

        server = start_postgres(Path(tempfile.mkdtemp(prefix="um-pg-")))
        url = create_database(server)
    try:
        figures = run(url, hosts=args.hosts, seconds=args.seconds, kill=args.kill, retrieval=args.retrieval,
                      chroma=args.chroma, embedder=args.embedder)
    finally:
        if server is not None:
            server.stop()
    print(json.dumps(figures, indent=2))
    if args.out:
        command = "python benchmarks/multihost.py " + " ".join(a for a in (argv or sys.argv[1:]))
        with open(args.out, "a", encoding="utf-8") as out:
            out.write(f"\n`{command}`\n\n```json\n{json.dumps(figures, indent=2)}\n```\n")
    return 0 if not figures["lost"] and not figures["duplicated"] and not figures["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
