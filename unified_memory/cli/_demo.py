"""``unified-memory demo [PATH]``: the demo of :mod:`unified_memory.demo`, as tables or JSON.

It (re)creates ``PATH`` (default ``--db``, else ``unified_memory_demo.db``; never
``$UNIFIED_MEMORY_DB``), ingests the sample conversation, and shows the promoted facts,
the entities and relations, a few federated recalls with their score components, and
an assembled context with its per-section token use.

    >>> str(demo_path(argparse.Namespace(path=None, db=None)))
    'unified_memory_demo.db'
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from unified_memory.cli._commands import context_text, entities_table, facts_table, hits_table, triples_table
from unified_memory.cli._common import emit, open_memory
from unified_memory.cli._format import progress

__all__ = ["DEMO_DB", "demo_path", "collect_demo", "render_demo", "cmd_demo"]

DEMO_DB = "unified_memory_demo.db"


def demo_path(args: argparse.Namespace) -> Path:
    """The demo's file: ``PATH``, else an explicit ``--db``, else ``unified_memory_demo.db``.

    >>> str(demo_path(argparse.Namespace(path=None, db="x.db")))
    'x.db'
    """
    return Path(getattr(args, "path", None) or getattr(args, "db", None) or DEMO_DB)


def collect_demo(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    """Build the demo memory at ``path`` and gather what the demo shows (records, not text).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     data = collect_demo(argparse.Namespace(retrieval="lexical"), Path(tmp) / "demo.db")
    >>> data["messages"] > 20, len(data["recalls"]), data["context"].tokens <= 250
    (True, 4, True)
    """
    from unified_memory.demo import (
        CONTEXT_QUERY,
        CONTEXT_TOKENS,
        QUERIES,
        _reset_file,
        ingest_sample,
        load_sample,
    )

    sample = load_sample()
    _reset_file(path, sample["user_id"])
    sessions = sample["sessions"]
    with open_memory(args, path=path, must_exist=False, user_id=sample["user_id"], short_term_limit=6) as mem:
        written = 0
        with progress(len(sessions)) as bar:
            for done, session in enumerate(sessions, 1):
                written += ingest_sample(mem, {**sample, "sessions": [session]})
                bar(done, len(sessions))
        return {
            "path": str(path),
            "messages": written,
            "retrieval": mem.retrieval,
            "stats": mem.stats(),
            "facts": mem.facts(include_inactive=True, order="importance"),
            "entities": mem.entities(),
            "triples": mem.triples(),
            "recalls": [{"query": query, "hits": mem.recall(query, limit=3)} for query in QUERIES],
            "context": mem.context(CONTEXT_QUERY, max_tokens=CONTEXT_TOKENS),
        }


def render_demo(data: dict[str, Any]) -> str:
    """The demo's data as readable text: a summary line, then one titled table per part."""
    stats = data["stats"]
    parts = [f"Ingested {data['messages']} messages into {data['path']} ({stats.facts} facts, "
             f"{stats.superseded_facts} superseded, {stats.entities} entities, {stats.triples} relations; "
             f"{data['retrieval']} retrieval)",
             "", "Long-term facts:", facts_table(data["facts"]),
             "", "Entities:", entities_table(data["entities"]),
             "", "Entity graph:", triples_table(data["triples"])]
    for recall in data["recalls"]:
        parts += ["", f"recall {recall['query']!r}:", hits_table(recall["hits"])]
    block = data["context"]
    parts += ["", f"context {block.query!r}, max {block.max_tokens} tokens:", context_text(block)]
    return "\n".join(parts)


def cmd_demo(args: argparse.Namespace) -> int:
    """``demo [PATH]``: (re)create a demo memory file and show what it remembers."""
    data = collect_demo(args, demo_path(args))
    emit(args, data, lambda: render_demo(data))
    return 0
