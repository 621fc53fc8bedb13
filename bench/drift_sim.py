"""The drift CUSUM as the product runs it, replayed week after week (issue 39, point 5).

A use case brings 20 reviews a week, each a disagreement (expert and judge on different sides
of the action threshold) with the week's rate. At the end of each week the check does what the
review service does (`review.domain.drift.drift_alarms`): the last 26 review weeks of reviews
(the calibration window), from the week after the latest alarm on; the 4 newest weeks watched,
the ones before them estimating the in-control rate; every crossing in a watched week an alarm
that restarts the check in the following week. Looking after every review instead changes
nothing: the parameters stay fixed within a week, and the CUSUM over a prefix crosses where the
whole week's does.

Two figures per design point (how p0, p1 and the limit are set, `cusum_params_for`) and
in-control rate:

* weeks between false alarms: use cases without history reviewed for `HORIZON` weeks at a
  constant rate, weeks / alarms; and the share of them with a false alarm in their first year;
* a shift of 0.10 found within 3 weeks: `WARMUP` weeks at the rate (the product's procedure
  all along, restarts after false alarms included), then the rate 0.10 higher; found when an
  alarm's crossing lies in the first 3 shifted weeks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from common.domain.weeks import shift_week
from review.domain.cusum import (
    CUSUM_P0_QUANTILE,
    CUSUM_SHIFT,
    CUSUM_TARGET_WEEKS,
    REVIEWS_PER_WEEK,
    CusumParams,
    bernoulli_cusum,
    cusum_limit,
    cusum_params_for,
)
from review.domain.drift import drift_alarms

# As review.selectors.calibration: the window the check reads, the weeks it watches.
WINDOW = 26
WATCHED = 4
FIRST_WEEK = "2030-W01"
HORIZON = 260  # five years per in-control run
WARMUP = 26  # half a year of reviews before the shift
FOUND_WITHIN = 3
LATER = 8  # and how many within two months
SHIFT = 0.10
RATES = (0.05, 0.10, 0.15, 0.20)
TARGET_WEEKS = 156.0
TARGET_FOUND = 0.90


@dataclass(frozen=True)
class Design:
    """How the check sets its parameters from the baseline: p0 the ``quantile`` of the
    posterior, p1 = p0 + ``shift``, the limit for ``target_weeks`` at p0."""

    quantile: float = CUSUM_P0_QUANTILE
    shift: float = CUSUM_SHIFT
    target_weeks: float = CUSUM_TARGET_WEEKS

    @property
    def label(self) -> str:
        return f"q {self.quantile:.2f}, p1 = p0 + {self.shift:.2f}, {self.target_weeks:.0f} wk"

    def params_for(self) -> Callable[[int, int], CusumParams]:
        cache = _PARAMS.setdefault(self, {})

        def params(disagreements: int, reviews: int) -> CusumParams:
            key = (disagreements, reviews)
            if key not in cache:
                cache[key] = cusum_params_for(
                    disagreements=disagreements, reviews=reviews, quantile=self.quantile,
                    shift=self.shift, target_weeks=self.target_weeks)
            return cache[key]

        return params


# Design → (disagreements, reviews) → its parameters: a limit takes the product's
# `cusum_limit` some 40 ms (a bisection over Markov chains), and a replay asks for the same
# baselines again and again.
_PARAMS: dict[Design, dict[tuple[int, int], CusumParams]] = {}


@dataclass(frozen=True)
class Cell:
    rate: float
    weeks_per_alarm: float  # in control
    first_year: float  # share of use cases with a false alarm in their first 52 weeks
    found: float  # share of shifts of SHIFT found within FOUND_WITHIN weeks
    found_later: float  # within LATER weeks


WEEKS = [shift_week(FIRST_WEEK, k) for k in range(HORIZON + WARMUP + LATER + 1)]


def replay(rates: np.ndarray, params_for: Callable[[int, int], CusumParams],
           rng: np.random.Generator) -> list[tuple[int, int]]:
    """(check, crossing): the weeks (0-based) every drift alarm of a use case was raised in
    and names, when its week k has the disagreement rate ``rates[k]`` and it is checked at the
    end of each week as the product checks. The two differ when a look with a new estimate
    finds a crossing in an earlier watched week."""
    observed = (rng.random((len(rates), REVIEWS_PER_WEEK)) < rates[:, None]).ravel().tolist()
    weeks = [week for week in WEEKS[:len(rates)] for _ in range(REVIEWS_PER_WEEK)]
    alarms: list[tuple[int, int]] = []
    restart: str | None = None
    for k in range(len(rates)):
        window = slice(max(0, k - WINDOW + 1) * REVIEWS_PER_WEEK, (k + 1) * REVIEWS_PER_WEEK)
        for alarm in drift_alarms(weeks[window], observed[window], restart=restart,
                                  watched_from=WEEKS[max(0, k - WATCHED + 1)],
                                  params_for=params_for):
            alarms.append((k, WEEKS.index(alarm.week)))
            restart = alarm.restart
    return alarms


def measure(design: Design, rate: float, reps: int, rng: np.random.Generator) -> Cell:
    params_for = design.params_for()
    alarms = first_year = 0
    for _ in range(reps):
        run = replay(np.full(HORIZON, rate), params_for, rng)
        alarms += len(run)
        first_year += any(check < 52 for check, _ in run)
    found = later = 0
    shifted = np.concatenate([np.full(WARMUP, rate), np.full(LATER, rate + SHIFT)])
    for _ in range(reps):
        # An alarm that names a shifted week: the first one tells when the shift was found,
        # by the week of the check that raised it.
        late = [check for check, week in replay(shifted, params_for, rng) if week >= WARMUP]
        found += bool(late) and late[0] < WARMUP + FOUND_WITHIN
        later += bool(late)
    return Cell(rate, reps * HORIZON / alarms if alarms else math.inf, first_year / reps,
                found / reps, later / reps)


def known_rate_found(rate: float, reps: int, rng: np.random.Generator) -> float:
    """The bound no estimate beats by much: a CUSUM that knows the in-control rate, tuned to
    the shift (p1 = rate + SHIFT) with its limit for TARGET_WEEKS between false alarms, started
    from 0 at the shift; the share of runs it alarms in within FOUND_WITHIN weeks."""
    p1 = round(rate + SHIFT, 4)
    params = CusumParams(rate, p1, cusum_limit(rate, p1, arl=TARGET_WEEKS * REVIEWS_PER_WEEK))
    draws = rng.random((reps, FOUND_WITHIN * REVIEWS_PER_WEEK)) < rate + SHIFT
    return sum(bool(bernoulli_cusum(run, params).alarms) for run in draws.tolist()) / reps


# The design points of the frontier beside the product's: the one it ran before issue 39 first.
DESIGNS = (
    Design(0.8, 0.2, 52),
    Design(0.8, 0.2, 156),
    Design(0.8, 0.1, 104),
    Design(0.8, 0.1, 130),
    Design(0.9, 0.1, 104),
    Design(0.8, 0.1, 260),
)


def drift_product_table(rng: np.random.Generator, reps: int,
                        chosen: Design | None = None) -> tuple[float, float]:
    """Prints the frontier; returns the chosen design's worst weeks between false alarms and
    worst share found within 3 weeks over the in-control rates."""
    chosen = chosen or Design()
    print(f"\n## Drift CUSUM as the product runs it ({reps} use cases × {HORIZON} weeks in "
          f"control per cell; a shift of {SHIFT:.2f} after {WARMUP} weeks, {reps} runs; "
          f"{REVIEWS_PER_WEEK} reviews a week, baseline re-estimated weekly, restarts after "
          f"alarms)\n")
    print(f"| {'design':<32} | {'rate':>4} | {'weeks/false alarm':>17} "
          f"| {'false alarm in year 1':>21} | {'+0.10 found ≤ 3 wk':>18} "
          f"| {'≤ 8 wk':>6} |")
    print(f"|{'-' * 34}|{'-' * 6}:|{'-' * 18}:|{'-' * 22}:|{'-' * 19}:|{'-' * 7}:|")
    for rate in RATES:
        found = known_rate_found(rate, 10 * reps, rng)
        print(f"| {'rate known, ' + format(TARGET_WEEKS, '.0f') + ' wk (bound)':<32} "
              f"| {rate:>4.2f} | {TARGET_WEEKS:>17.1f} | {'-':>21} | {100 * found:>17.1f}% "
              f"| {'-':>6} |")
    worst: dict[Design, tuple[float, float]] = {}
    for design in dict.fromkeys((*DESIGNS, chosen)):
        cells = [measure(design, rate, reps, rng) for rate in RATES]
        for cell in cells:
            mark = " *" if design == chosen else ""
            print(f"| {design.label + mark:<32} | {cell.rate:>4.2f} "
                  f"| {cell.weeks_per_alarm:>17.1f} | {100 * cell.first_year:>20.1f}% "
                  f"| {100 * cell.found:>17.1f}% | {100 * cell.found_later:>5.0f}% |")
        worst[design] = (min(c.weeks_per_alarm for c in cells), min(c.found for c in cells))
    print(f"\nFrontier (worst over the rates {RATES[0]:.2f}-{RATES[-1]:.2f}; * the product's):\n")
    print(f"| {'design':<32} | {'weeks/false alarm':>17} | {'found ≤ 3 wk':>12} |")
    print(f"|{'-' * 34}|{'-' * 18}:|{'-' * 13}:|")
    for design, (weeks, found) in sorted(worst.items(), key=lambda item: item[1][0]):
        mark = " *" if design == chosen else ""
        print(f"| {design.label + mark:<32} | {weeks:>17.1f} | {100 * found:>11.1f}% |")
    return worst[chosen]
