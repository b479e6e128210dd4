"""Conversation session stores behind one protocol, :class:`~tiers.records.protocols.ConversationStore`.

Five backends, one contract: in memory, JSON files, SQLite, Redis and PostgreSQL (the last
two need ``pip install 'unified-memory[redis]'`` / ``'unified-memory[postgres]'``; their
drivers are imported only when one is built).

    >>> from tiers.sessions import InMemoryConversationStore
    >>> from tiers.records.protocols import ConversationStore
    >>> isinstance(InMemoryConversationStore(), ConversationStore)
    True

May import: :mod:`tiers.storage`, :mod:`tiers.records`, :mod:`scoring`.
"""

from __future__ import annotations

from tiers.sessions.json_files import JSONConversationStore
from tiers.sessions.memory import InMemoryConversationStore
from tiers.sessions.postgres import PostgresConversationStore
from tiers.sessions.redis import RedisConversationStore
from tiers.sessions.sqlite import SQLiteConversationStore

__all__ = ["InMemoryConversationStore", "JSONConversationStore", "SQLiteConversationStore", "RedisConversationStore",
           "PostgresConversationStore"]
