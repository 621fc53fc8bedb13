"""The headline: the one figure a use case is judged by, and its light.

A team lead acts on one verdict. The overview card's light, the card's place in the order, the
use-case page's first tile, the action alarm and its mail, `/metrics` and the estimates API all
read the figure chosen here, so they cannot disagree (the overview's card once read the judge's
scale while the page's headline was the experts', green beside red).

Which figure, for a complete week:

1. the experts' scale (the judge's figure corrected by the reviews, pooled over the week and the
   3 before it) once a week's batch of reviews stands behind it: it estimates what the experts
   would say, which is what the number is for;
2. else the judge's estimate of the week itself, where its light decides (not grey);
3. else the judge's pooled view (the week and the 3 before it), where a week alone is too thin.

The running week is looked at every hour, so its own estimate decides only on stronger
evidence: its interval at `RUNNING_CONFIDENCE` wholly below the action threshold (on enough
judged answers). A union bound over `RUNNING_LOOKS` looks keeps the chance that a healthy week
is ever called red that way below `RUNNING_FALSE_ALARM`; the looks share most of their answers,
and `bench/statistics.py --only running` measures at most 0.2 % (the 95 % interval at any look:
up to 3.8 %). Until then the headline is last week's.

Plain values in, plain values out (no Django): the selectors hand in each candidate's figures.
"""

from __future__ import annotations

from dataclasses import dataclass

EXPERTS = "experts"
JUDGE = "judge"
WEEK = "week"
POOLED = "pooled"

# Hourly checks in a week, and the chance a healthy running week may be called red at any of
# them: per look one side of a two-sided interval holds 1 − RUNNING_FALSE_ALARM / RUNNING_LOOKS.
RUNNING_LOOKS = 168
RUNNING_FALSE_ALARM = 0.02
RUNNING_CONFIDENCE = 1 - 2 * RUNNING_FALSE_ALARM / RUNNING_LOOKS


@dataclass(frozen=True, slots=True)
class Figure:
    """One candidate: an estimate with its interval, how much stands behind it, its light."""

    value: float | None
    low: float | None
    high: float | None
    n: int  # judged answers (the judge's figures) or reviews (the experts' scale)
    too_few: bool
    light: str
    weeks: int = 1  # weeks it spans


@dataclass(frozen=True, slots=True)
class Headline:
    """The figure a use case is judged by: its scale, its view, the week it speaks for."""

    scale: str  # EXPERTS or JUDGE
    view: str  # WEEK (the week alone) or POOLED (the week and the ones before it)
    week: str  # ISO week it speaks for (the last of the pooled ones)
    weeks: int  # weeks it spans
    running: bool  # the week is not over yet
    value: float | None
    low: float | None
    high: float | None
    n: int
    too_few: bool
    light: str


def complete_week_headline(
    *, week: str, experts: Figure | None, judge_week: Figure, judge_pooled: Figure
) -> Headline:
    """The headline of a complete week: the experts' scale where it leads, else the judge's
    week where its light decides, else the judge's pooled view."""
    if experts is not None and experts.value is not None and not experts.too_few:
        return _headline(EXPERTS, POOLED, week, experts, running=False)
    if judge_week.light != "grey":
        return _headline(JUDGE, WEEK, week, judge_week, running=False)
    return _headline(JUDGE, POOLED if judge_pooled.weeks > 1 else WEEK, week, judge_pooled,
                     running=False)


def running_week_decides(strict: Figure) -> bool:
    """Whether the running week's estimate taken at RUNNING_CONFIDENCE (`strict`, its light
    read against the action threshold) is already evidence of a use case below the threshold:
    its whole interval below it, on enough judged answers."""
    return not strict.too_few and strict.light == "red"


def headline(
    *, complete: Headline, running_week: str | None = None, running: Figure | None = None,
    running_strict: Figure | None = None,
) -> Headline:
    """The use case's headline now: the running week's own estimate where its strict interval
    already lies below the threshold, else the last complete week's headline."""
    if (running_week is not None and running is not None and running_strict is not None
            and running_week_decides(running_strict)):
        return _headline(JUDGE, WEEK, running_week, running, running=True)
    return complete


def _headline(scale: str, view: str, week: str, figure: Figure, *, running: bool) -> Headline:
    return Headline(
        scale=scale, view=view, week=week, weeks=figure.weeks, running=running,
        value=figure.value, low=figure.low, high=figure.high, n=figure.n,
        too_few=figure.too_few, light=figure.light,
    )
