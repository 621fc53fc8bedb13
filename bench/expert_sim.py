"""bench/statistics.py --only expert: the experts' scale where users live (issue 39, point 3).

Pools of four weeks (five where a week after is shown) simulated by bench/simulation.py's
`simulate`, one week at a time so that each week has its own volume and judge. A week's answers
are reviewed the week after: the pool's newest week has no review. Two estimators on the same
pools:

* today's (`expert_scale.expert_scale`): the pool's reviews as one sample, the pool restarted at
  a drift alarm only (none here);
* the product's (`expert_weeks.expert_scale_by_week`): the correction per week and stratum,
  weighted like the judge's part, the unreviewed week carried by the reviewed ones, the pool
  restarted at a judge change.

Each estimates its pool's experts' mean (the truth: the mean expert score of all the pool's
answers, each week by its volume). A pool whose estimator gives no value (no review since the
restart) counts under "none": the page then leads with the judge's scale.

Targets (the issue's): coverage 94-96 %, neither tail (truth above / below the interval) over
3.5 %. A cell outside by no more than two Monte Carlo standard errors is listed, not missed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench.simulation import (
    EXPERT_MEAN,
    Weeks,
    _review_sums,
    _reviews_by_week,
    _sums,
    simulate,
    use_case,
)
from dashboard.domain.expert_scale import expert_scale
from dashboard.domain.expert_weeks import expert_scale_by_week

TAIL = 0.035
MONTE_CARLO_ERRORS = 2.0


@dataclass(frozen=True)
class Scenario:
    group: str
    name: str
    volumes: tuple[int, ...]  # answers a week, oldest first; the last is the pool's newest
    flagged: float
    judges: tuple[tuple[str, float], ...]  # the judge (kind, bias) of each week
    restart: int | None = None  # the week of a judge change (the product restarts there)


@dataclass
class Tally:
    covered: int = 0
    above: int = 0
    below: int = 0
    none: int = 0
    error: list[float] = field(default_factory=list)
    width: list[float] = field(default_factory=list)

    def add(self, x: Any, truth: float) -> None:
        if x.value is None or x.too_few:
            self.none += 1
            return
        self.covered += x.low <= truth <= x.high
        self.above += truth > x.high
        self.below += truth < x.low
        self.error.append(x.value - truth)
        self.width.append(x.high - x.low)

    @property
    def n(self) -> int:
        return len(self.error)

    def row(self) -> str:
        if not self.n:
            return f"{'-':>6} {'-':>8} {'-':>6} {'-':>9} {100:>4.0f}%"
        return (f"{100 * self.covered / self.n:5.1f}% {np.mean(self.error):+8.4f} "
                f"{np.mean(self.width):6.3f} {100 * self.above / self.n:4.1f}/"
                f"{100 * self.below / self.n:<4.1f} "
                f"{100 * self.none / (self.n + self.none):>4.0f}%")

    def misses(self) -> tuple[list[str], list[str]]:
        """(missed, within the Monte Carlo error) against 94-96 % and the 3.5 % tails."""
        if not self.n:
            return [], []
        se = math.sqrt(0.95 * 0.05 / self.n)
        tail_se = math.sqrt(TAIL * (1 - TAIL) / self.n)
        cover = self.covered / self.n
        out: tuple[list[str], list[str]] = ([], [])
        checks = [(0.94 - cover, se, f"covers {100 * cover:.1f} %"),
                  (cover - 0.96, se, f"covers {100 * cover:.1f} %")]
        for label, count in (("above", self.above), ("below", self.below)):
            checks.append((count / self.n - TAIL, tail_se,
                           f"truth {label} in {100 * count / self.n:.1f} %"))
        for excess, error, text in checks:
            if excess > MONTE_CARLO_ERRORS * error:
                out[0].append(text)
            elif excess > 0:
                out[1].append(text)
        return out


def scenarios() -> list[Scenario]:
    out = []
    # Uneven weekly volume (4× in two of four weeks) and a judge change in weeks 3-4.
    for volume, phi, before, after in ((500, 0.20, ("strict", 0.02), ("lenient", 0.05)),
                                       (2_000, 0.05, ("strict", 0.02), ("strict", 0.10)),
                                       (2_000, 0.20, ("lenient", 0.02), ("strict", 0.05)),
                                       (10_000, 0.10, ("strict", 0.05), ("lenient", 0.05))):
        for busy, label in (((1, 1, 4, 4), "busy 3-4"), ((4, 4, 1, 1), "busy 1-2")):
            out.append(Scenario(
                "uneven volume, judge change in weeks 3-4",
                f"{volume}/wk {label} {phi:.0%} fl {before[0][:3]} {before[1]:.2f}→"
                f"{after[0][:3]} {after[1]:.2f}",
                tuple(volume * b for b in busy), phi, (before, before, after, after), 2))
    # A judge change in the newest week (not yet reviewed), and the week after.
    for volume, phi, before, after in ((500, 0.20, ("strict", 0.02), ("lenient", 0.05)),
                                       (2_000, 0.05, ("strict", 0.02), ("strict", 0.10)),
                                       (10_000, 0.20, ("lenient", 0.02), ("strict", 0.05))):
        name = (f"{volume}/wk {phi:.0%} fl {before[0][:3]} {before[1]:.2f}→{after[0][:3]} "
                f"{after[1]:.2f}")
        out.append(Scenario("judge change in the newest week", f"{name}, as it ends",
                            (volume,) * 4, phi, (before,) * 3 + (after,), 3))
        out.append(Scenario("judge change in the newest week", f"{name}, a week later",
                            (volume,) * 5, phi, (before,) * 3 + (after,) * 2, 3))
    # In control, ≥ 20 % flagged: no wider than needed.
    for volume, phi, judge, bias in ((150, 0.20, "strict", 0.0), (150, 0.40, "lenient", 0.02),
                                     (500, 0.20, "strict", 0.0), (500, 0.40, "strict", 0.02),
                                     (2_000, 0.20, "lenient", 0.05), (2_000, 0.40, "strict", 0.0),
                                     (10_000, 0.20, "strict", 0.0),
                                     (10_000, 0.40, "lenient", 0.02),
                                     (50_000, 0.20, "strict", 0.0)):
        out.append(Scenario("in control, ≥ 20 % flagged",
                            f"{volume}/wk {phi:.0%} fl {judge[:3]} {bias:.2f}",
                            (volume,) * 4, phi, ((judge, bias),) * 4))
    # A strict judge at ≥ 2,000 answers a week: the tails.
    for volume, phi, bias in ((2_000, 0.05, 0.05), (2_000, 0.10, 0.10), (10_000, 0.05, 0.02),
                              (10_000, 0.10, 0.05), (10_000, 0.20, 0.10), (50_000, 0.05, 0.05),
                              (50_000, 0.20, 0.10)):
        out.append(Scenario("strict judge, ≥ 2,000 answers a week",
                            f"{volume}/wk {phi:.0%} fl str {bias:.2f}",
                            (volume,) * 4, phi, (("strict", bias),) * 4))
    return out


def expert_table(rng: np.random.Generator, reps: int, seed: int) -> list[str]:
    """Print the table; return the product's targets missed."""
    print(f"\n## The experts' scale where users live ({reps} pools a row; truth above/below in "
          "%; none: pools without an experts' figure, the page shows the judge's)\n")
    head = f"{'cover':>6} {'bias':>8} {'width':>6} {'abv/blw':>9} {'none':>5}"
    print(f"| {'scenario':<44} | today: reviews pooled {head} | per week and stratum {head} |")
    missed: list[str] = []
    listed: list[str] = []
    group = None
    cases: dict[tuple[tuple[str, float], float], Any] = {}
    for s in scenarios():
        if s.group != group:
            group = s.group
            print(f"| **{group}** | | |")
        for judge in sorted(set(s.judges)):  # a set of str: its order varies by hash seed
            if (judge, s.flagged) not in cases:
                cases[judge, s.flagged] = use_case(
                    seed + 500 + len(cases), flagged_share=s.flagged,
                    expert_mean=EXPERT_MEAN, judge=judge[0], bias=judge[1])
        parts = [simulate(rng, [cases[j, s.flagged]], v, reps)
                 for v, j in zip(s.volumes, s.judges, strict=True)]
        sim = Weeks(**{k: np.concatenate([getattr(p, k) for p in parts], axis=1)
                             for k in vars(parts[0])})
        today, product = Tally(), Tally()
        current = len(s.volumes) - 1
        span = range(current - 3, current + 1)
        first = span[0] if s.restart is None else max(span[0], s.restart)
        mine = range(first, current + 1)
        for r in range(reps):
            strata = [_sums(sim, r, w) for w in range(len(s.volumes))]
            # Reviews lag a week: the newest week has none.
            old = expert_scale([strata[w] for w in span],
                               _review_sums(sim, r, range(span[0], current)))
            today.add(old, _truth(sim, r, span))
            new = expert_scale_by_week([strata[w] for w in mine], _reviews_by_week(
                sim, r, mine, range(first, current)))
            product.add(new, _truth(sim, r, mine))
        print(f"| {s.name:<44} | {today.row()} | {product.row()} |")
        bad, near = product.misses()
        missed += [f"{s.name}: " + ", ".join(bad)] if bad else []
        listed += [f"{s.name}: " + ", ".join(near)] if near else []
    if listed:
        print("\nwithin two Monte Carlo standard errors of a target: " + "; ".join(listed))
    return [f"experts' scale {m}" for m in missed]


def _truth(sim: Any, r: int, span: Sequence[int]) -> float:
    return float(sim.truth_expert[r, list(span)].sum() / sim.size[r, list(span)].sum())
