"""No import circles between the modules of the three packages, and imports that point down.

Every import counts, also one inside a function (imported lazily) or under
``TYPE_CHECKING``: both still tie the two modules together for a reader, a type
checker and the next refactoring. KNOWN lists the circles allowed to remain (none):
a new circle fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("scoring", "tiers", "unified_memory")
KNOWN: list[set[str]] = []  # none left: the coordinator's layers take a typed view, not the class
MAY_IMPORT = re.compile(r"^May import[^:]*:(.*?)(?:\n\s*\n|\Z)", re.S | re.M)


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
    assert "unified_memory.memory" in graph and "tiers.storage.backend" in graph  # the walk found the packages
    unexpected = [sorted(c) for c in circles(graph) if c not in KNOWN]
    assert unexpected == [], f"import circles: {unexpected} (break them; see issue 15)"


def test_the_known_circles_are_still_real():
    """When a known circle is broken, take it off KNOWN so it cannot come back unnoticed."""
    found = circles(import_graph())
    assert [c for c in KNOWN if c not in found] == []


def rooms() -> dict[str, set[str]]:
    """Each room of ``scoring`` and ``tiers`` (a package with an ``__init__``) -> the rooms its
    docstring says it may import (its ``May import:`` paragraph, by their ``:mod:`` names)."""
    declared = {}
    for package in ("scoring", "tiers"):
        for init in (ROOT / package).rglob("__init__.py"):
            name = ".".join(init.parent.relative_to(ROOT).parts)
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
            found = MAY_IMPORT.search(doc)
            assert found, f"{init}: its docstring must say what the room may import ('May import: ...')"
            declared[name] = set(re.findall(r":mod:`~?([\w.]+)`", found.group(1)))
    # a module named there stands for its room (``tiers.candidates``: the modules at the top of tiers)
    return {name: {room_of(target, declared) for target in allowed} for name, allowed in declared.items()}


def room_of(module: str, declared: dict[str, set[str]]) -> str:
    """The innermost room holding a module (a module of ``unified_memory`` is in ``unified_memory``)."""
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        if ".".join(parts[:size]) in declared:
            return ".".join(parts[:size])
    return parts[0]


def test_imports_point_down_as_each_room_says():
    """An import from one room into another is one the importing room's docstring allows; the
    allowed arrows form no circle; ``scoring`` imports nothing of ours and ``tiers`` only
    ``scoring``: nothing below the front door reaches up into it."""
    declared = rooms()
    assert {"scoring", "tiers", "tiers.records", "tiers.storage", "tiers.indexes"} <= set(declared)
    upward = []
    for module, targets in import_graph().items():
        home = room_of(module, declared)
        for target in targets:
            there = room_of(target, declared)
            if there != home and home != "unified_memory" and there not in declared[home]:
                upward.append(f"{module} -> {target}")
    assert upward == []
    for room, allowed in declared.items():
        assert allowed <= set(declared), f"{room} names {allowed - set(declared)}, not a room"
        assert not any(name.startswith("unified_memory") for name in allowed)
    assert declared["scoring"] == set()
    assert circles({room: allowed - {room} for room, allowed in declared.items()}) == []


def test_a_module_importing_upward_is_caught():
    declared = {"scoring": set(), "tiers": {"scoring"}, "tiers.records": {"scoring"}}
    assert room_of("tiers.records.types", declared) == "tiers.records"
    assert room_of("tiers.episodic", declared) == "tiers"
    assert room_of("unified_memory.memory", declared) == "unified_memory"
    assert "tiers" not in declared[room_of("tiers.records.types", declared)]  # records may not import the top
