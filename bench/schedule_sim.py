"""The action alarm as the service runs it (issue 39, point 4), as `bench/statistics.py --only
schedule` prints it: a healthy week is alarmed if any of its 168 hourly looks at the running
week alarms (`alarms.running_decision` on the strict interval), or the check of the complete
week on its headline does (`headline.complete_week_headline`, the experts' scale where it leads,
the trend check included; `alarms.headline_decision` against the week before's headline).

The running week is read on the experts' scale where the complete weeks' headline is (moved by
their correction, `headline.Correction`). The complete weeks come from `simulate` (with their
review batches), the running weeks' looks from `_running_sums`, drawn apart: the two checks
read overlapping answers in the service, so the sum of their rates printed as "either" is an
upper bound (a union bound) of the share of healthy weeks alarmed, which is what the target
(≤ 2 %) is about.
"""

from __future__ import annotations

import numpy as np

from bench.simulation import (
    ACTION,
    POOLED,
    _reviews_by_week,
    _running_sums,
    _sums,
    simulate,
    use_case,
)
from dashboard.domain.alarms import headline_decision, running_decision
from dashboard.domain.expert_weeks import expert_scale_by_week
from dashboard.domain.headline import (
    EXPERTS,
    RUNNING_CONFIDENCE,
    Correction,
    Figure,
    complete_week_headline,
)
from dashboard.domain.statistics.cells import Estimate, z_value
from dashboard.domain.statistics.estimates import mean_from_sums, pooled_mean
from dashboard.domain.statistics.precision import traffic_light
from dashboard.domain.trend import WeekPoint

WEEKS = 10
# (answers a week, flagged share, the experts' true mean, judge, its bias): healthy use cases,
# 0.03-0.05 above the line on the experts' scale, the judge strict or lenient.
CASES = [
    (150, 0.20, 0.88, "strict", 0.02),
    (500, 0.05, 0.88, "strict", 0.02),
    (500, 0.20, 0.90, "lenient", 0.05),
    (2_000, 0.05, 0.88, "strict", 0.0),
    (2_000, 0.20, 0.88, "strict", 0.05),
    (10_000, 0.20, 0.88, "lenient", 0.02),
]
TARGET = 0.02


def _figure(e: Estimate, action: float, weeks: int = 1) -> Figure:
    return Figure(e.value, e.low, e.high, e.n, e.too_few, traffic_light(e, action), weeks)


def schedule_table(rng: np.random.Generator, reps: int, seed: int) -> list[str]:
    """Print the table; return the targets missed (either check's rate summed above 2 %)."""
    looks = max(reps // 10, 50)
    print(f"\n## The action alarm as the service runs it (line {ACTION}): healthy weeks alarmed "
          f"({reps} runs × {WEEKS - POOLED} complete weeks; {looks} running weeks of 168 looks)"
          "\n")
    print("| answers/wk | flagged | experts' mean | judge         | headline on the experts' "
          "scale | complete weeks | of them two weeks | running looks | either (sum) |")
    print("|---|---|---|---|---|---|---|---|---|")
    missed = []
    for index, (volume, phi, mean, judge, bias) in enumerate(CASES):
        case = use_case(seed + 700 + index, flagged_share=phi, expert_mean=mean, judge=judge,
                        bias=bias)
        sim = simulate(rng, [case] * WEEKS, volume, reps)
        complete = weeks = experts_lead = two_weeks = 0
        corrections: list[Correction] = []
        for r in range(reps):
            strata = [_sums(sim, r, w) for w in range(WEEKS)]
            weekly = [mean_from_sums(s) for s in strata]
            previous = None
            for w in range(POOLED - 1, WEEKS):
                span = range(w - POOLED + 1, w + 1)
                pool = pooled_mean([strata[v] for v in span])
                x = expert_scale_by_week([strata[v] for v in span],
                                         _reviews_by_week(sim, r, span, range(0, w)))
                experts = None if x.value is None else Figure(
                    x.value, x.low, x.high, x.n_reviews, x.too_few,
                    traffic_light(Estimate(x.value, x.low, x.high, x.n_reviews, 0, (),
                                           x.too_few), ACTION), x.weeks_pooled)
                points = [WeekPoint(weekly[v].value, weekly[v].low, weekly[v].high,
                                    int(sim.size[r, v].sum())) for v in span]
                headline = complete_week_headline(
                    week=str(w), experts=experts, judge_week=_figure(weekly[w], ACTION),
                    judge_pooled=_figure(pool, ACTION, POOLED), pool_weeks=points,
                    action_threshold=ACTION)
                if previous is not None:
                    decision = headline_decision(current=headline, previous=previous,
                                                 action_threshold=ACTION,
                                                 pooled=_figure(pool, ACTION, POOLED))
                    weeks += 1
                    complete += decision.alarm
                    two_weeks += decision.reason == "two_weeks_below"
                    experts_lead += headline.scale == EXPERTS
                if (headline.scale == EXPERTS and x.correction is not None
                        and x.correction_variance is not None):
                    corrections.append(Correction(x.correction, x.correction_variance, ACTION))
                previous = headline
        running = 0
        z = z_value(RUNNING_CONFIDENCE)
        for k in range(looks):
            # Read on the experts' scale where the complete weeks' headline is, with the
            # correction of one of this use case's complete weeks (as the service carries the
            # last one's).
            correction = corrections[k % len(corrections)] if corrections else None
            for sums in _running_sums(rng, case, volume):
                strict = _figure(mean_from_sums(sums, confidence=RUNNING_CONFIDENCE), ACTION)
                if correction is not None:
                    strict = correction.apply(strict, z)
                if running_decision(strict).alarm:
                    running += 1
                    break
        either = complete / weeks + running / looks
        print(f"| {volume:>10} | {phi:>7.0%} | {mean:>13.2f} | {judge:>7} {bias:.2f} "
              f"| {100 * experts_lead / weeks:>30.0f}% | {100 * complete / weeks:>13.2f}% "
              f"| {100 * two_weeks / weeks:>16.2f}% "
              f"| {100 * running / looks:>12.2f}% | {100 * either:>11.2f}% |")
        if either > TARGET:
            missed.append(f"{100 * either:.2f} % of healthy weeks alarmed at {volume}/wk, "
                          f"{phi:.0%} flagged, judge {judge} {bias:.2f}")
    return missed
