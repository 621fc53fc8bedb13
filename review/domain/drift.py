"""The drift check as the product runs it each time it looks: which reviews feed the CUSUM, which
of them estimate its in-control rate, where it restarts after an alarm. The review service
raises its alarms from `drift_alarms`, the calibration page shows `drift_run`, and
bench/drift_sim.py replays both week after week, so that what the bench measures is what the
product does.

The reviews are those of the calibration window (the last 26 review weeks), one observation
per reviewed answer in review order: does the expert land on the other side of the action
threshold than the judge? Of them the check takes those since its restart (the week after its
latest alarm); the last `watched` weeks are watched, the ones before estimate the in-control
rate, and the CUSUM runs over all of them with parameters set from that estimate. A crossing in
a watched week is an alarm; the check starts again in the week after it, with the rate
estimated anew from what is left before the watched weeks (often nothing: the prior).
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from common.domain.weeks import shift_week
from review.domain.cusum import CusumParams, CusumResult, bernoulli_cusum

# (disagreements, reviews) of the baseline → the CUSUM's parameters (`cusum_params_for`, or
# the site's fixed settings).
ParamsFor = Callable[[int, int], CusumParams]


@dataclass(frozen=True, slots=True)
class DriftRun:
    """One look of the drift check: the CUSUM over the observations since ``start``."""

    params: CusumParams
    baseline_reviews: int  # observations before the watched weeks the rate was estimated from
    baseline_disagreements: int
    start: int  # index of the first observation since the restart
    result: CusumResult  # over observations[start:]
    crossed: int | None  # index into observations[start:] of the first crossing in a watched week


@dataclass(frozen=True, slots=True)
class DriftAlarm:
    run: DriftRun  # the look that raised it
    week: str  # the review week of the crossing
    restart: str  # the review week the check starts again from
    statistic: float  # the CUSUM's value that crossed the limit


def drift_run(
    weeks: Sequence[str],
    disagreements: Sequence[bool],
    *,
    restart: str | None,
    watched_from: str,
    params_for: ParamsFor,
) -> DriftRun:
    """The CUSUM over the observations (review week, disagreement; in review order) from the
    week ``restart`` on, its rate estimated from those before ``watched_from``.

    ISO weeks "YYYY-Www" compare as text in calendar order."""
    if len(weeks) != len(disagreements):
        raise ValueError(f"{len(weeks)} weeks for {len(disagreements)} observations")
    if any(a > b for a, b in pairwise(weeks)):
        raise ValueError("the observations must come in the order of their weeks")
    start = 0
    if restart is not None:
        start = next((i for i, week in enumerate(weeks) if week >= restart), len(weeks))
    observed = disagreements[start:]
    baseline = sum(1 for week in weeks[start:] if week < watched_from)
    found = sum(1 for x in observed[:baseline] if x)
    params = params_for(found, baseline)
    result = bernoulli_cusum(observed, params)
    crossed = next((i for i in result.alarms if weeks[start + i] >= watched_from), None)
    return DriftRun(params, baseline, found, start, result, crossed)


def drift_alarms(
    weeks: Sequence[str],
    disagreements: Sequence[bool],
    *,
    restart: str | None,
    watched_from: str,
    params_for: ParamsFor,
) -> list[DriftAlarm]:
    """Every alarm one check raises, oldest first: after each the check restarts in the week
    after the crossing and looks again, so the reviews that raised one alarm cannot raise
    another (at most one alarm per watched week)."""
    alarms: list[DriftAlarm] = []
    while True:
        run = drift_run(weeks, disagreements, restart=restart, watched_from=watched_from,
                        params_for=params_for)
        if run.crossed is None:
            return alarms
        week = weeks[run.start + run.crossed]
        restart = shift_week(week, 1)
        alarms.append(DriftAlarm(run, week, restart, run.result.statistic[run.crossed]))
