"""Context-window sizes of common chat models, for deriving a compaction threshold.

    >>> from unified_memory.conversation.model_windows import context_window
    >>> context_window("gpt-4o")
    128000
    >>> context_window("anthropic/claude-haiku-4-5-20251001")
    200000

Lookup (case-insensitive): the exact name; else the name without its provider prefix
(anything up to the last ``/``); else the longest table key the name starts with, where
the key must end at a separator (``-``, ``.``, ``:``, ``@``, ``_``) or the end of the
name, so ``gpt-4o-2024-08-06`` is ``gpt-4o`` and ``gpt-4o-mini`` is ``gpt-4o-mini``.
Names written with dots in the version (``claude-3.5-sonnet``, as OpenRouter does) are
also tried with dashes. An unknown model raises
:class:`~unified_memory.errors.MemoryValueError` naming ``model``: pass an explicit
``token_threshold`` instead, or :func:`register_model` it.

This module imports only :mod:`unified_memory.errors`.
"""

from __future__ import annotations

from unified_memory.errors import invalid, wrong_type

__all__ = ["MODEL_CONTEXT_WINDOWS", "context_window", "register_model"]

MODEL_CONTEXT_WINDOWS: dict[str, int] = {
    # OpenAI, from the model pages of platform.openai.com/docs/models ("Context window").
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "chatgpt-4o-latest": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-4.5-preview": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-turbo-preview": 128_000,
    "gpt-4-1106-preview": 128_000,
    "gpt-4-0125-preview": 128_000,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-pro": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-pro": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-5-chat": 128_000,
    # Anthropic, from docs.anthropic.com "Models overview" (200K for every Claude 3 / 4 model).
    "claude-opus-4": 200_000,
    "claude-opus-4-1": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
    "claude-3-opus": 200_000,
    "claude-3-sonnet": 200_000,
    "claude-3-haiku": 200_000,
    # Google, from ai.google.dev/gemini-api/docs/models ("Input token limit").
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-2.0-flash-lite": 1_048_576,
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
    # Meta Llama 3.1 / 3.3 model cards (128K = 131072); "llama3.1" is Ollama's spelling.
    "llama-3.1": 131_072,
    "llama-3.3": 131_072,
    "llama3.1": 131_072,
    "llama3.3": 131_072,
    # Mistral, from docs.mistral.ai "Models overview" (128k).
    "mistral-large": 131_072,
    # DeepSeek, from api-docs.deepseek.com "Models & Pricing" (128K context).
    "deepseek-chat": 128_000,
    "deepseek-reasoner": 128_000,
}

_SEPARATORS = "-.:@_"


def _longest_prefix(name: str) -> str | None:
    best: str | None = None
    for key in MODEL_CONTEXT_WINDOWS:
        if name.startswith(key) and (len(name) == len(key) or name[len(key)] in _SEPARATORS):
            if best is None or len(key) > len(best):
                best = key
    return best


def context_window(model: str) -> int:
    """The context window (in tokens) of ``model``, looked up as the module docstring says.

    >>> context_window("gpt-4o-mini"), context_window("gpt-4o-2024-08-06")
    (128000, 128000)
    >>> context_window("openai/gpt-4.1-mini")
    1047576
    >>> context_window("claude-3.5-sonnet")
    200000
    >>> context_window("my-own-model")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: model: unknown context window for 'my-own-model'; ...
    """
    if not isinstance(model, str):
        raise wrong_type("model", "str", model)
    name = model.strip().lower()
    candidates = [name]
    if "/" in name:
        candidates.append(name.rsplit("/", 1)[1])
    for cand in list(candidates):
        if "." in cand:
            candidates.append(cand.replace(".", "-"))
    for cand in candidates:
        if cand in MODEL_CONTEXT_WINDOWS:
            return MODEL_CONTEXT_WINDOWS[cand]
    for cand in candidates:
        key = _longest_prefix(cand)
        if key is not None:
            return MODEL_CONTEXT_WINDOWS[key]
    raise invalid("model", f"unknown context window for {model!r}; pass token_threshold=<tokens> "
                           "explicitly, or register the model with register_model(name, window)")


def register_model(name: str, window: int) -> None:
    """Add (or override) a model's context window; later lookups use it, prefixes included.

    >>> register_model("my-local-llm", 32768)
    >>> context_window("My-Local-LLM-q4")
    32768
    """
    if not isinstance(name, str):
        raise wrong_type("name", "str", name)
    if not name.strip():
        raise invalid("name", "must be a non-empty model name")
    if isinstance(window, bool) or not isinstance(window, int):
        raise wrong_type("window", "int", window)
    if window < 1:
        raise invalid("window", f"must be at least 1, got {window}")
    MODEL_CONTEXT_WINDOWS[name.strip().lower()] = window
