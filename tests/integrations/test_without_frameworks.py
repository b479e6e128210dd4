"""Without a framework installed, its adapter says what to install (and the core never needs it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_adapter_without_its_framework_raises_the_install_hint():
    code = ("import sys; sys.modules['llama_index'] = None\n"  # as if llama-index-core were not installed
            "import unified_memory\n"
            "from unified_memory.errors import DependencyError\n"
            "try:\n"
            "    import unified_memory.integrations.llama_index\n"
            "except DependencyError as exc:\n"
            "    assert isinstance(exc, ImportError)\n"
            "    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert 'pip install "unified-memory[llama-index]"' in done.stdout
