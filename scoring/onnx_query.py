"""A fast path for embedding a query: the same model, exported to ONNX Runtime.

PyTorch's eager mode spends most of a short query's time on per-operator
overhead: all-MiniLM-L6-v2 takes 12–20 ms for a 5–20-token question on a
2-core CPU, ONNX Runtime 4–7 ms for the same vectors (they agree to 1e-6).
The export runs once per machine and model, on first use, into a cache folder
(``$UNIFIED_MEMORY_CACHE``, else ``~/.cache/unified-memory``); the exported
model is checked against PyTorch on probe texts and refused if it disagrees.
Anything that prevents it (``onnx``/``onnxruntime`` not installed, a model
whose pooling is not mean + normalise, an unwritable folder) leaves the
PyTorch path in place: :func:`onnx_query_encoder` returns ``None``.

    >>> onnx_query_encoder(object()) is None   # not a sentence-transformers model
    True
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scoring.linalg import unit_rows

__all__ = ["OnnxQueryEncoder", "onnx_query_encoder", "cache_folder"]

_LOG = logging.getLogger(__name__)
_PROBES = ["peanut allergy", "When did Caroline go to the LGBTQ support group last week?"]
_TOLERANCE = 1e-4


def cache_folder() -> Path:
    """Where exported models are kept: ``$UNIFIED_MEMORY_CACHE`` or ``~/.cache/unified-memory``.

    >>> cache_folder().name in ("unified-memory", os.environ.get("UNIFIED_MEMORY_CACHE", "x").rsplit("/", 1)[-1])
    True
    """
    configured = os.environ.get("UNIFIED_MEMORY_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "unified-memory"


class OnnxQueryEncoder:
    """Embeds a few texts with an ONNX export of a sentence-transformers model
    (transformer + mean pooling + L2 normalisation)."""

    def __init__(self, session: Any, tokenizer: Any, max_length: int) -> None:
        self._session = session
        self._tokenizer = tokenizer
        self._max_length = max_length

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 unit rows, one per text."""
        features = self._tokenizer(list(texts), padding=True, truncation=True, max_length=self._max_length,
                                   return_tensors="np")
        inputs = {"input_ids": features["input_ids"].astype(np.int64),
                  "attention_mask": features["attention_mask"].astype(np.int64)}
        return unit_rows(self._session.run(None, inputs)[0])


def _mean_pooled(model: Any) -> bool:
    """Whether ``model`` is transformer → mean pooling (→ normalise), what the export reproduces."""
    try:
        modules = list(model)
    except TypeError:
        return False
    if len(modules) < 2 or not hasattr(modules[0], "auto_model"):
        return False
    pooling = modules[1]
    mode = getattr(pooling, "pooling_mode", None)  # sentence-transformers >= 5: "mean", "cls", ...
    if isinstance(mode, str):
        mean = mode == "mean"
    else:  # older releases: one flag per mode
        others = [getattr(pooling, f"pooling_mode_{m}", False) for m in ("cls_token", "max_tokens", "lasttoken")]
        mean = bool(getattr(pooling, "pooling_mode_mean_tokens", False)) and not any(others)
    return mean and all(type(m).__name__ == "Normalize" for m in modules[2:])


def _fingerprint(model: Any) -> str:
    """A key for the export: the weights' shapes and a sample of their values, and the versions."""
    torch = importlib.import_module("torch")
    digest = hashlib.sha256(torch.__version__.encode())
    for name, tensor in model[0].auto_model.state_dict().items():
        flat = tensor.detach().reshape(-1)
        digest.update(f"{name}{tuple(tensor.shape)}".encode())
        digest.update(flat[:: max(1, flat.numel() // 64)].float().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def _export(model: Any, path: Path) -> None:
    torch = importlib.import_module("torch")
    bert = model[0].auto_model

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

    sample = model.tokenizer(_PROBES[:1], return_tensors="pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        staged = Path(scratch) / path.name
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(Pooled().eval(), (sample["input_ids"], sample["attention_mask"]), str(staged),
                              input_names=["input_ids", "attention_mask"], output_names=["embedding"],
                              dynamic_axes={"input_ids": {0: "batch", 1: "tokens"},
                                            "attention_mask": {0: "batch", 1: "tokens"},
                                            "embedding": {0: "batch"}},
                              opset_version=17, dynamo=False)
        os.replace(staged, path)  # atomic: another process never reads half a file


def onnx_query_encoder(model: Any, reference: Any = None) -> OnnxQueryEncoder | None:
    """An :class:`OnnxQueryEncoder` for a loaded sentence-transformers ``model``, or ``None``
    when the fast path is unavailable (see the module docstring). ``reference(texts)``
    gives the PyTorch vectors the export must reproduce."""
    if not (importlib.util.find_spec("onnxruntime") and importlib.util.find_spec("onnx")) or not _mean_pooled(model):
        return None
    try:
        device = str(getattr(model, "device", "cpu"))
        if not device.startswith("cpu"):
            return None  # on a GPU PyTorch is the fast path
        path = cache_folder() / "onnx" / f"{_fingerprint(model)}.onnx"
        if not path.exists():
            _export(model, path)
        ort = importlib.import_module("onnxruntime")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        encoder = OnnxQueryEncoder(session, model.tokenizer, int(getattr(model, "max_seq_length", 256) or 256))
        if reference is not None:
            agreement = np.abs(encoder.embed(_PROBES) - np.asarray(reference(_PROBES))).max()
            if not agreement <= _TOLERANCE:
                _LOG.warning("ONNX export of the embedding model disagrees with PyTorch by %.2g; not used", agreement)
                return None
        return encoder
    except Exception as exc:  # noqa: BLE001 - any failure here only means "use PyTorch"
        _LOG.warning("fast query embedding unavailable (%s: %s); using PyTorch", type(exc).__name__, exc)
        return None
