"""Conversations and their turns as the console shows them: a user's conversations (sessions)
with their sizes and times, a page of one conversation's messages, the facts each message
produced (the facts first promoted from it: one indexed lookup per page), the messages a fact
came from, and the entities in the relations those messages stated.

    >>> from tiers.storage.backend import Storage, Scope
    >>> storage = Storage(None)
    >>> with storage.atomic():
    ...     storage.executemany("INSERT INTO messages (id, user_id, session_id, role, content, created_at) "
    ...                         "VALUES (?, 'ada', ?, 'user', ?, ?)", [["m1", "s1", "I keep bees", 1.0],
    ...                                                                ["m2", "s1", "thanks!", 2.0],
    ...                                                                ["m3", "", "hello", 3.0]])
    ...     _ = storage.execute("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, "
    ...                     "source_message_ids) VALUES ('f1', 'ada', 'I keep bees', 'k', 0.8, 1, 1, '[\\"m1\\"]')")
    >>> [(c.session_id, c.messages) for c in conversations(storage, Scope("ada"))]
    [('', 1), ('s1', 2)]
    >>> [m.id for m in conversation(storage, Scope("ada"), "s1").messages]
    ['m1', 'm2']
    >>> {m: [f.text for f in fs] for m, fs in facts_of_messages(storage, Scope("ada"), ["m1", "m2"]).items()}
    {'m1': ['I keep bees']}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tiers.facts.access import USES_JOIN
from tiers.facts.listing import _columns, row_to_fact
from tiers.records.scope import NO_SCOPE, Scope
from tiers.records.types import Episode, Fact
from tiers.storage.backend import Storage

__all__ = ["Conversation", "ConversationPage", "Related", "conversations", "conversation", "facts_of_messages",
           "messages_by_id", "related_entities", "MAX_PAGE"]

#: The most messages (or conversations) one page holds.
MAX_PAGE = 500


@dataclass(frozen=True)
class Conversation:
    """One session of the user's log: its id ("" for messages outside any session), size and span."""

    session_id: str
    messages: int
    first: float
    last: float


@dataclass(frozen=True)
class ConversationPage:
    """A page of one conversation's messages, oldest first, and how many it holds."""

    messages: list[Episode]
    total: int


@dataclass(frozen=True)
class Related:
    """An entity in a relation a fact's messages stated, with the relation as a sentence."""

    entity_id: str
    name: str
    type: str
    relation: str


def conversations(storage: Storage, scope: Scope, *, limit: int = 50, offset: int = 0) -> list[Conversation]:
    """The user's conversations, the most recently active first."""
    agent_sql, agent = scope.agent_clause()
    rows = storage.execute(
        f"SELECT session_id, COUNT(*), MIN(created_at), MAX(created_at) FROM messages WHERE user_id = ? AND {agent_sql} "
        "GROUP BY session_id ORDER BY MAX(created_at) DESC, session_id LIMIT ? OFFSET ?",
        [scope.user_id, *agent, max(0, min(int(limit), MAX_PAGE)), max(0, int(offset))]).fetchall()
    return [Conversation(row[0] or "", int(row[1]), float(row[2]), float(row[3])) for row in rows]


def conversation(storage: Storage, scope: Scope, session_id: str, *, limit: int = 100,
                 offset: int = 0) -> ConversationPage:
    """A page of the conversation ``session_id`` ("" for the messages outside any session), oldest first."""
    from tiers.episodic import _COLUMNS, _to_episode

    agent_sql, agent = scope.agent_clause()
    where = f"user_id = ? AND {agent_sql} AND session_id = ?"
    params = [scope.user_id, *agent, session_id or NO_SCOPE]
    rows = storage.query(
        f"SELECT {_COLUMNS}, seq IN (SELECT message_seq FROM \"window\" WHERE user_id = ?) AS in_window "
        f"FROM messages WHERE {where} ORDER BY created_at, seq LIMIT ? OFFSET ?",
        [scope.user_id, *params, max(0, min(int(limit), MAX_PAGE)), max(0, int(offset))])
    total = storage.execute(f"SELECT COUNT(*) FROM messages WHERE {where}", params).fetchone()[0]
    return ConversationPage([_to_episode(row, bool(row["in_window"])) for row in rows], int(total))


def messages_by_id(storage: Storage, scope: Scope, ids: Sequence[str]) -> list[Episode]:
    """The user's messages among ``ids`` (at most :data:`MAX_PAGE`), oldest first; others' are not found."""
    from tiers.episodic import _COLUMNS, _to_episode

    wanted = list(dict.fromkeys(ids))[:MAX_PAGE]
    if not wanted:
        return []
    rows = storage.query(
        f"SELECT {_COLUMNS}, seq IN (SELECT message_seq FROM \"window\" WHERE user_id = ?) AS in_window FROM messages "
        f"WHERE user_id = ? AND id IN ({','.join('?' * len(wanted))}) ORDER BY created_at, seq",
        [scope.user_id, scope.user_id, *wanted])
    return [_to_episode(row, bool(row["in_window"])) for row in rows]


def facts_of_messages(storage: Storage, scope: Scope, ids: Sequence[str]) -> dict[str, list[Fact]]:
    """The facts (any status) first promoted from each of the messages ``ids`` (their first source):
    what each turn produced."""
    wanted = list(dict.fromkeys(ids))[:MAX_PAGE]
    if not wanted:
        return {}
    first = storage.dialect.json_first("source_message_ids")
    sources = dict(storage.execute(  # the index on the first source (no join: the plan must use it)
        f"SELECT id, {first} FROM facts {storage.dialect.hint('facts_first_source')} "
        f"WHERE user_id = ? AND {first} IN ({','.join('?' * len(wanted))})", [scope.user_id, *wanted]).fetchall())
    found: dict[str, list[Fact]] = {}
    if not sources:
        return found
    rows = storage.query(f"SELECT {_columns(storage.dialect)} FROM facts {USES_JOIN} WHERE facts.user_id = ? AND "
                         f"id IN ({','.join('?' * len(sources))}) ORDER BY facts.seq", [scope.user_id, *sources])
    for row in rows:
        found.setdefault(sources[row["id"]], []).append(row_to_fact(row))
    return found


def related_entities(storage: Storage, scope: Scope, message_ids: Sequence[str], *, limit: int = 50) -> list[Related]:
    """The entities of the relations the messages ``message_ids`` stated (a fact's entities: its turns')."""
    wanted = list(dict.fromkeys(message_ids))[:MAX_PAGE]
    if not wanted:
        return []
    rows = storage.execute(
        "SELECT s.id, s.name, s.type, o.id, o.name, o.type, t.predicate FROM triples t "
        "JOIN entities s ON s.id = t.subject_id AND s.user_id = t.user_id "
        "JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id "
        f"WHERE t.user_id = ? AND t.source_message_id IN ({','.join('?' * len(wanted))}) ORDER BY t.seq LIMIT ?",
        [scope.user_id, *wanted, int(limit)]).fetchall()
    out: dict[str, Related] = {}
    for sid, sname, stype, oid, oname, otype, predicate in rows:
        sentence = f"{sname} {predicate.replace('_', ' ')} {oname}"
        for entity_id, name, kind in ((sid, sname, stype), (oid, oname, otype)):
            out.setdefault(entity_id, Related(entity_id, name, kind, sentence))
    return list(out.values())
