"""The shape of the house (issue 15): rooms, module sizes, no reach-ins, a stable front door.

- at most 15 modules at the top of ``unified_memory/`` and 12 at the top of ``tiers/``; every room
  (subpackage) of both says what it is for;
- no module of the three packages over 500 lines;
- no code reaches into another object's private attributes (``obj._x`` where ``obj`` is not
  ``self`` / ``cls``), except inside a class that owns ``_x`` itself (another instance of it);
- no test reaches into a memory's internals (``mem._backend``, ``mem._view``): tests look under
  the hood through :func:`unified_memory.testing.internals` (issue 38);
- every name users imported from ``unified_memory`` before the rooms were built is still there,
  and the documented compat facades keep their paths.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scoring", "tiers", "unified_memory")
MAX_LINES = 500
MAX_TOP_MODULES = 15
MAX_TOP_TIERS = 12  # the tiers themselves at the top; storage, indexes, records, ... in rooms (issue 38)
# A memory's private parts: tests reach what is under them through unified_memory.testing.internals.
MEMORY_INTERNALS = ("._backend", "._view")
REACH_SAMPLE = "_reach_sample.py"  # written (and deleted) by test_the_reach_in_check_can_fail

# Every name of unified_memory.__all__ before the reorganisation (git f77f8e8); names may be added, never removed.
PUBLIC_NAMES = ['ClosedError', 'CompactionConfig', 'CompactionStats', 'ConfigError', 'ContextBlock', 'ContextConfig', 'Conversation', 'ConversationLog', 'ConversationState', 'ConversationStore', 'DependencyError', 'Embedder', 'Entity', 'Episode', 'EvictionConfig', 'ExtractedEntity', 'ExtractedFact', 'ExtractedTriple', 'Extraction', 'ExtractiveSummarizer', 'Extractor', 'Fact', 'HeuristicImportanceScorer', 'ImportanceScorer', 'InMemoryConversationStore', 'IngestReport', 'JSONConversationStore', 'LLM', 'LLMError', 'LLMExtractor', 'LLMSummarizer', 'MemoryConfig', 'MemoryEvent', 'MemoryMaxMessagesStrategy', 'MemoryMaxTokensStrategy', 'MemoryStats', 'MemoryStrategies', 'MemoryTool', 'MemoryTypeError', 'MemoryValueError', 'Message', 'NeuralyzerStrategy', 'NotFoundError', 'OpenAICompatibleLLM', 'RankingConfig', 'RecallHit', 'Redactor', 'RedisConversationStore', 'Reranker', 'RuleExtractor', 'SQLiteConversationStore', 'SecretRedactor', 'SectionUsage', 'StorageError', 'StoreUnavailableError', 'StrategyOutcome', 'SummarizationConfig', 'Summarizer', 'SummarizerStrategy', 'TokenCounter', 'ToolTruncationConfig', 'Triple', 'UnifiedMemory', 'UnifiedMemoryError', 'VectorConfig', 'VectorIndex', '__version__', 'as_llm', 'assess_importance', 'compact', 'context_window', 'get_store', 'ingest_file', 'load_long_term_strategy', 'load_short_term_strategy', 'load_strategies', 'make_token_counter', 'memory_tools', 'recall_tool', 'redact_secrets', 'register_model', 'register_store', 'remember', 'remember_tool', 'run_tool_call', 'score_importance']
COMPAT_FACADES = ["lauren", "marsys", "motus", "selectools"]


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_at_most_15_modules_at_the_top_of_the_front_door():
    top = sorted(p.name for p in (ROOT / "unified_memory").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_at_most_12_modules_at_the_top_of_tiers():
    top = sorted(p.name for p in (ROOT / "tiers").glob("*.py"))
    assert len(top) <= MAX_TOP_TIERS, top


@pytest.mark.parametrize("package", ["unified_memory", "tiers"])
def test_every_room_says_what_it_is_for(package):
    rooms = [p.parent for p in (ROOT / package).rglob("__init__.py") if p.parent.name != package]
    assert len(rooms) >= 7
    for room in rooms:
        doc = ast.get_docstring(ast.parse((room / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc) > 40, f"{room.relative_to(ROOT)}/__init__.py: say in two lines what the room is for"


def test_no_module_over_500_lines():
    long = {str(p.relative_to(ROOT)): n for p in _sources()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


def _owned(cls: ast.ClassDef) -> set[str]:
    """The private names a class defines: methods, class attributes, and self._x assignments."""
    names = set()
    for node in ast.walk(cls):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node in cls.body:
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            names.add(node.attr)
    return names


def reach_ins(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []

    def visit(node: ast.AST, owned: set[str]) -> None:
        if isinstance(node, ast.ClassDef):
            owned = owned | _owned(node)
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and not (isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                         and node.value.func.id == "super")
                and node.attr not in owned):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, owned)

    visit(tree, set())
    return found


def test_no_code_reaches_into_another_objects_private_attributes():
    found = [hit for path in _sources() for hit in reach_ins(path)]
    assert not found, "\n".join(found)


def memory_reach_ins(paths: list[Path]) -> list[str]:
    """The reach-ins into a memory's internals (``x._backend``, ``x._view``) in these files."""
    return [hit for path in paths for hit in reach_ins(path) if hit.endswith(MEMORY_INTERNALS)]


def test_no_test_reaches_into_a_memorys_internals():
    tests = sorted(p for p in (ROOT / "tests").rglob("*.py") if p.name != REACH_SAMPLE)
    assert ROOT / "tests" / "conftest.py" in tests and len(tests) > 100  # the walk found the tests
    found = memory_reach_ins(tests)
    assert not found, "use unified_memory.testing.internals(mem):\n" + "\n".join(found)


def test_the_reach_in_check_can_fail(tmp_path):
    bad = ROOT / "tests" / REACH_SAMPLE
    try:
        bad.write_text("def f(mem):\n    return mem._backend\n\nclass A:\n    def g(self, other):\n"
                       "        self._x = 1\n        return other._x\n")
        assert reach_ins(bad) == ["tests/_reach_sample.py:2: mem._backend"]
        assert memory_reach_ins([bad]) == ["tests/_reach_sample.py:2: mem._backend"]
        bad.write_text("def h(mem):\n    return mem._view.backend, mem._viewer\n")
        assert memory_reach_ins([bad]) == ["tests/_reach_sample.py:2: mem._view"]  # not mem._viewer
    finally:
        bad.unlink()


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_every_public_name_is_still_importable(name):
    import unified_memory

    assert name in unified_memory.__all__
    assert getattr(unified_memory, name) is not None


@pytest.mark.parametrize("facade", COMPAT_FACADES)
def test_the_compat_facades_keep_their_paths(facade):
    module = importlib.import_module(f"unified_memory.compat.{facade}")
    assert module.__all__
