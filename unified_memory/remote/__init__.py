"""The remote room: :class:`~unified_memory.remote.client.RemoteMemory`, the memory service
(``unified-memory serve``) seen as a ``UnifiedMemory`` over HTTP, with the same methods, records
and errors, so ``@remember`` and the memory tools work unchanged against a shared server.

Needs httpx (``pip install 'unified-memory[server]'``); nothing here is imported by
``import unified_memory`` until ``RemoteMemory`` is first used.
"""
