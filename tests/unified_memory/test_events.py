"""Event hooks: trim, promote, evict, reset — with counts, after commit, failures reported."""

import doctest

import pytest

import unified_memory.events
from unified_memory import MemoryValueError, UnifiedMemory
from unified_memory.extraction.rules import RuleExtractor


def test_doctests():
    assert doctest.testmod(unified_memory.events).failed == 0


def record(mem, kinds=None):
    seen = []
    mem.on_event(seen.append, kinds=kinds)
    return seen


def test_trim_and_promote_report_counts():
    with UnifiedMemory(short_term_limit=2, extract_on_write=False) as mem:
        seen = record(mem)
        mem.add_turn("My sister Maria lives in Lisbon", "Nice")
        assert seen == []  # nothing left the window yet
        mem.add_turn("I keep bees", "Fun")
        kinds = [(e.kind, e.stage) for e in seen]
        assert kinds == [("summarise", "started"), ("promote", "started"),  # "started" is delivered at once
                         ("trim", "completed"), ("summarise", "completed"), ("promote", "completed")]
        assert seen[3].counts == {"messages": 2, "chars": len(mem.summary())}
        done = seen[-1]
        assert done.counts["messages"] == 2 and done.counts["facts_created"] >= 1 and done.counts["triples"] >= 1
        assert done.user_id == "default" and done.at is not None and done.error is None


def test_evict_and_reset():
    with UnifiedMemory(long_term_limit=2) as mem:
        seen = record(mem, kinds=["evict", "reset"])
        mem.remember_many(["I live in Lisbon", "I keep bees", "I play chess", "I like jazz"])
        assert [(e.kind, e.counts) for e in seen] == [("evict", {"facts": 2})]
        mem.add_turn("hello")
        mem.clear(include_long_term=True)
        reset = seen[-1]
        assert reset.kind == "reset" and reset.counts["messages"] == 1 and reset.counts["facts"] == 4


def test_a_rolled_back_write_reports_failed_and_nothing_completed():
    class Exploding(RuleExtractor):
        def extract(self, message, *, context=()):
            raise RuntimeError("extractor down")

    with UnifiedMemory(short_term_limit=1, extractor=Exploding(), extract_on_write=False) as mem:
        seen = record(mem)
        mem.add_turn("I live in Lisbon", "Nice")
        with pytest.raises(RuntimeError):
            mem.add_turn("I keep bees", "Fun")  # the first turn leaves the window: promotion fails
        stages = [(e.kind, e.stage) for e in seen]
        assert ("promote", "started") in stages and ("promote", "failed") in stages
        assert not any(stage == "completed" for _, stage in stages)
        failed = next(e for e in seen if e.stage == "failed" and e.kind == "promote")
        assert "extractor down" in failed.error
        assert [e.content for e in mem.episodes()] == ["I live in Lisbon", "Nice"]  # the second write rolled back


def test_a_raising_hook_never_breaks_the_memory(caplog):
    with UnifiedMemory(short_term_limit=1) as mem:
        def broken(event):
            raise ValueError("hook bug")
        mem.on_event(broken)
        mem.add_turn("I live in Lisbon", "Nice")
        mem.add_turn("I keep bees", "Fun")
        assert mem.stats().messages == 4
        assert "hook bug" in caplog.text


def test_unsubscribe_scopes_and_bad_kinds():
    with UnifiedMemory(short_term_limit=1) as mem:
        seen = record(mem, kinds="trim")
        stop = mem.on_event(seen.append)
        stop()
        bob = mem.scoped(user_id="bob")
        bob.add_turn("hi", "hello")
        bob.add_turn("bye", "see you")
        assert [(e.kind, e.user_id) for e in seen] == [("trim", "bob")]
        with pytest.raises(MemoryValueError, match="kinds"):
            mem.on_event(print, kinds=["explode"])


# -- nested writes: what commits is delivered once, at the outermost commit ---------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from unified_memory.events import EventBus, MemoryEvent  # noqa: E402

# A write: the events it holds and the writes nested in it (in order), and whether it fails at its end.
writes = st.recursive(
    st.tuples(st.lists(st.sampled_from(["trim", "promote", "evict"]), max_size=2), st.just([]), st.booleans()),
    lambda inner: st.tuples(st.lists(st.sampled_from(["trim", "promote", "evict"]), max_size=2),
                            st.lists(inner, max_size=3), st.booleans()),
    max_leaves=12)


@given(writes)
def test_an_event_is_delivered_iff_every_write_around_it_committed(write):
    bus, got = EventBus(), []
    bus.subscribe(got.append)
    expected_failed = []

    def run(node, label):
        """Returns what the write hands to the one around it (nothing when it failed)."""
        kinds, children, fails = node
        bus.begin()
        held = []
        for i, kind in enumerate(kinds):
            event = MemoryEvent(kind, "completed", f"{label}.{i}", None, None)
            bus.hold(event)
            held.append(event)
        for j, child in enumerate(children):
            held += run(child, f"{label}/{j}")
        if fails:  # the caller catches it and goes on: this write rolls back with what it held
            bus.fail(RuntimeError("boom"))
            expected_failed.extend(dict.fromkeys(e.kind for e in held))
            return []
        bus.deliver()
        return held

    expected_completed = [e.user_id for e in run(write, "w")]
    delivered = [e.user_id for e in got if e.stage == "completed"]
    assert sorted(delivered) == sorted(expected_completed)
    assert len(delivered) == len(set(delivered))  # never twice
    assert sorted(e.kind for e in got if e.stage == "failed") == sorted(expected_failed)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=6))
def test_atomic_blocks_keep_exactly_the_committed_facts(blocks):
    """Each block remembers a fact inside an outer atomic block and an inner one; either may fail."""
    with UnifiedMemory() as mem:
        expected = []
        for i, (inner_fails, outer_fails) in enumerate(blocks):
            try:
                with mem.atomic():
                    mem.remember(f"outer fact number {i}")
                    try:
                        with mem.atomic():
                            mem.remember(f"inner fact number {i}")
                            if inner_fails:
                                raise KeyError(i)
                    except KeyError:
                        pass
                    if outer_fails:
                        raise ValueError(i)
            except ValueError:
                continue
            expected += [f"outer fact number {i}"] + ([] if inner_fails else [f"inner fact number {i}"])
        assert sorted(f.text for f in mem.facts()) == sorted(expected)
        for text in expected:  # the lexical index agrees with the store
            assert text in [h.text for h in mem.recall(text, tiers="long_term")]


def test_a_hook_subscribed_during_a_write_receives_what_it_reported_before():
    with UnifiedMemory(short_term_limit=2, extract_on_write=False) as mem:
        mem.add_turn("My sister Maria lives in Lisbon", "Nice")
        with mem.atomic():
            mem.add_turn("I keep bees", "Fun")  # the first turn leaves the window: trim, summary, promotion
            seen = record(mem)  # nobody listened while they happened
            assert seen == []
        assert [(e.kind, e.stage) for e in seen] == [("trim", "completed"), ("summarise", "completed"),
                                                     ("promote", "completed")]
        assert seen[0].counts == {"messages": 2} and seen[0].user_id == "default" and seen[0].at is not None
