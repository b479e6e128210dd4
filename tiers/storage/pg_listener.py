"""Followers of a PostgreSQL memory wake up when another connection commits a change of the
index journal: LISTEN/NOTIFY, one listening connection per process and database schema.

A writer that journalled a change notifies the schema's channel in its transaction (the
server delivers it at commit, to every listener on every host). The :class:`JournalListener`
of each process counts what it hears; :meth:`tiers.storage.backend.Storage.data_version` is that
count, so a follower learns that nothing changed without a round trip to the server, and
reads the journal's head only when something did. A commit of this process counts at once
(:meth:`JournalListener.bump`), before the server's notification arrives. When the listening
connection is lost it counts too (a notification may have been missed), and it listens again
once the server is back.

    >>> channel_of(-12345)
    'unified_memory_journal_m12345'
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

__all__ = ["JournalListener", "listener_for", "release", "channel_of"]

_LOG = logging.getLogger(__name__)
_LISTENERS: dict[str, JournalListener] = {}
_LISTENERS_LOCK = threading.Lock()
_WAIT = 0.5  # seconds between looks at whether the listener should stop
_RETRY_MAX = 2.0  # seconds between attempts to listen again while the server is away


def channel_of(lock_key: int) -> str:
    """The NOTIFY channel of a schema (from its advisory lock key): an identifier of its own."""
    return f"unified_memory_journal_{'m' if lock_key < 0 else 'p'}{abs(lock_key)}"


class JournalListener:
    """Listens on one schema's channel in a daemon thread and counts the notifications."""

    def __init__(self, url: str, channel: str, psycopg: Any) -> None:
        self.url, self.channel, self._psycopg = url, channel, psycopg
        self.version = 0
        self.users = 0  # the connections of this process following through it (listener_for, release)
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=f"um-listen-{channel[-8:]}", daemon=True)
        self._thread.start()
        self._ready.wait(10.0)  # listening before anyone reads the journal's head: no commit falls in between

    def bump(self) -> None:
        """Count a change (a commit of this process, or a notification possibly missed)."""
        with self._lock:
            self.version += 1

    def stop(self) -> None:
        """Stop listening (the thread ends within half a second)."""
        self._stop = True

    def _run(self) -> None:
        pause = 0.05
        while not self._stop:
            try:
                with self._psycopg.connect(self.url, autocommit=True, connect_timeout=5,
                                           application_name="unified-memory-listener") as conn:
                    conn.execute(f"LISTEN {self.channel}")
                    self.bump()  # whatever was committed while nobody listened: look once
                    self._ready.set()
                    pause = 0.05
                    while not self._stop:
                        for _ in conn.notifies(timeout=_WAIT):
                            self.bump()
            except Exception as exc:  # the server went away: count, wait, listen again
                self.bump()
                self._ready.set()  # do not hold up the opener: its own statements say whether the server is there
                _LOG.debug("journal listener on %s: %s; listening again in %.2f s", self.channel, exc, pause)
                time.sleep(pause)
                pause = min(pause * 2, _RETRY_MAX)


def listener_for(key: str, url: str, channel: str, psycopg: Any) -> JournalListener:
    """This process's listener of the schema ``key`` names (started on first use); each user
    calls :func:`release` when it closes."""
    with _LISTENERS_LOCK:
        found = _LISTENERS.get(key)
        if found is None:
            found = _LISTENERS[key] = JournalListener(url, channel, psycopg)
        found.users += 1
        return found


def release(key: str, listener: JournalListener) -> None:
    """One user of the listener closed; the last one stops it (its connection closes)."""
    with _LISTENERS_LOCK:
        listener.users -= 1
        if listener.users <= 0:
            listener.stop()
            if _LISTENERS.get(key) is listener:
                del _LISTENERS[key]


def _forget_listeners() -> None:
    """In a forked child: the parent's listening threads do not exist here."""
    global _LISTENERS_LOCK
    _LISTENERS.clear()
    _LISTENERS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_listeners)
