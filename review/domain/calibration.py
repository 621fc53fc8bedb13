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
- a Bernoulli CUSUM over the reviewed answers' threshold disagreements, the drift alarm.

Plain values in, plain values out: no Django, no model client.
"""

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

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
