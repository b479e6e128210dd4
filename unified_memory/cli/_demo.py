"""``unified-memory demo [PATH]``: the demo of :mod:`unified_memory.demo`, as tables or JSON.

It (re)creates ``PATH`` (default ``--db``, else ``unified_memory_demo.db``; never
``$UNIFIED_MEMORY_DB``), ingests the sample conversation as ``--user`` (default: the
sample's user, ``ada``), and shows the promoted facts, the entities and relations, a few
federated recalls with their score components, an assembled context with its
per-section token use, then which user and file it wrote and the commands to explore them.

    >>> str(demo_path(argparse.Namespace(path=None, db=None)))
    'unified_memory_demo.db'
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from unified_memory.cli._commands import context_text, entities_table, facts_table, hits_table, triples_table
from unified_memory.cli._common import PROG, emit, settings_of
from unified_memory.cli._format import progress

__all__ = ["DEMO_DB", "demo_path", "next_commands", "collect_demo", "render_demo", "cmd_demo"]

DEMO_DB = "unified_memory_demo.db"


def demo_path(args: argparse.Namespace) -> Path:
    """The demo's file: ``PATH``, else an explicit ``--db``, else ``unified_memory_demo.db``.

    >>> str(demo_path(argparse.Namespace(path=None, db="x.db")))
    'x.db'
    """
    return Path(getattr(args, "path", None) or getattr(args, "db", None) or DEMO_DB)


def next_commands(path: Path, user: str, retrieval: str | None = None) -> list[str]:
    """The commands to explore the demo memory with, ready to paste.

    >>> for line in next_commands(Path("demo.db"), "ada", "lexical"):
    ...     print(line)
    unified-memory --db demo.db --user ada facts
    unified-memory --db demo.db --user ada graph Maria
    unified-memory --db demo.db --user ada recall "who is Maria?" --retrieval lexical
    """
    start = f"{PROG} --db {shlex.quote(str(path))} --user {shlex.quote(user)}"
    method = f" --retrieval {retrieval}" if retrieval else ""
    return [f"{start} facts", f"{start} graph Maria", f'{start} recall "who is Maria?"{method}']


def collect_demo(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """Build the demo memory at ``path`` for ``--user`` (default: the sample's user) and
    gather what the demo shows (records, not text).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     data = collect_demo(argparse.Namespace(retrieval="lexical", user="bob"), Path(tmp) / "demo.db")
    >>> data["user"], data["messages"] > 20, len(data["recalls"]), data["context"].tokens <= 250
    ('bob', True, 4, True)
    """
    from unified_memory.demo import (
        CONTEXT_QUERY,
        CONTEXT_TOKENS,
        QUERIES,
        ingest_sample,
        load_sample,
        open_demo,
    )

    sample = load_sample()
    sessions = sample["sessions"]
    with open_demo(path, user_id=getattr(args, "user", None), **settings_of(args)) as mem:
        written = 0
        with progress(len(sessions)) as bar:
            for done, session in enumerate(sessions, 1):
                written += ingest_sample(mem, {**sample, "sessions": [session]})
                bar(done, len(sessions))
        return {
            "path": str(path),
            "user": mem.user_id,
            "messages": written,
            "retrieval": mem.retrieval,
            "stats": mem.stats(),
            "facts": mem.facts(include_inactive=True, order="importance"),
            "entities": mem.entities(),
            "triples": mem.triples(),
            "recalls": [{"query": query, "hits": mem.recall(query, limit=3)} for query in QUERIES],
            "context": mem.context(CONTEXT_QUERY, max_tokens=CONTEXT_TOKENS),
            "next": next_commands(path, mem.user_id, getattr(args, "retrieval", None)),
        }


def render_demo(data: dict[str, Any]) -> str:
    """The demo's data as readable text: a summary line, one titled table per part, then
    the commands to explore the file."""
    stats = data["stats"]
    parts = [f"Ingested {data['messages']} messages of user {data['user']!r} into {data['path']} "
             f"({stats.facts} facts, {stats.superseded_facts} superseded, {stats.entities} entities, "
             f"{stats.triples} relations; {data['retrieval']} retrieval)",
             "", "Long-term facts:", facts_table(data["facts"]),
             "", "Entities:", entities_table(data["entities"]),
             "", "Entity graph:", triples_table(data["triples"])]
    for recall in data["recalls"]:
        parts += ["", f"recall {recall['query']!r}:", hits_table(recall["hits"])]
    block = data["context"]
    parts += ["", f"context {block.query!r}, max {block.max_tokens} tokens:", context_text(block)]
    parts += ["", f"Wrote user {data['user']!r} to {data['path']}. Explore it next:",
              *(f"  {command}" for command in data["next"])]
    return "\n".join(parts)


def cmd_demo(args: argparse.Namespace) -> int:
    """``demo [PATH]``: (re)create a demo memory file and show what it remembers."""
    data = collect_demo(args, demo_path(args))
    emit(args, data, lambda: render_demo(data))
    return 0
