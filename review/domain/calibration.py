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

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from common.domain.weeks import parse_week, shift_week
from dashboard.domain.expert_scale import Review, ReviewSums, rectifier

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
    check_confidence(confidence)
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


def check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


# -- claim-level agreement -------------------------------------------------------------------


# -- drift alarm -----------------------------------------------------------------------------


# -- drift alarm per use case: its in-control rate and its limit ------------------------------
#
# One in-control rate for every use case does not fit: how often judge and expert land on
# different sides of the line depends on how many answers score near it. At a true 0.15 the
# fixed p0 = 0.10 raised a false alarm every 22 weeks. So p0 is estimated per use case from its
# own reviewed answers, and the limit h is computed for that p0 (Markov chain, below) so that
# the run length between false alarms is long enough.


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
    check_confidence(confidence)
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be at least 0, got {tolerance!r}")
    fix = rectifier(sizes, reviews, confidence=2 * confidence - 1)
    if fix.value is None or fix.low is None or fix.high is None:
        return BiasTest(None, None, None, fix.n, False, None)
    direction = "strict" if fix.low > tolerance else "lenient" if fix.high < -tolerance else None
    return BiasTest(fix.value, fix.low, fix.high, fix.n, direction is not None, direction)
