"""The export's manifest and the model folder's fingerprint: what lets a process trust an ONNX export
without PyTorch, and everything that must make it refuse."""

from __future__ import annotations

import dataclasses
import json

import pytest

from scoring.model_fingerprint import folder_fingerprint, model_files
from scoring.onnx_manifest import EXPORT_FORMAT, ExportManifest, read_manifest, write_manifest
from unified_memory.errors import MemoryValueError

RUNTIMES = {"onnxruntime": "1.32.0", "tokenizers": "0.23.3"}


def manifest(**changes) -> ExportManifest:
    fields = dict(key="abc", max_length=256, dim=384, onnx_bytes=5, runtimes=dict(RUNTIMES), max_difference=2e-7,
                  probes=6, reference={"torch": "2.13.0"})
    return ExportManifest(**{**fields, **changes})


@pytest.fixture
def export(tmp_path):
    onnx = tmp_path / "abc.onnx"
    onnx.write_bytes(b"graph")
    write_manifest(onnx.with_suffix(".json"), manifest())
    return onnx


def test_a_written_manifest_is_read_back(export):
    assert read_manifest(export, "abc", RUNTIMES) == manifest()
    assert manifest().format == EXPORT_FORMAT
    assert sorted(p.name for p in export.parent.iterdir()) == ["abc.json", "abc.onnx"]  # no temporary file left
    assert json.loads(export.with_suffix(".json").read_text())["runtimes"] == RUNTIMES  # plain JSON


@pytest.mark.parametrize("case", ["other key", "other onnxruntime", "other tokenizers", "export resized",
                                  "export missing", "no manifest", "old format", "not json", "a list",
                                  "missing field", "extra field", "wrong type"])
def test_a_manifest_that_does_not_vouch_for_the_export_is_refused(export, case):
    path = export.with_suffix(".json")
    data = json.loads(path.read_text())
    key, runtimes = "abc", dict(RUNTIMES)
    if case == "other key":
        key = "abd"
    elif case == "other onnxruntime":
        runtimes["onnxruntime"] = "1.33.0"
    elif case == "other tokenizers":
        runtimes["tokenizers"] = "0.24.0"
    elif case == "export resized":
        export.write_bytes(b"graph!")
    elif case == "export missing":
        export.unlink()
    elif case == "no manifest":
        path.unlink()
    elif case == "not json":
        path.write_text("{not json")
    elif case == "a list":
        path.write_text("[]")
    else:
        if case == "old format":
            data["format"] = EXPORT_FORMAT - 1
        elif case == "missing field":
            del data["dim"]
        elif case == "extra field":
            data["pickle"] = "no"
        else:
            data["max_length"] = "256"
        path.write_text(json.dumps(data))
    assert read_manifest(export, key, runtimes) is None


@pytest.mark.parametrize("field, value", [("max_length", "256"), ("dim", True), ("max_difference", "0"),
                                          ("runtimes", ["onnxruntime"]), ("key", 3)])
def test_malformed_manifests_name_the_field(field, value):
    text = json.dumps({**dataclasses.asdict(manifest()), field: value})
    with pytest.raises(MemoryValueError, match=f"manifest.{field}"):
        ExportManifest.from_json(text)


def test_non_positive_sizes_are_refused():
    with pytest.raises(MemoryValueError, match="manifest"):
        ExportManifest.from_json(manifest(dim=0).to_json())


# -- the model folder's fingerprint ---------------------------------------------------------------


@pytest.fixture
def model_folder(tmp_path):
    folder = tmp_path / "model"
    (folder / "1_Pooling").mkdir(parents=True)
    (folder / "onnx").mkdir()
    (folder / "config.json").write_text('{"hidden": 384}')
    (folder / "tokenizer.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (folder / "1_Pooling" / "config.json").write_text('{"mean": true}')
    (folder / "README.md").write_text("docs")
    (folder / "onnx" / "model.onnx").write_bytes(b"another export")
    return folder


def test_the_fingerprint_covers_the_files_that_make_the_vectors(model_folder):
    assert [p.relative_to(model_folder).as_posix() for p in model_files(model_folder)] == [
        "1_Pooling/config.json", "config.json", "model.safetensors", "tokenizer.json"]


def test_the_fingerprint_follows_contents_not_documentation(model_folder, tmp_path):
    before = folder_fingerprint(model_folder)
    (model_folder / "README.md").write_text("other docs")
    (model_folder / "onnx" / "model.onnx").write_bytes(b"changed")
    assert folder_fingerprint(model_folder) == before
    weights = bytearray((model_folder / "model.safetensors").read_bytes())
    weights[9000] ^= 1  # one bit of one weight, same size
    (model_folder / "model.safetensors").write_bytes(bytes(weights))
    assert folder_fingerprint(model_folder) != before
    moved = tmp_path / "elsewhere"
    model_folder.rename(moved)
    (moved / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    assert folder_fingerprint(moved) == before  # where the folder lives does not matter


def test_the_pooling_config_is_part_of_the_fingerprint(model_folder):
    before = folder_fingerprint(model_folder)
    (model_folder / "1_Pooling" / "config.json").write_text('{"mean": fals}')
    assert folder_fingerprint(model_folder) != before


def test_a_fingerprint_needs_a_folder(tmp_path):
    with pytest.raises(MemoryValueError, match="^model: "):
        folder_fingerprint(tmp_path / "missing")
