"""Forgetting: deleting a user's data, or some items with what derives from them, so that
nothing readable is left behind.

The coordinator half of :mod:`tiers.maintenance.deletion` (which deletes rows): here the derived
state is kept in step — lexical indexes and vector partitions invalidated or
dropped, the embedding cache pruned, entity descriptions and running summaries
rewritten, the file vacuumed and the WAL checkpointed — and the ``reset`` event
reported. :meth:`UnifiedMemory.forget <unified_memory.UnifiedMemory.forget>` hands its view to :func:`forget`.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     keep, drop = mem.remember("I keep bees"), mem.remember("My PIN is 4711")
    ...     mem.forget(ids=[drop])["facts"], [f.text for f in mem.facts()]
    (1, ['I keep bees'])
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from tiers.maintenance.deletion import (
    bare_values,
    delete_items,
    delete_user_rows,
    derived_from_facts,
    derived_from_messages,
    find_items,
    mentioned_only_in,
    prune_embeddings,
)
from tiers.records.scope import Scope
from tiers.storage.user_tables import user_tables
from unified_memory.coordinator.backend import Backend
from unified_memory.coordinator.view import MemoryView
from unified_memory.extraction.summarizers import ExtractiveSummarizer, LLMSummarizer
from unified_memory.retrieval.context import forget_rendered
from unified_memory.validation import check_ids

__all__ = ["forget"]

_LOG = logging.getLogger(__name__)


def _live_texts(backend: Backend, user_id: str) -> Iterable[str]:
    """Every text the user's vectors are made of now (what the embedding cache must keep)."""
    for index in backend.indexes:
        for _, document in index.loader(user_id):
            yield from (index.parts(document) if index.parts is not None else [document])


def forget(view: MemoryView, *, user_id: str | None = None, ids: Sequence[str] | None = None
           ) -> dict[str, int]:
    """Delete a user's data (everything, or ``ids`` and what derives from them) and make
    it unreadable from the files; returns the rows deleted per table. See
    :meth:`UnifiedMemory.forget`.

    >>> from unified_memory import UnifiedMemory
    >>> with UnifiedMemory() as mem:
    ...     _ = mem.remember("I keep bees")
    ...     mem.forget()["facts"], mem.facts()
    (1, [])
    """
    chosen = view.rescoped(user_id=user_id) if user_id is not None else view  # the id checked, named in errors
    target = chosen.user_id
    checked = check_ids("ids", ids) if ids is not None else None
    backend = view.backend
    storage = backend.storage
    indexes = backend.indexes
    with chosen.write():
        if checked is None:
            counts = delete_user_rows(storage, target)  # the user's journal entries too
            for index in indexes:  # other processes rebuild all (no entry may name the forgotten user)
                index.journal.reset(None)
                index.invalidate(target)  # here, only the forgotten user's indexes are stale
            if backend.dense is not None:
                for partitions in backend.dense.partitions.values():
                    partitions.drop(target)  # the numpy partition, or the chroma collection
                backend.dense.cache.clear_queries()  # the user's recent queries, kept in memory
        else:
            counts = _forget_items(backend, target, checked)
        if isinstance(backend.summarizer, ExtractiveSummarizer | LLMSummarizer):
            backend.summarizer.clear()  # summaries it remembers in memory may quote what was deleted
        forget_rendered()  # nor may the conversation lines context() remembers
        backend.window_tail.clear()  # nor the messages kept as the next turn's extraction context
        chosen.event("reset", "completed", **counts)
    storage.vacuum()  # rewrite the file: no moved copy of a deleted row survives in a page's unused gap
    busy = storage.checkpoint()[0]
    if busy:
        _LOG.warning("forget: another connection is reading %s; its write-ahead log is truncated at its next "
                     "checkpoint", storage.path)
    return counts


def _forget_items(backend: Backend, user_id: str, ids: list[str]) -> dict[str, int]:
    """Delete these items of the user and what derives from them (inside a write)."""
    storage = backend.storage
    found = find_items(storage, user_id, ids)  # NotFoundError before anything is deleted
    deleted = delete_items(storage, user_id, found)
    gone_messages = {row["id"] for row in deleted.get("messages", [])}
    derived: dict[str, list[str]] = {}
    if gone_messages:  # facts and relations taken only from forgotten turns derive from them: they go too
        derived = derived_from_messages(storage, user_id, gone_messages)
    removed = delete_items(storage, user_id, derived) if derived else {}
    # relations a remembered fact stated ("My PIN is 4711": user pin 4711) go with the fact
    gone_facts = [*deleted.get("facts", []), *removed.get("facts", [])]
    stated = delete_items(storage, user_id, derived_from_facts(storage, user_id, gone_facts)) if gone_facts else {}
    for table, rows in stated.items():
        removed.setdefault(table, []).extend(rows)
    # a value that was only the object of such a relation ("zebra-secret-4711") goes with it
    values = {row["object_id"] for row in removed.get("triples", [])}
    orphans = delete_items(storage, user_id, {"entities": bare_values(storage, user_id, values)}) if values else {}
    # and a person or place only the forgotten user turns or facts named ("my cousin Ottilie"), in no relation now
    said = [*(row for row in deleted.get("messages", []) if row.get("role") == "user"), *gone_facts]
    named = delete_items(storage, user_id, {"entities": mentioned_only_in(storage, user_id, said)}) if said else {}
    for table, rows in named.items():
        orphans.setdefault(table, []).extend(rows)
    for table, rows in [*removed.items(), *orphans.items()]:
        deleted.setdefault(table, []).extend(rows)
    counts = {table.name: len(deleted.get(table.name, [])) for table in user_tables(storage)}
    # A message that had left its window may be in its conversation's running summary.
    in_window = {row["message_seq"] for row in deleted.get("window", [])}
    summarised = sorted({(row["agent_id"], row["session_id"]) for row in deleted.get("messages", [])
                         if row["seq"] not in in_window})
    for agent_id, session_id in summarised:
        counts["summaries"] = counts.get("summaries", 0) + backend.summaries.delete_conversation(
            Scope(user_id, agent_id, session_id))
    # Entities that lost a relation get their stored description and document rewritten.
    gone = {row["id"] for row in deleted.get("entities", [])}
    endpoints = {row[side] for row in deleted.get("triples", []) for side in ("subject_id", "object_id")} - gone
    if endpoints:
        backend.graph.refresh(user_id, endpoints)
    if backend.dense is not None:  # saved vector files hold the removed vectors: deleted before the commit
        for partitions in backend.dense.partitions.values():
            partitions.forget_saved(user_id)
    for facts_index in backend.facts.indexes:  # a fact is in one of them: current or archived
        facts_index.remove(user_id, [row["id"] for row in deleted.get("facts", [])])
    backend.graph.index.remove(user_id, sorted(gone))
    backend.log.index.remove(user_id, [row["id"] for row in deleted.get("messages", [])])
    if deleted.get("messages"):  # the neighbouring turns' documents held the removed text
        backend.log.index.invalidate(user_id)
    # The user's journal entries may hold the removed text: erased, and the other
    # processes sharing the file rebuild the user's indexes instead (tiers.storage.journal).
    for index in (*backend.facts.indexes, backend.graph.index, backend.log.index):
        index.journal.reset(user_id)
    if storage.execute("SELECT 1 FROM embeddings WHERE user_id = ? LIMIT 1", [user_id]).fetchone():
        counts["embeddings"] = counts.get("embeddings", 0) + prune_embeddings(
            storage, user_id, _live_texts(backend, user_id))
    return counts
