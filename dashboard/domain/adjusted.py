"""The causes adjusted for each other and corrected for multiplicity: one weighted regression
of the score on similarity, chunk count and multi-part questions together.

The buckets of dashboard/domain/causes.py are raw associations: chunk count has no effect of its
own in many use cases but goes with poor similarity (a weak retrieval returns many weak chunks),
so answers with many chunks look unfaithful, and the page once advised a reranker in 96 % of
such simulated use cases. Fitting the causes together keeps one from taking another's credit,
but only if each enters in its true shape: faithfulness that falls off a step or an S-curve in
similarity, fitted as a straight line, leaves a curved remainder that chunk count (which follows
similarity) soaks up, and the reranker was advised in up to 38 % of such use cases (issue 39,
point 6). So similarity enters flexibly:

- a level of its own in each similarity bucket (DEFAULT_SIMILARITY_EDGES: <0.5, 0.5–0.6, …,
  ≥0.9), and a slope within each bucket where its similarity varies: a broken line that follows
  a line, a step or an S-curve closely enough that chunk count and multi-part questions are
  judged on what similarity leaves over (bench/statistics.py --only causes);
- chunk count (per 10 chunks) and multi-part questions (vs single) as before.

Similarity's effect is then one difference: the answers of the highest bucket against those
of the lowest, each at its own mean similarity, at equal chunk count and question kind. Both
end buckets need MIN_FOR_CONTRAST judged answers, so that the difference does not rest on a
handful. One number with one interval per cause, so the correction over three causes stays
as it was.

`adjusted_effects` fits the answers' rows; `adjusted_effects_from_moments` fits the same from
per-(stratum, similarity bucket) power sums (monitoring/domain/moments.py, kept by the weekly
rollups): every column of the design is nonzero for one bucket's answers only, or is chunk
count or multi-part, so a bucket's sums of its own (1, s, c, m) give its part of every sum the
regression needs. Both give the same numbers up to rounding (tests/domain/test_adjusted.py).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from monitoring.domain.moments import (
    C_CENTRE,
    CHUNK_UNIT,
    DEFAULT_SIMILARITY_EDGES,
    NO_MOMENTS,
    S_CENTRE,
    SIMILARITY_UNIT,
    Moments,
)

# Below 30 judged answers with a similarity, the causes' columns and the buckets' levels leave
# too few degrees of freedom for the sandwich variance to be trusted.
MIN_FOR_REGRESSION = 30
# Judged answers a similarity bucket needs to be an end of similarity's difference: a level fitted
# to a handful (one answer: exactly, with a sandwich variance of zero) is no comparison.
MIN_FOR_CONTRAST = 20
CAUSES = ("similarity", "chunks", "multi_part")
# Directions the design cannot tell apart: eigenvalues of the scaled normal matrix below this
# share of its largest are taken as zero (the rows and the power sums round differently; a
# relative 1e-10 is far above either's rounding and far below any real variation).
RANK_TOLERANCE = 1e-10


@dataclass(frozen=True, slots=True)
class Effect:
    """One cause's association with the score, the others held fixed (an association: the
    data are observational, nothing here says "caused by")."""

    # "similarity": the highest similarity bucket's answers against the lowest's
    # (Adjusted.similarity_buckets); "chunks": per 10 chunks; "multi_part": vs single
    name: str
    estimate: float | None  # change of the mean score; None when it cannot be estimated
    low: float | None  # interval at the corrected level (Bonferroni over the causes fitted)
    high: float | None
    p_value: float | None  # two-sided, uncorrected
    p_adjusted: float | None  # Holm over the causes fitted
    holds: bool  # p_adjusted below 1 − confidence: the effect survives adjustment and correction


@dataclass(frozen=True, slots=True)
class Adjusted:
    effects: tuple[Effect, ...]  # in CAUSES order
    n: int  # judged answers with a similarity in the fit
    too_few: bool
    # The similarity buckets (indices into the edges: 0 below the first) whose answers the
    # similarity effect compares, lowest first; None when no two have MIN_FOR_CONTRAST.
    similarity_buckets: tuple[int, int] | None = None


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


EMPTY = tuple(Effect(name, None, None, None, None, None, False) for name in CAUSES)


# Exponents (s, c, m) of a bucket's own columns as its power sums know them.
_LEVEL, _SLOPE, _CHUNKS, _MULTI = (0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)


@dataclass(frozen=True, slots=True)
class _Layout:
    """The design's columns: per populated bucket its level and, where its similarity varies,
    its slope; then chunk count and multi-part where they vary."""

    columns: dict[tuple[int, tuple[int, int, int]], int]  # (bucket, exponents) → column
    chunks: int | None
    multi: int | None
    ends: tuple[int, int] | None  # the buckets similarity's difference compares

    @classmethod
    def of(
        cls, buckets: Mapping[int, tuple[int, float, float]], chunks_vary: bool,
        multi_varies: bool,
    ) -> _Layout:
        """From each populated bucket's (judged answers, lowest, highest similarity)."""
        columns: dict[tuple[int, tuple[int, int, int]], int] = {}
        for b in sorted(buckets):
            n, low, high = buckets[b]
            columns[b, _LEVEL] = len(columns)
            if low < high:
                columns[b, _SLOPE] = len(columns)
        chunks = len(columns) if chunks_vary else None
        multi = len(columns) + (1 if chunks_vary else 0) if multi_varies else None
        wide = [b for b in sorted(buckets) if buckets[b][0] >= MIN_FOR_CONTRAST]
        ends = (wide[0], wide[-1]) if len(wide) > 1 else None
        return cls(columns, chunks, multi, ends)

    @property
    def size(self) -> int:
        return len(self.columns) + (self.chunks is not None) + (self.multi is not None)

    def local(self, bucket: int) -> list[tuple[tuple[int, int, int], int]]:
        """A bucket's answers' nonzero columns: (exponents of its power sums, column)."""
        out = [(e, self.columns[bucket, e]) for e in (_LEVEL, _SLOPE)
               if (bucket, e) in self.columns]
        if self.chunks is not None:
            out.append((_CHUNKS, self.chunks))
        if self.multi is not None:
            out.append((_MULTI, self.multi))
        return out

    def contrasts(self, mean_s: Mapping[int, float]) -> list[np.ndarray | None]:
        """Each cause's vector over the coefficients (None: not fitted). Similarity's: the
        highest end bucket's level at its mean (centred) similarity minus the lowest's."""
        out: list[np.ndarray | None] = []
        if self.ends is None:
            out.append(None)
        else:
            vector = np.zeros(self.size)
            for b, sign in ((self.ends[1], 1.0), (self.ends[0], -1.0)):
                vector[self.columns[b, _LEVEL]] = sign
                if (b, _SLOPE) in self.columns:
                    vector[self.columns[b, _SLOPE]] = sign * mean_s[b]
            out.append(vector)
        for column in (self.chunks, self.multi):
            if column is None:
                out.append(None)
            else:
                vector = np.zeros(self.size)
                vector[column] = 1.0
                out.append(vector)
        return out


def _confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence!r}")


def _cut(edges: Sequence[float]) -> list[float]:
    values = list(edges)
    if any(math.isnan(e) for e in values) or any(
        a >= b for a, b in zip(values, values[1:], strict=False)
    ):
        raise ValueError(f"edges must increase strictly, not {edges!r}")
    return values


def adjusted_effects(
    rows: Iterable[tuple[float | None, int, bool, bool, float | None]],
    *,
    confidence: float = 0.95,
    sizes: tuple[int, int] | None = None,
    edges: Sequence[float] = DEFAULT_SIMILARITY_EDGES,
) -> Adjusted:
    """Weighted regression of the score on similarity (by bucket), chunk count and multi-part.

    ``rows`` are (best chunk similarity or None, chunk count, multi-part, flagged, score or
    None if unjudged) for EVERY answer of a period with one sample rate, unless ``sizes``
    (flagged, unflagged answers of the period) is given: then ``rows`` need only be the judged
    answers (a dashboard need not fetch every answer). Each judged answer is weighted by 1/π
    within its stratum (N_h/n_h: flagged answers were all judged, the others sampled), so the
    fit describes all answers, not the judged mix. The variance is the stratified sandwich
    (linearisation) variance, so neither the weights nor a non-normal score make it too
    narrow; t quantiles with n − rank degrees of freedom. The intervals are
    Bonferroni-corrected over the causes fitted and the p-values Holm-adjusted: with three
    causes looked at, one of them "significant" at 5 % by chance is no finding.
    """
    _confidence(confidence)
    cut = _cut(edges)
    counted = [0, 0]
    judged: list[tuple[int, int, float, float, float, float]] = []
    for similarity, chunks, multi_part, flagged, score in rows:
        if chunks < 0:
            raise ValueError(f"a chunk count cannot be negative: {chunks!r}")
        h = 0 if flagged else 1
        counted[h] += 1
        if score is None or similarity is None or math.isnan(similarity):
            continue
        if not 0 <= score <= 1:
            raise ValueError(f"scores must lie in [0, 1], not {score!r}")
        judged.append((h, bisect_right(cut, similarity), similarity / SIMILARITY_UNIT - S_CENTRE,
                       chunks / CHUNK_UNIT - C_CENTRE, 1.0 if multi_part else 0.0, score))
    n = len(judged)
    if sizes is None:
        sizes = (counted[0], counted[1])
    elif any(size < seen for size, seen in zip(sizes, counted, strict=True)):
        raise ValueError(f"stratum sizes {sizes} are smaller than the rows given {counted}")
    if n < MIN_FOR_REGRESSION:
        return Adjusted(EMPTY, n, True)
    data = np.array(judged)
    stratum, bucket = data[:, 0].astype(int), data[:, 1].astype(int)
    s, c, m, y = data[:, 2], data[:, 3], data[:, 4], data[:, 5]
    counts = np.bincount(stratum, minlength=2)
    weights = np.array([sizes[h] / counts[h] if counts[h] else 0.0 for h in (0, 1)])[stratum]
    populated = {
        int(b): (int(np.sum(bucket == b)), float(s[bucket == b].min()),
                 float(s[bucket == b].max()))
        for b in np.unique(bucket)
    }
    layout = _Layout.of(populated, bool(np.ptp(c) > 0), bool(np.ptp(m) > 0))
    x = np.zeros((n, layout.size))
    for (b, exponents), column in layout.columns.items():
        x[:, column] = (bucket == b) * (s if exponents == _SLOPE else 1.0)
    if layout.chunks is not None:
        x[:, layout.chunks] = c
    if layout.multi is not None:
        x[:, layout.multi] = m
    xtwx = x.T @ (weights[:, None] * x)
    bread, rank, basis, scale = _solve(xtwx)
    beta = bread @ (x.T @ (weights * y))
    scores = (weights * (y - x @ beta))[:, None] * x  # each answer's estimating-equation term
    meat = np.zeros_like(xtwx)
    for h in (0, 1):
        part = scores[stratum == h]
        k = len(part)
        if k > 1:
            centred = part - part.mean(axis=0)
            meat += k / (k - 1) * centred.T @ centred
    mean_s = {b: float(np.sum(weights * s * (bucket == b)) / np.sum(weights * (bucket == b)))
              for b in populated}
    return _effects(beta, bread @ meat @ bread, layout.contrasts(mean_s), basis, scale, n, rank,
                    confidence, layout.ends)


def adjusted_effects_from_moments(
    moments: Mapping[tuple[int, int], Moments], *, sizes: tuple[int, int],
    confidence: float = 0.95,
) -> Adjusted:
    """`adjusted_effects` from power sums per (stratum: 0 flagged, 1 unflagged; similarity
    bucket of DEFAULT_SIMILARITY_EDGES) and the strata's sizes: the same estimates, intervals
    and p-values up to rounding (the meat comes from expanded sums)."""
    _confidence(confidence)
    judged = [sum(m.n for (h, _), m in moments.items() if h == k) for k in (0, 1)]
    n = judged[0] + judged[1]
    if n < MIN_FOR_REGRESSION:
        return Adjusted(EMPTY, n, True)
    if any(size < k for size, k in zip(sizes, judged, strict=True)):
        raise ValueError(f"stratum sizes {sizes} are smaller than the answers judged")
    weights = [sizes[h] / judged[h] if judged[h] else 0.0 for h in (0, 1)]
    cells = {key: m for key, m in moments.items() if m.n}
    per_bucket: dict[int, Moments] = {}
    for (_, b), m in cells.items():
        per_bucket[b] = per_bucket[b] + m if b in per_bucket else m
    every = sum(per_bucket.values(), start=NO_MOMENTS)
    layout = _Layout.of({b: (m.n, m.s_min, m.s_max) for b, m in per_bucket.items()},
                        every.c_min < every.c_max, 0 < every.m_sum < n)
    size = layout.size

    def sum_of(m: Moments, *parts: tuple[int, int, int], y: int = 0) -> float:
        i = sum(e[0] for e in parts)
        j = sum(e[1] for e in parts)
        k = min(1, sum(e[2] for e in parts))
        return m.sums[(i, j, k, y)]

    xtwx = np.zeros((size, size))
    xtwy = np.zeros(size)
    for (h, b), m in cells.items():
        local = layout.local(b)
        for a, i in local:
            xtwy[i] += weights[h] * sum_of(m, a, y=1)
            for e, j in local:
                xtwx[i, j] += weights[h] * sum_of(m, a, e)
    bread, rank, basis, scale = _solve(xtwx)
    beta = bread @ xtwy
    meat = np.zeros((size, size))
    for h in (0, 1):
        if judged[h] < 2:
            continue
        w = weights[h]
        total = np.zeros(size)
        cross = np.zeros((size, size))
        for (g, b), m in cells.items():
            if g != h:
                continue
            local = layout.local(b)
            exps, index = [e for e, _ in local], [i for _, i in local]
            coef = beta[index]
            for ia, ea in enumerate(exps):
                total[index[ia]] += w * (sum_of(m, ea, y=1)
                                         - sum(coef[q] * sum_of(m, eq, ea)
                                               for q, eq in enumerate(exps)))
                for ib, eb in enumerate(exps):
                    value = sum_of(m, ea, eb, y=2)
                    for q, eq in enumerate(exps):
                        value -= 2 * coef[q] * sum_of(m, eq, ea, eb, y=1)
                        for r, er in enumerate(exps):
                            value += coef[q] * coef[r] * sum_of(m, eq, er, ea, eb)
                    cross[index[ia], index[ib]] += w * w * value
        meat += judged[h] / (judged[h] - 1) * (cross - np.outer(total, total) / judged[h])
    mean_s = {}
    for b in per_bucket:
        parts = [(weights[h], m) for (h, g), m in cells.items() if g == b]
        mean_s[b] = (sum(w * m.sums[(1, 0, 0, 0)] for w, m in parts)
                     / sum(w * m.n for w, m in parts))
    return _effects(beta, bread @ meat @ bread, layout.contrasts(mean_s), basis, scale, n, rank,
                    confidence, layout.ends)


def _solve(xtwx: np.ndarray) -> tuple[np.ndarray, int, np.ndarray, np.ndarray]:
    """The pseudo-inverse of the normal matrix, its rank, and a basis of its row space (of the
    matrix scaled to unit diagonal, and the scale).

    Causes that always go together (every answer of low similarity also has twelve chunks and
    a two-part question) cannot be told apart: the matrix is singular, and an inverse taken
    anyway (rounding makes one) gives numbers of no meaning. Scaled to unit diagonal, so that
    a column's units do not decide, directions below RANK_TOLERANCE are dropped; a cause is
    estimable only if its vector lies in what is left (`_estimable`)."""
    scale = np.sqrt(np.diag(xtwx))
    scale[scale == 0] = 1.0
    scaled = xtwx / np.outer(scale, scale)
    values, vectors = np.linalg.eigh(scaled)
    keep = values > RANK_TOLERANCE * max(float(values.max()), 0.0)
    basis = vectors[:, keep]
    inverse = (basis / values[keep]) @ basis.T
    return inverse / np.outer(scale, scale), int(keep.sum()), basis, scale


def _estimable(vector: np.ndarray, basis: np.ndarray, scale: np.ndarray) -> bool:
    scaled = vector / scale
    left = scaled - basis @ (basis.T @ scaled)
    return bool(np.linalg.norm(left) <= 1e-6 * np.linalg.norm(scaled))


def _effects(
    beta: np.ndarray, covariance: np.ndarray, contrasts: Sequence[np.ndarray | None],
    basis: np.ndarray, scale: np.ndarray, n: int, rank: int, confidence: float,
    ends: tuple[int, int] | None,
) -> Adjusted:
    """Estimates, Bonferroni intervals and Holm p-values of the estimable causes."""
    df = n - rank
    parts: dict[int, tuple[float, float]] = {}
    for j, vector in enumerate(contrasts):
        if vector is None or not _estimable(vector, basis, scale):
            continue
        parts[j] = (float(vector @ beta), math.sqrt(max(0.0, float(vector @ covariance @ vector))))
    fitted = len(parts)
    alpha = 1 - confidence
    t_corrected = float(stats.t.ppf(1 - alpha / (2 * fitted), df)) if fitted else math.nan
    raw = {
        j: (float(2 * stats.t.sf(abs(estimate) / se, df)) if se > 0
            else (0.0 if estimate != 0 else 1.0))
        for j, (estimate, se) in parts.items()
    }
    adjusted = dict(zip(raw, holm(list(raw.values())), strict=True))
    effects = []
    for j, name in enumerate(CAUSES):
        if j not in parts:
            effects.append(Effect(name, None, None, None, None, None, False))
            continue
        estimate, se = parts[j]
        effects.append(Effect(name, estimate, estimate - t_corrected * se,
                              estimate + t_corrected * se, raw[j], adjusted[j],
                              adjusted[j] < alpha))
    similarity_fitted = 0 in parts
    return Adjusted(tuple(effects), n, False, ends if similarity_fitted else None)
