"""Keep the frameworks' process-wide side effects inside these tests.

LlamaIndex counts tokens with tiktoken's cl100k_base, loaded from a copy it ships. Once loaded,
the encoding stays in tiktoken's registry, and ``make_token_counter("auto")`` then counts with
tiktoken in every memory made afterwards in the process. The other tests expect the offline
chars/4 estimate, and the server they compare with in a separate process counts that way too.
So each test here hands back the encodings it loaded."""

from __future__ import annotations

from collections.abc import Iterator

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
