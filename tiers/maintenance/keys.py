"""API keys of the memory service (:class:`KeyRing`), kept in the memory file's ``api_keys`` table.

A key is ``um_<id>_<secret>``: ``id`` (12 hex characters) finds the row, the secret
(32 random bytes, URL-safe) proves it. Only the SHA-256 digest of the whole key is
stored — the keys are random, so a slow hash would add nothing — and the digests
are compared in constant time. A key belongs to one user (``owner``) or is an admin
key (``owner`` NULL, any user). Revoking keeps the row (``revoked_at``), so the list
shows what existed; a revoked key never verifies again.

The table has no ``user_id`` column on purpose: keys are credentials, not a user's
memories, so exporting or forgetting a user neither copies nor removes them.

    >>> from tiers.storage.backend import Storage
    >>> ring = KeyRing(Storage(None))
    >>> record, key = ring.create("ada")
    >>> ring.verify(key).owner, ring.verify(key + "x")
    ('ada', None)
    >>> ring.revoke(record.id), ring.verify(key) is None
    (True, True)
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass

from tiers.storage.backend import Storage

__all__ = ["KeyRecord", "KeyRing", "KEY_PATTERN"]

KEY_PATTERN = re.compile(r"^um_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One key as listed: never the key itself. ``owner`` is None for an admin key."""

    id: str
    owner: str | None
    admin: bool
    label: str
    created_at: float
    revoked_at: float | None

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyRing:
    """Create, verify, list and revoke the service's API keys in one memory file."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def create(self, owner: str | None, *, admin: bool = False, label: str = "",
               now: float | None = None) -> tuple[KeyRecord, str]:
        """A new key for ``owner`` (or an admin key: ``admin=True``, ``owner`` None).
        Returns the record and the key, which is shown this once and never stored."""
        if admin == (owner is not None):
            raise ValueError("a key has an owner, or is an admin key (not both)")
        key_id = secrets.token_hex(6)
        key = f"um_{key_id}_{secrets.token_urlsafe(32)}"
        record = KeyRecord(id=key_id, owner=owner, admin=admin, label=label,
                           created_at=time.time() if now is None else now, revoked_at=None)
        with self.storage.atomic():
            self.storage.execute(
                "INSERT INTO api_keys(id, owner, admin, digest, label, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [record.id, owner, int(admin), _digest(key), label, record.created_at])
        return record, key

    def verify(self, key: str) -> KeyRecord | None:
        """The active key record ``key`` proves, or None (malformed, unknown, revoked)."""
        found = KEY_PATTERN.match(key) if isinstance(key, str) else None
        if found is None:
            return None
        rows = self.storage.query("SELECT * FROM api_keys WHERE id = ?", [found.group(1)])
        if not rows or not hmac.compare_digest(rows[0]["digest"], _digest(key)):
            return None
        record = self._record(rows[0])
        return record if record.active else None

    def list(self, *, include_revoked: bool = True) -> list[KeyRecord]:
        """Every key, oldest first (revoked ones too unless ``include_revoked=False``)."""
        rows = self.storage.query("SELECT * FROM api_keys ORDER BY created_at, id")
        records = [self._record(r) for r in rows]
        return records if include_revoked else [r for r in records if r.active]

    def revoke(self, key_id: str, *, now: float | None = None) -> bool:
        """Revoke the key ``key_id``; False when there is no such key (revoking twice is a no-op)."""
        with self.storage.atomic():
            rows = self.storage.query("SELECT revoked_at FROM api_keys WHERE id = ?", [key_id])
            if not rows:
                return False
            if rows[0]["revoked_at"] is None:
                self.storage.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?",
                                     [time.time() if now is None else now, key_id])
        return True

    @staticmethod
    def _record(row: dict[str, object]) -> KeyRecord:
        revoked = row["revoked_at"]
        return KeyRecord(id=str(row["id"]), owner=None if row["owner"] is None else str(row["owner"]),
                         admin=bool(row["admin"]), label=str(row["label"]),
                         created_at=float(row["created_at"]),  # type: ignore[arg-type]
                         revoked_at=None if revoked is None else float(revoked))  # type: ignore[arg-type]
