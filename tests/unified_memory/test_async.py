"""The async API: one awaitable twin per public method, run off the event loop."""

from __future__ import annotations

import asyncio
import inspect
import time

import pytest

from unified_memory import UnifiedMemory
from unified_memory.coordinator.async_api import ASYNC_TWINS, AsyncAPI
from unified_memory.errors import ClosedError, MemoryValueError

# Public methods that deliberately have no async twin: cheap, in-memory, lifecycle or
# registration (``on_event`` subscribes a hook; hooks of async calls run in the worker thread).
SKIP = {"scoped", "close", "count_tokens", "window", "on_event", "report_failure", "atomic"}  # atomic: a with-block


def _public_sync_methods() -> list[str]:
    names = []
    for name in dir(UnifiedMemory):
        if name.startswith("_") or name in SKIP:
            continue
        raw = inspect.getattr_static(UnifiedMemory, name)
        if isinstance(raw, property | staticmethod | classmethod) or not inspect.isfunction(raw):
            continue
        if inspect.iscoroutinefunction(raw):
            continue
        names.append(name)
    return names


def test_every_public_sync_method_has_an_async_twin():
    names = _public_sync_methods()
    assert {"add_turn", "recall", "context", "facts", "stats"} <= set(names)
    for name in names:
        twin = getattr(UnifiedMemory, "a" + name, None)
        assert twin is not None, f"missing a{name}"
        assert inspect.iscoroutinefunction(twin), f"a{name} is not a coroutine function"
        assert twin.__doc__ == f"Async :meth:`{name}` (runs in a worker thread)."
        assert inspect.signature(twin) == inspect.signature(getattr(UnifiedMemory, name)), name
    assert set(ASYNC_TWINS) == set(names)  # and no twin of something that is gone
    assert issubclass(UnifiedMemory, AsyncAPI)


def test_results_equal_the_sync_ones(clock):
    async def run(mem: UnifiedMemory):
        ids = await mem.aadd_turn("I live in Lisbon and keep bees", "Nice!")
        fact = await mem.aremember("I'm allergic to peanuts")
        return (ids, fact, await mem.arecall("Lisbon"), await mem.acontext("peanuts", max_tokens=200),
                await mem.afacts(), await mem.aassemble_context(200, query="bees"), await mem.astats())

    with UnifiedMemory(clock=clock) as sync_mem, UnifiedMemory(clock=clock) as async_mem:
        ids = sync_mem.add_turn("I live in Lisbon and keep bees", "Nice!")
        fact = sync_mem.remember("I'm allergic to peanuts")
        expected = (sync_mem.recall("Lisbon"), sync_mem.context("peanuts", max_tokens=200), sync_mem.facts(),
                    sync_mem.assemble_context(200, query="bees"))
        stats = sync_mem.stats()
        a_ids, a_fact, *got, a_stats = asyncio.run(run(async_mem))
        assert len(a_ids) == len(ids) == 2 and a_fact.startswith(fact[:4])
        hits, block, facts, text = got
        assert [(h.tier, h.text, h.score) for h in hits] == [(h.tier, h.text, h.score) for h in expected[0]]
        assert hits and "Lisbon" in hits[0].text
        assert (block.text, block.tokens) == (expected[1].text, expected[1].tokens) and "peanuts" in block.text
        assert [f.text for f in facts] == [f.text for f in expected[2]]
        assert text == expected[3]
        assert type(a_stats) is type(stats)
        # The sync view sees what the async calls wrote.
        assert [h.text for h in async_mem.recall("Lisbon")] == [h.text for h in hits]


def test_twins_forward_positional_and_keyword_arguments(mem):
    async def run():
        await mem.aadd_message("user", "I drink green tea", metadata={"src": "chat"})
        await mem.aadd_messages([{"role": "assistant", "content": "Noted."}])
        await mem.aremember_many(["I play the cello", {"text": "I work at Acme", "importance": 0.9}])
        await mem.aadd_triple("Maria", "lives_in", "Lisbon", confidence=0.8)
        return (await mem.arecall("tea", limit=1, tiers=["short_term"]), await mem.atriples("Maria"),
                await mem.aneighbors("Maria", depth=1), await mem.aentities(limit=5),
                await mem.aepisodes(), await mem.afacts(order="importance"))

    hits, triples, neighbors, entities, episodes, facts = asyncio.run(run())
    assert [h.text for h in hits] == ["I drink green tea"] and hits[0].metadata == {"src": "chat"}
    assert [t.as_text() for t in triples] == ["Maria lives in Lisbon"] == [t.as_text() for t in neighbors]
    assert {e.name for e in entities} >= {"Maria", "Lisbon"}
    assert episodes == mem.episodes() and facts == mem.facts(order="importance")
    assert {f.text for f in facts} >= {"I play the cello", "I work at Acme"}


def test_lifecycle_twins(clock):
    async def run(mem: UnifiedMemory):
        for i in range(4):
            await mem.aadd_turn(f"My favourite number is {i} and I live in Porto")
        promoted = await mem.aconsolidate()
        ended = await mem.aend_session()
        users = await mem.areindex(all_users=True)
        await mem.aclear(include_long_term=True)
        return promoted, ended, users, await mem.arecall("Porto")

    with UnifiedMemory(short_term_limit=2, auto_promote=False, clock=clock) as mem:
        promoted, ended, users, after = asyncio.run(run(mem))
    assert isinstance(promoted, int) and isinstance(ended, int) and users == 1 and after == []


def test_the_event_loop_keeps_running_during_a_slow_call(mem, monkeypatch):
    mem.remember("I keep bees")
    sync_recall = UnifiedMemory.recall

    def slow_recall(self, *args, **kwargs):
        time.sleep(0.2)
        return sync_recall(self, *args, **kwargs)

    monkeypatch.setattr(UnifiedMemory, "recall", slow_recall)

    async def run():
        ticks = 0
        done = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)  # let the ticker start
        hits = await mem.arecall("bees")
        done.set()
        await task
        return ticks, hits

    ticks, hits = asyncio.run(run())
    assert [h.text for h in hits] == ["I keep bees"]
    assert ticks > 5


def test_concurrent_writes_for_different_users_do_not_leak(db_path, clock):
    async def run(mem: UnifiedMemory):
        views = [mem.scoped(user_id=f"user{i}") for i in range(20)]
        await asyncio.gather(*(v.aadd_turn(f"My secret word is word{i}zz") for i, v in enumerate(views)))
        return views, await asyncio.gather(*(v.arecall(f"word{i}zz") for i, v in enumerate(views)))

    with UnifiedMemory(db_path, clock=clock) as mem:
        views, results = asyncio.run(run(mem))
        for i, (view, hits) in enumerate(zip(views, results, strict=True)):
            assert [m.content for m in view.window()] == [f"My secret word is word{i}zz"]
            # the turn (or the fact it became) and the entity it names: this user's word only
            assert [h.text for h in hits if h.tier != "entity"] == [f"My secret word is word{i}zz"]
            assert all(f"word{i}zz" in h.text for h in hits)
            others = [h.text for h in view.recall("secret word", limit=50)]
            assert f"My secret word is word{i}zz" in others and all(f"word{i}zz" in t for t in others)
        assert mem.recall("secret word") == []  # the default user saw none of it


def test_errors_propagate_with_their_types(mem):
    async def run():
        with pytest.raises(MemoryValueError):
            await mem.arecall("")
        with pytest.raises(MemoryValueError):
            await mem.afacts(order="sideways")
        with pytest.raises(TypeError):
            await mem.arecall("x", bogus=1)
        return await mem.arecall("still usable")

    assert asyncio.run(run()) == []


def test_async_with_closes_the_memory(db_path):
    async def run():
        async with UnifiedMemory(db_path) as mem:
            assert isinstance(mem, UnifiedMemory)
            await mem.aremember("I keep bees")
        return mem

    mem = asyncio.run(run())
    with pytest.raises(ClosedError):
        mem.recall("bees")
    with pytest.raises(ClosedError):
        asyncio.run(mem.arecall("bees"))
    with UnifiedMemory(db_path) as again:
        assert [h.text for h in again.recall("bees")] == ["I keep bees"]


def test_async_with_closes_on_error_too():
    async def run(box: list):
        async with UnifiedMemory() as mem:
            box.append(mem)
            raise RuntimeError("boom")

    box: list = []
    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(run(box))
    with pytest.raises(ClosedError):
        box[0].stats()


def test_works_inside_an_already_running_loop_like_jupyter(mem):
    """Jupyter's kernel already runs a loop: the twins are plain coroutines awaited in it,
    and the same memory keeps working across successive loops."""
    loop = asyncio.new_event_loop()
    try:
        async def cell():
            assert asyncio.get_running_loop() is loop
            await mem.aremember("I keep bees")
            return [h.text for h in await mem.arecall("bees")]

        assert loop.run_until_complete(cell()) == ["I keep bees"]
        # A second "cell", scheduled as a task on the running loop.
        task_result = loop.run_until_complete(asyncio.ensure_future(mem.afacts(), loop=loop))
        assert [f.text for f in task_result] == ["I keep bees"]
    finally:
        loop.close()
    assert asyncio.run(mem.astats()) == mem.stats()  # a new loop: still fine
