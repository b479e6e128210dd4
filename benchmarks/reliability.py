"""Reliability figures: run the reliability test suite and report what it tried.

Usage::

    python benchmarks/reliability.py                 # the CI-sized run (as in .ci/run)
    python benchmarks/reliability.py --scale 3       # three times the kills, examples and rounds

Runs ``pytest tests/reliability tests/unified_memory/privacy/test_redaction.py`` with ``UM_RELIABILITY_SCALE`` and collects the figures
each test reports through its ``figures`` fixture (kills survived, concurrent writers and
operations, random operations, bad inputs tried, leaks and losses found) into
``benchmarks/results/reliability.md``. The run fails — and the report says so — when
any reliability test fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import ROOT, library_version, publish  # noqa: E402


def _value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


SIZES = frozenset({"threads", "processes", "methods", "readers", "attack_patterns", "bad_paths", "write_paths"})
"""Figures that describe one run's set-up (8 threads), not a count: merged by maximum."""


def merge(rows: list[dict]) -> dict[str, dict[str, object]]:
    """Rows of one figure name are merged: counts are summed (``seconds`` too), set-up
    sizes (:data:`SIZES`) take their maximum, other values are kept when they agree.
    Parametrised tests and repeated runs add up.

    >>> merge([{"name": "crash", "test": "a", "kills": 2, "threads": 8}, {"name": "crash", "test": "b", "kills": 3, "threads": 8}])
    {'crash': {'kills': 5, 'threads': 8, 'tests': 2}}
    """
    merged: dict[str, dict[str, object]] = defaultdict(dict)
    tests: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        name = str(row["name"])
        tests[name].add(str(row.get("test")))
        for key, value in row.items():
            if key in ("name", "test"):
                continue
            old = merged[name].get(key)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if numeric and key in SIZES:
                merged[name][key] = max(value, old or 0)
            elif numeric and isinstance(old, int | float | None):
                merged[name][key] = (old or 0) + value
            elif old is None or old == value:
                merged[name][key] = value
            elif str(value) not in str(old).split("; "):  # each distinct value once
                merged[name][key] = f"{old}; {value}"
    for name in merged:
        merged[name]["tests"] = len(tests[name])
    return dict(merged)


def report(rows: list[dict], *, command: str, scale: float, exit_code: int, seconds: float) -> str:
    lines = ["# Reliability", "", f"Command: `{command}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}. "
             f"Library: `{library_version()}`. Scale {scale:g}, {seconds:,.0f} s in all.", "",
             "Result: " + ("every reliability test passed." if exit_code == 0
                           else f"**pytest exited with {exit_code}: some reliability tests FAILED.**"), ""]
    lines += ["| what | figures |", "|---|---|"]
    for name, values in sorted(merge(rows).items()):
        figures = ", ".join(f"{key.replace('_', ' ')} {_value(value)}" for key, value in values.items())
        lines.append(f"| {name} | {figures} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies kills, examples and rounds")
    parser.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (0: one process)")
    parser.add_argument("-k", default=None, help="only the reliability tests matching this pytest -k expression")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "reliability.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        figures = Path(tmp) / "figures.jsonl"
        env = {**os.environ, "UM_RELIABILITY_REPORT": str(figures), "UM_RELIABILITY_SCALE": str(args.scale),
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/reliability",
                  "tests/unified_memory/privacy/test_redaction.py"]
        if args.workers > 0:
            pytest += ["-n", str(args.workers), "--dist", "worksteal"]
        if args.k:
            pytest += ["-k", args.k]
        start = time.perf_counter()
        done = subprocess.run(pytest, cwd=ROOT, env=env)
        seconds = time.perf_counter() - start
        rows = [json.loads(line) for line in figures.read_text(encoding="utf-8").splitlines()
                ] if figures.exists() else []
    command = "python benchmarks/reliability.py" + (f" --scale {args.scale:g}" if args.scale != 1 else "") + (
        f" -k {args.k!r}" if args.k else "")
    publish(report(rows, command=command, scale=args.scale, exit_code=done.returncode, seconds=seconds), args.out)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
