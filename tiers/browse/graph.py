"""An entity as the console shows it: its card (kind, description, mentions), the relations around
it within one or two hops (at most a bounded number per hop, the newest first, whatever the size
of the graph), the most mentioned entities, and entities found by a piece of their name.

    >>> from tiers.records.types import ExtractedTriple
    >>> from tiers.graph.entities import EntityGraph
    >>> graph = EntityGraph(Storage(None))
    >>> with graph.storage.atomic():
    ...     _ = graph.add_triples(Scope("ada"), [ExtractedTriple(subject="Maria", predicate="lives_in", object="Porto"),
    ...                                          ExtractedTriple(subject="Porto", predicate="in", object="Portugal")],
    ...                           now=0.0)
    >>> card = entity_card(graph.storage, Scope("ada"), "maria")
    >>> card.name, [t.object for t in around(graph.storage, Scope("ada"), card.id, hops=2)]
    ('Maria', ['Porto', 'Portugal'])
    >>> entity_card(graph.storage, Scope("bob"), "Maria") is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from tiers.graph.triples import reach
from tiers.records.scope import Scope
from tiers.records.types import Triple
from tiers.storage.backend import Storage

__all__ = ["EntityCard", "entity_card", "around", "top_entities", "find_entities", "PER_HOP"]

#: The most relations one hop adds (the newest first).
PER_HOP = 150


@dataclass(frozen=True)
class EntityCard:
    """An entity with what its stored card says about it."""

    id: str
    name: str
    type: str
    description: str
    mentions: int
    first_seen: float
    last_seen: float


def entity_card(storage: Storage, scope: Scope, name: str) -> EntityCard | None:
    """The user's entity called ``name`` (any case; the user's own names find the user's node), or None."""
    from tiers.graph.names import norm_name, resolve_key

    agent_sql, agent = scope.agent_clause()
    row = storage.execute(
        f"SELECT id, name, type, COALESCE(description, ''), mention_count, first_seen, last_seen FROM entities "
        f"WHERE user_id = ? AND {agent_sql} AND norm_name = ? ORDER BY seq LIMIT 1",
        [scope.user_id, *agent, resolve_key(storage, scope, norm_name(name))]).fetchone()
    return None if row is None else EntityCard(row[0], row[1], row[2], row[3], int(row[4]), float(row[5]),
                                                float(row[6]))


def around(storage: Storage, scope: Scope, entity_id: str, *, hops: int = 1, per_hop: int = PER_HOP) -> list[Triple]:
    """The relations within ``hops`` (1 or 2) of the entity, at most ``per_hop`` more per hop."""
    return reach(storage, scope, [entity_id], depth=max(1, min(int(hops), 2)), per_hop=per_hop)


def top_entities(storage: Storage, scope: Scope, *, limit: int = 10) -> list[EntityCard]:
    """The user's most mentioned entities."""
    agent_sql, agent = scope.agent_clause()
    rows = storage.execute(
        f"SELECT id, name, type, COALESCE(description, ''), mention_count, first_seen, last_seen FROM entities "
        f"WHERE user_id = ? AND {agent_sql} ORDER BY mention_count DESC, seq LIMIT ?",
        [scope.user_id, *agent, max(1, min(int(limit), 100))]).fetchall()
    return [EntityCard(r[0], r[1], r[2], r[3], int(r[4]), float(r[5]), float(r[6])) for r in rows]


def find_entities(storage: Storage, scope: Scope, text: str, *, limit: int = 20) -> list[EntityCard]:
    """The user's entities whose name holds ``text`` (any case), most mentioned first."""
    agent_sql, agent = scope.agent_clause()
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = storage.execute(
        f"SELECT id, name, type, COALESCE(description, ''), mention_count, first_seen, last_seen FROM entities "
        f"WHERE user_id = ? AND {agent_sql} AND name {storage.dialect.like_any_case} ? ESCAPE '\\' "
        "ORDER BY mention_count DESC, seq LIMIT ?",
        [scope.user_id, *agent, f"%{escaped}%", max(1, min(int(limit), 100))]).fetchall()
    return [EntityCard(r[0], r[1], r[2], r[3], int(r[4]), float(r[5]), float(r[6])) for r in rows]
