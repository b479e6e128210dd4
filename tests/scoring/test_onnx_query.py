import doctest
import json
import logging
import threading

import numpy as np
import pytest

import scoring.embeddings
import scoring.model_fingerprint
import scoring.onnx_export
import scoring.onnx_manifest
import scoring.onnx_query
import scoring.quiet_loading
from scoring.embeddings import SentenceTransformerEmbedder
from scoring.onnx_export import PROBES, onnx_query_encoder
from scoring.onnx_query import OnnxQueryEncoder, cache_folder, export_path, model_key, verified_query_encoder


@pytest.mark.parametrize("module", [scoring.onnx_query, scoring.onnx_export, scoring.onnx_manifest,
                                    scoring.model_fingerprint, scoring.quiet_loading])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


def test_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("UNIFIED_MEMORY_CACHE", str(tmp_path))
    assert cache_folder() == tmp_path
    assert export_path("abc") == tmp_path / "onnx" / "abc.onnx"
    monkeypatch.delenv("UNIFIED_MEMORY_CACHE")
    assert cache_folder().parts[-2:] == (".cache", "unified-memory")


def test_no_torch_free_path_without_the_runtimes(monkeypatch, tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    monkeypatch.setattr(scoring.onnx_query, "runtime_versions", lambda: None)
    assert verified_query_encoder(tmp_path) is None


def test_no_torch_free_path_without_a_manifest(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}")
    assert verified_query_encoder(tmp_path) is None  # nothing exported for this folder


def test_a_model_that_is_not_mean_pooled_gets_no_export():
    class Cls:
        pooling_mode = "cls"

    class Transformer:
        auto_model = None

    assert onnx_query_encoder([Transformer(), Cls()]) is None


# -- the real bundled model ---------------------------------------------------------------------------

# Mixed lengths: empty and blank, accents, non-Latin scripts and emoji, and 300+ tokens (truncated at 256).
TEXTS = ["which food must I avoid?", "I'm allergic to peanuts", "When did Caroline go to the support group?",
         "", " \t ", "Ünïcödé: Crème brûlée in Zürich, 北京烤鸭, Ελληνικά, عربى, 🙂🍜",
         "Maria: " + "lives in Lisbon, works at Acme, owns a dog named Biscuit; " * 25,
         "word " * 400]


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    pytest.importorskip("tokenizers")
    return SentenceTransformerEmbedder()


@pytest.fixture(scope="module")
def folder(model):
    return model._folder()


@pytest.fixture(scope="module")
def verified(model, folder):
    """The export made and verified by the PyTorch path (loads the model), as a later process finds it."""
    model.embed(["warm up"])
    assert model.loaded or model._fast is not None
    model.model  # noqa: B018 - the PyTorch reference below needs the model loaded
    encoder = verified_query_encoder(folder)
    assert encoder is not None, "the PyTorch path should have written a verified manifest"
    return encoder


@pytest.mark.embeddings
def test_long_texts_really_pass_the_token_limit(model):
    assert len(model.model.tokenizer(TEXTS[-1])["input_ids"]) > 256 and model.model.max_seq_length == 256


@pytest.mark.slow
@pytest.mark.embeddings
def test_queries_use_the_onnx_export_and_get_the_same_vectors(model, verified):
    reference = model.model.encode(TEXTS, normalize_embeddings=True)
    fast = np.vstack([model.embed([text]) for text in TEXTS])
    assert isinstance(model._fast, OnnxQueryEncoder)
    assert fast.dtype == np.float32
    np.testing.assert_allclose(fast, reference, atol=1e-5)
    assert list(cache_folder().glob("onnx/*.onnx"))  # exported once, into the cache folder


@pytest.mark.slow
@pytest.mark.embeddings
def test_the_torch_free_encoder_equals_pytorch_one_by_one_and_in_mixed_batches(model, verified):
    reference = model.model.encode(TEXTS, normalize_embeddings=True)
    forward = model._forward(model.model, TEXTS)
    one_by_one = np.vstack([verified.embed([text]) for text in TEXTS])
    batch = verified.embed(TEXTS)
    shuffled = [5, 0, 7, 3, 1, 6, 2, 4]
    for vectors in (one_by_one, batch):
        assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 384)
        np.testing.assert_allclose(vectors, reference, atol=1e-5)
        np.testing.assert_allclose(vectors, forward, atol=1e-5)
    np.testing.assert_allclose(verified.embed([TEXTS[i] for i in shuffled]), reference[shuffled], atol=1e-5)


@pytest.mark.embeddings
def test_the_torch_free_tokenizer_gives_the_models_token_ids(model, verified):
    features = model.model.preprocess(TEXTS)
    for row, text in enumerate(TEXTS):
        length = int(features["attention_mask"][row].sum())
        assert verified._tokenizer.encode(text).ids == features["input_ids"][row, :length].tolist(), text
    assert verified.max_length == 256 and verified.dim == 384


@pytest.mark.embeddings
def test_the_manifest_records_the_check(folder, verified):
    key = model_key(folder)
    manifest = json.loads(export_path(key).with_suffix(".json").read_text())
    assert manifest["key"] == key and manifest["probes"] == len(PROBES) and manifest["max_difference"] <= 1e-4
    assert set(manifest["runtimes"]) == {"onnxruntime", "tokenizers"} and manifest["reference"]["torch"]


@pytest.mark.slow
@pytest.mark.embeddings
@pytest.mark.parametrize("tamper", ["runtimes", "key", "onnx_bytes", "format", "garbage"])
def test_a_manifest_that_does_not_match_falls_back_to_pytorch_silently(folder, verified, tamper, caplog):
    path = export_path(model_key(folder)).with_suffix(".json")
    good = path.read_text()
    data = json.loads(good)
    if tamper == "garbage":
        path.write_text("not json")
    else:
        data[tamper] = {"runtimes": {"onnxruntime": "0.0", "tokenizers": "0.0"}, "key": "0" * 16,
                        "onnx_bytes": data["onnx_bytes"] + 1, "format": 0}[tamper]
        path.write_text(json.dumps(data))
    try:
        assert verified_query_encoder(folder) is None
        with caplog.at_level(logging.DEBUG, logger="scoring"):
            emb = SentenceTransformerEmbedder()
            vector = emb.embed([TEXTS[0]])
        assert emb.loaded and isinstance(emb._fast, OnnxQueryEncoder)  # PyTorch verified the export again
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        np.testing.assert_allclose(vector, verified.embed([TEXTS[0]]), atol=1e-5)
        assert json.loads(path.read_text()) == json.loads(good)  # ... and wrote the manifest back
    finally:
        path.write_text(good)


@pytest.mark.slow
@pytest.mark.embeddings
def test_without_a_verified_export_the_embedder_loads_pytorch(monkeypatch, verified):
    monkeypatch.setattr(scoring.embeddings, "verified_query_encoder", lambda folder: None)
    emb = SentenceTransformerEmbedder()
    vector = emb.embed([TEXTS[0]])
    assert emb.loaded
    np.testing.assert_allclose(vector, verified.embed([TEXTS[0]]), atol=1e-5)


@pytest.mark.embeddings
def test_threads_share_one_torch_free_encoder(verified):
    emb = SentenceTransformerEmbedder()
    results, errors = {}, []

    def query(i):
        try:
            results[i] = emb.embed([TEXTS[i % 3]])
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=query, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and not emb.loaded
    for i, vector in results.items():
        np.testing.assert_allclose(vector, verified.embed([TEXTS[i % 3]]), atol=1e-6)


@pytest.mark.embeddings
def test_an_export_that_disagrees_is_refused(model, folder, verified, caplog):
    manifest = export_path(model_key(folder)).with_suffix(".json")
    good = manifest.read_text()
    try:
        with caplog.at_level(logging.WARNING, logger="scoring.onnx_export"):
            encoder = onnx_query_encoder(model.model, reference=lambda texts: np.zeros((len(texts), 384)),
                                         folder=folder)
        assert encoder is None and "disagrees" in caplog.text
        assert not manifest.exists()  # it no longer vouches for the export
    finally:
        manifest.write_text(good)


@pytest.mark.embeddings
def test_fast_queries_can_be_turned_off():
    pytest.importorskip("sentence_transformers")
    slow = SentenceTransformerEmbedder(fast_queries=False)
    vector = slow.embed([TEXTS[0]])
    assert slow._fast is None and slow.loaded
    np.testing.assert_allclose(vector, slow.model.encode(TEXTS[:1], normalize_embeddings=True), atol=1e-5)


@pytest.mark.embeddings
def test_loading_the_model_prints_nothing_and_restores_the_progress_bars(capfd):
    pytest.importorskip("sentence_transformers")
    from transformers.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    capfd.readouterr()
    SentenceTransformerEmbedder(fast_queries=False).embed(["hello"])
    assert capfd.readouterr().err == ""
    assert (hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()) == (bars, verbosity)


@pytest.mark.embeddings
def test_the_query_session_runs_on_one_thread(verified):
    """ONNX Runtime's default (a spinning thread per core) burnt a second core per query:
    the other process's core in a service of one process per core."""
    from scoring.onnx_query import load_session

    export = next(iter(cache_folder().glob("onnx/*.onnx")))
    options = load_session(export).get_session_options()
    assert options.intra_op_num_threads == 1 and options.inter_op_num_threads == 1
