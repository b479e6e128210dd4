"""Smoke test of the scale benchmark: a tiny run end to end, offline, in well under a minute."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_scale_benchmark_tiny_run(tmp_path):
    out = tmp_path / "RESULTS.md"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--sizes", "500", "--queries", "20",
         "--modes", "lexical", "hashing", "--peer-sizes", "500", "--dir", str(tmp_path / "files"),
         "--out", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    elapsed = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-2000:]
    assert elapsed < 60, f"smoke run took {elapsed:.0f} s"
    text = out.read_text(encoding="utf-8")
    assert "partial" not in text
    for expected in ("# Speed at scale", "Command: `python benchmarks/scale.py --sizes 500", "Machine:",
                     "Library: `git ", "| 500 | lexical | none (BM25 only) |", "| 500 | hashing | NumpyVectorIndex |",
                     "## selectools", "## Targets (issue 7)", "bulk writes ≥ 20,000 facts/s (lexical)"):
        assert expected in text, expected
    if importlib.util.find_spec("selectools") is None:  # the peer is optional: the report says so
        assert "selectools is not installed" in text.split("## selectools")[1]
    else:
        peer_row = next(line for line in text.splitlines() if line.startswith("| 500 |") and "×" in line)
        assert "did not finish" not in peer_row
    assert "not run" not in text.split("## selectools")[0].split("## Our library")[1]
    assert list((tmp_path / "files").glob("scale-lexical-500.db*")), "--dir keeps the memory files"


def test_reliability_benchmark_collects_the_figures_of_the_suite(tmp_path):
    out = tmp_path / "reliability.md"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "reliability.py"), "-k", "sql_parameters",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    text = out.read_text(encoding="utf-8")
    assert "Result: every reliability test passed." in text
    assert "| parameterised SQL | statements recorded " in text and "caller values in sql 0" in text


def test_cli_cold_benchmark_tiny_run(tmp_path):
    out = tmp_path / "cli_cold.md"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cli_cold.py"), "--runs", "1", "--modes", "lexical",
                           "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    for expected in ("# Cold command-line recall", "Command: `python benchmarks/cli_cold.py --runs 1 --modes lexical",
                     "Machine:", "Library: `git ", "## Results", "| lexical | 1 |",
                     "Demo build (`unified-memory --db DIR/unified_memory_demo.db --user ada --retrieval lexical demo`",
                     "`unified-memory --db DIR/unified_memory_demo.db --user ada recall 'what food should I avoid?'`"):
        assert expected in text, expected
    row = next(line for line in text.splitlines() if line.startswith("| lexical |"))
    assert row.split("|")[6:9] == [" yes ", " no ", " yes "]  # stderr empty, no torch, same output every run
