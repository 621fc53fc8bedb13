"""Statistics benchmark: are the dashboard's intervals and alarms right? Proof by simulation.

Weeks of a use case are simulated the way the product samples them, and the product's own
functions (`dashboard.domain.statistics`, `expert_scale`, `alarms`, `review.domain.calibration`)
estimate them; the tables say how often the intervals cover the truth, how biased and how wide
they are, how often the alarms fire without cause and how quickly they find a real drift.

The use case:

* a week has Poisson(volume) answers, 150 to 50,000; a share of 5-40 % is flagged by tier 1;
* an answer has 1 + Poisson(2.5) claims (3 % abstain: no claims, score 1.0); most answers have
  every claim supported (score exactly 1.0), the rest mix supported, partly (0.5) and
  unsupported claims - flagged answers more of the latter - so scores mix 1.0 and partial
  values; the expert's labels are the truth;
* the judge labels the same claims: a little noise (3 % of claims one label off either way)
  and a bias: strict (a claim moved one label down with probability e) or lenient (a partly
  or unsupported claim judged supported with probability e), e chosen so that the mean judge
  score is 0.02-0.1 below (above) the experts';
* tier 2 judges every flagged answer and a random 3 % of all answers (the hash draw,
  independent of the flag); 2 % of judge runs fail and stay unjudged;
* tier 3 reviews 20 answers a week, drawn at random from the judged answers in the random
  sample, topped up with flagged answers drawn at random when there are fewer than 20.

Each setting's answers are drawn from a fixed distribution over (expert score, judge score)
per stratum, as counts per score pair (multinomial, binomial thinning, multivariate
hypergeometric draws for the review batch), so a week of 50,000 answers costs as little as one
of 150 and thousands of weeks per setting take seconds. The truth of a week is its own
answers' mean (on the judge's scale for the judge-scale figures, the experts' for the
expert-scale one), which is what the dashboard claims to estimate.

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

from dashboard.domain.alarms import action_decision, running_decision
from dashboard.domain.expert_scale import ReviewSums
from dashboard.domain.expert_weeks import expert_scale_by_week
from dashboard.domain.headline import RUNNING_CONFIDENCE, Figure
from dashboard.domain.statistics.cells import StratumSums
from dashboard.domain.statistics.estimates import mean_from_sums, pooled_mean, share_from_sums
from dashboard.domain.statistics.precision import traffic_light
from review.domain.calibration import bias_beyond_tolerance
from review.domain.cusum import CusumParams, bernoulli_cusum, cusum_arl, cusum_params_for

SAMPLE_RATE = 0.03
JUDGE_FAILURES = 0.02
ACTION = 0.85
BATCH = 20
NOISE = 0.03  # claims the judge labels one step off either way, whatever its bias
ABSTAIN = 0.03
# Label shares of a claim of an answer that is not all supported: (unsupported, partly,
# supported). Flagged answers are worse.
DIRTY = {False: (0.2, 0.1, 0.7), True: (0.45, 0.1, 0.45)}
POOL = 60_000  # answers per stratum and kind behind each setting's score distribution


# --- the use case's answers -----------------------------------------------------------------


@dataclass(frozen=True)
class Stratum:
    """A stratum's answers as a distribution over (expert score, judge score) pairs."""

    expert: np.ndarray  # per category
    judge: np.ndarray
    p: np.ndarray  # probability of each category


@dataclass(frozen=True)
class UseCase:
    flagged_share: float
    strata: tuple[Stratum, Stratum]  # flagged, unflagged

    def mean(self, scale: str) -> float:
        phi = self.flagged_share
        f, u = self.strata
        return float(phi * (f.p @ getattr(f, scale)) + (1 - phi) * (u.p @ getattr(u, scale)))


def _claims(rng: np.random.Generator, n: int, clean: bool, flagged: bool):
    """Expert labels (0, 1, 2 half-points) of n answers' claims, and each claim's answer."""
    m = 1 + rng.poisson(2.5, n)
    m[rng.random(n) < ABSTAIN] = 0
    owner = np.repeat(np.arange(n), m)
    if clean:
        labels = np.full(owner.size, 2)
    else:
        labels = rng.choice(3, size=owner.size, p=DIRTY[flagged])
    return m, owner, labels, rng.random(owner.size), rng.random(owner.size)


def _scores(m, owner, labels, u, v, mode: str, e: float) -> np.ndarray:
    judged = labels.copy()
    if mode == "strict":
        move = u < e
        judged[move] = np.maximum(judged[move] - 1, 0)
    else:
        move = (u < e) & (judged < 2)
        judged[move] = 2
    noise = ~move & (v < NOISE)
    judged[noise] = np.clip(judged[noise] + np.where(v[noise] < NOISE / 2, -1, 1), 0, 2)
    points = np.bincount(owner, judged / 2, minlength=m.size)
    return np.where(m > 0, points / np.maximum(m, 1), 1.0)


def use_case(seed: int, *, flagged_share: float, expert_mean: float, judge: str,
             bias: float) -> UseCase:
    """A use case whose expert scores average ``expert_mean`` and whose judge is ``judge``
    ("strict"/"lenient") by ``bias`` on average (e solved by bisection, common random
    numbers). Flagged answers average 0.1-0.25 below the unflagged ones."""
    rng = np.random.default_rng(seed)
    gap = 0.25 if flagged_share <= 0.1 else 0.15 if flagged_share <= 0.25 else 0.10
    targets = {True: expert_mean - (1 - flagged_share) * gap,
               False: expert_mean + flagged_share * gap}
    draws = {(f, c): _claims(rng, POOL, c, f) for f in (True, False) for c in (True, False)}
    expert = {k: _scores(*d, "strict", 0.0) for k, d in draws.items()}
    # Expert labels without judge noise: the noise of _scores at e=0 is the judge's only.
    for k, (m, owner, labels, _, _) in draws.items():
        points = np.bincount(owner, labels / 2, minlength=m.size)
        expert[k] = np.where(m > 0, points / np.maximum(m, 1), 1.0)
    clean_share = {}
    for f in (True, False):
        dirty_mean = expert[(f, False)].mean()
        clean_share[f] = min(1.0, max(0.0, (targets[f] - dirty_mean) / (1 - dirty_mean)))

    def mean_difference(e: float) -> float:
        out = 0.0
        for f, w in ((True, flagged_share), (False, 1 - flagged_share)):
            for c, share in ((True, clean_share[f]), (False, 1 - clean_share[f])):
                out += w * share * (expert[(f, c)] - _scores(*draws[(f, c)], judge, e)).mean()
        return out

    wanted = bias if judge == "strict" else -bias
    low, high = 0.0, 1.0
    for _ in range(30):
        middle = (low + high) / 2
        if (mean_difference(middle) < wanted) == (judge == "strict"):
            low = middle
        else:
            high = middle
    e = (low + high) / 2
    strata = []
    for f in (True, False):
        pairs: dict[tuple[float, float], float] = {}
        for c, share in ((True, clean_share[f]), (False, 1 - clean_share[f])):
            y = np.round(expert[(f, c)], 9)
            j = np.round(_scores(*draws[(f, c)], judge, e), 9)
            keys, counts = np.unique(np.stack([y, j]), axis=1, return_counts=True)
            for (a, b), k in zip(keys.T.tolist(), counts.tolist(), strict=True):
                pairs[(a, b)] = pairs.get((a, b), 0.0) + share * k / POOL
        keys = sorted(pairs)
        p = np.array([pairs[k] for k in keys])
        strata.append(Stratum(np.array([k[0] for k in keys]), np.array([k[1] for k in keys]),
                              p / p.sum()))
    return UseCase(flagged_share, (strata[0], strata[1]))


# --- weeks as the product samples them ------------------------------------------------------


@dataclass
class Weeks:
    """R replications × W weeks; per stratum h (0 flagged, 1 unflagged) where it has one."""

    size: np.ndarray  # (R, W, 2)
    n: np.ndarray  # judged
    total: np.ndarray  # Σ judge score
    square: np.ndarray  # Σ judge score²
    below: np.ndarray  # judged answers with judge score < ACTION
    short: np.ndarray  # judged answers with judge score below 1.0
    expert_total: np.ndarray  # Σ expert score of the judged answers (the count reference's)
    expert_short: np.ndarray  # judged answers with expert score below 1.0
    truth_judge: np.ndarray  # (R, W, 2) Σ over all answers of the stratum
    truth_expert: np.ndarray
    truth_below: np.ndarray
    reviews: np.ndarray  # (R, W, 2) reviewed answers of the week's answers
    review_total: np.ndarray  # Σ (expert − judge)
    review_square: np.ndarray
    review_cube: np.ndarray  # Σ (expert − judge)³
    review_judge: np.ndarray  # Σ judge score of the reviewed answers
    review_jd: np.ndarray  # Σ judge score × (expert − judge)
    disagreements: np.ndarray  # (R, W) reviewed answers on different sides of ACTION


def _hypergeometric(rng: np.random.Generator, counts: np.ndarray, draws: np.ndarray):
    """Multivariate hypergeometric draw per row: ``draws`` of the row's ``counts`` items."""
    out = np.zeros_like(counts)
    left = counts.sum(axis=1)
    wanted = np.minimum(draws, left)
    for k in np.flatnonzero(counts.any(axis=0)):
        c = counts[:, k]
        left = left - c
        x = rng.hypergeometric(c, left, wanted)
        out[:, k] = x
        wanted = wanted - x
    return out


def simulate(rng: np.random.Generator, cases: Sequence[UseCase], volume: int, reps: int,
             rate: float = SAMPLE_RATE) -> Weeks:
    """One week per entry of ``cases`` (the use case may drift from week to week)."""
    weeks = len(cases)
    shape = (reps, weeks, 2)
    arrays = {name: np.zeros(shape) for name in (
        "size", "n", "total", "square", "below", "short", "expert_total", "expert_short",
        "truth_judge", "truth_expert", "truth_below", "reviews", "review_total",
        "review_square", "review_cube", "review_judge", "review_jd")}
    disagreements = np.zeros((reps, weeks))
    for w, case in enumerate(cases):
        total = rng.poisson(volume, reps)
        flagged = rng.binomial(total, case.flagged_share)
        counts, judged, in_random = [], [], []
        for h, size in ((0, flagged), (1, total - flagged)):
            s = case.strata[h]
            c = rng.multinomial(size, s.p)
            if h == 0:
                j = rng.binomial(c, 1 - JUDGE_FAILURES)
                r = rng.binomial(j, rate)
            else:
                j = rng.binomial(c, rate * (1 - JUDGE_FAILURES))
                r = j
            counts.append(c)
            judged.append(j)
            in_random.append(r)
            below = (s.judge < ACTION).astype(float)
            arrays["size"][:, w, h] = size
            arrays["n"][:, w, h] = j.sum(axis=1)
            arrays["total"][:, w, h] = j @ s.judge
            arrays["square"][:, w, h] = j @ (s.judge**2)
            arrays["below"][:, w, h] = j @ below
            arrays["short"][:, w, h] = j @ (s.judge < 1.0).astype(float)
            arrays["expert_total"][:, w, h] = j @ s.expert
            arrays["expert_short"][:, w, h] = j @ (s.expert < 1.0).astype(float)
            arrays["truth_judge"][:, w, h] = c @ s.judge
            arrays["truth_expert"][:, w, h] = c @ s.expert
            arrays["truth_below"][:, w, h] = c @ below
        # The review batch: random-sample answers first, flagged top-ups when short.
        pool = np.concatenate(in_random, axis=1)
        picked = _hypergeometric(rng, pool, np.full(reps, BATCH))
        short = BATCH - picked.sum(axis=1)
        top = _hypergeometric(rng, judged[0] - in_random[0], short)
        k0 = case.strata[0].p.size
        reviewed = (picked[:, :k0] + top, picked[:, k0:])
        for h in (0, 1):
            s = case.strata[h]
            d = s.expert - s.judge
            arrays["reviews"][:, w, h] = reviewed[h].sum(axis=1)
            arrays["review_total"][:, w, h] = reviewed[h] @ d
            arrays["review_square"][:, w, h] = reviewed[h] @ (d * d)
            arrays["review_cube"][:, w, h] = reviewed[h] @ (d**3)
            arrays["review_judge"][:, w, h] = reviewed[h] @ s.judge
            arrays["review_jd"][:, w, h] = reviewed[h] @ (s.judge * d)
            disagree = ((s.expert < ACTION) != (s.judge < ACTION)).astype(float)
            disagreements[:, w] += reviewed[h] @ disagree
    return Weeks(**arrays, disagreements=disagreements)


def _sums(weeks: Weeks, r: int, w: int, values: str = "judge") -> list[StratumSums]:
    out = []
    for h in (0, 1):
        n = int(weeks.n[r, w, h])
        if values == "judge":
            total = float(weeks.total[r, w, h])
            square = float(weeks.square[r, w, h])
        else:
            total = float(weeks.below[r, w, h])
            square = total
        sq = max(0.0, square - total * total / n) if n else 0.0
        out.append(StratumSums(int(weeks.size[r, w, h]), n, min(total, n), min(sq, n / 4),
                               drawn=h == 1))
    return out


def _review_sums(weeks: Weeks, r: int, span: range) -> tuple[ReviewSums, ReviewSums]:
    out = []
    for h in (0, 1):
        n = int(weeks.reviews[r, span, h].sum())
        total = float(weeks.review_total[r, span, h].sum())
        square = float(weeks.review_square[r, span, h].sum())
        sq = max(0.0, square - total * total / n) if n else 0.0
        judged = float(weeks.review_judge[r, span, h].sum())
        cross = float(weeks.review_jd[r, span, h].sum()) - judged * total / n if n else 0.0
        mean = total / n if n else 0.0
        # Σ(d − d̄)³ = Σd³ − 3d̄·Σd² + 2n·d̄³
        cube = float(weeks.review_cube[r, span, h].sum()) - 3 * mean * square + 2 * n * mean**3
        sq = min(sq, float(n))
        out.append(ReviewSums(n, max(-n, min(n, total)), sq,
                              max(0.0, min(float(n), judged)),
                              max(-n / 2, min(n / 2, cross)), max(-2 * sq, min(2 * sq, cube))))
    return out[0], out[1]


def _reviews_by_week(weeks: Weeks, r: int, span: range, reviewed: range
                     ) -> list[tuple[ReviewSums, ReviewSums]]:
    """Each week's reviews over ``span``, none for a week outside ``reviewed`` (its answers are
    reviewed the week after)."""
    none = (ReviewSums(0, 0.0, 0.0), ReviewSums(0, 0.0, 0.0))
    return [_review_sums(weeks, r, range(w, w + 1)) if w in reviewed else none for w in span]


# --- tables ---------------------------------------------------------------------------------


@dataclass
class Interval:
    covered: list[bool]
    error: list[float]
    width: list[float]
    missing: int = 0
    above: int = 0  # truth above the interval
    below: int = 0

    def add(self, value, low, high, truth) -> None:
        if value is None:
            self.missing += 1
            return
        self.covered.append(low <= truth <= high)
        self.above += truth > high
        self.below += truth < low
        self.error.append(value - truth)
        self.width.append(high - low)

    def row(self) -> str:
        n = len(self.covered)
        if not n:
            return f"{'-':>7} {'-':>8} {'-':>6} {'-':>9}"
        cover = 100 * sum(self.covered) / n
        return (f"{cover:6.1f}% {np.mean(self.error):+8.4f} {np.mean(self.width):6.3f} "
                f"{100 * self.above / n:4.1f}/{100 * self.below / n:<4.1f}")

    def coverage(self) -> float:
        return sum(self.covered) / len(self.covered) if self.covered else math.nan


def new_interval() -> Interval:
    return Interval([], [], [])


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
EXPERT_MEAN = 0.90
POOLED = 4


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


# Hourly looks at the running week: the weekday and the hour of day weigh when answers arrive
# (office hours on working days, a trickle at night and at the weekend), so the looks early in
# the week see few answers and the check runs 168 times.
_DAY_WEIGHT = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.3, 0.3])
_HOUR_WEIGHT = np.where((np.arange(24) >= 8) & (np.arange(24) < 18), 1.0, 0.2)
_ARRIVAL = np.outer(_DAY_WEIGHT, _HOUR_WEIGHT).ravel() / np.outer(_DAY_WEIGHT, _HOUR_WEIGHT).sum()


def _running_sums(rng: np.random.Generator, case: UseCase, volume: int
                  ) -> list[list[StratumSums]]:
    """One running week of ``case`` as the hourly check sees it: the [flagged, unflagged]
    strata of the answers arrived by the end of each of its RUNNING_LOOKS hours."""
    looks = len(_ARRIVAL)
    columns = []
    for h, share in ((0, case.flagged_share), (1, 1 - case.flagged_share)):
        stratum = case.strata[h]
        size = rng.poisson(volume * share * _ARRIVAL)  # answers per hour
        rate = (1 - JUDGE_FAILURES) if h == 0 else SAMPLE_RATE * (1 - JUDGE_FAILURES)
        judged = rng.binomial(size, rate)
        total = np.zeros(looks)
        square = np.zeros(looks)
        for hour in np.flatnonzero(judged):
            scores = stratum.judge[rng.choice(stratum.p.size, judged[hour], p=stratum.p)]
            total[hour] = scores.sum()
            square[hour] = (scores * scores).sum()
        columns.append((np.cumsum(size), np.cumsum(judged), np.cumsum(total),
                        np.cumsum(square)))
    out = []
    for t in range(looks):
        strata = []
        for h, (size, n, total, square) in enumerate(columns):
            k = int(n[t])
            sq = max(0.0, float(square[t]) - float(total[t]) ** 2 / k) if k else 0.0
            strata.append(StratumSums(int(size[t]), k, min(float(total[t]), k), min(sq, k / 4),
                                      drawn=h == 1))
        out.append(strata)
    return out


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
    from bench.causes_sim import causes_table

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
        from bench.small_sim import small_table

        missed.extend(small_table(rng, max(reps // 2, 100), args.seed))

    def trend() -> None:
        from bench.trend_sim import trend_table

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
        from bench.drift_sim import TARGET_FOUND, TARGET_WEEKS, drift_product_table

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
        from bench import expert_sim  # the experts' scale where users live (issue 39, point 3)

        missed.extend(expert_sim.expert_table(sys.modules[__name__], rng,
                                              max(reps // 2, 100), args.seed))

    def bias() -> None:
        worst = bias_table(rng, 5 * reps, args.seed)
        if worst > 0.01:
            missed.append(f"the bias alarm at half the tolerance in {100 * worst:.2f} % of checks")

    def causes() -> None:
        missed.extend(causes_scenarios(rng, max(reps // 4, 100)))

    def schedule() -> None:
        from bench.schedule_sim import schedule_table

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
