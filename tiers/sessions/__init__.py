"""Conversation session stores behind one protocol, :class:`~unified_memory.protocols.ConversationStore`.

Four backends, one contract: in memory, JSON files, SQLite and Redis (the last needs
``pip install 'unified-memory[redis]'``; ``redis`` is imported only when one is built).

    >>> from tiers.sessions import InMemoryConversationStore
    >>> from unified_memory.protocols import ConversationStore
    >>> isinstance(InMemoryConversationStore(), ConversationStore)
    True
"""

from __future__ import annotations

from tiers.sessions.json_files import JSONConversationStore
from tiers.sessions.memory import InMemoryConversationStore
from tiers.sessions.redis import RedisConversationStore
from tiers.sessions.sqlite import SQLiteConversationStore

__all__ = ["InMemoryConversationStore", "JSONConversationStore", "SQLiteConversationStore", "RedisConversationStore"]
