"""Several processes on one host: one SQLite memory file, one Chroma server, shared session stores.

Four worker processes (``python -c``) write facts and turns with unique markers into ONE
memory file, interleaved with recalls, and print each id once the call has returned. The
parent then reopens the file and checks that every acknowledged write is there exactly
once, the file is sound, every marker is recallable (lexically and through the Chroma
collection), and the Chroma collections hold exactly the rows of SQLite. Two layouts: a
user per worker, and all four workers writing the same user (the hard case for the
per-process in-memory indexes, which must notice the other processes' commits).

A second case runs four processes saving and loading ``Conversation`` sessions in one
``SQLiteConversationStore`` file, one ``RedisConversationStore`` and one ``PostgresConversationStore``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
WORKERS = 4
ROUNDS = 12  # facts and turns per worker
EMBED_DIM = 64
WORKER_TIMEOUT = 120.0

# -- the worker ---------------------------------------------------------------------------------
# Prints one JSON list per line: ["fact", id, marker], ["turn", [ids], marker], ["miss", what],
# ["error", op, repr], ["done"]. An id is printed only after the call that made it returned.

MEMORY_WORKER = r"""
import json, sys, time, traceback
from pathlib import Path
from unified_memory import UnifiedMemory
from unified_memory.testing import FakeEmbedder

args = json.loads(sys.argv[1])
w, rounds, users, sync = args["worker"], args["rounds"], args["users"], Path(args["sync"])
user = users[w]

def out(*parts):
    print(json.dumps(parts), flush=True)

def barrier(name, upto=None):
    (sync / f"{name}-{w}").touch()
    deadline = time.monotonic() + 60
    while sum(1 for _ in sync.glob(f"{name}-*")) < (upto or len(users)) and time.monotonic() < deadline:
        time.sleep(0.01)

def wait_for(name, count):
    deadline = time.monotonic() + 60
    while sum(1 for _ in sync.glob(f"{name}-*")) < count and time.monotonic() < deadline:
        time.sleep(0.01)

def attempt(op, fn):
    try:
        return fn()
    except Exception as exc:
        out("error", op, repr(exc))
        traceback.print_exc()
        return None

# The workers open the file one after the other: opening races are the subject of
# test_processes_can_open_one_file_at_the_same_time, not of this workload.
wait_for("opened", w)
try:
    mem = UnifiedMemory(args["path"], user_id=user, embedder=FakeEmbedder(dim=args["dim"]), retrieval="hybrid",
                        vectors={"backend": "chroma", "chroma_host": "127.0.0.1", "chroma_port": args["port"]},
                        long_term_limit=None)
finally:
    (sync / f"opened-{w}").touch()
barrier("start")
for i in range(rounds):
    fact_marker, turn_marker = f"fm{w}x{i}", f"tm{w}x{i}"
    fid = attempt("remember", lambda: mem.remember(f"worker {w} fact {i} {fact_marker}", importance=0.8))
    if fid is not None:
        out("fact", fid, fact_marker)
    ids = attempt("add_turn", lambda: mem.add_turn(f"worker {w} turn {i} {turn_marker}", f"noted {w} {i}"))
    if ids is not None:
        out("turn", ids, turn_marker)
    hits = attempt("recall", lambda: mem.recall(fact_marker, limit=5))
    if fid is not None and hits is not None and fid not in [h.id for h in hits]:
        out("miss", f"worker {w} did not recall its own {fact_marker} right after writing it")
    hits = attempt("recall", lambda: mem.recall(turn_marker, limit=5))
    if ids is not None and hits is not None and ids[0] not in [h.id for h in hits]:
        out("miss", f"worker {w} did not recall its own {turn_marker} right after writing it")
    if i % 3 == 0:  # read what the others wrote so far: loads the indexes the others' commits make stale
        for other in range(len(users)):
            view = mem.scoped(user_id=users[other])
            attempt("recall", lambda: view.recall(f"fm{other}x{max(0, i - 1)}", limit=5))
barrier("written")
# Every worker has finished writing: each process must now see every other's last writes,
# through indexes it loaded before those commits.
import sqlite3
db = sqlite3.connect(args["path"])  # a write that failed is not expected to be recalled
stored = {row[0].rsplit(" ", 1)[-1] for row in db.execute("SELECT text FROM facts")}
stored |= {row[0].rsplit(" ", 1)[-1] for row in db.execute("SELECT content FROM messages WHERE role = 'user'")}
db.close()
for other in range(len(users)):
    view = mem.scoped(user_id=users[other])
    for kind in ("fm", "tm"):  # the other worker's last stored write of each kind
        marker = next((m for m in (f"{kind}{other}x{i}" for i in reversed(range(rounds))) if m in stored), None)
        if marker is None:
            continue
        hits = attempt("recall", lambda: view.recall(marker, limit=5))
        if hits is not None and not any(h.text.endswith(" " + marker) for h in hits):
            out("miss", f"worker {w} did not recall {marker} of worker {other} after it committed")
mem.close()
out("done")
"""

SESSION_WORKER = r"""
import json, sys, time
from unified_memory import Conversation

args = json.loads(sys.argv[1])
w, workers, rounds, sessions = args["worker"], args["workers"], args["rounds"], args["sessions"]
if args["kind"] == "redis":
    from unified_memory import RedisConversationStore
    store = RedisConversationStore(args["url"], prefix=args["prefix"])
elif args["kind"] == "postgres":
    from unified_memory import PostgresConversationStore
    store = PostgresConversationStore(args["url"])
else:
    from unified_memory import SQLiteConversationStore
    store = SQLiteConversationStore(args["path"])

def out(*parts):
    print(json.dumps(parts), flush=True)

def check(conv, owner, session):
    # A session holds the system prompt and then messages 0..k-1 of that session, in order.
    contents = [m.content for m in conv.messages() if m.role != "system"]
    expected = [f"w{owner} s{session} m{k}" for k in range(len(contents))]
    if contents != expected:
        out("torn", owner, session, contents[-3:])
    return len(contents)

seen = {}
for r in range(rounds):
    for s in range(sessions):
        sid = f"w{w}-s{s}"
        try:
            conv = Conversation.load(store, sid, namespace=args["namespace"])
        except Exception:
            if r:
                out("lost", sid, r)
            conv = Conversation(session_id=sid, system_prompt=f"session {sid}")
        if check(conv, w, s) != r:
            out("lost", sid, r)
        conv.add(role="user", content=f"w{w} s{s} m{r}")
        conv.save(store, namespace=args["namespace"])
        out("saved", sid, r + 1)
    for other in range(workers):  # read the others' sessions while they write them
        if other == w:
            continue
        for s in range(sessions):
            sid = f"w{other}-s{s}"
            try:
                conv = Conversation.load(store, sid, namespace=args["namespace"])
            except Exception as exc:
                if "no saved conversation" not in str(exc):
                    out("error", sid, repr(exc))
                continue
            n = check(conv, other, s)
            if n < seen.get(sid, 0):
                out("went back", sid, seen[sid], n)
            seen[sid] = n
store.close()
out("done")
"""


def run_workers(script: str, arguments: list[dict], timeout: float = WORKER_TIMEOUT) -> list[list[list]]:
    """Run one ``python -c script`` per argument dict, concurrently; their JSON lines, in order."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "ANONYMIZED_TELEMETRY": "False"}
    procs = [subprocess.Popen([sys.executable, "-c", script, json.dumps(a)], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for a in arguments]
    results = []
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("[")]
            assert proc.returncode == 0 and lines and lines[-1] == ["done"], (
                f"worker exited with {proc.returncode}:\n{stderr[-3000:]}")
            results.append(lines)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


# -- a real Chroma server on loopback (as in tests/tiers/test_chroma_index.py) ------------------


# -- the memory workload, run once per layout; the tests below check its outcome ----------------


class CountingIndex:
    """Delegates to a vector index and counts what a drift check had to change."""

    persistent = True

    def __init__(self, inner) -> None:
        self.inner = inner
        self.upserted: list[str] = []
        self.deleted: list[str] = []

    def upsert(self, partition, ids, vectors):
        self.upserted += [f"{partition}:{key}" for key in ids]
        self.inner.upsert(partition, ids, vectors)

    def delete(self, partition, ids):
        self.deleted += [f"{partition}:{key}" for key in ids]
        self.inner.delete(partition, ids)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _chroma_ids(port: int, user: str) -> dict[str, list[str]]:
    """The ids (without their ``|fingerprint``) in each of the user's chroma partitions."""
    from tiers.indexes.chroma_index import ChromaVectorIndex

    with ChromaVectorIndex.server("127.0.0.1", port) as index:
        return {kind: sorted(key.rpartition("|")[0] for key in index.ids(f"{kind}/{user}"))
                for kind in ("facts", "messages", "entities")}


def _sqlite_ids(path: Path, user: str) -> dict[str, list[str]]:
    """The ids the vector partitions must hold: what each tier's loader reads from SQLite."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return {
            "facts": sorted(r[0] for r in db.execute(
                "SELECT id FROM facts WHERE user_id = ? AND status IN ('active', 'superseded')", [user])),
            "messages": sorted(r[0] for r in db.execute(
                "SELECT id FROM messages WHERE user_id = ? AND content IS NOT NULL AND content != ''", [user])),
            "entities": sorted(r[0] for r in db.execute(
                "SELECT id FROM entities WHERE user_id = ? AND doc IS NOT NULL", [user])),
        }


@pytest.fixture(scope="module", params=["user-per-worker", "shared-user"])
def workload(request, chroma_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    path, sync = tmp / "memory.db", tmp / "sync"
    sync.mkdir()
    run = uuid.uuid4().hex[:8]  # the chroma server is shared: collections are named by user only
    users = ([f"shared-{run}"] * WORKERS if request.param == "shared-user"
             else [f"worker{w}-{run}" for w in range(WORKERS)])
    from unified_memory import UnifiedMemory
    from unified_memory.testing import FakeEmbedder

    UnifiedMemory(path).close()  # create the file (schema, WAL) before the workers race to
    outputs = run_workers(MEMORY_WORKER, [
        {"worker": w, "rounds": ROUNDS, "users": users, "path": str(path), "port": chroma_server,
         "dim": EMBED_DIM, "sync": str(sync)} for w in range(WORKERS)])
    # Before anything reopens the file (opening repairs drift): what the workers left in chroma.
    left_in_chroma = {user: _chroma_ids(chroma_server, user) for user in set(users)}
    repairs = {}
    for user in sorted(set(users)):
        from tiers.indexes.chroma_index import ChromaVectorIndex

        counting = CountingIndex(ChromaVectorIndex.server("127.0.0.1", chroma_server))
        with UnifiedMemory(path, user_id=user, embedder=FakeEmbedder(dim=EMBED_DIM), retrieval="hybrid",
                           vector_index=counting, long_term_limit=None):
            repairs[user] = (counting.upserted, counting.deleted)
        counting.inner.close()
    return {"layout": request.param, "path": path, "users": users, "outputs": outputs, "port": chroma_server,
            "left_in_chroma": left_in_chroma, "repairs": repairs}


def _lines(workload, kind: str) -> list[tuple[int, list]]:
    return [(w, line) for w, lines in enumerate(workload["outputs"]) for line in lines if line[0] == kind]


def test_every_call_succeeds_under_contention(workload):
    """No "database is locked", no chroma error: every write and recall of every worker returned."""
    errors = _lines(workload, "error")
    assert not errors, f"{len(errors)} calls failed, e.g. {errors[:5]}"
    assert len(_lines(workload, "fact")) == len(_lines(workload, "turn")) == WORKERS * ROUNDS


def test_acknowledged_writes_are_stored_exactly_once(workload):
    path, users = workload["path"], workload["users"]
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        for w, (_, fact_id, marker) in _lines(workload, "fact"):
            rows = db.execute("SELECT id, user_id, text FROM facts WHERE text LIKE ?", [f"% {marker}"]).fetchall()
            assert rows == [(fact_id, users[w], f"worker {w} fact {marker[len(f'fm{w}x'):]} {marker}")], marker
        for w, (_, message_ids, marker) in _lines(workload, "turn"):
            rows = db.execute("SELECT id, user_id, role FROM messages WHERE content LIKE ?", [f"% {marker}"]).fetchall()
            assert rows == [(message_ids[0], users[w], "user")], marker
            for message_id in message_ids:
                assert db.execute("SELECT COUNT(*) FROM messages WHERE id = ?", [message_id]).fetchone()[0] == 1
        for table in ("facts", "messages"):
            dupes = db.execute(f"SELECT id, COUNT(*) FROM {table} GROUP BY id HAVING COUNT(*) > 1").fetchall()
            assert dupes == [], table
        texts = Counter(r[0] for r in db.execute("SELECT text FROM facts WHERE source = 'remember'"))
        assert [t for t, n in texts.items() if n > 1] == []
        window = db.execute("SELECT COUNT(*) FROM window w LEFT JOIN messages m ON m.seq = w.message_seq "
                            "WHERE m.seq IS NULL").fetchone()[0]
        assert window == 0


def test_each_worker_recalled_its_own_and_the_others_writes(workload):
    """Read-your-writes in each process, and the others' commits seen through indexes loaded before them."""
    misses = _lines(workload, "miss")
    assert not misses, [line[1] for _, line in misses[:10]]


def test_every_marker_is_recallable_after_reopening(workload):
    from unified_memory import UnifiedMemory
    from unified_memory.testing import FakeEmbedder

    path, users, port = workload["path"], workload["users"], workload["port"]
    chroma = {"backend": "chroma", "chroma_host": "127.0.0.1", "chroma_port": port}
    for retrieval in ("hybrid", "embedding"):  # embedding: the hits can only come through chroma
        # dense_ceiling=1: similar texts ("... fact 1 fm0x1", "... fact 10 fm0x10") must not all
        # calibrate to full relevance, so that the exact text ranks first.
        with UnifiedMemory(path, embedder=FakeEmbedder(dim=EMBED_DIM), retrieval=retrieval, vectors=chroma,
                           long_term_limit=None, ranking={"dense_ceiling": 1.0}) as mem:
            for w, (_, fact_id, marker) in _lines(workload, "fact"):
                view = mem.scoped(user_id=users[w])
                # A hashing embedder cannot tell fm0x1 from fm0x10, so the dense query is the whole text.
                query = marker if retrieval == "hybrid" else f"worker {w} fact {marker[len(f'fm{w}x'):]} {marker}"
                assert fact_id in [h.id for h in view.recall(query, limit=5, tiers="long_term")], (retrieval, marker)
            for w, (_, message_ids, marker) in _lines(workload, "turn"):
                if retrieval == "hybrid":
                    hits = mem.scoped(user_id=users[w]).recall(marker, limit=5, tiers=["short_term", "episodic"])
                    assert message_ids[0] in [h.id for h in hits], (marker, [(h.id, h.text) for h in hits])


def test_chroma_collections_match_sqlite(workload):
    """What the workers left in the chroma server is exactly the SQLite rows: no missing vector,
    no vector of a row that does not exist, no stale second copy of a row."""
    for user, left in workload["left_in_chroma"].items():
        expected = _sqlite_ids(workload["path"], user)
        for kind in ("facts", "messages", "entities"):
            missing = sorted(set(expected[kind]) - set(left[kind]))
            extra = sorted(set(left[kind]) - set(expected[kind]))
            doubled = sorted(k for k, n in Counter(left[kind]).items() if n > 1)
            assert (missing, extra, doubled) == ([], [], []), f"{user} {kind}: missing/extra/doubled"
        # The library's own drift check (run when a memory is opened) found nothing to repair.
        upserted, deleted = workload["repairs"][user]
        assert (upserted, deleted) == ([], []), f"drift repaired on open for {user}"
        assert _chroma_ids(workload["port"], user) == expected


def test_a_write_after_a_read_waits_for_another_writer_instead_of_failing(tmp_path):
    """A transaction takes the write lock when it begins (BEGIN IMMEDIATE): its reads and
    writes cannot be split by another writer's commit. The other writer waits; past its
    busy timeout it gets a StorageError (not a bare "database is locked") and wrote nothing."""
    from tiers.storage.backend import Storage
    from unified_memory.errors import StorageError

    one, two = Storage(tmp_path / "m.db"), Storage(tmp_path / "m.db", busy_timeout_ms=200)
    try:
        with one.atomic():
            one.execute("SELECT COUNT(*) FROM facts").fetchone()  # the transaction reads first ...
            with pytest.raises(StorageError, match="locked"):  # ... another writer must wait ...
                with two.atomic():
                    two.execute("INSERT INTO meta(key, value) VALUES ('two', '1')")
            one.execute("INSERT INTO meta(key, value) VALUES ('one', '1')")  # ... and this write succeeds
        with two.atomic():  # once the lock is free, the other writer goes ahead
            two.execute("INSERT INTO meta(key, value) VALUES ('two', '1')")
        assert one.get_meta("one") == two.get_meta("two") == "1"
    finally:
        one.close()
        two.close()


OPEN_WORKER = r"""
import json, sys, time
from pathlib import Path
from unified_memory import UnifiedMemory

args = json.loads(sys.argv[1])
sync = Path(args["sync"])
(sync / f"ready-{args['worker']}").touch()
while sum(1 for _ in sync.glob("ready-*")) < args["workers"]:
    time.sleep(0.005)
for i in range(args["opens"]):
    try:
        with UnifiedMemory(args["path"], user_id=f"u{args['worker']}", retrieval="lexical") as mem:
            mem.remember(f"opened {args['worker']} {i}")
    except Exception as exc:
        print(json.dumps(["error", repr(exc)]), flush=True)
print(json.dumps(["done"]), flush=True)
"""


def test_processes_can_open_one_file_at_the_same_time(tmp_path):
    from unified_memory import UnifiedMemory

    path, sync = tmp_path / "memory.db", tmp_path / "sync"
    sync.mkdir()
    UnifiedMemory(path).close()
    outputs = run_workers(OPEN_WORKER, [{"worker": w, "workers": WORKERS, "opens": 25, "path": str(path),
                                         "sync": str(sync)} for w in range(WORKERS)])
    errors = [line[1] for lines in outputs for line in lines if line[0] == "error"]
    assert errors == [], f"{len(errors)} of {WORKERS * 25} opens failed, e.g. {errors[:3]}"


# -- sessions: Conversation.save / load from four processes -------------------------------------

SESSION_ROUNDS = 15
SESSIONS_PER_WORKER = 3


def _check_sessions(outputs, load_all):
    problems = [line for lines in outputs for line in lines if line[0] in ("torn", "lost", "went back", "error")]
    assert problems == []
    final = load_all()
    assert sorted(final) == sorted(f"w{w}-s{s}" for w in range(WORKERS) for s in range(SESSIONS_PER_WORKER))
    for sid, conv in final.items():
        w, s = (int(part[1:]) for part in sid.split("-"))
        contents = [m.content for m in conv.messages() if m.role != "system"]
        assert contents == [f"w{w} s{s} m{k}" for k in range(SESSION_ROUNDS)], sid


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgres"])
def test_sessions_from_four_processes(kind, tmp_path, request):
    from unified_memory import Conversation

    namespace = f"mp-{uuid.uuid4().hex[:8]}"
    base = {"workers": WORKERS, "rounds": SESSION_ROUNDS, "sessions": SESSIONS_PER_WORKER, "namespace": namespace,
            "kind": kind}
    if kind == "redis":
        from unified_memory import RedisConversationStore

        url, prefix = request.getfixturevalue("redis_url"), f"test:{uuid.uuid4().hex}"
        base.update(url=url, prefix=prefix)
        store = RedisConversationStore(url, prefix=prefix)
    elif kind == "postgres":  # a database of this test's own; the workers race to create the table
        from unified_memory import PostgresConversationStore

        base["url"] = request.getfixturevalue("pg_url")
        store = None
    else:
        from unified_memory import SQLiteConversationStore

        base["path"] = str(tmp_path / "sessions.db")
        SQLiteConversationStore(base["path"]).close()  # create the table before the workers race to
        store = None
    outputs = run_workers(SESSION_WORKER, [{**base, "worker": w} for w in range(WORKERS)])
    if store is None:
        from unified_memory import SQLiteConversationStore

        store = (PostgresConversationStore(base["url"]) if kind == "postgres"
                 else SQLiteConversationStore(base["path"]))
    try:
        _check_sessions(outputs, lambda: {sid: Conversation.load(store, sid, namespace=namespace)
                                          for sid in store.list(namespace=namespace)})
    finally:
        store.close()


def test_two_memory_files_share_one_chroma_server_with_their_own_prefixes(chroma_server, tmp_path):
    """Collections are named by partition; two files holding the same user id on one server
    keep their vectors apart with ``vectors.chroma_prefix`` (the same prefix would make each
    file's drift repair delete the other's)."""
    from unified_memory import UnifiedMemory
    from unified_memory.testing import FakeEmbedder

    user = f"shared-{uuid.uuid4().hex[:8]}"

    def open_memory(name: str, prefix: str) -> UnifiedMemory:
        return UnifiedMemory(tmp_path / f"{name}.db", user_id=user, embedder=FakeEmbedder(), retrieval="embedding",
                             vectors={"backend": "chroma", "chroma_host": "127.0.0.1", "chroma_port": chroma_server,
                                      "chroma_prefix": prefix})

    with open_memory("a", "filea") as a:
        a.remember("marker-in-file-a about the sea")
        assert a.recall("marker-in-file-a about the sea", tiers="long_term")
    with open_memory("b", "fileb") as b:
        b.remember("marker-in-file-b about the hills")
    with open_memory("a", "filea") as a:  # reopening runs the drift check: nothing of a's was lost
        hits = a.recall("marker-in-file-a about the sea", tiers="long_term")
        assert [h.text for h in hits][:1] == ["marker-in-file-a about the sea"]
        assert hits[0].components.get("dense", 0) > 0
