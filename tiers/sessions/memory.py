"""Conversation sessions in a process-local dict: fast, thread-safe, gone at exit.

    >>> from tiers.sessions import InMemoryConversationStore
    >>> store = InMemoryConversationStore()
    >>> store.save("s1", [{"role": "user", "content": "hi"}])
    >>> store.load("s1")
    {'messages': [{'role': 'user', 'content': 'hi'}], 'summary': None}
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tiers.sessions._common import check_clock, check_key, check_ttl, decode_state, encode_state, expires_at

__all__ = ["InMemoryConversationStore"]

DEFAULT_NAMESPACE = "default"


class InMemoryConversationStore:
    """A :class:`~tiers.records.protocols.ConversationStore` held in memory.

    ``default_ttl`` (seconds, ``None`` = never) applies when ``save`` gets no ``ttl``;
    ``clock`` says what time it is (inject one in tests). Also offers the lauren-ai
    extras ``list_conversations()`` and ``clear()``.

    >>> now = [1000.0]
    >>> store = InMemoryConversationStore(default_ttl=60, clock=lambda: now[0])
    >>> store.save("s1", {"messages": [], "summary": "hello"})
    >>> store.list(), store.list_conversations()
    (['s1'], ['s1'])
    >>> now[0] += 60
    >>> store.load("s1") is None
    True
    """

    def __init__(self, *, default_ttl: float | None = None, clock: Callable[[], float] = time.time) -> None:
        self._default_ttl = check_ttl("default_ttl", default_ttl)
        self._clock = check_clock(clock)
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[str, float | None]] = {}

    def _live(self, key: tuple[str, str], now: float) -> str | None:
        """The stored text of ``key`` if it is live; drops it if it expired (lock held)."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        text, expiry = entry
        if expiry is not None and expiry <= now:
            del self._entries[key]
            return None
        return text

    def load(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any] | None:
        """The state saved under ``session_id``, or ``None`` if missing or expired.

        >>> InMemoryConversationStore().load("nobody") is None
        True
        """
        key = (check_key("namespace", namespace), check_key("session_id", session_id))
        with self._lock:
            text = self._live(key, self._clock())
        return None if text is None else decode_state(text, f"session {session_id!r}")

    def save(self, session_id: str, state: Mapping[str, Any] | Sequence[Any], *,
             namespace: str = DEFAULT_NAMESPACE, ttl: float | None = None) -> None:
        """Store ``state`` (overwriting); ``ttl`` seconds overrides the default TTL.

        >>> store = InMemoryConversationStore()
        >>> store.save("s1", {"summary": "x"}, ttl=5)
        >>> store.load("s1")
        {'summary': 'x'}
        """
        key = (check_key("namespace", namespace), check_key("session_id", session_id))
        lifetime = check_ttl("ttl", ttl)
        text = encode_state(state)
        with self._lock:
            now = self._clock()
            self._entries[key] = (text, expires_at(now, lifetime if lifetime is not None else self._default_ttl))

    def delete(self, session_id: str, *, namespace: str = DEFAULT_NAMESPACE) -> bool:
        """Delete a session; ``True`` if a live one was there.

        >>> store = InMemoryConversationStore()
        >>> store.save("s1", [])
        >>> store.delete("s1"), store.delete("s1")
        (True, False)
        """
        key = (check_key("namespace", namespace), check_key("session_id", session_id))
        with self._lock:
            found = self._live(key, self._clock()) is not None
            self._entries.pop(key, None)
        return found

    def list(self, *, namespace: str = DEFAULT_NAMESPACE) -> list[str]:
        """The live session ids of ``namespace``, sorted.

        >>> store = InMemoryConversationStore()
        >>> store.save("b", []); store.save("a", []); store.save("c", [], namespace="other")
        >>> store.list(), store.list(namespace="other")
        (['a', 'b'], ['c'])
        """
        check_key("namespace", namespace)
        with self._lock:
            now = self._clock()
            keys = [key for key in self._entries if key[0] == namespace]
            return sorted(key[1] for key in keys if self._live(key, now) is not None)

    def list_conversations(self) -> builtins.list[str]:  # `list` here is the method above
        """lauren-ai compatibility: the live ids of the default namespace, sorted.

        >>> store = InMemoryConversationStore()
        >>> store.save("s2", []); store.save("s1", [])
        >>> store.list_conversations()
        ['s1', 's2']
        """
        return self.list(namespace=DEFAULT_NAMESPACE)

    def clear(self) -> None:
        """lauren-ai compatibility: remove every session of every namespace.

        >>> store = InMemoryConversationStore()
        >>> store.save("s1", []); store.clear()
        >>> store.list()
        []
        """
        with self._lock:
            self._entries.clear()
