"""The extractor's context kept between writes (unified_memory.coordinator.window_tail): what
an extractor is given is, message for message, what a read of the window gives at that moment,
whatever happened in between (another memory on the same file writing to the same
conversation, a rolled-back write, a window trimmed, compacted or ended, other writes)."""

import doctest
import itertools

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import unified_memory.coordinator.window_tail
from tiers.records.scope import Scope
from unified_memory import UnifiedMemory
from unified_memory.coordinator.window_tail import WindowTail
from unified_memory.extraction.promotion import CONTEXT_MESSAGES
from unified_memory.extraction.rules import RuleExtractor
from unified_memory.testing import internals


def test_doctests():
    assert doctest.testmod(unified_memory.coordinator.window_tail).failed == 0


class Checking(RuleExtractor):
    """Extracts as the rules do; on the first message of each write, compares the context it is
    given with the window read from the database then (inside the write, before the window grows)."""

    def __init__(self):
        super().__init__()
        self.mem = None
        self.first = True
        self.checked = 0
        self.explode = False

    def extract(self, message, *, context=()):
        if self.first:
            self.first = False
            inner = internals(self.mem)
            read = inner.window.messages(inner.scope, last=CONTEXT_MESSAGES)
            assert list(context) == read
            self.checked += 1
        if self.explode:
            raise RuntimeError("extractor down")
        return super().extract(message, context=context)


TEXTS = st.sampled_from(["I live in Lisbon", "Lisbon", "Where do you live?", "I keep bees", "ok", "",
                         "My sister Maria works at Acme", "Sounds nice."])
OPS = st.lists(st.one_of(
    st.tuples(st.just("turn"), TEXTS.filter(bool), st.one_of(st.none(), TEXTS)),
    st.tuples(st.just("named"), TEXTS.filter(bool), st.sampled_from(["Caroline", "Mel"])),
    st.tuples(st.just("meta"), TEXTS.filter(bool), st.dictionaries(st.sampled_from("ab"), st.integers(0, 3))),
    st.tuples(st.just("other"), TEXTS.filter(bool), TEXTS),  # a second memory, the same conversation
    st.tuples(st.just("fail"), TEXTS.filter(bool), TEXTS),  # the extractor raises: rolled back
    st.tuples(st.just("end"), st.just(""), st.just("")),
    st.tuples(st.just("assistant"), TEXTS, st.just("")),  # nothing to extract from: no context read
    st.tuples(st.just("remember"), TEXTS.filter(bool), st.just("")),
), min_size=1, max_size=14)


USERS = itertools.count()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, limit=st.sampled_from([2, 3, 5, 8]))
@example(ops=[("turn", "I live in Lisbon", None)] * 4, limit=5)  # one-message turns: the kept tail grows to 4
def test_the_context_is_what_a_read_of_the_window_gives(db_path, ops, limit):
    user = f"u{next(USERS)}"  # one file for every example (on PostgreSQL: one database), a user each
    checking = Checking()
    with UnifiedMemory(db_path, user_id=user, short_term_limit=limit, extractor=checking,
                       long_term_limit=None) as mem, \
            UnifiedMemory(db_path, user_id=user, short_term_limit=limit, long_term_limit=None) as other:
        checking.mem = mem
        for kind, text, reply in ops:
            checking.first = kind in ("turn", "named", "meta", "fail")  # remember() extracts too, without context
            if kind == "turn":
                mem.add_turn(text, reply)
            elif kind == "named":
                mem.add_messages([{"role": "user", "content": text, "name": reply}])
            elif kind == "meta":
                mem.add_turn(text, "Noted.", metadata=reply)
            elif kind == "other":
                other.add_turn(text, reply)
            elif kind == "fail":
                checking.explode = True
                with pytest.raises(RuntimeError):
                    mem.add_turn(text, reply)
                checking.explode = False
            elif kind == "end":
                mem.end_session()
            elif kind == "assistant":
                mem.add_message("assistant", text)
            else:
                mem.remember(text)
        turns = sum(kind in ("turn", "named", "meta", "fail") for kind, _, _ in ops)
        assert checking.checked == turns


def test_consecutive_turns_reuse_the_kept_context(db_path, storage_backend):
    reads = []
    with UnifiedMemory(db_path, short_term_limit=20) as mem:
        window = internals(mem).window
        original = window.messages

        def counted(scope, *, last=None):
            reads.append(last)
            return original(scope, last=last)

        window.messages = counted
        for i in range(6):
            mem.add_turn(f"Turn {i}: I walked past the shop", "Sounds nice.")
    # the first turn reads the window; the next ones reuse what the turn before kept (SQLite
    # only: PostgreSQL gives no change mark, so the window is read every time)
    assert reads == ([CONTEXT_MESSAGES] if storage_backend == "sqlite" else [CONTEXT_MESSAGES] * 6)


def test_kept_only_by_the_outermost_write_at_its_mark():
    tail, scope = WindowTail(), Scope("ada")
    tail.enter()
    tail.enter()
    tail.offer(scope, ["nested"])  # a nested write's offer: the write around it may still change the window
    tail.leave(lambda: 1)
    tail.leave(lambda: 1)
    assert tail.get(scope, lambda: 1) is None
    tail.enter()
    tail.offer(scope, ["outer"])
    tail.leave(lambda: 1)
    assert tail.get(scope, lambda: 1) == ["outer"] and tail.get(scope, lambda: 2) is None
    tail.enter()
    tail.leave(None)  # a failed write forgets it
    assert tail.get(scope, lambda: 1) is None
