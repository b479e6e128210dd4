"""Package-level guarantees: import order, light imports, layering, docs that run."""

from __future__ import annotations

import ast
import doctest
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scoring", "tiers", "unified_memory")
HEAVY = ("torch", "sentence_transformers", "chromadb", "redis", "openai", "sklearn", "fastapi", "uvicorn", "starlette",
         "httpx", "mcp", "llama_index", "agents", "langgraph", "langchain_core", "psycopg", "psycopg_pool",
         "usearch", "faiss", "crewai")


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("first", ["scoring", "tiers", "unified_memory", "tiers.storage.backend", "tiers.graph.entities",
                                   "tiers.records.types", "scoring.errors",
                                   "scoring.lexical", "unified_memory.memory"])
def test_any_package_can_be_imported_first(first):
    code = (f"import {first}\n"
            "import scoring.lexical, tiers.facts.long_term, tiers.short_term, unified_memory.memory\n"
            "from unified_memory import UnifiedMemory\n"
            "m = UnifiedMemory(); m.remember('I live in Lisbon'); assert m.recall('Lisbon'); print('ok')")
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_import_unified_memory_stays_light():
    code = ("import sys, unified_memory\n"
            "from unified_memory import UnifiedMemory\n"
            "UnifiedMemory().recall('x') if False else None\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _project_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.split(".")[0] in PACKAGES}


# The shared records and errors, defined at the lowest layer that uses them: each imports only these.
LEAVES = {"scoring.errors", "tiers.records.values", "tiers.records.types", "tiers.records.protocols"}


@pytest.mark.parametrize("package", ["scoring", "tiers"])
def test_imports_point_one_way(package):
    allowed_prefixes = {"scoring": ("scoring",), "tiers": ("scoring", "tiers")}[package]
    for path in (ROOT / package).rglob("*.py"):
        for name in _project_imports(path):
            assert name.startswith(allowed_prefixes), f"{path} imports {name}"


def test_leaf_modules_import_nothing_else_of_ours():
    for leaf in LEAVES:
        path = ROOT / (leaf.replace(".", "/") + ".py")
        assert _project_imports(path) <= LEAVES, leaf


def test_the_public_names_of_the_shared_records_and_errors_stay_in_the_front_package():
    import scoring.errors
    import tiers.records.protocols
    import tiers.records.types
    import unified_memory.errors
    import unified_memory.protocols
    import unified_memory.types
    for low, public in ((scoring.errors, unified_memory.errors), (tiers.records.types, unified_memory.types),
                        (tiers.records.protocols, unified_memory.protocols)):
        for name in low.__all__:
            assert getattr(public, name) is getattr(low, name), (public.__name__, name)
    assert set(unified_memory.errors.__all__) <= set(scoring.errors.__all__)
    # tracebacks and reprs show the name users import
    assert unified_memory.errors.NotFoundError.__module__ == "unified_memory.errors"
    assert repr(unified_memory.errors.MemoryValueError("x")) == "MemoryValueError('x')"


def _modules():
    for package in PACKAGES:
        module = importlib.import_module(package)
        yield package
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            yield info.name


def _import(name: str):
    """The module, or None for an adapter whose framework is installed in an environment of its own
    (unified_memory.integrations.crewai: CrewAI pins mcp<2, the server extra needs mcp>=2.3)."""
    from unified_memory.errors import DependencyError

    try:
        return importlib.import_module(name)
    except DependencyError:
        if name != "unified_memory.integrations.crewai":
            raise
        return None


@pytest.mark.parametrize("name", list(_modules()))
def test_docstring_examples_run(name):
    module = _import(name)
    if module is None:
        pytest.skip(f"{name}: its framework is not installed here")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_every_public_function_has_a_docstring():
    import inspect

    for name in _modules():
        module = _import(name)
        for attr in getattr(module, "__all__", []):
            obj = getattr(module, attr)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                assert obj.__doc__, f"{name}.{attr} has no docstring"


def _code_of_the_project():
    """(name, source) of every Python file and notebook code cell we ship or run."""
    for folder in (*PACKAGES, "benchmarks", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            yield str(path.relative_to(ROOT)), path.read_text()
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                yield f"{path.name} cell {i}", "\n".join(ln for ln in source.splitlines() if not ln.startswith(("%", "!")))


@pytest.mark.slow
def test_no_pickle_or_eval_in_the_code():
    unsafe_modules = {"pickle", "cPickle", "dill", "marshal", "shelve", "joblib"}
    unsafe_calls = {"eval", "exec", "compile", "__import__"}
    unsafe_loads = {("np", "load"), ("numpy", "load"), ("torch", "load"), ("yaml", "load"), ("yaml", "unsafe_load")}
    checked = 0
    for name, source in _code_of_the_project():
        tree = ast.parse(source)
        checked += 1
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in unsafe_calls, f"{name}:{node.lineno}: {node.func.id}()"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
                assert (node.func.value.id, node.func.attr) not in unsafe_loads, f"{name}:{node.lineno}"
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                assert not any(m and m.split(".")[0] in unsafe_modules for m in mods), f"{name}:{node.lineno}"
    assert checked > 150


def test_every_public_method_is_documented_in_the_api_reference():
    from unified_memory import UnifiedMemory

    reference = (ROOT / "docs" / "api.md").read_text()
    from unified_memory.coordinator.async_api import AsyncAPI

    own = [klass for klass in UnifiedMemory.__mro__  # the class and its layers, not the async twins
           if klass.__module__.startswith("unified_memory") and klass is not AsyncAPI]
    public = sorted({name for klass in own for name in vars(klass) if not name.startswith("_")})
    assert {"recall", "context", "facts", "add_turn", "summary"} <= set(public)
    missing = [name for name in public if f"{name}(" not in reference and f"`{name}`" not in reference]
    assert not missing, f"undocumented in docs/api.md: {missing}"


def test_readme_commands_match_ci():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in readme.splitlines() if "pytest" in line and "python3 -m venv" in line)
    assert test_command in ci


def test_every_row_of_the_migration_table_names_tests_that_exist():
    import re

    doc = (ROOT / "docs" / "migration.md").read_text()
    rows = [line for line in doc.splitlines()
            if line.startswith("| ") and not line.startswith("| Feature") and not line.startswith("|---")]
    assert len(rows) >= 80, len(rows)
    for row in rows:
        refs = re.findall(r"`(tests/[\w/]+\.py)::(test_\w+)`", row)
        assert refs, f"a migration row without a test: {row[:80]}"
        for path, name in refs:
            source = (ROOT / path).read_text()
            assert re.search(rf"^def {name}\(", source, re.MULTILINE), f"{path}::{name} does not exist"
