import doctest
import logging

import numpy as np
import pytest

import scoring.onnx_query
from scoring.embeddings import SentenceTransformerEmbedder
from scoring.onnx_query import OnnxQueryEncoder, cache_folder, onnx_query_encoder


def test_doctests():
    assert doctest.testmod(scoring.onnx_query).failed == 0


def test_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("UNIFIED_MEMORY_CACHE", str(tmp_path))
    assert cache_folder() == tmp_path
    monkeypatch.delenv("UNIFIED_MEMORY_CACHE")
    assert cache_folder().parts[-2:] == (".cache", "unified-memory")


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    return SentenceTransformerEmbedder()


TEXTS = ["which food must I avoid?", "I'm allergic to peanuts", "When did Caroline go to the support group?"]


@pytest.mark.embeddings
def test_queries_use_the_onnx_export_and_get_the_same_vectors(model):
    reference = model.model.encode(TEXTS, normalize_embeddings=True)
    fast = np.vstack([model.embed([text]) for text in TEXTS])
    assert isinstance(model._fast, OnnxQueryEncoder)
    assert fast.dtype == np.float32
    np.testing.assert_allclose(fast, reference, atol=1e-5)
    assert list(cache_folder().glob("onnx/*.onnx"))  # exported once, into the cache folder


@pytest.mark.embeddings
def test_an_export_that_disagrees_is_refused(model, caplog):
    with caplog.at_level(logging.WARNING, logger="scoring.onnx_query"):
        encoder = onnx_query_encoder(model.model, reference=lambda texts: np.zeros((len(texts), 384)))
    assert encoder is None and "disagrees" in caplog.text


@pytest.mark.embeddings
def test_fast_queries_can_be_turned_off():
    pytest.importorskip("sentence_transformers")
    slow = SentenceTransformerEmbedder(fast_queries=False)
    vector = slow.embed([TEXTS[0]])
    assert slow._fast is None
    np.testing.assert_allclose(vector, slow.model.encode(TEXTS[:1], normalize_embeddings=True), atol=1e-5)


def test_a_model_that_is_not_mean_pooled_gets_no_export():
    class Cls:
        pooling_mode = "cls"

    class Transformer:
        auto_model = None

    assert onnx_query_encoder([Transformer(), Cls()]) is None
