"""The graph writes of a whole batch of extractions, set-based: what
:meth:`EntityGraph.upsert <tiers.graph.entities.EntityGraph.upsert>` and
:meth:`EntityGraph.add_triples <tiers.graph.entities.EntityGraph.add_triples>` do item by item,
with lookups per batch and one statement per table and kind of change at :meth:`GraphBatch.flush`.

Calls are applied, in order, to an in-memory copy of the rows they touch (read once from the
store), so that the rows written at the end are the ones the item-by-item calls leave: the same
mention counts, merged attributes and types, first and last sightings, reinforced and ended
relations, ids and insertion order. Nothing is written before :meth:`GraphBatch.flush`, which must
run (inside the same transaction) before anything reads the graph again.

    >>> from tiers.graph.entities import EntityGraph
    >>> from tiers.storage.backend import Storage, Scope
    >>> from tiers.records.types import ExtractedEntity, ExtractedTriple
    >>> graph = EntityGraph(Storage(None))
    >>> with graph.storage.atomic():
    ...     batch = GraphBatch(graph, Scope("ada"))
    ...     _ = batch.upsert([ExtractedEntity(name="Maria", type="person")], now=0.0, metadata={})
    ...     touched = set()
    ...     _ = batch.add_triples([ExtractedTriple(subject="user", predicate="lives_in", object="Lisbon"),
    ...                            ExtractedTriple(subject="user", predicate="lives_in", object="Porto")],
    ...                           now=1.0, metadata={}, source_message_id=None, touched=touched)
    ...     batch.flush()
    >>> [(t.as_text(), t.valid_to is None) for t in graph.triples(Scope("ada"))]
    [('user lives in Lisbon', False), ('user lives in Porto', True)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiers.records.types import ExtractedEntity, ExtractedTriple
from tiers.storage.backend import Scope, dumps, loads, new_id

if TYPE_CHECKING:
    from tiers.graph.entities import EntityGraph

__all__ = ["GraphBatch"]

_CHUNK = 500  # keys per lookup statement


@dataclass(slots=True)
class _Entity:
    id: str
    type: str
    attributes: dict[str, Any]
    new: bool
    name: str = ""
    first_seen: float = 0.0
    last_seen: float | None = None  # new: the row's; known: the latest sighting of this batch
    metadata: str = "{}"
    mentions: int = 0  # new: the row's count; known: sightings to add
    changed: bool = False
    key: str = ""  # new: the normalised name it is stored under
    user: bool = False  # the user's node (tiers.graph.names), whatever name it was found by


@dataclass(slots=True)
class _Triple:
    id: str
    subject_id: str
    predicate: str
    object_id: str
    new: bool
    valid_to: float | None
    superseded_by: str | None = None
    confidence: float | None = None  # new: the row's; known: the highest of this batch's mentions
    mentions: int = 0  # new: the row's count; known: mentions to add
    updated_at: float | None = None
    created_at: float = 0.0
    source_message_id: str | None = None
    metadata: str = "{}"
    ended: bool = False  # a known row's validity changed (ended, or ended then mentioned again)
    single: bool = False  # stated or stored single-valued (tiers.records.types.ExtractedTriple.single)


@dataclass
class GraphBatch:
    """Entity upserts and triple inserts of many extractions, applied in memory and written at
    :meth:`flush` (see the module docstring). Call inside ``storage.atomic()``."""

    graph: EntityGraph
    scope: Scope
    _entities: dict[str, _Entity | None] = field(default_factory=dict)  # key -> row (None: not stored)
    _triples: dict[tuple[str, str, str], _Triple | None] = field(default_factory=dict)
    _groups: dict[tuple[str, str], list[_Triple]] = field(default_factory=dict)  # (subject, predicate) -> rows
    _live_read: set[tuple[str, str]] = field(default_factory=set)  # groups whose stored live rows are read
    _created: list[_Entity] = field(default_factory=list)
    _added: list[_Triple] = field(default_factory=list)

    def preload(self, names: Iterable[str]) -> None:
        """Read the stored entities of these names (one statement per 500 keys)."""
        from tiers.graph.names import USER_ENTITY, alias_keys, norm_name

        keys = sorted({norm_name(n) for n in names} - self._entities.keys() - {""})
        storage = self.graph.storage
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start:start + _CHUNK]
            self._entities.update(dict.fromkeys(chunk))
            marks = ",".join("?" * len(chunk))
            for row in storage.query(
                    f"SELECT id, norm_name, type, attributes FROM entities WHERE user_id = ? AND agent_id = ? "
                    f"AND norm_name IN ({marks})", [self.scope.user_id, self.scope.agent_id, *chunk]):
                self._entities[row["norm_name"]] = _Entity(row["id"], row["type"], loads(row["attributes"], {}),
                                                           False, user=row["norm_name"] == USER_ENTITY)
        missing = [k for k in keys if self._entities.get(k) is None and k != USER_ENTITY]
        if missing:  # a name of the user's is the user's node
            node = self._entities.get(USER_ENTITY)
            stored = storage.query("SELECT id, type, attributes, name FROM entities WHERE user_id = ? AND agent_id = ? "
                                   "AND norm_name = ?", [self.scope.user_id, self.scope.agent_id, USER_ENTITY])
            if stored and (node is None or not node.new):
                found = alias_keys(stored[0]["name"], loads(stored[0]["attributes"], {}))
                if node is None and found & set(missing):
                    node = self._entities[USER_ENTITY] = _Entity(
                        stored[0]["id"], stored[0]["type"], loads(stored[0]["attributes"], {}), False, user=True)
                for key in found & set(missing):
                    self._entities[key] = node

    def _entity(self, key: str) -> _Entity | None:
        if key not in self._entities:
            self.preload([key])
        return self._entities[key]

    def upsert(self, entities: Sequence[ExtractedEntity], *, now: float,
               metadata: dict[str, Any] | None) -> dict[str, str]:
        """What :meth:`EntityGraph.upsert <tiers.graph.entities.EntityGraph.upsert>` does (``reindex=False``);
        returns ``{normalised name: id}``."""
        from tiers.graph.names import USER_ENTITY, norm_name, own_attributes

        ids: dict[str, str] = {}
        for entity in entities:
            key = norm_name(entity.name)
            if not key:
                continue
            known = self._entity(key)
            if known is not None:
                known.attributes = {**known.attributes, **(own_attributes(entity.attributes) if known.user
                                                           else entity.attributes)}
                known.type = entity.type if known.type == "thing" else known.type
                known.mentions += 1
                known.last_seen = now if known.last_seen is None else max(known.last_seen, now)
                known.changed = True
                ids[key] = known.id
            else:
                row = _Entity(new_id("ent"), entity.type, dict(entity.attributes), True, entity.name.strip(), now,
                              now, dumps(metadata or {}), 1, key=key, user=key == USER_ENTITY)
                self._entities[key] = row
                self._created.append(row)
                ids[key] = row.id
        return ids

    def add_triples(self, triples: Sequence[ExtractedTriple], *, now: float, metadata: dict[str, Any] | None,
                    source_message_id: str | None, touched: set[str]) -> list[str]:
        """What :meth:`EntityGraph.add_triples <tiers.graph.entities.EntityGraph.add_triples>` does with
        ``touched`` given: returns the triple ids and adds the entities whose documents change to ``touched``."""
        from tiers.graph.entities import USER_ENTITY, norm_name, single_valued

        ids: list[str] = []
        for triple in triples:
            predicate = re.sub(r"\W+", "_", triple.predicate.strip().casefold()).strip("_") or "related_to"
            if predicate == "name":
                subject = norm_name(triple.subject)
                known = None if subject == USER_ENTITY else self._entity(subject)
                if subject == USER_ENTITY or (known is not None and known.user):
                    # the user says their name: the node is renamed (and may take in an entity), as item by item
                    self.flush()
                    node_id, changed = self.graph.name_user(self.scope, triple.object, now=now, metadata=metadata)
                    ids.append(node_id)
                    touched.update(changed)
                    continue
            names = {}
            for name in (triple.subject, triple.object):
                key = norm_name(name)
                known = self._entity(key)
                names[name] = known.id if known is not None else self.upsert(
                    [ExtractedEntity(name=name, type="person" if key == USER_ENTITY else "thing")], now=now,
                    metadata=metadata)[key]
            subject_id, object_id = names[triple.subject], names[triple.object]
            row = self._triple(subject_id, predicate, object_id)
            if row is not None:
                row.single = row.single or triple.single
                row.mentions += 1
                row.updated_at = now
                row.valid_to = row.superseded_by = None
                row.confidence = triple.confidence if row.confidence is None else max(row.confidence,
                                                                                      triple.confidence)
            else:
                row = _Triple(new_id("tri"), subject_id, predicate, object_id, True, None, None, triple.confidence,
                              1, now, now, source_message_id, dumps(metadata or {}), single=triple.single)
                self._triples[subject_id, predicate, object_id] = row
                self._groups.setdefault((subject_id, predicate), []).append(row)
                self._added.append(row)
            ids.append(row.id)
            touched.update((subject_id, object_id))
            if single_valued(predicate, row.single):
                touched.update(self._end_others(subject_id, predicate, row.id, now))
        return ids

    def _triple(self, subject_id: str, predicate: str, object_id: str) -> _Triple | None:
        key = (subject_id, predicate, object_id)
        if key in self._triples:
            return self._triples[key]
        found = self.graph.storage.execute(
            "SELECT id, valid_to, single FROM triples WHERE user_id = ? AND agent_id = ? AND subject_id = ? "
            "AND predicate = ? AND object_id = ?", [self.scope.user_id, self.scope.agent_id, *key]).fetchone()
        row = None if found is None else _Triple(found[0], subject_id, predicate, object_id, False, found[1],
                                                 single=bool(found[2]))
        self._triples[key] = row
        if row is not None:
            self._groups.setdefault((subject_id, predicate), []).append(row)
        return row

    def _end_others(self, subject_id: str, predicate: str, current: str, now: float) -> set[str]:
        """End the subject's other live relations of a single-valued predicate; returns their objects."""
        group = (subject_id, predicate)
        if group not in self._live_read:  # the stored live rows, once (later changes are the batch's own)
            self._live_read.add(group)
            storage = self.graph.storage
            for triple_id, object_id, single in storage.execute(
                    f"SELECT id, object_id, single FROM triples {storage.dialect.hint('triples_subject')} WHERE subject_id = ? "
                    "AND predicate = ? AND valid_to IS NULL AND user_id = ? AND agent_id = ?",
                    [subject_id, predicate, self.scope.user_id, self.scope.agent_id]).fetchall():
                if (subject_id, predicate, object_id) not in self._triples:
                    row = _Triple(triple_id, subject_id, predicate, object_id, False, None, single=bool(single))
                    self._triples[subject_id, predicate, object_id] = row
                    self._groups.setdefault(group, []).append(row)
        ended: set[str] = set()
        for row in self._groups.get(group, ()):
            if row.id != current and row.valid_to is None:
                row.valid_to, row.superseded_by, row.ended = now, current, True
                ended.add(row.object_id)
        return ended

    def flush(self) -> None:
        """Write what the calls so far did (entities, then triples), and start afresh."""
        storage, scope = self.graph.storage, self.scope
        d = storage.dialect
        if self._created:
            storage.executemany(
                "INSERT INTO entities (id, user_id, agent_id, name, norm_name, type, attributes, mention_count, "
                "first_seen, last_seen, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [[e.id, scope.user_id, scope.agent_id, e.name, e.key, e.type, dumps(e.attributes), e.mentions,
                  e.first_seen, e.last_seen, e.metadata] for e in self._created])
            storage.rows_added("entities", len(self._created))
        changed = list({e.id: e for e in self._entities.values() if e is not None and not e.new and e.changed}.values())
        if changed:
            storage.executemany(
                f"UPDATE entities SET mention_count = mention_count + ?, last_seen = {d.greatest('last_seen', '?')}, "
                "attributes = ?, type = ? WHERE id = ?",
                [[e.mentions, e.last_seen, dumps(e.attributes), e.type, e.id] for e in changed])
        if self._added:
            storage.executemany(
                "INSERT INTO triples (id, user_id, agent_id, subject_id, predicate, object_id, confidence, "
                "mention_count, created_at, updated_at, source_message_id, metadata, valid_to, superseded_by, single) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [[t.id, scope.user_id, scope.agent_id, t.subject_id, t.predicate, t.object_id, t.confidence,
                  t.mentions, t.created_at, t.updated_at, t.source_message_id, t.metadata, t.valid_to,
                  t.superseded_by, int(t.single)] for t in self._added])
            storage.rows_added("triples", len(self._added))
        known = [t for t in self._triples.values() if t is not None and not t.new]
        if any(t.mentions for t in known):
            storage.executemany(
                "UPDATE triples SET mention_count = mention_count + ?, updated_at = ?, valid_to = ?, superseded_by = ?, "
                f"confidence = {d.greatest('confidence', '?')}, single = ? WHERE id = ?",
                [[t.mentions, t.updated_at, t.valid_to, t.superseded_by, t.confidence, int(t.single), t.id]
                 for t in known if t.mentions])
        if any(t.ended and not t.mentions for t in known):
            storage.executemany("UPDATE triples SET valid_to = ?, superseded_by = ? WHERE id = ?",
                                [[t.valid_to, t.superseded_by, t.id] for t in known if t.ended and not t.mentions])
        self._entities.clear()
        self._triples.clear()
        self._groups.clear()
        self._live_read.clear()
        self._created.clear()
        self._added.clear()

