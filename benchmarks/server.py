"""The HTTP service under concurrent load (issue 17): closed-loop clients on loopback mixing
turns, recall and context over many users of one memory file.

    python benchmarks/server.py [--users 100] [--facts-per-user 1000] [--clients 16 64]
        [--duration 30] [--warmup 5] [--mix turns=20 recall=60 context=20] [--retrieval lexical|hybrid]
        [--keys per-user|admin] [--dir DIR] [--out benchmarks/results/server.md] [--profile] [--quick]
        [--baseline 600] [--servers 1] [--reuse] [--no-instrument] [--switch-interval S]

1. **Load.** Before the server starts, ``--users`` users × ``--facts-per-user`` seeded synthetic facts
   (``_synthetic.py``; a different seed per user) go into one durable file with the library directly
   (``UnifiedMemory(path).scoped(user_id=u).remember_many(...)``), and one API key per user is created in
   the file (``tiers.maintenance.keys.KeyRing``; ``--keys admin``: one admin key for every request instead).
2. **Serve.** ``ServiceProcess`` runs ``unified-memory serve --retrieval MODE --no-mcp`` (log level info:
   the JSON access log is on, as an operator runs it) in a child process on 127.0.0.1 and a free port.
   Every user is recalled once, unmeasured (the first recall builds the in-memory indexes).
3. **Load generator.** For each ``--clients`` level, a separate process (so its CPU is its own, and
   measured) runs that many asyncio clients, each holding one keep-alive HTTP/1.1 connection (a
   minimal client written here, ``_Connection``: httpx cost ≈ 1 ms of CPU per request on the cores
   the server needs). Closed loop, no think time: each client sends its next request when the last
   one is answered; each request goes to a random user (with that user's key) and is a turn
   (``POST /turns``, a user message and a reply; extraction on, as by default), a recall
   (``POST /recall``, limit 10) or a context (``POST /context``, max_tokens 2000) drawn by ``--mix``.
   ``--warmup`` seconds are run and discarded, then ``--duration`` seconds are measured (requests that
   start inside the window). An error is any answer other than 2xx, or a transport error / 30 s timeout.
4. **Where the time goes.** Each request carries an ``X-Request-ID``; the server's access log gives its
   ``ms`` (inside the ASGI app), joined to the client's latency. The server child also runs a tiny
   ``sitecustomize`` (written by this script, on its ``PYTHONPATH``; ``--no-instrument`` turns it off)
   that wraps the memory's worker dispatch (``AsyncAPI._run``) to record, per memory call, the wait in
   the worker's queue and the run time on the worker thread. CPU time per thread of the server
   (``/proc/PID/task``) and of the load generator is read at the start and end of each measured window.
   ``--profile`` also runs cProfile on every thread of the server (slower: figures of that run are
   inflated) and adds the top functions to the report.

Before the server starts, ``--baseline`` memory calls of the same mix run in this process one at a time
(no HTTP, no concurrency): what a call costs alone. Experiments: ``--servers N`` runs N service
processes on the one file (clients spread round-robin); ``--reuse`` keeps the file in ``--dir`` (no
load; the earlier run's turns stay in it); ``--switch-interval S`` sets ``sys.setswitchinterval`` in
the server; ``--pin`` pins service process *i* (all its threads) to core *i* with ``taskset``, as an
operator can with ``taskset -c i unified-memory serve ...``.

``--quick`` is a tiny run for the smoke test (4 users × 60 facts, 2 and 4 clients, 2 s each).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, machine, publish  # noqa: E402
from _synthetic import ADJECTIVES, NOUNS, PLACES, SUBJECTS, VERBS, WHEN, percentile, queries, synthetic_facts  # noqa: E402

OPS = ("turns", "recall", "context")
TARGET_RECALL_P95_MS = 50.0
TARGET_CLIENTS = 16
REQUEST_TIMEOUT = 30.0
CONTEXT_TOKENS = 2000
RECALL_LIMIT = 10

# Loaded by the server child (only when UM_BENCH_INSTRUMENT names a folder): times every memory call
# on the file's worker thread (queue wait, run) and, with UM_BENCH_PROFILE=1, cProfiles every thread.
SITECUSTOMIZE = '''
import json, os, sys, threading, time

_DIR = os.environ.get("UM_BENCH_INSTRUMENT")
if os.environ.get("UM_BENCH_SWITCH_INTERVAL"):
    sys.setswitchinterval(float(os.environ["UM_BENCH_SWITCH_INTERVAL"]))
if _DIR:
    # uvicorn re-raises SIGTERM after its graceful shutdown, so atexit never runs: a daemon thread
    # appends the calls to calls-PID.jsonl twice a second, and dumps the profiles when asked (file dump-PID).
    _calls = []
    _workers = set()
    _profiles = []
    if os.environ.get("UM_BENCH_PROFILE") == "1":
        import cProfile

        def _start_profile(frame, event, arg):
            profile = cProfile.Profile()
            _profiles.append((threading.current_thread().name, profile))
            profile.enable()

        threading.setprofile(_start_profile)
        _main = cProfile.Profile()
        _profiles.append(("MainThread", _main))
        _main.enable()

    def _patch():
        import asyncio, contextvars
        from unified_memory.coordinator import async_api

        async def _run(self, fn, /, *args, **kwargs):
            loop = asyncio.get_running_loop()
            context = contextvars.copy_context()
            submitted = time.perf_counter()
            stamp, cpu = [], []  # wall and thread CPU clocks at the call's start and end

            def call():
                stamp.append(time.perf_counter())
                cpu.append(time.thread_time())
                _workers.add(threading.get_native_id())
                try:
                    return context.run(fn, *args, **kwargs)
                finally:
                    stamp.append(time.perf_counter())
                    cpu.append(time.thread_time())

            try:
                return await loop.run_in_executor(async_api._executor_for(self._view.backend.storage), call)
            finally:
                if len(stamp) == 2:
                    _calls.append((getattr(fn, "__name__", "?"), time.time(), (stamp[0] - submitted) * 1000,
                                   (stamp[1] - stamp[0]) * 1000, (time.perf_counter() - stamp[1]) * 1000,
                                   (cpu[1] - cpu[0]) * 1000))

        async_api.AsyncAPI._run = _run

    def _dump_profiles():
        for i, (name, profile) in enumerate(list(_profiles)):
            try:
                profile.dump_stats(os.path.join(_DIR, f"profile-{os.getpid()}-{i}-{name.replace('/', '_')}.prof"))
            except Exception as exc:  # a thread's profile that cannot be dumped: say so, go on
                print(f"[bench] profile {name}: {exc}", file=sys.stderr)

    def _flush():
        done = 0
        pid = os.getpid()
        path = os.path.join(_DIR, f"calls-{pid}.jsonl")
        while True:
            time.sleep(0.5)
            fresh = _calls[done:]
            done += len(fresh)
            with open(path, "a") as out:
                out.writelines(json.dumps(c) + "\\n" for c in fresh)
            with open(os.path.join(_DIR, f"workers-{pid}.json"), "w") as out:
                json.dump(sorted(_workers), out)
            if os.path.exists(os.path.join(_DIR, f"dump-{pid}")):
                os.unlink(os.path.join(_DIR, f"dump-{pid}"))
                _dump_profiles()
                open(os.path.join(_DIR, f"dumped-{pid}"), "w").close()

    _patch()
    threading.Thread(target=_flush, name="bench-flush", daemon=True).start()
'''


# -- data ---------------------------------------------------------------------------------------------


def user_ids(n: int) -> list[str]:
    return [f"user{i:03d}" for i in range(n)]


def prepare(path: Path, users: list[str], per_user: int, retrieval: str, keys: str, *,
            reuse: bool = False) -> dict[str, Any]:
    """Write the facts (unless ``reuse``: the file is kept) and the keys with the library directly."""
    from tiers.maintenance.keys import KeyRing
    from tiers.storage.backend import Storage
    from unified_memory import UnifiedMemory

    started = time.perf_counter()
    if not reuse:
        with UnifiedMemory(path, retrieval=retrieval) as memory:
            for n, user in enumerate(users):
                memory.scoped(user_id=user).remember_many(synthetic_facts(per_user, seed=1000 + n))
    written = time.perf_counter() - started
    ring = KeyRing(Storage(path))
    try:
        if keys == "admin":
            admin = ring.create(None, admin=True, label="benchmark")[1]
            issued = dict.fromkeys(users, admin)
        else:
            issued = {user: ring.create(user, label="benchmark")[1] for user in users}
    finally:
        ring.storage.close()
    return {"write_s": None if reuse else written, "keys": issued,
            "file_mb": sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 2**20}


def in_process(path: Path, users: list[str], retrieval: str, mix: dict[str, float], n: int) -> dict[str, Any]:
    """The same memory calls as the clients make, one at a time in this process (no HTTP, no
    concurrency): what one call costs on its own. ``n`` calls drawn by the mix, after one recall per user."""
    from unified_memory import UnifiedMemory

    rng = random.Random(5)
    pool = queries(500, seed=5)
    times: dict[str, list[float]] = {op: [] for op in OPS}
    with UnifiedMemory(path, retrieval=retrieval) as memory:
        scoped = {user: memory.scoped(user_id=user) for user in users}
        started = time.perf_counter()
        for user in users:
            scoped[user].recall("warm up", limit=RECALL_LIMIT)
        warm = time.perf_counter() - started
        for _ in range(n):
            op = rng.choices(OPS, [mix[o] for o in OPS])[0]
            mem = scoped[rng.choice(users)]
            t0 = time.perf_counter()
            if op == "turns":
                mem.add_turn(*turn_text(rng))
            elif op == "recall":
                mem.recall(rng.choice(pool), limit=RECALL_LIMIT)
            else:
                mem.context(rng.choice(pool), max_tokens=CONTEXT_TOKENS)
            times[op].append((time.perf_counter() - t0) * 1000)
    return {"times": times, "warm_s": warm}


# -- the load generator (a child process) ---------------------------------------------------------------


def turn_text(rng: random.Random) -> tuple[str, str]:
    subject, noun, place = rng.choice(SUBJECTS), rng.choice(NOUNS), rng.choice(PLACES)
    user = rng.choice([
        f"I started to {rng.choice(['collect', 'repair', 'paint', 'photograph'])} {rng.choice(ADJECTIVES)} "
        f"{noun} {rng.choice(WHEN)}",
        f"{subject.capitalize()} {rng.choice(VERBS)} {rng.choice(ADJECTIVES)} {noun} in {place}",
        f"We are flying to {place} next month, can you remind me what {subject} said about {noun}?",
        f"I really don't like {rng.choice(ADJECTIVES)} {noun}, please remember that",
    ])
    return user, f"Noted. I'll keep that in mind about {noun} and {place}."


class _Connection:
    """One keep-alive HTTP/1.1 connection, written for the load generator: a request costs it a
    fraction of httpx's CPU (which ran at ≈ 1 ms per request, on the same two cores as the server).
    Responses are read by ``Content-Length`` (every answer of these routes has one) or chunks."""

    def __init__(self, url: str) -> None:
        host_port = url.split("://", 1)[1].rstrip("/")
        self.host, _, port = host_port.partition(":")
        self.port = int(port or 80)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        if self.writer is None or self.writer.is_closing():
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None and self.writer is not None
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self.writer.write((f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                           f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{head}\r\n"
                           ).encode("latin-1") + body)
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
            lines = raw.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            if "content-length" in fields:
                await self.reader.readexactly(int(fields["content-length"]))
            elif fields.get("transfer-encoding", "").lower() == "chunked":
                while (size := int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)) > 0:
                    await self.reader.readexactly(size + 2)
                await self.reader.readuntil(b"\r\n")
            if fields.get("connection", "").lower() == "close":
                self.close()
            return status
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def _client(index: int, spec: dict[str, Any], samples: list[tuple], stop_at: float) -> None:
    rng = random.Random(spec["seed"] * 1000 + index)
    users, keys, weights = spec["users"], spec["keys"], [spec["mix"][op] for op in OPS]
    pool = queries(500, seed=spec["seed"] * 1000 + index)
    prefix = f"c{spec['clients']}-{index}-"
    connection = _Connection(spec["urls"][index % len(spec["urls"])])
    seq = 0
    while (now := time.perf_counter()) < stop_at:
        op = rng.choices(OPS, weights)[0]
        user = rng.choice(users)
        if op == "turns":
            said, reply = turn_text(rng)
            body: dict[str, Any] = {"user": said, "assistant": reply}
        elif op == "recall":
            body = {"query": rng.choice(pool), "limit": RECALL_LIMIT}
        else:
            body = {"query": rng.choice(pool), "max_tokens": CONTEXT_TOKENS}
        seq += 1
        request_id = f"{prefix}{seq}"
        headers = {"Authorization": f"Bearer {keys[user]}", "X-Request-ID": request_id}
        status: int | str
        try:
            status = await asyncio.wait_for(
                connection.post(f"/v1/users/{user}/{op}", json.dumps(body).encode(), headers), REQUEST_TIMEOUT)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, IndexError) as exc:
            status = type(exc).__name__
        samples.append((op, now, (time.perf_counter() - now) * 1000, status, request_id))
    connection.close()


def loadgen(spec: dict[str, Any]) -> None:
    """Run the clients; print START / END lines at the measured window's edges, then write the samples."""

    async def main() -> dict[str, Any]:
        begin = time.perf_counter()
        window = (begin + spec["warmup"], begin + spec["warmup"] + spec["duration"])
        samples: list[tuple] = []
        marks: dict[str, Any] = {}

        async def edges() -> None:
            await asyncio.sleep(window[0] - time.perf_counter())
            marks["start"] = (time.time(), _cpu_self())
            print("START", flush=True)
            await asyncio.sleep(window[1] - time.perf_counter())
            marks["end"] = (time.time(), _cpu_self())
            print("END", flush=True)

        await asyncio.gather(edges(), *(_client(i, spec, samples, window[1]) for i in range(spec["clients"])))
        measured = [s for s in samples if window[0] <= s[1] < window[1]]
        return {"samples": [(op, lat, status, rid) for op, _, lat, status, rid in measured],
                "window_s": window[1] - window[0], "marks": marks,
                "late_ms": max([s[1] + s[2] / 1000 - window[1] for s in measured] or [0]) * 1000}

    try:
        import uvloop

        result = uvloop.run(main())
    except ImportError:
        result = asyncio.run(main())
    Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread of a process, by thread id (/proc/PID/task/TID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        out[task.name] = (int(fields[11]) + int(fields[12])) / tick
    return out


def by_role(cpu: dict[str, float], workers: set[str]) -> dict[str, float]:
    """Per-thread CPU (keys "PID:TID") summed into the event loop (each server's main thread), the
    memory worker(s) and the rest."""
    out = {"event loop (main thread)": 0.0, "memory worker": 0.0, "other threads": 0.0}
    for key, seconds in cpu.items():
        pid, _, tid = key.partition(":")
        role = ("event loop (main thread)" if tid == pid else
                "memory worker" if tid in workers else "other threads")
        out[role] += seconds
    return out


def run_level(pids: list[int], spec: dict[str, Any]) -> dict[str, Any]:
    """One concurrency level: the load generator in a child process, CPU read at the window's edges."""
    spec_file = Path(spec["result"]).with_suffix(".spec.json")
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    load = [os.getloadavg()[0]]
    child = subprocess.Popen([sys.executable, __file__, "--loadgen", str(spec_file)], stdout=subprocess.PIPE,
                             text=True, cwd=ROOT)
    cpu: dict[str, dict[str, float]] = {}
    assert child.stdout is not None
    for line in child.stdout:
        if line.strip() in ("START", "END"):
            cpu[line.strip()] = {f"{pid}:{tid}": seconds for pid in pids
                                 for tid, seconds in thread_cpu(pid).items()}
    if child.wait() != 0:
        raise RuntimeError(f"the load generator failed (exit {child.returncode})")
    load.append(os.getloadavg()[0])
    result = json.loads(Path(spec["result"]).read_text(encoding="utf-8"))
    result["server_cpu_tids"] = {k: cpu["END"].get(k, 0.0) - cpu["START"].get(k, 0.0) for k in cpu["END"]}
    result["loadgen_cpu"] = result["marks"]["end"][1] - result["marks"]["start"][1]
    result["load"] = load
    return result


# -- the run --------------------------------------------------------------------------------------------


def access_log(text: str) -> dict[str, dict[str, Any]]:
    """The server's access-log lines (JSON with a request_id), by request id."""
    found = {}
    for line in text.splitlines():
        if line.startswith("{") and '"request_id"' in line:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            found[entry["request_id"]] = entry
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    from unified_memory.service.background import ServiceProcess

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="server-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    db = work / "server-bench.db"
    reuse = args.reuse and db.exists()
    if not reuse:
        for stale in work.glob("server-bench.db*"):
            stale.unlink()
    users = user_ids(args.users)
    print(f"[server] {time.strftime('%H:%M:%S')} writing {args.users} users × {args.facts_per_user:,} facts",
          file=sys.stderr, flush=True)
    prepared = prepare(db, users, args.facts_per_user, args.retrieval, args.keys, reuse=reuse)
    print(f"[server] written in {prepared['write_s'] or 0:.1f} s ({prepared['file_mb']:.0f} MB)", file=sys.stderr,
          flush=True)
    alone = in_process(db, users, args.retrieval, args.mix, args.baseline) if args.baseline else None

    instrument = work / "instrument"
    env = {"PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    if not args.no_instrument:
        instrument.mkdir(exist_ok=True)
        for old in instrument.glob("*"):
            if old.is_file():
                old.unlink()
        site = instrument / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        env = {"PYTHONPATH": os.pathsep.join([str(site), env["PYTHONPATH"]]),
               "UM_BENCH_INSTRUMENT": str(instrument), "UM_BENCH_PROFILE": "1" if args.profile else "0"}
        if args.switch_interval:
            env["UM_BENCH_SWITCH_INTERVAL"] = str(args.switch_interval)
    server_args = ["--retrieval", args.retrieval, "--no-mcp", "--log-level", "info"]
    if args.workers > 1:
        server_args += ["--workers", str(args.workers)]
    services = [ServiceProcess(db, args=server_args, env=env, log_path=work / f"server-{i}.log", startup_timeout=300)
                for i in range(args.servers)]
    levels: dict[int, dict[str, Any]] = {}
    with contextlib.ExitStack() as stack:
        import httpx

        for service in services:
            stack.enter_context(service)
        started = time.perf_counter()
        for service in services:  # every user once: the first recall builds the in-memory indexes
            with httpx.Client(base_url=service.url, timeout=300) as http:
                for user in users:
                    http.post(f"/v1/users/{user}/recall", json={"query": "warm up", "limit": RECALL_LIMIT},
                              headers={"Authorization": f"Bearer {prepared['keys'][user]}"}).raise_for_status()
        warm_s = time.perf_counter() - started
        pids = [service.process.pid for service in services if service.process is not None]
        if args.pin:  # service process i (every thread of it) on core i, as `taskset -c i unified-memory serve`
            for i, pid in enumerate(pids):
                subprocess.run(["taskset", "-a", "-cp", str(i % (os.cpu_count() or 1)), str(pid)], check=True,
                               stdout=subprocess.DEVNULL)
        for clients in args.clients:
            print(f"[server] {time.strftime('%H:%M:%S')} {clients} clients: {args.warmup:g} s warm-up + "
                  f"{args.duration:g} s", file=sys.stderr, flush=True)
            spec = {"urls": [service.url for service in services], "users": users, "keys": prepared["keys"],
                    "clients": clients, "mix": args.mix, "warmup": args.warmup, "duration": args.duration,
                    "seed": clients, "result": str(work / f"level-{clients}.json")}
            levels[clients] = run_level(pids, spec)
            done = levels[clients]
            print(f"[server] {clients} clients: {len(done['samples']) / done['window_s']:,.0f} req/s",
                  file=sys.stderr, flush=True)
        time.sleep(1.0)  # the instrumentation flushes twice a second
        if args.profile:
            for pid in pids:
                (instrument / f"dump-{pid}").touch()
            deadline = time.monotonic() + 120
            while (not all((instrument / f"dumped-{pid}").exists() for pid in pids)
                   and time.monotonic() < deadline):
                time.sleep(0.2)
    server_log = "\n".join(service.log() for service in services)
    calls, workers = [], set()
    if not args.no_instrument:
        for found in sorted(instrument.glob("calls-*.jsonl")):
            calls += [json.loads(line) for line in found.read_text(encoding="utf-8").splitlines() if line.strip()]
        for found in instrument.glob("workers-*.json"):
            workers |= {str(t) for t in json.loads(found.read_text(encoding="utf-8"))}
    for level in levels.values():
        level["server_cpu"] = by_role(level.pop("server_cpu_tids"), workers)
    profile_text = profile_summary(instrument) if args.profile else ""
    return {"prepared": {k: v for k, v in prepared.items() if k != "keys"}, "levels": levels, "warm_s": warm_s,
            "alone": alone,
            "access": access_log(server_log), "calls": calls, "profile": profile_text, "db": db,
            "server_errors": [line for line in server_log.splitlines() if "Traceback" in line or "ERROR" in line]}


def profile_summary(instrument: Path, top: int = 25) -> str:
    import io
    import pstats

    parts = []
    for prof in sorted(instrument.glob("profile-*.prof")):
        stream = io.StringIO()
        try:
            stats = pstats.Stats(str(prof), stream=stream)
        except (OSError, TypeError, ValueError) as exc:
            parts.append(f"{prof.name}: unreadable ({exc})")
            continue
        if "MainThread" not in prof.name and "unified-memory" not in prof.name:
            continue  # idle helpers: the flusher, AnyIO's threads (FastAPI runs sync dependencies there)
        stats.sort_stats("cumulative").print_stats(top)
        parts.append(f"### {prof.stem} (total {stats.total_tt:.1f} s of CPU-side time)\n\n```\n"
                     + "\n".join(line[:160] for line in stream.getvalue().strip().splitlines()[-(top + 3):])
                     + "\n```")
    return "\n\n".join(parts)


# -- the report -----------------------------------------------------------------------------------------


def _pcts(values: list[float]) -> str:
    if not values:
        return "–"
    return " / ".join(f"{percentile(values, q):.1f}" for q in (0.5, 0.95, 0.99))


def _p(values: list[float], q: float) -> str:
    return f"{percentile(values, q):.1f}" if values else "–"


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def baseline(alone: dict[str, Any] | None) -> list[str]:
    """The in-process table: each memory call alone, no HTTP, no concurrency."""
    if not alone:
        return []
    rows = []
    for op in OPS:
        times = alone["times"][op]
        mean = sum(times) / len(times) if times else 0.0
        rows.append([op, f"{len(times):,}", f"{_p(times, .5)} / {_p(times, .95)} / {_p(times, .99)}",
                     f"{mean:.1f}"])
    every = [t for op in OPS for t in alone["times"][op]]
    capacity = 1000 / (sum(every) / len(every)) if every else 0
    return ["The same memory calls in the benchmark's own process before the server starts, one at a time "
            "(no HTTP, no concurrency, same file, same mix; after one recall per user, "
            f"{alone['warm_s']:.1f} s): what a call costs alone. At this mix one worker thread can serve at most "
            f"≈ {capacity:,.0f} calls/s (1 / mean).", "",
            table(["op", "calls", "p50 / p95 / p99 ms", "mean ms"], rows), ""]


def _ok(status: Any) -> bool:
    return isinstance(status, int) and 200 <= status < 300


def _errors(samples: list[list[Any]]) -> str:
    bad: dict[str, int] = {}
    for _, _, status, _ in samples:
        if not _ok(status):
            bad[str(status)] = bad.get(str(status), 0) + 1
    return "0" if not bad else f"**{sum(bad.values())}** (" + ", ".join(f"{k}: {v}" for k, v in sorted(bad.items())) + ")"


def report(args: argparse.Namespace, argv: list[str], result: dict[str, Any], versions: tuple[str, str],
           started: str) -> str:
    levels, access, calls = result["levels"], result["access"], result["calls"]
    rows, where, cpu_rows, notes = [], [], [], []
    for clients, level in sorted(levels.items()):
        samples, window = level["samples"], level["window_s"]
        ok = [s for s in samples if _ok(s[2])]
        row = [str(clients), f"{len(samples):,}", f"{len(samples) / window:,.0f}", _errors(samples),
               _pcts([s[1] for s in ok])]
        for op in OPS:
            mine = [s[1] for s in ok if s[0] == op]
            row.append(f"{len(mine) / window:,.0f}: {_pcts(mine)}")
        rows.append(row)
        begin, end = level["marks"]["start"][0], level["marks"]["end"][0]
        in_window = [c for c in calls if begin <= c[1] <= end + level["late_ms"] / 1000]
        fn_of = {"turns": "add_turn", "recall": "recall", "context": "context"}
        for op in OPS:
            mine = [s for s in ok if s[0] == op]
            server = [access[s[3]]["ms"] for s in mine if s[3] in access]
            client = [s[1] for s in mine]
            outside = [s[1] - access[s[3]]["ms"] for s in mine if s[3] in access]
            mem = [c for c in in_window if c[0] == fn_of[op]]
            wait, run_ms, back = [c[2] for c in mem], [c[3] for c in mem], [c[4] for c in mem]
            cpu = [c[5] for c in mem if len(c) > 5]
            where.append([str(clients), op, f"{len(mine):,}", f"{_p(client, .5)} / {_p(client, .95)}",
                          f"{_p(server, .5)} / {_p(server, .95)}", f"{_p(outside, .5)} / {_p(outside, .95)}",
                          f"{_p(wait, .5)} / {_p(wait, .95)}",
                          f"{_p(run_ms, .5)} / {_p(run_ms, .95)} / {sum(run_ms) / max(1, len(run_ms)):.1f}",
                          f"{_p(back, .5)} / {_p(back, .95)}", f"{sum(cpu) / max(1, len(cpu)):.2f}"])
        busy = sum(c[3] for c in in_window if begin <= c[1] <= end) / 1000
        srv = level["server_cpu"]
        ops_s = len(samples) / window
        mean = sum(s[1] for s in samples) / max(1, len(samples))
        cpu_rows.append([str(clients), f"{level['load'][0]:.2f} / {level['load'][1]:.2f}",
                         f"{srv.get('event loop (main thread)', 0) / window:.2f}",
                         f"{srv.get('memory worker', 0) / window:.2f}", f"{srv.get('other threads', 0) / window:.2f}",
                         f"{busy / window / args.servers:.0%}" if calls else "–", f"{level['loadgen_cpu'] / window:.2f}",
                         f"{mean:.1f} ms vs {clients / ops_s * 1000:.1f} ms" if ops_s else "–"])
    verdicts = []
    target = levels.get(TARGET_CLIENTS)
    if target is None:
        verdicts.append([f"recall p95 ≤ {TARGET_RECALL_P95_MS:g} ms at {TARGET_CLIENTS} clients", "not run"])
    else:
        recall = [s[1] for s in target["samples"] if s[0] == "recall" and _ok(s[2])]
        p95 = percentile(recall, 0.95) if recall else None
        verdicts.append([f"recall p95 ≤ {TARGET_RECALL_P95_MS:g} ms at {TARGET_CLIENTS} clients",
                         "no recall measured" if p95 is None else
                         f"{p95:.1f} ms: " + ("**met**" if p95 <= TARGET_RECALL_P95_MS
                                              else f"**missed** by {p95 / TARGET_RECALL_P95_MS:.1f}×")])
    errors = sum(not _ok(s[2]) for level in levels.values() for s in level["samples"])
    verdicts.append(["0 errors (every level)", f"{errors}: " + ("**met**" if errors == 0 else "**missed**")])
    prepared = result["prepared"]
    mix = ", ".join(f"{op} {args.mix[op]:g}%" for op in OPS)
    if versions[0] != versions[1]:
        notes.append(f"- The library changed during the run: `{versions[1]}` at the end.")
    if result["server_errors"]:
        notes.append(f"- The server log has {len(result['server_errors'])} error line(s); first: "
                     f"`{result['server_errors'][0][:200]}`")
    if args.switch_interval:
        notes.append(f"- **An experiment: the server ran with `sys.setswitchinterval({args.switch_interval:g})` "
                     "(Python's default is 0.005 s).**")
    if args.profile:
        notes.append("- **This run had cProfile on every server thread (`--profile`): its latencies are inflated "
                     "by the profiler; use it for where the time goes, not for the figures.**")
    late = max(level["late_ms"] for level in levels.values()) if levels else 0
    text = [
        "# The HTTP service under concurrent load",
        "",
        f"Command: `{('python benchmarks/server.py ' + shlex.join(argv)).strip()}`",
        "",
        f"Machine: {machine()}; run started {started}",
        "",
        f"Library: `{versions[0]}`",
        "",
        f"Server: `unified-memory serve --db FILE --host 127.0.0.1 --port PORT {' '.join(result['server_args'])}` "
        + ("in a child process (`ServiceProcess`): one uvicorn process" if args.servers == 1 else
           f"in {args.servers} child processes (`ServiceProcess`) on the same file, the clients spread over them "
           "round-robin; in each: one uvicorn process")
        + (" (process *i* pinned to core *i*, every thread: `taskset -a -cp i PID`)" if args.pin else "")
        + ", one event loop (uvloop / httptools when "
        "installed: here " + result["loop"] + "), every memory call on the file's single worker thread; JSON "
        "access log at info to a file. " + ("Worker calls timed by the benchmark's `sitecustomize` (see the "
                                            "docstring)." if not args.no_instrument else "No instrumentation."),
        "",
        f"Data: {args.users:,} users × {args.facts_per_user:,} facts = {args.users * args.facts_per_user:,} facts, "
        f"retrieval `{args.retrieval}`, written before the server starts with `remember_many` per user"
        + (f" in {prepared['write_s']:.1f} s" if prepared["write_s"] is not None else
           " (by an earlier run: `--reuse`, so the turns of that run are in the file too)")
        + f"; file {prepared['file_mb']:.0f} MB. Keys: "
        + ("one per user (each request uses its user's key)" if args.keys == "per-user"
           else "one admin key for every request") + f". First recall of every user (unmeasured): "
        f"{result['warm_s']:.1f} s in all.",
        "",
        f"Workload: closed loop, no think time; each client one keep-alive HTTP/1.1 connection (the benchmark's own minimal client, "
        f"asyncio{' + uvloop' if result['loop'] != 'asyncio' else ''}), all clients of a level in one load-generator "
        f"process apart from the benchmark and the server; each request to a random user; mix {mix}; turn = "
        f"`POST /turns` (user message + reply, extraction on), recall = `POST /recall` (limit {RECALL_LIMIT}), "
        f"context = `POST /context` (max_tokens {CONTEXT_TOKENS}); {args.warmup:g} s warm-up discarded, then "
        f"{args.duration:g} s measured per level (requests started inside the window; the last answered "
        f"{late:.0f} ms after it).",
        "",
        "## Results",
        "",
        table(["clients", "requests", "req/s", "errors", "all p50 / p95 / p99 ms",
               "turns: req/s: p50 / p95 / p99 ms", "recall: req/s: p50 / p95 / p99 ms",
               "context: req/s: p50 / p95 / p99 ms"], rows),
        "",
        "## Target (issue 17)",
        "",
        table(["target", "measured"], verdicts),
        "",
        "## Where the time goes",
        "",
        "Per operation, p50 / p95 in ms: the client's latency; the server's own `ms` (access log: from the "
        "first ASGI layer to the last byte sent); client minus server (the load generator, the socket and "
        "uvicorn's HTTP parsing: time outside the app); the wait of the memory call in the worker thread's "
        "queue; its run on the worker (p50 / p95 / mean); the hop back to the event loop after it ran; and the "
        "worker thread's CPU time during the call (mean: the run minus the waits for the GIL and the disk).",
        "",
        table(["clients", "op", "requests", "client", "server (access log)", "client − server",
               "queue wait at the worker", "run on the worker (p50 / p95 / mean)", "back to the loop",
               "worker CPU (mean)"], where),
        "",
        "CPU in cores (CPU seconds / measured seconds), per thread of the server and for the load generator; "
        "'worker busy' = sum of the memory calls' run time / measured time (per worker: / servers); Little's law check: mean latency "
        "measured vs clients / throughput.",
        "",
        table(["clients", "load average (1 min) start / end", "server event loop", "server memory worker",
               "server other threads", "worker busy", "load generator", "mean latency vs N / X"], cpu_rows),
        "",
        *baseline(result.get("alone")),
        *notes,
    ]
    if result["profile"]:
        text += ["", "## cProfile of the server (`--profile`)", "", result["profile"]]
    return "\n".join(text).rstrip() + "\n"


# -- the command ----------------------------------------------------------------------------------------


def parse_mix(items: list[str]) -> dict[str, float]:
    mix = dict.fromkeys(OPS, 0.0)
    for item in items:
        op, _, share = item.partition("=")
        if op not in mix or not share:
            raise SystemExit(f"--mix: expected OP=SHARE with OP one of {', '.join(OPS)}, got {item!r}")
        mix[op] = float(share)
    if sum(mix.values()) <= 0:
        raise SystemExit("--mix: the shares add up to 0")
    total = sum(mix.values())
    return {op: 100 * share / total for op, share in mix.items()}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--loadgen"]:
        loadgen(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--facts-per-user", type=int, default=1000)
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds per level")
    parser.add_argument("--warmup", type=float, default=5.0, help="discarded seconds before each level")
    parser.add_argument("--mix", nargs="+", default=["turns=20", "recall=60", "context=20"], metavar="OP=SHARE")
    parser.add_argument("--retrieval", choices=("lexical", "hybrid"), default="lexical")
    parser.add_argument("--servers", type=int, default=1,
                        help="service processes on the one file (clients spread over them round-robin)")
    parser.add_argument("--workers", type=int, default=1,
                        help="serve --workers N: N processes on one port (CPU per thread is not split by "
                             "process then: use with --no-instrument)")
    parser.add_argument("--pin", action="store_true",
                        help="pin service process i (all its threads) to core i (taskset), after it started")
    parser.add_argument("--keys", choices=("per-user", "admin"), default="per-user")
    parser.add_argument("--dir", help="where the memory file, the server log and the samples go (default: a temp dir)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "server.md"))
    parser.add_argument("--profile", action="store_true", help="cProfile every server thread (inflates latencies)")
    parser.add_argument("--no-instrument", action="store_true", help="no sitecustomize in the server child")
    parser.add_argument("--switch-interval", type=float, metavar="S",
                        help="an experiment: sys.setswitchinterval(S) in the server (the GIL hand-over; default 0.005)")
    parser.add_argument("--baseline", type=int, default=600, metavar="N",
                        help="N memory calls in-process, one at a time, before the server starts (0: none)")
    parser.add_argument("--reuse", action="store_true", help="keep the memory file in --dir if there (no load)")
    parser.add_argument("--quick", action="store_true", help="a tiny run for the smoke test")
    args = parser.parse_args(argv)
    if args.quick:
        args.users, args.facts_per_user, args.clients = 4, 60, [2, 4]
        args.duration, args.warmup, args.baseline = 2.0, 0.5, min(args.baseline, 30)
    args.mix = parse_mix(args.mix)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    before = library_version()
    result = run(args)
    result["server_args"] = ["--retrieval", args.retrieval, "--no-mcp", "--log-level", "info"] + (
        ["--workers", str(args.workers)] if args.workers > 1 else [])
    result["loop"] = " + ".join(name for name in ("uvloop", "httptools") if _installed(name)) or "asyncio, h11"
    publish(report(args, argv, result, (before, library_version()), started), Path(args.out))
    return 0


def _installed(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    sys.exit(main())
