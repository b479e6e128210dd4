"""A fast path for embedding a query: the same model, exported to ONNX Runtime.

PyTorch's eager mode spends most of a short query's time on per-operator
overhead: all-MiniLM-L6-v2 takes 12–20 ms for a 5–20-token question on a
2-core CPU, ONNX Runtime 4–7 ms for the same vectors (they agree to 1e-6).
The export is made once per machine and model, on first use, by
:mod:`scoring.onnx_export` into a cache folder (``$UNIFIED_MEMORY_CACHE``, else
``~/.cache/unified-memory``), checked against PyTorch on probe texts, and recorded
as verified in a JSON manifest beside it (:mod:`scoring.onnx_manifest`).

After that, :func:`verified_query_encoder` embeds queries without importing
PyTorch, transformers or sentence-transformers: the tokenizer is the model
folder's ``tokenizer.json`` run by the ``tokenizers`` library (same lower-casing,
same truncation at the model's ``max_seq_length``) and the export runs in
``onnxruntime``. Importing torch costs several seconds; this is what lets a
command-line recall start in about a second. It returns ``None`` — and the caller
falls back to PyTorch — when ``onnxruntime`` or ``tokenizers`` is missing, there
is no export or manifest yet, or the manifest does not match the model files or
the installed runtimes.

    >>> verified_query_encoder(Path("/no/such/model")) is None
    True
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scoring.linalg import unit_rows
from scoring.model_fingerprint import folder_fingerprint
from scoring.onnx_manifest import EXPORT_FORMAT, read_manifest

__all__ = ["OnnxQueryEncoder", "cache_folder", "export_path", "model_key", "runtime_versions", "load_session",
           "folder_tokenizer", "verified_query_encoder"]

_LOG = logging.getLogger(__name__)
_RUNTIMES = ("onnxruntime", "tokenizers")


def cache_folder() -> Path:
    """Where exported models are kept: ``$UNIFIED_MEMORY_CACHE`` or ``~/.cache/unified-memory``.

    >>> cache_folder().name in ("unified-memory", os.environ.get("UNIFIED_MEMORY_CACHE", "x").rsplit("/", 1)[-1])
    True
    """
    configured = os.environ.get("UNIFIED_MEMORY_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "unified-memory"


def export_path(key: str) -> Path:
    """The export of the model with this key (its manifest: the same path ending in ``.json``)."""
    return cache_folder() / "onnx" / f"{key}.onnx"


def model_key(folder: Path) -> str:
    """The export key of a model folder: its files' fingerprint and the export format, computed
    without loading the model (:func:`scoring.model_fingerprint.folder_fingerprint`)."""
    return hashlib.sha256(f"{EXPORT_FORMAT}:{folder_fingerprint(folder)}".encode()).hexdigest()[:16]


def runtime_versions() -> dict[str, str] | None:
    """Versions of ``onnxruntime`` and ``tokenizers`` (importing them), or ``None`` when one is missing."""
    if not all(importlib.util.find_spec(name) for name in _RUNTIMES):
        return None
    return {name: str(importlib.import_module(name).__version__) for name in _RUNTIMES}


def load_session(path: Path) -> Any:
    """An ONNX Runtime session of the export at ``path``, on the CPU, quiet, on one thread.

    By default ONNX Runtime runs a query on a thread per core and keeps the extra threads
    spinning after each run: measured on 2 cores (hybrid recall, 6,000 facts), 6.4 ms of wall
    time cost 12.8 ms of CPU — the second core burnt, which in a service of one process per
    core is the other process's core. On one thread: 7.4 ms of wall time, 7.4 ms of CPU; two
    service processes (hybrid, 10 users × 500 facts, 16 clients) served 149 requests/s instead
    of 94."""
    ort = importlib.import_module("onnxruntime")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def folder_tokenizer(folder: Path | None) -> Any:
    """The ``tokenizers.Tokenizer`` of a model folder's ``tokenizer.json``, or ``None`` without one."""
    if folder is None or not (folder / "tokenizer.json").is_file():
        return None
    return importlib.import_module("tokenizers").Tokenizer.from_file(str(folder / "tokenizer.json"))


class OnnxQueryEncoder:
    """Embeds a few texts with an ONNX export of a sentence-transformers model (transformer +
    mean pooling + L2 normalisation). ``tokenizer`` (a ``tokenizers.Tokenizer``, owned by the
    encoder from now on) is set to truncate at ``max_length`` tokens and not to pad: rows are
    padded here, so a file's fixed padding (all-MiniLM-L6-v2's ``tokenizer.json`` pads and
    truncates at 128) does not apply. Safe to share between threads."""

    def __init__(self, session: Any, tokenizer: Any, max_length: int, dim: int) -> None:
        self._pad = int((tokenizer.padding or {}).get("pad_id", 0))  # masked out: any id gives the same vectors
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_length)
        self._session = session
        self._tokenizer = tokenizer
        self.max_length = max_length
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 unit rows, one per text. Texts are encoded one by one, not with
        ``encode_batch``: a few texts gain nothing from its thread pool, which would make
        ``tokenizers`` warn in a process that forks later."""
        rows = [self._tokenizer.encode(text).ids for text in texts]
        width = max(len(row) for row in rows)
        ids = np.full((len(rows), width), self._pad, dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = row
            mask[i, :len(row)] = 1
        return unit_rows(self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0])


def verified_query_encoder(folder: Path) -> OnnxQueryEncoder | None:
    """An encoder for the model in ``folder`` that needs no PyTorch, when an export of it was
    verified against PyTorch with these runtimes (see the module docstring); else ``None``."""
    try:
        runtimes = runtime_versions()
        if runtimes is None or not (folder / "tokenizer.json").is_file():
            return None
        key = model_key(folder)
        path = export_path(key)
        manifest = read_manifest(path, key, runtimes)
        if manifest is None:
            return None
        return OnnxQueryEncoder(load_session(path), folder_tokenizer(folder), manifest.max_length, manifest.dim)
    except Exception as exc:  # noqa: BLE001 - any failure here only means "verify with PyTorch"
        _LOG.debug("no verified ONNX export for %s (%s: %s)", folder, type(exc).__name__, exc)
        return None
