"""Cold command-line recall: wall-clock of `unified-memory recall` in a fresh process (target: hybrid <= 3 s).

    python benchmarks/cli_cold.py [--runs 5] [--modes hybrid lexical] [--query "what food should I avoid?"]
        [--fresh-cache] [--baseline benchmarks/results/history/2026-11-25_cli_cold_before.md]
        [--out benchmarks/results/cli_cold.md]

1. Builds the demo memory with the command line in a temporary folder, as a user would:
   `unified-memory --db DIR/unified_memory_demo.db --user ada demo` (default retrieval, i.e. hybrid with the
   embeddings extra; lexical when only lexical runs are asked for). Timed once, not part of the target.
   The demo embeds its documents and a few queries, so the per-machine ONNX export of the query model
   (scoring.onnx_query) exists after it, in `$UNIFIED_MEMORY_CACHE` or `~/.cache/unified-memory`
   (`--fresh-cache`: an empty temporary cache folder, so the build includes the one-time export).
2. For each mode, `--runs` times: `unified-memory --db DIR/unified_memory_demo.db --user ada recall QUERY`
   (hybrid: the default retrieval; lexical: `--retrieval lexical` added) in a fresh process, wall-clock
   from `subprocess.run` start to exit -> median / min / max; stderr must be empty and the exit status 0.
3. One more run per mode under `python -X importtime` tells whether torch, transformers or
   sentence-transformers were imported (not timed: the import log itself costs time).

``--baseline`` embeds the results table of an earlier report of this script (e.g. the code before a change).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import library_version, publish  # noqa: E402

TARGET_S = 3.0
QUERY = "what food should I avoid?"
HEAVY = ("torch", "transformers", "sentence_transformers")
RESULTS = "## Results"


def versions() -> str:
    """Installed versions of the packages the query path may use (read from metadata, nothing imported)."""
    found = []
    for name in ("torch", "sentence-transformers", "onnxruntime", "tokenizers"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def shell_line(command: list[str], db: Path) -> str:
    """A command as the report shows it: the program's name, the temporary folder as DIR."""
    shown = [Path(command[0]).name, *(arg.replace(str(db.parent), "DIR") for arg in command[1:])]
    return " ".join(f"'{arg}'" if " " in arg else arg for arg in shown)


def recall_command(cli: str, db: Path, mode: str, query: str) -> list[str]:
    retrieval = [] if mode == "hybrid" else ["--retrieval", mode]
    return [cli, "--db", str(db), "--user", "ada", *retrieval, "recall", query]


def imported_heavy(command: list[str], cwd: Path, env: dict[str, str]) -> list[str]:
    """Which of torch / transformers / sentence-transformers the command imports (``-X importtime``)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *command], capture_output=True, text=True,
                          cwd=cwd, env=env, check=True)
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return [name for name in HEAVY if any(m == name or m.startswith(f"{name}.") for m in modules)]


def time_runs(command: list[str], runs: int, cwd: Path, env: dict[str, str]) -> dict:
    walls, stderrs, outputs = [], [], set()
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env)
        walls.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(command)} exited with {done.returncode}: {done.stderr[-2000:]}")
        stderrs.append(done.stderr)
        outputs.add(done.stdout)
    return {"median": statistics.median(walls), "min": min(walls), "max": max(walls), "runs": runs,
            "stderr_empty": not any(stderrs), "stderr": next((s for s in stderrs if s), ""),
            "same_output": len(outputs) == 1}


def table(rows: list[dict]) -> str:
    lines = ["| retrieval | runs | median s | min s | max s | stderr empty | torch imported | same output every run |"
             " hybrid median <= 3 s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        target = ("yes" if r["median"] <= TARGET_S else "no") if r["mode"] == "hybrid" else "–"
        heavy = ", ".join(r["heavy"]) if r["heavy"] else "no"
        lines.append(f"| {r['mode']} | {r['runs']} | {r['median']:.2f} | {r['min']:.2f} | {r['max']:.2f} | "
                     f"{'yes' if r['stderr_empty'] else 'no'} | {heavy} | {'yes' if r['same_output'] else 'no'} | "
                     f"{target} |")
    return "\n".join(lines)


def baseline_section(path: Path) -> str:
    """The header lines and results table of an earlier report of this script."""
    text = path.read_text(encoding="utf-8")
    if RESULTS not in text:
        raise SystemExit(f"--baseline {path}: no '{RESULTS}' section (not a report of this script)")
    head = [line for line in text.split(RESULTS)[0].splitlines() if line.startswith(("Command:", "Library:"))]
    body = text.split(RESULTS, 1)[1].split("\n## ", 1)[0].strip()
    return "\n\n".join([f"## Before (from `{path.name}`)", *head, body])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed cold runs per mode")
    parser.add_argument("--modes", nargs="+", default=["hybrid", "lexical"], choices=["hybrid", "lexical"])
    parser.add_argument("--query", default=QUERY)
    parser.add_argument("--cli", default=str(Path(sys.executable).with_name("unified-memory")),
                        help="the unified-memory executable (default: beside this Python)")
    parser.add_argument("--fresh-cache", action="store_true",
                        help="an empty temporary UNIFIED_MEMORY_CACHE: the demo build makes the ONNX export")
    parser.add_argument("--baseline", type=Path, help="an earlier report of this script to show as 'before'")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "cli_cold.md")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs: must be at least 1")

    version = library_version()
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        env = {**os.environ}
        if args.fresh_cache:
            env["UNIFIED_MEMORY_CACHE"] = str(folder / "cache")
        cache = ("a new temporary folder" if args.fresh_cache
                 else f"`{env.get('UNIFIED_MEMORY_CACHE', '~/.cache/unified-memory')}`")
        db = folder / "unified_memory_demo.db"
        build = [args.cli, "--db", str(db), "--user", "ada",
                 *([] if "hybrid" in args.modes else ["--retrieval", "lexical"]), "demo"]
        start = time.perf_counter()
        done = subprocess.run(build, capture_output=True, text=True, cwd=folder, env=env)
        build_s = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"demo build failed ({done.returncode}): {done.stderr[-2000:]}")
        for mode in args.modes:
            command = recall_command(args.cli, db, mode, args.query)
            row = {"mode": mode, **time_runs(command, args.runs, folder, env),
                   "heavy": imported_heavy(command, folder, env)}
            rows.append(row)
            print(f"{mode}: median {row['median']:.2f} s, torch imported: {row['heavy'] or 'no'}", file=sys.stderr)

    shown = " ".join(["python benchmarks/cli_cold.py", *(argv if argv is not None else sys.argv[1:])])
    notes = [
        f"Demo build (`{shell_line(build, db)}`, not timed in the table): {build_s:.2f} s; model export cache: "
        f"{cache}{' (so the build includes the one-time export)' if args.fresh_cache else ''}.",
        f"Timed command, each run a fresh process: `{shell_line(recall_command(args.cli, db, 'hybrid', args.query), db)}` "
        "(hybrid = the default retrieval; lexical adds `--retrieval lexical`); wall-clock from process start to "
        "exit, stdout and stderr captured.",
        "torch imported: a further run of the same command under `python -X importtime` lists which of torch, "
        "transformers, sentence_transformers were imported ('no' = none).",
        f"1-minute load average before / after the runs: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
        f"(other processes on these {os.cpu_count()} CPUs inflate the timings).",
    ]
    for row in rows:
        if not row["stderr_empty"]:
            notes.append(f"stderr of a {row['mode']} run: `{' '.join(row['stderr'].split())[:300]}`")
    now = library_version()
    if now.split("sources ")[-1] != version.split("sources ")[-1]:
        notes.append(f"WARNING: the library's sources changed during the run (now {now}).")
    parts = [
        "# Cold command-line recall",
        f"Command: `{shown}`",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {versions()}, {datetime.now(UTC):%Y-%m-%d}",
        f"Library: `{version}`",
        f"Target: a cold `unified-memory recall` with the default (hybrid) retrieval in <= {TARGET_S:.0f} s "
        "wall-clock, nothing on stderr.",
        RESULTS,
        table(rows),
        "\n".join(f"- {note}" for note in notes),
    ]
    if args.baseline is not None:
        parts.append(baseline_section(args.baseline))
    publish("\n\n".join(parts) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
