"""Entities and knowledge-graph triples, with neighbourhood queries and recall.

Entities are keyed per user by their normalised name; re-mentioning one counts
the mention and merges attributes. A triple links two entities by a snake_case
predicate and is reinforced, not duplicated, when stated again. Each entity is
indexed as a small document — its name, type, attributes and the relations it
takes part in — so "where does my sister live?" finds Maria through "sister"
and "lives" (that text and the description recall shows: :mod:`tiers.graph.cards`;
triples read back: :mod:`tiers.graph.triples`).

    >>> from tiers.storage.backend import Storage, Scope
    >>> from tiers.records.types import ExtractedEntity, ExtractedTriple
    >>> graph = EntityGraph(Storage(None))
    >>> scope = Scope("ada")
    >>> with graph.storage.atomic():
    ...     _ = graph.upsert(scope, [ExtractedEntity(name="Maria", type="person")], now=0.0)
    ...     _ = graph.add_triples(scope, [ExtractedTriple(subject="user", predicate="has_sister", object="Maria"),
    ...                                   ExtractedTriple(subject="Maria", predicate="lives_in", object="Lisbon")],
    ...                           now=0.0)
    >>> [t.as_text() for t in graph.neighbors(scope, "Lisbon", depth=2)]
    ['user has sister Maria', 'Maria lives in Lisbon']
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from scoring.text import term_set
from tiers.candidates import CandidateQuery, EntityDetail, LinkedCandidate, RecallCandidate
from tiers.graph.cards import ENTITY_COLUMNS, describe, description, index_text, relations, to_entity
from tiers.graph.merging import merge_entity
from tiers.graph.names import USER_ENTITY, alias_keys, aliases_of, is_user_node, norm_name, own_attributes
from tiers.graph.triples import neighborhood, triples_of
from tiers.indexes.documents import Candidate, DocumentIndex, SearchMode
from tiers.records.types import Entity, ExtractedEntity, ExtractedTriple, Triple
from tiers.storage.backend import Scope, Storage, dumps, loads, new_id, recall_filter

__all__ = ["EntityGraph", "norm_name", "single_valued", "entity_importance", "USER_ENTITY", "FUNCTIONAL_PREDICATES",
           "ENTITY_LENGTH_NORMALISATION", "is_user_node"]

#: BM25 ``b`` for entity documents: their length grows with how connected an entity is,
#: not with verbosity, so length counts for less than in facts and messages.
ENTITY_LENGTH_NORMALISATION = 0.3
#: Relations that hold one object at a time: a new object ends the previous relation.
FUNCTIONAL_PREDICATES = frozenset({"lives_in", "works_at", "works_as", "name", "age", "birthday",
                                   "relationship_status", "diet"})


def single_valued(predicate: str, single: bool = False) -> bool:
    """Whether a subject holds one object of ``predicate`` at a time (a new one ends the old):
    the :data:`FUNCTIONAL_PREDICATES` by name, and a relation stated or stored as single
    (``single``: :attr:`ExtractedTriple.single <tiers.records.types.ExtractedTriple.single>`,
    the ``triples.single`` column; the speaker's slots: ``car``, ``gp``...).

    >>> single_valued("lives_in"), single_valued("car"), single_valued("car", True)
    (True, False, True)
    """
    return single or predicate in FUNCTIONAL_PREDICATES


class EntityGraph:
    """The ``entities`` and ``triples`` tables and the per-user entity index."""

    recall_tiers: frozenset[str] = frozenset({"entity"})  # what recall_candidates returns

    def __init__(self, storage: Storage, *, k1: float = 1.2, b: float = ENTITY_LENGTH_NORMALISATION) -> None:
        self.storage = storage
        self.index = DocumentIndex(storage, self._load_documents, kind="entities", k1=k1, b=b)

    # -- documents ----------------------------------------------------------------------

    def refresh(self, user_id: str, entity_ids: Iterable[str]) -> None:
        """After a write: store each entity's description and index text (both derived
        from the graph, so recall and reopening need no joins) and re-index it."""
        ids = sorted(set(entity_ids))
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        rows = self.storage.query(f"SELECT {ENTITY_COLUMNS} FROM entities WHERE id IN ({marks}) AND user_id = ?", [*ids, user_id])
        related = relations(self.storage, [r["id"] for r in rows])
        entities = {r["id"]: to_entity(r) for r in rows}
        selves = self._selves(user_id)
        # The user (and speakers, "relation: self") are in nearly every relation: their names in
        # others' documents would make every query naming them match. A speaker is not indexed, nor
        # the user before their name is known; the user's named node is ("who is Ada?").
        keys = {r["id"]: r["norm_name"] for r in rows}
        docs = {i: None if (e.name == USER_ENTITY if keys[i] == USER_ENTITY else e.name.casefold() in selves)
                else index_text(e, related[i], selves=selves) for i, e in entities.items()}
        self.storage.executemany("UPDATE entities SET description = ?, doc = ? WHERE id = ?",
                                 [[describe(entities[i], related[i]), docs[i], i] for i in entities])
        self.index.remove(user_id, [i for i, doc in docs.items() if doc is None])
        self.index.add(user_id, [(i, doc) for i, doc in docs.items() if doc is not None])

    def _selves(self, user_id: str) -> set[str]:
        """Case-folded names of the user's node (every name it goes by) and of speakers ("relation: self")."""
        rows = self.storage.execute(  # two indexed lookups (an OR would scan the user's entities)
            "SELECT name, attributes FROM entities WHERE user_id = ? AND norm_name = ? UNION ALL SELECT name, "
            f"NULL FROM entities WHERE user_id = ? AND {self.storage.dialect.json_text('attributes', 'relation')} = 'self'",
            [user_id, USER_ENTITY, user_id]).fetchall()
        return {name.casefold() for row in rows for name in (row[0], *aliases_of(loads(row[1], {})))} | {USER_ENTITY}

    def ended_only(self, entity_ids: Sequence[str]) -> set[str]:
        """Those of ``entity_ids`` whose every relation has ended (a former home or employer):
        recall ranks them like superseded facts.

        >>> from tiers.storage.backend import Storage, Scope
        >>> from tiers.records.types import ExtractedTriple
        >>> graph = EntityGraph(Storage(None))
        >>> with graph.storage.atomic():
        ...     _ = graph.add_triples(Scope("u1"), [ExtractedTriple(subject="user", predicate="lives_in",
        ...                                                         object="Lisbon")], now=0.0)
        ...     _ = graph.add_triples(Scope("u1"), [ExtractedTriple(subject="user", predicate="lives_in",
        ...                                                         object="Berlin")], now=1.0)
        >>> [e.name for e in graph.entities(Scope("u1")) if e.id in graph.ended_only([x.id for x in
        ...  graph.entities(Scope("u1"))])]
        ['Lisbon']
        """
        if not entity_ids:
            return set()
        values = ",".join([f"({self.storage.dialect.key_param})"] * len(entity_ids))
        # Indexed existence checks that stop at the first row: a busy entity ("my sister")
        # can have thousands of relations, and all it takes is one that is current. Written as
        # scalar subqueries with LIMIT 1, not EXISTS: PostgreSQL turned ``EXISTS ... OR EXISTS``
        # into hashed subplans that read every relation of every user (5.9 ms for 31 entities
        # beside 6,622 relations; 1.9 ms this way).
        subject, obj = self.storage.dialect.hint('triples_subject'), self.storage.dialect.hint('triples_object')
        rows = self.storage.execute(
            f"WITH ids(e) AS (VALUES {values}) SELECT e FROM ids JOIN entities n ON n.id = e WHERE "
            f"(SELECT 1 FROM triples {subject} WHERE subject_id = e AND user_id = n.user_id AND valid_to IS NULL LIMIT 1) IS NULL "
            f"AND (SELECT 1 FROM triples {obj} WHERE object_id = e AND user_id = n.user_id AND valid_to IS NULL LIMIT 1) IS NULL "
            f"AND ((SELECT 1 FROM triples {subject} WHERE subject_id = e AND user_id = n.user_id LIMIT 1) IS NOT NULL "
            f"OR (SELECT 1 FROM triples {obj} WHERE object_id = e AND user_id = n.user_id LIMIT 1) IS NOT NULL)",
            list(entity_ids)).fetchall()
        return {row[0] for row in rows}

    def own_names(self, user_id: str) -> list[str]:
        """The names the user goes by, the current one first: the name of the user's node, then
        the former names it keeps (newest first); and, in a graph written before the user was one
        node, current ``name`` relations of the user entity.

        >>> from tiers.storage.backend import Storage, Scope
        >>> from tiers.records.types import ExtractedTriple
        >>> graph = EntityGraph(Storage(None))
        >>> with graph.storage.atomic():
        ...     _ = graph.add_triples(Scope("u1"), [ExtractedTriple(subject="user", predicate="name", object="Ada")],
        ...                           now=0.0)
        >>> graph.own_names("u1")
        ['Ada']
        """
        names: list[str] = []
        for name, attributes in self.storage.execute(
                "SELECT name, attributes FROM entities WHERE user_id = ? AND norm_name = ? ORDER BY seq",
                [user_id, USER_ENTITY]).fetchall():
            names += [n for n in (name, *reversed(aliases_of(loads(attributes, {})))) if norm_name(n) != USER_ENTITY]
        rows = self.storage.execute(
            "SELECT o.name FROM triples t JOIN entities s ON s.id = t.subject_id AND s.user_id = t.user_id JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id "
            "WHERE t.user_id = ? AND s.norm_name = ? AND t.predicate = 'name' AND t.valid_to IS NULL "
            "ORDER BY t.seq", [user_id, USER_ENTITY]).fetchall()
        return list(dict.fromkeys([*names, *(row[0] for row in rows)]))

    def _load_documents(self, user_id: str) -> Iterable[tuple[str, str]]:
        rows = self.storage.execute(
            "SELECT id, doc FROM entities WHERE user_id = ? AND doc IS NOT NULL ORDER BY seq", [user_id]).fetchall()
        return [(row[0], row[1]) for row in rows]

    # -- writes (call inside storage.atomic()) -------------------------------------------

    def upsert(self, scope: Scope, entities: Sequence[ExtractedEntity], *, now: float,
               metadata: dict[str, Any] | None = None, reindex: bool = True) -> dict[str, str]:
        """Create or re-mention entities; returns ``{normalised name: id}``."""
        ids: dict[str, str] = {}
        for entity in entities:
            key = norm_name(entity.name)
            if not key:
                continue
            row = self._find(scope, key)
            if row:
                attributes = {**loads(row[0]["attributes"], {}), **(
                    own_attributes(entity.attributes) if row[0]["norm_name"] == USER_ENTITY else entity.attributes)}
                kind = entity.type if row[0]["type"] == "thing" else row[0]["type"]
                self.storage.execute(
                    "UPDATE entities SET mention_count = mention_count + 1, "
                    f"last_seen = {self.storage.dialect.greatest('last_seen', '?')}, "
                    "attributes = ?, type = ? WHERE id = ?", [now, dumps(attributes), kind, row[0]["id"]])
                ids[key] = row[0]["id"]
            else:
                entity_id = new_id("ent")
                self.storage.execute(
                    "INSERT INTO entities (id, user_id, agent_id, name, norm_name, type, attributes, first_seen, "
                    "last_seen, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [entity_id, scope.user_id, scope.agent_id, entity.name.strip(), key, entity.type,
                     dumps(entity.attributes), now, now, dumps(metadata or {})])
                self.storage.rows_added("entities", 1)
                ids[key] = entity_id
        if reindex:
            self.refresh(scope.user_id, ids.values())
        return ids

    def add_triples(self, scope: Scope, triples: Sequence[ExtractedTriple], *, now: float,
                    source_message_id: str | None = None, metadata: dict[str, Any] | None = None,
                    touched: set[str] | None = None) -> list[str]:
        """Store relations (creating missing endpoint entities); returns the triple ids. With
        ``touched``, the entities to :meth:`refresh` are added to it (the caller refreshes them once)."""
        ids: list[str] = []
        reindex, touched = touched is None, set() if touched is None else touched
        for triple in triples:
            predicate = re.sub(r"\W+", "_", triple.predicate.strip().casefold()).strip("_") or "related_to"
            if predicate == "name" and self._is_user(scope, norm_name(triple.subject)):
                node_id, changed = self.name_user(scope, triple.object, now=now, metadata=metadata)
                ids.append(node_id)
                touched.update(changed)
                continue
            names = {}
            for name in (triple.subject, triple.object):
                key = norm_name(name)
                kind = "person" if key == USER_ENTITY else "thing"
                existing = self._find(scope, key)
                names[name] = existing[0]["id"] if existing else self.upsert(
                    scope, [ExtractedEntity(name=name, type=kind)], now=now, metadata=metadata, reindex=False)[key]
            subject_id, object_id = names[triple.subject], names[triple.object]
            row = self.storage.execute(
                "SELECT id, single FROM triples WHERE user_id = ? AND agent_id = ? AND subject_id = ? AND predicate = ? "
                "AND object_id = ?", [scope.user_id, scope.agent_id, subject_id, predicate, object_id]).fetchone()
            single = triple.single or bool(row and row[1])  # once stated single, the relation stays so
            if row:
                triple_id = row[0]
                self.storage.execute(
                    "UPDATE triples SET mention_count = mention_count + 1, updated_at = ?, valid_to = NULL, "
                    f"superseded_by = NULL, confidence = {self.storage.dialect.greatest('confidence', '?')}, "
                    "single = ? WHERE id = ?", [now, triple.confidence, int(single), triple_id])
            else:
                triple_id = new_id("tri")
                self.storage.execute(
                    "INSERT INTO triples (id, user_id, agent_id, subject_id, predicate, object_id, confidence, "
                    "created_at, updated_at, source_message_id, metadata, single) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [triple_id, scope.user_id, scope.agent_id, subject_id, predicate, object_id,
                     triple.confidence, now, now, source_message_id, dumps(metadata or {}), int(single)])
                self.storage.rows_added("triples", 1)
            ids.append(triple_id)
            touched.update((subject_id, object_id))
            if single_valued(predicate, single):
                touched.update(self._end_others(scope, subject_id, predicate, triple_id, now))
        if reindex:
            self.refresh(scope.user_id, touched)
        return ids

    def _find(self, scope: Scope, key: str) -> list[dict[str, Any]]:
        """The entity stored under ``key`` (``id, norm_name, type, attributes``), or else the user's
        node when ``key`` is one of the user's names (at most one row)."""
        row = self.storage.query("SELECT id, norm_name, type, attributes FROM entities WHERE user_id = ? "
                                 "AND agent_id = ? AND norm_name = ?", [scope.user_id, scope.agent_id, key])
        if row or key == USER_ENTITY:
            return row
        node = self.storage.query("SELECT id, norm_name, type, attributes, name FROM entities WHERE user_id = ? "
                                  "AND agent_id = ? AND norm_name = ?", [scope.user_id, scope.agent_id, USER_ENTITY])
        return node if node and key in alias_keys(node[0]["name"], loads(node[0]["attributes"], {})) else []

    def _is_user(self, scope: Scope, key: str) -> bool:
        """Whether ``key`` names the user's node (``user``, or a name the user goes by)."""
        return key == USER_ENTITY or any(r["norm_name"] == USER_ENTITY for r in self._find(scope, key))

    def name_user(self, scope: Scope, name: str, *, now: float, metadata: dict[str, Any] | None = None,
                  ) -> tuple[str, set[str]]:
        """The user says their name ("I'm Ada", "call me Addy"): the user's node is named so and keeps
        the names it went by as ``aliases``; an entity of that name (or one a ``name`` relation of a
        graph written before the user was one node named) becomes the node: its relations, mentions
        and sightings move to it. Returns the node's id and the entities whose documents change.

        >>> from tiers.storage.backend import Storage, Scope
        >>> graph = EntityGraph(Storage(None))
        >>> with graph.storage.atomic():
        ...     _ = graph.add_triples(Scope("u1"), [ExtractedTriple(subject="user", predicate="lives_in",
        ...                                                         object="Lisbon")], now=0.0)
        ...     _ = graph.name_user(Scope("u1"), "Ada", now=1.0)
        ...     _ = graph.name_user(Scope("u1"), "Addy", now=2.0)
        >>> [(e.name, e.attributes) for e in graph.entities(Scope("u1")) if is_user_node(e)]
        [('Addy', {'aliases': ['user', 'Ada']})]
        >>> [t.as_text() for t in graph.triples(Scope("u1"), entity="Ada")]
        ['Addy lives in Lisbon']
        """
        key = norm_name(name)
        node = self._find(scope, USER_ENTITY)
        if not node:
            self.upsert(scope, [ExtractedEntity(name=USER_ENTITY, type="person")], now=now, metadata=metadata,
                        reindex=False)
            node = self._find(scope, USER_ENTITY)
        node_id, attributes = node[0]["id"], loads(node[0]["attributes"], {})
        current = self.storage.execute("SELECT name FROM entities WHERE id = ?", [node_id]).fetchone()[0]
        if not key:
            return node_id, set()
        legacy = self.storage.execute(  # a graph written before the user was one node: "user name Ada"
            "SELECT t.id, o.id, o.name FROM triples t JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id "
            "WHERE t.subject_id = ? AND t.predicate = 'name' AND t.user_id = ? AND t.agent_id = ? ORDER BY t.seq",
            [node_id, scope.user_id, scope.agent_id]).fetchall()
        history = [*aliases_of(attributes), current, *(row[2] for row in legacy)]
        aliases = list({norm_name(n): n for n in reversed(history) if norm_name(n) not in ("", key)}.values())[::-1]
        self.storage.executemany("DELETE FROM triples WHERE id = ?", [[row[0]] for row in legacy])
        same = self.storage.execute("SELECT id FROM entities WHERE user_id = ? AND agent_id = ? AND norm_name = ?",
                                    [scope.user_id, scope.agent_id, key]).fetchall()
        touched = {node_id}
        for other in dict.fromkeys([*(row[1] for row in legacy), *(row[0] for row in same)]):
            if other != node_id:
                touched |= self._merge_into(scope, node_id, other)
        attributes = {**loads(self.storage.execute("SELECT attributes FROM entities WHERE id = ?", [node_id])
                              .fetchone()[0], {}), "aliases": aliases}
        self.storage.execute(
            f"UPDATE entities SET name = ?, type = 'person', attributes = ?, last_seen = "
            f"{self.storage.dialect.greatest('last_seen', '?')} WHERE id = ?",
            [name.strip(), dumps(attributes), now, node_id])
        return node_id, touched

    def _merge_into(self, scope: Scope, node_id: str, other: str) -> set[str]:
        """Make the entity ``other`` the node ``node_id`` (:func:`~tiers.graph.merging.merge_entity`) and
        drop it from the index; returns the entities whose documents change."""
        touched = merge_entity(self.storage, scope, node_id, other)
        self.index.remove(scope.user_id, [other])
        return touched

    def _end_others(self, scope: Scope, subject_id: str, predicate: str, current: str, now: float) -> set[str]:
        """End the subject's other live relations of a single-valued predicate; returns
        the entities whose documents change."""
        rows = self.storage.execute(
            f"SELECT id, object_id FROM triples {self.storage.dialect.hint('triples_subject')} WHERE subject_id = ? AND predicate = ? "
            "AND id != ? AND valid_to IS NULL AND user_id = ? AND agent_id = ?",
            [subject_id, predicate, current, scope.user_id, scope.agent_id]).fetchall()
        self.storage.executemany("UPDATE triples SET valid_to = ?, superseded_by = ? WHERE id = ?",
                                 [[now, current, r[0]] for r in rows])
        return {r[1] for r in rows}

    def delete_scope(self, scope: Scope) -> int:
        """Delete the user's entities and triples (only that agent's own when it has one)."""
        agent_sql, params = ("agent_id = ?", [scope.agent_id]) if scope.agent_id else ("TRUE", [])
        self.storage.execute(f"DELETE FROM triples WHERE user_id = ? AND {agent_sql}", [scope.user_id, *params])
        cursor = self.storage.execute(f"DELETE FROM entities WHERE user_id = ? AND {agent_sql}",
                                      [scope.user_id, *params])
        self.index.reset(scope.user_id)
        return cursor.rowcount

    # -- reads ----------------------------------------------------------------------------

    def search(self, scope: Scope, query: str, want: int, *, since: float | None = None,
               where: dict[str, Any] | None = None, vector: Any = None,
               mode: SearchMode = "lexical", as_of: float | None = None) -> list[tuple[Candidate, str]]:
        """Candidates among the user's entities: ``(candidate, description)``; each
        candidate's ``row`` holds the stored columns (JSON ones still encoded). ``as_of``:
        the entities first seen by then."""
        sql, params = recall_filter(scope, where=where, since=since, time_column="last_seen", until=as_of,
                                    until_column="first_seen", dialect=self.storage.dialect)
        found = self.index.search(scope.user_id, query, want, table="entities", columns=ENTITY_COLUMNS,
                                  filter_sql=sql, filter_params=params, vector=vector, mode=mode)
        return [(c, description(c.row)) for c in found]

    def recall_candidates(self, query: CandidateQuery) -> list[RecallCandidate]:
        """:meth:`search` as recall's typed candidates (see :mod:`tiers.candidates`): an
        entity reads as its description, dates from when it was last mentioned, and is
        history when every relation it had has ended (:meth:`ended_only`) — ``as_of`` a
        moment, as it stood then: its relations then, history if all had ended by then."""
        found = self.search(query.scope, query.text, query.want, since=query.since, where=query.where,
                            vector=query.vector, mode=query.mode, as_of=query.as_of)
        if query.as_of is not None:  # matched only through what came later ("Berlin", before the move): not then
            then = [self._candidate_as_of(c.row, query.as_of, c) for c, _ in found]
            return [c for c in then if c.lexical is None or c.dense is not None
                    or not set(c.matched_terms).isdisjoint(term_set(c.text))]
        former = self.ended_only([c.id for c, _ in found])
        return [_entity_candidate(c.row, text, c, superseded=c.id in former) for c, text in found]

    def _candidate_as_of(self, row: dict[str, Any], as_of: float, found: Candidate | None = None) -> RecallCandidate:
        related = relations(self.storage, [row["id"]], as_of=as_of)[row["id"]]
        former = bool(related) and all(predicate.startswith("formerly ") for _, predicate, _, _ in related)
        return _entity_candidate({**row, "last_seen": min(row["last_seen"], as_of)},
                                 describe(to_entity(row), related), found, superseded=former)

    def entities(self, scope: Scope, *, type: str | None = None, limit: int | None = None) -> list[Entity]:
        """The user's entities, most mentioned first."""
        agent_sql, agent_params = scope.agent_clause()
        sql = f"SELECT {ENTITY_COLUMNS} FROM entities WHERE user_id = ? AND {agent_sql}"
        params: list[Any] = [scope.user_id, *agent_params]
        if type is not None:
            sql += " AND type = ?"
            params.append(type)
        sql += " ORDER BY mention_count DESC, seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [to_entity(row) for row in self.storage.query(sql, params)]

    def triples(self, scope: Scope, *, entity: str | None = None) -> list[Triple]:
        """The user's triples, optionally only those touching ``entity`` (by name)."""
        return triples_of(self.storage, scope, key=None if entity is None else norm_name(entity))

    def neighbors(self, scope: Scope, name: str, *, depth: int = 1) -> list[Triple]:
        """Triples reachable from the entity ``name`` within ``depth`` hops (either direction)."""
        return neighborhood(self.storage, scope, norm_name(name), depth=depth)

    def linked_candidates(self, query: CandidateQuery, ids: Sequence[str], *, limit: int = 20,
                          ) -> list[LinkedCandidate]:
        """Entities one current relation away from the entities ``ids`` (not the user or a
        speaker) that pass the query's filters, newest relations first, as candidates
        with no search scores (and not looked up for :meth:`ended_only`).

        A graph hop for multi-hop questions: "where does the owner of Biscuit work?"
        reaches Biscuit's owner, whose description holds the employer.
        """
        scope, entity_ids, since, where, as_of = query.scope, ids, query.since, query.where, query.as_of
        if not entity_ids:
            return []
        marks = ",".join("?" * len(entity_ids))
        live, bound = ("valid_to IS NULL", []) if as_of is None else (
            "created_at <= ? AND (valid_to IS NULL OR valid_to > ?)", [as_of, as_of])  # current then
        # Two indexed lookups (an OR across the two columns would scan every triple), each cut to its
        # newest `cap` first: the union's newest are among them (seq is unique), not sorted whole.
        cap, hint = 4 * limit, self.storage.dialect.hint
        rows = self.storage.execute(
            f"SELECT * FROM (SELECT id, subject_id, predicate, object_id, seq FROM triples {hint('triples_subject')} "
            f"WHERE subject_id IN ({marks}) AND user_id = ? AND {live} ORDER BY seq DESC LIMIT ?) AS s "
            f"UNION SELECT * FROM (SELECT id, subject_id, predicate, object_id, seq FROM triples "
            f"{hint('triples_object')} WHERE object_id IN ({marks}) AND user_id = ? AND {live} ORDER BY seq DESC LIMIT ?) "
            "AS o ORDER BY seq DESC LIMIT ?",
            [*entity_ids, scope.user_id, *bound, cap, *entity_ids, scope.user_id, *bound, cap, cap]).fetchall()
        start = set(entity_ids)
        via: dict[str, tuple[str, str]] = {}
        for _, subject_id, predicate, object_id, _ in rows:
            other, origin = (object_id, subject_id) if subject_id in start else (subject_id, object_id)
            if other not in start:
                via.setdefault(other, (origin, predicate))
        if not via:
            return []
        sql, params = recall_filter(scope, where=where, since=since, time_column="last_seen", until=as_of,
                                    until_column="first_seen", dialect=self.storage.dialect)
        ids, by_id = list(via), dict[str, dict[str, Any]]()
        for chunk in (ids[:limit], ids[limit:]):  # the others' rows only if some of the first fail the filter
            if chunk and len(by_id) < limit:
                by_id.update((row["id"], row) for row in self.storage.query(
                    f"SELECT {ENTITY_COLUMNS} FROM entities {self.storage.dialect.hint('entities_id')} WHERE id IN "
                    f"({','.join('?' * len(chunk))}) AND {sql} AND doc IS NOT NULL AND norm_name != ?",
                    [*chunk, *params, USER_ENTITY]))  # not the user's node, nor a speaker
        out = []
        for other, (origin, predicate) in via.items():
            row = by_id.get(other)
            if row is not None:
                out.append(LinkedCandidate(origin, predicate, _entity_candidate(row, description(row))
                                           if as_of is None else self._candidate_as_of(row, as_of)))
                if len(out) == limit:
                    break
        return out

    def counts(self, user_id: str) -> tuple[int, int]:
        """``(entities, triples)`` held for the user."""
        entities = self.storage.execute("SELECT COUNT(*) FROM entities WHERE user_id = ?", [user_id]).fetchone()[0]
        triples = self.storage.execute("SELECT COUNT(*) FROM triples WHERE user_id = ?", [user_id]).fetchone()[0]
        return int(entities), int(triples)


def _entity_candidate(row: dict[str, Any], description: str, found: Candidate | None = None, *,
                      superseded: bool = False) -> RecallCandidate:
    """An entity row as recall's candidate (``found``: how the search scored it, if it did)."""
    mentions: int = row["mention_count"]
    return RecallCandidate(
        id=row["id"], tier="entity", text=description, lexical=found.lexical if found else None,
        dense=found.dense if found else None, importance=entity_importance(mentions), created_at=row["last_seen"],
        source=row["id"], superseded=superseded, metadata_json=row["metadata"],
        detail=EntityDetail(name=row["name"], type=row["type"], mentions=mentions))


@lru_cache(maxsize=1 << 12)  # recall asks for every entity candidate (1.6 us computed, 0.1 us cached)
def entity_importance(mention_count: int) -> float:
    """How important an entity is, from how often it was mentioned (0.3 at one mention, → 1).

    >>> entity_importance(1)
    0.3
    """
    return min(1.0, 0.3 + 0.2 * math.log(max(1, mention_count)) / math.log(2) / 3)
