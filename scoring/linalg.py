"""Small vector helpers shared by the embedders and the dense index.

    >>> unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
"""

from __future__ import annotations

import numpy as np

__all__ = ["unit_rows"]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` with every row scaled to length 1 (all-zero rows stay zero), as a
    contiguous float32 array — what the ``Embedder`` protocol promises.

    >>> unit_rows(np.array([[0.0, 2.0]])).dtype
    dtype('float32')
    """
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.ascontiguousarray(matrix / np.where(norms > 0, norms, 1.0), dtype=np.float32)
