"""Without a framework installed, its adapter says what to install (and the core never needs it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("framework", "adapter", "extra"), [("llama_index", "llama_index", "llama-index"),
                                                            ("agents", "openai_agents", "openai-agents"),
                                                            ("langgraph", "langgraph", "langgraph"),
                                                            ("autogen_core", "autogen", "autogen"),
                                                            ("google.adk", "google_adk", "google-adk")])
def test_an_adapter_without_its_framework_raises_the_install_hint(framework, adapter, extra):
    code = (f"import sys; sys.modules[{framework!r}] = None\n"  # as if the framework were not installed
            "import unified_memory\n"
            "from unified_memory.errors import DependencyError\n"
            "try:\n"
            f"    import unified_memory.integrations.{adapter}\n"
            "except DependencyError as exc:\n"
            "    assert isinstance(exc, ImportError)\n"
            "    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f'pip install "unified-memory[{extra}]"' in done.stdout
