"""The graph's relations read back as :class:`~tiers.records.types.Triple` records: a user's,
those touching one entity, and an entity's neighbourhood within some hops (either direction).
Entities are named by the key they are stored under (``norm_name``).

    >>> from tiers.graph.entities import EntityGraph
    >>> from tiers.storage.backend import Storage, Scope
    >>> from tiers.records.types import ExtractedTriple
    >>> graph = EntityGraph(Storage(None))
    >>> with graph.storage.atomic():
    ...     _ = graph.add_triples(Scope("ada"), [ExtractedTriple(subject="user", predicate="has_dog", object="Biscuit"),
    ...                                          ExtractedTriple(subject="Biscuit", predicate="likes", object="walks")],
    ...                           now=0.0)
    >>> [t.as_text() for t in triples_of(graph.storage, Scope("ada"), key="biscuit")]
    ['user has dog Biscuit', 'Biscuit likes walks']
    >>> [t.as_text() for t in neighborhood(graph.storage, Scope("ada"), "walks", depth=1)]
    ['Biscuit likes walks']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tiers.graph.names import resolve_key
from tiers.records.types import Triple, utc_from_timestamp
from tiers.storage.backend import Scope, Storage, loads

__all__ = ["triples_of", "neighborhood", "reach"]


def _triple_rows(storage: Storage, sql: str, params: Sequence[Any]) -> list[Triple]:
    rows = storage.query(
        "SELECT t.id, s.name AS subject, t.predicate, o.name AS object, t.confidence, t.created_at, "
        "t.source_message_id, t.metadata, t.user_id, t.agent_id, t.valid_to FROM triples t "
        "JOIN entities s ON s.id = t.subject_id AND s.user_id = t.user_id JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id "
        f"WHERE {sql} ORDER BY t.seq", params)
    return [Triple.model_construct(  # stored rows were validated on the way in
        id=r["id"], subject=r["subject"], predicate=r["predicate"], object=r["object"],
        confidence=r["confidence"], created_at=utc_from_timestamp(r["created_at"]),
        source_message_id=r["source_message_id"], metadata=loads(r["metadata"], {}),
        valid_to=utc_from_timestamp(r["valid_to"]), user_id=r["user_id"], agent_id=r["agent_id"] or None)
        for r in rows]


def triples_of(storage: Storage, scope: Scope, *, key: str | None = None) -> list[Triple]:
    """The user's triples, optionally only those touching the entity stored under ``key``."""
    agent_sql, params = scope.agent_clause("t.agent_id")
    sql = f"t.user_id = ? AND {agent_sql}"
    params = [scope.user_id, *params]
    if key is not None:
        key = resolve_key(storage, scope, key)  # a name of the user's: the user's node
        sql += " AND (s.norm_name = ? OR o.norm_name = ?)"
        params += [key, key]
    return _triple_rows(storage, sql, params)


def neighborhood(storage: Storage, scope: Scope, key: str, *, depth: int = 1) -> list[Triple]:
    """Triples reachable from the entity stored under ``key`` within ``depth`` hops (either direction)."""
    agent_sql, agent_params = scope.agent_clause()
    key = resolve_key(storage, scope, key)
    start = storage.execute(
        f"SELECT id FROM entities WHERE user_id = ? AND {agent_sql} AND norm_name = ?",
        [scope.user_id, *agent_params, key]).fetchall()
    return reach(storage, scope, [row[0] for row in start], depth=depth)


def reach(storage: Storage, scope: Scope, entity_ids: Sequence[str], *, depth: int,
          per_hop: int | None = None) -> list[Triple]:
    """The user's triples within ``depth`` hops of the entities ``entity_ids`` (either direction),
    breadth first; with ``per_hop``, at most that many more per hop, the newest first."""
    frontier, seen_entities = set(entity_ids), set(entity_ids)
    seen: dict[str, None] = {}
    limit, params = ("", []) if per_hop is None else (" ORDER BY seq DESC LIMIT ?", [int(per_hop)])
    for _ in range(max(0, depth)):
        if not frontier:
            break
        marks = ",".join("?" * len(frontier))
        rows = storage.execute(
            f"SELECT id, subject_id, object_id, seq FROM triples WHERE subject_id IN ({marks}) AND user_id = ? "
            f"UNION SELECT id, subject_id, object_id, seq FROM triples WHERE object_id IN ({marks}) AND user_id = ?"
            f"{limit}", [*frontier, scope.user_id, *frontier, scope.user_id, *params]).fetchall()
        frontier = set()
        for triple_id, subject_id, object_id, _seq in rows:
            seen[triple_id] = None
            for endpoint in (subject_id, object_id):
                if endpoint not in seen_entities:
                    seen_entities.add(endpoint)
                    frontier.add(endpoint)
    if not seen:
        return []
    return _triple_rows(storage, f"t.user_id = ? AND t.id IN ({','.join('?' * len(seen))})", [scope.user_id, *seen])
