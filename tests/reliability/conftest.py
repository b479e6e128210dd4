"""Shared helpers of the reliability suite (issue 8): figures and scale.

Each reliability test reports what it tried through the ``figures`` fixture, e.g.
``figures("crash", kills=100, acknowledged=4123, lost=0)``. The figures are always
printed (``pytest -s`` shows them) and, when ``UM_RELIABILITY_REPORT`` names a file,
appended to it as one JSON object per line: ``benchmarks/reliability.py`` runs this
suite and turns that file into the README's reliability figures.

``UM_RELIABILITY_SCALE`` (default 1) multiplies the trial counts of the heavy tests
(:func:`scaled`), so the benchmark can run them harder than CI does.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import hypothesis_profiles


def scaled(count: int) -> int:
    """``count`` times ``UM_RELIABILITY_SCALE`` (a float, default 1) times the Hypothesis
    profile's factor (10 under ``thorough``: tests/hypothesis_profiles.py), at least 1.

    >>> scaled(100)  # with the variable unset
    100
    """
    try:
        factor = float(os.environ.get("UM_RELIABILITY_SCALE", "1"))
    except ValueError:
        factor = 1.0
    return max(1, round(count * factor * hypothesis_profiles.factor()))


def record_figures(test: str, name: str, **values: object) -> None:
    """Print one figures row and append it to ``UM_RELIABILITY_REPORT`` if set (see the module doc)."""
    row = {"test": test, "name": name, **values}
    print(f"[reliability] {json.dumps(row)}")
    target = os.environ.get("UM_RELIABILITY_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")


@pytest.fixture
def figures(request) -> Callable[..., None]:
    """Record the figures of one test: ``figures("name", key=number, ...)``."""

    def record(name: str, **values: object) -> None:
        record_figures(request.node.nodeid, name, **values)

    return record


@contextlib.contextmanager
def service_database(request: pytest.FixtureRequest, backend: str, directory: Path) -> Iterator[Path | str]:
    """Where a service (or any child process) keeps its memory: ``directory/memory.db`` on ``"sqlite"``; on
    ``"postgresql"`` a new database on the suite's server (its URL), dropped afterwards. (The
    ``storage_backend`` fixture redirects only this process's ``Storage``; a ``unified-memory
    serve`` child opens what it is given.)"""
    if backend != "postgresql":
        yield directory / "memory.db"
        return
    from tests.pg_server import create_database, drop_database, schema_template

    server = request.getfixturevalue("database_server")
    url = create_database(server, template=schema_template(server))
    try:
        yield url
    finally:
        drop_database(server, url.rsplit("/", 1)[1])


@contextlib.contextmanager
def one_per_backend(tmp_path_factory: pytest.TempPathFactory, name: str,
                    start: Callable[[Path | str], contextlib.AbstractContextManager[Any]]) -> Iterator[Any]:
    """For a module-scoped fixture: ``on(backend, request)`` gives what ``start(db)`` started on
    that backend's database (:func:`service_database`), started the first time it is asked for,
    and everything is stopped (and a PostgreSQL database dropped) when the block ends."""
    with contextlib.ExitStack() as stack:
        running: dict[str, Any] = {}

        def on(backend: str, request: pytest.FixtureRequest) -> Any:
            callspec = getattr(request.node, "callspec", None)  # [pgvector]: another server, another service
            variant = callspec.params.get("storage_backend", backend) if callspec is not None else backend
            if variant not in running:
                db = stack.enter_context(service_database(request, backend, tmp_path_factory.mktemp(name)))
                running[variant] = stack.enter_context(start(db))
            return running[variant]

        yield on
