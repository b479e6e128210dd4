"""Shared fixtures: a controllable clock and fresh memories."""

from __future__ import annotations

import pytest

DAY = 86400.0
T0 = 1_700_000_000.0  # 2023-11-14, a fixed "now" so tests are repeatable


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = T0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, *, days: float = 0.0, seconds: float = 0.0) -> None:
        self.now += days * DAY + seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(clock):
    from unified_memory import UnifiedMemory

    with UnifiedMemory(clock=clock) as memory:
        yield memory


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "memory.db"


@pytest.fixture(autouse=True)
def lexical_by_default(request, monkeypatch):
    """``retrieval="auto"`` resolves to lexical in tests unless a test is marked
    ``embeddings``: unit tests stay fast and exact; tests that want dense retrieval
    pass an embedder or carry the mark (and then get the real bundled model)."""
    if request.node.get_closest_marker("embeddings") is None:
        import unified_memory.retrieval

        monkeypatch.setattr(unified_memory.retrieval, "embeddings_available", lambda: False)


@pytest.fixture(autouse=True, scope="session")
def model_cache_in_a_temporary_folder(tmp_path_factory):
    """Exported models (scoring.onnx_query) go to a folder of this test session, not ~/.cache."""
    import os

    previous = os.environ.get("UNIFIED_MEMORY_CACHE")
    os.environ["UNIFIED_MEMORY_CACHE"] = str(tmp_path_factory.mktemp("model-cache"))
    yield
    if previous is None:
        os.environ.pop("UNIFIED_MEMORY_CACHE", None)
    else:
        os.environ["UNIFIED_MEMORY_CACHE"] = previous
