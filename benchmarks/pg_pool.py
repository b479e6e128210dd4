"""Concurrent recall on one PostgreSQL memory, by ``pool_size`` and by network delay: what the
spare connections of :mod:`tiers.storage.pg_spares` buy a process whose threads share a memory (the
service's request threads, an agent runtime's workers).

    python benchmarks/pg_pool.py --out benchmarks/results/pg_pool.md
    python benchmarks/pg_pool.py --threads 1 4 8 --pools 1 4 --delays 0 0.5 --seconds 10

One user's facts (``--facts``, lexical retrieval) are written once; then for each network
delay, pool size and thread count, the threads recall for ``--seconds`` and the recalls per
second and their latency are reported. A delay is added by a TCP proxy in this script, each
way (0.5 ms each way: a database 1 ms away, as in one data centre). Without ``--url`` a
PostgreSQL 15 server is started on loopback (tests/pg_server.py), on the same 2 cores as the
threads, so with no delay the CPU is the limit.
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, machine  # noqa: E402
from postgres_scale import new_database  # noqa: E402

WORDS = ("garden kayak lisbon coffee python chess violin mountain river bakery tennis cinema "
         "harbour lantern orchard falcon meadow copper velvet thunder").split()


class DelayProxy:
    """A TCP proxy on loopback that holds every chunk ``delay`` seconds, each way."""

    def __init__(self, target_port: int, delay: float) -> None:
        self.delay, self.target_port = delay, target_port
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                time.sleep(self.delay)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def _through(url: str, port: int) -> str:
    """``url`` with its port replaced (the proxy's)."""
    scheme, _, rest = url.partition("://")
    authority, slash, tail = rest.partition("/")
    auth, at, host = authority.rpartition("@")
    return f"{scheme}://{auth}{at}127.0.0.1:{port}{slash}{tail}"


def run(url: str, *, pool: int, threads: int, seconds: float) -> dict[str, float]:
    from unified_memory import UnifiedMemory

    latencies: list[float] = []
    with UnifiedMemory(url, user_id="ada", retrieval="lexical", long_term_limit=None, pool_size=pool) as mem:
        mem.recall("garden kayak")  # the index is built before the clock starts
        stop = time.monotonic() + seconds

        def work(seed: int) -> None:
            rng = random.Random(seed)
            while time.monotonic() < stop:
                began = time.perf_counter()
                mem.recall(f"{rng.choice(WORDS)} {rng.choice(WORDS)}", limit=10)
                latencies.append(time.perf_counter() - began)

        began = time.monotonic()
        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        elapsed = time.monotonic() - began
    latencies.sort()
    return {"rate": len(latencies) / elapsed, "p50": statistics.median(latencies) * 1000,
            "p95": latencies[int(0.95 * (len(latencies) - 1))] * 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=10_000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--pools", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--delays", type=float, nargs="+", default=[0.0, 0.5], help="ms added each way")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--url", help="a PostgreSQL server's database to create a database from")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    server = None
    base = args.url
    if base is None:
        from tests.pg_server import start_postgres

        server = start_postgres(Path(tempfile.mkdtemp(prefix="um-pg-pool-")))
        base = server.url
    rows = []
    try:
        url = new_database(base, "pool")
        from unified_memory import UnifiedMemory

        rng = random.Random(7)
        with UnifiedMemory(url, user_id="ada", retrieval="lexical", long_term_limit=None) as mem:
            for start in range(0, args.facts, 1000):
                mem.remember_many([f"note {n} about the {rng.choice(WORDS)} and the {rng.choice(WORDS)} n{n}"
                                   for n in range(start, min(args.facts, start + 1000))])
        port = int(url.rsplit("/", 1)[0].rsplit(":", 1)[1])
        for delay in args.delays:
            proxy = DelayProxy(port, delay / 1000) if delay else None
            target = _through(url, proxy.port) if proxy else url
            try:
                for threads in args.threads:
                    for pool in args.pools:
                        res = run(target, pool=pool, threads=threads, seconds=args.seconds)
                        rows.append((delay, threads, pool, res))
                        print(f"delay {delay} ms, {threads} threads, pool_size {pool}: {res['rate']:.0f} recalls/s, "
                              f"p50 {res['p50']:.2f} ms, p95 {res['p95']:.2f} ms", flush=True)
            finally:
                if proxy is not None:
                    proxy.close()
    finally:
        if server is not None:
            server.stop()
    report = [f"# Concurrent recall on PostgreSQL by pool_size ({library_version()})", "",
              f"{machine()}; {args.facts:,} facts of one user, lexical recall, {args.seconds:g} s per row; "
              f"the server {'on loopback' if args.url is None else 'given by --url'}, the delay added by a proxy "
              "each way.", "",
              f"Command: `python benchmarks/pg_pool.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
              "| delay each way (ms) | threads | pool_size | recalls/s | p50 ms | p95 ms |",
              "|---:|---:|---:|---:|---:|---:|"]
    report += [f"| {d:g} | {t} | {p} | {r['rate']:,.0f} | {r['p50']:.2f} | {r['p95']:.2f} |" for d, t, p, r in rows]
    if args.out:
        args.out.write_text("\n".join(report) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
