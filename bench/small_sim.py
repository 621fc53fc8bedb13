"""Small weeks (issue 39, point 7): 50 answers a week and a 3 % sample, as `bench/statistics.py
--only small` prints them.

A week of 50 answers holds one or two random judged answers (none in a quarter to two fifths of
weeks). The weekly interval and the share below the line must still hold the week's truth in
≥ 93 % of the weeks that show a value; the page says how many weeks a pooled view needs where a
week cannot decide. Beside the product's estimator (`mean_from_sums`, `share_from_sums`: the
spread over n − 1 degrees of freedom with a pseudo-answer of 0.05, a share's over n + ½) the
table shows the one it replaced, the same machinery with the old constants (over n + 0.2, a
share's over n + 1: the textbook Wilson interval in one stratum).
"""

from __future__ import annotations

import numpy as np

from bench.simulation import ACTION, EXPERT_MEAN, POOLED, _sums, new_interval, simulate, use_case
from dashboard.domain.statistics.cells import estimate_cells, mean_cell
from dashboard.domain.statistics.estimates import mean_from_sums, pooled_mean, share_from_sums
from dashboard.domain.statistics.precision import MAX_WEEKS_TO_DECIDE, week_precision

SETTINGS = [
    # (volume per week, flagged share, judge, judge bias)
    (50, 0.05, "strict", 0.02),
    (50, 0.10, "strict", 0.10),
    (50, 0.20, "lenient", 0.05),
    (50, 0.40, "strict", 0.05),
    (50, 0.10, "lenient", 0.02),
    (100, 0.05, "strict", 0.05),
]
FLOOR = 0.93


def _old_mean(sums):
    return estimate_cells([mean_cell(s, 0.2) for s in sums], 0.95)


def _old_share(sums):
    return estimate_cells([mean_cell(s, 1.0) for s in sums], 0.95)


def small_table(rng: np.random.Generator, reps: int, seed: int) -> list[str]:
    """Print the table; return the targets missed (weekly and share below ≥ 93 % at 50 a
    week, each outside by more than two Monte Carlo standard errors)."""
    weeks_run = POOLED + 4
    print(f"\n## Small weeks: 50 answers a week, a 3 % sample ({reps} runs × {weeks_run - POOLED} "
          f"weeks after {POOLED} to pool; line {ACTION}; cover / truth above / below the "
          f"interval in %)\n")
    print("| setting                      | weekly (n − 1)       | weekly, old (n + 0.2) "
          "| below (n + ½)        | below, old (n + 1)   | no value | grey | 4-wk pool "
          "| grey: 4-wk decides | weeks to decide, median |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    missed = []
    for index, (volume, phi, judge, bias) in enumerate(SETTINGS):
        case = use_case(seed + 500 + index, flagged_share=phi, expert_mean=EXPERT_MEAN,
                        judge=judge, bias=bias)
        sim = simulate(rng, [case] * weeks_run, volume, reps)
        weekly, old, below, old_below, pool = (new_interval() for _ in range(5))
        shown = grey = weeks = pool_decides = 0
        to_decide: list[int] = []
        for r in range(reps):
            strata = [_sums(sim, r, w) for w in range(weeks_run)]
            for w in range(POOLED, weeks_run):
                size = sim.size[r, w].sum()
                truth = sim.truth_judge[r, w].sum() / size
                truth_below = sim.truth_below[r, w].sum() / size
                e = mean_from_sums(strata[w])
                weekly.add(e.value, e.low, e.high, truth)
                o = _old_mean(strata[w])
                old.add(o.value, o.low, o.high, truth)
                shares = _sums(sim, r, w, "below")
                s = share_from_sums(shares)
                below.add(s.value, s.low, s.high, truth_below)
                o = _old_share(shares)
                old_below.add(o.value, o.low, o.high, truth_below)
                span = range(w - POOLED + 1, w + 1)
                p = pooled_mean([strata[v] for v in span])
                pool.add(p.value, p.low, p.high,
                         sim.truth_judge[r, span].sum() / sim.size[r, span].sum())
                weeks += 1
                shown += e.value is not None
                precision = week_precision(strata[w], action_threshold=ACTION, pooled=p,
                                           pooled_weeks=POOLED)
                if not precision.decisive:
                    grey += 1
                    if precision.weeks_to_decide is not None:
                        to_decide.append(precision.weeks_to_decide)
                        pool_decides += precision.weeks_to_decide <= POOLED
        name = f"{volume:>4}/wk {phi:4.0%} fl {judge[:7]:>7} {bias:.2f}"
        median = int(np.median(to_decide)) if to_decide else 0
        median_text = (f"> {MAX_WEEKS_TO_DECIDE}" if median > MAX_WEEKS_TO_DECIDE
                       else str(median) if to_decide else "-")
        print(f"| {name:<28} | {weekly.row()} | {old.row()} | {below.row()} | "
              f"{old_below.row()} | {100 * (weeks - shown) / weeks:7.1f}% "
              f"| {100 * grey / weeks:3.0f}% | {100 * pool.coverage():8.1f}% "
              f"| {100 * pool_decides / max(grey, 1):17.0f}% | {median_text:>23} |")
        if volume == 50:
            for label, interval in (("weekly", weekly), ("share below", below)):
                tolerance = 2 * np.sqrt(0.95 * 0.05 / max(len(interval.covered), 1))
                if interval.coverage() < FLOOR - tolerance:
                    missed.append(f"{label} coverage {100 * interval.coverage():.1f} % at "
                                  f"{name.strip()}")
    return missed
