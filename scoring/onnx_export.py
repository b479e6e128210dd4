"""Making the ONNX export of a loaded sentence-transformers model and checking it against PyTorch.

Runs where PyTorch is loaded anyway (the model had to be loaded): the export is
written once per machine and model into :func:`scoring.onnx_query.cache_folder`,
then the ONNX vectors are compared with the model's own forward pass on probe
texts (short, empty, accented and non-Latin, longer than the 256-token limit, in
one batch of mixed lengths) and refused if they differ by more than 1e-4. When the
model came from a local folder with a ``tokenizer.json``, the check uses that file's
tokenizer — the one the torch-free path uses — and a passing check is recorded in a
manifest, so later processes embed queries without PyTorch
(:func:`scoring.onnx_query.verified_query_encoder`). Anything that prevents it
(``onnx``/``onnxruntime``/``tokenizers`` not installed, a model whose pooling is not
mean + normalise, a GPU model, an unwritable folder) leaves the PyTorch path in
place: :func:`onnx_query_encoder` returns ``None``.

    >>> onnx_query_encoder(object()) is None   # not a sentence-transformers model
    True
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scoring.onnx_manifest import ExportManifest, write_manifest
from scoring.onnx_query import (
    OnnxQueryEncoder,
    export_path,
    folder_tokenizer,
    load_session,
    model_key,
    runtime_versions,
)

__all__ = ["PROBES", "TOLERANCE", "onnx_query_encoder"]

_LOG = logging.getLogger(__name__)
#: Texts the export must embed like PyTorch: short, empty-ish, unicode, and past the 256-token limit.
PROBES = ["peanut allergy", "When did Caroline go to the LGBTQ support group last week?", "", "  ",
          "Café naïve Ångström — Straße, 東京, İstanbul 🙂",
          "Maria: " + "lives in Lisbon, works at Acme, owns a dog named Biscuit; " * 30]
TOLERANCE = 1e-4
Reference = Callable[[Sequence[str]], Any]


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


def _weights_fingerprint(model: Any) -> str:
    """A key for the export of a model without a local folder (one from the Hugging Face cache):
    the weights' shapes and a sample of their values, and the torch version."""
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

    # torch comes from importlib (untyped Any): its Module is no static type to subclass
    class Pooled(torch.nn.Module):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = bert

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)

    sample = model.tokenizer(PROBES[:1], return_tensors="pt")
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


def _tokenizer(model: Any, folder: Path | None) -> tuple[Any, bool]:
    """The tokenizer the export runs with and whether it is the folder's ``tokenizer.json``
    (the torch-free path's): else a copy of the model's own fast tokenizer, or ``None``."""
    from_folder = folder_tokenizer(folder)
    if from_folder is not None:
        return from_folder, True
    backend = getattr(getattr(model, "tokenizer", None), "backend_tokenizer", None)
    if backend is None:
        return None, False
    return importlib.import_module("tokenizers").Tokenizer.from_str(backend.to_str()), False


def _reference_versions() -> dict[str, str]:
    return {name: str(getattr(sys.modules.get(name), "__version__", "unknown"))
            for name in ("torch", "sentence_transformers", "transformers")}


def onnx_query_encoder(model: Any, reference: Reference | None = None, *,
                       folder: Path | None = None) -> OnnxQueryEncoder | None:
    """An :class:`~scoring.onnx_query.OnnxQueryEncoder` for a loaded sentence-transformers
    ``model``, or ``None`` when the fast path is unavailable (see the module docstring).
    ``reference(texts)`` gives the PyTorch vectors the export must reproduce; ``folder``
    is the model's local folder, if any (its files key the export and its
    ``tokenizer.json`` is what a verified manifest vouches for)."""
    runtimes = runtime_versions()
    if runtimes is None or not importlib.util.find_spec("onnx") or not _mean_pooled(model):
        return None
    try:
        if not str(getattr(model, "device", "cpu")).startswith("cpu"):
            return None  # on a GPU PyTorch is the fast path
        tokenizer, tokenizer_from_folder = _tokenizer(model, folder)
        if tokenizer is None:
            return None
        key = model_key(folder) if folder is not None else _weights_fingerprint(model)
        path = export_path(key)
        if not path.exists():
            _export(model, path)
        dim = int(model.get_embedding_dimension())
        max_length = int(getattr(model, "max_seq_length", 256) or 256)
        encoder = OnnxQueryEncoder(load_session(path), tokenizer, max_length, dim)
        if reference is None:
            return encoder
        difference = float(np.abs(encoder.embed(PROBES) - np.asarray(reference(PROBES))).max())
        if not difference <= TOLERANCE:
            path.with_suffix(".json").unlink(missing_ok=True)  # whatever it vouched for no longer holds
            _LOG.warning("ONNX export of the embedding model disagrees with PyTorch by %.2g; not used", difference)
            return None
        if tokenizer_from_folder:
            write_manifest(path.with_suffix(".json"), ExportManifest(
                key=key, max_length=max_length, dim=dim, onnx_bytes=path.stat().st_size, runtimes=runtimes,
                max_difference=difference, probes=len(PROBES), reference=_reference_versions()))
        return encoder
    except Exception as exc:  # noqa: BLE001 - any failure here only means "use PyTorch"
        _LOG.warning("fast query embedding unavailable (%s: %s); using PyTorch", type(exc).__name__, exc)
        return None
