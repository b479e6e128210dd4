"""The record kept beside an ONNX export of an embedding model: that it was checked against PyTorch.

``<cache>/onnx/<key>.onnx`` is the export and ``<cache>/onnx/<key>.json`` its manifest, a
small JSON object (never pickle) written once the export's vectors, computed with the
tokenizer from the model folder's ``tokenizer.json``, agreed with the model's own
PyTorch forward pass on probe texts. A query can then be embedded without importing
PyTorch: :func:`read_manifest` returns the manifest only when it matches the model
files (the key), this module's export format, the installed ``onnxruntime`` and
``tokenizers`` versions and the export file's size; anything else means "verify again
with PyTorch".

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     onnx = Path(tmp) / "k.onnx"
    ...     _ = onnx.write_bytes(b"graph")
    ...     manifest = ExportManifest(key="k", max_length=256, dim=384, onnx_bytes=5,
    ...                               runtimes={"onnxruntime": "1", "tokenizers": "2"}, max_difference=1e-7,
    ...                               probes=3, reference={"torch": "2"})
    ...     write_manifest(onnx.with_suffix(".json"), manifest)
    ...     read_manifest(onnx, "k", {"onnxruntime": "1", "tokenizers": "2"}) == manifest
    True
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoring.errors import invalid

__all__ = ["EXPORT_FORMAT", "ExportManifest", "read_manifest", "write_manifest"]

#: Version of the export (graph inputs, pooling, opset); part of the export's key.
EXPORT_FORMAT = 1


@dataclass(frozen=True)
class ExportManifest:
    """What was verified: the model ``key`` (:func:`scoring.model_fingerprint.folder_fingerprint`
    with the export format), the tokenizer's truncation length, the vector size, the export's
    size in bytes, the runtime versions it was checked with, the largest difference to PyTorch
    over ``probes`` texts, and the reference's versions (torch, sentence-transformers)."""

    key: str
    max_length: int
    dim: int
    onnx_bytes: int
    runtimes: dict[str, str]
    max_difference: float
    probes: int
    reference: dict[str, str] = field(default_factory=dict)
    format: int = EXPORT_FORMAT

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ExportManifest:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise invalid("manifest", f"must be a JSON object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        if set(data) != names:
            raise invalid("manifest", f"fields {sorted(data)} are not {sorted(names)}")
        manifest = cls(**data)
        manifest._check()
        return manifest

    def _check(self) -> None:
        for name, kind in (("key", str), ("max_length", int), ("dim", int), ("onnx_bytes", int), ("probes", int),
                           ("format", int), ("max_difference", float), ("runtimes", dict), ("reference", dict)):
            value: Any = getattr(self, name)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise invalid(f"manifest.{name}", f"must be {kind.__name__}, got {value!r}")
        if self.max_length < 1 or self.dim < 1 or self.onnx_bytes < 1:
            raise invalid("manifest", "max_length, dim and onnx_bytes must be positive")


def write_manifest(path: Path, manifest: ExportManifest) -> None:
    """Write ``manifest`` to ``path`` atomically (another process never reads half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, suffix=".tmp", delete=False) as out:
        out.write(manifest.to_json())
    os.chmod(out.name, 0o644)  # like the export beside it (a temporary file is private)
    os.replace(out.name, path)


def read_manifest(onnx: Path, key: str, runtimes: dict[str, str]) -> ExportManifest | None:
    """The manifest beside the export ``onnx`` when it vouches for it: same model key, export
    format and runtime versions, and the export file of the recorded size; else ``None``."""
    try:
        manifest = ExportManifest.from_json(onnx.with_suffix(".json").read_text(encoding="utf-8"))
        size = onnx.stat().st_size
    except (OSError, ValueError, TypeError):
        return None
    if (manifest.key, manifest.format, manifest.runtimes, manifest.onnx_bytes) != (key, EXPORT_FORMAT, runtimes, size):
        return None
    return manifest
