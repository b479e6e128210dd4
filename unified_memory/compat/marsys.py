"""MARSYS-style memory (``marsys.agents.memory``) over :class:`~unified_memory.Conversation`.

    >>> memory = ConversationMemory(description="You are a helpful assistant")
    >>> mid = memory.add(role="user", content="Hello")
    >>> [m["role"] for m in memory.retrieve_all()], memory.retrieve_by_id(mid)["content"]
    (['system', 'user'], 'Hello')

Differences from MARSYS: ``KGMemory`` works without a model (offline rule extraction;
MARSYS requires one) and extracts from ``user`` messages only by default; facts are
extracted synchronously; ``update`` of an unknown id raises ``NotFoundError``.

The facade of two private rooms: the conversation memories (``_marsys_conversation``)
and the knowledge-graph memory with the manager that picks one (``_marsys_kg``).
"""

from __future__ import annotations

from unified_memory.compat._marsys_conversation import (
    MEMORY_TYPES,
    ActiveContextPolicyConfig,
    CompactionEvent,
    ConversationMemory,
    ManagedConversationMemory,
    ManagedMemoryConfig,
    MemoryResetEvent,
    SummarizationConfig,
    ToolTruncationConfig,
)
from unified_memory.compat._marsys_kg import KGMemory, MemoryManager

__all__ = ["ActiveContextPolicyConfig", "CompactionEvent", "ConversationMemory", "KGMemory",
           "ManagedConversationMemory", "ManagedMemoryConfig", "MemoryManager", "MemoryResetEvent",
           "SummarizationConfig", "ToolTruncationConfig", "MEMORY_TYPES"]
