"""bench/drift_sim.py replays the drift check as the review service runs it: re-estimated each
week from the reviews before the watched ones, restarted in the week after each alarm. Rates of
0 and 1 make the replay's weeks certain, so that its alarms can be worked out by hand."""

import math
from typing import Any

import numpy as np

from bench.drift_sim import Design, replay
from review.domain.cusum import cusum_params_for


def test_a_judge_that_turns_is_found_each_week_from_a_fresh_start() -> None:
    params_for = Design().params_for()
    rates = np.array([0.0] * 10 + [1.0] * 3)
    # Week 10's check: 26-week window from week 0, weeks 7-10 watched, p0 from weeks 0-6
    # (0 of 140): its CUSUM crosses within week 10's 20 disagreements; the restart is week 11.
    baseline = cusum_params_for(disagreements=0, reviews=140)
    assert math.ceil(baseline.limit / math.log(baseline.p1 / baseline.p0)) <= 20
    # Weeks 11 and 12: watched, nothing before them since the restart: the prior's p0, whose
    # CUSUM needs 11 disagreements in a row (10 × 0.386 = 3.86 < 4.24), and gets 20.
    prior = cusum_params_for(disagreements=0, reviews=0)
    assert math.ceil(prior.limit / math.log(prior.p1 / prior.p0)) == 11
    assert replay(rates, params_for, np.random.default_rng(1)) == [(10, 10), (11, 11), (12, 12)]


def test_a_judge_that_always_agrees_raises_nothing_in_five_years() -> None:
    assert replay(np.zeros(260), Design().params_for(), np.random.default_rng(1)) == []


def test_a_crossing_found_by_a_later_look_names_its_own_week() -> None:
    # Six disagreements at the end of week 4, agreement everywhere else. Week 4's check
    # (watched weeks 1-4, p0 from week 0: 0 of 20, p0 = 0.1065, up 0.6622, limit 4.47): six
    # make 3.97, no alarm. Week 5's check (watched 2-5, p0 from weeks 0-1: 0 of 40, p0 = 0.0711,
    # up 0.8782, limit 4.58): the same six make 5.27, a crossing in week 4, raised in week 5.
    assert cusum_params_for(disagreements=0, reviews=20).limit == 4.47
    assert cusum_params_for(disagreements=0, reviews=40).limit == 4.58
    observed = np.zeros((8, 20), dtype=bool)
    observed[4, 14:] = True

    class Fixed:
        """Draws that give exactly `observed` (a draw below the week's rate disagrees)."""

        def random(self, shape: tuple[int, int]) -> np.ndarray:
            assert shape == observed.shape
            return np.where(observed, 0.0, 1.0)

    draws: Any = Fixed()  # replay calls only the generator's random
    assert replay(np.full(8, 0.5), Design().params_for(), draws) == [(5, 4)]
