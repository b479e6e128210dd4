"""The order the suite's tests are handed to ``pytest-xdist`` workers: the long ones first,
spread evenly, so no worker starts a two-minute test when the others are done.

``--dist worksteal`` gives worker *i* a contiguous share of the collected tests and, when a
worker runs dry, moves half of the longest queue's *tail* to it. Left in file order, the
reliability suite's state machines (one to two minutes each) sit together near the end and
run one after another on whichever worker reaches them: a long tail of one busy core.
:func:`arrange` lays the collection out as one block per worker, each starting with its share
of the long tests (longest first, shared out longest-processing-time first) and ending with
short ones, which are what stealing moves.

How long a test takes comes from ``tests/data/durations.json`` (seconds, tests of 2 s or
more, from a ``--durations=0`` run; :func:`main` rewrites it). Only the order depends on it:
a test missing from it counts as short, a stale entry only moves a test in the queue.

    >>> ids = ["a", "b", "c", "d", "e", "f"]
    >>> arrange(ids, {"c": 60.0, "f": 50.0, "e": 10.0}, workers=2)
    ['c', 'a', 'b', 'f', 'e', 'd']
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["arrange", "load_durations", "LONG", "DURATIONS"]

DURATIONS = Path(__file__).resolve().parent / "data" / "durations.json"
LONG = 2.0  # seconds: a test at least this long is placed; shorter ones keep their order


def load_durations(path: Path = DURATIONS) -> dict[str, float]:
    """The recorded durations (empty when the file is missing or unreadable: order only)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float)} if isinstance(data, dict) else {}


def _shares(total: int, workers: int) -> list[int]:
    """How many tests worksteal's first round gives each worker (``len(pending) // nodes_left``)."""
    sizes, left = [], total
    for remaining in range(workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    return sizes


def arrange(ids: Sequence[str], durations: dict[str, float], *, workers: int) -> list[str]:
    """``ids`` reordered for ``workers`` workers (a permutation of ``ids``): block *i* (of the
    size worksteal hands worker *i*) starts with the long tests given to worker *i*, longest
    first, then short tests in their collected order. The long ones go, longest first, to the
    block whose long tests add up to the least time so far."""
    if workers < 2 or not ids:
        return list(ids)
    sizes = _shares(len(ids), workers)
    long_ids = sorted((i for i in ids if durations.get(i, 0.0) >= LONG), key=lambda i: -durations[i])
    blocks: list[list[str]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for test_id in long_ids:
        open_blocks = [b for b in range(workers) if len(blocks[b]) < sizes[b]]
        target = min(open_blocks, key=lambda b: (loads[b], b))
        blocks[target].append(test_id)
        loads[target] += durations[test_id]
    placed = set(long_ids)
    short = iter([i for i in ids if i not in placed])
    for block, size in zip(blocks, sizes, strict=True):
        while len(block) < size:
            block.append(next(short))
    return [test_id for block in blocks for test_id in block]


def main(argv: list[str] | None = None) -> int:
    """Rewrite ``tests/data/durations.json`` from the output of a ``pytest --durations=0`` run."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("report", help="the saved output of pytest ... --durations=0")
    args = parser.parse_args(argv)
    total: dict[str, float] = {}
    for line in Path(args.report).read_text().splitlines():
        found = re.match(r"\s*([\d.]+)s (?:call|setup|teardown)\s+(\S+)", line)
        if found:
            total[found[2]] = total.get(found[2], 0.0) + float(found[1])
    kept = {k: round(v, 1) for k, v in sorted(total.items()) if v >= LONG}
    DURATIONS.write_text(json.dumps(kept, indent=0, sort_keys=True) + "\n")
    print(f"{len(kept)} tests of {LONG:g} s or more ({sum(kept.values()):,.0f} s) -> {DURATIONS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
