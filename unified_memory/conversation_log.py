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

import json
import os
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from unified_memory.errors import StorageError, invalid, wrong_type

__all__ = ["ConversationLog", "LOG_FORMAT_VERSION", "log_path"]

LOG_FORMAT_VERSION = 1


def log_path(log_base_path: str | os.PathLike[str], session_id: str) -> Path:
    """Where the log of ``session_id`` lives: ``<log_base_path>/<session_id>.jsonl``,
    with the id percent-encoded so any string is a safe file name.

    >>> log_path("/logs", "../etc").name
    '..%2Fetc.jsonl'
    """
    if not isinstance(session_id, str):
        raise wrong_type("session_id", "str", session_id)
    if not session_id.strip():
        raise invalid("session_id", "must be a non-empty string")
    name = quote(session_id, safe="")
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
        if not isinstance(log_base_path, str | os.PathLike):
            raise wrong_type("log_base_path", "str or path", log_base_path)
        self.base_path = Path(log_base_path)
        self.session_id = session_id
        self.path = log_path(log_base_path, session_id)
        self._lock = threading.Lock()
        self._checked_tail = False

    def exists(self) -> bool:
        """Whether anything was logged for this session yet."""
        return self.path.exists()

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
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        last = len(lines) - 1  # the piece after the final newline: '' or a torn line
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                if number - 1 == last:
                    return  # torn by a kill mid-write: the entry never completed
                raise StorageError(f"{self.path}:{number}: not a JSON log line ({exc.msg})",
                                   field="log_base_path") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
                raise StorageError(f"{self.path}:{number}: a log line must be an object with a 'type'",
                                   field="log_base_path")
            if entry.get("v", LOG_FORMAT_VERSION) > LOG_FORMAT_VERSION:
                raise StorageError(f"{self.path}:{number}: written by a newer version (format "
                                   f"{entry['v']}, this one reads {LOG_FORMAT_VERSION})", field="log_base_path")
            yield entry
