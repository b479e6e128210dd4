"""The notebooks in ``notebooks/`` run top to bottom, in a real kernel of this interpreter.

Each notebook is executed with nbclient in a temporary working directory, with
``UNIFIED_MEMORY_DB`` pointing at a file that does not exist (so the explore notebook
builds its own memory from the sample conversation) and ``HF_HUB_OFFLINE=1`` (the
bundled embedding model loads offline when the ``embeddings`` extra is installed).
The kernel is this interpreter, whatever ``python`` on the PATH is: the test writes
its own ``python3`` kernelspec, found first through ``JUPYTER_PATH``.

The committed notebooks carry no outputs (they are executed here, not stored run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CELL_TIMEOUT = 120  # seconds per cell
CHART_VIEWS = 6  # explore_memory.ipynb draws one figure per view


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """A ``python3`` kernelspec on this interpreter, and the environment the kernel inherits."""
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (tests)", "language": "python",
    }), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("UNIFIED_MEMORY_DB", str(tmp_path / "nowhere" / "memory.db"))
    monkeypatch.delenv("UNIFIED_MEMORY_USER", raising=False)
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws the PNGs
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))  # the notebooks' temporary folders, cleaned up by pytest
    workdir = tmp_path / "work"
    workdir.mkdir()
    return workdir


def execute(name: str, workdir: Path) -> nbformat.NotebookNode:
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT, startup_timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})
    client.execute()  # raises CellExecutionError naming the cell when one fails
    return notebook


def outputs(notebook: nbformat.NotebookNode) -> list[dict]:
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


def assert_no_errors(notebook: nbformat.NotebookNode) -> None:
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in outputs(notebook) if o.get("output_type") == "error"]
    assert not errors, errors


def text_of(notebook: nbformat.NotebookNode) -> str:
    parts = []
    for output in outputs(notebook):
        if output.get("output_type") == "stream":
            parts.append(output.get("text", ""))
        elif "data" in output:
            parts.append(output["data"].get("text/plain", ""))
    return "".join(parts)


@pytest.mark.slow
@pytest.mark.embeddings  # retrieval="auto" in the kernel: hybrid, on the bundled model, when installed
def test_explore_memory_notebook_draws_every_view(kernel_env):
    notebook = execute("explore_memory.ipynb", kernel_env)
    assert_no_errors(notebook)
    images = [o for o in outputs(notebook) if "image/png" in o.get("data", {})]
    assert len(images) >= CHART_VIEWS
    text = text_of(notebook)
    assert "from the sample conversation" in text  # UNIFIED_MEMORY_DB named no file: it built its own
    assert "<memory>" in text  # the context block of the last view
    assert "as of 2024-02-01: 'I live in Lisbon' (active)" in text  # the history view: what was true then
    assert "as of 2024-04-01: 'I live in Porto since March 2024' (active)" in text
    assert not list(kernel_env.iterdir())  # nothing written to the working directory


@pytest.mark.slow
def test_agent_decorator_notebook_runs_its_checks(kernel_env):
    notebook = execute("agent_decorator.ipynb", kernel_env)
    assert_no_errors(notebook)
    assert sum("assert " in cell.source for cell in notebook.cells if cell.cell_type == "code") >= 5
    assert "agent walk-through: all checks passed" in text_of(notebook)


@pytest.mark.parametrize("name", ["explore_memory.ipynb", "agent_decorator.ipynb"])
def test_committed_notebooks_have_no_outputs(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)
    assert notebook.metadata.kernelspec.name == "python3"
    assert any(cell.cell_type == "markdown" for cell in notebook.cells)


#: The distribution that provides each third-party module a notebook imports.
_PROVIDERS = {"matplotlib": "matplotlib", "networkx": "networkx", "IPython": "ipykernel"}


def test_the_notebooks_extra_installs_what_they_import_and_the_readme_runs_them():
    """``pip install -e ".[notebooks]"`` gives the notebooks every module they import, a kernel and
    Jupyter; the README shows the command."""
    import ast
    import re
    import tomllib

    root = NOTEBOOKS.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = {re.split(r"[<>=\[ ]", requirement)[0] for requirement in extras["notebooks"]}
    assert {"jupyterlab", "ipykernel", "nbclient", "unified-memory"} <= wanted
    assert "unified-memory[embeddings]" in extras["notebooks"]  # the explore notebook ranks hybrid
    imported: set[str] = set()
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                source = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
                for node in ast.walk(ast.parse(source)):  # (IPython's magics left out)
                    if isinstance(node, ast.Import):
                        imported.update(alias.name.split(".")[0] for alias in node.names)
                    elif isinstance(node, ast.ImportFrom) and node.module:
                        imported.add(node.module.split(".")[0])
    third_party = {name for name in imported if name not in sys.stdlib_module_names and name != "unified_memory"}
    assert third_party, "no third-party import found: the scan is broken"
    for module in third_party:
        assert _PROVIDERS.get(module) in wanted, f"{module} is imported by a notebook but not in the notebooks extra"
    readme = (root / "README.md").read_text()
    assert '.venv/bin/pip install -q -e ".[notebooks]"' in readme
    assert "jupyter execute notebooks/explore_memory.ipynb notebooks/agent_decorator.ipynb" in readme
