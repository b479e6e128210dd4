"""Async twins of :class:`~unified_memory.UnifiedMemory`'s methods (``aadd_turn``,
``arecall``, ``acontext``, ...) that never block the event loop.

Each twin runs its sync method in a worker thread and awaits it, so SQLite, the
BM25 index and embedding never stall the loop. They are plain coroutines (no
``asyncio.run`` inside), so they work in an already running loop such as Jupyter's::

    >>> import asyncio
    >>> from unified_memory import UnifiedMemory
    >>> async def main():
    ...     async with UnifiedMemory() as mem:
    ...         await mem.aremember("I keep bees")
    ...         return [hit.text for hit in await mem.arecall("bees")]
    >>> asyncio.run(main())   # in Jupyter: await main()
    ['I keep bees']

Why a dedicated executor rather than ``asyncio.to_thread``: every memory file (one
:class:`~tiers.storage.Storage`, shared by all :meth:`~UnifiedMemory.scoped` views)
gets one worker thread, so the async calls on it run one at a time, in call order.
SQLite and the storage lock serialise the work anyway, so nothing is lost; in return
(1) concurrent calls never race on the in-memory BM25 postings, which are searched
outside the storage lock, (2) twenty gathered ``aadd_turn`` calls hold one thread,
not twenty of the loop's shared default executor, and (3) the executor belongs to
the memory, not to a loop, so the memory can be used from successive loops
(``asyncio.run`` twice, Jupyter kernels). The context variables of the caller are
carried into the worker, as ``asyncio.to_thread`` does. Cancelling the awaiting task
abandons a call that has not started; one already running completes in its thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["AsyncMethods", "ASYNC_TWINS"]

T = TypeVar("T")

# sync name -> async twin name; every twin below is listed here.
ASYNC_TWINS: dict[str, str] = {name: "a" + name for name in (
    "add_turn", "add_message", "add_messages", "remember", "remember_many", "add_triple",
    "recall", "context", "assemble_context", "consolidate", "end_session", "clear", "reindex",
    "facts", "entities", "triples", "neighbors", "episodes", "stats", "summary", "users",
    "export_jsonl", "import_jsonl", "forget", "ingest",
)}

_executors: weakref.WeakKeyDictionary[Any, ThreadPoolExecutor] = weakref.WeakKeyDictionary()
_executors_lock = threading.Lock()


def _executor_for(owner: Any) -> ThreadPoolExecutor:
    """The single worker of one memory file (created on first use, dropped with the file's storage;
    its idle thread exits once the executor is garbage-collected)."""
    with _executors_lock:
        executor = _executors.get(owner)
        if executor is None:
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="unified-memory")
            _executors[owner] = executor
        return executor


class AsyncMethods:
    """Mixin of async twins: ``await mem.arecall(...)`` is ``mem.recall(...)`` run in a worker thread.

    Also ``async with UnifiedMemory() as mem:`` (closes the memory in the worker on exit).
    """

    _backend: Any  # provided by UnifiedMemory

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Give each twin its sync method's signature (for help(), IDEs and inspect).
        for name, twin_name in ASYNC_TWINS.items():
            sync = inspect.getattr_static(cls, name, None)  # also methods of the other mixins
            twin = AsyncMethods.__dict__.get(twin_name)
            if callable(sync) and twin is not None:
                twin.__signature__ = inspect.signature(sync)

    async def _run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in this memory's worker thread and await its result."""
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await loop.run_in_executor(_executor_for(self._backend.storage), call)

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._run(self.close)  # type: ignore[attr-defined]

    # -- writing ----------------------------------------------------------------------------

    async def aadd_turn(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`add_turn` (runs in a worker thread)."""
        return await self._run(self.add_turn, *args, **kwargs)  # type: ignore[attr-defined]

    async def aadd_message(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`add_message` (runs in a worker thread)."""
        return await self._run(self.add_message, *args, **kwargs)  # type: ignore[attr-defined]

    async def aadd_messages(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`add_messages` (runs in a worker thread)."""
        return await self._run(self.add_messages, *args, **kwargs)  # type: ignore[attr-defined]

    async def aremember(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`remember` (runs in a worker thread)."""
        return await self._run(self.remember, *args, **kwargs)  # type: ignore[attr-defined]

    async def aremember_many(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`remember_many` (runs in a worker thread)."""
        return await self._run(self.remember_many, *args, **kwargs)  # type: ignore[attr-defined]

    async def aadd_triple(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`add_triple` (runs in a worker thread)."""
        return await self._run(self.add_triple, *args, **kwargs)  # type: ignore[attr-defined]

    async def aconsolidate(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`consolidate` (runs in a worker thread)."""
        return await self._run(self.consolidate, *args, **kwargs)  # type: ignore[attr-defined]

    async def aend_session(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`end_session` (runs in a worker thread)."""
        return await self._run(self.end_session, *args, **kwargs)  # type: ignore[attr-defined]

    async def aclear(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`clear` (runs in a worker thread)."""
        return await self._run(self.clear, *args, **kwargs)  # type: ignore[attr-defined]

    async def areindex(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`reindex` (runs in a worker thread)."""
        return await self._run(self.reindex, *args, **kwargs)  # type: ignore[attr-defined]

    async def aexport_jsonl(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`export_jsonl` (runs in a worker thread)."""
        return await self._run(self.export_jsonl, *args, **kwargs)  # type: ignore[attr-defined]

    async def aingest(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`ingest` (runs in a worker thread)."""
        return await self._run(self.ingest, *args, **kwargs)  # type: ignore[attr-defined]

    async def aimport_jsonl(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`import_jsonl` (runs in a worker thread)."""
        return await self._run(self.import_jsonl, *args, **kwargs)  # type: ignore[attr-defined]

    async def aforget(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`forget` (runs in a worker thread)."""
        return await self._run(self.forget, *args, **kwargs)  # type: ignore[attr-defined]

    # -- reading ----------------------------------------------------------------------------

    async def arecall(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`recall` (runs in a worker thread)."""
        return await self._run(self.recall, *args, **kwargs)  # type: ignore[attr-defined]

    async def acontext(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`context` (runs in a worker thread)."""
        return await self._run(self.context, *args, **kwargs)  # type: ignore[attr-defined]

    async def aassemble_context(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`assemble_context` (runs in a worker thread)."""
        return await self._run(self.assemble_context, *args, **kwargs)  # type: ignore[attr-defined]

    async def afacts(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`facts` (runs in a worker thread)."""
        return await self._run(self.facts, *args, **kwargs)  # type: ignore[attr-defined]

    async def aentities(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`entities` (runs in a worker thread)."""
        return await self._run(self.entities, *args, **kwargs)  # type: ignore[attr-defined]

    async def atriples(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`triples` (runs in a worker thread)."""
        return await self._run(self.triples, *args, **kwargs)  # type: ignore[attr-defined]

    async def aneighbors(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`neighbors` (runs in a worker thread)."""
        return await self._run(self.neighbors, *args, **kwargs)  # type: ignore[attr-defined]

    async def aepisodes(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`episodes` (runs in a worker thread)."""
        return await self._run(self.episodes, *args, **kwargs)  # type: ignore[attr-defined]

    async def astats(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`stats` (runs in a worker thread)."""
        return await self._run(self.stats, *args, **kwargs)  # type: ignore[attr-defined]

    async def asummary(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`summary` (runs in a worker thread)."""
        return await self._run(self.summary, *args, **kwargs)  # type: ignore[attr-defined]

    async def ausers(self, *args: Any, **kwargs: Any) -> Any:
        """Async :meth:`users` (runs in a worker thread)."""
        return await self._run(self.users, *args, **kwargs)  # type: ignore[attr-defined]
