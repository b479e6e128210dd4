"""The reading commands: recall, context, facts, entities, graph, episodes, stats, reindex.

Each takes the parsed arguments, prints a table (or one JSON document with ``--json``)
and returns the exit status.

    >>> print(hits_table([]))
    (no hits)
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from unified_memory.cli._common import emit, open_memory, user_of
from unified_memory.cli._format import format_pairs, format_table, progress
from unified_memory.types import ContextBlock, Entity, Episode, Fact, RecallHit, Triple

__all__ = [
    "hits_table", "facts_table", "entities_table", "triples_table", "episodes_table", "context_text",
    "cmd_recall", "cmd_context", "cmd_facts", "cmd_entities", "cmd_graph", "cmd_episodes", "cmd_stats",
    "cmd_reindex",
]

COMPONENTS = ("relevance", "importance", "recency")


def hits_table(hits: Sequence[RecallHit]) -> str:
    """Recall hits as a table: score, tier, the main score components, text.

    >>> print(hits_table([RecallHit(id="f1", tier="long_term", text="I keep bees", score=0.8,
    ...                             components={"relevance": 1.0, "importance": 0.7})]))
    score  tier       relevance  importance  recency  text
    -----  ---------  ---------  ----------  -------  -----------
     0.80  long_term       1.00        0.70        -  I keep bees
    """
    if not hits:
        return "(no hits)"
    return format_table(["score", "tier", *COMPONENTS, "text"],
                        [[h.score, h.tier, *(h.components.get(k) for k in COMPONENTS), h.text] for h in hits])


def facts_table(facts: Sequence[Fact], *, history: bool = False) -> str:
    """Facts as a table: importance, category, status, last update, text (``history``:
    status, when each was true and when it was recorded, text).

    >>> print(facts_table([]))
    (no facts)
    """
    if not facts:
        return "(no facts)"
    if history:
        return format_table(["status", "valid from", "valid to", "recorded", "text"],
                            [[f.status, f.valid_from, f.valid_to, f.recorded_at, f.text] for f in facts])
    return format_table(["importance", "category", "status", "updated", "text"],
                        [[f.importance, f.category, f.status, f.updated_at, f.text] for f in facts])


def entities_table(entities: Sequence[Entity]) -> str:
    """Entities as a table: name, type, mentions, last seen.

    >>> print(entities_table([]))
    (no entities)
    """
    if not entities:
        return "(no entities)"
    return format_table(["name", "type", "mentions", "last seen"],
                        [[e.name, e.type, e.mention_count, e.last_seen] for e in entities])


def triples_table(triples: Sequence[Triple]) -> str:
    """Relations as a table: subject, predicate, object, confidence, and when it ended.

    >>> print(triples_table([]))
    (no relations)
    """
    if not triples:
        return "(no relations)"
    return format_table(["subject", "predicate", "object", "confidence", "until"],
                        [[t.subject, t.predicate, t.object, t.confidence, t.valid_to] for t in triples])


def episodes_table(episodes: Sequence[Episode]) -> str:
    """Episodes as a table: time, session, role, text.

    >>> print(episodes_table([]))
    (no episodes)
    """
    if not episodes:
        return "(no episodes)"
    return format_table(["time", "session", "role", "text"],
                        [[e.created_at, e.session_id, e.role, e.content or ""] for e in episodes])


def context_text(block: ContextBlock) -> str:
    """A context block's per-section token use as a table, then the block itself.

    >>> print(context_text(ContextBlock(text="", tokens=0, max_tokens=100)))
    0 of 100 tokens
    (empty context)
    """
    lines = [f"{block.tokens} of {block.max_tokens} tokens"]
    if block.sections:
        lines.append(format_table(["section", "budget", "tokens", "items", "dropped"],
                                  [[s.name, s.budget, s.tokens, s.items, s.dropped]
                                   for s in block.sections.values()]))
    lines += ["", block.text] if block.text else ["(empty context)"]
    return "\n".join(lines)


def cmd_recall(args: argparse.Namespace) -> int:
    """``recall QUERY [--limit N] [--tiers ...] [--days N] [--as-of DATE]``."""
    with open_memory(args, known_user=True) as mem:
        hits = mem.recall(args.query, limit=args.limit, tiers=args.tiers, days=args.days, as_of=args.as_of)
        emit(args, hits, lambda: hits_table(hits))
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    """``context [QUERY] [--max-tokens N] [--as-of DATE]``."""
    with open_memory(args, known_user=True) as mem:
        block = mem.context(args.query, max_tokens=args.max_tokens, as_of=args.as_of)
        emit(args, block, lambda: context_text(block))
    return 0


def cmd_facts(args: argparse.Namespace) -> int:
    """``facts [--category C] [--archived] [--history] [--all] [--limit N]`` (``--history``: by time)."""
    with open_memory(args, known_user=True) as mem:
        facts = mem.facts(include_archived=args.archived, include_inactive=args.all, category=args.category,
                          limit=args.limit, order="time" if args.history else "importance",
                          include_history=args.history)
        emit(args, facts, lambda: facts_table(facts, history=args.history))
    return 0


def cmd_entities(args: argparse.Namespace) -> int:
    """``entities [--type T] [--limit N]``."""
    with open_memory(args, known_user=True) as mem:
        entities = mem.entities(type=args.type, limit=args.limit)
        emit(args, entities, lambda: entities_table(entities))
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    """``graph ENTITY [--depth N]``."""
    with open_memory(args, known_user=True) as mem:
        triples = mem.neighbors(args.entity, depth=args.depth)
        emit(args, triples, lambda: triples_table(triples))
    return 0


def cmd_episodes(args: argparse.Namespace) -> int:
    """``episodes [--days N] [--session S] [--limit N]``."""
    with open_memory(args, known_user=True) as mem:
        episodes = mem.episodes(days=args.days, session_id=args.session, limit=args.limit)
        emit(args, episodes, lambda: episodes_table(episodes))
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    """``profile [--as-of DATE]``: the user's key facts, safety first (what ``context`` always shows)."""
    with open_memory(args, known_user=True) as mem:
        found = mem.profile(as_of=args.as_of)
        name = f"{found.name}\n" if found.name else ""
        emit(args, found, lambda: (name + found.text) if found.facts else name + "(no key facts yet)")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """``stats``: the counts of :class:`~unified_memory.types.MemoryStats`, and the retrieval method."""
    with open_memory(args, known_user=True) as mem:
        fields = [*mem.stats().model_dump().items(), ("retrieval", mem.retrieval)]
        emit(args, dict(fields), lambda: format_pairs(fields))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """``reindex [--all-users]``."""
    with open_memory(args) as mem, progress() as bar:
        users = mem.reindex(all_users=args.all_users, progress=bar)
        scope = "every user" if args.all_users else f"user {user_of(args)!r}"
        emit(args, {"users": users, "retrieval": mem.retrieval},
             lambda: f"reindexed {users} user{'s' if users != 1 else ''} ({scope}, {mem.retrieval} retrieval)")
    return 0

