"""The headline: the one figure a use case is judged by, and its light.

A team lead acts on one verdict. The overview card's light, the card's place in the order, the
use-case page's first tile, the action alarm and its mail, `/metrics` and the estimates API all
read the figure chosen here, so they cannot disagree (the overview's card once read the judge's
scale while the page's headline was the experts', green beside red).

Which figure, for a complete week:

1. the experts' scale (the judge's figure corrected by the reviews, pooled over the week and the
   3 before it) once a week's batch of reviews stands behind it: it estimates what the experts
   would say, which is what the number is for;
2. else the judge's estimate of the week itself, where its light decides (not grey);
3. else the judge's pooled view (the week and the 3 before it), where a week alone is too thin.

A pooled headline is the average of its weeks and says so, with its lag (`trend.py`): where its
weeks fall and the line through them puts the newest week below the action threshold, its
green light turns amber (`trend_amber`), so a 4-week average cannot hide a falling week.

The running week is looked at every hour, so its own estimate decides only on stronger
evidence: its interval at `RUNNING_CONFIDENCE` wholly below the action threshold (on enough
judged answers), on the experts' scale where the complete weeks' headline is (moved by their
correction, `Correction`). A union bound over `RUNNING_LOOKS` looks keeps the chance that a
healthy week is ever called red that way below `RUNNING_FALSE_ALARM`; the looks share most of
their answers,
and `bench/statistics.py --only running` measures at most 0.2 % (the 95 % interval at any look:
up to 3.8 %). Until then the headline is last week's.

Plain values in, plain values out (no Django): the selectors hand in each candidate's figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from dashboard.domain.statistics.cells import Estimate, z_value
from dashboard.domain.statistics.precision import traffic_light
from dashboard.domain.trend import PoolTrend, WeekPoint, pool_lag, pool_trend

EXPERTS = "experts"
JUDGE = "judge"
WEEK = "week"
POOLED = "pooled"

# Hourly checks in a week, and the chance a healthy running week may be called red at any of
# them: per look one side of a two-sided interval holds 1 − RUNNING_FALSE_ALARM / RUNNING_LOOKS.
RUNNING_LOOKS = 168
RUNNING_FALSE_ALARM = 0.02
RUNNING_CONFIDENCE = 1 - 2 * RUNNING_FALSE_ALARM / RUNNING_LOOKS


@dataclass(frozen=True, slots=True)
class Figure:
    """One candidate: an estimate with its interval, how much stands behind it, its light."""

    value: float | None
    low: float | None
    high: float | None
    n: int  # judged answers (the judge's figures) or reviews (the experts' scale)
    too_few: bool
    light: str
    weeks: int = 1  # weeks it spans


@dataclass(frozen=True, slots=True)
class Headline:
    """The figure a use case is judged by: its scale, its view, the week it speaks for."""

    scale: str  # EXPERTS or JUDGE
    view: str  # WEEK (the week alone) or POOLED (the week and the ones before it)
    week: str  # ISO week it speaks for (the last of the pooled ones)
    weeks: int  # weeks it spans
    running: bool  # the week is not over yet
    value: float | None
    low: float | None
    high: float | None
    n: int
    too_few: bool
    light: str
    # A pooled headline only: the line through its weeks' judge estimates (None: too few weeks
    # for one), and whether it turned a green light amber (the pool hides a falling week).
    trend: PoolTrend | None = None
    trend_amber: bool = False
    # A pooled headline only: weeks from the pool's centre to the week it speaks for.
    lag: float | None = None
    # Judge runs of the week it speaks for, and of those the ones still open: a grey light
    # says that the week is still being judged rather than "undecided" (issue 41).
    runs: int = 0
    open_runs: int = 0


def complete_week_headline(
    *, week: str, experts: Figure | None, judge_week: Figure, judge_pooled: Figure,
    pool_weeks: Sequence[WeekPoint] = (), action_threshold: float | None = None,
) -> Headline:
    """The headline of a complete week: the experts' scale where it leads, else the judge's
    week where its light decides, else the judge's pooled view. ``pool_weeks``: the judge's
    estimates of the week and the ones before it (oldest first), for the trend check of a
    pooled headline against ``action_threshold``."""
    if experts is not None and experts.value is not None and not experts.too_few:
        chosen = _headline(EXPERTS, POOLED, week, experts, running=False)
    elif judge_week.light != "grey":
        return _headline(JUDGE, WEEK, week, judge_week, running=False)
    else:
        chosen = _headline(JUDGE, POOLED if judge_pooled.weeks > 1 else WEEK, week,
                           judge_pooled, running=False)
    if chosen.view != POOLED or action_threshold is None:
        return chosen
    return with_trend(chosen, pool_weeks[-chosen.weeks:], action_threshold)


def with_trend(
    headline: Headline, weeks: Sequence[WeekPoint], action_threshold: float
) -> Headline:
    """A pooled ``headline`` with the trend of its ``weeks``; a green light turned amber
    where the pool hides a falling newest week (`PoolTrend.hides_fall`)."""
    trend = pool_trend(weeks, value=headline.value, low=headline.low, high=headline.high)
    amber = (trend is not None and headline.light == "green"
             and trend.hides_fall(action_threshold))
    return replace(headline, trend=trend, trend_amber=amber, lag=pool_lag(weeks),
                   light="amber" if amber else headline.light)


def running_week_decides(strict: Figure) -> bool:
    """Whether the running week's estimate taken at RUNNING_CONFIDENCE (`strict`, its light
    read against the action threshold) is already evidence of a use case below the threshold:
    its whole interval below it, on enough judged answers."""
    return not strict.too_few and strict.light == "red"


def headline(
    *, complete: Headline, running_week: str | None = None, running: Figure | None = None,
    running_strict: Figure | None = None, correction: Correction | None = None,
) -> Headline:
    """The use case's headline now: the running week's own estimate where its strict interval
    already lies below the threshold, else the last complete week's headline.

    Where the complete week's headline is on the experts' scale, the running week is read on
    it too (``correction``: the experts' correction of the last complete week, carried with
    its variance): a judge strict by 0.05 would otherwise call a healthy use case's running
    week red on its own scale, against the experts' green headline."""
    if running_week is None or running is None or running_strict is None:
        return complete
    scale = JUDGE
    if complete.scale == EXPERTS and correction is not None:
        running = correction.apply(running, z_value(0.95))
        running_strict = correction.apply(running_strict, z_value(RUNNING_CONFIDENCE))
        scale = EXPERTS
    if running_week_decides(running_strict):
        return _headline(scale, WEEK, running_week, running, running=True)
    return complete


@dataclass(frozen=True, slots=True)
class Correction:
    """The experts' correction Δ̂ of a pool, carried to a week not yet reviewed, and the
    threshold a carried figure's light is read against."""

    value: float
    variance: float
    action_threshold: float

    def apply(self, figure: Figure, z: float) -> Figure:
        """``figure`` (an interval at the level of ``z``) on the experts' scale: moved by Δ̂,
        each arm widened by z·√V(Δ̂) in quadrature, and its light read anew."""
        if figure.value is None or figure.low is None or figure.high is None:
            return figure
        value = min(1.0, max(0.0, figure.value + self.value))
        spread = z * z * self.variance
        low = max(0.0, value - math.sqrt((figure.value - figure.low) ** 2 + spread))
        high = min(1.0, value + math.sqrt((figure.high - figure.value) ** 2 + spread))
        light = traffic_light(Estimate(value, low, high, figure.n, 0, (), figure.too_few),
                              self.action_threshold)
        return replace(figure, value=value, low=low, high=high, light=light)


def _headline(scale: str, view: str, week: str, figure: Figure, *, running: bool) -> Headline:
    return Headline(
        scale=scale, view=view, week=week, weeks=figure.weeks, running=running,
        value=figure.value, low=figure.low, high=figure.high, n=figure.n,
        too_few=figure.too_few, light=figure.light,
    )
