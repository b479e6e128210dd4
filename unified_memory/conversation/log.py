"""An append-only JSONL log of one conversation: every message and every change to it.

Each line is one JSON object with a ``type`` (``message``, ``update``, ``remove``,
``compaction``, ``trim``, ``summary``, ``system_prompt``, ``snapshot``, ``reset``), the time it
was written (``at``) and the format version (``v``). Replaying the lines in order
rebuilds the conversation without calling any model (a compaction line carries its
result, not its inputs); see :meth:`unified_memory.Conversation.restore_from_log`.

A process killed in the middle of a write leaves at most one torn last line; it is
ignored when reading and cut off before the next append, so the log stays valid.
A bad line anywhere else is an error naming the file and the line.

    >>> import tempfile
    >>> log = ConversationLog(tempfile.mkdtemp(), "user-123")
    >>> log.append({"type": "reset"})
    >>> [entry["type"] for entry in log.entries()]
    ['reset']
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from unified_memory.errors import StorageError, check_path, invalid, wrong_type

__all__ = ["ConversationLog", "LOG_FORMAT_VERSION", "log_path"]

LOG_FORMAT_VERSION = 1
_MAX_NAME = 200


def log_path(log_base_path: str | os.PathLike[str], session_id: str) -> Path:
    """Where the log of ``session_id`` lives: ``<log_base_path>/<session_id>.jsonl``,
    with the id percent-encoded so any string is a safe file name; an encoded name longer
    than 200 characters is shortened with a hash of the id (file systems cap names at 255 bytes).

    >>> log_path("/logs", "../etc").name
    '..%2Fetc.jsonl'
    >>> len(log_path("/logs", "x" * 5000).name)
    191
    """
    if not isinstance(session_id, str):
        raise wrong_type("session_id", "str", session_id)
    if not session_id.strip():
        raise invalid("session_id", "must be a non-empty string")
    try:
        raw = session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise invalid("session_id", "must be valid unicode text (it holds a lone surrogate)") from None
    name = quote(raw, safe="")
    if len(name) > _MAX_NAME:  # '+' is always encoded by quote(), so a shortened name cannot collide
        name = f"{name[:120]}+{hashlib.sha256(raw).hexdigest()}"
    return Path(log_base_path) / f"{name}.jsonl"


class ConversationLog:
    """The JSONL log file of one session (created on the first append).

    >>> import tempfile
    >>> log = ConversationLog(tempfile.mkdtemp(), "s1")
    >>> log.append({"type": "summary", "summary": "Ada likes tea"})
    >>> next(log.entries())["summary"]
    'Ada likes tea'
    """

    def __init__(self, log_base_path: str | os.PathLike[str], session_id: str) -> None:
        check_path("log_base_path", log_base_path)  # a str or path, not blank ('' would log to the working dir)
        self.base_path = Path(log_base_path)
        self.session_id = session_id
        self.path = log_path(log_base_path, session_id)
        self._lock = threading.Lock()
        self._checked_tail = False

    def exists(self) -> bool:
        """Whether anything was logged for this session yet."""
        try:
            return self.path.exists()
        except OSError as exc:  # e.g. a log_base_path too long for the file system
            raise StorageError(f"log_base_path: cannot use {str(self.path)[:200]!r}: {exc.strerror or exc}",
                               field="log_base_path") from None

    def append(self, entry: Mapping[str, Any]) -> None:
        """Write one entry as a line (``at`` and ``v`` are added); flushed before returning."""
        record = {"v": LOG_FORMAT_VERSION, "at": time.time(), **entry}
        try:
            line = json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise invalid("entry", f"cannot be written as JSON: {exc}") from None
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                if not self._checked_tail:
                    self._cut_torn_tail()
                    self._checked_tail = True
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
                    fh.flush()
            except OSError as exc:
                raise StorageError(f"log_base_path: cannot write {self.path}: {exc}", field="log_base_path") from exc

    def _cut_torn_tail(self) -> None:
        """Drop a last line without its newline (a write cut short by a kill)."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as fh:
            data = fh.read()
            if data and not data.endswith(b"\n"):
                fh.truncate(data.rfind(b"\n") + 1)

    def entries(self) -> Iterator[dict[str, Any]]:
        """The logged entries, oldest first (nothing when the file does not exist)."""
        for _, entry in self.numbered_entries():
            yield entry

    def numbered_entries(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(line number, entry)`` of the logged entries, oldest first.

        A file that cannot be read (a directory, no permission), a bad line before the
        last one (not UTF-8, not JSON, not an object with a ``type``, a ``v`` that is not
        a version number) or a newer format is a :class:`StorageError` naming the file
        and the line; a torn last line (no newline: a write cut short) is ignored.

        >>> import tempfile
        >>> log = ConversationLog(tempfile.mkdtemp(), "s1")
        >>> log.append({"type": "reset"})
        >>> [(n, e["type"]) for n, e in log.numbered_entries()]
        [(1, 'reset')]
        """
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StorageError(f"{self.path}: cannot read the log: {exc.strerror or exc}",
                               field="log_base_path") from None
        lines = data.split(b"\n")
        last = len(lines) - 1  # the piece after the final newline: b'' or a torn line
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw.decode("utf-8"))
            except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, nested too deeply
                if number - 1 == last:
                    return  # torn by a kill mid-write (maybe inside a character): the entry never completed
                reason = ("not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "not a JSON log line ("
                          + (exc.msg if isinstance(exc, json.JSONDecodeError) else
                             "nested too deeply" if isinstance(exc, RecursionError) else str(exc)) + ")")
                raise StorageError(f"{self.path}:{number}: {reason}", field="log_base_path") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
                raise StorageError(f"{self.path}:{number}: a log line must be an object with a 'type'",
                                   field="log_base_path")
            version = entry.get("v", LOG_FORMAT_VERSION)
            if isinstance(version, bool) or not isinstance(version, int):
                raise StorageError(f"{self.path}:{number}: 'v' must be a format version number, got {version!r:.40}",
                                   field="log_base_path")
            if version > LOG_FORMAT_VERSION:
                raise StorageError(f"{self.path}:{number}: written by a newer version (format "
                                   f"{version}, this one reads {LOG_FORMAT_VERSION})", field="log_base_path")
            yield number, entry
