"""Spherical k-means and a two-level coarse quantizer, for an inverted-file vector index.

Pure numpy and seeded, so a quantizer trained twice on the same vectors is the same. Vectors
are compared by dot product (cosine, for the unit vectors embedders give); centroids are unit
length.

    >>> rng = np.random.default_rng(0)
    >>> centres = unit_rows(rng.standard_normal((4, 16)))
    >>> data = unit_rows(np.repeat(centres, 50, axis=0) + 0.05 * rng.standard_normal((200, 16)))
    >>> quantizer = Quantizer.train(data, lists=4, seed=1)
    >>> labels = quantizer.assign(data)
    >>> len(set(labels[:50].tolist())), len(set(labels.tolist()))
    (1, 4)
"""

from __future__ import annotations

import math

import numpy as np

from scoring.checks import check_int
from scoring.linalg import unit_rows
from unified_memory.errors import invalid

__all__ = ["spherical_kmeans", "nearest_centroid", "Quantizer"]

_ROWS_PER_BLOCK = 16384  # rows scored against the centroids at a time (bounds the score matrix)


def nearest_centroid(data: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """For each row of ``data``, the index of the centroid with the highest dot product (int32).

    >>> nearest_centroid(np.array([[1.0, 0.1], [0.0, 1.0]]), np.array([[0.0, 1.0], [1.0, 0.0]])).tolist()
    [1, 0]
    """
    data = np.asarray(data, dtype=np.float32)
    centroids = np.asarray(centroids, dtype=np.float32)
    labels = np.empty(len(data), dtype=np.int32)
    for start in range(0, len(data), _ROWS_PER_BLOCK):
        block = data[start:start + _ROWS_PER_BLOCK]
        labels[start:start + len(block)] = np.argmax(block @ centroids.T, axis=1)
    return labels


def spherical_kmeans(data: np.ndarray, k: int, *, iterations: int = 8,
                     rng: np.random.Generator | None = None) -> np.ndarray:
    """``k`` unit centroids of ``data`` (Lloyd's iterations on directions, seeded from data rows).

    A cluster left empty is re-seeded with a random row. ``k`` is capped at ``len(data)``.

    >>> data = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    >>> spherical_kmeans(data, 2, rng=np.random.default_rng(0)).astype(float).round(2).tolist()
    [[0.05, 1.0], [1.0, 0.05]]
    """
    k = check_int("k", k, minimum=1)
    data = np.asarray(data, dtype=np.float32)
    if data.ndim != 2 or not len(data):
        raise invalid("data", f"expected a non-empty 2-d array, got shape {data.shape}")
    rng = rng if rng is not None else np.random.default_rng(0)
    k = min(k, len(data))
    centroids = unit_rows(data[rng.choice(len(data), k, replace=False)])
    for _ in range(iterations):
        labels = nearest_centroid(data, centroids)
        sums = _cluster_sums(data, labels, k)
        empty = np.flatnonzero(np.bincount(labels, minlength=k) == 0)
        if len(empty):
            sums[empty] = data[rng.choice(len(data), len(empty), replace=False)]
        centroids = unit_rows(sums)
    return centroids


def _cluster_sums(data: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """Per-cluster row sums, as one-hot products over blocks of rows (much faster than ``np.add.at``)."""
    sums = np.zeros((k, data.shape[1]), dtype=np.float32)
    step = max(256, (1 << 22) // k)
    for start in range(0, len(data), step):
        block = labels[start:start + step]
        onehot = np.zeros((len(block), k), dtype=np.float32)
        onehot[np.arange(len(block)), block] = 1.0
        sums += onehot.T @ data[start:start + step]
    return sums


class Quantizer:
    """A two-level coarse quantizer: about ``sqrt(lists)`` coarse centroids, each split into
    leaves (in proportion to its share of the training sample), ``lists`` leaves in all.

    A row goes to its best leaf among the leaves of its few best coarse centroids (``routes``
    of :meth:`assign`): a few hundred products per row instead of one per leaf, so a million
    rows are assigned to 4,000 lists in seconds. ``centroids`` holds every leaf, in list order.

    >>> rng = np.random.default_rng(0)
    >>> data = unit_rows(rng.standard_normal((500, 8)))
    >>> quantizer = Quantizer.train(data, lists=20, seed=3)
    >>> quantizer.lists, quantizer.centroids.shape[1], int(quantizer.assign(data).max()) < quantizer.lists
    (20, 8, True)
    """

    def __init__(self, coarse: np.ndarray, leaves: np.ndarray, starts: np.ndarray) -> None:
        self.coarse = coarse  # (groups, dim)
        self.centroids = leaves  # (lists, dim), grouped: group g owns leaves starts[g]:starts[g + 1]
        self.starts = starts
        self.lists = len(leaves)

    @classmethod
    def train(cls, sample: np.ndarray, lists: int, *, seed: int = 0, iterations: int = 8) -> Quantizer:
        """Train on ``sample`` (float32 rows) for about ``lists`` leaves (capped at ``len(sample)``).

        >>> Quantizer.train(np.eye(3, dtype=np.float32), lists=10).lists
        3
        """
        lists = min(check_int("lists", lists, minimum=1), len(sample))
        rng = np.random.default_rng(seed)
        groups = max(1, min(lists, round(math.sqrt(lists))))
        coarse = spherical_kmeans(sample, groups, iterations=iterations, rng=rng)
        labels = nearest_centroid(sample, coarse)
        counts = np.bincount(labels, minlength=len(coarse))
        share = np.maximum(1, np.round(counts * (lists / len(sample)))).astype(np.int64)
        leaves, starts = [], [0]
        for group in range(len(coarse)):
            members = sample[labels == group]
            if not len(members):  # keep the coarse centroid as its own single leaf
                leaves.append(coarse[group:group + 1])
            else:
                leaves.append(spherical_kmeans(members, int(min(share[group], len(members))),
                                               iterations=iterations, rng=rng))
            starts.append(starts[-1] + len(leaves[-1]))
        return cls(coarse, np.ascontiguousarray(np.concatenate(leaves), dtype=np.float32),
                   np.array(starts, dtype=np.int64))

    def assign(self, data: np.ndarray, *, routes: int = 4) -> np.ndarray:
        """The leaf (list id, int32) of each row of ``data``: its best leaf among the leaves of
        its ``routes`` best coarse centroids (with enough routes, its best leaf overall).

        >>> Quantizer.train(np.eye(2, dtype=np.float32), lists=2).assign(np.array([[0.0, 2.0]])).shape
        (1,)
        """
        data = np.asarray(data, dtype=np.float32)
        routes = min(check_int("routes", routes, minimum=1), len(self.coarse))
        labels = np.empty(len(data), dtype=np.int32)
        for start in range(0, len(data), 8192):
            block = data[start:start + 8192]
            closeness = block @ self.coarse.T
            if routes < len(self.coarse):
                groups = np.argpartition(-closeness, routes - 1, axis=1)[:, :routes].ravel()
            else:
                groups = np.tile(np.arange(len(self.coarse)), len(block))
            owners = np.repeat(np.arange(len(block)), routes)
            by_group = np.argsort(groups, kind="stable")
            bounds = np.searchsorted(groups[by_group], np.arange(len(self.coarse) + 1))
            best = np.full(len(block), -np.inf, dtype=np.float32)
            found = labels[start:start + len(block)]
            for group in np.flatnonzero(np.diff(bounds)).tolist():
                rows = owners[by_group[bounds[group]:bounds[group + 1]]]
                first, last = self.starts[group], self.starts[group + 1]
                scores = block[rows] @ self.centroids[first:last].T
                pick = np.argmax(scores, axis=1)
                value = scores[np.arange(len(rows)), pick]
                better = value > best[rows]
                best[rows[better]] = value[better]
                found[rows[better]] = first + pick[better]
        return labels
