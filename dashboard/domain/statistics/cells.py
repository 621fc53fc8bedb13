"""The estimator's machinery behind estimates.py: strata and their sufficient statistics, the
cells a stratified ratio is fitted on, the fit with its variance, and the stratified Wilson
interval taken on it (the method is in estimates.py's docstring)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from statistics import NormalDist

# A drawn stratum with fewer than ten judged answers is a statement of low precision, not a
# hidden point: at 9 of 10 supported the 95 % Wilson interval is 0.60-0.98, and one answer moves
# the estimate by a tenth. `Estimate.too_few` says so; the value and interval are still there,
# and the light (`traffic_light`) is grey only where the interval cannot decide.
MIN_JUDGED = 10

# The pseudo-answer: half of its weight at 1 (a supported claim), half at 0.
PRIOR = 0.5

# Its weight per stratum (per week × stratum cell when weeks are pooled). Shares of 0/1 values
# take Jeffreys' whole pseudo-answer, Beta(½, ½); means of scores much less (estimates.py).
SHARE_PRIOR = 1.0
# A share (of answers or of claims) divides its sum of squares by n_h + 1 − SHARE_LOST. Over
# n_h + 1 (then s̃² = p̃(1 − p̃) exactly, and one stratum's interval is the textbook Wilson
# interval) the share below the line covered 92.4 % at 50 answers a week, a week of one or two
# random answers: the truth lay below the interval when one of them fell below the line. Over
# n_h (n_h − 1 degrees of freedom, as a week's mean takes them) 95.7 % there but 96.6-97.5 %
# at 150-300 a week; half a degree lost: 93.3 % and 95.6-96.3 % (bench/statistics.py,
# `--only small`).
SHARE_LOST = 0.5

@dataclass(frozen=True, slots=True)
class Stratum:
    """One stratum of a week: its size N_h and the values of its judged answers."""

    size: int  # N_h: answers in the stratum that week, judged or not
    values: Sequence[float]  # judged values in [0, 1] (scores, or 0/1 indicators)
    # Drawn at random (the unflagged answers) rather than judged in full (the flagged ones,
    # which may lack a few runs still pending or failed): only a drawn stratum needs MIN_JUDGED
    # judged answers of its own before its week is an estimate and not "too few".
    drawn: bool = True


@dataclass(frozen=True, slots=True)
class StratumSums:
    """One stratum by its sufficient statistics: what the estimators need of its values.

    ``total`` = Σ y and ``sq_dev`` = Σ (y − ȳ)² over the ``n`` judged values in [0, 1]; for a
    database, sq_dev = Σy² − (Σy)²/n (clip a rounding negative to 0).
    """

    size: int
    n: int
    total: float
    sq_dev: float
    drawn: bool = True


@dataclass(frozen=True, slots=True)
class Estimate:
    """A stratified estimate with its interval and sample sizes.

    ``value``, ``low`` and ``high`` are None when the week cannot be estimated: nothing judged,
    or a non-empty stratum without a single judged answer (its mean is then unknown, and
    leaving it out would bias the estimate toward the other stratum).
    """

    value: float | None
    low: float | None
    high: float | None
    n: int  # judged answers used (Σ n_h)
    population: int  # N
    n_by_stratum: tuple[int, ...]
    # A precision flag, not a verdict: n < MIN_JUDGED, a non-empty stratum without a judged
    # answer, or a stratum drawn at random with fewer than MIN_JUDGED judged (Stratum.drawn; a
    # stratum judged in full needs none). The value and interval are still given.
    too_few: bool


@dataclass(frozen=True, slots=True)
class Cell:
    """A stratum as the core sees it: a ratio Σa/Σm (m = 1 per answer for a plain mean)."""

    size: int
    n: int
    a: float  # Σ a
    m: float  # Σ m
    aa: float  # Σ (a − ā)²
    mm: float  # Σ (m − m̄)²
    am: float  # Σ (a − ā)(m − m̄)
    drawn: bool
    # The pseudo-answer's weight in this cell (SHARE_PRIOR or SCORE_PRIOR): one per stratum of
    # a week, and one per week × stratum cell when weeks are pooled.
    prior: float = SHARE_PRIOR
    # Pooled weeks: the stratum whose cells share one spread (`fit_cells`); None: its own.
    stratum: int | None = None
    # The degrees of freedom its own mean takes from its spread: s̃² is its sum of squares over
    # n − lost + prior (`_divisor`). Where the cells of a stratum share one spread, the pool's
    # rule decides instead (`fit_cells`).
    lost: float = 0.0


@dataclass(frozen=True, slots=True)
class Fit:
    """The estimator's working parts, for the functions built on it (pooling, the expert
    scale, precision): the point, the variance, and what the interval is taken on."""

    value: float
    variance: float  # V, the stratified variance of the value
    ratio: float  # p̃, the shrunk value (the pseudo-answer in each sampled stratum)
    fixed: float  # Σ W_h·ȳ_h over the strata judged in full (means only; 0 for a ratio)
    drawn_weight: float  # W_S = Σ W_h over the other strata (1 for a ratio)
    drawn_ratio: float  # p̃_S, the shrunk mean of those strata (the ratio for a ratio)
    floor: float  # what the value can be at least and at most, given the unjudged answers
    ceiling: float
    # Per stratum: (W_h, s̃_h², N_h, n_h, drawn and sampled) - what the stratum adds to V.
    spreads: tuple[tuple[float, float, int, int, bool], ...]


def z_value(confidence: float) -> float:
    """The two-sided standard normal quantile for ``confidence`` (1.96 at 0.95)."""
    if not 0.0 < confidence < 1.0:  # also false for NaN
        raise ValueError(f"confidence must be between 0 and 1, not {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: float, n: float, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` of ``n``; fractional counts allowed; n=0 → (0, 1).

    Fractional counts are what effective sample sizes give; the formula does not need integers.
    """
    if not (n >= 0 and math.isfinite(n)):
        raise ValueError(f"n must be a finite number of at least 0, not {n!r}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n={n}, not {successes!r}")
    z = z_value(confidence)
    if n == 0:
        return 0.0, 1.0
    return wilson_interval(successes / n, n, z)


def wilson_interval(p: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's interval for a share ``p`` of a (possibly effective, fractional) ``n`` > 0."""
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    # The formula gives exactly 0 (1) at p = 0 (1) up to rounding; say so exactly.
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return low, high


def interval(fit: Fit, z: float, *, extra_variance: float = 0.0) -> tuple[float, float]:
    """Wilson on the drawn part of ``fit`` with ``extra_variance`` added, fixed part added back.

    `extra_variance` is the variance of a correction to be added to the value afterwards (the
    expert-scale rectifier); the interval is then still the skewed Wilson shape of the judged
    part, widened by it.
    """
    variance = fit.variance + extra_variance
    if variance <= 0:
        return fit.value, fit.value  # every stratum judged in full: the value is known
    w, p_tilde = fit.drawn_weight, fit.drawn_ratio
    if w > 0 and 0 < p_tilde < 1:
        part = min(1.0, max(0.0, (fit.value - fit.fixed) / w))
        low, high = wilson_interval(part, p_tilde * (1 - p_tilde) * w * w / variance, z)
        low, high = fit.fixed + w * low, fit.fixed + w * high
    elif 0 < fit.ratio < 1:
        low, high = wilson_interval(fit.value, fit.ratio * (1 - fit.ratio) / variance, z)
    else:
        half = z * math.sqrt(variance)
        low, high = max(0.0, fit.value - half), min(1.0, fit.value + half)
    return min(low, fit.value), max(high, fit.value)


def as_sums(stratum: Stratum | StratumSums) -> StratumSums:
    return stratum if isinstance(stratum, StratumSums) else summarize(stratum)


def mean_cell(s: StratumSums, prior: float, lost: float = 0.0) -> Cell:
    check_size(s.size, s.n)
    if not (isinstance(s.n, Integral) and not isinstance(s.n, bool)):
        raise ValueError(f"n must be an integer, not {s.n!r}")
    if not (isinstance(s.total, Real) and 0 <= s.total <= s.n):
        raise ValueError(f"the sum of {s.n} values in [0, 1] cannot be {s.total!r}")
    # Σ(y − ȳ)² of values in [0, 1] is at most n/4 (half at 0, half at 1); a little rounding
    # slack above, none below 0.
    if not (isinstance(s.sq_dev, Real) and 0 <= s.sq_dev <= s.n / 4 + 1e-9):
        raise ValueError(f"Σ(y − ȳ)² of {s.n} values in [0, 1] cannot be {s.sq_dev!r}")
    return Cell(int(s.size), int(s.n), float(s.total), float(s.n), float(s.sq_dev), 0.0, 0.0,
                 s.drawn, prior, lost=lost)


def merge_cells(cells: Sequence[Cell]) -> Cell:
    """One cell of several (of a plain mean): sizes and sums added, deviations pooled."""
    n = sum(c.n for c in cells)
    a = math.fsum(c.a for c in cells)
    mean = a / n if n else 0.0
    aa = math.fsum(c.aa + (c.n * (c.a / c.n - mean) ** 2 if c.n else 0.0) for c in cells)
    return Cell(sum(c.size for c in cells), n, a, float(n), aa, 0.0, 0.0,
                 any(c.drawn for c in cells), cells[0].prior, cells[0].stratum, cells[0].lost)


def check_size(size: int, n: int) -> None:
    if isinstance(size, bool) or not isinstance(size, Integral) or size < 0:
        raise ValueError(f"stratum size must be an integer of at least 0, not {size!r}")
    if n > size:
        raise ValueError(f"{n} judged answers in a stratum of {size}")
    if n < 0:
        raise ValueError(f"judged answers cannot be {n!r}")


def units(values: Sequence[float]) -> list[float]:
    """The values as floats in [0, 1], as `unit` checks them one by one.

    A fast path for the usual case, a list of floats in range, checked at C speed: every value
    a float (no bool, int, Decimal or subclass), none below 0 or above 1, and no NaN (a NaN
    makes the sum NaN; an infinity is out of range already). Anything else goes through
    `unit`, which converts or raises exactly as before.
    """
    out = values if type(values) is list else list(values)
    if not out:
        return []
    if set(map(type, out)) == {float} and min(out) >= 0 and max(out) <= 1:
        total = sum(out)
        if total == total:
            return out
    return [unit(v) for v in out]


def unit(value: float) -> float:
    if not 0 <= value <= 1:  # also false for NaN
        raise ValueError(f"values must lie in [0, 1], not {value!r}")
    return float(value)


def estimate_cells(cells: Sequence[Cell], confidence: float, *, ratio: bool = False,
              pooled: bool = False) -> Estimate:
    z = z_value(confidence)
    population = int(sum(c.size for c in cells))
    n_by = tuple(c.n for c in cells)
    n = sum(n_by)
    fit = fit_cells(cells, ratio=ratio, pooled=pooled)
    if fit is None:
        return Estimate(None, None, None, n, population, n_by, True)
    # A stratum drawn at random speaks through its own judged answers only: twelve flagged
    # answers judged in full and one random one are n = 13, but the unflagged majority of the
    # week rests on that one answer. A sampled stratum needs MIN_JUDGED of its own.
    too_few = n < MIN_JUDGED or any(
        c.drawn and 0 < c.n < min(c.size, MIN_JUDGED) for c in cells
    )
    low, high = interval(fit, z)
    # Unjudged answers score somewhere in [0, 1]; the mean cannot leave these bounds.
    # min/max with the value: the bounds and the weighted value differ in the last bit.
    low = min(max(low, fit.floor), fit.value)
    high = max(min(high, fit.ceiling), fit.value)
    return Estimate(fit.value, low, high, n, population, n_by, too_few)


def fit_cells(cells: Sequence[Cell], *, ratio: bool, pooled: bool = False) -> Fit | None:
    """The shared machinery: a stratified ratio Σ W_h ā_h / Σ W_h m̄_h and its variance.

    For a plain mean m = 1 per answer, so the ratio is the mean. None when the value is
    unknown (nothing judged, a non-empty stratum without a judged answer, no claim at all).
    ``pooled``: the cells of one stratum share a spread over their degrees of freedom.
    """
    population = sum(c.size for c in cells)
    if population == 0 or any(c.size > 0 and c.n == 0 for c in cells):
        return None
    live = [c for c in cells if c.size]
    weights = [c.size / population for c in live]
    sampled = [c.n < c.size for c in live]
    numerator = math.fsum(w * c.a / c.n for w, c in zip(weights, live, strict=True))
    denominator = math.fsum(w * c.m / c.n for w, c in zip(weights, live, strict=True))
    if denominator == 0:
        return None  # no judged answer has a claim: a claim share is undefined
    value = min(1.0, numerator / denominator)

    # Shrunk ratio: Jeffreys counts in the sampled strata only; a census stratum is exact.
    pairs = list(zip(live, sampled, strict=True))
    shrunk_a = [(c.a + PRIOR * c.prior) / (c.n + c.prior) if s else c.a / c.n
                for c, s in pairs]
    shrunk_m = [(c.m + 2 * PRIOR * c.prior) / (c.n + c.prior) if s else c.m / c.n
                for c, s in pairs]
    d = math.fsum(w * m for w, m in zip(weights, shrunk_m, strict=True))
    r = math.fsum(w * a for w, a in zip(weights, shrunk_a, strict=True)) / d

    squares = [_squares(c, r, d) if s else 0.0 for c, s in pairs]
    own = [q / _divisor(c) for q, c in zip(squares, live, strict=True)]
    # The cells of one stratum over pooled weeks share one spread, as a one-way analysis of
    # variance pools its groups' variances: the sums of squares about each week's mean (with
    # its week's pseudo-answer), n_c + k times each cell's own spread, over the degrees of
    # freedom Σ(n_c − 1 + k) (`pooled`; else over Σ(n_c + k), as a week divides its own).
    groups: dict[int, list[int]] = {}
    for i, (c, s) in enumerate(pairs):
        if s and c.stratum is not None:
            groups.setdefault(c.stratum, []).append(i)
    lost = 1 if pooled else 0  # the degree of freedom each week's own mean takes
    for members in groups.values():
        if len(members) > 1:
            total = math.fsum(squares[i] for i in members)
            share = total / math.fsum(live[i].n - lost + live[i].prior for i in members)
            for i in members:
                own[i] = share
    spreads = []
    terms = []
    for w, c, s, spread in zip(weights, live, sampled, own, strict=True):
        if not s:
            spreads.append((w, 0.0, c.size, c.n, False))
            continue
        spreads.append((w, spread, c.size, c.n, c.drawn))
        terms.append(w * w * (1 - c.n / c.size) * spread / c.n)
    variance = math.fsum(terms)

    if ratio:
        fixed, drawn_weight, drawn_ratio = 0.0, 1.0, r
    else:
        # The fixed part: strata judged in full or by design (flagged, maybe short of a few
        # failed runs, whose small variance stays in V); the rest is the drawn part.
        part = [not (s and c.drawn) for c, s in zip(live, sampled, strict=True)]
        fixed = math.fsum(w * c.a / c.n for w, c, f in zip(weights, live, part, strict=True) if f)
        drawn_weight = math.fsum(w for w, f in zip(weights, part, strict=True) if not f)
        drawn_ratio = (
            math.fsum(w * a for w, a, f in zip(weights, shrunk_a, part, strict=True) if not f)
            / drawn_weight if drawn_weight > 0 else r
        )
    judged_a = math.fsum(c.a for c in cells)
    unjudged = population - sum(c.n for c in cells)
    floor, ceiling = (judged_a / population, (judged_a + unjudged) / population) if not ratio \
        else (0.0, 1.0)
    return Fit(value, variance, r, fixed, drawn_weight, drawn_ratio, floor, ceiling,
               tuple(spreads))


def _divisor(c: Cell) -> float:
    """What a cell's own sum of squares is divided by: its degrees of freedom plus the
    pseudo-answer's weight."""
    return c.n - c.lost + c.prior


def _squares(c: Cell, r: float, d: float) -> float:
    """The sum of squares behind s̃² of a sampled cell: its residuals' and its pseudo-answer's
    squared deviations about their centre."""
    # Residuals z_i = (a_i − R·m_i)/D and the pseudo-answer: one claim, weight ½ supported
    # (residual (1 − R)/D) and ½ unsupported (−R/D). Their spread about their centre is
    # Σ(z − z̄)² + n(z̄ − c)² + the pseudo-answer's part, over n + its weight.
    mean_z = (c.a - r * c.m) / (c.n * d)
    spread_z = (c.aa - 2 * r * c.am + r * r * c.mm) / (d * d)
    supported, unsupported = (1 - r) / d, -r / d
    weight = c.prior
    centre = (c.n * mean_z + PRIOR * weight * (supported + unsupported)) / (c.n + weight)
    return (
        max(0.0, spread_z) + c.n * (mean_z - centre) ** 2
        + PRIOR * weight * ((supported - centre) ** 2 + (unsupported - centre) ** 2)
    )


def summarize(stratum: Stratum) -> StratumSums:
    """A stratum's judged values reduced to their sufficient statistics (values checked)."""
    values = units(stratum.values)
    n = len(values)
    total = math.fsum(values)
    mean = total / n if n else 0.0
    sq_dev = math.fsum([(v - mean) ** 2 for v in values]) if n else 0.0
    return StratumSums(stratum.size, n, total, sq_dev, stratum.drawn)
