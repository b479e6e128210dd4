"""The SQL the library writes stays valid on PostgreSQL where that costs SQLite nothing (issue 19,
step 1 of docs/design/postgresql-survey.md): the ``window`` table is always quoted (a reserved word
in PostgreSQL), an always-true condition is ``TRUE`` rather than ``1``, and an upsert names the
target table's columns (PostgreSQL finds a bare name ambiguous next to ``excluded``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p for package in ("tiers", "unified_memory") for p in (ROOT / package).rglob("*.py"))


def _lines(pattern: str) -> list[str]:
    found = []
    for path in SOURCES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(pattern, line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_the_window_table_is_always_quoted():
    assert not _lines(r"\b(FROM|INTO|JOIN|UPDATE|ON|EXISTS|TABLE)\s+window\b")


def test_an_always_true_condition_is_true_not_1():
    assert not _lines(r"""["']1["'],\s*\[\]""")
    assert not _lines(r"\b(AND|WHERE|OR)\s+1\b(?!\s*[=<>!])")


def test_upserts_name_the_target_tables_columns():
    # "SET x = x + excluded.x" is ambiguous on PostgreSQL; "SET x = t.x + excluded.x" is valid in both
    assert not _lines(r"DO UPDATE SET\s+(\w+)\s*=\s*(MAX\()?\1\b")
    assert not _lines(r"=\s*MAX\((access_count|last_accessed),")


def test_the_portable_forms_still_work_on_sqlite(tmp_path):
    from unified_memory import UnifiedMemory

    with UnifiedMemory(tmp_path / "m.db", short_term_limit=2, retrieval="lexical") as mem:
        for i in range(4):
            mem.add_turn(f"I visited city number {i}", "Noted")
        assert len(mem.window()) == 2 and mem.stats().window_messages == 2
        assert [h.tier for h in mem.recall("city number 3", limit=3)]
        mem.remember_many(["I like tea", "My sister lives in Lisbon", "I keep bees"])
        everything = mem.facts()
        assert len(everything) >= 3 and mem.facts(offset=1) == everything[1:]
        assert mem.facts(limit=1, offset=1) == everything[1:2]
