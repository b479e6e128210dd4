"""Without CrewAI installed, its adapter says what to install (and the rest of the library never needs it).

Apart from tests/integrations/test_crewai.py, which is skipped where CrewAI is missing: CrewAI pins
mcp<2, so it lives in an environment of its own, and this test runs in the main one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_crewai_adapter_without_crewai_raises_the_install_hint():
    code = ("import sys; sys.modules['crewai'] = None\n"  # as if CrewAI were not installed
            "import unified_memory\n"
            "from unified_memory import UnifiedMemory\n"
            "from unified_memory.errors import DependencyError\n"
            "with UnifiedMemory() as mem:\n"
            "    mem.remember('I keep bees')\n"
            "try:\n"
            "    import unified_memory.integrations.crewai\n"
            "except DependencyError as exc:\n"
            "    assert isinstance(exc, ImportError)\n"
            "    print(exc)\n"
            "else:\n"
            "    raise SystemExit('imported without CrewAI')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert 'needs crewai: pip install "unified-memory[crewai]"' in done.stdout
