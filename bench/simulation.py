"""The simulation core of the statistics benchmark: use cases, their weeks as the product
samples them, the sums the product's estimators read, and a tally of intervals against the
truth. `bench/statistics.py` and its tables in `bench/*_sim.py` build on it.

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dashboard.domain.expert_scale import ReviewSums
from dashboard.domain.statistics.cells import StratumSums

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
EXPERT_MEAN = 0.90  # the experts' mean of most tables' use cases
POOLED = 4  # weeks a pooled view takes


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


def _claims(rng: np.random.Generator, n: int, clean: bool, flagged: bool
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Expert labels (0, 1, 2 half-points) of n answers' claims, and each claim's answer
    (claims per answer, each claim's answer, its label, and two uniform draws per claim)."""
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
        ordered = sorted(pairs)
        p = np.array([pairs[k] for k in ordered])
        strata.append(Stratum(np.array([k[0] for k in ordered]),
                              np.array([k[1] for k in ordered]), p / p.sum()))
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


# --- the running week -----------------------------------------------------------------------


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


# --- intervals against the truth ------------------------------------------------------------


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
