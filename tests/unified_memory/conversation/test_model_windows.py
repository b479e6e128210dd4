"""The model context-window table and its lookup rules."""

from __future__ import annotations

import pytest

from unified_memory.conversation.model_windows import MODEL_CONTEXT_WINDOWS, context_window, register_model
from unified_memory.errors import MemoryTypeError, MemoryValueError


@pytest.mark.parametrize(("name", "window"), [
    ("gpt-4o", 128_000),
    ("gpt-4o-mini", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4.1-nano", 1_047_576),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o1", 200_000),
    ("o3-mini", 200_000),
    ("o4-mini", 200_000),
    ("gpt-5", 400_000),
    ("gpt-5-mini", 400_000),
    ("claude-opus-4", 200_000),
    ("claude-sonnet-4-5", 200_000),
    ("claude-3-haiku", 200_000),
    ("gemini-1.5-pro", 2_097_152),
    ("gemini-2.5-flash", 1_048_576),
    ("llama-3.3", 131_072),
    ("mistral-large", 131_072),
    ("deepseek-reasoner", 128_000),
])
def test_exact_names(name, window):
    assert context_window(name) == window


def test_dated_and_suffixed_names_use_the_longest_prefix():
    assert context_window("claude-haiku-4-5-20251001") == 200_000
    assert context_window("gpt-4o-2024-08-06") == 128_000
    assert context_window("gpt-4-0613") == 8_192
    assert context_window("gpt-4-turbo-2024-04-09") == 128_000
    assert context_window("gpt-4.1-mini-2025-04-14") == 1_047_576
    assert context_window("gemini-1.5-pro-002") == 2_097_152
    assert context_window("llama3.1:8b") == 131_072


def test_gpt_4o_mini_is_not_gpt_4o_and_gpt_4o_is_not_gpt_4(monkeypatch):
    monkeypatch.setitem(MODEL_CONTEXT_WINDOWS, "gpt-4o-mini", 111)
    assert context_window("gpt-4o-mini-2024-07-18") == 111
    assert context_window("gpt-4o-2024-05-13") == 128_000
    assert context_window("gpt-4") == 8_192


def test_a_prefix_must_end_at_a_separator():
    # "gpt-4" is a prefix of "gpt-4x" as a string but not as a model name
    with pytest.raises(MemoryValueError):
        context_window("gpt-4xyz")


def test_provider_prefixes_and_case():
    assert context_window("openai/gpt-4o") == 128_000
    assert context_window("anthropic/claude-3-5-sonnet-latest") == 200_000
    assert context_window("google/gemini-2.0-flash") == 1_048_576
    assert context_window("openrouter/meta-llama/Llama-3.1-70B-Instruct") == 131_072
    assert context_window("GPT-4O") == 128_000


def test_dotted_claude_versions():
    assert context_window("anthropic/claude-3.5-sonnet") == 200_000
    assert context_window("anthropic/claude-haiku-4.5") == 200_000
    assert context_window("anthropic/claude-opus-4.6") == 200_000


def test_unknown_model_names_the_field_and_the_fix():
    with pytest.raises(MemoryValueError) as info:
        context_window("totally-unknown-model")
    assert info.value.field == "model"
    assert "token_threshold" in str(info.value)
    with pytest.raises(MemoryTypeError):
        context_window(None)  # type: ignore[arg-type]


def test_register_model(monkeypatch):
    monkeypatch.setattr("unified_memory.conversation.model_windows.MODEL_CONTEXT_WINDOWS", dict(MODEL_CONTEXT_WINDOWS))
    register_model("Acme-Chat", 64_000)
    assert context_window("acme-chat") == 64_000
    assert context_window("vendor/acme-chat-v2") == 64_000
    register_model("gpt-4o", 1)  # overriding is allowed
    assert context_window("gpt-4o") == 1
    with pytest.raises(MemoryValueError):
        register_model("x", 0)
    with pytest.raises(MemoryValueError):
        register_model("  ", 10)
    with pytest.raises(MemoryTypeError):
        register_model("x", 1.5)  # type: ignore[arg-type]
    with pytest.raises(MemoryTypeError):
        register_model("x", True)  # type: ignore[arg-type]
