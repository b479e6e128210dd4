"""Crash safety (issue 8): SIGKILL a writer at random moments; nothing acknowledged is lost.

It runs on a SQLite file and on a PostgreSQL database (``[postgresql]``: the test creates the
databases and hands their URLs to the children and checkers; below, "the file" is either).

A child process opens a memory file (hybrid retrieval, ``FakeEmbedder(dim=32)``) and writes
to it without end: turns (whose older messages leave a 4-message window and go through
promotion in the same transaction), single facts, ``remember_many`` batches of 10-40,
triples, ``end_session``, ``consolidate``, ``forget(ids=...)`` of its own facts, ``reindex``
(which drops and rebuilds the vector partitions), and now and then a close and a reopen. It
sends what it starts before each call, and the ids once the call has returned (a pipe write:
once it has returned the message is in the kernel and survives the kill). The parent kills
it with SIGKILL after a seeded random delay, reads the pipe to its end, and (after 70% of
the kills) a fresh checker process reopens the file:

* ``PRAGMA integrity_check`` is ``ok`` (raw sqlite3, before the library opens the file),
  and ``PRAGMA foreign_key_check`` finds nothing (SQLite only: PostgreSQL is transactional and
  enforces foreign keys at write time; what the kill left is read with a plain psycopg
  connection, before the library opens the database);
* every acknowledged fact, turn message and triple is there exactly once with its content,
  every acknowledged forget stayed done, and a call the kill cut short wrote all of its rows
  or none (a batch, the two messages of a turn, the ids of a forget);
* the vector index matches the store: the chroma collections as the kill left them are
  compared with the store (a difference is a ``vector_mismatch``: vectors of a write the kill
  rolled back, or deleted by a forget it cut short); after the library's open, which repairs
  drift (``rebuilt_at_open``), they must equal it exactly. The numpy index, derived from the
  embeddings table, must hold exactly the store's rows, and every stored fact and message has
  its cached vector (committed with its row, so nothing needs embedding again);
* the saved vector partitions (numpy, SQLite: ``<file>.vectors/``, approximate from ``APPROXIMATE_ABOVE``
  vectors, saved at each close under the write lock) hold no vector of a fact whose forget
  committed, read byte by byte as the kill left them, before the library opens the file (a
  forget deletes them inside its write); after the open, loaded and brought in step, the index
  equals the store as above;
* each tier's lexical index — restored from the snapshot saved at a close plus the journal
  since, or built from the store — holds exactly the store's documents;
* a sample of the markers is recalled lexically and through the vector index.

There are two files, one per vector backend (numpy, and an embedded chroma directory), and the
kills alternate between them; writes accumulate, so later trials exercise recovery from the
earlier crashes, and the unchecked kills leave the next child a file to recover (a drift to
repair at open, which the next kill may interrupt). The last check of each file recalls every
fact written alone, one of every batch and every turn. Children and checkers are forked from a
fork server that has imported the library and chromadb, so that a trial costs its work and not
an interpreter's start-up; the check of one file runs while the child of the other writes.

Figures: ``kills``, ``checks``, ``acknowledged_writes``, ``lost``, ``integrity_failures``,
``vector_mismatches`` (and ``vectors_extra`` / ``vectors_missing``), ``rebuilt_at_open``,
``opened_with_snapshots``, ``saved_vector_files`` (checks that found saved approximate partitions),
``forgotten_vectors_checked``, ``kills_during`` (the call each kill interrupted), ``seconds``.
``UM_CRASH_SEED`` picks other moments; ``UM_RELIABILITY_SCALE`` scales the kills.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import multiprocessing
import os
import random
import signal
import sqlite3
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.reliability.conftest import scaled
from tiers.indexes import snapshots
from tiers.storage.postgres_backend import is_url, psycopg_statement

# Children and checkers are processes that open the file (or database URL) themselves: on
# PostgreSQL the test creates the databases (the storage_backend fixture's patch stays in this process).
pytestmark = [pytest.mark.slow]

# Lexical indexes of this many documents are saved at close and restored at open (plus the
# journal since): the default (20,000) is never reached here, so the crash test lowers it.
SNAPSHOT_DOCS = 40
SEED = int(os.environ.get("UM_CRASH_SEED", "8"))  # another seed, other moments: UM_CRASH_SEED=9 pytest ...
# After this share of the kills the file is not checked (nor repaired by the checker's open): the
# next child opens it as the kill left it, so crashes also land in a repair of the previous crash.
SKIP_CHECK = 0.3
KILLS = scaled(50)  # >= 50: the snapshot paths are exercised (asserted below); more with --scale
DIM = 32
USER = "ada"
# Seconds from the child's start to the kill, drawn uniformly: opening takes ~0.01 s (numpy) or
# ~0.15 s (chroma: the client, then the drift check), then the child writes until killed.
MAX_DELAY = {"numpy": 0.8, "chroma": 1.2}
# numpy file: partitions of this many vectors are searched by their binary codes and saved beside
# the file at each close, so kills land in encodings, saves and forgets of saved ones.
APPROXIMATE_ABOVE = 300
CHECK_TIMEOUT, FINAL_TIMEOUT = 120.0, 900.0
RECALL_NEW, RECALL_OLD = 6, 4  # markers of the trial, and earlier ones, recalled in each check (all at the end)
# Imported once by the fork server: a forked child then opens a memory in ~0.05 s instead of ~1 s.
PRELOAD = ["unified_memory.memory", "unified_memory.testing", "unified_memory.io.jsonl", "unified_memory.retrieval.federation",
           "unified_memory.extraction.summarizers", "tiers.maintenance.row_export", "tiers.maintenance.deletion", "tiers.storage.user_tables", "tiers.indexes.vectors", "tiers.indexes.binary_codes", "tiers.indexes.vector_partition", "tiers.indexes.vector_store", "faiss", "scoring.embeddings",
           "scoring.onnx_query", "tiers.indexes.chroma_index", "chromadb", "chromadb.api.rust",
           "chromadb.telemetry.product.posthog", "dateutil.parser", "tiktoken", "psycopg", "tiers.storage.postgres_backend",
           "tiers.storage.pg_listener", "tiers.storage.pg_schema", "tests.reliability.test_crash_safety"]


# -- the child: writes until killed -------------------------------------------------------------


def _vectors(args: dict) -> dict:
    if args["backend"] == "chroma":
        return {"backend": "chroma", "chroma_path": args["chroma_path"]}
    return {"backend": "numpy", "approximate_above": APPROXIMATE_ABOVE}


def _open(args: dict, **extra):
    from unified_memory import UnifiedMemory
    from unified_memory.testing import FakeEmbedder

    return UnifiedMemory(args["path"], user_id=USER, embedder=FakeEmbedder(dim=DIM), retrieval="hybrid",
                         vectors=_vectors(args), short_term_limit=4, long_term_limit=None,
                         importance_threshold=0.3, **extra)


def fact_text(tag: str) -> str:
    return f"note {tag} about the garden shed cf{tag}"


def turn_texts(tag: str) -> tuple[str, str]:
    return f"I really enjoy kayaking on quiet lakes ut{tag}", f"Kayaking sounds lovely at{tag}"


def write_until_killed(conn, raw: str) -> None:
    """The child (forked from the fork server). Sends one JSON list per event."""
    try:
        _write(conn, json.loads(raw))
    except BaseException:
        conn.send_bytes(json.dumps(["error", traceback.format_exc()]).encode())


def _write(conn, args: dict) -> None:
    snapshots.SNAPSHOT_MIN_DOCS = SNAPSHOT_DOCS
    rng = random.Random(args["seed"])
    trial = args["trial"]

    def out(*parts) -> None:
        conn.send_bytes(json.dumps(parts).encode())

    began = time.monotonic()
    out("opening")
    mem = _open(args, session_id=f"s{trial}")
    out("opened", time.monotonic() - began)
    mine: list[str] = []  # facts acknowledged in this trial, candidates for forget
    ops = ["turn", "fact", "bulk", "triple", "end_session", "consolidate", "forget", "reopen", "reindex"]
    weights = [30, 25, 12, 10, 6, 5, 4, 6, 1]
    for n in range(10_000):
        op = rng.choices(ops, weights)[0]
        tag = f"{trial}x{n}"
        if op == "turn":
            user, assistant = turn_texts(tag)
            out("start", "turn", tag)
            out("turn", tag, mem.add_turn(user, assistant))
        elif op == "fact":
            out("start", "fact", tag)
            fid = mem.remember(fact_text(tag), importance=0.8)
            mine.append(fid)
            out("fact", tag, fid)
        elif op == "bulk":
            tags = [f"{tag}y{k}" for k in range(rng.randint(10, 40))]
            out("start", "bulk", tags)
            ids = mem.remember_many([fact_text(t) for t in tags])
            mine.extend(ids)
            out("bulk", tags, ids)
        elif op == "triple":
            out("start", "triple", tag)
            out("triple", tag, mem.add_triple(f"Person{tag}", "lives_in", f"Town{tag}"))
        elif op in ("end_session", "consolidate", "reindex"):  # reindex: drops and rebuilds the vectors
            out("start", op, tag)
            getattr(mem, op)()
            out("done", op)
        elif op == "forget" and mine:
            ids = rng.sample(mine, min(len(mine), rng.randint(1, 3)))
            out("start", "forget", ids)
            mem.forget(ids=ids)
            mine = [i for i in mine if i not in ids]
            out("forgot", ids)
        elif op == "reopen":
            out("start", "close", tag)
            mem.close()
            out("start", "open", tag)
            mem = _open(args, session_id=f"s{trial}")
            out("done", "open")
    out("finished")  # not expected: the parent kills first


# -- the checker: reopens the file in a fresh process ------------------------------------------------


Rows = Callable[..., list]  # rows(sql, params=()): every row of a statement with ``?`` placeholders


@contextlib.contextmanager
def _raw(target: str) -> Iterator[Rows | None]:
    """The store as the kill left it, read without the library: sqlite3 on the file, a plain
    psycopg connection on a database URL (a dead child's server process rolls its transaction back
    as soon as it sees the socket closed). None when the kill came before the file was created."""
    if is_url(target):
        import psycopg

        with contextlib.closing(psycopg.connect(target, autocommit=True, connect_timeout=10)) as conn:
            yield lambda sql, params=(): conn.execute(psycopg_statement(sql), params).fetchall()
    elif os.path.exists(target):
        with contextlib.closing(sqlite3.connect(target)) as db:
            yield lambda sql, params=(): db.execute(sql, params).fetchall()
    else:
        yield None


def _stored_ids(rows: Rows) -> dict[str, set[str]]:
    """The ids the vector partitions must hold: what each tier's loader reads from the store."""
    return {
        "facts": {r[0] for r in rows(
            "SELECT id FROM facts WHERE user_id = ? AND status IN ('active', 'superseded')", [USER])},
        "messages": {r[0] for r in rows(
            "SELECT id FROM messages WHERE user_id = ? AND content IS NOT NULL AND content != ''", [USER])},
        "entities": {r[0] for r in rows("SELECT id FROM entities WHERE user_id = ? AND doc IS NOT NULL", [USER])},
    }


def _index_ids(index) -> dict[str, set[str]]:
    return {kind: {key.rpartition("|")[0] for key in index.ids(f"{kind}/{USER}")}
            for kind in ("facts", "messages", "entities")}


def _vector_problems(dense, kind: str, item_id: str, text: str, least: float, *, search: bool) -> list[str]:
    """The index holds the item under a vector of its text: a fact's own (similarity 1, and a
    nearest-neighbour search finds it), a message's mixed with its neighbouring turns (whose
    vectors a 32-dim hashing embedder makes too alike for a search to single one out)."""
    vector = dense.query_vector(text)
    score = dense.partitions[kind].similarity(USER, vector, [item_id]).get(item_id)
    if score is None or score < least:
        return [f"{kind} {item_id} {text!r}: similarity {score}"]
    if search and item_id not in [key for key, _ in dense.partitions[kind].search(USER, vector, 20)]:
        return [f"{kind} {item_id} {text!r}: not among the 20 nearest"]
    return []


def _saved_vector_problems(args: dict, rows: Rows) -> tuple[list[str], int, int]:
    """Forgotten facts whose forget committed must have no vector in any saved file (numpy on
    SQLite); returns the problems, the saved partitions found and the vectors looked for."""
    from unified_memory.testing import FakeEmbedder

    folder = Path(f"{args['path']}.vectors")
    if args["backend"] != "numpy" or is_url(args["path"]) or not folder.is_dir():
        return [], 0, 0
    present = {r[0] for r in rows("SELECT id FROM facts")}
    gone = {fid: text for fid, text in args["expect"]["forgotten_texts"].items() if fid not in present}
    if not gone:
        return [], len(list(folder.glob("*.f32"))), 0
    vectors = FakeEmbedder(dim=DIM).embed(list(gone.values())).astype("float32")
    saved = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}
    problems = [f"forgotten fact {fid} {text!r}: its vector is in the saved file {name}"
                for (fid, text), vector in zip(gone.items(), vectors, strict=True)
                for name, data in saved.items() if vector.tobytes() in data]
    return problems, sum(name.endswith(".f32") for name in saved), len(gone)


def _check(args: dict) -> dict:
    """Everything the parent asserts, as data: ``problems`` (empty when all is well) and counts."""
    from tiers.indexes.vectors import content_hash
    from unified_memory.testing import internals

    snapshots.SNAPSHOT_MIN_DOCS = SNAPSHOT_DOCS
    problems: list[str] = []
    result: dict = {"problems": problems, "mismatch": False, "repaired": False, "snapshots": 0, "lost": 0}
    expect = args["expect"]
    result["integrity"] = ["ok"]
    before = {"facts": set(), "messages": set(), "entities": set()}
    postgres = is_url(args["path"])
    with _raw(args["path"]) as rows:
        if rows is not None:  # else the kill came before the first open created the file
            # PostgreSQL has no integrity_check to run, nor needs one: it is transactional and
            # WAL-protected, and enforces foreign keys at write time.
            if not postgres:
                result["integrity"] = [row[0] for row in rows("PRAGMA integrity_check")]
                if result["integrity"] != ["ok"]:
                    problems.append(f"integrity_check: {result['integrity'][:5]}")
            # The schema is created in one transaction on both: all of its tables, or none yet.
            facts_table = ("SELECT 1 WHERE to_regclass('facts') IS NOT NULL" if postgres
                           else "SELECT 1 FROM sqlite_master WHERE name = 'facts'")
            if rows(facts_table):
                before = _stored_ids(rows)
                found, result["saved_partitions"], result["forgotten_checked"] = _saved_vector_problems(args, rows)
                problems += found
                result["snapshots"] = rows("SELECT COUNT(*) FROM index_snapshots")[0][0]
    if args["backend"] == "chroma":  # what the kill left in chroma, before the library repairs it
        from tiers.indexes.chroma_index import ChromaVectorIndex

        with ChromaVectorIndex.embedded(args["chroma_path"]) as index:
            left = _index_ids(index)
        result["mismatch"] = left != before
        result["extra"] = sum(len(left[kind] - before[kind]) for kind in left)  # rows the kill rolled back
        result["missing"] = sum(len(before[kind] - left[kind]) for kind in left)  # e.g. a forget cut short
    mem = _open(args, ranking={"dense_ceiling": 1.0})
    try:
        inner = internals(mem)
        storage = inner.storage
        dense = inner.dense
        with _raw(args["path"]) as rows:
            assert rows is not None  # the library's open created it
            stored = _stored_ids(rows)
        if args["backend"] == "chroma":
            from tiers.indexes.chroma_index import ChromaVectorIndex

            with ChromaVectorIndex.embedded(args["chroma_path"]) as index:  # not through the memory's own index
                after = _index_ids(index)
            result["repaired"] = result["mismatch"] and after == stored
        elif dense.index is None:  # the database search path ([pgvector]): the vectors are a table's rows
            for partitions in dense.partitions.values():
                partitions.ensure(USER)
            table = dense.partitions["facts"].table
            after = {kind: {r[0] for r in storage.execute(f"SELECT id FROM {table} WHERE user_id = ? AND kind = ?",
                                                            [USER, kind]).fetchall()}
                     for kind in ("facts", "messages", "entities")}
        else:
            for partitions in dense.partitions.values():
                partitions.ensure(USER)
            after = _index_ids(dense.index)
        if after != stored:
            problems.append(f"vector index out of step after open: "
                            f"{ {k: [sorted(after[k] - stored[k])[:3], sorted(stored[k] - after[k])[:3]] for k in after} }")
        for tier in (inner.facts, inner.log, inner.graph):  # restored or built
            lexical = tier.index.lexical
            docs = dict(lexical.loader(USER))
            if tier.index.in_database:  # the search tables: filled once, then kept by every write
                lexical.fill(USER)
                held = {r[0] for r in storage.execute("SELECT id FROM search_docs WHERE user_id = ? AND kind = ?",
                                                      [USER, tier.index.kind]).fetchall()}
                if held != set(docs):
                    problems.append(f"{tier.index.kind} search tables: {len(held)} documents, the store {len(docs)}")
                continue
            index = lexical.get(USER)
            if len(index) != len(docs) or not all(key in index for key in docs):
                problems.append(f"{lexical.kind} lexical index: {len(index)} documents, the store {len(docs)}")
        facts = {f.id: f for f in mem.facts(include_inactive=True)}
        log = mem.episodes()  # every session's messages
        episodes, contents = collections.Counter(e.id for e in log), {e.id: e.content for e in log}
        triples = {t.id for t in mem.triples()}
        for fid, text in expect["facts"].items():
            if fid not in facts or facts[fid].text != text:
                result["lost"] += 1
                problems.append(f"acknowledged fact {fid} {text!r} missing or changed: {facts.get(fid)}")
        for ids, texts in expect["turns"]:
            for mid, text in zip(ids, texts, strict=True):
                if episodes[mid] != 1 or contents.get(mid) != text:
                    result["lost"] += 1
                    problems.append(f"acknowledged message {mid} {text!r}: {episodes[mid]} copies, {contents.get(mid)!r}")
        for tid in expect["triples"]:
            if tid not in triples:
                result["lost"] += 1
                problems.append(f"acknowledged triple {tid} missing")
        for fid in expect["forgotten"]:
            if fid in facts:
                problems.append(f"acknowledged forget of {fid} undone")
        for ids in expect["maybe_forgotten"]:  # a forget cut short: all or nothing
            if len({fid in facts for fid in ids}) != 1:
                problems.append(f"forget cut short deleted part of {ids}")
        count = storage.execute
        for tags in expect["maybe_bulk"]:  # a batch cut short: all or nothing
            found = [count("SELECT COUNT(*) FROM facts WHERE user_id = ? AND text = ?", [USER, fact_text(t)]).fetchone()[0]
                     for t in tags]
            if set(found) not in ({0}, {1}):
                problems.append(f"remember_many cut short wrote {found} of {tags[0]}..")
        for tag in expect["maybe_turns"]:
            found = [count("SELECT COUNT(*) FROM messages WHERE user_id = ? AND content = ?", [USER, t]).fetchone()[0]
                     for t in turn_texts(tag)]
            if found not in ([0, 0], [1, 1]):
                problems.append(f"add_turn cut short wrote {found} of {tag}")
        orphans = [] if postgres else count("PRAGMA foreign_key_check").fetchall()  # PostgreSQL: enforced at write time
        if orphans:
            problems.append(f"foreign_key_check: {orphans[:5]}")
        dupes = [count(f"SELECT COUNT(*) FROM {t} GROUP BY id HAVING COUNT(*) > 1").fetchall()
                 for t in ("facts", "messages", "triples")]
        if any(dupes):
            problems.append(f"duplicate ids: {dupes}")
        texts = count("SELECT text, COUNT(*) FROM facts WHERE source = 'remember' GROUP BY text HAVING COUNT(*) > 1"
                      ).fetchall()
        if texts:
            problems.append(f"a remembered text stored twice: {texts[:3]}")
        # Vectors are committed with their rows: nothing stored lacks its cached embedding.
        cached = {r[0] for r in count("SELECT content_hash FROM embeddings WHERE user_id = ?", [USER])}
        rows = count("SELECT text FROM facts WHERE user_id = ? AND status IN ('active', 'superseded')", [USER]).fetchall()
        rows += count("SELECT content FROM messages WHERE user_id = ? AND content != ''", [USER]).fetchall()
        uncached = [text for (text,) in rows if content_hash(text) not in cached]
        if uncached:
            problems.append(f"{len(uncached)} stored texts have no cached embedding, e.g. {uncached[:2]}")
        # Recall: lexically by marker, and through the vector index by the whole text.
        for fid, text in args["recall"]["facts"]:
            marker = text.rsplit(" ", 1)[-1]
            if fid not in [h.id for h in mem.recall(marker, limit=5, tiers="long_term")]:
                problems.append(f"fact {marker} not recalled lexically")
            hits = [h for h in mem.recall(text, limit=5, tiers="long_term") if h.id == fid]
            if not hits or not hits[0].components.get("dense", 0) > 0:
                problems.append(f"fact {marker} not recalled through the vector index: {hits}")
            problems += _vector_problems(dense, "facts", fid, text, 0.999, search=True)
        for mid, text in args["recall"]["messages"]:
            marker = text.rsplit(" ", 1)[-1]
            if mid not in [h.id for h in mem.recall(marker, limit=5, tiers=["short_term", "episodic"])]:
                problems.append(f"message {marker} not recalled lexically")
            if mid not in [h.id for h in mem.recall(text, limit=5, tiers=["short_term", "episodic"])]:
                problems.append(f"message {marker} not recalled by its text")
            problems += _vector_problems(dense, "messages", mid, text, 0.5, search=False)
        result["facts"], result["messages"] = len(facts), sum(episodes.values())
    finally:
        mem.close()
    return result


def check_in_fresh_process(conn, raw: str) -> None:
    try:
        conn.send_bytes(json.dumps(_check(json.loads(raw))).encode())
    except BaseException:
        conn.send_bytes(json.dumps({"problems": [f"checker raised: {traceback.format_exc()}"]}).encode())


# -- the parent -------------------------------------------------------------------------------------


class Forked:
    """``target(conn, json)`` in a process forked from the fork server; what it sends, one JSON value a message."""

    def __init__(self, ctx, target, args: dict) -> None:
        self.name = target.__name__
        self.reader, writer = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=target, args=(writer, json.dumps(args)), daemon=True)
        self.proc.start()
        writer.close()
        self.received: list = []

    def _read(self, until: float) -> bool:
        """Collect messages until the deadline; False once the process closed its end."""
        while (left := until - time.monotonic()) > 0:
            if self.reader.poll(left):
                try:
                    self.received.append(json.loads(self.reader.recv_bytes()))
                except (EOFError, OSError):  # OSError: killed half-way through a message (not an ack)
                    return False
        return True

    def kill_after(self, delay: float) -> list:
        """SIGKILL it ``delay`` seconds after its start; everything it sent before dying."""
        try:
            self._read(time.monotonic() + delay)
            with contextlib.suppress(ProcessLookupError):  # it died on its own: the caller finds out
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.join(10)
            self._read(time.monotonic() + 10)  # what was in the pipe when it died, up to EOF
        finally:
            self._close()
        return self.received

    def result(self, timeout: float = CHECK_TIMEOUT) -> list:
        """Wait for it to finish (up to ``timeout`` seconds)."""
        try:
            open_ = self._read(time.monotonic() + timeout)
            assert not open_ and self.received, f"{self.name} did not finish within {timeout}s"
        finally:
            self._close()
        return self.received

    def _close(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.reader.close()


def _sample(rng: random.Random, items: list, count: int) -> list:
    return rng.sample(items, min(count, len(items)))


class Ledger:
    """What the children acknowledged in one file, and the calls cut short."""

    def __init__(self) -> None:
        self.facts: dict[str, str] = {}
        self.turns: list[tuple[list[str], list[str]]] = []
        self.triples: list[str] = []
        self.forgotten: set[str] = set()
        self.forgotten_texts: dict[str, str] = {}  # forgotten or maybe forgotten: id -> text
        self.maybe_forgotten: list[list[str]] = []
        self.maybe_bulk: list[list[str]] = []
        self.maybe_turns: list[str] = []
        self.acknowledged = 0
        self.markers: list[str] = []  # the facts recalled by the last check

    def take(self, lines: list) -> tuple[str, dict]:
        """Record a child's lines; returns the phase the kill hit and what to recall."""
        recall: dict[str, list] = {"facts": [], "messages": []}
        phase = "before opening"
        for line in lines:
            kind = line[0]
            if kind == "opening":
                phase = "open"
            elif kind == "start":
                phase = line[1]
            elif kind in ("opened", "done"):
                phase = "between calls"
            elif kind == "fact":
                self.facts[line[2]] = fact_text(line[1])
                self.markers.append(line[2])
                recall["facts"].append([line[2], fact_text(line[1])])
            elif kind == "bulk":
                for tag, fid in zip(line[1], line[2], strict=True):
                    self.facts[fid] = fact_text(tag)
                recall["facts"].append([line[2][-1], fact_text(line[1][-1])])
                self.markers.append(line[2][-1])  # one of the batch is recalled at the end
            elif kind == "turn":
                self.turns.append((line[2], list(turn_texts(line[1]))))
                recall["messages"].append([line[2][0], turn_texts(line[1])[0]])
            elif kind == "triple":
                self.triples.append(line[2])
            elif kind == "forgot":
                self.forgotten.update(line[1])
                for fid in line[1]:
                    if fid in self.facts:
                        self.forgotten_texts[fid] = self.facts.pop(fid)
                recall["facts"] = [pair for pair in recall["facts"] if pair[0] not in line[1]]
            if kind in ("fact", "bulk", "turn", "triple", "forgot"):
                phase = "between calls"
                self.acknowledged += 1 if kind != "bulk" else len(line[2])
        last = lines[-1] if lines else None
        if last and last[0] == "start":  # the call the kill cut short
            if last[1] == "bulk":
                self.maybe_bulk.append(last[2])
            elif last[1] == "turn":
                self.maybe_turns.append(last[2])
            elif last[1] == "forget":
                self.maybe_forgotten.append(last[2])
                for fid in last[2]:
                    if fid in self.facts:
                        self.forgotten_texts[fid] = self.facts.pop(fid)
        recall["facts"] = [pair for pair in recall["facts"] if pair[0] in self.facts]
        return phase, recall

    def expect(self) -> dict:
        return {"facts": self.facts, "turns": self.turns, "triples": self.triples, "forgotten": sorted(self.forgotten),
                "maybe_forgotten": self.maybe_forgotten, "forgotten_texts": self.forgotten_texts, "maybe_bulk": self.maybe_bulk, "maybe_turns": self.maybe_turns}


@pytest.fixture
def crash_files(tmp_path, storage_backend, request):
    """One store per vector backend, ``{backend: {"backend", "path", "chroma_path"}}``: a SQLite
    file, or on PostgreSQL (``path``) the URL of a database created for the test, dropped after."""
    # chromadb is in the dev extras; without it only the numpy file is tried (the numpy part still counts).
    backends = ["numpy", "chroma"] if importlib.util.find_spec("chromadb") else ["numpy"]
    files = {backend: {"backend": backend, "path": str(tmp_path / f"{backend}.db"),
                       "chroma_path": str(tmp_path / f"{backend}.chroma")} for backend in backends}
    if storage_backend != "postgresql":
        yield files
        return
    from tests.pg_server import create_database, drop_database

    server = request.getfixturevalue("database_server")
    created = []
    try:
        for args in files.values():
            args["path"] = create_database(server)
            created.append(args["path"])
        yield files
    finally:
        for url in created:
            drop_database(server, url.rsplit("/", 1)[1])


def test_sigkill_at_random_moments_loses_no_acknowledged_write(crash_files, storage_backend, figures, request):
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    rng = random.Random(SEED)
    files = crash_files
    backends = list(files)
    ledgers = {backend: Ledger() for backend in files}
    phases: collections.Counter[str] = collections.Counter()
    counts: collections.Counter[str] = collections.Counter()

    def finish(check: Forked, what: str, timeout: float = CHECK_TIMEOUT) -> None:
        (result,) = check.result(timeout)
        counts["lost"] += result.get("lost", 0)
        assert result["problems"] == [], what
        counts["vectors_extra"] += result.get("extra", 0)
        counts["vectors_missing"] += result.get("missing", 0)
        counts["integrity_failures"] += result["integrity"] != ["ok"]
        counts["vector_mismatches"] += result["mismatch"]
        counts["rebuilt_at_open"] += result["repaired"]
        counts["opened_with_snapshots"] += result["snapshots"] > 0
        counts["saved_vector_files"] += result.get("saved_partitions", 0) > 0
        counts["forgotten_vectors_checked"] += result.get("forgotten_checked", 0)

    started = time.monotonic()
    pending: tuple[Forked, str] | None = None  # the check of the other file runs while this trial's child writes
    for trial in range(KILLS):
        backend = backends[trial % len(backends)]
        args, ledger = files[backend], ledgers[backend]
        delay = rng.uniform(0.02, MAX_DELAY[backend])
        child = Forked(ctx, write_until_killed, {**args, "trial": trial, "seed": rng.randrange(1 << 30)})
        lines = child.kill_after(delay)
        assert all(line[0] not in ("error", "finished") for line in lines), lines[-1]
        if pending is not None:
            finish(*pending)
        phase, recall = ledger.take(lines)
        phases[phase] += 1
        old = [[fid, text] for fid, text in ledger.facts.items()]
        recall = {"facts": _sample(rng, recall["facts"], RECALL_NEW) + _sample(rng, old, RECALL_OLD),
                  "messages": _sample(rng, recall["messages"], RECALL_NEW)}
        if rng.random() < SKIP_CHECK:  # the next child opens the file as the kill left it
            pending = None
            continue
        counts["checks"] += 1
        pending = (Forked(ctx, check_in_fresh_process, {**args, "expect": ledger.expect(), "recall": recall}),
                   f"trial {trial} ({backend}, killed during {phase!r} after {delay:.2f}s)")
    if pending is not None:
        finish(*pending)
    # Last: every acknowledged marker of both files, recalled after all the crashes.
    final = time.monotonic()
    for backend, args in files.items():
        ledger = ledgers[backend]
        recall = {"facts": [[fid, ledger.facts[fid]] for fid in ledger.markers if fid in ledger.facts],
                  "messages": [[ids[0], texts[0]] for ids, texts in ledger.turns]}
        finish(Forked(ctx, check_in_fresh_process, {**args, "expect": ledger.expect(), "recall": recall}),
               f"final check of the {backend} file", timeout=FINAL_TIMEOUT)
        if backend == "numpy" and storage_backend != "postgresql" and not counts["saved_vector_files"]:
            # On a loaded machine the kills may have left no saved partitions for a check to read: the
            # final check closed the file cleanly (saving them), so one more check reads them
            finish(Forked(ctx, check_in_fresh_process, {**args, "expect": ledger.expect(), "recall": recall}),
                   "check of the partitions the final check saved", timeout=FINAL_TIMEOUT)
    acknowledged = sum(ledger.acknowledged for ledger in ledgers.values())
    figures("crash safety", store=storage_backend, kills=KILLS, checks=counts["checks"], acknowledged_writes=acknowledged, lost=counts["lost"],
            integrity_failures=counts["integrity_failures"], vector_mismatches=counts["vector_mismatches"],
            vectors_extra=counts["vectors_extra"], vectors_missing=counts["vectors_missing"],
            rebuilt_at_open=counts["rebuilt_at_open"], opened_with_snapshots=counts["opened_with_snapshots"],
            saved_vector_files=counts["saved_vector_files"], forgotten_vectors_checked=counts["forgotten_vectors_checked"],
            kills_during=dict(sorted(phases.items())),
            facts={b: len(ledger.facts) for b, ledger in ledgers.items()},
            turns={b: len(ledger.turns) for b, ledger in ledgers.items()},
            final_check_seconds=round(time.monotonic() - final, 1), seconds=round(time.monotonic() - started, 1))
    assert acknowledged > KILLS  # the children got work done between the kills
    in_database = request.node.callspec.params.get("storage_backend") == "pgvector"  # no snapshots: tables
    assert KILLS < 50 or in_database or counts["opened_with_snapshots"] > 0, \
        "no lexical snapshot was ever saved: SNAPSHOT_DOCS unused?"
    if "chroma" in files:
        assert Path(files["chroma"]["chroma_path"]).is_dir()
    if storage_backend != "postgresql" and KILLS >= 50:  # the saved approximate partitions were exercised
        assert counts["saved_vector_files"] > 0 and counts["forgotten_vectors_checked"] > 0
