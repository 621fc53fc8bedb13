"""Threshold tuner: what a different tier-1 threshold would flag, cost and catch.

Raising the log-probability threshold flags more answers; every flagged answer is judged, so
the judge bill grows. What it buys is told by the random sample: its answers were judged
whatever their flag (the draw is independent of it), so among them the unfaithful share of
those that *would* be flagged at a threshold, against the unfaithful share of all of them, is
an unbiased lift for every candidate threshold at once, with no re-judging.

Each answer is reduced once to its lowest content-word probability; it is flagged at threshold
t exactly when that number is below t. The table then costs one sort and a binary search per
threshold, so a window of ~100k answers is cheap.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from dashboard.domain.statistics.lift import Lift, lift

DEFAULT_THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


@dataclass(frozen=True, slots=True)
class TunerRow:
    threshold: float
    flagged_share: float | None  # of all answers in the window; None when there are none
    judge_answers_per_week: float  # flagged + rate × unflagged, per week
    judge_calls_per_week: float  # judged answers × calls per answer
    lift: Lift  # unfaithful share among random-sample answers flagged at t vs all of them


def threshold_table(
    *,
    min_probabilities: Sequence[float | None],
    random_sample: Sequence[tuple[float | None, float]],
    rate: float,
    weeks: float,
    calls_per_answer: float,
    unfaithful_below: float,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
) -> list[TunerRow]:
    """One row per threshold: flagged share, judge load and the lift it would have.

    ``min_probabilities`` has one entry per answer in the window (``min_content_probability``;
    None = never flagged). ``random_sample`` holds (min probability, score) of the judged
    random-sample answers; unfaithful means score < ``unfaithful_below`` (the action line).
    O((n + m) log(n + m)) for n answers and m sample answers: one sort each, then bisection.
    """
    if any(p != p for p in min_probabilities if p is not None):
        # A NaN has no order to search in: counted one by one on the plain sorted list.
        return _table(
            sorted(p for p in min_probabilities if p is not None), None,
            len(min_probabilities), Counter(random_sample), rate=rate, weeks=weeks,
            calls_per_answer=calls_per_answer, unfaithful_below=unfaithful_below,
            thresholds=thresholds,
        )
    return threshold_table_from_counts(
        answers=Counter(min_probabilities), random_sample=Counter(random_sample), rate=rate,
        weeks=weeks, calls_per_answer=calls_per_answer, unfaithful_below=unfaithful_below,
        thresholds=thresholds,
    )


def threshold_table_from_counts(
    *,
    answers: Mapping[float | None, int],
    random_sample: Mapping[tuple[float | None, float], int],
    rate: float,
    weeks: float,
    calls_per_answer: float,
    unfaithful_below: float,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
) -> list[TunerRow]:
    """`threshold_table` from counts: answers per min probability (a window holds ~100k
    answers but, as weekly rollups keep them, few distinct values) and judged random-sample
    answers per (min probability, score). The same rows."""
    tally = {p: k for p, k in answers.items() if p is not None and k}
    flaggable = sorted(tally)
    below = list(accumulate((tally[p] for p in flaggable), initial=0))
    return _table(
        flaggable, below, sum(answers.values()), random_sample, rate=rate, weeks=weeks,
        calls_per_answer=calls_per_answer, unfaithful_below=unfaithful_below,
        thresholds=thresholds,
    )


def _table(
    flaggable: list[float], below: Sequence[int] | None, total: int,
    random_sample: Mapping[tuple[float | None, float], int], *, rate: float, weeks: float,
    calls_per_answer: float, unfaithful_below: float, thresholds: Sequence[float],
) -> list[TunerRow]:
    """The rows, from the sorted flaggable values and how many answers lie below each (None:
    one answer per value), the number of answers, and the sample's counts."""
    if not 0 < rate <= 1:
        raise ValueError(f"rate must be in (0, 1], not {rate!r}")
    if not weeks > 0:
        raise ValueError(f"weeks must be positive, not {weeks!r}")
    if not calls_per_answer >= 0:
        raise ValueError(f"calls_per_answer must be at least 0, not {calls_per_answer!r}")
    if any(math.isnan(t) for t in thresholds):
        raise ValueError("a threshold is NaN")
    counted = below if below is not None else range(len(flaggable) + 1)

    # Random-sample answers ordered by min probability (never-flaggable ones last), with
    # running counts of all and of the unfaithful ones: at threshold t the flagged ones are a
    # prefix.
    sample = sorted(
        ((math.inf if p is None else p, score < unfaithful_below), k)
        for (p, score), k in random_sample.items() if k
    )
    sample_keys = [p for (p, _), _ in sample]
    n_prefix = list(accumulate((k for _, k in sample), initial=0))
    bad_prefix = list(accumulate((k if bad else 0 for (_, bad), k in sample), initial=0))
    sample_n, sample_bad = n_prefix[-1], bad_prefix[-1]

    rows = []
    for t in thresholds:
        flagged = counted[bisect_left(flaggable, t)]  # strictly below t, as logprobs flags
        judged = (flagged + rate * (total - flagged)) / weeks
        k = bisect_left(sample_keys, t)
        rows.append(
            TunerRow(
                threshold=t,
                flagged_share=flagged / total if total else None,
                judge_answers_per_week=judged,
                judge_calls_per_week=judged * calls_per_answer,
                lift=lift(
                    flagged_bad=bad_prefix[k],
                    flagged_n=n_prefix[k],
                    random_bad=sample_bad,
                    random_n=sample_n,
                    nested=True,
                    # How many answers t flags is counted, not estimated from the sample.
                    population_share=flagged / total if total else None,
                ),
            )
        )
    return rows
