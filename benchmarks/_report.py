"""What every benchmark script shares: which code it measured, and writing its report.

    >>> library_version().startswith("git ")
    True
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_PACKAGES = ("unified_memory", "tiers", "scoring")


def sources_digest() -> str:
    """A short hash of the library's sources (changes with any edit, committed or not)."""
    sources = sorted(p for package in _PACKAGES for p in (ROOT / package).rglob("*.py"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:10]


def library_version() -> str:
    """The repository's commit (marked when the library has uncommitted changes) and a hash
    of the library's sources, so a report says which code it measured."""
    try:
        git = [subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True).stdout.strip()
               for cmd in (["rev-parse", "--short", "HEAD"], ["status", "--porcelain", *_PACKAGES])]
    except OSError:
        git = ["unknown", ""]
    return f"git {git[0] or 'unknown'}{' + uncommitted changes' if git[1] else ''}, sources {sources_digest()}"


def publish(text: str, out: Path) -> None:
    """Print a markdown report and write it to ``out`` (creating its folder)."""
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")


def machine() -> str:
    """The machine a report was measured on: CPU model, cores, RAM, Python and OS."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
        ram_s = f"{ram:.1f} GiB RAM"
    except (ValueError, OSError):
        ram_s = "RAM unknown"
    return f"{cpu}, {os.cpu_count()} cores, {ram_s}, Python {platform.python_version()} ({platform.system()})"
