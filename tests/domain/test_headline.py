"""The headline (dashboard.domain.headline): which figure a use case is judged by, and the action
alarm's decision read on it (dashboard.domain.alarms). Hand-made figures."""

import pytest

from dashboard.domain.alarms import (
    INTERVAL_BELOW,
    POOLED_BELOW,
    RUNNING_BELOW,
    TWO_WEEKS_BELOW,
    headline_decision,
    running_decision,
)
from dashboard.domain.headline import (
    EXPERTS,
    JUDGE,
    POOLED,
    RUNNING_CONFIDENCE,
    RUNNING_FALSE_ALARM,
    RUNNING_LOOKS,
    WEEK,
    Figure,
    complete_week_headline,
    headline,
)
from dashboard.domain.statistics.cells import z_value

# The demo's Kundenservice as a new user saw it: the experts' scale 0.76 (0.72-0.80) wholly
# below the action line 0.80 while the judge's week was green.
EXPERTS_RED = Figure(0.76, 0.72, 0.795, 60, False, "red", 4)
EXPERTS_FEW = Figure(0.76, 0.70, 0.82, 12, True, "grey", 4)
JUDGE_GREEN = Figure(0.86, 0.83, 0.89, 120, False, "green")
JUDGE_GREY = Figure(0.82, 0.70, 0.94, 8, True, "grey")
POOLED_AMBER = Figure(0.79, 0.76, 0.84, 40, False, "amber", 4)


def test_the_experts_scale_leads_once_a_batch_of_reviews_stands_behind_it() -> None:
    h = complete_week_headline(week="2026-W49", experts=EXPERTS_RED, judge_week=JUDGE_GREEN,
                               judge_pooled=POOLED_AMBER)
    assert (h.scale, h.view, h.week, h.weeks, h.light) == (EXPERTS, POOLED, "2026-W49", 4, "red")
    assert (h.value, h.low, h.high, h.n, h.running) == (0.76, 0.72, 0.795, 60, False)


@pytest.mark.parametrize("experts", [None, EXPERTS_FEW,
                                     Figure(None, None, None, 30, False, "grey", 4)])
def test_without_enough_reviews_the_judges_week_leads_where_it_decides(
    experts: Figure | None,
) -> None:
    h = complete_week_headline(week="2026-W49", experts=experts, judge_week=JUDGE_GREEN,
                               judge_pooled=POOLED_AMBER)
    assert (h.scale, h.view, h.weeks, h.value, h.light) == (JUDGE, WEEK, 1, 0.86, "green")


def test_a_week_too_thin_to_decide_is_led_by_the_judges_pooled_view() -> None:
    h = complete_week_headline(week="2026-W49", experts=None, judge_week=JUDGE_GREY,
                               judge_pooled=POOLED_AMBER)
    assert (h.scale, h.view, h.weeks, h.value, h.light) == (JUDGE, POOLED, 4, 0.79, "amber")
    # At the start of the data the pool is the week alone: a week view.
    alone = complete_week_headline(week="2026-W49", experts=None, judge_week=JUDGE_GREY,
                                   judge_pooled=JUDGE_GREY)
    assert (alone.view, alone.light) == (WEEK, "grey")


def test_the_running_week_leads_only_where_its_strict_interval_is_below() -> None:
    complete = complete_week_headline(week="2026-W49", experts=EXPERTS_RED,
                                      judge_week=JUDGE_GREEN, judge_pooled=POOLED_AMBER)
    running = Figure(0.55, 0.48, 0.62, 80, False, "red")
    strict_red = Figure(0.55, 0.40, 0.70, 80, False, "red")
    strict_amber = Figure(0.70, 0.55, 0.82, 80, False, "grey")
    strict_few = Figure(0.40, 0.10, 0.70, 6, True, "red")
    now = headline(complete=complete, running_week="2026-W50", running=running,
                   running_strict=strict_red)
    assert (now.scale, now.view, now.week, now.running, now.value, now.light) == (
        JUDGE, WEEK, "2026-W50", True, 0.55, "red")
    for strict in (strict_amber, strict_few, None):
        assert headline(complete=complete, running_week="2026-W50", running=running,
                        running_strict=strict) is complete


def test_the_running_weeks_level_keeps_168_looks_under_two_percent() -> None:
    one_side = (1 - RUNNING_CONFIDENCE) / 2
    assert RUNNING_LOOKS * one_side == pytest.approx(RUNNING_FALSE_ALARM)
    # About 3.67 standard errors instead of 1.96.
    assert z_value(RUNNING_CONFIDENCE) == pytest.approx(3.67, abs=0.01)


def test_the_action_alarm_reads_the_headline() -> None:
    experts = complete_week_headline(week="2026-W49", experts=EXPERTS_RED,
                                     judge_week=JUDGE_GREEN, judge_pooled=POOLED_AMBER)
    decision = headline_decision(current=experts, previous=None, action_threshold=0.80)
    assert (decision.alarm, decision.reason, decision.light) == (True, INTERVAL_BELOW, "red")
    # The same week read on the judge's scale alone would have been green: no alarm.
    judge = complete_week_headline(week="2026-W49", experts=None, judge_week=JUDGE_GREEN,
                                   judge_pooled=POOLED_AMBER)
    calm = headline_decision(current=judge, previous=None, action_threshold=0.80)
    assert (calm.alarm, calm.recovered) == (False, True)
    # A threshold change re-decides it: at 0.70 the experts' scale is above the line.
    assert not headline_decision(current=experts, previous=None, action_threshold=0.70).alarm


def test_two_amber_headlines_in_a_row_raise_and_a_thin_red_week_asks_the_pool() -> None:
    amber = complete_week_headline(week="2026-W49", experts=None, judge_week=POOLED_AMBER,
                                   judge_pooled=POOLED_AMBER)
    assert amber.light == "amber"
    two = headline_decision(current=amber, previous=amber, action_threshold=0.80)
    assert (two.alarm, two.reason) == (True, TWO_WEEKS_BELOW)
    thin_red = complete_week_headline(
        week="2026-W49", experts=None, judge_week=Figure(0.5, 0.3, 0.7, 6, True, "red"),
        judge_pooled=POOLED_AMBER)
    pooled_red = Figure(0.70, 0.64, 0.76, 40, False, "red", 4)
    assert headline_decision(current=thin_red, previous=None, action_threshold=0.80,
                             pooled=pooled_red).reason == POOLED_BELOW
    assert not headline_decision(current=thin_red, previous=None, action_threshold=0.80,
                                 pooled=POOLED_AMBER).alarm


def test_the_running_week_decides_only_on_its_strict_interval() -> None:
    red = running_decision(Figure(0.55, 0.40, 0.70, 80, False, "red"))
    assert (red.alarm, red.reason, red.recovered, red.light) == (True, RUNNING_BELOW, False,
                                                                  "red")
    green = running_decision(Figure(0.95, 0.90, 0.99, 80, False, "green"))
    assert (green.alarm, green.recovered, green.light) == (False, True, "green")
    for strict in (None, Figure(0.4, 0.1, 0.7, 5, True, "red"),
                   Figure(0.97, 0.9, 1.0, 6, True, "green"),
                   Figure(0.80, 0.6, 0.95, 80, False, "grey")):
        quiet = running_decision(strict)
        assert (quiet.alarm, quiet.recovered, quiet.light) == (False, False, "grey")
