"""Who is calling: the bearer key of a request, checked against the :class:`~tiers.maintenance.keys.KeyRing`,
and a limit on failed attempts per client address.

A key belongs to one user or is an admin key. :meth:`Gate.authenticate` answers 401 (no key,
a malformed, unknown or revoked key) or 429 (too many failed attempts from this address in the
last window), :meth:`Gate.authorize` 403 (a valid key for another user: the body says only
that the key does not grant that user). Digests are compared in constant time
(:meth:`~tiers.maintenance.keys.KeyRing.verify`).

The key is checked first: a valid key is admitted even from a throttled address, so callers
who share an address (a NAT, a proxy) with someone guessing are not locked out, and nobody can
lock a tenant out by failing on purpose. Only a failed attempt from a throttled address is
answered 429. That a throttled guess can still succeed gives nothing away: a key's secret is
256 random bits, so no number of guesses finds one; the limiter bounds the work and the log
noise a guesser causes, it is not what keeps keys secret.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tiers.maintenance.keys import KeyRecord, KeyRing

__all__ = ["Principal", "Refusal", "Gate"]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: the key's id, and its user (None for an admin key)."""

    key_id: str
    owner: str | None

    @property
    def admin(self) -> bool:
        """May act for every user."""
        return self.owner is None

    def may_act_for(self, user_id: str) -> bool:
        """Whether this key grants ``user_id``."""
        return self.owner is None or self.owner == user_id


class Refusal(Exception):  # noqa: N818 - an answer, not a failure
    """A request refused before it reached the memory: HTTP status, error type and message."""

    def __init__(self, status: int, type_: str, message: str, *, field: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.type, self.message, self.field = status, type_, message, field
        self.headers = headers or {}


class Gate:
    """Authenticates requests and limits failed attempts (``max_failures`` per ``window`` seconds
    per client address; valid keys are admitted whatever the address)."""

    def __init__(self, keys: KeyRing, *, max_failures: int = 20, window: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.keys = keys
        self.max_failures = max_failures
        self.window = window
        self.clock = clock
        self._failures: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> collections.deque[float]:
        seen = self._failures.setdefault(client, collections.deque())
        while seen and seen[0] <= now - self.window:
            seen.popleft()
        return seen

    def _throttled(self, client: str) -> float:
        """Seconds until ``client`` may try again (0: it may now)."""
        now = self.clock()
        with self._lock:
            seen = self._recent(client, now)
            if len(seen) < self.max_failures:
                if not seen:
                    self._failures.pop(client, None)
                return 0.0
            return max(0.0, seen[0] + self.window - now)

    def _failed(self, client: str) -> None:
        now = self.clock()
        with self._lock:
            self._recent(client, now).append(now)
            if len(self._failures) > 100_000:  # a flood of addresses: keep the map bounded
                for stale in [c for c, d in self._failures.items() if not d or d[-1] <= now - self.window]:
                    del self._failures[stale]

    def authenticate(self, authorization: str | None, client: str) -> Principal:
        """The caller proved by ``Authorization: Bearer <key>`` (from any address), or a
        :class:`Refusal`: 429 when ``client`` is throttled, else 401 (and the failure counts)."""
        scheme, _, key = (authorization or "").partition(" ")
        record: KeyRecord | None = None
        if scheme.lower() == "bearer" and key.strip():
            record = self.keys.verify(key.strip())
        if record is not None:
            return Principal(key_id=record.id, owner=record.owner)
        wait = self._throttled(client)
        if wait:
            raise Refusal(429, "too_many_attempts",
                          f"too many failed authentications from this address; retry in {int(wait) + 1} s",
                          headers={"Retry-After": str(int(wait) + 1)})
        self._failed(client)
        message = "missing API key: send 'Authorization: Bearer <key>'" if not authorization else "invalid API key"
        raise Refusal(401, "unauthorized", message, field="authorization", headers={"WWW-Authenticate": "Bearer"})

    @staticmethod
    def authorize(principal: Principal, user_id: str) -> None:
        """Refuse (403) a key that does not grant ``user_id``; the answer names no data of that user."""
        if not principal.may_act_for(user_id):
            raise Refusal(403, "forbidden", "this API key does not grant access to that user", field="user_id")

    @staticmethod
    def require_admin(principal: Principal) -> None:
        """Refuse (403) a key that is not an admin key."""
        if not principal.admin:
            raise Refusal(403, "forbidden", "this needs an admin API key", field="authorization")
