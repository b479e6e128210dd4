"""Token counters: chars/4 always, tiktoken only when it can run offline, never the network."""

from __future__ import annotations

import doctest
import hashlib
import importlib
import importlib.util
import os
import socket
import sys
import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

import unified_memory.retrieval.tokens as tokens
from unified_memory.errors import DependencyError, MemoryValueError
from unified_memory.retrieval.tokens import (
    chars_per_token_counter,
    make_token_counter,
    tiktoken_cache_paths,
    tiktoken_unavailable_reason,
)

HAVE_TIKTOKEN = importlib.util.find_spec("tiktoken") is not None
needs_tiktoken = pytest.mark.skipif(not HAVE_TIKTOKEN, reason="tiktoken is not installed")
if HAVE_TIKTOKEN:
    tiktoken = importlib.import_module("tiktoken")
    tiktoken_load = importlib.import_module("tiktoken.load")
    tiktoken_registry = importlib.import_module("tiktoken.registry")


@pytest.fixture
def offline(monkeypatch):
    """Any attempt to reach the network fails the test loudly."""

    def refuse(*args, **kwargs):
        raise AssertionError("tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    if HAVE_TIKTOKEN:
        monkeypatch.setattr(tiktoken_load, "read_file", refuse)


@pytest.fixture
def empty_cache(monkeypatch, tmp_path, offline):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delitem(tiktoken_registry.ENCODINGS, "cl100k_base", raising=False)
    return tmp_path


def test_chars_counter_examples():
    assert [chars_per_token_counter(t) for t in ("", "a", "abcd", "abcde", "x" * 400)] == [0, 1, 1, 2, 100]


@given(st.text())
def test_chars_counter_is_ceil_of_quarter(text):
    assert chars_per_token_counter(text) == -(-len(text) // 4)
    assert chars_per_token_counter(text + "x") >= chars_per_token_counter(text)


def test_chars_kind_is_the_plain_function():
    assert make_token_counter("chars") is chars_per_token_counter


def test_unknown_kind_names_the_field():
    with pytest.raises(MemoryValueError) as info:
        make_token_counter("words")  # type: ignore[arg-type]
    assert info.value.field == "token_counter"


@needs_tiktoken
def test_auto_falls_back_to_chars_when_the_encoding_is_not_cached(empty_cache):
    assert make_token_counter("auto") is chars_per_token_counter
    assert "not in tiktoken's cache" in tiktoken_unavailable_reason("cl100k_base")


@needs_tiktoken
def test_explicit_tiktoken_without_cache_raises_with_a_hint(empty_cache):
    with pytest.raises(DependencyError) as info:
        make_token_counter("tiktoken")
    assert isinstance(info.value, ImportError)
    assert info.value.field == "token_counter"
    message = str(info.value)
    assert "TIKTOKEN_CACHE_DIR" in message and "get_encoding('cl100k_base')" in message
    assert "token_counter='chars'" in message


@needs_tiktoken
def test_corrupt_cache_file_is_not_used_and_not_touched(empty_cache):
    (path,) = tiktoken_cache_paths("cl100k_base")
    with open(path, "wb") as fh:
        fh.write(b"not the real file")
    assert make_token_counter("auto") is chars_per_token_counter
    assert "corrupt" in tiktoken_unavailable_reason("cl100k_base")
    with pytest.raises(DependencyError):
        make_token_counter("tiktoken")
    assert os.path.exists(path)  # tiktoken would have deleted it and re-downloaded


@needs_tiktoken
def test_empty_cache_dir_means_no_cache(monkeypatch, offline):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    monkeypatch.delitem(tiktoken_registry.ENCODINGS, "cl100k_base", raising=False)
    assert "disables" in tiktoken_unavailable_reason("cl100k_base")
    assert make_token_counter("auto") is chars_per_token_counter


@needs_tiktoken
def test_unknown_encoding(offline):
    assert make_token_counter("auto", "no_such_encoding") is chars_per_token_counter
    with pytest.raises(DependencyError, match="unknown tiktoken encoding"):
        make_token_counter("tiktoken", "no_such_encoding")


def test_tiktoken_not_installed(monkeypatch, offline):
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    monkeypatch.setitem(sys.modules, "tiktoken.registry", None)
    assert "not installed" in tiktoken_unavailable_reason()
    assert make_token_counter("auto") is chars_per_token_counter
    with pytest.raises(DependencyError, match=r"unified-memory\[tokens\]"):
        make_token_counter("tiktoken")


def test_cache_dir_precedence(monkeypatch):
    name = hashlib.sha1(b"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken").hexdigest()
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    assert tiktoken_cache_paths() == [os.path.join(tempfile.gettempdir(), "data-gym-cache", name)]
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", "/gym")
    assert tiktoken_cache_paths() == [os.path.join("/gym", name)]
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "/tik")
    assert tiktoken_cache_paths() == [os.path.join("/tik", name)]


@needs_tiktoken
def test_cache_paths_agree_with_installed_tiktoken(monkeypatch, tmp_path, offline):
    """tiktoken's own read_file_cached writes exactly where we look."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken_load, "read_file", lambda blobpath: b"fake " + blobpath.encode())
    for encoding, files in tokens._TIKTOKEN_FILES.items():
        for path, (url, _) in zip(tiktoken_cache_paths(encoding), files, strict=True):
            tiktoken_load.read_file_cached(url)
            with open(path, "rb") as fh:
                assert fh.read() == b"fake " + url.encode()


@needs_tiktoken
def test_file_table_matches_installed_tiktoken(monkeypatch, offline):
    """Every encoding tiktoken_ext.openai_public knows loads exactly the files and hashes we check."""
    import tiktoken_ext.openai_public as public

    seen: list[tuple[str, str]] = []

    def fake_bpe(url, expected_hash=None):
        seen.append((url, expected_hash))
        return {b"a": 0}

    def fake_gym(vocab_bpe_file, encoder_json_file, vocab_bpe_hash=None, encoder_json_hash=None, **_):
        seen.extend([(vocab_bpe_file, vocab_bpe_hash), (encoder_json_file, encoder_json_hash)])
        return {b"a": 0}

    monkeypatch.setattr(public, "load_tiktoken_bpe", fake_bpe)
    monkeypatch.setattr(public, "data_gym_to_mergeable_bpe_ranks", fake_gym)
    for encoding, constructor in public.ENCODING_CONSTRUCTORS.items():
        seen.clear()
        constructor()
        assert tuple(seen) == tokens._TIKTOKEN_FILES[encoding], encoding


class _FakeEncoding:
    name = "fake_enc"

    def __init__(self):
        self.calls = 0

    def encode_ordinary(self, text):
        self.calls += 1
        return text.split()


@needs_tiktoken
def test_loaded_encoding_is_used_and_memoised(monkeypatch, offline):
    fake = _FakeEncoding()
    monkeypatch.setitem(tiktoken_registry.ENCODINGS, "fake_enc", fake)
    assert tiktoken_unavailable_reason("fake_enc") is None
    for kind in ("auto", "tiktoken"):
        count = make_token_counter(kind, "fake_enc")
        assert count is not chars_per_token_counter
        assert count("a b <|endoftext|>") == 3
        assert count("a b <|endoftext|>") == 3
    assert fake.calls == 2  # one per counter: the repeat came from the cache


@needs_tiktoken
def test_broken_tiktoken_load_falls_back(monkeypatch, offline):
    monkeypatch.setattr(tokens, "tiktoken_unavailable_reason", lambda encoding: None)

    def boom(name):
        raise RuntimeError("broken install")

    monkeypatch.setattr(tiktoken, "get_encoding", boom)
    assert make_token_counter("auto") is chars_per_token_counter
    with pytest.raises(DependencyError, match="broken install"):
        make_token_counter("tiktoken")


@pytest.mark.skipif(tiktoken_unavailable_reason("cl100k_base") is not None,
                    reason="cl100k_base is not cached offline on this machine")
def test_real_tiktoken_when_cached(offline):
    count = make_token_counter("auto")
    assert count is not chars_per_token_counter
    assert count("hello world") == 2
    assert count("<|endoftext|>") > 1  # special tokens are counted as text, not refused


def test_docstring_examples():
    result = doctest.testmod(tokens, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
