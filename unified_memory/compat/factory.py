"""One factory for every memory type the compat facades name.

``"basic"`` and ``"compact"`` are Motus' (:mod:`unified_memory.compat.motus`);
``"conversation_history"``, ``"managed_conversation"`` and ``"kg"`` are MARSYS'
(:mod:`unified_memory.compat.marsys`). All of them run on :class:`~unified_memory.Conversation`.

    >>> memory = create_memory("conversation_history", description="Be brief.")
    >>> _ = memory.add(role="user", content="Hello")
    >>> [m["role"] for m in memory.get_messages()]
    ['system', 'user']
"""

from __future__ import annotations

from typing import Any

from unified_memory.errors import invalid, wrong_type

__all__ = ["MEMORY_TYPES", "create_memory"]

MEMORY_TYPES: tuple[str, ...] = ("basic", "compact", "conversation_history", "managed_conversation", "kg")


def create_memory(memory_type: str, **kwargs: Any) -> Any:
    """Build the memory named ``memory_type`` with the constructor arguments ``kwargs``.

    ``basic`` → ``BasicMemory``, ``compact`` → ``CompactionMemory``, ``conversation_history``
    → ``ConversationMemory``, ``managed_conversation`` → ``ManagedConversationMemory``,
    ``kg`` → ``KGMemory``.

    >>> type(create_memory("compact", config={"token_threshold": 8000})).__name__
    'CompactionMemory'
    >>> create_memory("vector")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: memory_type: unknown memory type 'vector'; choose from basic, compact, ...
    """
    if not isinstance(memory_type, str):
        raise wrong_type("memory_type", "str", memory_type)
    if memory_type in ("basic", "compact"):
        from unified_memory.compat import motus

        return motus.create_memory(memory_type, **kwargs)
    if memory_type in ("conversation_history", "managed_conversation", "kg"):
        from unified_memory.compat import marsys

        cls = {"conversation_history": marsys.ConversationMemory,
               "managed_conversation": marsys.ManagedConversationMemory, "kg": marsys.KGMemory}[memory_type]
        return cls(**kwargs)
    raise invalid("memory_type", f"unknown memory type {memory_type!r}; choose from {', '.join(MEMORY_TYPES)}")
