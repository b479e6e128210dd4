"""Output helpers of the command line: aligned text tables, JSON documents, a progress bar.

No dependencies beyond the standard library (and pydantic for the records' ``model_dump``).

    >>> print(format_table(["n", "text"], [[1, "one"], [22, "twenty-two"]]))
     n  text
    --  ----------
     1  one
    22  twenty-two
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO

__all__ = ["format_table", "format_pairs", "cell", "to_jsonable", "dump_json", "terminal_width", "progress", "ProgressBar"]

_MIN_TEXT_WIDTH = 12


def terminal_width(default: int = 100) -> int:
    """The width of the terminal (``COLUMNS`` when set; ``default`` when there is none).

    >>> terminal_width() > 0
    True
    """
    return max(40, shutil.get_terminal_size((default, 24)).columns)


def cell(value: Any) -> str:
    """One value as table text: floats with 2 decimals, datetimes to the minute, None as ``-``.

    >>> cell(0.8567), cell(None), cell(True), cell("a\\nb"), cell(["ada", "bob"])
    ('0.86', '-', 'yes', 'a b', 'ada, bob')
    """
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M}"
    if isinstance(value, list | tuple):
        return ", ".join(cell(v) for v in value) or "-"
    return " ".join(str(value).split())


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _truncate(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, width: int | None = None) -> str:
    """Rows as an aligned text table under ``headers`` (numeric columns right-aligned).

    When the table is wider than ``width`` (the terminal's by default), the widest
    text columns are truncated with ``…`` until it fits.

    >>> print(format_table(["score", "text"], [[0.5, "a long sentence about peanuts"]], width=22))
    score  text
    -----  ---------------
     0.50  a long sentenc…
    """
    table = [[cell(v) for v in row] for row in rows]
    heads = [str(h) for h in headers]
    widths = [max([len(h)] + [len(r[i]) for r in table]) for i, h in enumerate(heads)]
    numeric = [bool(table) and all(_is_number(r[i]) or r[i] == "-" for r in table) for i in range(len(heads))]
    limit = width if width is not None else terminal_width()
    gap = 2
    while sum(widths) + gap * (len(widths) - 1) > limit:
        widest = max(range(len(widths)), key=lambda i: (not numeric[i], widths[i]))
        if numeric[widest] or widths[widest] <= _MIN_TEXT_WIDTH:
            break
        excess = sum(widths) + gap * (len(widths) - 1) - limit
        widths[widest] = max(_MIN_TEXT_WIDTH, widths[widest] - excess, len(heads[widest]))
    lines = []
    for row in [heads, ["-" * w for w in widths], *table]:
        parts = []
        for i, text in enumerate(row):
            text = _truncate(text, widths[i])
            parts.append(text.rjust(widths[i]) if numeric[i] else text.ljust(widths[i]))
        lines.append((" " * gap).join(parts).rstrip())
    return "\n".join(lines)


def format_pairs(pairs: Iterable[tuple[str, Any]]) -> str:
    """``key  value`` lines with the values aligned (a record shown field by field).

    >>> print(format_pairs([("facts", 3), ("path", None)]))
    facts  3
    path   -
    """
    pairs = [(str(k), cell(v)) for k, v in pairs]
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)}  {v}".rstrip() for k, v in pairs)


def to_jsonable(value: Any) -> Any:
    """Records (pydantic models, dataclasses), mappings and sequences as plain JSON values.

    >>> from unified_memory.types import SectionUsage
    >>> to_jsonable({"usage": [SectionUsage(name="facts", budget=10, tokens=4, items=1)]})
    {'usage': [{'name': 'facts', 'budget': 10, 'tokens': 4, 'items': 1, 'dropped': 0}]}
    """
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def dump_json(value: Any, out: TextIO | None = None) -> None:
    """Write ``value`` as one indented JSON document (and a newline) to ``out`` (stdout).

    >>> dump_json({"facts": 3})
    {
      "facts": 3
    }
    """
    out = out if out is not None else sys.stdout
    out.write(json.dumps(to_jsonable(value), indent=2, ensure_ascii=False) + "\n")


class ProgressBar:
    """A ``\\r[#####     ] 12/40`` bar on a terminal stream; a no-op on anything else.

    Call it with ``(done, total)`` as work advances (``total`` may be None to keep the
    one given at creation) and :meth:`close` it at the end (or use it in ``with``).

    >>> import io
    >>> bar = ProgressBar(40, stream=io.StringIO())   # not a TTY: draws nothing
    >>> bar(12, 40); bar.active
    False
    """

    def __init__(self, total: int | None, *, stream: TextIO | None = None, width: int = 30) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.total = total
        self.width = width
        isatty = getattr(self.stream, "isatty", None)
        self.active = bool(isatty and isatty())
        self._last: str | None = None

    def __call__(self, done: int, total: int | None = None) -> None:
        """Show ``done`` of ``total`` (or of the total given at creation)."""
        if total is not None:
            self.total = total
        if not self.active:
            return
        total = self.total or 0
        filled = self.width if total <= 0 else min(self.width, int(self.width * done / total))
        line = f"\r[{'#' * filled}{' ' * (self.width - filled)}] {done}/{total if total else '?'}"
        if line != self._last:
            self.stream.write(line)
            self.stream.flush()
            self._last = line

    def close(self) -> None:
        """End the bar's line (once something was drawn)."""
        if self.active and self._last is not None:
            self.stream.write("\n")
            self.stream.flush()
        self._last = None

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(total: int | None = None, *, stream: TextIO | None = None) -> ProgressBar:
    """A progress callback ``(done, total)`` drawing a bar on stderr when it is a TTY (a no-op otherwise).

    The returned :class:`ProgressBar` is also a context manager that ends the line.

    >>> report = progress(3)
    >>> for done in range(1, 4):
    ...     report(done, 3)
    """
    return ProgressBar(total, stream=stream)
