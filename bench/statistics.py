"""Statistics benchmark: are the dashboard's intervals and alarms right? Proof by simulation.

Weeks of a use case are simulated the way the product samples them, and the product's own
functions (`dashboard.domain.statistics`, `expert_scale`, `alarms`, `review.domain.calibration`)
estimate them; the tables say how often the intervals cover the truth, how biased and how wide
they are, how often the alarms fire without cause and how quickly they find a real drift. The
use case and its weeks are `bench/simulation.py`'s; the tables `--only small`, `trend`,
`schedule`, `expert`, `drift-product` and `causes` are in `bench/*_sim.py`.

    .venv/bin/python bench/statistics.py              # ≥ 2,000 replications per setting
    .venv/bin/python bench/statistics.py --quick      # a few hundred: a smoke run
    .venv/bin/python bench/statistics.py --seed 7

Targets: coverage 94-96 % (≥ 93 % in the smallest setting); false action alarms ≤ 2 % of
healthy weeks; ≥ 30 weeks between false drift alarms at any in-control rate 0.05-0.2; a judge
drift of 0.1 found within 3 weeks in ≥ 90 % of runs; the bias alarm at half its tolerance in
≤ 1 % of checks. Exit status 0 (``--strict``: 2 when a target is missed).

Beside the coverage table, a count reference: the unflagged part as 1 − q·m, q bounded by the
mid-p interval of the count of its judged answers below 1.0 and m, their mean shortfall, taken
as known; on the experts' scale (pooled weeks) it knows the expert score of every judged
answer, as if each had been reviewed. Where a drawn stratum holds a handful of answers below
1.0 a week, even it covers 96-98 %: when none or one of a dozen answers falls short, the truth
does not lie below an interval that keeps its lower tail at 2.5 % for every truth the data
allow. A cell over 96 % counts as missed unless that reference covers over 96 % too and the
cell no more than half a point above it.

At 2,000 replications a cell's coverage has a Monte Carlo standard error of 0.25 (weekly,
8,000 weeks) to 0.5 points (pooled and expert scale, 2,000 pools); ``--reps 8000`` halves it.
A cell outside its band by no more than two of its standard errors is listed, not counted as
missed: the bench cannot tell it from a cell inside (Morris, White & Crowther, "Using
simulation studies to evaluate statistical methods", Stat. Med. 2019). The seed also draws the
settings' score distributions, so another seed is another set of use cases, not only another
set of replications. In the smallest setting the target is the issue's "≥ 93 %"; a cell over
96 % there is listed.
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named like the standard library's `statistics`, which the product imports: run
# as a script, its own folder would come first on the path and shadow it.
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(ROOT))

import argparse
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binom

from bench import expert_sim
from bench.causes_sim import causes_table
from bench.drift_sim import TARGET_FOUND, TARGET_WEEKS, drift_product_table
from bench.schedule_sim import schedule_table
from bench.simulation import (
    _ARRIVAL,
    ACTION,
    BATCH,
    EXPERT_MEAN,
    POOLED,
    Stratum,
    Weeks,
    _review_sums,
    _reviews_by_week,
    _running_sums,
    _sums,
    new_interval,
    simulate,
    use_case,
)
from bench.small_sim import small_table
from bench.trend_sim import trend_table
from dashboard.domain.alarms import action_decision, running_decision
from dashboard.domain.expert_scale import ReviewSums
from dashboard.domain.expert_weeks import expert_scale_by_week
from dashboard.domain.headline import RUNNING_CONFIDENCE, Figure
from dashboard.domain.statistics.estimates import mean_from_sums, pooled_mean, share_from_sums
from dashboard.domain.statistics.precision import traffic_light
from review.domain.calibration import bias_beyond_tolerance
from review.domain.cusum import CusumParams, bernoulli_cusum, cusum_arl, cusum_params_for

# --- tables ---------------------------------------------------------------------------------


SETTINGS = [
    # (volume per week, flagged share, judge, judge bias)
    (150, 0.40, "strict", 0.02),
    (150, 0.05, "lenient", 0.05),
    (300, 0.20, "strict", 0.10),
    (500, 0.05, "strict", 0.02),
    (500, 0.20, "lenient", 0.05),
    (500, 0.40, "strict", 0.05),
    (2_000, 0.05, "strict", 0.10),
    (2_000, 0.20, "lenient", 0.02),
    (10_000, 0.10, "strict", 0.05),
    (10_000, 0.40, "lenient", 0.05),
    (50_000, 0.05, "strict", 0.02),
    (50_000, 0.20, "strict", 0.10),
    (50_000, 0.40, "lenient", 0.10),
]


@functools.cache
def _mid_p(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """The mid-p interval for a binomial share from k of n (Lancaster 1961): each bound puts
    α/2 in its tail, counting half of the observed k. Not conservative, unlike Clopper-Pearson."""
    def tail_above(q: float) -> float:  # P(X > k) + ½P(X = k) at q
        return float(binom.sf(k, n, q) + 0.5 * binom.pmf(k, n, q)) - alpha / 2

    def tail_below(q: float) -> float:  # P(X < k) + ½P(X = k) at q
        return float(binom.cdf(k - 1, n, q) + 0.5 * binom.pmf(k, n, q)) - alpha / 2

    low = 0.0 if k == 0 else brentq(tail_above, 1e-12, 1 - 1e-12)
    high = 1.0 if k == n else brentq(tail_below, 1e-12, 1 - 1e-12)
    return low, high


def _shortfall(stratum: Stratum, scale: str = "judge") -> float:
    """The mean shortfall 1 − score of a stratum's answers scoring below 1.0 on ``scale``."""
    score = getattr(stratum, scale)
    short = score < 1.0
    return float((stratum.p * (1 - score))[short].sum() / stratum.p[short].sum())


def _reference(weeks: Weeks, r: int, span: range, shortfall: float,
               scale: str = "judge") -> tuple[float, float, float] | None:
    """The count reference over the weeks ``span``: (value, low, high), or None.

    The drawn (unflagged) part is 1 − q·m with q the share of its judged answers below 1.0,
    bounded by the mid-p interval of their count, and m the mean shortfall of the stratum's
    answers below 1.0, taken as known (the simulation's own). The flagged part is its judged
    mean, as the product takes it. It knows more than the product (the size of a shortfall)
    and leaves out a variance (theirs), so it is narrower than any honest interval: where even
    it covers more than 96 %, the excess is the count's discreteness, not the product's
    estimator.

    On the experts' ``scale`` it knows the expert score of every judged answer, as if each had
    been reviewed: the product has about 20 reviews a week and the judge's scores for the rest.
    """
    totals, shorts = ((weeks.total, weeks.short) if scale == "judge"
                      else (weeks.expert_total, weeks.expert_short))
    size = weeks.size[r, span].sum(axis=0)
    n = weeks.n[r, span].sum(axis=0)
    if ((size > 0) & (n == 0)).any() or n[1] == 0:
        return None
    population = size.sum()
    fixed = totals[r, span, 0].sum() / n[0] * size[0] / population if n[0] else 0.0
    share = size[1] / population
    k = int(shorts[r, span, 1].sum())
    value = fixed + share * totals[r, span, 1].sum() / n[1]
    low_q, high_q = _mid_p(k, int(n[1]))
    return value, fixed + share * (1 - high_q * shortfall), fixed + share * (1 - low_q * shortfall)


# How far a cell may cover above its count reference and still count as the count's
# discreteness: about two standard errors of a coverage at 8,000 replications.
SLACK = 0.005
# A cell's band is missed only by more than this many Monte Carlo standard errors of its
# coverage, √(0.95·0.05/intervals): 0.49 points at 8,000 pools, 0.97 at 2,000.
MONTE_CARLO_ERRORS = 2.0


@dataclass(frozen=True)
class CoverageCell:
    kind: str  # weekly, pooled, below, expert
    setting: str
    smallest: bool
    coverage: float
    reference: float | None  # the count reference's coverage, where there is one
    intervals: int = 0  # how many intervals the coverage is over (0: no Monte Carlo slack)

    @property
    def tolerance(self) -> float:
        """Two Monte Carlo standard errors of a 95 % coverage over this cell's intervals."""
        if self.intervals <= 0:
            return 0.0
        return MONTE_CARLO_ERRORS * math.sqrt(0.95 * 0.05 / self.intervals)


@dataclass(frozen=True)
class CoverageVerdict:
    missed: list[str]  # targets missed
    discrete: list[str]  # over 96 %, within SLACK of a count reference over 96 %
    noise: list[str]  # outside the band by no more than the Monte Carlo error
    smallest_over: list[str]  # the smallest setting over 96 % (its target is ≥ 93 %)


def coverage_misses(cells: Sequence[CoverageCell]) -> CoverageVerdict:
    """Which cells miss the coverage target, per interval kind.

    The target is 94-96 %; in the smallest setting, as the issue writes it, at least 93 %
    (at 150 answers a week a pool holds a dozen random answers a week, and an interval that
    knows every expert score covers 96 % there: over-coverage is listed, not missed).
    A cell outside its band by no more than MONTE_CARLO_ERRORS standard errors of its own
    coverage is listed, not missed: the bench cannot tell it from one inside. A cell over 96 %
    where the count reference covers more than 96 % too, and the cell no more than SLACK above
    it, is listed, not missed: an interval that knows more than the product does no better
    there.
    """
    verdict = CoverageVerdict([], [], [], [])
    for kind in ("weekly", "pooled", "below", "expert"):
        bad = []
        for c in (c for c in cells if c.kind == kind):
            floor = 0.93 if c.smallest else 0.94
            label = f"{100 * c.coverage:.1f} % at {c.setting}"
            if c.coverage < floor - c.tolerance:
                bad.append(label)
            elif c.coverage < floor:
                verdict.noise.append(f"{kind} {label} (± {100 * c.tolerance:.1f})")
            elif c.coverage <= 0.96:
                continue
            elif c.smallest:
                verdict.smallest_over.append(f"{kind} {label}")
            elif (c.reference is not None and c.reference > 0.96
                  and c.coverage <= c.reference + SLACK):
                verdict.discrete.append(
                    f"{kind} {label} (reference {100 * c.reference:.1f} %)")
            elif c.coverage <= 0.96 + c.tolerance:
                verdict.noise.append(f"{kind} {label} (± {100 * c.tolerance:.1f})")
            else:
                bad.append(label)
        if bad:
            verdict.missed.append(f"{kind} coverage " + ", ".join(bad))
    return verdict


def coverage_table(rng: np.random.Generator, reps: int, seed: int) -> list[CoverageCell]:
    print("\n## Coverage of the 95 % intervals "
          f"({reps} replications per setting; truth above/below the interval in %)\n")
    head = f"{'cover':>7} {'bias':>8} {'width':>6} {'abv/blw':>9}"
    print(f"| {'setting':<28} | weekly mean {head} | pooled {POOLED} wk {head} "
          f"| share below {ACTION} {head} | expert scale {head} "
          f"| judge's weekly interval vs experts' truth {head} |")
    cells: list[CoverageCell] = []
    references: list[str] = []
    for index, (volume, phi, judge, bias) in enumerate(SETTINGS):
        case = use_case(seed + index, flagged_share=phi, expert_mean=EXPERT_MEAN, judge=judge,
                        bias=bias)
        weeks = simulate(rng, [case] * POOLED, volume, reps)
        weekly, pooled, below, expert, judged = (new_interval() for _ in range(5))
        weekly_count, pooled_count, expert_count = new_interval(), new_interval(), new_interval()
        shortfall = _shortfall(case.strata[1])
        expert_shortfall = _shortfall(case.strata[1], "expert")
        for r in range(reps):
            strata = [_sums(weeks, r, w) for w in range(POOLED)]
            for w in range(POOLED):
                e = mean_from_sums(strata[w])
                truth = weeks.truth_judge[r, w].sum() / weeks.size[r, w].sum()
                weekly.add(e.value, e.low, e.high, truth)
                truth = weeks.truth_expert[r, w].sum() / weeks.size[r, w].sum()
                judged.add(e.value, e.low, e.high, truth)
                s = share_from_sums(_sums(weeks, r, w, "below"))
                truth = weeks.truth_below[r, w].sum() / weeks.size[r, w].sum()
                below.add(s.value, s.low, s.high, truth)
                ref = _reference(weeks, r, range(w, w + 1), shortfall)
                if ref is not None:
                    weekly_count.add(*ref, weeks.truth_judge[r, w].sum() / weeks.size[r, w].sum())
            population = weeks.size[r].sum()
            ref = _reference(weeks, r, range(POOLED), shortfall)
            if ref is not None:
                pooled_count.add(*ref, weeks.truth_judge[r].sum() / population)
            ref = _reference(weeks, r, range(POOLED), expert_shortfall, "expert")
            if ref is not None:
                expert_count.add(*ref, weeks.truth_expert[r].sum() / population)
            p = pooled_mean(strata)
            pooled.add(p.value, p.low, p.high, weeks.truth_judge[r].sum() / population)
            # The week's own answers are reviewed the week after: the pool's reviews are of
            # its first three weeks.
            x = expert_scale_by_week(strata, _reviews_by_week(weeks, r, range(POOLED),
                                                              range(POOLED - 1)))
            expert.add(x.value, x.low, x.high, weeks.truth_expert[r].sum() / population)
        name = f"{volume:>6}/wk {phi:4.0%} fl {judge[:6]:>7} {bias:.2f}"
        print(f"| {name:<28} | {weekly.row()} | {pooled.row()} | {below.row()} "
              f"| {expert.row()} | {judged.row()} |")
        references.append(f"| {name:<28} | {weekly_count.row()} | {pooled_count.row()} "
                          f"| {expert_count.row()} |")
        floor = {"weekly": weekly_count.coverage(), "pooled": pooled_count.coverage(),
                 "expert": expert_count.coverage()}
        for key, interval in (("weekly", weekly), ("pooled", pooled), ("below", below),
                              ("expert", expert)):
            cells.append(CoverageCell(key, name.strip(), volume == SETTINGS[0][0],
                                      interval.coverage(), floor.get(key),
                                      len(interval.covered)))
    print("\n## What the count below 1.0 allows: a reference interval that knows the size of "
          "a shortfall\n")
    print("The unflagged part is 1 − q·m: q bounded by the mid-p interval of the count of its "
          "judged answers\nbelow 1.0, m (their mean shortfall) taken as known. It knows more "
          "than the product and leaves\na variance out; where even it covers more than 96 %, "
          "the excess comes from the count\n(a handful of answers below 1.0), not from the "
          "product's estimator. On the experts' scale it\nknows the expert score of every "
          "judged answer, as if each had been reviewed (the product has\n20 reviews a week "
          "and the judge's scores).\n")
    print(f"| {'setting':<28} | weekly mean {head} | pooled {POOLED} wk {head} "
          f"| expert scale, pooled {head} |")
    for line in references:
        print(line)
    return cells


def action_table(rng: np.random.Generator, reps: int, seed: int) -> float:
    weeks_per_run = 10
    print(f"\n## Action alarm (line {ACTION}): share of weeks that raise it "
          f"({reps} runs × {weeks_per_run - 1} weeks; old = point estimate below; two points "
          f"= the rule\nread literally, two weeks in a row whose point estimates are below, "
          f"grey weeks included)\n")
    print(f"| {'answers/wk':>10} | {'flagged':>7} | {'true mean':>9} | {'new rule':>8} "
          f"| {'old rule':>8} | {'two points':>10} | {'red':>6} | {'two amber':>9} |")
    worst = 0.0
    for index, volume in enumerate((150, 500, 2_000, 10_000, 50_000)):
        for phi in (0.05, 0.20):
            for truth in (0.88, 0.90, 0.80):
                case = use_case(seed + 100 + index, flagged_share=phi, expert_mean=truth,
                                judge="strict", bias=0.0)
                sim = simulate(rng, [case] * weeks_per_run, volume, reps)
                new = old = points = red = two = total = 0
                for r in range(reps):
                    strata = [_sums(sim, r, w) for w in range(weeks_per_run)]
                    estimates = [mean_from_sums(s) for s in strata]
                    for w in range(1, weeks_per_run):
                        pooled = pooled_mean(strata[max(0, w - POOLED + 1):w + 1]) \
                            if estimates[w].too_few else None  # read only for a thin week
                        d = action_decision(current=estimates[w], previous=estimates[w - 1],
                                            action_threshold=ACTION, pooled=pooled)
                        e = estimates[w]
                        total += 1
                        new += d.alarm
                        red += d.reason in ("interval_below", "pooled_below")
                        two += d.reason == "two_weeks_below"
                        old += (not e.too_few and e.value is not None and e.value < ACTION)
                        before = estimates[w - 1].value
                        points += d.alarm or (e.value is not None and before is not None
                                              and e.value < ACTION and before < ACTION)
                judge_mean = case.mean("judge")
                print(f"| {volume:>10} | {phi:>7.0%} | {judge_mean:>9.3f} | "
                      f"{100 * new / total:>7.2f}% | {100 * old / total:>7.2f}% | "
                      f"{100 * points / total:>9.2f}% | "
                      f"{100 * red / total:>5.2f}% | {100 * two / total:>8.2f}% |")
                if judge_mean >= 0.875:
                    worst = max(worst, new / total)
    return worst



def running_table(rng: np.random.Generator, reps: int, seed: int) -> float:
    """The running week looked at every hour (issue 39, point 4): the share of healthy weeks
    the product's running-week rule (`alarms.running_decision` on the week's estimate at
    `headline.RUNNING_CONFIDENCE`) ever calls red in 168 looks, beside the rule it replaced
    (the 95 % interval red on enough answers at any look); and for a use case truly below the
    line, how often and when the running rule already alarms."""
    print(f"\n## The running week, looked at every hour (line {ACTION}; {reps} weeks per row; "
          f"{len(_ARRIVAL)} looks a week, answers in office hours)\n")
    print(f"| {'answers/wk':>10} | {'flagged':>7} | {'true mean':>9} | {'strict rule':>11} "
          f"| {'95 % at any look':>16} | {'first alarm, median hour':>24} |")
    worst = 0.0
    for index, volume in enumerate((150, 500, 2_000, 10_000)):
        for phi in (0.05, 0.20):
            for truth in (0.88, 0.90, 0.75):
                case = use_case(seed + 200 + index, flagged_share=phi, expert_mean=truth,
                                judge="strict", bias=0.0)
                strict_alarms = old_alarms = 0
                first: list[int] = []
                for _ in range(reps):
                    fired = old = False
                    for t, strata in enumerate(_running_sums(rng, case, volume)):
                        e = mean_from_sums(strata)
                        if (not old and not e.too_few and e.high is not None
                                and e.high < ACTION):
                            old = True
                        if not fired:
                            strict = mean_from_sums(strata, confidence=RUNNING_CONFIDENCE)
                            figure = Figure(strict.value, strict.low, strict.high, strict.n,
                                            strict.too_few, traffic_light(strict, ACTION))
                            if running_decision(figure).alarm:
                                fired = True
                                first.append(t + 1)
                        if fired and old:
                            break
                    strict_alarms += fired
                    old_alarms += old
                judge_mean = case.mean("judge")
                when = f"{int(np.median(first))}" if first else "-"
                print(f"| {volume:>10} | {phi:>7.0%} | {judge_mean:>9.3f} | "
                      f"{100 * strict_alarms / reps:>10.2f}% | {100 * old_alarms / reps:>15.2f}% "
                      f"| {when:>24} |")
                if judge_mean >= 0.875:
                    worst = max(worst, strict_alarms / reps)
    return worst


def bias_table(rng: np.random.Generator, reps: int, seed: int) -> float:
    """The bias alarm's test (`bias_beyond_tolerance`, tolerance 0.1) on reviews drawn from a
    judge whose true bias is the tolerance itself or half of it: how often it fires."""
    tolerance = 0.1
    print(f"\n## Bias alarm: share of checks that raise it (tolerance {tolerance}, {reps} checks "
          "per row; reviews drawn from a use case of 20 % flagged answers)\n")
    print(f"| {'judge':>7} | {'true bias':>9} | {'20 reviews':>10} | {'80 reviews':>10} |")
    worst = 0.0
    for index, (judge, bias) in enumerate(
        [("strict", 0.1), ("strict", 0.05), ("lenient", 0.1), ("lenient", 0.05)]
    ):
        case = use_case(seed + 100 + index, flagged_share=0.2, expert_mean=EXPERT_MEAN,
                        judge=judge, bias=bias)
        cells = []
        for n in (20, 80):
            fired = 0
            for _ in range(reps):
                flagged = int(rng.binomial(n, case.flagged_share))
                sums = []
                for h, k in ((0, flagged), (1, n - flagged)):
                    stratum = case.strata[h]
                    picked = rng.choice(stratum.p.size, size=k, p=stratum.p)
                    d = stratum.expert[picked] - stratum.judge[picked]
                    j = stratum.judge[picked]
                    sums.append(ReviewSums(
                        k, float(d.sum()), float(((d - d.mean()) ** 2).sum()) if k else 0.0,
                        float(j.sum()),
                        float(((j - j.mean()) * (d - d.mean())).sum()) if k else 0.0))
                fired += bias_beyond_tolerance(sizes=(2_000, 8_000), reviews=(sums[0], sums[1]),
                                               tolerance=tolerance).beyond
            cells.append(fired / reps)
            if bias < tolerance:
                worst = max(worst, fired / reps)
        print(f"| {judge:>7} | {bias:>9.2f} | {100 * cells[0]:>9.2f}% | {100 * cells[1]:>9.2f}% |")
    return worst


def _cusum_run_weeks(observations: np.ndarray, params: CusumParams) -> list[int]:
    """Weeks (0-based) of every alarm of the product's CUSUM over one run's observations."""
    result = bernoulli_cusum(observations.tolist(), params)
    return [i // BATCH for i in result.alarms]


def drift_table(rng: np.random.Generator, reps: int, seed: int) -> tuple[float, float]:
    history, horizon = 4, 100
    print(f"\n## Drift CUSUM: weeks between false alarms ({reps} runs × {horizon} weeks; p0 and "
          f"limit from {history} weeks of the use case's own reviews, {BATCH} reviews a week)\n")
    print(f"| {'true rate':>9} | {'p0 used (median)':>16} | {'limit (median)':>14} "
          f"| {'weeks/false alarm':>17} | {'chain at median p0, h':>21} "
          f"| {'old: p0=0.10 h=6':>16} |")
    worst_arl = math.inf
    fixed = CusumParams(0.10, 0.30, 6.0)
    for rate in (0.05, 0.10, 0.15, 0.20):
        alarms = fixed_alarms = 0
        p0s, limits, chain = [], [], []
        for _ in range(reps):
            past = int(rng.binomial(history * BATCH, rate))
            params = cusum_params_for(disagreements=past, reviews=history * BATCH)
            p0s.append(params.p0)
            limits.append(params.limit)
            stream = rng.random(horizon * BATCH) < rate
            alarms += len(_cusum_run_weeks(stream, params))
            fixed_alarms += len(_cusum_run_weeks(stream, fixed))
        # The chain's run length at the median parameters, for comparison.
        median = CusumParams(float(np.median(p0s)), float(np.median(p0s)) + 0.2,
                             float(np.median(limits)))
        chain.append(cusum_arl(median, rate) / BATCH)
        weeks = reps * horizon / max(alarms, 1)
        weeks_fixed = reps * horizon / max(fixed_alarms, 1)
        worst_arl = min(worst_arl, weeks)
        print(f"| {rate:>9.2f} | {np.median(p0s):>16.3f} | {np.median(limits):>14.2f} "
              f"| {weeks:>17.1f} | {chain[0]:>21.1f} | {weeks_fixed:>16.1f} |")

    print(f"\n## Drift detection: weeks from the drift to the first alarm ({reps} runs; "
          f"{history} weeks of history, 4 weeks watched before the drift; bias test: share of "
          f"runs in which the test against the tolerance 0.1 fires on the first 4 drifted "
          f"weeks)\n")
    print(f"| {'drift':<40} | {'within 1 wk':>11} | {'within 2':>8} | {'within 3':>8} "
          f"| {'within 6':>8} | {'median':>6} | {'bias test, 4 wk':>15} |")
    worst_detect = 1.0
    before = 4
    # (a) the disagreement rate itself rises.
    for rate in (0.05, 0.10, 0.20):
        for shift in (0.05, 0.10):
            delays = []
            for _ in range(reps):
                past = int(rng.binomial(history * BATCH, rate))
                params = cusum_params_for(disagreements=past, reviews=history * BATCH)
                stream = np.concatenate([rng.random(before * BATCH) < rate,
                                         rng.random(26 * BATCH) < rate + shift])
                late = [w - before for w in _cusum_run_weeks(stream, params) if w >= before]
                delays.append(late[0] + 1 if late else math.inf)
            _delay_row(f"disagreement {rate:.2f} → {rate + shift:.2f}", delays, None)
    # (b) the judge's scores drift (claims judged stricter), answers as in the coverage table.
    for index, (phi, bias, shift) in enumerate(((0.05, 0.02, 0.05), (0.05, 0.02, 0.10),
                                                 (0.20, 0.0, 0.10), (0.40, 0.05, 0.10))):
        base = use_case(seed + 200 + index, flagged_share=phi, expert_mean=EXPERT_MEAN,
                        judge="strict", bias=bias)
        drifted = use_case(seed + 200 + index, flagged_share=phi, expert_mean=EXPERT_MEAN,
                           judge="strict", bias=bias + shift)
        cases = [base] * (history + before) + [drifted] * 12
        sim = simulate(rng, cases, 2_000, reps)
        delays, tested = [], 0
        for r in range(reps):
            past = int(sim.disagreements[r, :history].sum())
            params = cusum_params_for(disagreements=past, reviews=history * BATCH)
            stream = np.concatenate([
                np.arange(BATCH) < sim.disagreements[r, w] for w in range(history, len(cases))
            ])
            late = [w - before for w in _cusum_run_weeks(stream, params) if w >= before]
            delays.append(late[0] + 1 if late else math.inf)
            span = range(history + before, history + before + 4)
            sizes = (int(sim.size[r, span, 0].sum()), int(sim.size[r, span, 1].sum()))
            test = bias_beyond_tolerance(sizes=sizes, reviews=_review_sums(sim, r, span),
                                              tolerance=0.1)
            tested += test.beyond
        rate = sim.disagreements[:, :history].mean() / BATCH
        label = f"judge {bias:.2f}→{bias + shift:.2f} ({rate:.2f} disagree), {phi:.0%} fl"
        _delay_row(label, delays, tested / reps)
        if shift >= 0.1:
            worst_detect = min(worst_detect, float(np.mean(np.array(delays) <= 3)))
    return worst_arl, worst_detect


def expert_drift_table(rng: np.random.Generator, reps: int, seed: int) -> None:
    history, before, after = 4, 4, 8
    volume, phi, bias, shift = 2_000, 0.20, 0.02, 0.10
    print(f"\n## Expert scale after a judge drift ({volume} answers/wk, {phi:.0%} flagged, judge "
          f"{bias:.2f} → {bias + shift:.2f} stricter from week {history + before + 1}; {reps} "
          f"runs; the pool's reviews lag a week; restart: the pool starts at the week whose "
          f"reviews raised the drift CUSUM; week 0 is the last before the drift)\n")
    print(f"| {'weeks since drift':>17} | {'cover, no restart':>17} | {'cover, restart':>14} "
          f"| {'width, restart':>14} | {'weeks pooled':>12} | {'judge interval':>14} |")
    base = use_case(seed + 300, flagged_share=phi, expert_mean=EXPERT_MEAN, judge="strict",
                    bias=bias)
    drifted = use_case(seed + 300, flagged_share=phi, expert_mean=EXPERT_MEAN,
                       judge="strict", bias=bias + shift)
    cases = [base] * (history + before) + [drifted] * after
    sim = simulate(rng, cases, volume, reps)
    start = history + before
    rows = {k: ([], [], [], [], []) for k in range(-1, after)}
    for r in range(reps):
        past = int(sim.disagreements[r, :history].sum())
        params = cusum_params_for(disagreements=past, reviews=history * BATCH)
        stream = np.concatenate([
            np.arange(BATCH) < sim.disagreements[r, w] for w in range(history, len(cases))
        ])
        alarms = [history + w for w in _cusum_run_weeks(stream, params)]
        strata = [_sums(sim, r, w) for w in range(len(cases))]
        for current in range(start - 1, len(cases)):
            # Alarms are known once their week's reviews are done: the week after. The first
            # alarm after the drift restarts the pool; the CUSUM is then re-based on the new
            # judge (not simulated), so later alarms of the old baseline do not count.
            first_late = [a for a in alarms if a >= start][:1]
            known = [a for a in alarms if a < start] + first_late
            known = [a for a in known if a <= current - 1]
            for restart, out in ((None, 0), (known[-1] if known else None, 1)):
                first = max(current - POOLED + 1, restart if restart is not None else 0)
                span = range(first, current + 1)
                x = expert_scale_by_week([strata[w] for w in span], _reviews_by_week(
                    sim, r, span, range(first, current)))
                truth = sim.truth_expert[r, span].sum() / sim.size[r, span].sum()
                row = rows[current - start]
                if x.value is None:
                    continue
                row[out].append(x.low <= truth <= x.high)
                if out:
                    row[2].append(x.high - x.low)
                    row[3].append(len(span))
            e = mean_from_sums(strata[current])
            truth = sim.truth_expert[r, current].sum() / sim.size[r, current].sum()
            rows[current - start][4].append(e.low <= truth <= e.high)
    for k, (plain, restarted, width, pooled, judged) in rows.items():
        print(f"| {k + 1:>17} | {100 * np.mean(plain):>16.1f}% "
              f"| {100 * np.mean(restarted):>13.1f}% | {np.mean(width):>14.3f} "
              f"| {np.mean(pooled):>12.1f} | {100 * np.mean(judged):>13.1f}% |")


def _delay_row(label: str, delays: list[float], tested: float | None) -> None:
    d = np.array(delays)
    shares = [100 * float(np.mean(d <= k)) for k in (1, 2, 3, 6)]
    median = float(np.median(d))
    test = f"{100 * tested:>14.1f}%" if tested is not None else f"{'-':>15}"
    print(f"| {label:<40} | " + " | ".join(f"{s:>7.1f}%" for s in shares)
          + f" | {median:>6.0f} | {test} |")


def causes_scenarios(rng: np.random.Generator, reps: int) -> list[str]:
    """Causes with curved similarity (issue 39, point 6): how often the adjusted regression
    advises a reranker or blames multi-part questions when only similarity acts, as a line, a
    step or an S-curve (bench/causes_sim.py). Returns the targets missed."""
    return causes_table(rng, reps)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="300 replications, a smoke run")
    parser.add_argument("--reps", type=int, default=None, help="replications per setting")
    parser.add_argument("--seed", type=int, default=20260601)
    parser.add_argument("--only", choices=("coverage", "small", "trend", "expert", "action",
                                            "running", "schedule", "drift", "drift-product",
                                            "expert-drift", "bias", "causes", "segments"),
                        default=None)
    parser.add_argument("--strict", action="store_true", help="exit 2 when a target is missed")
    args = parser.parse_args(argv)
    reps = args.reps or (300 if args.quick else 2_000)
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    missed: list[str] = []
    run: dict[str, Callable[[], None]] = {}

    def coverage() -> None:
        cells = coverage_table(rng, reps, args.seed)
        for kind in ("weekly", "pooled", "below", "expert"):
            values = [100 * c.coverage for c in cells if c.kind == kind]
            print(f"{kind}: {min(values):.1f}-{max(values):.1f} %")
        verdict = coverage_misses(cells)
        missed.extend(verdict.missed)
        for label, listed in (
                ("over 96 % by the count's discreteness", verdict.discrete),
                ("outside 94-96 % within two Monte Carlo standard errors", verdict.noise),
                ("the smallest setting over 96 % (its target is ≥ 93 %)",
                 verdict.smallest_over)):
            if listed:
                print(f"{label}: " + "; ".join(listed))

    def small() -> None:
        missed.extend(small_table(rng, max(reps // 2, 100), args.seed))

    def trend() -> None:
        missed.extend(trend_table(rng, max(reps // 4, 100), args.seed))

    def action() -> None:
        worst = action_table(rng, reps, args.seed)
        if worst > 0.02:
            missed.append(f"false action alarms {100 * worst:.2f} % of healthy weeks")

    def running() -> None:
        worst = running_table(rng, max(reps // 4, 100), args.seed)
        if worst > 0.02:
            missed.append(f"the running week called red in {100 * worst:.2f} % of healthy weeks "
                          "over its hourly looks")

    def drift() -> None:
        arl, detect = drift_table(rng, max(reps // 2, 100), args.seed)
        if arl < 30:
            missed.append(f"{arl:.1f} weeks between false drift alarms")
        if detect < 0.9:
            missed.append(f"a 0.1 judge drift found within 3 weeks in {100 * detect:.0f} %")

    def drift_product() -> None:
        # The drift check as the product runs it (issue 39, point 5).
        weeks, found = drift_product_table(rng, max(reps // 10, 50))
        if weeks < TARGET_WEEKS:
            missed.append(f"{weeks:.0f} weeks between false drift alarms as the product runs "
                          f"the check (target ≥ {TARGET_WEEKS:.0f})")
        if found < TARGET_FOUND:
            missed.append(f"a 0.10 shift found within 3 weeks in {100 * found:.0f} % of runs as "
                          f"the product runs the check (target ≥ {100 * TARGET_FOUND:.0f} %; "
                          "20 reviews a week allow no more at that false-alarm rate: the "
                          "frontier above)")

    def expert_drift() -> None:
        expert_drift_table(rng, max(reps // 2, 100), args.seed)

    def expert() -> None:
        # The experts' scale where users live (issue 39, point 3).
        missed.extend(expert_sim.expert_table(rng, max(reps // 2, 100), args.seed))

    def bias() -> None:
        worst = bias_table(rng, 5 * reps, args.seed)
        if worst > 0.01:
            missed.append(f"the bias alarm at half the tolerance in {100 * worst:.2f} % of checks")

    def causes() -> None:
        missed.extend(causes_scenarios(rng, max(reps // 4, 100)))

    def schedule() -> None:
        missed.extend(schedule_table(rng, max(reps, 100), args.seed))

    def segments() -> None:
        from bench.segment_sim import segment_table  # issue 40, point 7

        missed.extend(segment_table(rng, max(reps // 4, 100)))

    run = {"coverage": coverage, "small": small, "trend": trend, "expert": expert,
           "action": action, "running": running, "schedule": schedule, "drift": drift,
           "drift-product": drift_product, "expert-drift": expert_drift, "bias": bias,
           "causes": causes, "segments": segments}
    for name, step in run.items():
        if args.only in (None, name):
            step()
    print(f"\nseed {args.seed}, {reps} replications, {time.monotonic() - started:.0f} s")
    print("targets missed: " + ("; ".join(missed) if missed else "none"))
    return 2 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
