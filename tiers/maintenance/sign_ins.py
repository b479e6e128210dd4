"""Sign-ins of the web console (:class:`SignIns`), kept in the memory file's ``console_sessions``
table, so any host of the service recognises a session another host opened (hosts keep no
per-user state).

Signing in with an API key opens a session: a random token (32 bytes) goes to the browser in
an HttpOnly cookie; only its SHA-256 digest is stored, with the key's id, a form token (CSRF)
and an expiry. Every request looks the session up by digest and checks its key again, so
revoking the key ends its sessions at once; signing out deletes the row. Expired rows are
removed when sessions are opened.

    >>> from tiers.storage.backend import Storage
    >>> from tiers.maintenance.keys import KeyRing
    >>> ring = KeyRing(Storage(None))
    >>> record, key = ring.create("ada")
    >>> sign_ins = SignIns(ring.storage)
    >>> token, csrf = sign_ins.open(record.id, now=0.0)
    >>> found = sign_ins.find(token, now=1.0)
    >>> (found.key_id == record.id, found.owner, found.csrf == csrf), sign_ins.find(token + "x", now=1.0)
    ((True, 'ada', True), None)
    >>> _ = ring.revoke(record.id); sign_ins.find(token, now=2.0) is None
    True
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from tiers.storage.backend import Storage

__all__ = ["SignIns", "SignIn", "SESSION_SECONDS"]

#: How long a console session lasts (then the browser signs in again).
SESSION_SECONDS = 8 * 3600.0


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class SignIn:
    """An open session: its key, the key's user (None for an admin key), its form token, its end."""

    key_id: str
    owner: str | None
    csrf: str
    expires_at: float


class SignIns:
    """Open, find and end console sessions in one memory file."""

    def __init__(self, storage: Storage, *, seconds: float = SESSION_SECONDS) -> None:
        self.storage = storage
        self.seconds = seconds

    def open(self, key_id: str, *, now: float | None = None) -> tuple[str, str]:
        """A new session of the key ``key_id``: returns the cookie's token and the form token."""
        now = time.time() if now is None else now
        token, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        with self.storage.atomic():
            self.storage.execute("DELETE FROM console_sessions WHERE expires_at <= ?", [now])
            self.storage.execute(
                "INSERT INTO console_sessions (digest, key_id, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                [_digest(token), key_id, csrf, now, now + self.seconds])
        return token, csrf

    def find(self, token: str | None, *, now: float | None = None) -> SignIn | None:
        """The open session ``token`` proves (its key still active), or None."""
        if not token or len(token) > 200:
            return None
        now = time.time() if now is None else now
        row = self.storage.execute(
            "SELECT s.key_id, k.owner, s.csrf, s.expires_at FROM console_sessions s JOIN api_keys k ON k.id = s.key_id "
            "WHERE s.digest = ? AND s.expires_at > ? AND k.revoked_at IS NULL", [_digest(token), now]).fetchone()
        return None if row is None else SignIn(str(row[0]), None if row[1] is None else str(row[1]), str(row[2]),
                                               float(row[3]))

    def end(self, token: str | None) -> None:
        """Sign out: the session ``token`` is gone (nothing happens for an unknown one)."""
        if token and len(token) <= 200:
            with self.storage.atomic():
                self.storage.execute("DELETE FROM console_sessions WHERE digest = ?", [_digest(token)])
