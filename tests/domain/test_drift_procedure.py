"""The drift check's procedure (review.domain.drift), which the review service raises its alarms
from and bench/drift_sim.py replays: which reviews estimate the rate, which are watched, where
the check restarts. Hand-computed values on a CUSUM whose steps are easy to add up."""

import math

import pytest

from review.domain.cusum import CusumParams
from review.domain.drift import drift_alarms, drift_run

# p0 = 0.1, p1 = 0.9: a disagreement adds ln 9 = 2.1972, an agreement takes as much off, so
# with h = 4 two disagreements in a row cross (4.3944) and one agreement resets S to 0.
TWO_IN_A_ROW = CusumParams(0.1, 0.9, 4.0)
LN9 = math.log(9)


class Recorder:
    """A params_for that records the baselines it is asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, int]] = []

    def __call__(self, disagreements: int, reviews: int) -> CusumParams:
        self.asked.append((disagreements, reviews))
        return TWO_IN_A_ROW


W1, W2, W3, W4 = "2030-W01", "2030-W02", "2030-W03", "2030-W04"


def test_the_rate_comes_from_the_weeks_before_the_watched_ones():
    weeks = [W1] * 3 + [W2] * 3 + [W3] * 3
    seen = [True, True, False, False, False, False, True, True, False]
    params_for = Recorder()
    run = drift_run(weeks, seen, restart=None, watched_from=W3, params_for=params_for)
    # Baseline: the 6 reviews of W01 and W02, 2 of them disagreements.
    assert params_for.asked == [(2, 6)]
    assert (run.baseline_disagreements, run.baseline_reviews, run.start) == (2, 6, 0)
    # S: 2.197, 4.394 (crosses in W01: not watched, only resets), then 0 … 0, 2.197, 4.394
    # (crosses in W03: watched), 0.
    assert run.result.statistic == pytest.approx(
        [LN9, 2 * LN9, 0, 0, 0, 0, LN9, 2 * LN9, 0])
    assert run.result.alarms == (1, 7)
    assert run.crossed == 7


def test_an_alarm_restarts_the_check_in_the_following_week():
    weeks = [W1] * 2 + [W2] * 2 + [W3] * 2
    seen = [False, False, True, True, True, True]
    params_for = Recorder()
    alarms = drift_alarms(weeks, seen, restart=None, watched_from=W2, params_for=params_for)
    # 1st look: baseline W01 (0 of 2); S 0, 0, 2.197, 4.394: crosses in W02, restart W03.
    # 2nd look from W03: no baseline left (the prior's), S 2.197, 4.394: crosses in W03.
    # 3rd look from W04: nothing left to watch.
    assert [(a.week, a.restart) for a in alarms] == [(W2, W3), (W3, W4)]
    assert [a.statistic for a in alarms] == pytest.approx([2 * LN9, 2 * LN9])
    assert [a.run.start for a in alarms] == [0, 4]
    assert [a.run.crossed for a in alarms] == [3, 1]
    assert params_for.asked == [(0, 2), (0, 0), (0, 0)]


def test_a_restart_drops_the_reviews_before_it():
    weeks = [W1] * 2 + [W2] * 2 + [W3] * 2
    seen = [True, True, True, False, False, True]
    params_for = Recorder()
    run = drift_run(weeks, seen, restart=W2, watched_from=W3, params_for=params_for)
    # From W02: baseline W02 (1 of 2); S 2.197, 0, 0, 2.197: no crossing.
    assert params_for.asked == [(1, 2)]
    assert run.start == 2
    assert run.result.statistic == pytest.approx([LN9, 0, 0, LN9])
    assert run.crossed is None
    assert drift_alarms(weeks, seen, restart=W2, watched_from=W3, params_for=params_for) == []


def test_a_restart_after_every_review_leaves_nothing_to_run():
    run = drift_run([W1, W2], [True, True], restart=W3, watched_from=W2, params_for=Recorder())
    assert (run.start, run.baseline_reviews, run.result.statistic, run.crossed) == (2, 0, [], None)


@pytest.mark.parametrize(("weeks", "seen"), [
    ([W1, W2], [True]),  # a week without its observation
    ([W2, W1], [True, False]),  # out of order
])
def test_refuses_observations_it_cannot_place(weeks, seen):
    with pytest.raises(ValueError):
        drift_run(weeks, seen, restart=None, watched_from=W2, params_for=Recorder())
