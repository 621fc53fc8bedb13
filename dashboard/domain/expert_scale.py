"""Faithfulness on the experts' scale, by prediction-powered inference.

The judge's stratified estimate is on the judge's scale: a judge that is strict by 0.02 puts
every week 0.02 low, and its interval is about the judge's mean, not the experts'. The weekly
expert review (tier 3) labels about 20 judged answers a week, too few for an estimate of their
own but enough to measure the judge's error. Prediction-powered inference (Angelopoulos et
al., Science 2023) adds that error back:

    θ̂ = Ĵ + Δ̂,    Ĵ the judge-scale stratified estimate,
                  Δ̂ = Σ_c W_c · mean_c(expert − judge) over the reviewed answers,
    V = V(Ĵ) + V(Δ̂).

Both parts are pooled over the same weeks (the week and the 3 before it by default, fewer since
a drift alarm, a change of judge model, mode or prompt version, or of the generator model
restarted the pool: the judge's error after it is not the one before), so Ĵ and Δ̂ estimate the
same population and θ̂ its mean expert score. The dashboard's Δ̂ is taken per week × stratum
cell c and weighted by the cell's answers, W_c = N_c/N, as Ĵ is; a cell not yet reviewed (the
newest week: its answers are reviewed the week after) is carried by its stratum's reviewed
weeks with a width of its own (`expert_weeks`, where that estimator lives). Weighting each
review alike, as `expert_scale` here does, is right only where the weeks' reviews follow their
volume and the judge's error stays: with four times the volume in two weeks and a judge change
in weeks 3-4 it was off by up to ±0.046 (bench/statistics.py --only expert). `expert_scale` and
`rectifier` remain for one block of reviews (the calibration page's bias,
review/domain/calibration.py) and as the bench's comparison; the floor, the covariance and the
interval's shape below are the same in both.

Which reviewed answers may enter Δ̂: a review batch draws at random from the week's answers
in the random sample (independent of the flag), and tops up with flagged answers drawn at
random from the rest when the random sample is short. Within the flagged stratum the reviewed
answers are then still a simple random sample (the random-sample split of the flagged answers
is itself random, and each part is drawn from uniformly), and within the unflagged stratum they
are one anyway. So Δ̂ is stratified by the flag, each stratum weighted by its size: a reviewed
answer counts with 1/π within its stratum, and the top-ups are no longer taken as a random
sample of all traffic (which biased the calibration by −0.07 at 500 answers a week). A stratum
without a reviewed answer in the pool borrows the mean difference of all reviews (collapsed
strata) rather than leaving the estimate undefined.

The floor: the variance of the differences is taken with one pseudo-review off the mean (half
above, half below), shared out over the strata by their reviews:
s̃_h² = (Σ(d − d̄)² + offset²·n_h/n)/n_h. So 20 identical differences (typically 20 answers where
expert and judge agree) still give an interval: the next review could disagree. Its share of
s̃² shrinks as 1/n. The offset is RECTIFIER_SPREAD (0.35) where no disagreement was seen and
moves toward the size of those seen (`pseudo_review_offset`).

The interval is Wilson's on the experts' scale, with the effective size p̃(1 − p̃)/V from the
judge part's shrunk value plus Δ̂ (the experts' scores, not the judge's, set the skew: a lenient
judge can sit at 0.99 while the experts' mean is 0.90). V(Δ̂) is scaled by (t/z)² with the
Student t of the reviews' degrees of freedom, as its spread comes from a few dozen reviews. The
reviewed answers are judged answers too, so V(θ̂) = V(Ĵ) + V(Δ̂) + 2·Cov(Ĵ, Δ̂), the covariance
estimated from the reviews' judge scores and differences (`_covariance`). It is negative where
the judge's errors are its own noise, and matters where a few hundred answers a week are
judged and nearly all of the random ones reviewed: left out, the interval covered up to 98.7 %
(with it, and the pooled judge part's shared spreads, at most 97.3 % at 150-500 answers a week;
the bound on it binds in under 0.5 % of simulated weeks).

V(Ĵ) is the pooled weeks' with a week's pseudo-answer (SCORE_PRIOR per cell, the shared spread
over Σ(n_c + k)), not the pooled interval's lighter one over the degrees of freedom: the
Wilson shape here is on the whole value, flagged part and all, not on the drawn part alone, so
a pool whose random answers all scored 1.0 rests on V(Ĵ) to reach the truth (with the pooled
interval's recipe: 91.4 % at 150 answers a week, strict judge). Where the correction widens
the interval anyway, the pseudo-answer does not stack on it (`_variance`). Coverage, and what
is still over and why, is in `bench/statistics.py` and bench/README.md.

Plain values in, plain values out: the selectors feed it strata and reviewed pairs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from scipy import stats

from dashboard.domain.statistics.cells import (
    Estimate,
    Fit,
    Stratum,
    StratumSums,
    summarize,
    wilson_interval,
    z_value,
)
from dashboard.domain.statistics.estimates import SCORE_PRIOR, fit_pooled, pooled_mean

# One pseudo-review 0.35 off the mean (half above, half below): about one claim of three judged
# supported by one side and unsupported by the other. With 20 identical differences the
# rectifier is then ±0.036; with a real spread it adds 0.1225/n to s². Measured in
# bench/statistics.py: at 0.25 the intervals after a lenient judge (few, large negative
# differences: a skewed mean whose samples without them look too certain) covered 93.2 %, at
# 0.35 at least 94.8 %, 0.003 wider on average.
RECTIFIER_SPREAD = 0.35
# A week's batch: below it the correction rests on part of one week's review, and the page
# shows the judge's number as the headline (the expert-scale one is still computed).
MIN_REVIEWS = 20
POOLED_WEEKS = 4
# How far the covariance of the judge part and the correction may cancel their variances.
MAX_CORRELATION = 0.9
# The judge part's pseudo-answer per week × stratum cell where the correction widens the
# interval anyway: half of statistics.SCORE_PRIOR (see `_variance`).
JUDGE_PRIOR = 0.1
# p̃ kept this far inside (0, 1): a correction can push the shrunk judge value past an edge.
_EDGE = 0.001


@dataclass(frozen=True, slots=True)
class Review:
    """One reviewed answer: the expert's and the judge's score, and the answer's stratum."""

    expert: float
    judge: float
    flagged: bool  # the answer's tier-1 flag (not how it got into the batch)

    def __post_init__(self) -> None:
        for name in ("expert", "judge"):
            value = getattr(self, name)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if not (numeric and 0.0 <= value <= 1.0):
                raise ValueError(f"{name} score must be in [0, 1], got {value!r}")


@dataclass(frozen=True, slots=True)
class ReviewSums:
    """The reviews of one stratum by their sufficient statistics: n, Σd and Σ(d − d̄)² of
    d = expert − judge, and (for the covariance with the judge's estimate) Σj of the judge's
    scores j and Σ(j − j̄)(d − d̄); 0 where unknown, which leaves the covariance out. ``cube``
    is Σ(d − d̄)³, the skew of the differences (carried for κ₃(Δ̂), `Rectifier.third`; not yet
    used by the interval, see bench/README.md); 0 where unknown."""

    n: int
    total: float
    sq_dev: float
    judge_total: float = 0.0
    cross: float = 0.0
    cube: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int) or self.n < 0:
            raise ValueError(f"n must be an integer of at least 0, not {self.n!r}")
        if not -self.n <= self.total <= self.n:
            raise ValueError(f"Σd of {self.n} differences in [-1, 1] cannot be {self.total!r}")
        if not 0 <= self.sq_dev <= self.n + 1e-9:
            raise ValueError(f"Σ(d − d̄)² of {self.n} differences cannot be {self.sq_dev!r}")
        if not 0 <= self.judge_total <= self.n:
            raise ValueError(f"Σj of {self.n} judge scores cannot be {self.judge_total!r}")
        if not abs(self.cross) <= self.n / 2 + 1e-9:  # |Σ(j − j̄)(d − d̄)| ≤ √(n/4 · n)
            raise ValueError(f"Σ(j − j̄)(d − d̄) of {self.n} reviews cannot be {self.cross!r}")
        if not abs(self.cube) <= 2 * self.sq_dev + 1e-9:  # |d − d̄| ≤ 2
            raise ValueError(f"Σ(d − d̄)³ cannot be {self.cube!r} with Σ(d − d̄)² {self.sq_dev!r}")


@dataclass(frozen=True, slots=True)
class Rectifier:
    """The judge's error, expert − judge, as a stratified mean over reviewed answers."""

    value: float | None  # Δ̂; None without any review
    variance: float | None  # V(Δ̂), floor and (t/z)² included
    low: float | None  # Δ̂ ± z·√V at the confidence asked
    high: float | None
    n: int
    n_by_stratum: tuple[int, int]  # (flagged, unflagged)
    degrees_of_freedom: int
    third: float = 0.0  # κ₃(Δ̂), the third cumulant of Δ̂ (no floor: its pseudo-review is even)


@dataclass(frozen=True, slots=True)
class ExpertScale:
    """Faithfulness on the experts' scale over the pooled weeks."""

    value: float | None
    low: float | None
    high: float | None
    n_reviews: int
    weeks_pooled: int
    judge: Estimate  # the judge-scale pooled estimate it corrects
    correction: float | None  # Δ̂ added to the judge's value
    too_few: bool  # fewer than MIN_REVIEWS reviews, or no value
    # V(Δ̂): what carrying the correction to a week not yet reviewed (the running one) costs.
    correction_variance: float | None = None


def review_sums(reviews: Sequence[Review]) -> tuple[ReviewSums, ReviewSums]:
    """(flagged, unflagged) sufficient statistics of the reviews' differences."""
    out = []
    for flagged in (True, False):
        mine = [r for r in reviews if r.flagged is flagged]
        d = [r.expert - r.judge for r in mine]
        j = [r.judge for r in mine]
        total, judged = math.fsum(d), math.fsum(j)
        mean, judge_mean = (total / len(d), judged / len(d)) if d else (0.0, 0.0)
        out.append(ReviewSums(
            len(d), total, math.fsum([(x - mean) ** 2 for x in d]), judged,
            math.fsum([(y - judge_mean) * (x - mean) for y, x in zip(j, d, strict=True)]),
            math.fsum([(x - mean) ** 3 for x in d]),
        ))
    return out[0], out[1]


def rectifier(
    sizes: tuple[int, int],
    reviews: tuple[ReviewSums, ReviewSums] | Sequence[Review],
    *,
    confidence: float = 0.95,
) -> Rectifier:
    """Δ̂ = Σ_h W_h·d̄_h with its variance Σ_h W_h²(1 − n_h/N_h)s̃_h²/n_h.

    ``sizes`` are the (flagged, unflagged) answers of the pooled weeks, ``reviews`` the
    reviewed answers of those weeks (or their `review_sums`).
    """
    z = z_value(confidence)
    flagged, unflagged = as_sums(reviews)
    n = flagged.n + unflagged.n
    if any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in sizes):
        raise ValueError(f"stratum sizes must be integers of at least 0, not {sizes!r}")
    population = sum(sizes)
    if n == 0 or population == 0:
        return Rectifier(None, None, None, None, n, (flagged.n, unflagged.n), 0)
    everyone = merge_cells(flagged, unflagged)
    offset = pseudo_review_offset(everyone)
    value = variance = third = 0.0
    for size, own in zip(sizes, (flagged, unflagged), strict=True):
        if size == 0:
            continue
        if own.n > size:
            raise ValueError(f"{own.n} reviews in a stratum of {size} answers")
        part = own if own.n else everyone
        # A borrowed mean is not a sample of this stratum: no finite population correction.
        fpc = max(0.0, 1 - own.n / size)
        w = size / population
        value += w * part.total / part.n
        # One pseudo-review for the whole rectifier, shared out over the strata by their
        # reviews: a stratum with 3 of 60 reviews gets a twentieth of it, not a whole one.
        spread = (part.sq_dev + offset**2 * part.n / everyone.n) / part.n
        variance += w * w * fpc * spread / part.n
        third += w**3 * fpc * part.cube / part.n**3
    df = max(1, n - 1)
    variance *= (float(stats.t.ppf(0.5 + confidence / 2, df)) / z) ** 2
    half = z * math.sqrt(variance)
    return Rectifier(value, variance, value - half, value + half, n,
                     (flagged.n, unflagged.n), df, third)


def pseudo_review_offset(reviews: ReviewSums) -> float:
    """How far off the mean the floor's pseudo-review lies: RECTIFIER_SPREAD as a prior of
    one difference, pulled toward the size of the disagreements seen.

    Differences are mostly 0 with a few of a typical size m; their count k and m follow from
    the sums as k̂ = (Σd)²/Σd² and m̂ = Σd²/|Σd| (exact when the non-zero ones are equal). The
    offset is √((0.35² + Σd²)/(1 + k̂)), the root mean square of the prior's difference and
    the k̂ seen, at most 0.35. Without a disagreement it is 0.35; one of 0.5 leaves it 0.35;
    eight of sixty reviews 0.15 apart (a judge strict by 0.02) make it 0.18; twenty equal
    differences of 0.05 (a judge off by the same little every time) 0.09, still an interval of
    non-zero width. A fixed 0.35 added half to the spread of small disagreements: the expert
    scale covered 97.7 % at 50,000 answers a week with a judge strict by 0.02 (bench/statistics.py).
    """
    if reviews.n == 0:
        return RECTIFIER_SPREAD
    squares = reviews.sq_dev + reviews.total**2 / reviews.n
    if squares <= 0:
        return RECTIFIER_SPREAD
    seen = reviews.total**2 / squares
    return min(RECTIFIER_SPREAD, math.sqrt((RECTIFIER_SPREAD**2 + squares) / (1 + seen)))


def expert_scale(
    weeks: Sequence[Sequence[Stratum]] | Sequence[Sequence[StratumSums]],
    reviews: tuple[ReviewSums, ReviewSums] | Sequence[Review],
    *,
    confidence: float = 0.95,
) -> ExpertScale:
    """θ̂ = Ĵ + Δ̂ over ``weeks`` (each [flagged, unflagged], as `statistics.week_strata`),
    with the ``reviews`` of the answers of those weeks taken as one sample, each review alike
    whatever its week (see the module's docstring; the dashboard weights them by week:
    `expert_weeks.expert_scale_by_week`)."""
    weeks = [[_stratum_sums(s) for s in week] for week in weeks]
    if any(len(week) != 2 for week in weeks):
        raise ValueError("every week needs its [flagged, unflagged] strata")
    judge = pooled_mean(weeks, confidence=confidence)
    sizes = (sum(w[0].size for w in weeks), sum(w[1].size for w in weeks))
    fix = rectifier(sizes, reviews, confidence=confidence)
    return expert_scale_from_parts(weeks, judge, fix,
                                   lambda: _covariance(weeks, as_sums(reviews)),
                                   confidence=confidence)


def expert_scale_from_parts(
    weeks: Sequence[Sequence[StratumSums]],
    judge: Estimate,
    fix: Rectifier,
    covariance: Callable[[], float],
    *,
    confidence: float = 0.95,
) -> ExpertScale:
    """θ̂ = Ĵ + Δ̂ and its interval from the judge part over ``weeks`` (``judge``, their pooled
    estimate) and the correction ``fix``, however Δ̂ was taken (its reviews as one sample here,
    per week and stratum in `expert_weeks.expert_scale_by_week`). ``covariance`` gives
    Cov(Ĵ, Δ̂) as that Δ̂ has it, before the bound (`_variance`); it is asked only where there
    is a θ̂."""
    z = z_value(confidence)
    # The judge part's spread as a week takes it (see the module's docstring).
    fit = fit_pooled(weeks, prior=SCORE_PRIOR, pooled=False)
    bare = fit_pooled(weeks, prior=JUDGE_PRIOR, pooled=False)
    if (fix.value is None or fix.variance is None or fit is None or bare is None
            or judge.value is None):
        return ExpertScale(None, None, None, fix.n, len(weeks), judge, fix.value, True)
    value = min(1.0, max(0.0, fit.value + fix.value))
    variance = _variance(fit, bare, fix, covariance())
    low, high = experts_interval(value, fit.ratio + fix.value, variance, z)
    return ExpertScale(value, low, high, fix.n, len(weeks), judge, fix.value,
                       fix.n < MIN_REVIEWS, fix.variance)


def experts_interval(value: float, shrunk: float, variance: float, z: float) -> tuple[float, float]:
    """Wilson on the experts' scale: the skew near 1 is the experts' scores', not the judge's
    (a lenient judge can sit at 0.99 while the experts' mean is 0.90). The shrunk value p̃
    (Jeffreys pseudo-answers of the judged strata) plus Δ̂, ``shrunk``, sets the effective
    size p̃(1 − p̃)/V."""
    shrunk = min(1 - _EDGE, max(_EDGE, shrunk))
    if variance <= 0:  # every answer judged and reviewed: the experts' mean is known
        return value, value
    low, high = wilson_interval(value, shrunk * (1 - shrunk) / variance, z)
    return min(low, value), max(high, value)


def pooling_weeks(
    weeks: Sequence[str], *, restart: str | None = None, count: int = POOLED_WEEKS
) -> list[str]:
    """The last ``count`` of ``weeks`` (ISO weeks, oldest first), none before ``restart``.

    ``restart`` is the first week of answers after a drift alarm (the source week of the batch
    whose reviews crossed the CUSUM's limit) or a judge change (the week judged by a model or
    prompt version the week before lacked): reviews before it measured a judge that has since
    changed. ISO weeks "YYYY-Www" compare as text in calendar order.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, not {count!r}")
    chosen = list(weeks)[-count:]
    if restart is not None:
        chosen = [w for w in chosen if w >= restart]
    return chosen


def _variance(fit: Fit, bare: Fit, fix: Rectifier, cross: float) -> float:
    """V(θ̂) = V(Ĵ) + V(Δ̂) + 2·Cov(Ĵ, Δ̂), where the judge part's pseudo-answer and the
    correction's spread do not stack.

    The pseudo-answer (SCORE_PRIOR per week × stratum cell) stands in for spread not yet seen
    among the judged answers; a correction whose variance V(Δ̂) + 2·Cov is positive widens the
    interval by as much or more already. So the sum is taken with the pseudo-answer at
    JUDGE_PRIOR (``bare``), kept between V(Ĵ) with the full pseudo-answer and the sum with
    it. Where the correction takes variance away (a covariance that cancels, as with a judge
    whose errors are its own noise), the sum with the full pseudo-answer is below V(Ĵ) and
    stays as it was; it is never wider than it was.

    Stacked, V(θ̂) averaged 1.27-1.58 times θ̂'s actual variance at 150-500 answers a week with
    a lenient judge, and the expert scale covered 96.2-97.5 % there (bench/statistics.py).
    """
    correction = fix.variance or 0.0  # None only without reviews, which has no θ̂
    full = fit.variance + correction + 2 * _bounded(cross, fit.variance, correction)
    lighter = bare.variance + correction + 2 * _bounded(cross, bare.variance, correction)
    return min(full, max(lighter, fit.variance))


def _bounded(cross: float, judge: float, correction: float) -> float:
    """Cov(Ĵ, Δ̂) bounded as a correlation of at most MAX_CORRELATION (Cauchy-Schwarz allows
    1): |Cov| ≤ 0.9·√(V(Ĵ)·V(Δ̂)), so that V(θ̂) ≥ 0.1·(V(Ĵ) + V(Δ̂)) stays above zero even
    where two equal parts would cancel exactly."""
    bound = MAX_CORRELATION * math.sqrt(judge * correction)
    return max(-bound, min(bound, cross))


def _covariance(
    weeks: Sequence[Sequence[StratumSums]], reviews: tuple[ReviewSums, ReviewSums]
) -> float:
    """Cov(Ĵ, Δ̂): the reviewed answers are judged answers of the same strata, so at a few
    hundred answers a week the two means rest on nearly the same answers, and a judge's own
    error (a score too high is a difference too low) makes the covariance negative. Per stratum,
    reviews being a random subset of its n_h judged answers (of N_h):
    W_h²·(1 − n_h/N_h)/n_h · S_jd,h, with S_jd,h the reviews' covariance of judge score and
    difference. Unbounded: `_bounded` bounds it."""
    population = sum(s.size for week in weeks for s in week)
    out = 0.0
    for h, own in enumerate(reviews):
        size = sum(week[h].size for week in weeks)
        judged = sum(week[h].n for week in weeks)
        if own.n < 2 or judged == 0 or size == 0:
            continue
        w = size / population
        out += w * w * max(0.0, 1 - judged / size) / judged * own.cross / (own.n - 1)
    return out


def _stratum_sums(s: Stratum | StratumSums) -> StratumSums:
    return s if isinstance(s, StratumSums) else summarize(s)


def as_sums(
    reviews: tuple[ReviewSums, ReviewSums] | Sequence[Review],
) -> tuple[ReviewSums, ReviewSums]:
    if len(reviews) == 2 and all(isinstance(r, ReviewSums) for r in reviews):
        return cast(ReviewSums, reviews[0]), cast(ReviewSums, reviews[1])
    if not all(isinstance(r, Review) for r in reviews):
        raise ValueError("reviews must be Review items or a (flagged, unflagged) ReviewSums pair")
    return review_sums(cast(Sequence[Review], reviews))


def merge_cells(a: ReviewSums, b: ReviewSums) -> ReviewSums:
    n = a.n + b.n
    if n == 0:
        return ReviewSums(0, 0.0, 0.0)
    mean = (a.total + b.total) / n
    judge_mean = (a.judge_total + b.judge_total) / n
    sq = a.sq_dev + b.sq_dev
    cross = a.cross + b.cross
    cube = a.cube + b.cube
    for part in (a, b):
        if part.n:
            shift = part.total / part.n - mean
            sq += part.n * shift**2
            cross += part.n * (part.judge_total / part.n - judge_mean) * shift
            # Σ(d − d̄)³ about the merged mean (Pébay 2008): each part's about its own mean,
            # moved by its shift δ: + 3δ·Σ(d − d̄_part)² + n_part·δ³.
            cube += 3 * shift * part.sq_dev + part.n * shift**3
    return ReviewSums(n, a.total + b.total, sq, a.judge_total + b.judge_total, cross, cube)
