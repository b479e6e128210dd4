"""The short-term window: the latest messages of each conversation, persisted.

The window is a set of pointers into the episodic log (table ``window``), one
window per user/agent/session. :meth:`ShortTermWindow.extend` appends logged
messages and trims whole interactions by the rules of :mod:`tiers.trimming`;
whatever it trims is returned so the coordinator can promote it. Reopening the
file restores every window.

    >>> from tiers.storage.backend import Storage, Scope
    >>> from tiers.episodic import EpisodicLog
    >>> from tiers.records.types import Message
    >>> store = Storage(None)
    >>> log = EpisodicLog(store)
    >>> window = ShortTermWindow(log, max_messages=2)
    >>> scope = Scope("ada")
    >>> with store.atomic():
    ...     logged = log.append(scope, [Message(role="user", content=c) for c in "abc"],
    ...                         now=0.0, importances=[0, 0, 0])
    ...     trimmed = window.extend(scope, logged, token_counts=[1, 1, 1])
    >>> [m.message.content for m in trimmed], [m.content for m in window.messages(scope)]
    (['a'], ['b', 'c'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from tiers.candidates import CandidateQuery, RecallCandidate
from tiers.episodic import EpisodicLog, LoggedMessage
from tiers.records.types import Message
from tiers.storage.backend import Scope, Storage, loads
from tiers.trimming import plan_trim

__all__ = ["ShortTermWindow"]


class _Slot(NamedTuple):
    """A window entry as the trimming rules see it (see :class:`tiers.trimming.WindowItem`)."""

    seq: int
    tokens: int
    role: str
    tool_calls: list[dict] | None
    tool_call_id: str | None


#: Entries read beyond the ones that must leave when looking for the cut of a plain window.
_HEAD = 16


class ShortTermWindow:
    """Persisted conversation windows bounded by messages and optionally tokens."""

    recall_tiers: frozenset[str] = frozenset({"short_term", "episodic"})  # what recall_candidates returns

    def __init__(self, log: EpisodicLog, *, max_messages: int, max_tokens: int | None = None) -> None:
        self.storage: Storage = log.storage
        self.log = log
        self.max_messages = max_messages
        self.max_tokens = max_tokens

    def logged(self, scope: Scope, *, last: int | None = None) -> list[LoggedMessage]:
        """The window's messages with their log positions, oldest first (only the newest
        ``last`` when given)."""
        return self.log.in_window(scope, last=last)

    def messages(self, scope: Scope, *, last: int | None = None) -> list[Message]:
        """The window's messages, oldest first (only the newest ``last`` when given)."""
        return [m.message for m in self.logged(scope, last=last)]

    def tokens(self, scope: Scope) -> int:
        """Tokens held by the window (as counted when each message was added)."""
        row = self.storage.execute(
            "SELECT CAST(COALESCE(SUM(tokens), 0) AS BIGINT) FROM \"window\" WHERE user_id = ? AND agent_id = ? AND session_id = ?",
            [scope.user_id, scope.agent_id, scope.session_id]).fetchone()
        return int(row[0])

    def _slots(self, scope: Scope) -> list[_Slot]:
        rows = self.storage.execute(
            "SELECT w.message_seq, w.tokens, m.role, m.tool_calls, m.tool_call_id FROM \"window\" w "
            "JOIN messages m ON m.seq = w.message_seq AND m.user_id = w.user_id WHERE w.user_id = ? AND w.agent_id = ? AND w.session_id = ? "
            "ORDER BY w.message_seq", [scope.user_id, scope.agent_id, scope.session_id]).fetchall()
        return [_Slot(seq, tokens, role, loads(calls) if calls is not None else None, call_id)
                for seq, tokens, role, calls, call_id in rows]

    def extend(
        self, scope: Scope, logged: Sequence[LoggedMessage], *, token_counts: Sequence[int]
    ) -> list[LoggedMessage]:
        """Append logged messages and trim; returns what left the window (oldest first).

        Call inside ``storage.atomic()`` together with the log write, so a message
        is never in the log without being in the window, or the reverse.
        """
        return self.extend_counted(scope, logged, token_counts=token_counts)[0]

    def extend_counted(
        self, scope: Scope, logged: Sequence[LoggedMessage], *, token_counts: Sequence[int],
        held: bool = True,
    ) -> tuple[list[LoggedMessage], int | None]:
        """:meth:`extend`, and the tokens the window holds after it (what :meth:`tokens`
        would answer next, without asking the database again); ``held=False``: the caller
        does not need them (``None`` then, unless a token limit counted them anyway)."""
        self.storage.executemany(
            "INSERT INTO \"window\" (message_seq, user_id, agent_id, session_id, tokens) VALUES (?, ?, ?, ?, ?)",
            [[m.seq, scope.user_id, scope.agent_id, scope.session_id, int(t)]
             for m, t in zip(logged, token_counts, strict=True)],
        )
        return self._trim(scope, max_messages=self.max_messages, max_tokens=self.max_tokens, held=held)

    def _trim(self, scope: Scope, *, max_messages: int, max_tokens: int | None,
              held: bool = True) -> tuple[list[LoggedMessage], int | None]:
        """Trim by the rules of :func:`plan_trim`; returns what left and the tokens still held
        (``None`` when neither ``held`` nor ``max_tokens`` asks for them).

        A window of plain turns (no system message, no tool call or result: what one
        statement says, by the window's count and the conversation's special messages,
        the partial index ``messages_special``, from the window's oldest entry on) is cut at its first user
        message from which the rest fits, found among its oldest entries only; any other
        window, or a cut not among them, goes through :func:`plan_trim` with every entry
        (which decides the same for the plain ones: every message counts, no call is ever
        open, every user message is a cut).
        """
        counted = held or max_tokens is not None
        where = "user_id = ? AND agent_id = ? AND session_id = ?"
        ids = [scope.user_id, scope.agent_id, scope.session_id]
        hint = self.storage.dialect.hint("messages_special")
        count, tokens, special = self.storage.execute(
            f"SELECT COUNT(*), {'CAST(COALESCE(SUM(tokens), 0) AS BIGINT)' if counted else '0'}, "
            f"CASE WHEN EXISTS (SELECT 1 FROM messages {hint} WHERE {where} "
            "AND (role IN ('system', 'tool') OR tool_calls IS NOT NULL) "
            f"AND seq >= (SELECT MIN(message_seq) FROM \"window\" WHERE {where}) "
            "AND seq IN (SELECT message_seq FROM \"window\")) THEN 1 ELSE 0 END "
            f"FROM \"window\" WHERE {where}", [*ids, *ids, *ids]).fetchone()
        count, total = int(count), int(tokens) if counted else None
        if count <= max_messages and (max_tokens is None or int(tokens) <= max_tokens):
            return [], total  # within the limits even counting system messages: nothing can leave
        if not special:
            if max_tokens is None:  # the cut: the first user message from the ``count - max_messages``-th on
                must = max(count - max_messages, 0)
                head = self.log.window_head(scope, must + 2)  # what leaves, read at once
                for cut in range(must, len(head)):
                    if head[cut][2] == "user":
                        self._delete([row[1] for row in head[:cut]])
                        return (self.log.from_head(head[:cut]),
                                None if total is None else total - sum(row[0] for row in head[:cut]))
            held_now = int(tokens)
            rows = self.storage.execute(
                "SELECT w.message_seq, w.tokens, m.role FROM \"window\" w JOIN messages m ON m.seq = w.message_seq AND m.user_id = w.user_id "
                "WHERE w.user_id = ? AND w.agent_id = ? AND w.session_id = ? ORDER BY w.message_seq LIMIT ?",
                [*ids, max(count - max_messages, 0) + _HEAD]).fetchall()
            before = 0  # tokens of the entries before the cut
            for cut, (_, entry_tokens, role) in enumerate(rows):
                if (role == "user" and count - cut <= max_messages
                        and (max_tokens is None or held_now - before <= max_tokens)):
                    left, after = self._drop([row[0] for row in rows[:cut]], held_now - before)
                    return left, after if counted else None
                before += int(entry_tokens)
        left, after = self._trim_planned(scope, max_messages=max_messages, max_tokens=max_tokens)
        return left, after if counted else None

    def _drop(self, seqs: Sequence[int], held: int) -> tuple[list[LoggedMessage], int]:
        """Remove these entries (by message seq) from the window: what left, and ``held``."""
        dropped = [int(seq) for seq in seqs]
        if not dropped:
            return [], held
        self._delete(dropped)
        return self.log.messages_by_seq(dropped), held

    def _delete(self, seqs: Sequence[int]) -> None:
        """Remove these entries (by message seq) from the window."""
        if seqs:
            self.storage.executemany("DELETE FROM \"window\" WHERE message_seq = ?", [[seq] for seq in seqs])

    def _trim_planned(self, scope: Scope, *, max_messages: int,
                      max_tokens: int | None) -> tuple[list[LoggedMessage], int]:
        """:meth:`_trim` by :func:`plan_trim` over every entry of the window."""
        slots = self._slots(scope)
        tokens = [s.tokens for s in slots]
        held = sum(tokens)
        if len(slots) <= max_messages and (max_tokens is None or held <= max_tokens):
            return [], held  # within the limits even counting system messages: nothing can leave
        plan = plan_trim(slots, max_messages=max_messages, max_tokens=max_tokens,
                         token_counts=tokens if max_tokens is not None else None)
        return self._drop([slots[i].seq for i in plan.drop], held - sum(tokens[i] for i in plan.drop))

    def compact(self, scope: Scope, *, threshold: int, target: int) -> list[LoggedMessage]:
        """When the window holds more than ``threshold`` tokens, drop its oldest whole
        interactions down to ``target`` tokens (nothing while tool calls are pending);
        returns what left, oldest first. Call inside ``storage.atomic()``.

        >>> from tiers.storage.backend import Storage, Scope
        >>> from tiers.episodic import EpisodicLog
        >>> from tiers.records.types import Message
        >>> store = Storage(None); log = EpisodicLog(store)
        >>> window, scope = ShortTermWindow(log, max_messages=100), Scope("ada")
        >>> with store.atomic():
        ...     logged = log.append(scope, [Message(role="user", content=c) for c in "abcd"],
        ...                         now=0.0, importances=[0] * 4)
        ...     _ = window.extend(scope, logged, token_counts=[10] * 4)
        ...     [m.message.content for m in window.compact(scope, threshold=35, target=20)]
        ['a', 'b']
        """
        if self.tokens(scope) <= threshold:
            return []
        return self._trim(scope, max_messages=self.max_messages, max_tokens=target)[0]

    def contains(self, scope: Scope, seqs: Sequence[int]) -> set[int]:
        """Which of these log positions are in this conversation's window."""
        if not seqs:
            return set()
        marks = ",".join("?" * len(seqs))
        return {int(r[0]) for r in self.storage.execute(
            f"SELECT message_seq FROM \"window\" WHERE user_id = ? AND agent_id = ? AND session_id = ? "
            f"AND message_seq IN ({marks})", [scope.user_id, scope.agent_id, scope.session_id, *seqs]).fetchall()}

    def recall_candidates(self, query: CandidateQuery) -> list[RecallCandidate]:
        """The logged messages found for recall: those in the asking conversation's window
        are ``short_term`` candidates, the others ``episodic`` (so a message is never
        reported twice); one search, so their scores are normalised together."""
        return self.log.recall_candidates(query, window=self.contains)

    def clear(self, scope: Scope) -> list[LoggedMessage]:
        """Empty this conversation's window; returns what it held."""
        held = self.logged(scope)
        self.storage.execute(
            "DELETE FROM \"window\" WHERE user_id = ? AND agent_id = ? AND session_id = ?",
            [scope.user_id, scope.agent_id, scope.session_id])
        return held
