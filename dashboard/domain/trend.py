"""Does a pooled headline hide a falling week? The trend check on the weeks of a pool.

A pooled view (the experts' scale, or the judge's 4-week view where a week alone is too thin)
is the mean of all the answers of its weeks, each week weighted by its volume. It estimates that
average, not the newest week: under a steady fall it lags behind the newest week by the distance
from its volume-weighted centre to that week, 1.5 weeks for four weeks of equal volume. With
faithfulness falling 0.04 a week, the pool then reads 0.06 above the newest week, and its light
can stay green while that week is already below the action threshold.

`pool_trend` fits a straight line to the pool's weekly estimates (judge's scale, each weighted
by the inverse of its variance, from its interval; the spread of the weeks about the line
scales that variance up where they scatter more than their intervals say, as a random-effects
meta-analysis does) and says where the line puts the newest week: the pool's value moved by the
slope over the lag. A pool hides a fall when the slope is below zero at TREND_CONFIDENCE
(one-sided) and the line's newest week lies below the action threshold: the headline's light
then turns amber, never greener, and the page says the lag and the trend in words.

Why not a headline that estimates the newest week itself (the line's value at the newest week,
or a pool weighting recent weeks more)? Its interval is what the line costs: the slope's
variance times the lag squared on top of the pool's, 1.4-1.7 times the pool's width in
`bench/statistics.py --only trend`, and it still held the newest week's truth in only 89-93 %
of weeks under a fall of 0.04 a week (four points give a slope of little certainty); the light
would be grey in many weeks where the pool decides, and in a steady week the line's wobble
would move the headline about for nothing.
The pool stays the headline, labelled as the average it is, and the check speaks only where the
line says the newest week is already below the line.

Plain values in, plain values out (no Django).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from dashboard.domain.statistics.cells import z_value

# One-sided level of the slope test: a steady pool is called falling by chance in about 10 % of
# weeks, and amber needs the line's newest week below the threshold as well. In the bench a
# steady use case 0.03 above the line turns amber in at most 3.1 % of its weeks (0.01 above
# it: 6.8 %); at 0.95 the check let 4-18 % of weeks 0.02 below the line stay green, at 0.90
# 1-15 %, at 0.80 1-12 % but turned 11 % of the steady weeks near the line amber.
TREND_CONFIDENCE = 0.90
# Weeks with a value a line needs (two points always lie on one).
MIN_TREND_WEEKS = 3


@dataclass(frozen=True, slots=True)
class WeekPoint:
    """One week of a pool as the trend check needs it: the judge's estimate and interval
    (None without one) and the week's volume."""

    value: float | None
    low: float | None
    high: float | None
    volume: int


@dataclass(frozen=True, slots=True)
class PoolTrend:
    slope: float  # change of the weekly estimates per week
    slope_se: float
    lag: float  # weeks from the pool's volume-weighted centre to its newest week
    current: float  # the pool's value moved by slope × lag: the line's newest week
    low: float  # the line's newest week at 95 %: the pool's variance plus lag² × the slope's
    high: float
    falling: bool  # the slope is below zero at TREND_CONFIDENCE (one-sided)

    @property
    def fall(self) -> float:
        """How much the weeks fall a week (the slope's negative: positive when falling)."""
        return -self.slope

    def hides_fall(self, action_threshold: float) -> bool:
        """The pool's weeks fall, and the line puts the newest week below the threshold."""
        return self.falling and self.current < action_threshold


def pool_lag(weeks: Sequence[WeekPoint]) -> float:
    """Weeks from a pool's centre (its weeks weighted by volume, as the pooled estimate
    weighs them) to its newest week: 1.5 for four weeks of equal volume."""
    newest = len(weeks) - 1
    volume = sum(w.volume for w in weeks)
    if newest < 1 or not volume:
        return max(0, newest) / 2
    return newest - sum(x * w.volume for x, w in enumerate(weeks)) / volume


def pool_trend(
    weeks: Sequence[WeekPoint],
    *,
    value: float | None,
    low: float | None,
    high: float | None,
    confidence: float = 0.95,
) -> PoolTrend | None:
    """The trend of a pool's ``weeks`` (oldest first, the pool's newest last) and where it
    puts the newest week, given the pool's own ``value`` and 95 % interval (on whatever scale
    the headline is: the line moves it by slope × lag). None where a line cannot be fitted:
    fewer than MIN_TREND_WEEKS weeks with an interval of some width, or no pool value."""
    if value is None or low is None or high is None:
        return None
    z = z_value(confidence)
    points = [
        (x, w.value, ((w.high - w.low) / (2 * z)) ** 2)
        for x, w in enumerate(weeks)
        if w.value is not None and w.low is not None and w.high is not None and w.high > w.low
    ]
    if len(points) < MIN_TREND_WEEKS:
        return None
    weights = [1 / v for _, _, v in points]
    total = math.fsum(weights)
    x_bar = math.fsum(u * x for u, (x, _, _) in zip(weights, points, strict=True)) / total
    y_bar = math.fsum(u * y for u, (_, y, _) in zip(weights, points, strict=True)) / total
    sxx = math.fsum(u * (x - x_bar) ** 2 for u, (x, _, _) in zip(weights, points, strict=True))
    sxy = math.fsum(u * (x - x_bar) * (y - y_bar)
                    for u, (x, y, _) in zip(weights, points, strict=True))
    slope = sxy / sxx
    residual = math.fsum(u * (y - y_bar - slope * (x - x_bar)) ** 2
                         for u, (x, y, _) in zip(weights, points, strict=True))
    scatter = max(1.0, residual / (len(points) - 2))
    slope_se = math.sqrt(scatter / sxx)
    lag = pool_lag(weeks)
    current = value + slope * lag
    pool_variance = ((high - low) / (2 * z)) ** 2
    half = z * math.sqrt(pool_variance + (lag * slope_se) ** 2)
    one_sided = z_value(2 * TREND_CONFIDENCE - 1)
    return PoolTrend(
        slope=slope, slope_se=slope_se, lag=lag, current=current,
        low=max(0.0, current - half), high=min(1.0, current + half),
        falling=slope + one_sided * slope_se < 0,
    )
