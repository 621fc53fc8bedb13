"""Segments (issue 40, point 7): are segment differences called only where they exist?
`bench/statistics.py --only segments` prints the table.

A use case's answers come from K segments (2-20 generator models, say) of uneven volume (Zipf
shares); a share is flagged by tier 1 and judged in full, and a 3 % hash draw of all answers is
judged too. An answer's score is 1.0 or a partial value; flagged answers fall short more often.
Under the null every segment has the same score distribution; under the alternative one of two
models is 0.1 worse in both strata. The product's `segments.breakdown` takes four weeks and
compares every segment with the rest at a Bonferroni-corrected level; "called" means at least
one difference holds (its corrected interval excludes 0).

Targets: with no true difference, a difference called in ≤ 5 % of use cases whatever the number
of segments; a true difference of 0.1 between two models at 500 answers a week found (the worse
model's difference holds, with the right sign) in ≥ 90 %.

The power rests on the random sample: at 500 answers a week and the product's 3 % default, two
models have about 7 random judged answers each a week. The second table is the frontier over the
window and the sample rate; the page says, for a grey segment, the rate that would decide it.

Also in uneven weeks: a week of double traffic, a gradual switch of model (the volume moving
from one model to the other over the window, no true difference), and a sample rate that
changes within the window.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from dashboard.domain.segments import Tally, breakdown, changes

WEEKS = 8  # the page's segments and causes window (dashboard/selectors/weeks.CAUSES_WEEKS)
RATE = 0.03
THRESHOLD = 0.8
PARTIAL = np.array([0.0, 0.25, 0.5, 0.75])
# (P(score 1.0) in the flagged stratum, in the unflagged one); a partial score is uniform over
# PARTIAL (mean 0.375): the mean of a stratum is p + (1 − p)·0.375.
CLEAN = (0.55, 0.93)
FALSE_CALLS = 0.05
FOUND = 0.90


def _clean_for_drop(p: float, drop: float) -> float:
    """P(1.0) that lowers the stratum's mean by `drop` (mean = p + (1 − p)·0.375)."""
    return max(0.0, p - drop / (1 - 0.375))


def _scores(rng: np.random.Generator, n: int, clean: float) -> np.ndarray:
    out = np.ones(n)
    short = rng.random(n) >= clean
    out[short] = rng.choice(PARTIAL, size=int(short.sum()))
    return out


def _week(
    rng: np.random.Generator, volume: int, flag_share: float, rate: float,
    cleans: tuple[float, float],
) -> Tally:
    n = rng.poisson(volume)
    flagged = rng.binomial(n, flag_share)
    sizes = (int(flagged), int(n - flagged))
    judged_flagged = rng.binomial(sizes[0], 0.98)  # 2 % of runs fail
    judged_unflagged = rng.binomial(sizes[1], rate * 0.98)
    scores = (
        Counter(_scores(rng, int(judged_flagged), cleans[0]).tolist()),
        Counter(_scores(rng, int(judged_unflagged), cleans[1]).tolist()),
    )
    return Tally.of(sizes, (dict(scores[0]), dict(scores[1])), THRESHOLD)


def _run(
    rng: np.random.Generator, *, k: int, volume: int, flag_share: float, drop: float,
    shape: str = "steady", weeks: int = WEEKS, rate: float = RATE,
) -> tuple[bool, bool]:
    """One use case over WEEKS weeks: (any difference called, the worse segment's called with
    the right sign). `drop`: how much worse segment 0 is (0: the null)."""
    shares = 1 / np.arange(1, k + 1)
    shares = shares / shares.sum() if k > 2 else np.full(k, 1 / k)
    segments: dict[str, list[Tally]] = {f"m{i}": [] for i in range(k)}
    whole: list[Tally] = []
    base = rate
    for w in range(weeks):
        week_volume = volume * (2 if shape == "double" and w == weeks - 1 else 1)
        rate = base * (3 if shape == "rate" and w >= weeks // 2 else 1)
        week_shares = shares
        if shape == "switch":
            moved = (w + 1) / (weeks + 1)
            week_shares = np.zeros(k)
            week_shares[0], week_shares[1] = 1 - moved, moved
            week_shares[2:] = 0
        total = Tally()
        for i in range(k):
            cleans = CLEAN
            if i == 0 and drop:
                cleans = (_clean_for_drop(CLEAN[0], drop), _clean_for_drop(CLEAN[1], drop))
            t = _week(rng, int(round(week_volume * week_shares[i])), flag_share, rate, cleans)
            segments[f"m{i}"].append(t)
            total = total + t
        whole.append(total)
    figures = breakdown("model", segments, whole, threshold=THRESHOLD)
    called = any(f.difference is not None and f.difference.holds for f in figures)
    worse = next((f for f in figures if f.value == "m0"), None)
    found = (worse is not None and worse.difference is not None and worse.difference.holds
             and worse.difference.value < 0)
    return called, found


NULL_SETTINGS = [
    # (segments, answers a week, flagged share, shape)
    (2, 500, 0.10, "steady"),
    (5, 500, 0.10, "steady"),
    (10, 2_000, 0.10, "steady"),
    (20, 2_000, 0.20, "steady"),
    (20, 10_000, 0.10, "steady"),
    (5, 2_000, 0.10, "double"),
    (5, 2_000, 0.10, "rate"),
    (2, 2_000, 0.10, "switch"),
]
POWER_SETTINGS = [
    # (segments, answers a week, flagged share, shape, weeks, sample rate)
    (2, 500, 0.10, "steady", WEEKS, RATE),
    (2, 500, 0.10, "steady", 4, 0.10),
    (2, 500, 0.10, "steady", WEEKS, 0.05),
    (2, 500, 0.10, "steady", WEEKS, 0.07),
    (2, 500, 0.10, "steady", WEEKS, 0.10),
    (2, 500, 0.20, "steady", WEEKS, 0.10),
    (2, 500, 0.10, "double", WEEKS, 0.10),
    (2, 500, 0.10, "steady", 13, RATE),
    (2, 2_000, 0.10, "steady", WEEKS, RATE),
    (5, 2_000, 0.10, "steady", WEEKS, RATE),
]


def segment_table(rng: np.random.Generator, reps: int) -> list[str]:
    """Print the tables; return the targets missed (beyond two Monte Carlo errors)."""
    missed: list[str] = []
    print(f"\n## Segments: differences to the rest, Bonferroni over the segments ({reps} use "
          f"cases per row, {WEEKS} weeks pooled, a {100 * RATE:.0f} % sample unless said)\n")
    print("| segments | answers a week | flagged | weeks      | no true difference: called |")
    print("|---------:|---------------:|--------:|------------|---------------------------:|")
    for k, volume, flag_share, shape in NULL_SETTINGS:
        calls = sum(_run(rng, k=k, volume=volume, flag_share=flag_share, drop=0.0,
                         shape=shape)[0] for _ in range(reps))
        rate = calls / reps
        se = (FALSE_CALLS * (1 - FALSE_CALLS) / reps) ** 0.5
        mark = "" if rate <= FALSE_CALLS + 2 * se else " ✗"
        print(f"| {k:8d} | {volume:14,d} | {100 * flag_share:6.0f} % | {shape:10s} | "
              f"{100 * rate:25.1f} %{mark} |")
        if mark:
            missed.append(f"{k} segments at {volume} a week ({shape}): a difference called in "
                          f"{100 * rate:.1f} % of use cases without one")
    print("\n| segments | answers a week | flagged | weeks      | window | sample | "
          "true −0.1 in one model: found |")
    print("|---------:|---------------:|--------:|------------|-------:|-------:|"
          "------------------------------:|")
    for k, volume, flag_share, shape, weeks, sample in POWER_SETTINGS:
        found = sum(_run(rng, k=k, volume=volume, flag_share=flag_share, drop=0.1,
                         shape=shape, weeks=weeks, rate=sample)[1] for _ in range(reps))
        rate = found / reps
        se = (FOUND * (1 - FOUND) / reps) ** 0.5
        mark = "" if rate >= FOUND - 2 * se else " ✗"
        print(f"| {k:8d} | {volume:14,d} | {100 * flag_share:6.0f} % | {shape:10s} | "
              f"{weeks:6d} | {100 * sample:4.0f} % | {100 * rate:28.1f} %{mark} |")
        if mark and k == 2 and volume == 500 and weeks == WEEKS and sample == RATE:
            missed.append(f"a 0.1 difference between two models at 500 a week found in "
                          f"{100 * rate:.1f} % over {weeks} weeks at a {100 * sample:.0f} % "
                          "sample (the frontier above: ≥ 90 % from about 7 % on)")
    _change_table(rng, reps)
    return missed


def _change_table(rng: np.random.Generator, reps: int) -> None:
    """How often `changes` marks a model switch in the right week, and a week without one."""
    print("\n| model switch                         | marked in its week | marked elsewhere |")
    print("|--------------------------------------|-------------------:|-----------------:|")
    for label, series in (
        ("at once, 500 a week", [0, 0, 0, 0, 1, 1, 1, 1]),
        ("at once, 10 a week", [0, 0, 0, 0, 1, 1, 1, 1]),
        ("over 4 weeks (20/40/60/80 %)", [0, 0, 0.2, 0.4, 0.6, 0.8, 1, 1]),
        ("none: two models 55/45", [0.45] * 8),
        ("none: 5 % canary", [0.05] * 8),
    ):
        right = wrong = 0
        truth = next((i for i, s in enumerate(series) if s > 0.5), None)
        for _ in range(reps):
            volumes = []
            for share in series:
                n = rng.poisson(10 if "10 a week" in label else 500)
                new = rng.binomial(n, share)
                volumes.append({"old": int(n - new), "new": int(new)})
            marks = [c.week for c in changes("model", volumes)]
            right += truth in marks
            wrong += any(m != truth for m in marks)
        print(f"| {label:36s} | {100 * right / reps:16.1f} % | {100 * wrong / reps:14.1f} % |")
