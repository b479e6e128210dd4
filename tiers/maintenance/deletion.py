"""Deleting a user's rows, or some items with what derives from them, over every user-scoped
table (:mod:`tiers.storage.user_tables`); the coordinator's side (indexes, files) is
:mod:`unified_memory.io.jsonl`'s ``forget``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scoring.errors import NotFoundError, StorageError
from scoring.text import term_set
from tiers.indexes.vectors import content_hash
from tiers.storage.backend import Storage, loads
from tiers.storage.user_tables import is_derived, quote_name, user_tables

__all__ = ["delete_user_rows", "find_items", "delete_items", "derived_from_messages", "bare_values", "prune_embeddings"]


def delete_user_rows(storage: Storage, user_id: str) -> dict[str, int]:
    """Delete every row of ``user_id`` in every user-scoped table, derived ones
    included (referencing tables first); returns the count per table. Call inside
    ``storage.atomic()``.

    >>> from tiers.storage.backend import Storage, loads
    >>> store = Storage(None)
    >>> with store.atomic():
    ...     delete_user_rows(store, "ada")["messages"]
    0
    """
    tables = user_tables(storage)
    counts = {}
    for table in reversed(tables):
        counts[table.name] = storage.execute(f"DELETE FROM {quote_name(table.name)} WHERE user_id = ?",
                                             [user_id]).rowcount
    return {table.name: counts[table.name] for table in tables}


def find_items(storage: Storage, user_id: str, ids: Sequence[str]) -> dict[str, list[str]]:
    """Which table holds each of ``ids`` among ``user_id``'s rows (tables with an
    ``id`` column): ``{table: [ids]}``. Ids of other users are not found: an unknown id
    raises :class:`NotFoundError` naming the field ``ids``.

    >>> from tiers.storage.backend import Storage, loads
    >>> find_items(Storage(None), "ada", ["fact_x"])
    Traceback (most recent call last):
    ...
    unified_memory.errors.NotFoundError: ids: user 'ada' has no items with these ids: ['fact_x']
    """
    wanted = list(dict.fromkeys(ids))
    found: dict[str, list[str]] = {}
    seen: set[str] = set()
    for table in user_tables(storage):
        if is_derived(table.name) or "id" not in table.column_names:
            continue
        for start in range(0, len(wanted), 500):
            part = wanted[start:start + 500]
            rows = storage.execute(f"SELECT id FROM {quote_name(table.name)} WHERE user_id = ? AND id IN "
                                   f"({','.join('?' * len(part))})", [user_id, *part]).fetchall()
            for (item_id,) in rows:
                if item_id not in seen:
                    seen.add(item_id)
                    found.setdefault(table.name, []).append(item_id)
    missing = [i for i in wanted if i not in seen]
    if missing:
        raise NotFoundError(f"ids: user {user_id!r} has no items with these ids: {missing[:10]}"
                            + (f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""), field="ids")
    return found


def delete_items(storage: Storage, user_id: str, items: Mapping[str, Sequence[str]]
                 ) -> dict[str, list[dict[str, Any]]]:
    """Delete these rows of ``user_id`` (``{table: [ids]}``, see :func:`find_items`) and,
    following foreign keys, the rows that reference them (a message's window entry, a
    removed entity's triples); returns the deleted rows per table. Call inside
    ``storage.atomic()``."""
    tables = {t.name: t for t in user_tables(storage)}
    deleted: dict[str, list[dict[str, Any]]] = {}

    visited: set[tuple[str, str, Any]] = set()

    def remove(name: str, column: str, values: list[Any]) -> None:
        values = [v for v in values if (name, column, v) not in visited]  # a cycle of references ends
        visited.update((name, column, v) for v in values)
        for start in range(0, len(values), 500):
            part = values[start:start + 500]
            marks = ",".join("?" * len(part))
            rows = storage.query(f"SELECT * FROM {quote_name(name)} WHERE user_id = ? AND {quote_name(column)} IN ({marks})",
                                 [user_id, *part])
            if not rows:
                continue
            for other in tables.values():  # what references these rows goes first
                for ref_column, target, target_column in other.references:
                    if target == name:
                        remove(other.name, ref_column, list({r[target_column] for r in rows}))
            storage.execute(f"DELETE FROM {quote_name(name)} WHERE user_id = ? AND {quote_name(column)} IN ({marks})",
                            [user_id, *part])
            deleted.setdefault(name, []).extend(rows)

    for name, ids in items.items():
        if name not in tables or "id" not in tables[name].column_names:
            raise StorageError(f"delete: {name!r} is not a table of user items")
        remove(name, "id", list(ids))
    return deleted


def derived_from_messages(storage: Storage, user_id: str, messages: set[str]) -> dict[str, list[str]]:
    """What the user's messages ``messages`` alone gave rise to (``{table: [ids]}`` for
    :func:`delete_items`): the facts all of whose source messages are among them, and the
    relations stated in one of them and never again."""
    ordered = sorted(messages)
    facts: set[str] = set()
    triples: list[str] = []
    for start in range(0, len(ordered), 500):
        chunk = ordered[start:start + 500]
        marks = ",".join("?" * len(chunk))
        facts.update(fact_id for fact_id, sources in storage.execute(
            "SELECT DISTINCT facts.id, facts.source_message_ids "
            f"FROM facts, {storage.dialect.json_values('facts.source_message_ids', 'j')} "
            f"WHERE facts.user_id = ? AND j.value IN ({marks})", [user_id, *chunk]).fetchall()
            if set(loads(sources, [])) <= messages)
        triples += [row[0] for row in storage.execute(
            f"SELECT id FROM triples WHERE user_id = ? AND mention_count <= 1 AND source_message_id IN ({marks})",
            [user_id, *chunk]).fetchall()]
    return {"facts": sorted(facts), "triples": triples}


def derived_from_facts(storage: Storage, user_id: str, facts: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """What forgotten facts stored directly (``remember``: no source message) alone gave rise to
    (``{"triples": [ids]}`` for :func:`delete_items`): the relations written with the fact
    (no source message, the same moment, stated once) whose object the fact's text names.
    ``facts`` are the deleted rows (``text``, ``created_at``, ``source_message_ids``)."""
    triples: list[str] = []
    for fact in facts:
        if loads(fact.get("source_message_ids"), []):
            continue  # promoted from turns: its relations carry the turn (derived_from_messages)
        words = term_set(str(fact.get("text") or ""))
        triples += [triple_id for triple_id, name in storage.execute(
            "SELECT t.id, o.name FROM triples t JOIN entities o ON o.id = t.object_id AND o.user_id = t.user_id WHERE t.user_id = ? "
            "AND t.source_message_id IS NULL AND t.mention_count <= 1 AND t.created_at = ?",
            [user_id, fact.get("created_at")]).fetchall() if term_set(name) and term_set(name) <= words]
    return {"triples": sorted(set(triples))}


def mentioned_only_in(storage: Storage, user_id: str, items: Sequence[Mapping[str, Any]]) -> list[str]:
    """The user's entities that forgotten ``items`` (deleted message or fact rows: ``content`` or
    ``text``, ``created_at``) alone mentioned: seen once, at the moment one of them was written,
    named by its text, and now in no relation (the user's own entity and speakers excepted)."""
    texts: dict[float, list[frozenset[str]]] = {}
    for item in items:
        text = item.get("content") if item.get("content") is not None else item.get("text")
        if text and item.get("created_at") is not None:
            texts.setdefault(float(item["created_at"]), []).append(term_set(str(text)))
    if not texts:
        return []
    moments = sorted(texts)
    found: list[str] = []
    for start in range(0, len(moments), 500):
        chunk = moments[start:start + 500]
        for entity_id, name, seen in storage.execute(
                "SELECT id, name, first_seen FROM entities e WHERE user_id = ? AND mention_count <= 1 "
                f"AND first_seen IN ({','.join('?' * len(chunk))}) AND norm_name != 'user' "
                f"AND COALESCE({storage.dialect.json_text('attributes', 'relation')}, '') != 'self' "
                "AND NOT EXISTS (SELECT 1 FROM triples t WHERE (t.subject_id = e.id OR t.object_id = e.id) AND t.user_id = e.user_id)",
                [user_id, *chunk]).fetchall():
            words = term_set(name)
            if words and any(words <= said for said in texts.get(float(seen), [])):
                found.append(entity_id)
    return found


def bare_values(storage: Storage, user_id: str, entity_ids: Iterable[str]) -> list[str]:
    """Of ``entity_ids``, the user's plain values (``thing`` entities) left in no relation."""
    ids = sorted(set(entity_ids))
    if not ids:
        return []
    return [row[0] for row in storage.execute(
        f"SELECT id FROM entities e WHERE user_id = ? AND type = 'thing' AND id IN ({','.join('?' * len(ids))}) "
        "AND NOT EXISTS (SELECT 1 FROM triples t WHERE (t.subject_id = e.id OR t.object_id = e.id) AND t.user_id = e.user_id)",
        [user_id, *ids]).fetchall()]


def prune_embeddings(storage: Storage, user_id: str, live_texts: Iterable[str]) -> int:
    """Delete ``user_id``'s cached embeddings (every model) of texts not in
    ``live_texts``; returns how many. Call inside ``storage.atomic()``.

    >>> from tiers.storage.backend import Storage, loads
    >>> store = Storage(None)
    >>> with store.atomic():
    ...     _ = store.execute("INSERT INTO embeddings VALUES ('ada', 'm', ?, 1, x'00000000')", [content_hash("hi")])
    ...     prune_embeddings(store, "ada", ["hello"])
    1
    """
    live = {content_hash(text) for text in live_texts}
    stored = storage.execute("SELECT model, content_hash FROM embeddings WHERE user_id = ?", [user_id]).fetchall()
    dead = [[user_id, model, key] for model, key in stored if key not in live]
    storage.executemany("DELETE FROM embeddings WHERE user_id = ? AND model = ? AND content_hash = ?", dead)
    return len(dead)
