"""Recency and use: how fresh and how used a memory is, each in [0, 1].

    >>> round(recency(age_seconds=30 * 86400, half_life_days=30), 3)
    0.5
    >>> usage(0, saturation=10), round(usage(10, saturation=10), 3)
    (0.0, 1.0)
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["recency", "halved", "recency_array", "usage"]

_DAY = 86400.0
_NEG_LN2 = -math.log(2.0)


def recency(*, age_seconds: float, half_life_days: float) -> float:
    """Exponential decay with the given half-life; future times count as age 0.

    >>> recency(age_seconds=0, half_life_days=7)
    1.0
    """
    return halved(age_seconds, half_life_days)


def halved(age_seconds: float, half_life_days: float) -> float:
    """:func:`recency`, called positionally (for code that scores many items).

    >>> halved(7 * 86400, 7)
    0.5
    """
    return math.exp(_NEG_LN2 * (max(0.0, float(age_seconds)) / _DAY) / half_life_days)


def recency_array(ages_seconds: np.ndarray, half_life_days: float) -> np.ndarray:
    """Vectorised :func:`recency` over an array of ages in seconds.

    >>> recency_array(np.array([0.0, 86400.0]), 1.0).round(2).tolist()
    [1.0, 0.5]
    """
    ages = np.maximum(np.asarray(ages_seconds, dtype=np.float64), 0.0) / _DAY
    return np.exp(-math.log(2.0) * ages / half_life_days)


def usage(access_count: int, *, saturation: int) -> float:
    """How much a memory has been used: ``log(1+n)/log(1+saturation)`` capped at 1.

    >>> round(usage(3, saturation=3), 2)
    1.0
    """
    if access_count <= 0:
        return 0.0
    return min(1.0, math.log1p(access_count) / math.log1p(saturation))


def decayed_confidence(confidence: float, *, age_seconds: float, half_life_days: float | None) -> float:
    """A fact's confidence now: it halves every ``half_life_days`` since the fact was last
    stated (lauren-ai's decaying MemoryFact); ``None`` means no decay.

    >>> decayed_confidence(0.8, age_seconds=180 * 86400, half_life_days=180)
    0.4
    >>> decayed_confidence(0.8, age_seconds=10 ** 9, half_life_days=None)
    0.8
    """
    if half_life_days is None:
        return confidence
    return confidence * recency(age_seconds=age_seconds, half_life_days=half_life_days)
