"""Where one durable ``add_turn`` spends its time: statements per turn, CPU per kind of
statement, CPU per stage of the write (SQLite, a file holding ``--preload`` facts).

    python benchmarks/turn_path.py [--preload 20000] [--warmup 200] [--turns 2000] [--dir DIR]

The turns are those of ``benchmarks/write_path.py`` (user + assistant, the window full and
trimming from the 51st turn on). Three passes over fresh turns: one counting statements
(SQLite's trace callback; each row of an ``executemany`` counts), one timing each statement
(CPU, through a proxy of the connection), one timing stages (CPU, wrappers around the methods
named in ``STAGES``; nested stages are included in their callers). The passes slow the write a
little: compare figures of the same pass between versions, and take turns/s from write_path.py.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _synthetic import NOUNS, PLACES, synthetic_facts  # noqa: E402

#: The stages timed: module, class, method.
STAGES = [
    ("unified_memory.coordinator.writer", "Writer", "write_messages"),
    ("tiers.short_term", "ShortTermWindow", "messages"),
    ("tiers.episodic", "EpisodicLog", "append"),
    ("unified_memory.coordinator.writer", "Writer", "promote"),
    ("tiers.short_term", "ShortTermWindow", "extend_counted"),
    ("unified_memory.coordinator.writer", "Writer", "summarize"),
    ("unified_memory.coordinator.writer", "Writer", "maintain"),
    ("unified_memory.coordinator.view", "MemoryView", "event"),
]


class _TimedConnection:
    """A sqlite3 connection whose statements are timed (CPU) by their first 70 characters."""

    def __init__(self, conn: Any, spent: defaultdict[str, float], calls: Counter[str]) -> None:
        self._conn, self._spent, self._calls = conn, spent, calls

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def _timed(self, key: str, run: Callable[[], Any]) -> Any:
        start = time.process_time()
        try:
            return run()
        finally:
            self._spent[key] += time.process_time() - start
            self._calls[key] += 1

    def execute(self, sql: str, *args: Any) -> Any:
        return self._timed(re.sub(r"\s+", " ", sql)[:70], lambda: self._conn.execute(sql, *args))

    def executemany(self, sql: str, rows: Any) -> Any:
        return self._timed("many: " + re.sub(r"\s+", " ", sql)[:64], lambda: self._conn.executemany(sql, rows))


def _turns(mem: Any, start: int, count: int) -> float:
    began = time.process_time()
    for i in range(start, start + count):
        mem.add_turn(f"Turn {i}: I walked past the {NOUNS[i % len(NOUNS)]} shop in {PLACES[i % 20]}",
                     "Sounds nice.")
    return time.process_time() - began


def _wrap(spent: defaultdict[str, float], module: str, cls: str, method: str) -> Callable[[], None]:
    owner = getattr(importlib.import_module(module), cls)
    original = getattr(owner, method)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            spent[f"{cls}.{method}"] += time.process_time() - start

    setattr(owner, method, timed)
    return lambda: setattr(owner, method, original)


def main() -> None:
    """Run the three passes and print their figures (per turn)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preload", type=int, default=20000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()

    from unified_memory import UnifiedMemory

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp, \
            UnifiedMemory(Path(tmp) / "turn_path.db", long_term_limit=None, user_id="bench",
                          retrieval="lexical") as mem:
        facts = synthetic_facts(args.preload)
        for i in range(0, args.preload, 5000):
            mem.remember_many(facts[i:i + 5000])
        _turns(mem, 0, args.warmup)
        n, at = args.turns, args.warmup
        from unified_memory.testing import internals  # a look under the memory, for measuring
        db = internals(mem).storage.backend.db

        traced: list[str] = []
        db.conn.set_trace_callback(traced.append)
        plain = _turns(mem, at, n)
        db.conn.set_trace_callback(None)
        print(f"{n} turns onto {args.preload:,} facts: CPU {plain / n * 1e6:.0f} us per turn, "
              f"{len(traced) / n:.1f} statements per turn")

        spent: defaultdict[str, float] = defaultdict(float)
        calls: Counter[str] = Counter()
        conn = db.conn
        db.conn = _TimedConnection(conn, spent, calls)
        try:
            total = _turns(mem, at + n, n)
        finally:
            db.conn = conn
        print(f"\nstatements (CPU {total / n * 1e6:.0f} us per turn, of it SQL {sum(spent.values()) / n * 1e6:.0f} us):")
        for key, value in sorted(spent.items(), key=lambda kv: -kv[1]):
            print(f"  {value / n * 1e6:7.1f} us  {calls[key] / n:4.1f}x  {key}")

        stages: defaultdict[str, float] = defaultdict(float)
        undo = [_wrap(stages, *stage) for stage in STAGES]
        try:
            total = _turns(mem, at + 2 * n, n)
        finally:
            for restore in undo:
                restore()
        print(f"\nstages (CPU {total / n * 1e6:.0f} us per turn, each including what it calls):")
        for key, value in sorted(stages.items(), key=lambda kv: -kv[1]):
            print(f"  {value / n * 1e6:7.1f} us  {key}")


if __name__ == "__main__":
    main()
