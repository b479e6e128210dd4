"""What forgetting an item would take with it, shown before anyone confirms: a fact (all its
versions, and the relations stored with it), an entity (its relations), a conversation (its
messages, and the facts and relations only they gave rise to). Read-only: the ids returned are
what ``forget(ids=...)`` is then called with, and it deletes what derives from them itself.

    >>> from tiers.storage.backend import Storage, Scope
    >>> storage = Storage(None)
    >>> with storage.atomic():
    ...     storage.executemany("INSERT INTO facts (id, user_id, text, norm_key, importance, created_at, updated_at, "
    ...                         "status, superseded_by) VALUES (?, 'ada', ?, ?, 0.5, ?, ?, ?, ?)",
    ...                         [["f1", "I live in Lisbon", "k1", 1, 1, "superseded", "f2"],
    ...                          ["f2", "I live in Porto", "k2", 2, 2, "active", None]])
    >>> preview = preview_fact(storage, Scope("ada"), "f2")
    >>> preview.ids, [text for _, text in preview.items]
    (['f1', 'f2'], ['I live in Lisbon', 'I live in Porto'])
    >>> preview_fact(storage, Scope("bob"), "f2") is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tiers.facts.listing import fact_versions
from tiers.maintenance.deletion import derived_from_facts, derived_from_messages
from tiers.records.scope import NO_SCOPE, Scope
from tiers.storage.backend import Storage

__all__ = ["ForgetPreview", "preview_fact", "preview_entity", "preview_session", "SHOWN"]

#: How many of the items that go a preview lists (it counts them all).
SHOWN = 20


@dataclass(frozen=True)
class ForgetPreview:
    """``ids`` to forget; ``items``: (kind, text) of what goes, the first :data:`SHOWN`;
    ``counts``: how many of each kind go."""

    ids: list[str]
    items: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


def _relations(storage: Storage, scope: Scope, triple_ids: list[str]) -> list[str]:
    if not triple_ids:
        return []
    shown = triple_ids[:SHOWN]
    rows = storage.execute(
        "SELECT s.name, t.predicate, o.name FROM triples t JOIN entities s ON s.id = t.subject_id AND s.user_id = t.user_id "
        "JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id "
        f"WHERE t.user_id = ? AND t.id IN ({','.join('?' * len(shown))}) ORDER BY t.seq", [scope.user_id, *shown]).fetchall()
    return [f"{s} {p.replace('_', ' ')} {o}" for s, p, o in rows]


def preview_fact(storage: Storage, scope: Scope, fact_id: str) -> ForgetPreview | None:
    """Forgetting a fact forgets every version of it (an old version holds the same knowledge), and
    the relations stored with them; None when the user has no fact ``fact_id``."""
    versions = fact_versions(storage, scope, fact_id)
    if not versions:
        return None
    ids = [f.id for f in versions]
    rows = storage.query(f"SELECT text, created_at, source_message_ids FROM facts WHERE user_id = ? AND id IN "
                         f"({','.join('?' * len(ids))})", [scope.user_id, *ids])  # as stored: exact times
    triples = derived_from_facts(storage, scope.user_id, rows)["triples"]
    items = [("fact", f.text) for f in versions][:SHOWN]
    items += [("relation", text) for text in _relations(storage, scope, triples)][:SHOWN - len(items)]
    return ForgetPreview(ids, items, {"facts": len(versions), "relations": len(triples)})


def preview_entity(storage: Storage, scope: Scope, entity_id: str) -> ForgetPreview | None:
    """Forgetting an entity forgets its relations; None when the user has no entity ``entity_id``."""
    row = storage.execute("SELECT name FROM entities WHERE user_id = ? AND id = ?", [scope.user_id, entity_id]).fetchone()
    if row is None:
        return None
    triples = [r[0] for r in storage.execute(
        "SELECT id FROM triples WHERE user_id = ? AND (subject_id = ? OR object_id = ?) ORDER BY seq",
        [scope.user_id, entity_id, entity_id]).fetchall()]
    items = [("entity", row[0])] + [("relation", text) for text in _relations(storage, scope, triples)]
    return ForgetPreview([entity_id], items[:SHOWN], {"entities": 1, "relations": len(triples)})


def preview_session(storage: Storage, scope: Scope, session_id: str) -> ForgetPreview | None:
    """Forgetting a conversation forgets its messages, and the facts and relations only they gave rise
    to; None when the user has no message in ``session_id`` ("": the messages outside any session)."""
    agent_sql, agent = scope.agent_clause()
    messages = storage.execute(
        f"SELECT id, role, content FROM messages WHERE user_id = ? AND {agent_sql} AND session_id = ? ORDER BY seq",
        [scope.user_id, *agent, session_id or NO_SCOPE]).fetchall()
    if not messages:
        return None
    derived = derived_from_messages(storage, scope.user_id, {m[0] for m in messages})
    items = [("message", f"{role}: {content or ''}") for _, role, content in messages[:SHOWN]]
    if len(items) < SHOWN and derived["facts"]:
        shown = derived["facts"][:SHOWN - len(items)]
        items += [("fact", r[0]) for r in storage.execute(
            f"SELECT text FROM facts WHERE user_id = ? AND id IN ({','.join('?' * len(shown))}) ORDER BY seq",
            [scope.user_id, *shown]).fetchall()]
    return ForgetPreview([m[0] for m in messages], items[:SHOWN],
                         {"messages": len(messages), "facts": len(derived["facts"]),
                          "relations": len(derived["triples"])})


