"""Recall's reinforcement of facts, written in batches (tiers.facts.access): every use counted, none
written by a read, all of them visible to whatever reads them."""

from __future__ import annotations

import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.tiers.write_lock import hold_write_lock, release
from tiers.facts.access import ACCESS_COUNT, USES_JOIN, AccessLog, last_accessed
from tiers.storage.backend import Storage
from unified_memory import UnifiedMemory


def _facts(storage: Storage, n: int) -> list[str]:
    ids = [f"f{i}" for i in range(n)]
    with storage.atomic():
        storage.executemany("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at) "
                            "VALUES (?, 'u1', ?, ?, 0.5, 0, 0)", [[i, i, i] for i in ids])
    return ids


def _counts(storage: Storage) -> dict[str, int]:
    """Every use written, in the facts' columns or not yet folded into them."""
    return {r["id"]: r["n"] for r in storage.query(f"SELECT id, {ACCESS_COUNT} AS n FROM facts {USES_JOIN}")}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("use"), st.lists(st.integers(0, 4), max_size=6)),
                          st.just(("write", [])), st.just(("flush", [])), st.just(("fold", [])),
                          st.just(("tick", []))), max_size=30))
def test_every_use_is_counted_once_whatever_writes_in_between(steps: list[tuple[str, list[int]]]) -> None:
    storage = Storage(None)
    try:
        ids = _facts(storage, 5)
        clock = [0.0]
        uses = AccessLog(storage, max_age=2.0, max_pending=3, monotonic=lambda: clock[0])
        expected = dict.fromkeys(ids, 0)
        for kind, picked in steps:
            if kind == "use":
                uses.note([ids[i] for i in picked], now=clock[0])
                for i in picked:
                    expected[ids[i]] += 1
            elif kind == "write":  # another write neither writes nor drops the waiting uses
                waiting = uses.pending
                with storage.atomic():
                    storage.set_meta("x", "1")
                assert uses.pending == waiting
            elif kind == "flush":
                uses.flush()
                assert uses.pending == 0
            elif kind == "fold":  # every use now in the facts' own columns
                uses.fold()
                assert uses.pending == 0 and not storage.query("SELECT * FROM fact_uses")
                assert {r["id"]: r["access_count"] for r in storage.query("SELECT id, access_count FROM facts")} == expected
            else:
                clock[0] += 1.5
            assert uses.pending < 3  # a full batch is written at once
            written = _counts(storage)
            assert all(written[i] <= expected[i] for i in ids)  # never counted twice, never ahead
        uses.flush()
        assert _counts(storage) == expected
    finally:
        storage.close()  # a PostgreSQL database per example: its connection goes now


def test_a_write_that_fails_after_writing_the_uses_loses_only_those() -> None:
    storage = Storage(None)
    ids = _facts(storage, 1)
    uses = AccessLog(storage)
    uses.note(ids, now=1.0)
    try:
        with storage.atomic():  # a write that reads them (retention) writes them first, then fails
            uses.write_pending()
            raise RuntimeError("the caller's write failed")
    except RuntimeError:
        pass
    assert uses.pending == 0 and _counts(storage) == {"f0": 0}  # rolled back: usage statistics, not data
    uses.note(ids, now=3.0)
    uses.flush()
    assert storage.query(f"SELECT {ACCESS_COUNT} AS n, {last_accessed(storage.dialect)} AS last FROM facts {USES_JOIN}") == \
        [{"n": 1, "last": 3.0}]


def test_a_deleted_fact_takes_its_uses_along_and_gets_none_after() -> None:
    storage = Storage(None)
    ids = _facts(storage, 3)
    uses = AccessLog(storage)
    uses.note(ids, now=1.0)
    uses.flush()
    with storage.atomic():  # deleted with uses written (the trigger) ...
        storage.execute("DELETE FROM facts WHERE id = 'f0'")
    uses.note(ids[1:], now=2.0)
    with storage.atomic():  # ... and with uses still waiting: none is written for it
        storage.execute("DELETE FROM facts WHERE id = 'f1'")
    uses.flush()
    seqs = [r["seq"] for r in storage.query("SELECT seq FROM facts")]
    assert [r["seq"] for r in storage.query("SELECT seq FROM fact_uses")] == seqs
    with storage.atomic():  # a new fact never inherits a deleted one's uses (seq reused or not)
        storage.execute("DELETE FROM facts")
    _facts(storage, 3)
    assert _counts(storage) == {"f0": 0, "f1": 0, "f2": 0}


def test_fold_keeps_the_later_last_access() -> None:
    storage = Storage(None)
    ids = _facts(storage, 1)
    with storage.atomic():
        storage.execute("UPDATE facts SET access_count = 4, last_accessed = 9.0")
    uses = AccessLog(storage)
    uses.note(ids, now=3.0)  # a clock set back: the later time stays
    uses.fold()
    assert storage.query("SELECT access_count, last_accessed FROM facts") == [{"access_count": 5,
                                                                                "last_accessed": 9.0}]


def test_old_uses_are_written_without_a_write() -> None:
    storage = Storage(None)
    ids = _facts(storage, 2)
    clock = [10.0]
    uses = AccessLog(storage, max_age=2.0, monotonic=lambda: clock[0])
    uses.note(ids[:1], now=1.0)
    clock[0] += 1.0
    uses.note(ids[1:], now=2.0)
    assert uses.pending == 2
    clock[0] += 1.0  # the oldest has waited 2 s: this use writes the batch
    uses.note(ids[:1], now=3.0)
    assert uses.pending == 0 and _counts(storage) == {"f0": 2, "f1": 1}


def test_recall_takes_no_write_lock(tmp_path: Path) -> None:
    """Another process (here: another connection) holding the file's write lock does not hold up a recall."""
    path = tmp_path / "m.db"
    with UnifiedMemory(path) as mem:
        mem.remember("I keep bees on the roof")
    writer = Storage(path, busy_timeout_ms=100)
    reader = UnifiedMemory(path)
    try:
        reader.recall("bees")  # warm: the index is built
        with writer.atomic():  # BEGIN IMMEDIATE: the write lock is held while the recall runs
            hits: list = []
            thread = threading.Thread(target=lambda: hits.extend(reader.recall("bees")))
            thread.start()
            thread.join(5)
            assert not thread.is_alive() and [h.text for h in hits][:1] == ["I keep bees on the roof"]
    finally:
        writer.close()
        reader.close()


def test_uses_are_seen_by_listing_export_and_the_next_open(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with UnifiedMemory(path) as mem:
        mem.remember("I keep bees on the roof")
        mem.recall("bees")
        assert [f.access_count for f in mem.facts()] == [1]  # listing writes the waiting uses first
        mem.recall("bees")
        exported = mem.export_jsonl(tmp_path / "out.jsonl")
        assert exported > 0 and '"access_count":2' in (tmp_path / "out.jsonl").read_text()
        mem.recall("bees")  # left waiting: close writes it
    with UnifiedMemory(path) as mem:
        assert [f.access_count for f in mem.facts()] == [3]


def test_a_due_batch_that_cannot_get_the_write_lock_waits_and_the_caller_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    storage, holder = Storage(path, busy_timeout_ms=50), Storage(path)
    try:
        ids = _facts(storage, 1)
        uses = AccessLog(storage, max_age=0.0)  # every use is due at once
        hold_write_lock(holder)  # another process writing, past the busy timeout
        uses.note(ids, now=1.0)  # no error: the use waits
        assert uses.pending == 1
        release(holder)
        uses.note(ids, now=2.0)
        assert uses.pending == 0
        assert storage.query(f"SELECT {ACCESS_COUNT} AS n, {last_accessed(storage.dialect)} AS last FROM facts {USES_JOIN}") == \
            [{"n": 2, "last": 2.0}]
    finally:
        storage.close()
        holder.close()
