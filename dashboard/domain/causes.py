"""Causes of unfaithful answers, which are rarely the model: faithfulness by retrieval quality,
by amount of context and by question style.

Every figure is a stratified estimate (dashboard.domain.statistics) within its group: the
judged answers of a group are still flagged answers (all judged) and a random share of the
others, so each group is split into its flagged and unflagged strata and weighted by their
sizes. The rows of one call must come from a period with one sample rate, as the unflagged
stratum is assumed to be one simple random sample. Readings in words are the web layer's job;
this module returns numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from scipy import stats

from dashboard.domain.statistics.cells import Estimate
from dashboard.domain.statistics.estimates import stratified_mean, week_strata
from dashboard.domain.statistics.precision import traffic_light
from monitoring.domain.moments import (
    CHUNK_UNIT,
    DEFAULT_CHUNK_EDGES,
    DEFAULT_SIMILARITY_EDGES,
    SIMILARITY_UNIT,
    Moments,
)

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Bucket:
    label: str
    low: float | None  # [low, high); None = unbounded, or (both None) the "none" bucket
    high: float | None
    estimate: Estimate


def _grouped_estimates(
    rows: Iterable[tuple[K, bool, float | None]], keys: Sequence[K]
) -> dict[K, Estimate]:
    groups: dict[K, list[tuple[bool, float | None]]] = {key: [] for key in keys}
    for key, flagged, score in rows:
        groups[key].append((flagged, score))
    return {key: stratified_mean(week_strata(group)) for key, group in groups.items()}


def _edges(edges: Sequence[float]) -> list[float]:
    values = list(edges)
    steps = zip(values, values[1:], strict=False)
    if any(math.isnan(e) for e in values) or any(a >= b for a, b in steps):
        raise ValueError(f"edges must increase strictly, not {edges!r}")
    return values


def _index(value: float, edges: Sequence[float]) -> int:
    """Bucket number of ``value``: 0 below the first edge, len(edges) at or above the last."""
    return sum(1 for edge in edges if value >= edge)


def _number(value: float) -> str:
    return f"{value:g}"


def similarity_buckets(
    rows: Iterable[tuple[float | None, bool, float | None]],
    *,
    edges: Sequence[float] = DEFAULT_SIMILARITY_EDGES,
) -> list[Bucket]:
    """Faithfulness by best chunk similarity, lowest bucket first, then a "none" bucket.

    ``rows`` are (best chunk similarity or None, flagged, score or None if unjudged) for every
    answer. Buckets are [low, high): "<0.5", "0.5–0.6", ..., "≥0.9"; "none" holds answers whose
    chunks came without scores.
    """
    cut = _edges(edges)

    def key(similarity: float | None) -> int | None:
        if similarity is None or math.isnan(similarity):
            return None
        return _index(similarity, cut)

    keys: list[int | None] = [*range(len(cut) + 1), None]
    estimates = _grouped_estimates(((key(s), f, y) for s, f, y in rows), keys)
    return [*_range_buckets(cut, estimates, _number), Bucket("none", None, None, estimates[None])]


def _range_buckets(
    cut: Sequence[float], estimates: Mapping[int | None, Estimate], fmt: Callable[[float], str]
) -> list[Bucket]:
    buckets = []
    for i in range(len(cut) + 1):
        low = cut[i - 1] if i else None
        high = cut[i] if i < len(cut) else None
        if low is None:
            label = f"<{fmt(high)}" if high is not None else "all"
        elif high is None:
            label = f"≥{fmt(low)}"
        else:
            label = f"{fmt(low)}–{fmt(high)}"
        buckets.append(Bucket(label, low, high, estimates[i]))
    return buckets


def similarity_cutoff(buckets: Sequence[Bucket], action_threshold: float) -> float | None:
    """The similarity below which answers turn unfaithful, or None.

    The upper edge of the highest similarity bucket whose whole interval lies below the action
    line (the bucket the traffic light shows red; too few answers never count). The cutoff is
    advice to let the RAG service answer "I don't know" below it, which costs users real
    answers, so it needs evidence, not a point estimate that happens to dip. None when no
    bucket is red, or when even the open top bucket is: then better retrieval would not help,
    and the cause is elsewhere.
    """
    ranged = [b for b in buckets if b.low is not None or b.high is not None]
    # Too few answers never count, even with an interval wholly below the line: the cut-off
    # costs users real answers, and a bucket of a handful is the likeliest to dip by chance
    # among the several buckets looked at.
    red = [
        b for b in ranged
        if not b.estimate.too_few and traffic_light(b.estimate, action_threshold) == "red"
    ]
    if not red:
        return None
    highest = max(red, key=lambda b: -math.inf if b.low is None else b.low)
    return highest.high


def chunk_count_buckets(
    rows: Iterable[tuple[int, bool, float | None]],
    *,
    edges: Sequence[int] = DEFAULT_CHUNK_EDGES,
) -> list[Bucket]:
    """Faithfulness by number of retrieved chunks: "0", "1–2", "3–5", "6–10", "11–20", "21+".

    ``rows`` are (number of chunks, flagged, score or None) for every answer.
    """
    cut = _edges(edges)
    if cut and cut[0] <= 0:
        raise ValueError("the first chunk edge must be above 0")

    def key(count: int) -> int:
        if count < 0:
            raise ValueError(f"a chunk count cannot be negative: {count!r}")
        return _index(count, cut)

    keys = list(range(len(cut) + 1))
    estimates = _grouped_estimates(((key(c), f, y) for c, f, y in rows), keys)
    buckets = []
    for i in keys:
        low = cut[i - 1] if i else 0
        high = cut[i] if i < len(cut) else None
        if high is None:
            label = f"{low}+"
        elif high - low == 1:
            label = str(low)
        else:
            label = f"{low}–{high - 1}"
        buckets.append(Bucket(label, low, high, estimates[i]))
    return buckets


def multi_part_split(
    rows: Iterable[tuple[bool, bool, float | None]],
) -> tuple[Estimate, Estimate]:
    """(single-question estimate, multi-part estimate) from (multi_part, flagged, score) rows."""
    estimates = _grouped_estimates(rows, [False, True])
    return estimates[False], estimates[True]


def no_passing_chunk(
    rows: Iterable[tuple[float | None, bool, float | None]], similarity_threshold: float
) -> Estimate:
    """Faithfulness of answers given although no chunk reached ``similarity_threshold``.

    ``rows`` are (best chunk similarity or None, flagged, score or None) for every answer.
    Answers without chunk scores are left out: whether a chunk passed is unknown for them.
    """
    if math.isnan(similarity_threshold):
        raise ValueError("similarity_threshold is NaN")
    selected = (
        (flagged, score)
        for similarity, flagged, score in rows
        if similarity is not None and similarity < similarity_threshold
    )
    return stratified_mean(week_strata(selected))


# -- causes adjusted for each other, corrected for multiplicity ------------------------------
#
# The buckets above are raw associations: chunk count has no effect of its own in many use
# cases but goes with poor similarity (a weak retrieval returns many weak chunks), so answers
# with many chunks look unfaithful and the page used to advise a reranker in 96 % of such
# simulated use cases. `adjusted_effects` fits the three causes together, so one does not take
# the other's credit, and says which effect holds after a correction for looking at three.

# Below 30 judged answers with a similarity, three slopes and an intercept leave too few
# degrees of freedom for the sandwich variance to be trusted.
MIN_FOR_REGRESSION = 30
CAUSES = ("similarity", "chunks", "multi_part")


@dataclass(frozen=True, slots=True)
class Effect:
    """One cause's association with the score, the others held fixed (an association: the
    data are observational, nothing here says "caused by")."""

    name: str  # "similarity" (per 0.1), "chunks" (per 10 chunks), "multi_part" (vs single)
    estimate: float | None  # change of the mean score; None when the cause does not vary
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


def adjusted_effects(
    rows: Iterable[tuple[float | None, int, bool, bool, float | None]],
    *,
    confidence: float = 0.95,
    sizes: tuple[int, int] | None = None,
) -> Adjusted:
    """Weighted regression of the score on similarity, chunk count and multi-part together.

    ``sizes`` (flagged, unflagged answers of the period), when the caller counted them: then
    ``rows`` need only be the judged answers (a dashboard need not fetch every answer).

    ``rows`` are (best chunk similarity or None, chunk count, multi-part, flagged, score or
    None if unjudged) for EVERY answer of a period with one sample rate. Each judged answer is
    weighted by 1/π within its stratum (N_h/n_h: flagged answers were all judged, the others
    sampled), so the fit describes all answers, not the judged mix. The variance is the
    stratified sandwich (linearisation) variance, so neither the weights nor a non-normal score
    make it too narrow; t quantiles with n − 4 degrees of freedom. The intervals are
    Bonferroni-corrected over the causes fitted and the p-values Holm-adjusted: with three
    causes looked at, one of them "significant" at 5 % by chance is no finding.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence!r}")
    counted = [0, 0]
    judged: list[tuple[int, float, float, float, float]] = []
    for similarity, chunks, multi_part, flagged, score in rows:
        if chunks < 0:
            raise ValueError(f"a chunk count cannot be negative: {chunks!r}")
        h = 0 if flagged else 1
        counted[h] += 1
        if score is None or similarity is None or math.isnan(similarity):
            continue
        if not 0 <= score <= 1:
            raise ValueError(f"scores must lie in [0, 1], not {score!r}")
        judged.append((h, similarity / SIMILARITY_UNIT, chunks / CHUNK_UNIT,
                       1.0 if multi_part else 0.0, score))
    n = len(judged)
    if sizes is None:
        sizes = (counted[0], counted[1])
    elif any(size < seen for size, seen in zip(sizes, counted, strict=True)):
        raise ValueError(f"stratum sizes {sizes} are smaller than the rows given {counted}")
    if n < MIN_FOR_REGRESSION:
        return Adjusted(_EMPTY, n, True)
    data = np.array(judged)
    stratum = data[:, 0].astype(int)
    counts = np.bincount(stratum, minlength=2)
    weights = np.array([sizes[h] / counts[h] if counts[h] else 0.0 for h in (0, 1)])[stratum]
    # Causes that do not vary cannot be fitted (all single questions, say): left out.
    varying = [j for j in range(3) if np.ptp(data[:, 1 + j]) > 0]
    x = np.column_stack([np.ones(n), data[:, [1 + j for j in varying]]])
    y = data[:, 4]
    xtwx = x.T @ (weights[:, None] * x)
    # Causes that always go together (every answer of low similarity also has twelve chunks
    # and a two-part question) cannot be told apart: the matrix is singular, and an inverse
    # taken anyway (rounding makes one) gives numbers of no meaning. A cause is estimable only
    # if its column adds to the rank; the pseudo-inverse then gives the estimable ones their
    # unique estimate and variance, and the others none.
    rank, estimable = _estimable(x, varying)
    bread = np.linalg.pinv(xtwx)
    beta = bread @ (x.T @ (weights * y))
    scores = (weights * (y - x @ beta))[:, None] * x  # each answer's estimating-equation term
    meat = np.zeros_like(xtwx)
    for h in (0, 1):
        part = scores[stratum == h]
        k = len(part)
        if k > 1:
            centred = part - part.mean(axis=0)
            meat += k / (k - 1) * centred.T @ centred
    return _effects(beta, bread @ meat @ bread, varying, estimable, n, rank, confidence)


_EMPTY = tuple(Effect(name, None, None, None, None, None, False) for name in CAUSES)


def _estimable(x: np.ndarray, varying: list[int]) -> tuple[int, list[int]]:
    """The rank of the design (or Gram) matrix `x`, and the causes whose column adds to it."""
    rank = int(np.linalg.matrix_rank(x))
    return rank, [
        j for column, j in enumerate(varying, start=1)
        if np.linalg.matrix_rank(_without(x, column)) < rank
    ]


def _without(x: np.ndarray, column: int) -> np.ndarray:
    if x.shape[0] == x.shape[1]:  # a Gram matrix: its row and its column go
        return np.delete(np.delete(x, column, axis=0), column, axis=1)
    return np.delete(x, column, axis=1)


def _effects(
    beta: np.ndarray, covariance: np.ndarray, varying: list[int], estimable: list[int], n: int,
    rank: int, confidence: float,
) -> Adjusted:
    """Estimates, Bonferroni intervals and Holm p-values of the estimable causes."""
    df = n - rank
    fitted = len(estimable)
    alpha = 1 - confidence
    t_corrected = float(stats.t.ppf(1 - alpha / (2 * fitted), df)) if fitted else math.nan
    raw: list[float] = []
    parts: dict[int, tuple[float, float]] = {}
    for column, j in enumerate(varying, start=1):
        if j not in estimable:
            continue
        se = math.sqrt(max(0.0, covariance[column, column]))
        estimate = float(beta[column])
        parts[j] = (estimate, se)
        if se > 0:
            raw.append(float(2 * stats.t.sf(abs(estimate) / se, df)))
        else:
            raw.append(0.0 if estimate != 0 else 1.0)
    adjusted = holm(raw)
    effects = []
    for j, name in enumerate(CAUSES):
        if j not in parts:
            effects.append(Effect(name, None, None, None, None, None, False))
            continue
        k = estimable.index(j)
        estimate, se = parts[j]
        effects.append(Effect(name, estimate, estimate - t_corrected * se,
                              estimate + t_corrected * se, raw[k], adjusted[k],
                              adjusted[k] < alpha))
    return Adjusted(tuple(effects), n, False)


@dataclass(frozen=True, slots=True)
class HeldOutCutoff:
    """A similarity cut-off chosen on one half of the weeks and tested on the other."""

    cutoff: float | None  # chosen on the even-numbered weeks (None: no red bucket there)
    test: Estimate | None  # answers below it in the odd-numbered weeks
    holds: bool  # the test half's answers below the cut-off are red too


def held_out_cutoff(
    weeks: Sequence[Iterable[tuple[float | None, bool, float | None]]],
    action_threshold: float,
    *,
    edges: Sequence[float] = DEFAULT_SIMILARITY_EDGES,
) -> HeldOutCutoff:
    """`similarity_cutoff` without choosing and testing on the same answers.

    The cut-off is the edge of the highest red bucket among several: picked on the same data,
    a bucket that dipped by chance looks like a finding. So it is chosen on weeks 0, 2, 4, …
    of ``weeks`` (rows as for `similarity_buckets`) and kept only if the answers below it in
    weeks 1, 3, 5, … are red as well: their interval wholly below the action line.
    """
    chosen = [row for i, week in enumerate(weeks) if i % 2 == 0 for row in week]
    tested = [row for i, week in enumerate(weeks) if i % 2 == 1 for row in week]
    cutoff = similarity_cutoff(similarity_buckets(chosen, edges=edges), action_threshold)
    if cutoff is None:
        return HeldOutCutoff(None, None, False)
    test = no_passing_chunk(tested, cutoff)
    holds = (
        not test.too_few and traffic_light(test, action_threshold) == "red"
    )
    return HeldOutCutoff(cutoff, test, holds)


# --- the same regression from per-stratum power sums (weekly rollups, issue 22) -------------


def adjusted_effects_from_moments(
    moments: tuple[Moments, Moments], *, sizes: tuple[int, int], confidence: float = 0.95,
) -> Adjusted:
    """`adjusted_effects` from each stratum's (flagged, unflagged) moments and sizes: the same
    estimates, intervals and p-values up to rounding (the meat comes from expanded sums)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence!r}")
    n = moments[0].n + moments[1].n
    if n < MIN_FOR_REGRESSION:
        return Adjusted(_EMPTY, n, True)
    if any(size < m.n for size, m in zip(sizes, moments, strict=True)):
        raise ValueError(f"stratum sizes {sizes} are smaller than the answers judged")
    every = moments[0] + moments[1]
    varies = (every.s_min < every.s_max, every.c_min < every.c_max, 0 < every.m_sum < n)
    varying = [j for j in range(3) if varies[j]]
    # Each column of x as exponents (s, c, m): the intercept, then the varying causes.
    columns = [(0, 0, 0)] + [((1, 0, 0), (0, 1, 0), (0, 0, 1))[j] for j in varying]

    def sum_of(m: Moments, *parts: tuple[int, int, int], y: int = 0) -> float:
        i = sum(e[0] for e in parts)
        j = sum(e[1] for e in parts)
        k = min(1, sum(e[2] for e in parts))
        return m.sums[(i, j, k, y)]

    size = len(columns)
    gram = [np.array([[sum_of(m, a, b) for b in columns] for a in columns]) for m in moments]
    weights = [s / m.n if m.n else 0.0 for s, m in zip(sizes, moments, strict=True)]
    xtwx = sum(w * g for w, g in zip(weights, gram, strict=True))
    xtwy = sum(
        w * np.array([sum_of(m, a, y=1) for a in columns])
        for w, m in zip(weights, moments, strict=True)
    )
    rank, estimable = _estimable(gram[0] + gram[1], varying)
    bread = np.linalg.pinv(xtwx)
    beta = bread @ xtwy
    meat = np.zeros((size, size))
    for w, m in zip(weights, moments, strict=True):
        if m.n < 2:
            continue
        total = w * (np.array([sum_of(m, a, y=1) for a in columns])
                     - np.array([[sum_of(m, a, b) for b in columns] for a in columns]) @ beta)
        cross = np.zeros((size, size))
        for a in range(size):
            for b in range(size):
                value = sum_of(m, columns[a], columns[b], y=2)
                for q in range(size):
                    value -= 2 * beta[q] * sum_of(m, columns[q], columns[a], columns[b], y=1)
                    for r in range(size):
                        value += beta[q] * beta[r] * sum_of(
                            m, columns[q], columns[r], columns[a], columns[b])
                cross[a, b] = w * w * value
        meat += m.n / (m.n - 1) * (cross - np.outer(total, total) / m.n)
    return _effects(beta, bread @ meat @ bread, varying, estimable, n, rank, confidence)
