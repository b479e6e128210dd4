"""Keeping the entities' cards current: the description and index text stored on each entity row
are derived from its relations (:mod:`tiers.graph.cards`, written by ``EntityGraph.refresh`` after
every write). When relations change without a write of the graph, the cards are derived again:

- :func:`refresh_user` after an import (the rows bring the cards an older version wrote) or a
  ``reindex``;
- :func:`refresh_stale_cards` at open, after an upgrade that changed how relations read (schema 5:
  ``my_car`` is ``car``): the migration marks the cards stale in ``meta``, the first open derives
  them again and marks them current.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiers.storage.schema import ENTITY_CARDS

if TYPE_CHECKING:
    from tiers.graph.entities import EntityGraph

__all__ = ["refresh_user", "refresh_stale_cards"]


def refresh_user(graph: EntityGraph, user_id: str, *, batch: int = 500) -> int:
    """Store again the description and index text of every entity of ``user_id``; returns how many
    entities (inside the caller's transaction)."""
    ids = [row[0] for row in graph.storage.execute(
        "SELECT id FROM entities WHERE user_id = ? ORDER BY id", [user_id]).fetchall()]
    for start in range(0, len(ids), batch):
        graph.refresh(user_id, ids[start:start + batch])
    return len(ids)


def refresh_stale_cards(graph: EntityGraph) -> int:
    """Derive every entity's card again when an upgrade marked them stale, user by user, each in
    its own transaction, then mark them current (an interrupted pass starts again at the next
    open). Returns how many entities; 0 when nothing was stale (one read of ``meta``)."""
    storage = graph.storage
    if storage.get_meta(ENTITY_CARDS) != "stale":
        return 0
    users = [row[0] for row in storage.execute("SELECT DISTINCT user_id FROM entities", []).fetchall()]
    done = 0
    for user in users:
        with storage.atomic():
            done += refresh_user(graph, user)
    with storage.atomic():
        storage.set_meta(ENTITY_CARDS, "current")
    return done
