"""The experts' scale with its correction per week and stratum, weighted like the judge's part.

`expert_scale.expert_scale` takes the pool's reviews as one sample: each review counts alike,
whatever the volume of the week it came from. The judge's part Ĵ weights each week by its
answers. Where the weeks' volumes differ and the judge's error differs from week to week (a
judge changed, a mix of questions moved), the two parts then describe different averages:
with four times the volume in two weeks and a judge change in weeks 3-4 the pooled correction
was off by up to ±0.046 and its interval held the experts' truth in 23-98 % of pools
(bench/statistics.py --only expert). Here the correction is estimated per week × stratum cell
c = (w, h) and weighted like the judge's part:

    Δ̂ = Σ_c W_c · d̄_c,    W_c = N_c / N (the cell's answers over the pool's).

Cells without a review: the week's own answers are reviewed the week after, so the newest week
of a pool is normally unreviewed. Such a cell is carried by its stratum's reviewed weeks: it
takes their pooled mean d̄_h (each review alike, so each reviewed cell c' of the stratum
carries W_c·n_c'/n_h more), with a width of its own (`carry_variance`). A stratum without any
review in the pool borrows all the pool's reviews (collapsed strata), as before. Written as
loads λ_c' = W_c' + Σ_carried W_c·n_c'/n_source on the reviewed cells, Δ̂ = Σ λ_c'·d̄_c' and

    V(Δ̂) = Σ_c' λ_c'² (1 − n_c'/N_c') s̃_h² / n_c'  +  Σ_carried W_c² (s̃_h²/N_c + τ̂_h² (1 + Σ a²)),

s̃_h² the stratum's spread of differences with the floor's pseudo-review as in
`expert_scale.rectifier` (over all its reviews in the pool, so that a week of two reviews does
not stand for its spread alone), a the carrying weights n_c'/n_h, and τ̂_h² the spread of the
stratum's weekly differences between weeks beyond their sampling noise (DerSimonian-Laird's
moment estimate; 0 with fewer than two reviewed weeks): a carried week can differ from those
that carry it by that much. Where the reviews follow the volume (equal weeks, a batch a week),
λ_c' = W_h·n_c'/n_h and Δ̂ is the pooled rectifier's, V(Δ̂) too but for the finite population
corrections (a week's reviews are a sample of its own answers): the two agree where the pooled
one was right.

The rectifier also carries κ₃(Δ̂) = Σ λ_c³ (1 − n_c/N_c) μ̂₃,h / n_c², from the stratum's third
central moment over its reviews (`ReviewSums.cube`): the skew a strict or lenient judge gives
the correction. The interval does not use it yet: no shape tried with it held both a strict
judge's upper tail and a lenient one's lower tail (bench/README.md, session 26).

A change of judge model, judge mode or prompt version (the trend's judge-change mark), or of the
generator model (`selectors/restarts.py`), restarts the pool as a drift alarm does
(`expert_scale.pooling_weeks`): reviews before it measured another judge, and no weighting makes
them measure this one. Until the new judge's first week is reviewed, the pool has no review and
the page shows the judge's scale.

Plain values in, plain values out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from dashboard.domain.expert_scale import (
    ExpertScale,
    Rectifier,
    Review,
    ReviewSums,
    as_sums,
    expert_scale_from_parts,
    merge_cells,
    pseudo_review_offset,
)
from dashboard.domain.statistics.cells import Stratum, StratumSums, summarize, z_value
from dashboard.domain.statistics.estimates import pooled_mean

WeekReviews = tuple[ReviewSums, ReviewSums] | Sequence[Review]


@dataclass(frozen=True, slots=True)
class ReviewedCell:
    """A week × stratum cell whose reviews enter Δ̂, with the weight they carry there."""

    week: int
    stratum: int  # 0 flagged, 1 unflagged
    weight: float  # W_c, the cell's share of the pool's answers
    load: float  # λ_c: W_c plus what the cells it carries put on it
    reviews: ReviewSums


@dataclass(frozen=True, slots=True)
class WeeklyRectifier:
    """Δ̂ per week and stratum, and the reviewed cells behind it (for the covariance)."""

    rectifier: Rectifier
    cells: tuple[ReviewedCell, ...]
    carried: int  # cells without a review of their own, carried by the reviewed weeks


def weekly_rectifier(
    weeks: Sequence[Sequence[StratumSums]],
    reviews: Sequence[WeekReviews],
    *,
    confidence: float = 0.95,
) -> WeeklyRectifier:
    """Δ̂ = Σ_c W_c·d̄_c over the pool's week × stratum cells, unreviewed cells carried (see the
    module's docstring). ``reviews`` holds each week's reviews, in the order of ``weeks``."""
    z = z_value(confidence)
    if len(reviews) != len(weeks):
        raise ValueError(f"{len(reviews)} weeks of reviews for {len(weeks)} weeks")
    own = [as_sums(r) for r in reviews]
    strata = [_merge([week[h] for week in own]) for h in (0, 1)]
    everyone = merge_cells(strata[0], strata[1])
    n = everyone.n
    population = sum(s.size for week in weeks for s in week)
    if n == 0 or population == 0:
        return WeeklyRectifier(Rectifier(None, None, None, None, n, (strata[0].n, strata[1].n),
                                         0), (), 0)
    offset = pseudo_review_offset(everyone)
    spread = [(s.sq_dev + offset**2 * s.n / n) / s.n if s.n else 0.0 for s in strata]
    loads: dict[tuple[int, int], float] = {}
    value = carry = 0.0
    carried = 0
    for h in (0, 1):
        # A stratum without a review borrows every review of the pool (collapsed strata).
        sources = [h] if strata[h].n else [0, 1]
        source = strata[h] if strata[h].n else everyone
        tau = _between_weeks([week[h] for week in own]) if strata[h].n else 0.0
        shares = [week[g].n / source.n for week in own for g in sources]
        for w, week in enumerate(weeks):
            size, mine = week[h].size, own[w][h]
            if mine.n > size:
                raise ValueError(f"{mine.n} reviews in a cell of {size} answers")
            if size == 0:
                continue
            weight = size / population
            if mine.n:
                loads[w, h] = loads.get((w, h), 0.0) + weight
                value += weight * mine.total / mine.n
                continue
            carried += 1
            value += weight * source.total / source.n
            for v, theirs in enumerate(own):
                for g in sources:
                    if theirs[g].n:
                        loads[v, g] = loads.get((v, g), 0.0) + weight * theirs[g].n / source.n
            carry += carry_variance(weight, size, spread[h] if strata[h].n else _mean_spread(
                strata, spread), tau, shares)
    cells = tuple(ReviewedCell(w, h, weeks[w][h].size / population, load, own[w][h])
                  for (w, h), load in sorted(loads.items()))
    variance = carry + math.fsum(
        c.load**2 * max(0.0, 1 - c.reviews.n / weeks[c.week][c.stratum].size)
        * spread[c.stratum] / c.reviews.n for c in cells)
    # κ₃(Δ̂) = Σ λ_c³·(1 − n_c/N_c)·μ₃,h/n_c², μ₃,h the stratum's third central moment over
    # its reviews in the pool (carried cells' own scatter and τ̂² taken as even).
    third = math.fsum(
        c.load**3 * max(0.0, 1 - c.reviews.n / weeks[c.week][c.stratum].size)
        * strata[c.stratum].cube / strata[c.stratum].n / c.reviews.n**2 for c in cells)
    df = max(1, n - 1)
    variance *= (float(stats.t.ppf(0.5 + confidence / 2, df)) / z) ** 2
    half = z * math.sqrt(variance)
    fix = Rectifier(value, variance, value - half, value + half, n, (strata[0].n, strata[1].n),
                    df, third)
    return WeeklyRectifier(fix, cells, carried)


def carry_variance(
    weight: float, size: int, spread: float, between: float, shares: Sequence[float]
) -> float:
    """What a cell carried by other weeks adds to V(Δ̂) beyond their sampling error: its own
    answers' mean difference scatters about the stratum's by s̃²/N_c (the week is a finite
    population of its own), and its week's difference about the carrying weeks' by τ̂², plus
    τ̂²·Σa² for the carrying weeks' own departures from the stratum's (a: their shares of the
    carried mean)."""
    return weight * weight * (spread / size + between * (1 + math.fsum(a * a for a in shares)))


def expert_scale_by_week(
    weeks: Sequence[Sequence[Stratum]] | Sequence[Sequence[StratumSums]],
    reviews: Sequence[WeekReviews],
    *,
    confidence: float = 0.95,
) -> ExpertScale:
    """θ̂ = Ĵ + Δ̂ over ``weeks`` (each [flagged, unflagged]), Δ̂ per week and stratum;
    ``reviews[i]`` are the reviews of the answers of ``weeks[i]`` (empty where none yet)."""
    sums = [[s if isinstance(s, StratumSums) else summarize(s) for s in week] for week in weeks]
    if any(len(week) != 2 for week in sums):
        raise ValueError("every week needs its [flagged, unflagged] strata")
    judge = pooled_mean(sums, confidence=confidence)
    weekly = weekly_rectifier(sums, reviews, confidence=confidence)
    return expert_scale_from_parts(sums, judge, weekly.rectifier,
                                   lambda: covariance(sums, weekly), confidence=confidence)


def covariance(weeks: Sequence[Sequence[StratumSums]], weekly: WeeklyRectifier) -> float:
    """Cov(Ĵ, Δ̂), unbounded: a reviewed cell's reviews are a random subset of its J_c judged
    answers, so its judge mean and its mean difference covary by (1 − J_c/N_c)/J_c·S_jd,h
    (S_jd,h the stratum's covariance of judge score and difference over its reviews in the
    pool); Ĵ weights the cell by W_c and Δ̂ by λ_c. Carried cells add none: the reviews that
    carry them are of other weeks' answers."""
    strata = [_merge([c.reviews for c in weekly.cells if c.stratum == h]) for h in (0, 1)]
    out = 0.0
    for c in weekly.cells:
        mine = strata[c.stratum]
        judged, size = weeks[c.week][c.stratum].n, weeks[c.week][c.stratum].size
        if mine.n < 2 or judged == 0 or size == 0:
            continue
        out += (c.weight * c.load * max(0.0, 1 - judged / size) / judged
                * mine.cross / (mine.n - 1))
    return out


def _between_weeks(cells: Sequence[ReviewSums]) -> float:
    """τ̂², the variance of a stratum's weekly mean difference between weeks beyond sampling
    noise (DerSimonian-Laird): (Q − (k − 1)·s_w²)/(n − Σn_w²/n), at least 0, with Q the
    between-week sum of squares and s_w² the pooled within-week spread. 0 with fewer than two
    reviewed weeks or no within-week degree of freedom."""
    reviewed = [c for c in cells if c.n]
    n = sum(c.n for c in reviewed)
    k = len(reviewed)
    if k < 2 or n <= k:
        return 0.0
    within = math.fsum(c.sq_dev for c in reviewed)
    between = max(0.0, _merge(reviewed).sq_dev - within)
    scale = n - sum(c.n * c.n for c in reviewed) / n
    return max(0.0, (between - (k - 1) * within / (n - k)) / scale)


def _mean_spread(strata: Sequence[ReviewSums], spread: Sequence[float]) -> float:
    n = sum(s.n for s in strata)
    return math.fsum(s.n * v for s, v in zip(strata, spread, strict=True)) / n


def _merge(cells: Sequence[ReviewSums]) -> ReviewSums:
    out = ReviewSums(0, 0.0, 0.0)
    for c in cells:
        out = merge_cells(out, c)
    return out
