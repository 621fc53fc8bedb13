"""Calibration of the judge against the weekly manual review (tier 3).

Domain experts re-label about 20 judged answers per use case and ISO week, blind. This module
turns those reviews into the numbers the calibration page and the drift alarm need:

- per reviewed answer: the difference manual - automatic score and whether the two fall on
  different sides of the action threshold;
- per week (or pooled over the last weeks): bias with a Student t interval, mean absolute
  difference, the share of threshold disagreements and of answers whose claim decomposition
  the expert marked as wrong;
- per claim: linearly weighted Cohen's kappa over the three ordered labels, with a bootstrap
  interval that can resample whole answers;
- a Bernoulli CUSUM over the reviewed answers' threshold disagreements, the drift alarm, with
  its in-control rate estimated per use case (`in_control_rate`) and its limit computed for a
  run length between false alarms (`cusum_arl`, a Markov chain; `cusum_params_for`);
- a one-sided test of the judge's bias against the tolerance (`bias_beyond_tolerance`), with
  the bias stratified by the answers' flag so that flagged top-ups of a batch count with their
  weight (`dashboard.domain.expert_scale.rectifier`).

Plain values in, plain values out: no Django, no model client.
"""

import functools
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from dashboard.domain.expert_scale import Review, ReviewSums, rectifier
from review.domain.batches import parse_week, shift_week

# -- paired scores ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReviewedPair:
    manual: float
    automatic: float
    week: str  # ISO week "2026-W48"
    decomposition_wrong: bool = False

    def __post_init__(self) -> None:
        # A score outside [0, 1] (or NaN) is a bug upstream; folded into a mean it would
        # move the bias silently instead of failing where it happened.
        for name in ("manual", "automatic"):
            value = getattr(self, name)
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if not (numeric and 0.0 <= value <= 1.0):
                raise ValueError(f"{name} score must be in [0, 1], got {value!r}")
        parse_week(self.week)


def difference(pair: ReviewedPair) -> float:
    """Manual minus automatic score: positive when the judge is too strict."""
    return pair.manual - pair.automatic


def disagrees(pair: ReviewedPair, action_threshold: float) -> bool:
    """True when manual and automatic score fall on different sides of the action threshold.

    A score below the threshold is an action signal, one equal to it is not; a disagreement
    here is the one that changes what a team lead does, so it is what the alarm watches.
    """
    return (pair.manual < action_threshold) != (pair.automatic < action_threshold)


# Below 5 reviewed answers the t interval says nothing useful: t(0.975, 3) = 3.18 on a standard
# deviation estimated from 4 differences, so its width is mostly noise. And a week's batch has
# 20 answers, so fewer than 5 means the batch was mostly not done, which is its own alarm.
MIN_PAIRS_FOR_INTERVAL = 5


@dataclass(frozen=True, slots=True)
class BiasSummary:
    n: int
    bias: float | None  # mean of manual - automatic
    low: float | None  # Student t interval (n - 1 degrees of freedom) at the given confidence
    high: float | None
    mae: float | None  # mean |manual - automatic|
    threshold_disagreement: float | None  # share of pairs on different sides of the threshold
    decomposition_wrong_share: float | None
    too_few: bool  # n < MIN_PAIRS_FOR_INTERVAL; the interval is then None


def bias_summary(
    pairs: Sequence[ReviewedPair], *, action_threshold: float, confidence: float = 0.95
) -> BiasSummary:
    """Bias, its t interval, MAE and disagreement shares over ``pairs`` (all pooled).

    When every difference is the same (the standard deviation is 0, e.g. all 20 answers scored
    1.0 by both) the t interval collapses to the point. That is what the t formula gives, and
    it is kept: the differences are exact paired values, not a share estimated from a few
    scores, and an expert agreeing with the judge on every answer is the finding. The page
    shows n beside it.
    """
    _check_confidence(confidence)
    n = len(pairs)
    if n == 0:
        return BiasSummary(0, None, None, None, None, None, None, True)
    diffs = [difference(pair) for pair in pairs]
    bias = math.fsum(diffs) / n
    mae = math.fsum(abs(d) for d in diffs) / n
    disagreement = sum(disagrees(pair, action_threshold) for pair in pairs) / n
    wrong_share = sum(pair.decomposition_wrong for pair in pairs) / n
    too_few = n < MIN_PAIRS_FOR_INTERVAL
    low = high = None
    if not too_few and n >= 2:
        # Identical differences: make the spread exactly 0 so the interval is exactly the
        # point, not a sliver of rounding noise around it.
        if max(diffs) == min(diffs):
            sd = 0.0
        else:
            sd = math.sqrt(math.fsum((d - bias) ** 2 for d in diffs) / (n - 1))
        t = float(stats.t.ppf((1.0 + confidence) / 2.0, n - 1))
        half_width = t * sd / math.sqrt(n)
        low, high = bias - half_width, bias + half_width
    return BiasSummary(n, bias, low, high, mae, disagreement, wrong_share, too_few)


def weekly_summaries(
    pairs: Sequence[ReviewedPair], *, action_threshold: float, confidence: float = 0.95
) -> dict[str, BiasSummary]:
    """One summary per ISO week that has reviewed pairs, weeks in ascending order."""
    by_week: dict[str, list[ReviewedPair]] = {}
    for pair in pairs:
        by_week.setdefault(pair.week, []).append(pair)
    # "YYYY-Www" with a zero-padded week sorts as text in calendar order.
    return {
        week: bias_summary(by_week[week], action_threshold=action_threshold, confidence=confidence)
        for week in sorted(by_week)
    }


def rolling_summary(
    pairs: Sequence[ReviewedPair],
    *,
    weeks: Sequence[str],
    action_threshold: float,
    confidence: float = 0.95,
) -> BiasSummary:
    """One summary pooled over the pairs of the given weeks (e.g. ``last_weeks(week, 4)``).

    Pooling four weeks of 20 answers gives an interval about half as wide as one week's, for
    when a single week is too noisy to tell a drift from chance.
    """
    wanted = set(weeks)
    chosen = [pair for pair in pairs if pair.week in wanted]
    return bias_summary(chosen, action_threshold=action_threshold, confidence=confidence)


def last_weeks(week: str, count: int) -> list[str]:
    """The ``count`` ISO weeks ending with ``week``, oldest first.

    Goes through dates, because ISO years have 52 or 53 weeks (2020 and 2026 have a W53), so
    "week minus one" is not arithmetic on the number.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    parse_week(week)
    return [shift_week(week, -back) for back in range(count - 1, -1, -1)]


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


# -- claim-level agreement -------------------------------------------------------------------

LABELS = ("UNGEDECKT", "TEILWEISE", "GEDECKT")  # in order: index = rank
_INDEX = {label: index for index, label in enumerate(LABELS)}

# Linear disagreement weights |i - j| / (k - 1): TEILWEISE against either neighbour costs half
# as much as GEDECKT against UNGEDECKT. Kept as integers |i - j| here; the factor 1/2 cancels
# in the ratio and integers keep the counts' arithmetic exact.
_DISTANCE = np.abs(np.subtract.outer(np.arange(3), np.arange(3)))

# A kappa from fewer than 20 claims rests on a handful of off-diagonal cells: one changed
# label moves it by 0.1 or more, and a percentile bootstrap on so few is too narrow.
MIN_CLAIM_PAIRS_FOR_KAPPA = 20


@dataclass(frozen=True, slots=True)
class Kappa:
    n: int  # claim pairs
    kappa: float | None
    low: float | None  # bootstrap percentile interval; None when too few or undefined
    high: float | None
    too_few: bool


def weighted_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Linearly weighted Cohen's kappa of (manual label, judge label) pairs.

    kappa_w = 1 - sum(w * O) / sum(w * E) with w_ij = |i - j| / 2, O the observed and E the
    chance-expected (product of the marginals) proportions. Same value as scikit-learn's
    ``cohen_kappa_score(weights="linear")`` over the three labels.

    None when undefined: no pairs, or no disagreement is expected by chance (sum(w * E) = 0),
    which happens only when both raters used one and the same label for every claim. Kappa
    then is 0/0 (scikit-learn returns NaN); it is not 1, because agreement that chance alone
    would produce says nothing about the judge, so the page shows "undefined" instead.
    """
    if not pairs:
        return None
    return _kappa_from_counts(_counts(pairs))


def kappa_with_interval(
    pairs: Sequence[tuple[str, str]],
    *,
    groups: Sequence[Hashable] | None = None,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Kappa:
    """Weighted kappa with a bootstrap percentile interval, deterministic for a seed.

    With ``groups`` (one answer id per claim pair) whole answers are resampled: the claims of
    one answer share its chunks and its decomposition, so they are not independent, and
    resampling claims one by one would give an interval that is too narrow.

    Resamples in which kappa is undefined (every drawn claim got the same label from both) are
    left out of the percentiles. They occur when almost all claims agree on one label, so
    leaving them out moves the interval slightly down, the cautious side for an agreement
    measure. No defined resample: no interval.
    """
    _check_confidence(confidence)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    n = len(pairs)
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} pairs")
    codes = [3 * _label_index(manual) + _label_index(judge) for manual, judge in pairs]
    point = weighted_kappa(pairs)

    # Resampling units: answers when grouped, else each claim pair on its own. Units in order
    # of first appearance (not set order), so the result depends only on the input and seed.
    unit_of: dict[Hashable, int] = {}
    keys = groups if groups is not None else range(n)
    unit_counts_rows: list[np.ndarray] = []
    for key, code in zip(keys, codes, strict=True):
        unit = unit_of.setdefault(key, len(unit_of))
        if unit == len(unit_counts_rows):
            unit_counts_rows.append(np.zeros(9, dtype=np.int64))
        unit_counts_rows[unit][code] += 1
    units = len(unit_counts_rows)

    too_few = n < MIN_CLAIM_PAIRS_FOR_KAPPA or (
        groups is not None and units < MIN_PAIRS_FOR_INTERVAL
    )
    if too_few or point is None:
        return Kappa(n, point, None, None, too_few)

    unit_counts = np.stack(unit_counts_rows)
    rng = np.random.default_rng(seed)
    # How often each unit is drawn in each resample; drawing `units` units with replacement
    # is a multinomial with equal probabilities.
    draws = rng.multinomial(units, np.full(units, 1.0 / units), size=resamples)
    totals = (draws @ unit_counts).reshape(resamples, 3, 3)
    kappas = _kappas_from_counts(totals)
    defined = kappas[~np.isnan(kappas)]
    if defined.size == 0:
        return Kappa(n, point, None, None, too_few)
    alpha = 1.0 - confidence
    low, high = np.quantile(defined, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Kappa(n, point, float(low), float(high), too_few)


def _label_index(label: str) -> int:
    try:
        return _INDEX[label]
    except KeyError:
        raise ValueError(f"unknown label {label!r}; expected one of {LABELS}") from None


def _counts(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """3x3 counts: rows the manual label, columns the judge label, in LABELS order."""
    counts = np.zeros((3, 3), dtype=np.int64)
    for manual, judge in pairs:
        counts[_label_index(manual), _label_index(judge)] += 1
    return counts


def _kappa_from_counts(counts: np.ndarray) -> float | None:
    kappa = float(_kappas_from_counts(counts[np.newaxis])[0])
    return None if math.isnan(kappa) else kappa


def _kappas_from_counts(counts: np.ndarray) -> np.ndarray:
    """Kappa for a stack of 3x3 count tables (shape (m, 3, 3)); NaN where undefined.

    With O = C / n and E = r c^T / n^2 the ratio sum(w O) / sum(w E) equals
    n * sum(d C) / sum(d r c^T) for d = |i - j|: integers until the last division.
    """
    n = counts.sum(axis=(1, 2))
    observed = (counts * _DISTANCE).sum(axis=(1, 2))
    rows, cols = counts.sum(axis=2), counts.sum(axis=1)
    expected = np.einsum("mi,mj,ij->m", rows, cols, _DISTANCE)
    kappas = np.full(len(counts), np.nan)
    defined = expected > 0
    kappas[defined] = 1.0 - (n[defined] * observed[defined]) / expected[defined]
    return kappas


# -- drift alarm -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CusumParams:
    p0: float  # acceptable disagreement rate (in control)
    p1: float  # rate the alarm should catch quickly (out of control)
    limit: float  # h

    def __post_init__(self) -> None:
        if not 0.0 < self.p0 < self.p1 < 1.0:
            raise ValueError(f"need 0 < p0 < p1 < 1, got p0={self.p0!r}, p1={self.p1!r}")
        if not self.limit > 0.0:
            raise ValueError(f"limit must be positive, got {self.limit!r}")


@dataclass(frozen=True, slots=True)
class CusumResult:
    statistic: list[float]  # S_t after each observation
    alarm_at: int | None  # index of the first observation with S_t >= limit; None if none
    current: float  # S after the last observation (0.0 when there is none)
    alarms: tuple[int, ...] = ()  # every crossing (the statistic restarts after each)


def bernoulli_cusum(observations: Sequence[bool], params: CusumParams) -> CusumResult:
    """Bernoulli CUSUM (Reynolds & Stoumbos) over disagreements, one per reviewed answer.

    S_t = max(0, S_{t-1} + x_t ln(p1/p0) + (1 - x_t) ln((1 - p1)/(1 - p0))), S_0 = 0, and an
    alarm when S_t >= h. Each disagreement adds the log-likelihood ratio for "rate is p1" over
    "rate is p0"; each agreement takes a little off.

    After an alarm the statistic starts again from 0 with the next observation: the alarm has
    been raised and looked into, and a new one should need new evidence rather than fire on
    every following answer. ``statistic`` keeps the value that crossed the limit, so ``current``
    stays at or above it while the alarming observation is the latest.
    """
    up = math.log(params.p1 / params.p0)
    down = math.log((1.0 - params.p1) / (1.0 - params.p0))
    statistic: list[float] = []
    alarms: list[int] = []
    s = 0.0
    for index, observation in enumerate(observations):
        s = max(0.0, s + (up if observation else down))
        statistic.append(s)
        if s >= params.limit:
            alarms.append(index)
            s = 0.0
    return CusumResult(
        statistic, alarms[0] if alarms else None, statistic[-1] if statistic else 0.0,
        tuple(alarms),
    )


# One observation per reviewed answer (20 a week per use case), x = disagrees(...) at the action
# threshold. Calibrated, judge and expert land on different sides for about 1 answer in 10
# (p0 = 0.10); a drifting judge at 3 in 10 (p1 = 0.30) should be caught within 2-3 weeks.
# h = 6.0 measured by simulation (numpy default_rng(20260101), 20,000 runs each from S = 0,
# restart semantics as above, so the run length is also the time between alarms):
#   p = 0.10 (in control): ARL 5,755 answers (about 5.5 years of weekly batches); a false alarm
#                          within 26 weeks (520 answers) in 8.1 % of half-years
#   p = 0.20:              ARL 116 (about 6 weeks)
#   p = 0.30 (p1):         ARL 36 (under 2 weeks), 88 % alarmed within 60 answers (3 weeks)
#   p = 0.35:              ARL 26
# For comparison h = 4.3 gives an in-control ARL of about 1,030 (one year), but a false alarm in
# 39 % of half-years per use case, too many for several use cases; h = 5.0 still 22 %.
DEFAULT_CUSUM = CusumParams(p0=0.10, p1=0.30, limit=6.0)


# -- drift alarm per use case: its in-control rate and its limit ------------------------------
#
# One in-control rate for every use case does not fit: how often judge and expert land on
# different sides of the line depends on how many answers score near it. At a true 0.15 the
# fixed p0 = 0.10 raised a false alarm every 22 weeks. So p0 is estimated per use case from its
# own reviewed answers, and the limit h is computed for that p0 (Markov chain, below) so that
# the run length between false alarms is long enough.

# Beta prior on the in-control disagreement rate: mean 0.15, the weight of one week's batch
# (20 reviews). Its 80 % quantile is 0.21, so a use case without history starts insensitive
# (p0 about 0.2, the top of the rates seen) rather than alarming every few weeks; the data take
# over within a few weeks.
CUSUM_PRIOR = (3.0, 17.0)
# p0 is the posterior's 80 % quantile, not its mean: an underestimated p0 makes the CUSUM run
# at a rate above its p0 and raise false alarms, an overestimated one only delays a true alarm.
CUSUM_P0_QUANTILE = 0.8
# The alarm should catch a rise of the disagreement rate by 0.2 (one reviewed answer in five
# more on the other side of the line; 0.10 → 0.30 as before) quickly.
CUSUM_SHIFT = 0.2
REVIEWS_PER_WEEK = 20
# Mean weeks between false alarms the limit is computed for, at the estimated p0. Above the
# 30 weeks asked for, as the true rate can lie above the estimate.
CUSUM_TARGET_WEEKS = 52.0
# Grid of the Markov chain approximation: the run lengths it gives are within about 1 % of
# simulated ones at 2,000 states (bench/statistics.py compares them).
_ARL_STATES = 2000


def in_control_rate(
    *,
    disagreements: int,
    reviews: int,
    prior: tuple[float, float] = CUSUM_PRIOR,
    quantile: float = CUSUM_P0_QUANTILE,
) -> float:
    """The in-control disagreement rate p0 of a use case from its own reviewed answers.

    Count the reviews of weeks the judge is believed in control (before the weeks the CUSUM is
    watching, since its last restart): the ``quantile`` of the Beta posterior.
    """
    if not (isinstance(reviews, int) and isinstance(disagreements, int)
            and 0 <= disagreements <= reviews):
        raise ValueError(f"need integers 0 <= disagreements <= reviews, not "
                         f"{disagreements!r} of {reviews!r}")
    a, b = prior
    return float(stats.beta.ppf(quantile, a + disagreements, b + reviews - disagreements))


def cusum_arl(params: CusumParams, rate: float, *, states: int = _ARL_STATES) -> float:
    """Mean number of observations from S = 0 to an alarm when disagreements occur at ``rate``.

    Brook & Evans' Markov chain: S on a grid of ``states`` points in [0, h), each step moves it
    up by ln(p1/p0) with probability ``rate`` or down by ln((1 − p1)/(1 − p0)), rounded to the
    grid, floored at 0, absorbed at h. ARL = ((I − Q)⁻¹·1)₀. A sparse solve: milliseconds.
    """
    from scipy.sparse import csr_matrix, identity
    from scipy.sparse.linalg import spsolve

    if not 0.0 < rate < 1.0:
        raise ValueError(f"rate must be in (0, 1), got {rate!r}")
    step = params.limit / states
    up = math.log(params.p1 / params.p0) / step
    down = math.log((1.0 - params.p1) / (1.0 - params.p0)) / step
    index = np.arange(states)
    to_up = np.rint(index + up).astype(np.int64)
    to_down = np.maximum(0, np.rint(index + down)).astype(np.int64)
    keep = to_up < states  # a step to h or beyond is the alarm, out of the chain
    rows = np.concatenate([index[keep], index])
    cols = np.concatenate([to_up[keep], to_down])
    data = np.concatenate([np.full(keep.sum(), rate), np.full(states, 1.0 - rate)])
    q = csr_matrix((data, (rows, cols)), shape=(states, states))
    arl = spsolve((identity(states, format="csr") - q).tocsc(), np.ones(states))
    return float(arl[0])


def cusum_limit(p0: float, p1: float, *, arl: float) -> float:
    """A limit h whose in-control ARL at ``p0`` is at least ``arl``, at most 0.01 above one
    whose ARL falls short (bisection). The ARL of a Bernoulli CUSUM rises with h in steps
    with small dips (the two increments are fixed, so what counts is how many of them reach
    h), so "the smallest" such h is not well defined; this one is within 0.01 of a crossing.
    p0 and p1 are taken to 4 decimals (`cusum_params_for` returns them so)."""
    if not arl > 1:
        raise ValueError(f"arl must be above 1, got {arl!r}")
    return _limit(round(p0, 4), round(p1, 4), float(arl))


@functools.lru_cache(maxsize=256)
def _limit(p0: float, p1: float, arl: float) -> float:
    low, high = 0.01, 1.0
    while cusum_arl(CusumParams(p0, p1, high), p0) < arl:
        low, high = high, high * 2
        if high > 1000:
            raise ValueError(f"no limit reaches an ARL of {arl}")
    while high - low > 0.005:
        middle = (low + high) / 2
        if cusum_arl(CusumParams(p0, p1, middle), p0) >= arl:
            high = middle
        else:
            low = middle
    # Up to the next hundredth, and on past a dip of the stepped ARL there.
    limit = math.ceil(high * 100) / 100
    while cusum_arl(CusumParams(p0, p1, limit), p0) < arl:
        limit = round(limit + 0.01, 2)
    return limit


def cusum_params_for(
    *,
    disagreements: int,
    reviews: int,
    per_week: int = REVIEWS_PER_WEEK,
    target_weeks: float = CUSUM_TARGET_WEEKS,
) -> CusumParams:
    """The drift CUSUM of a use case: p0 from its history (`in_control_rate`), p1 = p0 +
    CUSUM_SHIFT, and the limit for ``target_weeks`` between false alarms at ``per_week``
    reviews a week. Cached per rounded p0: fast enough for every review submission."""
    p0 = in_control_rate(disagreements=disagreements, reviews=reviews)
    # To 4 decimals, the precision the limit is cached and computed at: the run length
    # depends on the exact increments.
    p0 = round(min(max(p0, 0.005), 0.7), 4)
    p1 = round(min(0.95, p0 + CUSUM_SHIFT), 4)
    return CusumParams(p0, p1, cusum_limit(p0, p1, arl=target_weeks * per_week))


# -- the judge's bias against the tolerance ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class BiasTest:
    bias: float | None  # stratified mean of manual − automatic (see expert_scale.rectifier)
    low: float | None  # one-sided bounds at the confidence asked (a two-sided 2c − 1 interval)
    high: float | None
    n: int
    beyond: bool  # evidence that |bias| exceeds the tolerance
    direction: str | None  # "strict" (judge below the experts) or "lenient", when beyond


def bias_beyond_tolerance(
    *,
    sizes: tuple[int, int],
    reviews: Sequence[Review] | tuple[ReviewSums, ReviewSums],
    tolerance: float,
    confidence: float = 0.95,
) -> BiasTest:
    """Is the judge off by more than ``tolerance``? A one-sided test against the tolerance.

    The old rule (|bias| > tolerance and a 4-week interval without 0) tested against 0 and
    compared the point with the tolerance: it never fired before the CUSUM. This asks for the
    evidence itself: the lower one-sided ``confidence`` bound of the bias above +tolerance, or
    the upper one below −tolerance. The bias is stratified by the answers' flag, so top-ups of
    flagged answers in a batch count with their weight (`expert_scale.rectifier`); ``sizes``
    are the (flagged, unflagged) answers of the reviewed weeks.
    """
    _check_confidence(confidence)
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be at least 0, got {tolerance!r}")
    fix = rectifier(sizes, reviews, confidence=2 * confidence - 1)
    if fix.value is None or fix.low is None or fix.high is None:
        return BiasTest(None, None, None, fix.n, False, None)
    direction = "strict" if fix.low > tolerance else "lenient" if fix.high < -tolerance else None
    return BiasTest(fix.value, fix.low, fix.high, fix.n, direction is not None, direction)
