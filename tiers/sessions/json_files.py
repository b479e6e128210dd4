"""Conversation sessions as JSON files: ``<directory>/<namespace>/<session_id>.json``.

Names are percent-encoded (all but ``a-z0-9_~-``: ``.`` and upper-case letters too), so
no id can climb out of the directory or collide on a case-insensitive file system; an
over-long name is shortened with a hash. Writes are atomic (temp file, fsync, ``os.replace``).

    >>> import tempfile
    >>> from tiers.sessions import JSONConversationStore
    >>> store = JSONConversationStore(tempfile.mkdtemp())
    >>> store.save("../etc/passwd", {"summary": "safe"})
    >>> store.list()
    ['../etc/passwd']
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from scoring.errors import StorageError, StoreUnavailableError, check_path, wrong_type
from tiers.sessions._common import check_clock, check_key, check_ttl, decode_state, encode_state, expires_at

__all__ = ["JSONConversationStore", "encode_name"]

FORMAT = "unified-memory.session"
VERSION = 1
_MAX_NAME = 200
_SUFFIX = ".json"
_PLAIN = re.compile(r"[a-z0-9_~-]")  # kept as is; anything else is %XX (UTF-8 bytes, upper-case hex)


def encode_name(value: str) -> str:
    """A file-system-safe, case-insensitively unique name for any id.

    >>> encode_name(".."), encode_name("a/b"), encode_name("Ada")
    ('%2E%2E', 'a%2Fb', '%41da')
    """
    name = "".join(ch if _PLAIN.fullmatch(ch) else "".join(f"%{byte:02X}" for byte in ch.encode("utf-8"))
                   for ch in value)
    if len(name) > _MAX_NAME:  # '+' never appears in an encoded name, so this cannot collide with one
        name = f"{name[:120]}+{hashlib.sha256(value.encode('utf-8')).hexdigest()}"
    return name


class JSONConversationStore:
    """A :class:`~tiers.records.protocols.ConversationStore` in a directory of JSON files.

    The directory is created if missing. Expired files are removed when a load or a
    list meets them; a corrupt file raises :class:`~scoring.errors.StorageError`.

    >>> import tempfile
    >>> store = JSONConversationStore(tempfile.mkdtemp(), default_ttl=3600)
    >>> store.save("s1", [{"role": "user", "content": "olá"}])
    >>> store.load("s1")["messages"][0]["content"]
    'olá'
    """

    def __init__(self, directory: str | os.PathLike[str], *, default_ttl: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not isinstance(directory, str | os.PathLike):
            raise wrong_type("directory", "a str or a path", directory)
        check_path("directory", directory)
        self._default_ttl = check_ttl("default_ttl", default_ttl)
        self._clock = check_clock(clock)
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # too long, under a file, no permission: the caller's argument
            raise StoreUnavailableError(f"directory: cannot use directory {str(self.directory)[:200]!r}: "
                                        f"{exc.strerror or exc}", field="directory") from exc
        self._lock = threading.Lock()

    def path(self, session_id: str, *, namespace: str = "default") -> Path:
        """The file that holds a session (whether or not it exists).

        >>> import tempfile
        >>> store = JSONConversationStore(tempfile.mkdtemp())
        >>> store.path("a/b", namespace="..").relative_to(store.directory).as_posix()
        '%2E%2E/a%2Fb.json'
        """
        check_key("namespace", namespace)
        check_key("session_id", session_id)
        return self.directory / encode_name(namespace) / (encode_name(session_id) + _SUFFIX)

    def _read(self, path: Path, now: float) -> dict[str, Any] | None:
        """The parsed envelope of ``path``; ``None`` if missing or expired (then removed)."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"store: cannot read session file {str(path)!r}: {exc}", field="store") from exc
        envelope = decode_state(text, f"session file {str(path)!r}")
        expiry = envelope.get("expires_at")
        if (envelope.get("format") != FORMAT or not isinstance(envelope.get("state"), dict)
                or not isinstance(envelope.get("session_id"), str)
                or not (expiry is None or (isinstance(expiry, int | float) and not isinstance(expiry, bool)
                                           and (isinstance(expiry, int) or math.isfinite(expiry))))):
            # expires_at true or NaN: damaged, so kept (as it is) and refused, never deleted as "expired"
            raise StorageError(f"store: session file {str(path)!r} is not a {FORMAT} file", field="store")
        if envelope.get("version") != VERSION:
            raise StorageError(f"store: session file {str(path)!r} has version {envelope.get('version')!r}; "
                               f"this code reads version {VERSION}", field="store")
        if expiry is not None and expiry <= now:
            path.unlink(missing_ok=True)
            return None
        return envelope

    def load(self, session_id: str, *, namespace: str = "default") -> dict[str, Any] | None:
        """The state saved under ``session_id``, or ``None`` if missing or expired.

        >>> import tempfile
        >>> JSONConversationStore(tempfile.mkdtemp()).load("nobody") is None
        True
        """
        path = self.path(session_id, namespace=namespace)
        with self._lock:
            envelope = self._read(path, self._clock())
        if envelope is None:
            return None
        if envelope.get("session_id") != session_id or envelope.get("namespace") != namespace:
            raise StorageError(f"store: session file {str(path)!r} holds another session", field="store")
        state: dict[str, Any] = envelope["state"]
        return state

    def save(self, session_id: str, state: Mapping[str, Any] | Sequence[Any], *, namespace: str = "default",
             ttl: float | None = None) -> None:
        """Atomically write ``state`` (overwriting); ``ttl`` overrides the default TTL.

        >>> import tempfile
        >>> store = JSONConversationStore(tempfile.mkdtemp())
        >>> store.save("s1", {"summary": "x"}, ttl=60)
        >>> store.load("s1")
        {'summary': 'x'}
        """
        path = self.path(session_id, namespace=namespace)
        lifetime = check_ttl("ttl", ttl)
        text = encode_state(state)
        with self._lock:
            now = self._clock()
            envelope = {"format": FORMAT, "version": VERSION, "namespace": namespace, "session_id": session_id,
                        "saved_at": now,
                        "expires_at": expires_at(now, lifetime if lifetime is not None else self._default_ttl)}
            body = json.dumps(envelope, ensure_ascii=False, allow_nan=False)[:-1] + f', "state": {text}}}'
            self._write(path, body)

    def _write(self, path: Path, body: str) -> None:
        """Write ``body`` to ``path`` atomically: a temp file in the same directory, fsync, replace."""
        tmp = path.parent / f".{uuid.uuid4().hex}.tmp"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(body)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
            if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
                fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreUnavailableError(f"store: cannot write session file {str(path)!r}: {exc}",
                                        field="store") from exc

    def delete(self, session_id: str, *, namespace: str = "default") -> bool:
        """Delete a session's file; ``True`` if a live session was there.

        >>> import tempfile
        >>> store = JSONConversationStore(tempfile.mkdtemp())
        >>> store.save("s1", [])
        >>> store.delete("s1"), store.delete("s1")
        (True, False)
        """
        path = self.path(session_id, namespace=namespace)
        with self._lock:
            try:
                live = self._read(path, self._clock()) is not None
            except StorageError:
                live = True  # a corrupt file is still something to delete
            path.unlink(missing_ok=True)
        return live

    def list(self, *, namespace: str = "default") -> list[str]:
        """The live session ids of ``namespace``, sorted (expired files are removed).

        >>> import tempfile
        >>> store = JSONConversationStore(tempfile.mkdtemp())
        >>> store.save("b", []); store.save("a", []); store.save("c", [], namespace="other")
        >>> store.list(), store.list(namespace="other")
        (['a', 'b'], ['c'])
        """
        folder = self.directory / encode_name(check_key("namespace", namespace))
        with self._lock:
            now = self._clock()
            try:
                paths = [p for p in folder.iterdir() if p.name.endswith(_SUFFIX) and not p.name.startswith(".")]
            except FileNotFoundError:
                return []
            ids = []
            for path in paths:
                envelope = self._read(path, now)
                if envelope is not None:
                    ids.append(envelope["session_id"])
        return sorted(ids)
