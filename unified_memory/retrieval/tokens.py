"""Token counters: a chars/4 estimate that always works, and tiktoken when it can run offline.

unified-memory never downloads anything. tiktoken fetches an encoding's BPE file
from the network the first time it is used and keeps it in a cache folder, so
``make_token_counter("auto")`` uses tiktoken only when the file is already there
(and intact); otherwise it falls back to :func:`chars_per_token_counter`.

    >>> from unified_memory.retrieval.tokens import chars_per_token_counter, make_token_counter
    >>> chars_per_token_counter("I'm allergic to peanuts")
    6
    >>> make_token_counter("chars") is chars_per_token_counter
    True

Where tiktoken (0.7 to 0.14 at least, see ``tiktoken/load.py``) keeps its cache:
``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else
``<tempdir>/data-gym-cache``; the file is named by the sha1 of the blob URL and
must match a known sha256 (tiktoken deletes and re-downloads a file that does
not). An empty ``TIKTOKEN_CACHE_DIR`` disables the cache, so every load would
download: we treat that as "not available offline".
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from typing import Literal

from unified_memory.errors import DependencyError, invalid, wrong_type
from unified_memory.types import Message

__all__ = ["chars_per_token_counter", "make_token_counter", "message_tokens", "MESSAGE_OVERHEAD_TOKENS", "tiktoken_unavailable_reason",
           "tiktoken_cache_paths"]

_BLOB = "https://openaipublic.blob.core.windows.net/"
_CL100K = (_BLOB + "encodings/cl100k_base.tiktoken",
           "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7")
_O200K = (_BLOB + "encodings/o200k_base.tiktoken",
          "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d")
_P50K = (_BLOB + "encodings/p50k_base.tiktoken",
         "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069")
# encoding -> the (blob URL, sha256) pairs its constructor in tiktoken_ext/openai_public.py loads.
# A test checks this table against the installed tiktoken.
_TIKTOKEN_FILES: dict[str, tuple[tuple[str, str], ...]] = {
    "gpt2": ((_BLOB + "gpt-2/encodings/main/vocab.bpe",
              "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"),
             (_BLOB + "gpt-2/encodings/main/encoder.json",
              "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783")),
    "r50k_base": ((_BLOB + "encodings/r50k_base.tiktoken",
                   "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),),
    "p50k_base": (_P50K,),
    "p50k_edit": (_P50K,),
    "cl100k_base": (_CL100K,),
    "o200k_base": (_O200K,),
    "o200k_harmony": (_O200K,),
}
_CACHE_SIZE = 16384


def chars_per_token_counter(text: str) -> int:
    """Estimate tokens as ``ceil(len(text) / 4)``: no dependency, always offline.

    >>> chars_per_token_counter(""), chars_per_token_counter("abcd"), chars_per_token_counter("abcde")
    (0, 1, 2)
    """
    return (len(text) + 3) // 4


def _cache_dir() -> str:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def tiktoken_cache_paths(encoding: str = "cl100k_base") -> list[str]:
    """The cache files tiktoken reads for ``encoding`` (empty for an unknown encoding).

    >>> import os; os.path.basename(tiktoken_cache_paths("cl100k_base")[0])
    '9b5ad71b2ce5302211f9c61530b329a4922fc6a4'
    """
    directory = _cache_dir()
    return [os.path.join(directory, hashlib.sha1(url.encode()).hexdigest())
            for url, _ in _TIKTOKEN_FILES.get(encoding, ())]


def tiktoken_unavailable_reason(encoding: str = "cl100k_base") -> str | None:
    """``None`` when tiktoken can count with ``encoding`` without the network, else why not.

    Never imports more than tiktoken itself and never touches the network.

    >>> tiktoken_unavailable_reason("no_such_encoding") is not None
    True
    """
    try:
        import tiktoken
        import tiktoken.registry
    except ImportError:
        return "tiktoken is not installed: pip install 'unified-memory[tokens]'"
    if encoding in getattr(tiktoken.registry, "ENCODINGS", {}):
        return None  # already loaded in this process: no file needed
    if encoding not in _TIKTOKEN_FILES:
        return (f"unknown tiktoken encoding {encoding!r} (unified-memory can check the offline cache of: "
                f"{', '.join(sorted(_TIKTOKEN_FILES))})")
    directory = _cache_dir()
    if directory == "":
        return "TIKTOKEN_CACHE_DIR is empty, which disables tiktoken's cache: every load would download"
    for path, (url, sha256) in zip(tiktoken_cache_paths(encoding), _TIKTOKEN_FILES[encoding], strict=True):
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            return f"{url} is not in tiktoken's cache (expected at {path})"
        if hashlib.sha256(data).hexdigest() != sha256:
            return f"the cached copy of {url} at {path} is corrupt (sha256 mismatch)"
    return None


def _tiktoken_counter(encoding: str) -> Callable[[str], int]:
    import tiktoken

    enc = tiktoken.get_encoding(encoding)

    def count(text: str) -> int:
        return len(enc.encode_ordinary(text))  # special-token text counts as plain text, never raises

    count.__name__ = count.__qualname__ = f"tiktoken_{encoding}_counter"
    return functools.lru_cache(maxsize=_CACHE_SIZE)(count)


def make_token_counter(kind: Literal["auto", "chars", "tiktoken"] = "auto",
                       encoding: str = "cl100k_base") -> Callable[[str], int]:
    """Build a ``str -> int`` token counter.

    - ``"chars"``: :func:`chars_per_token_counter` itself.
    - ``"tiktoken"``: tiktoken with ``encoding``, memoised for repeated strings; raises
      :class:`~unified_memory.errors.DependencyError` (an ``ImportError``) saying how to
      install or cache it when it cannot run offline.
    - ``"auto"``: tiktoken when it can run offline, else chars/4. Never raises for a
      missing or uncached tiktoken, never downloads.

    >>> make_token_counter("auto")("hello world") >= 1
    True
    >>> make_token_counter("tiktoken", "no_such_encoding")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    unified_memory.errors.DependencyError: token_counter='tiktoken' cannot be used offline: ...
    """
    if not isinstance(kind, str):
        raise wrong_type("token_counter", "str ('auto', 'chars' or 'tiktoken')", kind)
    if not isinstance(encoding, str):
        raise wrong_type("encoding", "str", encoding)
    if kind == "chars":
        return chars_per_token_counter
    if kind not in ("auto", "tiktoken"):
        raise invalid("token_counter", f"expected 'auto', 'chars' or 'tiktoken', got {kind!r}")
    reason = tiktoken_unavailable_reason(encoding)
    if reason is None:
        try:
            return _tiktoken_counter(encoding)
        except Exception as exc:  # a broken install or cache must not break "auto"
            reason = f"tiktoken failed to load {encoding!r}: {type(exc).__name__}: {exc}"
    if kind == "auto":
        return chars_per_token_counter
    hint = ("; to cache an encoding, run once on a machine with internet and the same TIKTOKEN_CACHE_DIR: "
            f"python -c \"import tiktoken; tiktoken.get_encoding('{encoding}')\"; "
            "or use token_counter='chars' (or 'auto')")
    raise DependencyError(f"token_counter='tiktoken' cannot be used offline: {reason}{hint}",
                          field="token_counter")


MESSAGE_OVERHEAD_TOKENS = 4  # role and separators, as chat APIs bill each message


def message_tokens(message: Message, count_tokens: Callable[[str], int], *, image_token_estimate: int = 800) -> int:
    """Estimated tokens of one chat message as a model would be billed for it.

    Counts the content, the name, the tool calls and reasoning details (as compact
    JSON), ``image_token_estimate`` per image, plus :data:`MESSAGE_OVERHEAD_TOKENS`.

    >>> message_tokens(Message(role="user", content="abcd", images=["a.png"]), chars_per_token_counter,
    ...                image_token_estimate=800)
    805
    """
    total = MESSAGE_OVERHEAD_TOKENS + count_tokens(message.content or "")
    if message.name:
        total += count_tokens(message.name)
    for blob in (message.tool_calls, message.reasoning_details):
        if blob:
            total += count_tokens(json.dumps(blob, separators=(",", ":"), ensure_ascii=False))
    return total + image_token_estimate * len(message.images or ())
