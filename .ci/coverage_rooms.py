"""Print the line and branch coverage of scoring, tiers and unified_memory, room by room.

Run after the test command (which collects coverage into ``.coverage``): one row per room (a
package directory), then one per package and the total. ``--min PERCENT`` lists the rooms
whose line coverage is below it (it does not fail: the figure is reported, and a room below
85% gets tests).

    .venv/bin/python .ci/coverage_rooms.py [--min 85]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scoring", "tiers", "unified_memory")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT / ".coverage"), help="the coverage data file")
    parser.add_argument("--min", type=float, default=85.0, help="list the rooms below this line coverage")
    args = parser.parse_args()
    try:
        import coverage
    except ImportError:
        print("coverage is not installed: pip install 'unified-memory[dev]'", file=sys.stderr)
        return 2
    if not Path(args.data).exists():
        print(f"{args.data}: no coverage data (run the tests with --cov first)", file=sys.stderr)
        return 2
    cov = coverage.Coverage(data_file=args.data)
    cov.load()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "coverage.json"
        cov.json_report(outfile=str(out))
        files = json.loads(out.read_text(encoding="utf-8"))["files"]
    rooms: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for name, entry in files.items():
        path = Path(name).resolve()
        try:
            parts = path.relative_to(ROOT).parts
        except ValueError:
            continue
        if not parts or parts[0] not in PACKAGES:
            continue
        summary = entry["summary"]
        figures = (summary["num_statements"], summary["covered_lines"], summary.get("num_branches", 0),
                   summary.get("covered_branches", 0))
        room = "/".join(parts[:-1]) + "/"  # the modules at the top of a package are a room of their own
        for key in (room, parts[0], "total"):
            for i, value in enumerate(figures):
                rooms[key][i] += value

    def percent(done: int, of: int) -> str:
        return f"{100 * done / of:5.1f}%" if of else "    –"

    print(f"{'room':<32} {'lines':>7} {'branches':>9} {'statements':>11}")
    order = sorted(r for r in rooms if r.endswith("/"))
    below = []
    for package in PACKAGES:
        for room in [r for r in order if r.split("/")[0] == package]:
            lines, covered, branches, taken = rooms[room]
            print(f"{room:<32} {percent(covered, lines):>7} {percent(taken, branches):>9} {lines:>11}")
            if lines and 100 * covered / lines < args.min:
                below.append(room)
        lines, covered, branches, taken = rooms[package]
        print(f"{package + ' (all)':<32} {percent(covered, lines):>7} {percent(taken, branches):>9} {lines:>11}")
    lines, covered, branches, taken = rooms["total"]
    print(f"{'total':<32} {percent(covered, lines):>7} {percent(taken, branches):>9} {lines:>11}")
    if below:
        print(f"rooms below {args.min:g}% of lines: {', '.join(below)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
