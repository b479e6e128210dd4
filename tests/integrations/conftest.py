"""Keep the frameworks' process-wide side effects inside these tests.

LlamaIndex counts tokens with tiktoken's cl100k_base, loaded from a copy it ships. Once loaded,
the encoding stays in tiktoken's registry, and ``make_token_counter("auto")`` then counts with
tiktoken in every memory made afterwards in the process. The other tests expect the offline
chars/4 estimate, and the server they compare with in a separate process counts that way too.
So each test here hands back the encodings it loaded."""

from __future__ import annotations

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
