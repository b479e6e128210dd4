"""No import circles between the modules of the three packages.

Every import counts, also one inside a function (imported lazily) or under
``TYPE_CHECKING``: both still tie the two modules together for a reader, a type
checker and the next refactoring. KNOWN lists the circles allowed to remain (none):
a new circle fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scoring", "tiers", "unified_memory")
KNOWN: list[set[str]] = []  # none left: the coordinator's layers take a typed view, not the class


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports anywhere in its body. ``from package import
    module`` is an edge to the module, ``from module import name`` one to the module."""
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                inner = [f"{node.module}.{alias.name}" for alias in node.names]
                targets = [t for t in inner if t in known] or [node.module]
            else:
                continue
            graph[name].update(t for t in targets if t in known and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_circle_finder_finds_circles_and_only_them():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set(), "f": {"g"}, "g": {"f"}}
    assert sorted(map(sorted, circles(graph))) == [["a", "b", "c"], ["f", "g"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_new_import_circle():
    graph = import_graph()
    assert "unified_memory.memory" in graph and "tiers.storage" in graph  # the walk found the packages
    unexpected = [sorted(c) for c in circles(graph) if c not in KNOWN]
    assert unexpected == [], f"import circles: {unexpected} (break them; see issue 15)"


def test_the_known_circles_are_still_real():
    """When a known circle is broken, take it off KNOWN so it cannot come back unnoticed."""
    found = circles(import_graph())
    assert [c for c in KNOWN if c not in found] == []
