"""Concurrency (issue 8): 8 threads and 4 processes writing and recalling on one file:
no error surfaces, no write is lost or duplicated.

Each test runs on a SQLite file and on a PostgreSQL database (``[postgresql]``); with worker
processes the test creates the database and hands them its URL (the ``storage_backend``
fixture's patch does not reach another process).

Twelve workers start together (a file barrier): four processes (``python -c``, each with
its own :class:`UnifiedMemory`) and, in the test process, eight threads — four sharing
ONE ``UnifiedMemory`` object (through scoped views), four with a memory object each.
Each worker runs a seeded random mix of ``add_turn``, ``remember``, ``remember_many``,
``add_triple``, ``recall``, ``context``, ``facts()``, ``consolidate`` and ``end_session``,
for users some workers share and one user of its own, under random agents and sessions.
Every written text carries a unique marker, and a write is recorded only after its call
returned. Afterwards the file is reopened: every acknowledged write is there exactly
once (counted by marker in the database and through the API), nothing else carries a marker
of a failed write, the file is sound, every marker is recallable by its owner, and no
worker saw an exception (``database is locked`` included).

The workload runs lexically and with ``embedder=FakeEmbedder(dim=32), retrieval="hybrid"``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import scaled, service_database
from tiers.storage.backend import Storage

ROOT = Path(__file__).resolve().parents[2]
THREADS = 8
PROCESSES = 4
SHARED_OBJECT_THREADS = 4  # threads 0..3 share one UnifiedMemory object; 4..7 open their own
START_TIMEOUT = 120.0
RUN_TIMEOUT = 240.0
MEMORY_OPTIONS = {"short_term_limit": 4, "long_term_limit": None}
OPS = ("add_turn", "add_turn", "remember", "remember", "remember_many", "add_triple", "recall", "recall",
       "context", "facts", "consolidate", "end_session")


def marker(kind: str, worker: str, n: int) -> str:
    """A unique, single-token marker ("zq" both ends: no marker is a substring of another)."""
    return f"zq{kind}{worker}n{n}zq"


def open_memory(path: str, retrieval: str) -> Any:
    from unified_memory import UnifiedMemory

    if retrieval == "hybrid":
        from unified_memory.testing import FakeEmbedder

        return UnifiedMemory(path, embedder=FakeEmbedder(dim=32), retrieval="hybrid", **MEMORY_OPTIONS)
    return UnifiedMemory(path, retrieval="lexical", **MEMORY_OPTIONS)


def file_barrier(sync: Path, name: str, total: int) -> None:
    (sync / f"ready-{name}").touch()
    deadline = time.monotonic() + START_TIMEOUT
    while sum(1 for _ in sync.glob("ready-*")) < total:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}: the other workers did not start within {START_TIMEOUT}s")
        time.sleep(0.005)


def run_worker(mem: Any, name: str, seed: int, ops: int, users: list[str], emit: Callable[..., None]) -> None:
    """The workload of one worker on ``mem`` (its own object or a shared one).

    ``emit("ack", kind, ids, markers, user, agent, session)`` once a write returned,
    ``emit("error", op, text)`` for any exception, ``emit("miss", text)`` when the worker
    does not read back what it has just written, ``emit("op", op)`` for each operation.
    """
    rng = random.Random(seed)
    written: list[tuple[str, str]] = []  # (user, marker) of this worker's acknowledged writes
    for i in range(ops):
        op = rng.choice(OPS)
        user = rng.choice(users)
        agent = rng.choice([None, None, "agent-a", f"agent-{name}"])
        session = rng.choice([None, "s1", f"s-{name}"])
        view = mem.scoped(user_id=user, agent_id=agent, session_id=session)
        scope = (user, agent, session)
        emit("op", op)
        try:
            if op == "add_turn":
                said, reply = marker("t", name, i), marker("r", name, i)
                important = rng.random() < 0.5  # some turns are promoted to facts when they leave the window
                text = (f"Remember that I am allergic to {said} since 2019" if important
                        else f"worker {name} says {said}")
                ids = view.add_turn(text, f"noted {reply}")
                emit("ack", "turn", ids, [said, reply], *scope)
                written.append((user, said))
            elif op == "remember":
                mark = marker("f", name, i)
                fact_id = view.remember(f"worker {name} keeps note {mark}", importance=rng.random())
                emit("ack", "fact", [fact_id], [mark], *scope)
                hits = view.recall(mark, limit=5, tiers="long_term")
                if fact_id not in [h.id for h in hits]:
                    emit("miss", f"{name} did not recall {mark} right after remembering it")
                written.append((user, mark))
            elif op == "remember_many":
                marks = [marker(f"m{k}", name, i) for k in range(rng.randint(1, 4))]
                ids = view.remember_many([{"text": f"worker {name} lists item {m}", "importance": 0.5}
                                          for m in marks])
                emit("ack", "fact", ids, marks, *scope)
                written += [(user, m) for m in marks]
            elif op == "add_triple":
                mark = marker("g", name, i)
                triple_id = view.add_triple(f"node {mark}", "links_to", f"target {mark}o")
                emit("ack", "triple", [triple_id], [mark], *scope)
                written.append((user, mark))
            elif op == "recall":
                mine = [m for u, m in written if u == user]
                query = rng.choice(mine) if mine and rng.random() < 0.7 else f"worker says note {rng.randint(0, 50)}"
                view.recall(query, limit=rng.randint(1, 10))
            elif op == "context":
                view.context(rng.choice([None, "allergic note item", f"worker {name}"]), max_tokens=300)
            elif op == "facts":
                listed = {f.id for f in view.facts(include_inactive=True)}
                del listed
                view.entities()
                view.triples()
                view.episodes(limit=20)
            elif op == "consolidate":
                view.consolidate()
            else:
                view.end_session()
        except Exception as exc:  # noqa: BLE001 - every failure is collected and fails the test
            emit("error", op, f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}")


def process_main(args: dict[str, Any]) -> None:
    """Entry point of a worker process: prints one JSON list per line, then ``["done"]``."""
    def emit(*parts: Any) -> None:
        print(json.dumps(parts), flush=True)

    try:
        mem = open_memory(args["path"], args["retrieval"])
    except Exception as exc:  # noqa: BLE001
        emit("error", "open", repr(exc))
        file_barrier(Path(args["sync"]), args["name"], args["total"])
        emit("done")
        return
    try:
        file_barrier(Path(args["sync"]), args["name"], args["total"])
        run_worker(mem, args["name"], args["seed"], args["ops"], args["users"], emit)
    finally:
        try:
            mem.close()
        except Exception as exc:  # noqa: BLE001
            emit("error", "close", repr(exc))
    emit("done")


PROCESS_SCRIPT = ("import json, sys\nfrom tests.reliability.test_concurrency import process_main\n"
                  "process_main(json.loads(sys.argv[1]))\n")


def users_of(name: str) -> list[str]:
    """Everyone shares "common"; even workers share "even", odd ones "odd"; and one user of its own."""
    index = int(name[1:]) + (100 if name.startswith("p") else 0)
    return ["common", "even" if index % 2 == 0 else "odd", f"solo-{name}"]


def run_workload(path: str | Path, sync: Path, retrieval: str, ops: int, seed: int) -> dict[str, Any]:
    from unified_memory import UnifiedMemory

    UnifiedMemory(path, retrieval="lexical").close()  # the schema exists before the workers race
    total = THREADS + PROCESSES
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs = []
    for p in range(PROCESSES):
        name = f"p{p}"
        args = {"path": str(path), "sync": str(sync), "name": name, "seed": seed * 1000 + 100 + p, "ops": ops,
                "users": users_of(name), "retrieval": retrieval, "total": total}
        procs.append((name, subprocess.Popen([sys.executable, "-c", PROCESS_SCRIPT, json.dumps(args)], cwd=ROOT,
                                             env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    events: list[tuple[str, list]] = []
    lock = threading.Lock()
    shared = open_memory(str(path), retrieval)
    own: list[Any] = []

    def thread_main(t: int) -> None:
        name = f"t{t}"

        def emit(*parts: Any) -> None:
            with lock:
                events.append((name, list(parts)))

        try:
            if t < SHARED_OBJECT_THREADS:
                mem = shared
            else:
                mem = open_memory(str(path), retrieval)
                with lock:
                    own.append(mem)
            file_barrier(sync, name, total)
            run_worker(mem, name, seed * 1000 + t, ops, users_of(name), emit)
        except Exception as exc:  # noqa: BLE001
            emit("error", "thread", repr(exc))
        emit("done")

    started = time.monotonic()
    threads = [threading.Thread(target=thread_main, args=(t,), name=f"worker-t{t}", daemon=True)
               for t in range(THREADS)]
    for thread in threads:
        thread.start()
    deadline = started + START_TIMEOUT + RUN_TIMEOUT
    for thread in threads:
        thread.join(max(1.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    stderr_tail = {}
    try:
        for name, proc in procs:
            try:
                stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
                hung.append(name)
            for line in stdout.splitlines():
                if line.startswith("["):
                    events.append((name, json.loads(line)))
            if proc.returncode != 0:
                events.append((name, ["error", "exit", f"exit code {proc.returncode}"]))
            stderr_tail[name] = stderr[-3000:]
    finally:
        for _, proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    seconds = time.monotonic() - started
    if not hung:
        for mem in [shared, *own]:
            mem.close()
    return {"events": events, "hung": hung, "seconds": seconds, "stderr": stderr_tail}


def check_outcome(path: str | Path, retrieval: str, outcome: dict[str, Any]) -> dict[str, int]:
    """Assert the outcome (see the module docstring); returns the figures."""
    events, hung = outcome["events"], outcome["hung"]
    assert hung == [], f"workers did not finish: {hung}"
    errors = [(w, e[1], e[2]) for w, e in events if e[0] == "error"]
    locked = [e for e in errors if "locked" in e[2]]
    assert locked == [], f"'database is locked' surfaced {len(locked)} times, e.g. {locked[:2]}"
    assert errors == [], f"{len(errors)} calls failed, e.g. {errors[:3]}\n{outcome['stderr']}"
    done = Counter(w for w, e in events if e[0] == "done")
    assert sorted(done) == sorted([f"t{t}" for t in range(THREADS)] + [f"p{p}" for p in range(PROCESSES)])
    misses = [e[1] for _, e in events if e[0] == "miss"]
    assert misses == [], misses[:5]
    acks = [e[1:] for _, e in events if e[0] == "ack"]
    operations = sum(1 for _, e in events if e[0] == "op")
    writes = sum(len(ids) for _, ids, *_ in acks)
    lost = duplicated = 0
    problems: list[str] = []
    with contextlib.closing(Storage(path)) as db:  # the file, or its PostgreSQL database
        if not db.dialect.postgres:  # PostgreSQL has no such check (and enforces its foreign keys)
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        for table in ("facts", "messages", "entities", "triples"):
            dupes = db.execute(f"SELECT id FROM {table} GROUP BY id HAVING COUNT(*) > 1").fetchall()
            assert dupes == [], (table, dupes[:5])
        # No two active facts of one user and agent say the same thing (remember reinforces instead).
        same = db.execute("SELECT user_id, agent_id, norm_key, COUNT(*) FROM facts WHERE status = 'active' "
                          "GROUP BY user_id, agent_id, norm_key HAVING COUNT(*) > 1").fetchall()
        assert same == [], same[:5]
        # A message is promoted at most once: no fact names one source message twice.
        doubled = [fact_id for fact_id, sources in db.execute("SELECT id, source_message_ids FROM facts")
                   if len(json.loads(sources)) != len(set(json.loads(sources)))]
        for kind, ids, marks, user, agent, session in acks:
            agent_stored, session_stored = agent or "", session or ""
            if kind == "fact":
                for fact_id, mark in zip(ids, marks, strict=True):
                    rows = db.execute("SELECT id, user_id, agent_id, session_id, source FROM facts WHERE text LIKE ?",
                                      [f"%{mark}%"]).fetchall()
                    expected = [(fact_id, user, agent_stored, session_stored, "remember")]
                    if rows != expected:
                        lost += not rows
                        duplicated += max(0, len(rows) - 1)
                        problems.append(f"fact {mark}: {rows} != {expected}")
            elif kind == "turn":
                for message_id, mark in zip(ids, marks, strict=True):
                    rows = db.execute("SELECT id, user_id, agent_id, session_id FROM messages WHERE content LIKE ?",
                                      [f"%{mark}%"]).fetchall()
                    expected = [(message_id, user, agent_stored, session_stored)]
                    if rows != expected:
                        lost += not rows
                        duplicated += max(0, len(rows) - 1)
                        problems.append(f"message {mark}: {rows} != {expected}")
            else:
                (triple_id,), (mark,) = ids, marks
                rows = db.execute(
                    "SELECT t.id, t.user_id, t.agent_id FROM triples t JOIN entities s ON s.id = t.subject_id "
                    "WHERE s.name = ?", [f"node {mark}"]).fetchall()
                expected = [(triple_id, user, agent_stored)]
                if rows != expected:
                    lost += not rows
                    duplicated += max(0, len(rows) - 1)
                    problems.append(f"triple {mark}: {rows} != {expected}")
        # Nothing carries a marker no call acknowledged (a failed write must leave nothing).
        acknowledged = {m for _, _, marks, *_ in acks for m in marks}
        stray = []
        for table, column in (("facts", "text"), ("messages", "content"), ("entities", "name")):
            for (text,) in db.execute(f"SELECT {column} FROM {table} WHERE {column} LIKE '%zq%zq%'"):
                found = {w for w in text.replace(".", " ").split() if w.startswith("zq") and w.endswith("zq")}
                stray += [(table, m) for m in found if m not in acknowledged and not m.endswith("zqo")]
    assert (lost, duplicated, problems) == (0, 0, []), problems[:10]
    assert doubled == [], f"facts naming a message twice: {doubled[:5]}"
    assert stray == [], stray[:10]

    # Through the API, on a fresh memory: listed exactly once, recallable by the owner.
    by_user: dict[str, list[tuple]] = {}
    for ack in acks:
        by_user.setdefault(ack[3], []).append(ack)
    with open_memory(str(path), retrieval) as mem:
        for user, user_acks in by_user.items():
            view = mem.scoped(user_id=user)  # no agent: every agent's items of the user
            facts = Counter(m for f in view.facts(include_inactive=True) for m in f.text.split() if m.endswith("zq"))
            messages = Counter(m for e in view.episodes() for m in (e.content or "").split() if m.endswith("zq"))
            triples = Counter(t.subject.split()[-1] for t in view.triples())
            for kind, _ids, marks, *_ in user_acks:
                counts = facts if kind == "fact" else messages if kind == "turn" else triples
                for mark in marks:
                    # a turn's user text may also be promoted to a fact: messages count it once
                    assert counts[mark] == 1, (user, kind, mark, counts[mark])
            for kind, ids, marks, _, agent, session in user_acks:
                if kind == "fact":
                    for fact_id, mark in zip(ids, marks, strict=True):
                        hits = view.recall(mark, limit=5, tiers="long_term")
                        assert fact_id in [h.id for h in hits], (retrieval, user, mark)
                elif kind == "turn":
                    hits = mem.scoped(user_id=user, agent_id=agent, session_id=session).recall(
                        marks[0], limit=5, tiers=["short_term", "episodic"])
                    assert ids[0] in [h.id for h in hits], (retrieval, user, marks[0], [h.text for h in hits])
                else:
                    hits = view.recall(f"node {marks[0]}", limit=5, tiers="entity")
                    assert any(marks[0] in h.text for h in hits), (retrieval, user, marks[0])
    return {"operations": operations, "writes": writes, "lost": lost, "duplicated": duplicated,
            "errors": len(errors)}


@pytest.fixture
def shared_store(tmp_path, storage_backend, request):
    """Where the workers meet: a SQLite file, or the URL of a PostgreSQL database created for the
    test (the worker processes open it themselves), dropped after."""
    with service_database(request, storage_backend, tmp_path) as where:
        yield where


@pytest.mark.slow
# the long random loop runs paths other tests run too: not traced by coverage (docs/testing.md, "Coverage")
@pytest.mark.no_cover
@pytest.mark.parametrize("retrieval", ["lexical", "hybrid"])
def test_threads_and_processes_on_one_file(retrieval, shared_store, storage_backend, tmp_path, figures):
    """8 threads and 4 processes writing and recalling on one file (or PostgreSQL database): no
    error surfaces, no write is lost or duplicated."""
    path, sync = shared_store, tmp_path / "sync"
    sync.mkdir()
    ops = scaled(120)
    outcome = run_workload(path, sync, retrieval, ops, seed=7 if retrieval == "lexical" else 11)
    result = check_outcome(path, retrieval, outcome)
    figures("concurrency", store=storage_backend, retrieval=retrieval, threads=THREADS, processes=PROCESSES,
            seconds=round(outcome["seconds"], 1), **result)


def test_threads_sharing_one_memory_and_opening_their_own(tmp_path):
    """The quick version (no processes): 8 threads, half on one shared object, on one file."""
    from unified_memory import UnifiedMemory

    path = tmp_path / "memory.db"
    UnifiedMemory(path).close()
    shared = open_memory(str(path), "lexical")
    events: list[tuple[str, list]] = []
    lock = threading.Lock()
    barrier = threading.Barrier(THREADS)

    def thread_main(t: int) -> None:
        name = f"t{t}"

        def emit(*parts: Any) -> None:
            with lock:
                events.append((name, list(parts)))

        mem = shared if t < SHARED_OBJECT_THREADS else open_memory(str(path), "lexical")
        try:
            barrier.wait(timeout=60)
            run_worker(mem, name, 500 + t, 12, users_of(name), emit)
        except Exception as exc:  # noqa: BLE001
            emit("error", "thread", repr(exc))
        finally:
            if mem is not shared:
                mem.close()
        emit("done")

    started = time.monotonic()
    threads = [threading.Thread(target=thread_main, args=(t,), daemon=True) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    hung = [t.name for t in threads if t.is_alive()]
    if not hung:
        shared.close()
    outcome = {"events": [*events, *((f"p{p}", ["done"]) for p in range(PROCESSES))], "hung": hung,
               "seconds": time.monotonic() - started, "stderr": {}}
    result = check_outcome(path, "lexical", outcome)
    assert result["writes"] > 0 and result["errors"] == 0
