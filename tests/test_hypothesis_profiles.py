"""The suite's Hypothesis profiles (tests/hypothesis_profiles.py): CI tries the same examples
every run, ``thorough`` tries ten times as many, even where a test wrote its own budget."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROPERTIES = '''
import json, os
from hypothesis import given, settings, strategies as st

SEEN = {"own": [], "default": [], "inherited": []}

@settings(max_examples=5)
@given(st.integers())
def test_own_budget(n):
    SEEN["own"].append(n)

@given(st.integers())
def test_default_budget(n):
    SEEN["default"].append(n)

@settings(deadline=1000)
@given(st.integers())
def test_inherited_budget(n):
    SEEN["inherited"].append(n)

def test_zz_report():
    with open(os.environ["REPORT"], "w") as out:
        json.dump(SEEN, out)
'''

CONFTEST = '''
from tests.hypothesis_profiles import scale_written_budgets

def pytest_collection_modifyitems(config, items):
    scale_written_budgets(items)
'''


def run(tmp_path: Path, name: str, **env: str) -> dict[str, list[int]]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_properties.py").write_text(PROPERTIES)
    report = folder / "report.json"
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("CI", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    environment.update(env, REPORT=str(report), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-p", "no:cov", str(folder)], cwd=folder, env=environment, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(report.read_text())


@pytest.mark.slow
def test_ci_runs_the_written_budget_and_the_same_examples_each_time(tmp_path):
    first = run(tmp_path, "ci1", CI="true")
    second = run(tmp_path, "ci2", CI="true")
    assert len(first["own"]) == 5
    assert len(first["default"]) == len(first["inherited"]) == 100
    assert first == second  # derandomized: the same examples, run after run


@pytest.mark.slow
def test_thorough_multiplies_every_budget_including_the_written_ones(tmp_path):
    seen = run(tmp_path, "thorough", HYPOTHESIS_PROFILE="thorough")
    assert len(seen["own"]) == 50
    assert len(seen["default"]) == len(seen["inherited"]) == 1000


def test_the_reliability_scale_follows_the_profile(tmp_path):
    code = ("from tests.reliability.conftest import scaled; print(scaled(30))")
    outputs = {}
    for profile in ("dev", "thorough"):
        environment = {key: value for key, value in os.environ.items() if key != "UM_RELIABILITY_SCALE"}
        environment.update(HYPOTHESIS_PROFILE=profile, PYTHONPATH=str(ROOT))
        outputs[profile] = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment,
                                          capture_output=True, text=True, check=True).stdout.strip()
    assert outputs == {"dev": "30", "thorough": "300"}
