"""Conversation sessions in Redis: one JSON string per ``{prefix}:{namespace}:{session_id}`` key.

``%`` and ``:`` are percent-encoded in the namespace and the id, so keys of different
namespaces (or prefixes) never collide. TTLs are Redis's own expiry (``SET ... PX``);
``list`` walks the keys with ``SCAN`` (never ``KEYS``). Needs ``pip install
'unified-memory[redis]'``. A server that cannot be reached fails fast:

    >>> from tiers.sessions import RedisConversationStore
    >>> from scoring.errors import StoreUnavailableError
    >>> try:
    ...     RedisConversationStore("redis://127.0.0.1:1/0", socket_timeout=0.5)
    ... except StoreUnavailableError as exc:
    ...     print(exc.field, str(exc).startswith("store: no Redis server at 127.0.0.1:1"))
    store True
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from scoring.errors import DependencyError, StorageError, StoreUnavailableError, invalid, wrong_type
from tiers.sessions._common import check_key, check_ttl, decode_state, encode_state

__all__ = ["RedisConversationStore", "encode_part", "glob_escape"]

FORMAT = "unified-memory.session"
VERSION = 1


def encode_part(value: str) -> str:
    """Percent-encode ``%`` and ``:`` so a key part can hold no separator.

    >>> encode_part("team:a%b")
    'team%3Aa%25b'
    """
    return value.replace("%", "%25").replace(":", "%3A")


def glob_escape(value: str) -> str:
    """Escape the glob characters of a ``SCAN MATCH`` pattern.

    >>> glob_escape("a*b?[c]\\\\")
    'a\\\\*b\\\\?\\\\[c\\\\]\\\\\\\\'
    """
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in value)


class RedisConversationStore:
    """A :class:`~tiers.records.protocols.ConversationStore` on a Redis server.

    Connects to ``url`` (or uses a ready ``client``) and PINGs it at once: a dead server
    raises :class:`~scoring.errors.StoreUnavailableError` within about
    ``socket_timeout`` seconds, as does any later connection failure.

    >>> store = RedisConversationStore("redis://127.0.0.1:6379/0", default_ttl=3600)  # doctest: +SKIP
    >>> store.save("s1", [{"role": "user", "content": "hi"}], namespace="ada")  # doctest: +SKIP
    >>> store.load("s1", namespace="ada"), store.list(namespace="ada")  # doctest: +SKIP
    ({'messages': [{'role': 'user', 'content': 'hi'}], 'summary': None}, ['s1'])
    >>> RedisConversationStore(prefix="")
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: prefix: must not be empty
    """

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *, client: Any = None,
                 prefix: str = "unified-memory:session", default_ttl: float | None = None,
                 socket_timeout: float = 2.0) -> None:
        if not isinstance(prefix, str):
            raise wrong_type("prefix", "str", prefix)
        if not prefix:
            raise invalid("prefix", "must not be empty")
        if not isinstance(url, str):
            raise wrong_type("url", "str", url)
        timeout = check_ttl("socket_timeout", socket_timeout)
        if timeout is None:
            raise wrong_type("socket_timeout", "a number of seconds", socket_timeout)
        self._default_ttl = check_ttl("default_ttl", default_ttl)
        try:
            import redis
            from redis.backoff import NoBackoff
            from redis.retry import Retry
        except ImportError as exc:
            raise DependencyError("store: the Redis conversation store needs redis-py: "
                                  "pip install 'unified-memory[redis]'", field="store") from exc
        self._errors = redis.exceptions
        self.prefix = prefix
        if client is None:
            try:  # no retries: a dead server must fail within socket_timeout, not after backoffs
                client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout,
                                              retry=Retry(NoBackoff(), 0))
            except ValueError as exc:
                raise invalid("url", f"is not a Redis URL: {exc}") from exc
        self._client = client
        kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
        self.address = kwargs.get("path") or f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
        try:
            with self._guard("ping"):
                client.ping()
        except StorageError as exc:  # something answered, but not a Redis we can use
            if isinstance(exc, StoreUnavailableError):
                raise
            raise StoreUnavailableError(f"store: no Redis server at {self.address} (during ping): "
                                        f"{exc.__cause__}", field="store") from exc.__cause__

    @contextlib.contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn redis-py's errors into ours, chained (connection trouble: StoreUnavailableError)."""
        try:
            yield
        except (self._errors.ConnectionError, self._errors.TimeoutError) as exc:
            raise StoreUnavailableError(f"store: no Redis server at {self.address} "
                                        f"(during {action}): {exc}", field="store") from exc
        except self._errors.RedisError as exc:
            raise StorageError(f"store: Redis at {self.address} failed during {action}: {exc}",
                               field="store") from exc

    def _key(self, session_id: str, namespace: str) -> str:
        return (f"{self.prefix}:{encode_part(check_key('namespace', namespace))}:"
                f"{encode_part(check_key('session_id', session_id))}")

    def load(self, session_id: str, *, namespace: str = "default") -> dict[str, Any] | None:
        """The state saved under ``session_id``, or ``None`` if missing or expired."""
        key = self._key(session_id, namespace)
        with self._guard("load"):
            raw = self._client.get(key)
        if raw is None:
            return None
        envelope = decode_state(raw, f"Redis key {key!r}")
        if envelope.get("format") != FORMAT or not isinstance(envelope.get("state"), dict):
            raise StorageError(f"store: Redis key {key!r} is not a {FORMAT} value", field="store")
        state: dict[str, Any] = envelope["state"]
        return state

    def save(self, session_id: str, state: Mapping[str, Any] | Sequence[Any], *, namespace: str = "default",
             ttl: float | None = None) -> None:
        """Store ``state`` (overwriting, expiry included); ``ttl`` overrides the default TTL."""
        key = self._key(session_id, namespace)
        lifetime = check_ttl("ttl", ttl)
        text = encode_state(state)
        lifetime = lifetime if lifetime is not None else self._default_ttl
        envelope = json.dumps({"format": FORMAT, "version": VERSION, "namespace": namespace,
                               "session_id": session_id, "saved_at": time.time()})
        value = f'{envelope[:-1]}, "state": {text}}}'
        with self._guard("save"):
            if lifetime is None:
                self._client.set(key, value)
            else:
                self._client.set(key, value, px=max(1, math.ceil(lifetime * 1000)))

    def delete(self, session_id: str, *, namespace: str = "default") -> bool:
        """Delete a session; ``True`` if a live one was there."""
        key = self._key(session_id, namespace)
        with self._guard("delete"):
            return bool(self._client.delete(key))

    def list(self, *, namespace: str = "default") -> list[str]:
        """The live session ids of ``namespace``, sorted (found by ``SCAN``)."""
        head = f"{self.prefix}:{encode_part(check_key('namespace', namespace))}:"
        ids = set()
        with self._guard("list"):
            for key in self._client.scan_iter(match=glob_escape(head) + "*", count=500):
                name = key.decode("utf-8") if isinstance(key, bytes) else key
                rest = name[len(head):]
                if name.startswith(head) and rest and ":" not in rest:  # not a deeper prefix's key
                    ids.add(unquote(rest))
        return sorted(ids)

    def close(self) -> None:
        """Release the client's connections."""
        with self._guard("close"):
            self._client.close()

    def __enter__(self) -> RedisConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
