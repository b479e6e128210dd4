"""Binary codes for the approximate search of large vector partitions
(:class:`~tiers.indexes.numpy_index.NumpyVectorIndex`): a SimHash of each vector, scanned exhaustively.

A vector's code is the signs of :data:`BITS` seeded random projections of it, packed into
``BITS // 8`` bytes (1,024 bits: 128 bytes per vector, 38 MB at 300,000). Two vectors' Hamming
distance estimates the angle between them. A search scans *every* code for the ``depth`` nearest
(:func:`nearest`: faiss ``knn_hamming`` when installed, numpy otherwise) and the caller re-scores
those exactly with their float vectors. Unlike a graph search it cannot stop in a crowd of
near-duplicates before reaching a rare fact the question matches only moderately: on the needles of
``benchmarks/needle_minilm.py`` it finds what an exact search finds (``benchmarks/binary_index.py``).

The projection is a pure function of the dimension (seed :data:`SEED`), so codes are a pure
function of their vectors: saved ones can be checked, and those of a reopened partition are the
ones it would compute.

    >>> rng = np.random.default_rng(0)
    >>> vectors = rng.standard_normal((500, 16)).astype(np.float32)
    >>> codes = encode(vectors)
    >>> codes.shape, codes.dtype.name
    ((500, 128), 'uint8')
    >>> int(nearest(codes, encode(vectors[7:8])[0], 1)[0])
    7
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

__all__ = ["BITS", "SEED", "encode", "nearest", "distances", "faiss_or_none"]

BITS = 1024
SEED = 5
_SLICE = 16_384  # vectors projected at once: 16,384 x 1,024 float32 is a 64 MB temporary


@functools.cache
def _projection(dim: int) -> np.ndarray:
    projection = np.random.default_rng(SEED).standard_normal((dim, BITS)).astype(np.float32)
    projection.setflags(write=False)
    return projection


def encode(vectors: np.ndarray) -> np.ndarray:
    """The codes of float ``vectors`` (shape ``(n, dim)``): shape ``(n, BITS // 8)``, uint8."""
    vectors = np.asarray(vectors, dtype=np.float32)
    projection = _projection(vectors.shape[1])
    out = np.empty((len(vectors), BITS // 8), dtype=np.uint8)
    for start in range(0, len(vectors), _SLICE):
        stop = min(len(vectors), start + _SLICE)
        out[start:stop] = np.packbits(vectors[start:stop] @ projection > 0, axis=1)
    return out


@functools.cache
def faiss_or_none() -> Any:
    """The ``faiss`` module, or ``None`` when it is not installed (numpy scans instead)."""
    try:
        import faiss
    except ImportError:
        return None
    return faiss


_POPCOUNT = np.array([bin(byte).count("1") for byte in range(256)], dtype=np.uint8)


def distances(codes: np.ndarray, code: np.ndarray) -> np.ndarray:
    """Hamming distance of ``code`` to each of ``codes`` (numpy), int32."""
    out = np.empty(len(codes), dtype=np.int32)
    if not len(codes):
        return out
    code = np.ascontiguousarray(code, dtype=np.uint8)
    wide = codes.shape[1] % 8 == 0 and hasattr(np, "bitwise_count")
    for start in range(0, len(codes), _SLICE):
        block = np.ascontiguousarray(codes[start:start + _SLICE])
        if wide:  # numpy >= 2: popcount of 64-bit words
            out[start:start + len(block)] = np.bitwise_count(block.view(np.uint64) ^ code.view(np.uint64)).sum(
                axis=1, dtype=np.int32)
        else:
            out[start:start + len(block)] = _POPCOUNT[block ^ code].sum(axis=1, dtype=np.int32)
    return out


def nearest(codes: np.ndarray, code: np.ndarray, depth: int, *, use_faiss: bool = True) -> np.ndarray:
    """Rows of the ``depth`` codes nearest ``code`` in Hamming distance (all rows when there are
    fewer), in no particular order among themselves."""
    size = len(codes)
    if depth >= size:
        return np.arange(size)
    faiss = faiss_or_none() if use_faiss else None
    if faiss is not None:
        # "mc": faiss's counting variant, exact; on one thread the fastest here for one query
        # (0.24 / 1.0 / 2.5 ms at 20k / 100k / 300k codes of 1,024 bits, depth 2,000; the heap
        # variant 0.8 / 2.2 / 6.6; numpy 1.9 / 6.2 / 17). On two threads of a busy 2-core machine
        # OpenMP's hand-off costs more than the scan (5-30 ms), so this call runs on the caller's
        # thread alone: OpenMP's thread count is a per-thread setting, restored after the call.
        before = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            rows: np.ndarray = faiss.knn_hamming(np.ascontiguousarray(code[None, :]), np.ascontiguousarray(codes),
                                                 depth, variant="mc")[1][0]
        finally:
            faiss.omp_set_num_threads(before)
        return rows[rows >= 0]
    return np.argpartition(distances(codes, code), depth)[:depth]
