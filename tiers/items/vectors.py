"""Vectors of keyed items (:mod:`tiers.items.keyed_items`): what a caller's embedder made of an item's
indexed fields, stored with the item, and compared with a query's vector by a search.

LangGraph's stores embed each indexed field of an item separately (``index={"fields": [...]}``)
and score an item by its best field. The caller embeds (its embedder may be anything: an API, a
LangChain ``Embeddings``, the memory's own model) and passes the vectors to
:meth:`~unified_memory.UnifiedMemory.put_item`; a search with ``query_vector`` scores each item
by the cosine similarity of its closest vector. The vectors are kept in the item's row (the
``vectors`` column: base64 of little-endian float32, one list per item), so export, import,
TTL and ``forget`` treat them as the item's own.

    >>> stored = encode_vectors(check_vectors("vectors", [[1.0, 0.0], [0.0, 1.0]]))
    >>> best_cosine(decode_vectors(stored), check_query_vector("query_vector", [1.0, 1.0]))
    0.7071067...
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from scoring.errors import invalid, wrong_type

__all__ = ["MAX_VECTORS", "MAX_DIMS", "DISTANCE_TYPES", "check_vectors", "check_query_vector", "check_distance_type",
           "encode_vectors", "decode_vectors", "cosines", "best_cosine", "best_score"]

#: The most vectors one item may carry (one per indexed text), and the longest vector.
MAX_VECTORS = 1024
MAX_DIMS = 8192
#: How a search scores an item's closest vector (pgvector's and LangGraph's names): ``cosine``
#: similarity, ``inner_product`` (the dot product), ``l2`` (minus the Euclidean distance).
DISTANCE_TYPES = ("cosine", "inner_product", "l2")


def _vector(field: str, value: Any) -> np.ndarray:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise wrong_type(field, "a list of numbers (a vector)", value)
    if not 0 < len(value) <= MAX_DIMS:
        raise invalid(field, f"must have 1 to {MAX_DIMS} numbers, got {len(value)}")
    for i, number in enumerate(value):
        if isinstance(number, bool) or not isinstance(number, int | float | np.floating | np.integer):
            raise wrong_type(f"{field}[{i}]", "a number", number)
        if not math.isfinite(float(number)):
            raise invalid(f"{field}[{i}]", f"must be a finite number, got {number!r}")
    return np.asarray(value, dtype=np.float32)


def check_vectors(field: str, value: Any) -> list[np.ndarray] | None:
    """``None`` (the item carries no vectors) or a list of vectors of one length (at most
    :data:`MAX_VECTORS` of at most :data:`MAX_DIMS` finite numbers); an empty list is ``None``.

    >>> check_vectors("vectors", [[1, 2], [3]])
    Traceback (most recent call last):
    ...
    unified_memory.errors.MemoryValueError: vectors[1]: has 1 numbers where vectors[0] has 2
    """
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise wrong_type(field, "a list of vectors (lists of numbers) or None", value)
    if len(value) > MAX_VECTORS:
        raise invalid(field, f"at most {MAX_VECTORS} vectors per item, got {len(value)}")
    vectors = [_vector(f"{field}[{i}]", vector) for i, vector in enumerate(value)]
    for i, vector in enumerate(vectors[1:], start=1):
        if len(vector) != len(vectors[0]):
            raise invalid(f"{field}[{i}]", f"has {len(vector)} numbers where {field}[0] has {len(vectors[0])}")
    return vectors or None


def check_query_vector(field: str, value: Any) -> np.ndarray | None:
    """``None`` or one vector (finite numbers, at most :data:`MAX_DIMS`)."""
    return None if value is None else _vector(field, value)


def check_distance_type(field: str, value: Any) -> str:
    """One of :data:`DISTANCE_TYPES`."""
    if value not in DISTANCE_TYPES:
        raise invalid(field, f"must be one of {', '.join(DISTANCE_TYPES)}, got {value!r:.40}")
    return str(value)


def encode_vectors(vectors: list[np.ndarray] | None) -> str | None:
    """The stored form: ``{"dims": n, "data": base64 of the float32 values, row after row}``."""
    if not vectors:
        return None
    packed = np.stack(vectors).astype("<f4")
    return json.dumps({"dims": int(packed.shape[1]), "data": base64.b64encode(packed.tobytes()).decode("ascii")},
                      separators=(",", ":"))


def decode_vectors(stored: str | None) -> np.ndarray | None:
    """The vectors of a stored item as rows of a matrix (``None``: none, or not readable)."""
    if not stored:
        return None
    try:
        found = json.loads(stored)
        dims = int(found["dims"])
        raw = base64.b64decode(found["data"], validate=True)
        matrix = np.frombuffer(raw, dtype="<f4").reshape(-1, dims)
    except (ValueError, TypeError, KeyError):
        return None
    return matrix if matrix.size else None


def cosines(rows: Any, query: Any) -> np.ndarray:
    """The cosine similarity of ``query`` to each row (a zero vector is 0.0 from everything)."""
    matrix = np.asarray(rows, dtype=np.float64)
    wanted = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(wanted) or 1.0)
    return np.asarray(matrix @ wanted / np.where(norms > 0, norms, 1.0))


def best_cosine(matrix: np.ndarray | None, query: np.ndarray) -> float | None:
    """The cosine similarity of ``query`` to the closest row (``None``: no rows, or rows of
    another length — vectors of another embedder)."""
    if matrix is None or matrix.shape[1] != query.shape[0]:
        return None
    return float(np.max(cosines(matrix, query)))


def best_score(matrix: np.ndarray | None, query: np.ndarray, distance_type: str = "cosine") -> float | None:
    """The score of the closest row by ``distance_type`` (higher is closer): the cosine similarity,
    the dot product, or minus the Euclidean distance (``None`` as in :func:`best_cosine`).

    >>> rows = decode_vectors(encode_vectors([np.array([3.0, 4.0])]))
    >>> best_score(rows, np.array([0.0, 1.0]), "inner_product"), best_score(rows, np.array([3.0, 0.0]), "l2")
    (4.0, -4.0)
    """
    if distance_type == "cosine":
        return best_cosine(matrix, query)
    if matrix is None or matrix.shape[1] != query.shape[0]:
        return None
    rows, wanted = matrix.astype(np.float64), query.astype(np.float64)
    if distance_type == "inner_product":
        return float(np.max(rows @ wanted))
    return float(-np.min(np.linalg.norm(rows - wanted, axis=1)))
