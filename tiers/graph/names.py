"""How entities are named: the key an entity is stored under, and the user's node.

The speaker is one node, stored under the key :data:`USER_ENTITY` (``"user"``, what extractors
call the speaker). Once the user says their name ("I'm Ada"), the node is named so: its ``name``
is the current name, and its ``aliases`` attribute keeps the others it went by (``"user"``
first, then former names, oldest first). A name the user goes by resolves to the node, in writes
("Ada's sister") and reads (``graph Ada``); the key stays ``"user"``, so every lookup of the
speaker keeps working.

    >>> alias_keys("Addy", {"aliases": ["user", "Ada"]}) == {"addy", "user", "ada"}
    True
"""

from __future__ import annotations

import re
from typing import Any

from tiers.records.types import Entity
from tiers.storage.backend import Scope, Storage, loads

__all__ = ["USER_ENTITY", "norm_name", "alias_keys", "is_user_node", "resolve_key", "own_attributes"]

USER_ENTITY = "user"


def norm_name(name: str) -> str:
    """The key an entity is stored under: case-folded, inner whitespace collapsed.

    >>> norm_name("  New   York ")
    'new york'
    """
    return re.sub(r"\s+", " ", name.strip()).casefold()


def aliases_of(attributes: dict[str, Any]) -> list[str]:
    """The other names an entity goes by (its ``aliases`` attribute)."""
    aliases = attributes.get("aliases")
    return [str(a) for a in aliases] if isinstance(aliases, list) else []


def alias_keys(name: str, attributes: dict[str, Any]) -> set[str]:
    """The keys of every name an entity goes by: its name and its aliases."""
    return {norm_name(name), *(norm_name(a) for a in aliases_of(attributes))} - {""}


def is_user_node(entity: Entity) -> bool:
    """Whether ``entity`` is the user's node (named or not).

    >>> from tiers.records.types import utc_from_timestamp as t
    >>> is_user_node(Entity(id="e", name="Ada", type="person", attributes={"aliases": ["user"]},
    ...                     first_seen=t(0), last_seen=t(0)))
    True
    """
    return entity.name == USER_ENTITY or USER_ENTITY in aliases_of(entity.attributes)


def own_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """Attributes an entity brings to the user's node: not "relation: self" (the node is the
    user), nor other aliases (the node keeps its own)."""
    return {k: v for k, v in attributes.items() if not (k == "relation" and v == "self") and k != "aliases"}


def resolve_key(storage: Storage, scope: Scope, key: str) -> str:
    """The key ``key`` is stored under: itself, or :data:`USER_ENTITY` when no entity has that key
    and it names the user's node (one of the user's names)."""
    agent_sql, params = scope.agent_clause()
    if key == USER_ENTITY or storage.execute(
            f"SELECT 1 FROM entities WHERE user_id = ? AND {agent_sql} AND norm_name = ? LIMIT 1",
            [scope.user_id, *params, key]).fetchone():
        return key
    for name, attributes in storage.execute(
            f"SELECT name, attributes FROM entities WHERE user_id = ? AND {agent_sql} AND norm_name = ?",
            [scope.user_id, *params, USER_ENTITY]).fetchall():
        if key in alias_keys(name, loads(attributes, {})):
            return USER_ENTITY
    return key
