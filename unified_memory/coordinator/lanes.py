"""The lanes of one memory file: calls of one user run one at a time, in call order; calls of
different users run side by side on a few threads (see :mod:`unified_memory.coordinator.async_api`).

A call waits for the calls queued before it in any of its lanes (one per user) and nothing
else; a call about every user (:data:`EVERY_USER`: closing the memory, reindexing every
user) waits for every call before it, and every call after it waits for it.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Hashable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

from tiers.storage.backend import Storage

__all__ = ["Lanes", "lanes_for", "fenced_executor", "EVERY_USER", "WORKERS"]

T = TypeVar("T")

#: Worker threads per memory file (started as calls come): as many users' calls run at once.
WORKERS = 8

Lane = Hashable
#: The lanes of a call about every user: it waits for all calls before it, all calls after it wait for it.
EVERY_USER: tuple[Lane, ...] = ()


class _Call:
    """A call queued in :class:`Lanes`: what to run, its future, the calls it waits for (how many
    are still running or queued) and the calls waiting for it."""

    __slots__ = ("run", "lanes", "future", "waiting", "then")

    def __init__(self, run: Callable[[], Any], lanes: tuple[Lane, ...]) -> None:
        self.run = run
        self.lanes = lanes
        self.future: Future[Any] = Future()
        self.waiting = 0
        self.then: list[_Call] = []


class Lanes:
    """The calls of one memory file: each runs after the calls queued before it in any of its
    lanes (one per user) and, on a pool of :data:`WORKERS` threads, beside the others. A call
    with no lanes (:data:`EVERY_USER`) waits for every call before it and every later call waits
    for it; ``wait_only`` (a read across users) waits the same but holds back no later call.

        >>> import threading
        >>> lanes, gate, seen = Lanes(), threading.Event(), []
        >>> slow = lanes.submit(lambda: gate.wait(5), ("ada",))
        >>> then = lanes.submit(lambda: seen.append("ada, second"), ("ada",))
        >>> lanes.submit(lambda: seen.append("bo"), ("bo",)).result(5)   # bo does not wait for ada
        >>> seen
        ['bo']
        >>> gate.set(); then.result(5); seen
        ['bo', 'ada, second']
    """

    def __init__(self, workers: int = WORKERS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="unified-memory")
        self._lock = threading.Lock()
        self._last: dict[Lane, _Call] = {}  # per lane, the last call queued there, until it ends
        self._fence: _Call | None = None  # the last call about every user, until it ends

    def submit(self, fn: Callable[[], T], lanes: tuple[Lane, ...], *, wait_only: bool = False) -> Future[T]:
        """Queue ``fn()`` in ``lanes`` (:data:`EVERY_USER`: all); its future, cancellable until it starts."""
        call = _Call(fn, lanes if lanes else (object(),) if wait_only else ())
        with self._lock:
            earlier = [self._last[lane] for lane in lanes if lane in self._last] if lanes else list(self._last.values())
            if self._fence is not None:
                earlier.append(self._fence)
            if lanes or wait_only:
                for lane in call.lanes:
                    self._last[lane] = call
            else:
                self._last.clear()  # every call of them is waited for by the fence, which later ones wait for
                self._fence = call
            for before in {id(c): c for c in earlier}.values():
                before.then.append(call)
                call.waiting += 1
        if not call.waiting:
            self._start(call)
        return call.future

    def _start(self, call: _Call) -> None:
        try:
            self._pool.submit(self._run, call)
        except RuntimeError as exc:  # the interpreter is shutting down: no new thread runs it
            if call.future.set_running_or_notify_cancel():
                call.future.set_exception(exc)
            self._done(call)

    def _run(self, call: _Call) -> None:
        try:
            if call.future.set_running_or_notify_cancel():  # else cancelled while it waited: skipped
                try:
                    result = call.run()
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, as an executor does
                    call.future.set_exception(exc)
                else:
                    call.future.set_result(result)
        finally:
            self._done(call)

    def _done(self, call: _Call) -> None:
        ready: list[_Call] = []
        with self._lock:
            for lane in call.lanes:
                if self._last.get(lane) is call:
                    del self._last[lane]
            if self._fence is call:
                self._fence = None
            for after in call.then:
                after.waiting -= 1
                if not after.waiting:
                    ready.append(after)
            call.then = []
        for after in ready:
            self._start(after)


class _Fenced(Executor):
    """An executor over a file's lanes whose every call is about every user (see :func:`fenced_executor`)."""

    def __init__(self, lanes: Lanes) -> None:
        self._lanes = lanes

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return self._lanes.submit(functools.partial(fn, *args, **kwargs), EVERY_USER)


_lanes: weakref.WeakKeyDictionary[Storage, Lanes] = weakref.WeakKeyDictionary()
_lanes_lock = threading.Lock()


def lanes_for(owner: Storage) -> Lanes:
    """The lanes of one memory file (created on first use, dropped with the file's storage; the
    idle worker threads exit once the pool is garbage-collected)."""
    with _lanes_lock:
        lanes = _lanes.get(owner)
        if lanes is None:
            lanes = _lanes[owner] = Lanes()
        return lanes


def fenced_executor(owner: Storage) -> Executor:
    """An executor whose calls each wait for every call before them, and hold back every call
    after them (what the memory's single worker thread used to be)."""
    return _Fenced(lanes_for(owner))
