"""The power sums that the weekly rollups keep of the causes' regression (faithfulness on best chunk
similarity, chunk count and multi-part questions), and the bucket edges of the causes: what the
core stores, so that the dashboard's causes (dashboard/domain/causes.py) can be fitted from
rollups instead of raw answers."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

DEFAULT_SIMILARITY_EDGES = (0.5, 0.6, 0.7, 0.8, 0.9)


# 0 chunks, 1-2, 3-5, 6-10, 11-20, 21+: a handful of chunks is typical; beyond ~20 the context
# mixes documents, which a reranker would fix.
DEFAULT_CHUNK_EDGES = (1, 3, 6, 11, 21)


# Fixed centres for the covariates in the power sums: the slopes and their covariance do not
# depend on them (only the intercept, which is not reported), and centred sums of 4th powers
# lose fewer digits to cancellation.
S_CENTRE = 7.0  # similarity / SIMILARITY_UNIT


C_CENTRE = 0.5  # chunks / CHUNK_UNIT


# Exponents (i, j, k, p) of s^i c^j m^k y^p kept: x-only up to degree 4, times y up to 3,
# times y² up to 2 (m is 0/1, so k is 0 or 1).
MOMENT_KEYS = tuple(
    (i, j, k, p)
    for p, degree in ((0, 4), (1, 3), (2, 2))
    for i in range(degree + 1) for j in range(degree + 1 - i) for k in (0, 1)
    if i + j + k <= degree
)


@dataclass(frozen=True, slots=True)
class Moments:
    """The judged answers of one stratum (with a similarity) as the regression needs them:
    how many, the range of each covariate (does it vary?), and the power sums MOMENT_KEYS of
    the centred covariates s − S_CENTRE, c − C_CENTRE, m and the score y."""

    n: int
    s_min: float
    s_max: float
    c_min: float
    c_max: float
    m_sum: int
    sums: Mapping[tuple[int, int, int, int], float]

    def __add__(self, other: Moments) -> Moments:
        if not self.n:
            return other
        if not other.n:
            return self
        return Moments(
            self.n + other.n, min(self.s_min, other.s_min), max(self.s_max, other.s_max),
            min(self.c_min, other.c_min), max(self.c_max, other.c_max),
            self.m_sum + other.m_sum,
            {key: self.sums[key] + other.sums[key] for key in MOMENT_KEYS},
        )


NO_MOMENTS = Moments(0, math.inf, -math.inf, math.inf, -math.inf, 0,
                     dict.fromkeys(MOMENT_KEYS, 0.0))


def moments_of(similarity: float, chunks: int, multi_part: bool, score: float) -> Moments:
    """One judged answer's moments (add them up with +)."""
    s, c = similarity / SIMILARITY_UNIT, chunks / CHUNK_UNIT
    sc, cc, m = s - S_CENTRE, c - C_CENTRE, 1.0 if multi_part else 0.0
    return Moments(1, s, s, c, c, int(multi_part), {
        (i, j, k, p): sc**i * cc**j * m**k * score**p for i, j, k, p in MOMENT_KEYS
    })


def moments_of_many(
    rows: Iterable[tuple[float, int, bool, float]],
) -> Moments:
    """The moments of many judged answers (similarity, chunks, multi-part, score) at once: the
    sums of `moments_of` of each, as numpy adds them (a rebuild's many rows)."""
    data = np.array([(s, c, 1.0 if m else 0.0, y) for s, c, m, y in rows], dtype=float)
    if not len(data):
        return NO_MOMENTS
    s, c = data[:, 0] / SIMILARITY_UNIT, data[:, 1] / CHUNK_UNIT
    sc, cc, m, y = s - S_CENTRE, c - C_CENTRE, data[:, 2], data[:, 3]
    return Moments(
        len(data), float(s.min()), float(s.max()), float(c.min()), float(c.max()),
        int(m.sum()),
        {(i, j, k, p): float(np.sum(sc**i * cc**j * m**k * y**p))
         for i, j, k, p in MOMENT_KEYS},
    )


SIMILARITY_UNIT = 0.1  # effects per 0.1 of best chunk similarity


CHUNK_UNIT = 10  # per 10 chunks
