"""The episodic log: every message verbatim, with its time, speaker and metadata.

The log is the record the other tiers are derived from: the short-term window
points into it and promotion reads from it. Retention by age prunes only what
has left the window and been promoted, so nothing is lost before it is used.

    >>> from tiers.storage.backend import Storage, Scope
    >>> from tiers.records.types import Message
    >>> log = EpisodicLog(Storage(None))
    >>> rows = log.append(Scope("ada"), [Message(role="user", content="I adopted a cat named Miso")],
    ...                   now=0.0, importances=[0.8])
    >>> [m.key for m in log.index.lexical.search("ada", "cat")] == [rows[0].id]
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tiers.candidates import CandidateQuery, MessageDetail, RecallCandidate
from tiers.indexes.documents import Candidate, DocumentIndex, SearchMode
from tiers.indexes.neighbors import ConversationTurn, neighbor_documents, split_parts
from tiers.records.types import Episode, Message, trusted_record, utc_from_timestamp
from tiers.storage.backend import NO_SCOPE, Scope, Storage, dumps, loads, new_id, recall_filter

__all__ = ["EpisodicLog", "LoggedMessage", "index_text"]

_COLUMNS = (
    "seq, id, user_id, agent_id, session_id, role, content, name, tool_calls, tool_call_id, "
    "images, reasoning_details, metadata, created_at, importance, promoted"
)

_WINDOW_COLUMNS = ", ".join(f"m.{c.strip()}" for c in _COLUMNS.split(","))


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    """A message as stored: its log position (``seq``) and id."""

    seq: int
    id: str
    message: Message


def index_text(name: str | None, content: str | None) -> str:
    """What the lexical index sees of a message: the speaker's name and the text.

    >>> index_text("Caroline", "I went to a support group")
    'Caroline: I went to a support group'
    """
    content = content or ""
    return f"{name}: {content}" if name else content


def _to_message(row: dict[str, Any]) -> Message:
    return trusted_record(Message,  # stored rows were validated on the way in
        role=row["role"],
        content=row["content"],
        name=row["name"],
        tool_calls=loads(row["tool_calls"]),
        tool_call_id=row["tool_call_id"],
        images=loads(row["images"]),
        reasoning_details=loads(row["reasoning_details"]),
        metadata=loads(row["metadata"], {}),
        id=row["id"],
        created_at=utc_from_timestamp(row["created_at"]),
        user_id=row["user_id"],
        agent_id=row["agent_id"] or None,
        session_id=row["session_id"] or None,
    )


def _logged(row: Sequence[Any]) -> LoggedMessage:
    """A logged message of a row read with :data:`_COLUMNS`, in their order (what
    :func:`_to_message` makes of the same row as a dict, without building the dict)."""
    (seq, message_id, user_id, agent_id, session_id, role, content, name, tool_calls, tool_call_id,
     images, reasoning_details, metadata, created_at) = row[:14]
    return LoggedMessage(seq, message_id, trusted_record(Message,  # stored rows were validated on the way in
        role=role, content=content, name=name, tool_calls=loads(tool_calls), tool_call_id=tool_call_id,
        images=loads(images), reasoning_details=loads(reasoning_details), metadata=loads(metadata, {}),
        id=message_id, created_at=utc_from_timestamp(created_at), user_id=user_id, agent_id=agent_id or None,
        session_id=session_id or None))


def _to_episode(row: dict[str, Any], in_window: bool) -> Episode:
    message = _to_message(row)
    return trusted_record(Episode,
        id=row["id"], role=row["role"], content=row["content"], name=row["name"],
        created_at=message.created_at, metadata=message.metadata, tool_calls=message.tool_calls,
        tool_call_id=row["tool_call_id"], images=message.images,
        reasoning_details=message.reasoning_details, importance=row["importance"],
        in_window=in_window, promoted=bool(row["promoted"]), user_id=row["user_id"],
        agent_id=message.agent_id, session_id=message.session_id,
    )


def _message_candidate(found: Candidate, in_window: set[int]) -> RecallCandidate:
    row = found.row
    # The time a Message record holds (microseconds): what recall has always scored by.
    created = utc_from_timestamp(row["created_at"])
    content: str | None = row["content"]
    return RecallCandidate(
        id=row["id"], tier="short_term" if row["seq"] in in_window else "episodic", text=content or "",
        lexical=found.lexical, dense=found.dense, importance=float(row["importance"]),
        created_at=created.timestamp() if created else None, source=row["id"], superseded=False,
        metadata_json=row["metadata"],
        detail=MessageDetail(role=row["role"], speaker=row["name"], session_id=row["session_id"] or None,
                             own_text=index_text(row["name"], content)))


def _logged_time(message: Message) -> float:
    created = message.created_at
    assert created is not None  # the log gives every message its time
    return created.timestamp()


_TURN_COLUMNS = "id, agent_id, session_id, created_at, name, content"
_RECALL_COLUMNS = "seq, id, session_id, role, content, name, metadata, created_at, importance"  # a candidate's


def _turn(row: Sequence[Any]) -> ConversationTurn:
    return ConversationTurn(row[0], (row[1], row[2]), row[3], index_text(row[4], row[5]))


class EpisodicLog:
    """The ``messages`` table and its per-user index; a message is searched by its
    text with ``neighbor_turns`` turns around it (see :mod:`tiers.indexes.neighbors`)."""

    def __init__(self, storage: Storage, *, k1: float = 1.2, b: float = 0.75, neighbor_turns: int = 2,
                 neighbor_gap_seconds: float = 7200.0) -> None:
        self.storage = storage
        self.neighbor_turns = neighbor_turns
        self.neighbor_gap = neighbor_gap_seconds
        self.index = DocumentIndex(storage, self._load_documents, kind="messages", k1=k1, b=b,
                                   parts=split_parts)

    def _load_documents(self, user_id: str) -> Iterable[tuple[str, str]]:
        rows = self.storage.execute(
            f"SELECT {_TURN_COLUMNS} FROM messages WHERE user_id = ? AND content IS NOT NULL "
            "AND content != '' ORDER BY seq", [user_id]
        ).fetchall()
        return neighbor_documents([_turn(row) for row in rows], width=self.neighbor_turns,
                                  max_gap=self.neighbor_gap)

    def _documents_after_append(self, scope: Scope, logged: Sequence[LoggedMessage]) -> list[tuple[str, str]]:
        """Documents of the new messages and of the earlier turns that gained them as neighbours."""
        new = [m for m in logged if m.message.content]
        if not new:
            return []
        width = self.neighbor_turns
        earlier: list[ConversationTurn] = []
        if width:
            rows = self.storage.execute(
                f"SELECT {_TURN_COLUMNS} FROM messages WHERE user_id = ? AND agent_id = ? AND session_id = ? "
                "AND content IS NOT NULL AND content != '' AND seq < ? ORDER BY seq DESC LIMIT ?",
                [scope.user_id, scope.agent_id, scope.session_id, logged[0].seq, 2 * width]).fetchall()
            earlier = [_turn(row) for row in reversed(rows)]
        conversation = (scope.agent_id, scope.session_id)
        turns = earlier + [ConversationTurn(m.id, conversation, _logged_time(m.message),
                                            index_text(m.message.name, m.message.content)) for m in new]
        targets = {t.id for t in earlier[-width:]} | {m.id for m in new} if width else {m.id for m in new}
        return neighbor_documents(turns, width=width, max_gap=self.neighbor_gap, targets=targets)

    def append(
        self, scope: Scope, messages: Sequence[Message], *, now: float, importances: Sequence[float],
        promoted: bool = False, rows: list[tuple[Any, ...]] | None = None,
    ) -> list[LoggedMessage]:
        """Write messages to the log (call inside ``storage.atomic()``); returns them with ids.
        ``promoted``: they go through promotion in this same transaction (logged marked so).
        ``rows``: receives each stored row as a read gives it (:meth:`as_read` makes the message
        a read of the log would)."""
        logged: list[LoggedMessage] = []
        for message, importance in zip(messages, importances, strict=True):
            message_id = new_id("msg")
            created = message.created_at.timestamp() if message.created_at else now
            values = [message_id, scope.user_id, scope.agent_id, scope.session_id, message.role, message.content,
                      message.name, _json_or_none(message.tool_calls), message.tool_call_id,
                      _json_or_none(message.images), _json_or_none(message.reasoning_details),
                      dumps(message.metadata) if message.metadata else "{}", created, float(importance), int(promoted)]
            # One statement a message: SQLite's multi-row VALUES is slower for two rows (29 us against
            # 2 x 11 us), with RETURNING seq much slower (65 us).
            seq = int(self.storage.insert(
                "INSERT INTO messages (id, user_id, agent_id, session_id, role, content, name, tool_calls, "
                "tool_call_id, images, reasoning_details, metadata, created_at, importance, promoted) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values))
            if rows is not None:
                rows.append((seq, *values))
            stored = message.model_copy(update={
                "id": message_id, "created_at": utc_from_timestamp(created), "user_id": scope.user_id,
                "agent_id": scope.agent_id or None, "session_id": scope.session_id or None,
            })
            logged.append(LoggedMessage(seq, message_id, stored))
        self.storage.rows_added("messages", len(logged))
        self.index.add(scope.user_id, self._documents_after_append(scope, logged))
        return logged

    def search(self, scope: Scope, query: str, want: int, *, since: float | None = None,
               where: dict[str, Any] | None = None, vector: Any = None,
               mode: SearchMode = "lexical") -> list[tuple[Candidate, LoggedMessage]]:
        """Candidates among the user's messages that pass the filters."""
        sql, params = recall_filter(scope, where=where, since=since, time_column="created_at",
                                    dialect=self.storage.dialect)
        found = self.index.search(scope.user_id, query, want, table="messages", columns=_COLUMNS, filter_sql=sql,
                                  filter_params=params, vector=vector, mode=mode)
        return [(c, LoggedMessage(c.row["seq"], c.row["id"], _to_message(c.row))) for c in found]

    def recall_candidates(self, query: CandidateQuery, *,
                          window: Callable[[Scope, Sequence[int]], set[int]]) -> list[RecallCandidate]:
        """Messages found for recall as typed candidates (see :mod:`tiers.candidates`):
        those at the log positions ``window`` reports are ``short_term``, the others
        ``episodic`` (see :meth:`tiers.short_term.ShortTermWindow.recall_candidates`); ``as_of``:
        only messages logged by then."""
        sql, params = recall_filter(query.scope, where=query.where, since=query.since, time_column="created_at",
                                    until=query.as_of, dialect=self.storage.dialect)
        found = self.index.search(query.scope.user_id, query.text, query.want, table="messages", columns=_RECALL_COLUMNS,
                                  filter_sql=sql, filter_params=params, vector=query.vector, mode=query.mode)
        in_window = window(query.scope, [c.row["seq"] for c in found])
        return [_message_candidate(c, in_window) for c in found]

    def messages_by_seq(self, seqs: Sequence[int]) -> list[LoggedMessage]:
        """Logged messages by position, in log order."""
        if not seqs:
            return []
        marks = ",".join("?" * len(seqs))
        rows = self.storage.query(f"SELECT {_COLUMNS} FROM messages WHERE seq IN ({marks}) ORDER BY seq",
                                  list(seqs))
        return [LoggedMessage(row["seq"], row["id"], _to_message(row)) for row in rows]

    def names_of(self, user_id: str, ids: Sequence[str]) -> dict[str, str]:
        """The speaker's name of each of these messages of the user that has one (``{id: name}``)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        rows = self.storage.execute(f"SELECT id, name FROM messages WHERE id IN ({marks}) AND user_id = ?",
                                    [*wanted, user_id]).fetchall()
        return {row[0]: row[1] for row in rows if row[1]}

    def window_head(self, scope: Scope, limit: int) -> list[tuple[Any, ...]]:
        """The oldest ``limit`` entries of this conversation's window, oldest first, as rows:
        ``(tokens, seq, role, *the message's columns)`` (what a window trim reads, once;
        :meth:`from_head` makes messages of them)."""
        return self.storage.execute(
            f"SELECT w.tokens, m.seq, m.role, {_WINDOW_COLUMNS} FROM \"window\" w "
            "JOIN messages m ON m.seq = w.message_seq AND m.user_id = w.user_id WHERE w.user_id = ? AND w.agent_id = ? AND w.session_id = ? "
            "ORDER BY w.message_seq LIMIT ?", [scope.user_id, scope.agent_id, scope.session_id, limit]).fetchall()

    @staticmethod
    def as_read(row: Sequence[Any]) -> Message:
        """The message of a row of :data:`_COLUMNS` as a read of the log makes it (rows of :meth:`append`)."""
        return _logged(row).message

    @staticmethod
    def from_head(rows: Iterable[Sequence[Any]]) -> list[LoggedMessage]:
        """The logged messages of rows of :meth:`window_head`."""
        return [_logged(row[3:]) for row in rows]

    def in_window(self, scope: Scope, *, last: int | None = None) -> list[LoggedMessage]:
        """The messages of this conversation's window (table ``window``), oldest first; only
        the newest ``last`` when given. One statement: the window's rows joined to the log."""
        sql = (f"SELECT {_WINDOW_COLUMNS} FROM \"window\" w JOIN messages m ON m.seq = w.message_seq AND m.user_id = w.user_id "
               "WHERE w.user_id = ? AND w.agent_id = ? AND w.session_id = ? ORDER BY w.message_seq")
        params: list[Any] = [scope.user_id, scope.agent_id, scope.session_id]
        if last is None:
            rows = self.storage.execute(sql, params).fetchall()
        else:  # the newest ``last`` entries only (the index serves them in reverse)
            rows = self.storage.execute(sql + " DESC LIMIT ?", [*params, last]).fetchall()[::-1]
        return [_logged(row) for row in rows]

    def due_for_promotion(self, scope: Scope) -> list[LoggedMessage]:
        """Messages of this user/agent/session that left the window and were not promoted yet.

        The conversation is read from the user's oldest unpromoted message on (found in
        ``messages_due``): nothing at all when every message went through promotion, as it
        does when messages are extracted as they are written, and never more than the whole
        conversation (which is what was read on every write before)."""
        hint = self.storage.dialect.hint
        rows = self.storage.query(
            f"SELECT {_COLUMNS} FROM messages {hint('messages_scope')} "
            "WHERE user_id = ? AND agent_id = ? AND session_id = ? "
            f"AND seq >= (SELECT MIN(seq) FROM messages {hint('messages_due')} WHERE user_id = ? AND promoted = 0) "
            "AND promoted = 0 AND seq NOT IN (SELECT message_seq FROM \"window\") ORDER BY seq",
            [scope.user_id, scope.agent_id, scope.session_id, scope.user_id],
        )
        return [LoggedMessage(row["seq"], row["id"], _to_message(row)) for row in rows]

    def mark_promoted(self, seqs: Sequence[int]) -> None:
        """Record that these messages went through promotion (idempotence across restarts)."""
        if seqs:
            self.storage.executemany("UPDATE messages SET promoted = 1 WHERE seq = ?", [[s] for s in seqs])

    def prune(self, user_id: str, *, older_than: float) -> int:
        """Delete log entries older than ``older_than`` (a timestamp) that are out of the
        window and already promoted. Returns how many were deleted."""
        ids = [row[0] for row in self.storage.execute(
            "SELECT id FROM messages WHERE user_id = ? AND created_at < ? AND promoted = 1 "
            "AND seq NOT IN (SELECT message_seq FROM \"window\")", [user_id, older_than]).fetchall()]
        if ids:
            self.storage.executemany("DELETE FROM messages WHERE id = ?", [[i] for i in ids])
            self.index.remove(user_id, ids)
        return len(ids)

    def list(
        self,
        scope: Scope,
        *,
        since: float | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> list[Episode]:
        """The user's log in time order (optionally since a time, for one session, the last ``limit``)."""
        agent_sql, agent_params = scope.agent_clause()
        sql = (f"SELECT {_COLUMNS}, seq IN (SELECT message_seq FROM \"window\") AS in_window FROM messages "
               f"WHERE user_id = ? AND {agent_sql}")
        params: list[Any] = [scope.user_id, *agent_params]
        if since is not None:
            sql += " AND created_at >= ?"
            params.append(since)
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id if session_id else NO_SCOPE)
        sql += " ORDER BY created_at DESC, seq DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        rows = self.storage.query(sql, params)
        return [_to_episode(row, bool(row["in_window"])) for row in reversed(rows)]

    def delete_scope(self, scope: Scope) -> int:
        """Delete the user's log (only that agent's own messages when the scope has an agent)."""
        agent_sql, agent_params = ("agent_id = ?", [scope.agent_id]) if scope.agent_id else ("TRUE", [])
        cursor = self.storage.execute(
            f"DELETE FROM messages WHERE user_id = ? AND {agent_sql}", [scope.user_id, *agent_params])
        self.index.reset(scope.user_id)
        return cursor.rowcount


def _json_or_none(value: Any) -> str | None:
    return None if value is None else dumps(value)
