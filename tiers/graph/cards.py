"""What an entity reads as, derived from the graph: its record from a stored row, the
relations it takes part in as readable lines, its description (what recall shows) and
its index text (what the entity index searches).

    >>> from tiers.records.types import utc_from_timestamp as t
    >>> maria = Entity(id="e", name="Maria", type="person", first_seen=t(0), last_seen=t(0))
    >>> relations = [("user", "has sister", "Maria", False), ("Maria", "lives in", "Lisbon", True)]
    >>> describe(maria, relations)
    'Maria (person): user has sister Maria; Maria lives in Lisbon'
    >>> index_text(maria, relations, selves={"user"})
    'Maria person has sister lives in Lisbon'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tiers.records.types import Entity, utc_from_timestamp
from tiers.storage.backend import Storage, loads

__all__ = ["ENTITY_COLUMNS", "to_entity", "relations", "describe", "index_text", "description"]

#: The columns of ``entities`` that :func:`to_entity` and recall's candidates read.
ENTITY_COLUMNS = ("id, user_id, agent_id, name, norm_name, type, attributes, mention_count, "
                  "first_seen, last_seen, metadata, description")
_MAX_RELATIONS_IN_DOC = 40


def to_entity(row: dict[str, Any]) -> Entity:
    """The record of a stored row (its :data:`ENTITY_COLUMNS`)."""
    return Entity.model_construct(  # stored rows were validated on the way in
        id=row["id"], name=row["name"], type=row["type"], attributes=loads(row["attributes"], {}),
        mention_count=row["mention_count"], first_seen=utc_from_timestamp(row["first_seen"]),
        last_seen=utc_from_timestamp(row["last_seen"]), metadata=loads(row["metadata"], {}),
        user_id=row["user_id"], agent_id=row["agent_id"] or None,
    )


def relations(storage: Storage, entity_ids: Sequence[str], *,
              as_of: float | None = None) -> dict[str, list[tuple[str, str, str, bool]]]:
    """Relations per entity id, both directions: ``(subject, predicate, object, is_subject)``;
    an ended relation's predicate reads "formerly ..." (``as_of``: the relations stated
    by then, ended by then)."""
    out: dict[str, list[tuple[str, str, str, bool]]] = {}
    until, bound = ("", []) if as_of is None else (" AND t.created_at <= ?", [as_of])
    for entity_id in entity_ids:
        # The first relations of each side, oldest first: bounded work for popular entities.
        rows = storage.execute(
            f"SELECT s.name, t.predicate, o.name, 1, t.valid_to FROM triples t {storage.dialect.hint('triples_subject')} "
            "JOIN entities s ON s.id = t.subject_id AND s.user_id = t.user_id JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id "
            f"WHERE t.subject_id = ?{until} ORDER BY t.seq LIMIT ?",
            [entity_id, *bound, _MAX_RELATIONS_IN_DOC]).fetchall()
        rows += storage.execute(
            f"SELECT s.name, t.predicate, o.name, 0, t.valid_to FROM triples t {storage.dialect.hint('triples_object')} "
            "JOIN entities s ON s.id = t.subject_id AND s.user_id = t.user_id JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id "
            f"WHERE t.object_id = ?{until} ORDER BY t.seq LIMIT ?",
            [entity_id, *bound, _MAX_RELATIONS_IN_DOC]).fetchall()
        out[entity_id] = [
            (subject, ("formerly " if ended is not None and (as_of is None or ended <= as_of) else "")
             + predicate.replace("_", " "), obj, bool(is_subject))
            for subject, predicate, obj, is_subject, ended in rows[:_MAX_RELATIONS_IN_DOC]]
    return out


def _attributes(attributes: dict[str, Any]) -> list[str]:
    """Attributes as ``key: value``; the other names an entity goes by (``aliases``) as ``also: ...``."""
    return [f"also: {', '.join(map(str, v))}" if k == "aliases" and isinstance(v, list) else f"{k}: {v}"
            for k, v in sorted(attributes.items())]


def describe(entity: Entity, relations: Sequence[tuple[str, str, str, bool]]) -> str:
    """One readable line for an entity: name, type, attributes (other names: ``also``), relations.

    >>> from tiers.records.types import utc_from_timestamp as t
    >>> describe(Entity(id="e", name="Maria", type="person", attributes={"relation": "sister"},
    ...                 first_seen=t(0), last_seen=t(0)), [("Maria", "lives in", "Lisbon", True)])
    'Maria (person; relation: sister): Maria lives in Lisbon'
    >>> describe(Entity(id="e", name="Ada", type="person", attributes={"aliases": ["user"]},
    ...                 first_seen=t(0), last_seen=t(0)), [("Ada", "lives in", "Berlin", True)])
    'Ada (person; also: user): Ada lives in Berlin'
    """
    details = [entity.type, *_attributes(entity.attributes)]
    text = f"{entity.name} ({'; '.join(details)})"
    lines = list(dict.fromkeys(f"{s} {p} {o}" for s, p, o, _ in relations))
    return f"{text}: {'; '.join(lines)}" if lines else text


def index_text(entity: Entity, relations: Sequence[tuple[str, str, str, bool]], *,
               selves: frozenset[str] | set[str] = frozenset()) -> str:
    """What the lexical index sees of an entity: name, type, attributes, and its
    relations without repeating its own name (so a fact stating the same thing is
    not outranked by the entity for sheer repetition).

    >>> from tiers.records.types import utc_from_timestamp as t
    >>> index_text(Entity(id="e", name="Maria", type="person", first_seen=t(0), last_seen=t(0)),
    ...            [("Maria", "lives in", "Lisbon", True)])
    'Maria person lives in Lisbon'
    """
    parts = [entity.name, entity.type, *(" ".join(str(a) for a in v if str(a) != "user") if k == "aliases"
                                         and isinstance(v, list) else f"{k} {v}"
                                         for k, v in sorted(entity.attributes.items()))]
    for subject, predicate, obj, is_subject in relations:
        other = obj if is_subject else subject
        named = "" if other.casefold() in selves else other
        parts.append(f"{predicate} {named}".strip() if is_subject else f"{named} {predicate}".strip())
    return " ".join(dict.fromkeys(parts))


def description(row: dict[str, Any]) -> str:
    """A stored row's description (kept up to date by ``EntityGraph.refresh``), or the
    entity's own line without relations when it has none stored."""
    stored: str | None = row["description"]
    return stored or describe(to_entity(row), [])
