"""The async API: one awaitable twin per public method, run off the event loop."""

from __future__ import annotations

import asyncio
import doctest
import inspect
import random
import threading
import time

import pytest

from unified_memory import UnifiedMemory
from unified_memory.coordinator.async_api import ASYNC_TWINS, AsyncAPI
from unified_memory.errors import ClosedError, MemoryValueError
from unified_memory.extraction.rules import RuleExtractor

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


# -- one lane per user: a slow call of one user holds back only that user's later calls -----------

class Blocking(RuleExtractor):
    """Extracts as the rules do, once ``release`` is set (``entered`` says it is waiting)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()

    def extract(self, message, *, context=()):
        self.entered.set()
        assert self.release.wait(60), "never released"
        return super().extract(message, context=context)


def test_a_slow_call_of_one_user_does_not_hold_back_another_users_calls(db_path, clock):
    """While A's add_turn is stuck in its extractor, B recalls, lists and writes; A's next call waits
    for A's turn and sees it. (With one worker per file, or the extraction inside the write
    transaction, B's recall waited for A's turn: the 10 s below ran out.)"""
    blocking = Blocking()

    async def run(mem: UnifiedMemory):
        a, b = mem.scoped(user_id="A"), mem.scoped(user_id="B")
        await b.aremember("I keep bees")
        await b.aadd_turn("My sister Maria lives in Lisbon", "Nice.")
        slow = asyncio.ensure_future(a.aadd_turn("I live in Porto and I play the cello", extractor=blocking))
        then = asyncio.ensure_future(a.afacts())  # A's next call: after A's turn, whatever it waits for
        try:
            assert await asyncio.to_thread(blocking.entered.wait, 10)
            hits = await asyncio.wait_for(b.arecall("bees"), 10)
            facts = await asyncio.wait_for(b.afacts(), 10)
            await asyncio.wait_for(b.aadd_turn("I play chess on Sundays"), 10)  # B's writes too
            context = await asyncio.wait_for(b.acontext("chess", max_tokens=300), 10)
            await asyncio.sleep(0.2)
            assert not slow.done() and not then.done()
        finally:
            blocking.release.set()
        await slow
        return hits, facts, context, await then

    with UnifiedMemory(db_path, clock=clock) as mem:
        hits, facts, context, a_facts = asyncio.run(run(mem))
        assert [h.text for h in hits if h.tier == "long_term"] == ["I keep bees"]
        assert "I keep bees" in {f.text for f in facts} and "chess" in context.text
        assert any("Porto" in f.text for f in a_facts)  # A's second call ran after A's turn
        assert mem.scoped(user_id="A").facts() == a_facts


def test_the_calls_of_one_user_run_one_at_a_time_in_call_order(db_path, clock):
    """Twenty gathered turns of each of two users, interleaved: each user's land in call order and
    never overlap (an extractor notes when each runs), while the two users' do overlap."""
    running: dict[str, int] = {"A": 0, "B": 0}
    most: dict[str, int] = {"A": 0, "B": 0}
    both = threading.Event()
    lock = threading.Lock()

    class Noting(RuleExtractor):
        def extract(self, message, *, context=()):
            user = message.user_id
            with lock:
                running[user] += 1
                most[user] = max(most[user], running[user])
                if running["A"] and running["B"]:
                    both.set()
            both.wait(0.05)  # long enough for the other user's call to start beside this one
            with lock:
                running[user] -= 1
            return super().extract(message, context=context)

    noting = Noting()

    async def run(mem: UnifiedMemory):
        a, b = mem.scoped(user_id="A"), mem.scoped(user_id="B")
        users = ["A"] * 20 + ["B"] * 20
        random.Random(7).shuffle(users)  # an interleaving; each user's turns numbered in call order
        count = {"A": 0, "B": 0}
        calls = []
        for user in users:
            calls.append((a if user == "A" else b).aadd_turn(f"{user} says {count[user]}", extractor=noting))
            count[user] += 1
        await asyncio.gather(*calls)
        return await a.astats(), await b.astats()

    with UnifiedMemory(db_path, clock=clock, short_term_limit=100) as mem:
        a_stats, b_stats = asyncio.run(run(mem))
        assert a_stats.messages == b_stats.messages == 20
        for user in ("A", "B"):
            assert [m.content for m in mem.scoped(user_id=user).window()] == [f"{user} says {i}" for i in range(20)]
        assert most == {"A": 1, "B": 1} and both.is_set()


def test_lanes_order_fence_cancel_and_doctest():
    """Lanes: one user's calls in order, other users' beside them; a call about every user waits for
    all before it and holds back all after it (a read across users only waits); a cancelled call
    that has not started never runs, and its lane goes on."""
    from unified_memory.coordinator import lanes as lanes_module
    from unified_memory.coordinator.lanes import EVERY_USER, Lanes

    assert doctest.testmod(lanes_module).failed == 0
    lanes, gate, seen = Lanes(workers=4), threading.Event(), []
    first = lanes.submit(lambda: gate.wait(10) and seen.append("ada 1"), ("ada",))
    second = lanes.submit(lambda: seen.append("ada 2"), ("ada",))
    cancelled = lanes.submit(lambda: seen.append("ada cancelled"), ("ada",))
    assert cancelled.cancel()
    reader = lanes.submit(lambda: seen.append("users"), EVERY_USER, wait_only=True)
    bo = lanes.submit(lambda: seen.append("bo"), ("bo",))
    bo.result(10)  # not held back by ada's calls, nor by the read across users
    assert seen == ["bo"] and not reader.done()
    fence = lanes.submit(lambda: seen.append("fence"), EVERY_USER)
    after = lanes.submit(lambda: seen.append("bo after the fence"), ("bo",))
    time.sleep(0.1)
    assert not after.done() and not fence.done()
    gate.set()
    after.result(10)
    assert first.result(10) is None and second.done() and reader.done()
    assert seen[:3] == ["bo", "ada 1", "ada 2"] and seen[-2:] == ["fence", "bo after the fence"]
    assert "users" in seen and "ada cancelled" not in seen


def test_async_with_closes_after_every_users_calls_queued_before(db_path):
    async def run():
        async with UnifiedMemory(db_path) as mem:
            views = [mem.scoped(user_id=f"u{i}") for i in range(6)]
            tasks = [asyncio.ensure_future(v.aremember(f"I keep {i} hives")) for i, v in enumerate(views)]
            await asyncio.sleep(0)  # each task queues its call; the close is queued after them
        return await asyncio.gather(*tasks, return_exceptions=True)

    results = asyncio.run(run())
    assert all(isinstance(r, str) for r in results), results
    with UnifiedMemory(db_path) as again:
        assert sorted(again.users()) == [f"u{i}" for i in range(6)]


def test_concurrent_writes_of_users_report_their_own_events(db_path, clock):
    """Events of writes of several users at once reach the hooks as their own: one user's failed
    writes report only its own events failed, the others' complete."""
    seen: list = []
    lock = threading.Lock()

    class Failing(RuleExtractor):
        def extract(self, message, *, context=()):
            raise RuntimeError("extractor down")

    async def run(mem: UnifiedMemory):
        async def writes(user: str):
            view = mem.scoped(user_id=user)
            for i in range(8):
                if user == "bad":
                    with pytest.raises(RuntimeError):
                        await view.aadd_turn(f"I live in Porto {i}", extractor=Failing())
                else:
                    await view.aadd_turn(f"I live in Porto {i}", "Nice.")
        await asyncio.gather(*(writes(u) for u in ("good1", "good2", "good3", "bad")))

    with UnifiedMemory(db_path, clock=clock, short_term_limit=2) as mem:
        mem.on_event(lambda e: (lock.acquire(), seen.append((e.user_id, e.kind, e.stage)), lock.release()))
        asyncio.run(run(mem))
    assert not [e for e in seen if e[0] != "bad" and e[2] == "failed"]
    assert not [e for e in seen if e[0] == "bad" and e[2] == "completed"]
    for user in ("good1", "good2", "good3"):
        assert sum(1 for e in seen if e == (user, "promote", "completed")) == 8
        assert sum(1 for e in seen if e == (user, "trim", "completed")) == 7
    assert sum(1 for e in seen if e == ("bad", "promote", "failed")) == 8


# -- a write extracts before its transaction, and again inside it only when the window changed ----

def test_a_turn_extracts_again_when_the_window_changed_before_its_transaction(db_path, clock):
    """The extraction runs before the write takes the lock; when another write to the same
    conversation (here: another connection, while the extractor runs) changed what the window
    ends with, the turn extracts again inside its transaction, with the window as it is then, and
    stores what a turn written after that other one stores."""
    calls: list[tuple[str, list[str]]] = []

    class Interloping(RuleExtractor):
        def __init__(self) -> None:
            super().__init__()
            self.other: UnifiedMemory | None = None

        def extract(self, message, *, context=()):
            calls.append((message.content, [m.content for m in context]))
            if self.other is not None and message.content == "Lisbon":
                other, self.other = self.other, None
                other.add_turn("Hi", "Where do you live?")  # the same conversation, written meanwhile
            return super().extract(message, context=context)

    interloping = Interloping()
    with UnifiedMemory(db_path, user_id="ada", clock=clock, extractor=interloping) as mem, \
            UnifiedMemory(db_path, user_id="ada", clock=clock) as other:
        mem.add_turn("I keep bees", "Nice.")
        assert calls == [("I keep bees", [])]  # once, before the write: nothing changed meanwhile
        interloping.other = other
        mem.add_turn("Lisbon")
        facts = sorted(f.text for f in mem.facts())
        window = [m.content for m in mem.window()]
        # nothing written meanwhile: extracted once, ahead (on PostgreSQL, the window read again equals it)
        mem.add_turn("I play chess")
        assert calls[3:] == [("I play chess", window[-4:])]
    assert calls[1:3] == [("Lisbon", ["I keep bees", "Nice."]),  # ahead: "Lisbon" alone says nothing
                         ("Lisbon", ["I keep bees", "Nice.", "Hi", "Where do you live?"])]  # again, inside
    assert facts == ["I live in Lisbon"]  # understood as the answer it now is
    with UnifiedMemory(clock=clock) as alone:  # the same turns, one after the other
        alone.add_turn("I keep bees", "Nice.")
        alone.add_turn("Hi", "Where do you live?")
        alone.add_turn("Lisbon")
        assert sorted(f.text for f in alone.facts()) == facts
        assert [m.content for m in alone.window()] == window == ["I keep bees", "Nice.", "Hi", "Where do you live?",
                                                                 "Lisbon"]
