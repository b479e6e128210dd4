"""Keep the frameworks' process-wide side effects inside these tests.

LlamaIndex counts tokens with tiktoken's cl100k_base, loaded from a copy it ships. Once loaded,
the encoding stays in tiktoken's registry, and ``make_token_counter("auto")`` then counts with
tiktoken in every memory made afterwards in the process. The other tests expect the offline
chars/4 estimate, and the server they compare with in a separate process counts that way too.
So each test here hands back the encodings it loaded."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def _no_encodings_left_behind() -> Iterator[None]:
    try:
        import tiktoken.registry
    except ImportError:
        yield
        return
    before = set(getattr(tiktoken.registry, "ENCODINGS", {}))
    yield
    loaded = getattr(tiktoken.registry, "ENCODINGS", {})
    for name in set(loaded) - before:
        del loaded[name]


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch):
    """``example("name")``: the module ``examples/name.py``, loaded as the CI runs it (offline; in a
    memory that is not kept: ``MEMORY_DB`` unset)."""
    import importlib.util
    from pathlib import Path

    monkeypatch.delenv("MEMORY_DB", raising=False)

    def load(name: str) -> Any:
        path = Path(__file__).resolve().parents[2] / "examples" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(f"{name}_example", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


# --- every adapter on the three memories: a SQLite file, PostgreSQL, the service ------------------

MEMORY_KINDS = ("sqlite", "postgresql", "remote")
_TEST_NUMBERS = itertools.count(1)


@pytest.fixture(scope="module")
def memory_service(tmp_path_factory):
    """One service (``unified-memory serve``, lexical, without MCP: no adapter uses it, and CrewAI's
    environment has an mcp our MCP server does not run on) per test module, on a SQLite file of its
    own; tests keep apart by user: ``make_memory`` gives each test users of its own."""
    pytest.importorskip("fastapi", reason="the service needs the http extra")
    from unified_memory.service.background import ServiceProcess

    with ServiceProcess(tmp_path_factory.mktemp("service") / "memory.db",
                        args=("--retrieval", "lexical", "--no-mcp")) as service:
        yield service


@pytest.fixture(params=MEMORY_KINDS)
def memory_kind(request) -> str:
    """``"sqlite"``, ``"postgresql"`` or ``"remote"`` (a ``RemoteMemory`` of the module's service)."""
    return str(request.param)


@pytest.fixture
def make_memory(memory_kind, tmp_path, request):
    """``make_memory(user_id="ada", **options)``: a memory of this test's kind for that user —
    a ``UnifiedMemory`` on a SQLite file of the test's own, or on a PostgreSQL database of its own,
    or a ``RemoteMemory`` with a key for the user. Remote users are the test's own (the service
    is shared by the module): the user id gets a suffix unique to the test, which ``user_id`` on
    the memory shows. Every memory made is closed after the test."""
    from unified_memory import RemoteMemory, UnifiedMemory

    made: list[Any] = []
    target: str | None = None
    if memory_kind == "postgresql":
        target = request.getfixturevalue("pg_url")
    elif memory_kind == "sqlite":
        target = str(tmp_path / "memory.db")
    service = request.getfixturevalue("memory_service") if memory_kind == "remote" else None
    suffix = f"-{next(_TEST_NUMBERS)}" if service is not None else ""
    keys: dict[str, str] = {}

    def make(user_id: str = "ada", **options: Any) -> Any:
        if service is None:
            memory = UnifiedMemory(target, user_id=user_id, **options)
        else:
            user = user_id + suffix
            if user not in keys:
                keys[user] = service.create_key(user)
            memory = RemoteMemory(service.url, keys[user], user_id=user, timeout=30, **options)
        made.append(memory)
        return memory

    yield make
    for memory in made:
        memory.close()
