"""ReadFanout: a request's independent reads, at once where the database allows it."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unified_memory.coordinator.fanout import ReadFanout


def test_concurrent_calls_run_on_other_threads_at_the_same_time():
    fanout = ReadFanout()
    started = threading.Barrier(3, timeout=5)  # each call waits for the other two: only together can they pass

    def call(n):
        def run():
            started.wait()
            return n, threading.get_ident()
        return run

    try:
        results = fanout.gather([call(0), call(1), call(2)], concurrent=True)
    finally:
        fanout.close()
    assert [n for n, _ in results] == [0, 1, 2]
    assert results[0][1] == threading.get_ident()  # the caller runs the first itself
    assert len({ident for _, ident in results}) == 3


def test_without_concurrency_every_call_runs_in_the_callers_thread_in_order():
    fanout = ReadFanout()
    order = []
    results = fanout.gather([lambda: order.append((1, threading.get_ident())) or 1,
                             lambda: order.append((2, threading.get_ident())) or 2], concurrent=False)
    assert results == [1, 2]
    assert order == [(1, threading.get_ident()), (2, threading.get_ident())]
    assert fanout._pool is None  # no thread was started


def test_an_error_is_raised_only_after_every_call_has_finished():
    fanout = ReadFanout()
    finished = []

    def slow():
        time.sleep(0.2)
        finished.append("slow")
        return "slow"

    def fails():
        raise KeyError("boom")

    try:
        with pytest.raises(KeyError, match="boom"):
            fanout.gather([fails, slow], concurrent=True)
        assert finished == ["slow"]  # nothing still reads once the caller goes on
        with pytest.raises(ValueError, match="late"):
            fanout.gather([lambda: 1, lambda: (_ for _ in ()).throw(ValueError("late"))], concurrent=True)
    finally:
        fanout.close()


def test_once_closed_calls_run_one_after_the_other():
    fanout = ReadFanout()
    fanout.gather([lambda: 1, lambda: 2], concurrent=True)
    fanout.close()
    fanout.close()  # idempotent
    assert fanout.gather([threading.get_ident, threading.get_ident], concurrent=True) == [threading.get_ident()] * 2


@given(st.lists(st.integers(), max_size=6), st.booleans())
def test_results_come_back_in_the_order_of_the_calls(values, concurrent):
    fanout = ReadFanout()
    try:
        assert fanout.gather([lambda v=v: v for v in values], concurrent=concurrent) == values
    finally:
        fanout.close()
