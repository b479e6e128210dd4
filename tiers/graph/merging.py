"""Merging one entity into another of the same user: what makes a separate entity of the user's
name (a graph written before the user was one named node) the user's node, when the user next
says their name (:meth:`tiers.graph.entities.EntityGraph.name_user`).
"""

from __future__ import annotations

from tiers.graph.names import own_attributes
from tiers.storage.backend import Scope, Storage, dumps, loads

__all__ = ["merge_entity"]


def merge_entity(storage: Storage, scope: Scope, node_id: str, other: str) -> set[str]:
    """Make the entity ``other`` the node ``node_id``: its relations move (one that the node
    already has is merged into it: mentions summed, the earlier creation, live if either
    was), its mentions, sightings and attributes join the node's; it is deleted (its index entry is
    the caller's to drop). Returns the entities whose documents change."""
    user, agent = scope.user_id, scope.agent_id
    touched: set[str] = set()
    rows = storage.query(
        "SELECT id, subject_id, predicate, object_id, mention_count, created_at, updated_at, confidence, valid_to, "
        "superseded_by, single FROM triples WHERE subject_id = ? AND user_id = ? AND agent_id = ? UNION "
        "SELECT id, subject_id, predicate, object_id, mention_count, created_at, updated_at, confidence, valid_to, "
        "superseded_by, single FROM triples WHERE object_id = ? AND user_id = ? AND agent_id = ?",
        [other, user, agent, other, user, agent])
    for row in rows:
        subject = node_id if row["subject_id"] == other else row["subject_id"]
        obj = node_id if row["object_id"] == other else row["object_id"]
        touched.update((subject, obj))
        twin = storage.query(
            "SELECT id, mention_count, created_at, updated_at, confidence, valid_to, superseded_by, single "
            "FROM triples WHERE user_id = ? AND agent_id = ? AND subject_id = ? AND predicate = ? AND object_id = ?",
            [user, agent, subject, row["predicate"], obj])
        if not twin:
            storage.execute("UPDATE triples SET subject_id = ?, object_id = ? WHERE id = ?", [subject, obj, row["id"]])
            continue
        kept = twin[0]
        live = kept["valid_to"] is None or row["valid_to"] is None
        later = row if not live and row["valid_to"] > kept["valid_to"] else kept
        storage.execute(
            "UPDATE triples SET mention_count = ?, created_at = ?, updated_at = ?, confidence = ?, valid_to = ?, "
            "superseded_by = ?, single = ? WHERE id = ?",
            [kept["mention_count"] + row["mention_count"], min(kept["created_at"], row["created_at"]),
             max(kept["updated_at"], row["updated_at"]), max(kept["confidence"], row["confidence"]),
             None if live else later["valid_to"], None if live else later["superseded_by"],
             max(kept["single"], row["single"]), kept["id"]])
        storage.execute("DELETE FROM triples WHERE id = ?", [row["id"]])
        storage.execute("UPDATE triples SET superseded_by = ? WHERE superseded_by = ? AND user_id = ?",
                        [kept["id"], row["id"], user])
    mine, theirs = (storage.query("SELECT mention_count, first_seen, last_seen, attributes FROM entities "
                                  "WHERE id = ? AND user_id = ?", [i, user])[0] for i in (node_id, other))
    storage.execute(
        "UPDATE entities SET mention_count = ?, first_seen = ?, last_seen = ?, attributes = ? WHERE id = ? AND user_id = ?",
        [mine["mention_count"] + theirs["mention_count"], min(mine["first_seen"], theirs["first_seen"]),
         max(mine["last_seen"], theirs["last_seen"]),
         dumps({**own_attributes(loads(theirs["attributes"], {})), **loads(mine["attributes"], {})}), node_id, user])
    storage.execute("DELETE FROM entities WHERE id = ? AND user_id = ?", [other, user])
    return touched - {other}
