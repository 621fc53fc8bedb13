"""The trend check of a pooled headline (issue 39, point 2), against values computed by hand."""

import dataclasses
import math

import pytest

from dashboard.domain.headline import (
    EXPERTS,
    POOLED,
    Figure,
    Headline,
    complete_week_headline,
    with_trend,
)
from dashboard.domain.statistics.cells import z_value
from dashboard.domain.trend import WeekPoint, pool_lag, pool_trend

Z = z_value(0.95)


def week(value: float, se: float = 0.02, volume: int = 500) -> WeekPoint:
    """A week whose 95 % interval is value ± Z·se: the check reads its variance as se²."""
    return WeekPoint(value, value - Z * se, value + Z * se, volume)


def test_a_steady_fall_by_hand():
    # Four weeks 0.92, 0.90, 0.88, 0.86, each with variance 0.02² = 0.0004 and the same volume.
    # Equal weights: x̄ = 1.5, Σ(x − x̄)² = 5, slope = Σ(x − x̄)(y − ȳ)/5 = −0.10/5 = −0.02;
    # the points lie on the line, so the scatter factor is its floor 1 and
    # se = √(0.0004/5) = 0.0089443. The pool's centre is 1.5 weeks behind the newest week.
    # The pool 0.89 (0.87-0.91): variance (0.04/(2·1.959964))² = 1.04126e-4. The line puts the
    # newest week at 0.89 − 0.02·1.5 = 0.86 ± 1.959964·√(1.04126e-4 + 1.5²·8e-5) = ± 0.033037.
    # Falling at one-sided 90 %: −0.02 + 1.281552·0.0089443 = −0.00854 < 0.
    weeks = [week(v) for v in (0.92, 0.90, 0.88, 0.86)]
    t = pool_trend(weeks, value=0.89, low=0.87, high=0.91)
    assert t is not None
    assert t.slope == pytest.approx(-0.02)
    assert t.fall == pytest.approx(0.02)
    assert t.slope_se == pytest.approx(0.0089443, abs=1e-7)
    assert t.lag == pytest.approx(1.5)
    assert t.current == pytest.approx(0.86)
    assert (t.low, t.high) == (pytest.approx(0.86 - 0.033037, abs=1e-6),
                               pytest.approx(0.86 + 0.033037, abs=1e-6))
    assert t.falling
    # It hides a fall only where the line's newest week is below the threshold.
    assert t.hides_fall(0.87) and not t.hides_fall(0.85)


def test_weeks_scattered_about_the_line_widen_the_slope():
    # 0.92, 0.86, 0.90, 0.84: slope −0.02 again (Σ(x − x̄)(y − ȳ) = −0.06 + 0.01 + 0.01 − 0.06),
    # residuals 0.01, −0.03, 0.03, −0.01: Σu·r² = 2500·0.002 = 5 over 2 degrees of freedom,
    # a scatter of 2.5 times what the intervals say: se = √(2.5·0.0004/5) = 0.0141421.
    # Still falling at 90 %: −0.02 + 1.281552·0.0141421 = −0.00188.
    weeks = [week(v) for v in (0.92, 0.86, 0.90, 0.84)]
    t = pool_trend(weeks, value=0.88, low=0.86, high=0.90)
    assert t is not None
    assert t.slope == pytest.approx(-0.02)
    assert t.slope_se == pytest.approx(math.sqrt(0.0002))
    assert t.falling
    # Twice the scatter (0.94, 0.82, 0.92, 0.84: residuals 0.03, −0.07, 0.05, −0.01 about
    # the line through them) and the slope no longer counts as falling.
    t = pool_trend([week(v) for v in (0.94, 0.82, 0.92, 0.84)], value=0.88, low=0.86,
                   high=0.90)
    assert t is not None and t.slope < 0 and not t.falling


def test_the_lag_follows_the_volume():
    # Volumes 100, 100, 400, 400: the centre is (100 + 800 + 1200)/1000 = 2.1, 0.9 weeks
    # behind the newest.
    weeks = [week(0.9, volume=v) for v in (100, 100, 400, 400)]
    assert pool_lag(weeks) == pytest.approx(0.9)
    assert pool_lag([week(0.9)] * 4) == pytest.approx(1.5)
    assert pool_lag([week(0.9)]) == 0.0
    # No volume at all: the plain middle.
    assert pool_lag([week(0.9, volume=0)] * 3) == pytest.approx(1.0)


def test_no_line_without_three_weeks_of_width():
    assert pool_trend([week(0.9), week(0.8)], value=0.85, low=0.8, high=0.9) is None
    empty = WeekPoint(None, None, None, 50)
    point = WeekPoint(1.0, 1.0, 1.0, 50)  # an interval of no width carries no weight
    assert pool_trend([week(0.9), empty, point, week(0.8)], value=0.85, low=0.8,
                      high=0.9) is None
    assert pool_trend([week(0.9)] * 4, value=None, low=None, high=None) is None


def pooled(light: str, value: float = 0.89) -> Headline:
    return Headline(EXPERTS, POOLED, "2026-W40", 4, False, value, value - 0.02, value + 0.02,
                    60, False, light)


def test_a_hidden_fall_turns_green_amber_and_never_greener():
    falling = [week(v) for v in (0.92, 0.90, 0.88, 0.86)]
    h = with_trend(pooled("green"), falling, 0.87)
    assert (h.light, h.trend_amber) == ("amber", True)
    assert h.trend is not None and h.trend.current == pytest.approx(0.86)
    assert h.lag == pytest.approx(1.5)
    # Against 0.85 the line's newest week (0.86) is above: green stays green.
    h = with_trend(pooled("green"), falling, 0.85)
    assert (h.light, h.trend_amber) == ("green", False)
    # Red and grey are never changed; steady weeks never turn amber.
    assert with_trend(pooled("red", 0.80), falling, 0.87).light == "red"
    assert with_trend(pooled("grey"), falling, 0.87).light == "grey"
    steady = [week(0.89) for _ in range(4)]
    assert with_trend(pooled("green"), steady, 0.87).light == "green"


def test_only_a_pooled_headline_is_checked():
    falling = [week(v) for v in (0.92, 0.90, 0.88, 0.86)]
    judge_week = Figure(0.86, 0.84, 0.88, 500, False, "green")
    judge_pooled = Figure(0.89, 0.87, 0.91, 2000, False, "green", 4)
    # The judge's week decides (not grey): it speaks for itself, no lag, no trend.
    h = complete_week_headline(week="2026-W40", experts=None, judge_week=judge_week,
                               judge_pooled=judge_pooled, pool_weeks=falling,
                               action_threshold=0.87)
    assert (h.view, h.trend, h.lag, h.light) == ("week", None, None, "green")
    # The experts' scale is a pool: checked against the same weeks.
    experts = Figure(0.89, 0.87, 0.91, 60, False, "green", 4)
    h = complete_week_headline(week="2026-W40", experts=experts, judge_week=judge_week,
                               judge_pooled=judge_pooled, pool_weeks=falling,
                               action_threshold=0.87)
    assert (h.scale, h.view, h.light, h.trend_amber) == ("experts", "pooled", "amber", True)
    # Without a threshold (callers that only want the figure) nothing is checked.
    h = complete_week_headline(week="2026-W40", experts=experts, judge_week=judge_week,
                               judge_pooled=judge_pooled, pool_weeks=falling)
    assert (h.light, h.trend) == ("green", None)


def test_a_trend_amber_raises_no_alarm_and_clears_none():
    from dashboard.domain.alarms import headline_decision

    falling = [week(v) for v in (0.92, 0.90, 0.88, 0.86)]
    warned = with_trend(pooled("green"), falling, 0.87)
    assert warned.trend_amber
    decision = headline_decision(current=warned, previous=warned, action_threshold=0.87)
    # The pool (0.87-0.91) is at or above the line: no alarm, even two weeks running; and the
    # warning keeps an open alarm from clearing.
    assert (decision.alarm, decision.recovered, decision.light) == (False, False, "amber")
    calm = headline_decision(current=with_trend(pooled("green"), falling, 0.85), previous=None,
                             action_threshold=0.85)
    assert (calm.alarm, calm.recovered, calm.light) == (False, True, "green")


def test_the_running_week_is_read_on_the_experts_scale_where_it_leads():
    from dashboard.domain.headline import RUNNING_CONFIDENCE, Correction, headline

    # A judge strict by 0.05: the running week's judge estimate 0.80 (strict interval
    # 0.78-0.82) lies below the line 0.83 on its own scale; the experts' correction +0.05
    # (variance 0.0001) moves it to 0.85, each arm widened in quadrature by z·0.01:
    # √(0.02² + (3.67·0.01)²) = 0.0418 at the strict level, so 0.808-0.892: not red.
    z = z_value(RUNNING_CONFIDENCE)
    correction = Correction(0.05, 0.0001, 0.83)
    strict = Figure(0.80, 0.78, 0.82, 2000, False, "red")
    moved = correction.apply(strict, z)
    half = math.sqrt(0.02**2 + (z * 0.01) ** 2)
    assert (moved.value, moved.low, moved.high) == (
        pytest.approx(0.85), pytest.approx(0.85 - half), pytest.approx(0.85 + half))
    assert moved.light == "green"  # 0.084 wide, across the line with the value above it
    complete = pooled("green", 0.90)
    running = Figure(0.80, 0.79, 0.81, 2000, False, "red")
    now = headline(complete=complete, running_week="2026-W41", running=running,
                   running_strict=strict, correction=correction)
    assert now is complete
    # Without the correction (the judge's scale leads) the same week decides red.
    judge_complete = dataclasses.replace(complete, scale="judge")
    now = headline(complete=judge_complete, running_week="2026-W41", running=running,
                   running_strict=strict, correction=correction)
    assert (now.scale, now.view, now.running, now.light) == ("judge", "week", True, "red")
    # On the experts' scale a week truly below still decides, and says its scale.
    low = Figure(0.60, 0.58, 0.62, 2000, False, "red")
    now = headline(complete=complete, running_week="2026-W41", running=low,
                   running_strict=low, correction=correction)
    assert (now.scale, now.running, now.light) == ("experts", True, "red")
    assert now.value == pytest.approx(0.65)
