"""Bulk writes pause the cyclic garbage collector and restore it as it was."""

from __future__ import annotations

import gc
import threading

import pytest

from unified_memory import UnifiedMemory
from unified_memory.coordinator import writer

pytestmark = pytest.mark.sqlite_only  # process state, not storage


def test_nested_pauses_resume_once_at_the_end() -> None:
    assert gc.isenabled()
    with writer.collector_paused():
        with writer.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer write still runs
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_program_stays_off() -> None:
    gc.disable()
    try:
        with writer.collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_error_inside_still_resumes() -> None:
    with pytest.raises(RuntimeError), writer.collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_remember_many_pauses_and_resumes() -> None:
    seen: list[bool] = []
    original = writer.Writer.store_facts

    def spy(self: writer.Writer, proposals: list) -> list[str]:
        seen.append(gc.isenabled())
        return original(self, proposals)

    writer.Writer.store_facts = spy  # type: ignore[method-assign]
    try:
        with UnifiedMemory() as mem:
            mem.remember_many(["I live in Lisbon", "I keep bees"])
    finally:
        writer.Writer.store_facts = original  # type: ignore[method-assign]
    assert seen == [False] and gc.isenabled()


def test_concurrent_pauses_resume_when_the_last_ends() -> None:
    inside, release = threading.Barrier(2), threading.Event()

    def hold() -> None:
        with writer.collector_paused():
            inside.wait()
            release.wait(5)

    thread = threading.Thread(target=hold)
    thread.start()
    with writer.collector_paused():
        inside.wait()
    assert not gc.isenabled()  # the other thread's write is still running
    release.set()
    thread.join()
    assert gc.isenabled()


def test_new_ids_are_version_4_uuids() -> None:
    """new_id builds uuid4().hex without the UUID object: the same shape, version and variant."""
    import uuid

    from tiers.rows import new_id

    ids = {new_id("fact") for _ in range(2000)}
    assert len(ids) == 2000
    for item in ids:
        prefix, _, hexa = item.partition("_")
        parsed = uuid.UUID(hexa)
        assert prefix == "fact" and parsed.hex == hexa and parsed.version == 4 and parsed.variant == uuid.RFC_4122
