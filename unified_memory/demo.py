"""The demo: ingest a sample conversation into a durable memory file and show what it holds.

Run it with ``python -m unified_memory.demo [PATH]`` (default ``unified_memory_demo.db``
in the working directory). It starts from a fresh file each time, ingests three
sessions of a conversation that ships with the package, then prints the promoted
facts (note the move to Berlin superseding Lisbon), the entity graph, a few
federated recalls with their score components, and a context block with its
per-section token use.

    >>> from unified_memory.demo import load_sample
    >>> len(load_sample()["sessions"])
    3
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from tiers.storage.backend import Storage
from unified_memory.memory import UnifiedMemory

__all__ = ["load_sample", "open_demo", "ingest_sample", "run_demo", "main"]

QUERIES = ("what food should I avoid?", "where does Ada live now?", "who is Maria?", "when is my birthday?")
CONTEXT_QUERY, CONTEXT_TOKENS = "plan a dinner for Maria's visit", 250


def load_sample() -> dict[str, Any]:
    """The sample conversation shipped in ``unified_memory/data``."""
    text = resources.files("unified_memory").joinpath("data/sample_conversation.json").read_text("utf-8")
    sample: dict[str, Any] = json.loads(text)
    return sample


def ingest_sample(mem: UnifiedMemory, sample: dict[str, Any] | None = None) -> int:
    """Write every session of the sample into ``mem`` (one scoped view per session),
    a minute apart within a session. Returns the number of messages written.

    >>> with UnifiedMemory(short_term_limit=6) as mem:
    ...     ingest_sample(mem) > 20, len(mem.facts()) > 3
    (True, True)
    """
    sample = sample or load_sample()
    count = 0
    for session in sample["sessions"]:
        view = mem.scoped(session_id=session["session_id"])
        start = datetime.fromisoformat(session["when"].replace("Z", "+00:00"))
        for i, message in enumerate(session["messages"]):
            view.add_message(message["role"], message["content"], when=start + timedelta(minutes=i))
            count += 1
        view.end_session()
    return count


def _fmt(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, float) else str(value)


DEMO_MARK = "demo"  # the key in the ``meta`` table of a file the demo wrote


def _reset_file(path: Path) -> None:
    """Delete a previous demo file at ``path`` (and its WAL files) so the demo starts fresh.

    Only a file without memories, one the demo wrote (marked in its ``meta`` table), or
    one holding only the sample's user (what earlier versions of the demo wrote) is
    replaced; anything else (``StorageError``) is someone's memory, or not a memory file.
    """
    from unified_memory.errors import StorageError

    if path.is_dir():
        raise StorageError(f"path: {str(path)!r} is a directory, not a database file")
    if path.exists() and path.stat().st_size:
        conn = None
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
            users = {row[0] for table in ("messages", "facts", "entities")
                     for row in conn.execute(f"SELECT DISTINCT user_id FROM {table}")}
            marked = users and conn.execute("SELECT 1 FROM meta WHERE key = ?", [DEMO_MARK]).fetchone()
        except sqlite3.Error:
            raise StorageError(f"path: {str(path)!r} is not a unified-memory file; refusing to overwrite it "
                               "with the demo") from None
        finally:
            if conn is not None:
                conn.close()
        if users and not marked and users != {load_sample()["user_id"]}:
            raise StorageError(f"path: {str(path)!r} holds memories the demo did not write (users "
                               f"{', '.join(sorted(users)[:5])}); refusing to overwrite it with the demo")
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def open_demo(path: str | Path, *, user_id: str | None = None, **settings: Any) -> UnifiedMemory:
    """A fresh, empty demo memory at ``path`` for ``user_id`` (the sample's user, ``ada``,
    by default), replacing an earlier demo file there (see :func:`_reset_file`); ``settings``
    are :class:`~unified_memory.config.MemoryConfig` fields. Fill it with :func:`ingest_sample`.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     with open_demo(Path(tmp) / "demo.db", user_id="bob", retrieval="lexical") as mem:
    ...         _ = ingest_sample(mem)
    ...     with open_demo(Path(tmp) / "demo.db", retrieval="lexical") as mem:  # replaced: it is the demo's
    ...         mem.user_id, mem.stats().messages, mem.scoped(user_id="bob").stats().messages
    ('ada', 0, 0)
    """
    path = Path(path)
    _reset_file(path)
    storage = Storage(path)  # marked before anything is written: a demo cut short is still the demo's
    try:
        with storage.atomic():
            storage.set_meta(DEMO_MARK, "1")
    finally:
        storage.close()
    return UnifiedMemory(path, user_id=user_id or load_sample()["user_id"], **{"short_term_limit": 6, **settings})


def run_demo(path: str | Path = "unified_memory_demo.db", *, out: TextIO | None = None) -> None:
    """Build a fresh demo memory at ``path`` and print what it holds."""
    def say(line: str = "") -> None:
        print(line, file=out)

    with open_demo(path) as mem:
        written = ingest_sample(mem)
        stats = mem.stats()
        say(f"Ingested {written} messages of user {mem.user_id!r} into {path} ({stats.facts} facts, "
            f"{stats.superseded_facts} superseded, {stats.entities} entities, {stats.triples} relations)\n")
        say("Long-term facts (importance, category):")
        for fact in mem.facts(include_inactive=True, order="importance"):
            status = "" if fact.status == "active" else f"   [{fact.status}]"
            say(f"  {fact.importance:.2f}  {fact.category or '-':<13} {fact.text}{status}")
        say("\nEntity graph:")
        for triple in mem.triples():
            ended = f"   [until {triple.valid_to:%Y-%m-%d}]" if triple.valid_to else ""
            say(f"  {triple.as_text()}{ended}")
        for query in QUERIES:
            say(f"\nrecall({query!r}):")
            for hit in mem.recall(query, limit=3):
                parts = ", ".join(f"{k}={_fmt(hit.components[k])}"
                                  for k in ("relevance", "importance", "recency") if k in hit.components)
                say(f"  {hit.score:.3f}  {hit.tier:<10} {hit.text[:70]}   ({parts})")
        block = mem.context(CONTEXT_QUERY, max_tokens=CONTEXT_TOKENS)
        say(f"\ncontext({CONTEXT_QUERY!r}, max_tokens={CONTEXT_TOKENS}) -> {block.tokens} tokens:")
        for usage in block.sections.values():
            say(f"  section {usage.name:<12} {usage.tokens:>4} tokens, {usage.items} items (budget {usage.budget})")
        say("")
        say(block.text)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point of ``python -m unified_memory.demo``."""
    parser = argparse.ArgumentParser(prog="python -m unified_memory.demo", description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default="unified_memory_demo.db", help="memory file to (re)create")
    args = parser.parse_args(argv)
    run_demo(args.path)


if __name__ == "__main__":
    main()
