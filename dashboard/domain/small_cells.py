"""Figures too small to be shown beside a blind review.

An expert reviews the week's answers blind (against anchoring): no page may tell them the
judge's score of an answer still open in their queue. A figure that rests on one judged answer
is that answer's score ("< 0,5", n = 1 → 0,5), and one that rests on two or three of them,
beside answers whose scores the expert can read one by one, is not far from it. So for a
reader with open items every figure resting on fewer than MIN_ANSWERS judged answers is
withheld: its value and interval gone (the page shows "–" as for a week nothing was judged
in), its count kept.

The figures come from the rollups, which do not say which answers a bucket holds: the rule is
applied to every small figure of the reader's use case, not only to those an open answer is
in. That withholds more than needed, during the review week only and only from its experts.

Plain Python: the pages' figure trees (dataclasses, lists, dicts) in, the same trees out.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

from dashboard.domain.adjusted import Adjusted
from dashboard.domain.expert_scale import ExpertScale
from dashboard.domain.statistics.cells import Estimate
from dashboard.domain.statistics.lift import Lift

# The fewest judged answers a figure shown beside a blind review may rest on.
MIN_ANSWERS = 5

T = TypeVar("T")


def small(n: int) -> bool:
    """A figure resting on n judged answers (0 is no figure at all) that must be withheld."""
    return 0 < n < MIN_ANSWERS


Then = Callable[[Any, Any], Any]


def withhold_small(tree: T, *, then: Then | None = None) -> T:
    """``tree`` with every estimate, lift and regression resting on 1 to MIN_ANSWERS − 1 judged
    answers withheld, however deep in dataclasses, lists, tuples and dicts it sits. Other
    values are kept as they are (the same objects where nothing inside them changed).

    ``then(old, new)`` is called for every other dataclass on the way back up, ``new`` being
    ``old`` where nothing inside changed, and its result is kept instead: for what a figure
    derives from an estimate (a traffic light) and is no estimate itself."""
    result: T = _walk(tree, {}, then or (lambda old, new: new))
    return result


def _walk(value: Any, seen: dict[int, Any], then: Then) -> Any:
    if isinstance(value, Estimate):
        return estimate_cells(value)
    if isinstance(value, Lift):
        return _lift(value)
    if isinstance(value, Adjusted):
        return _adjusted(value)
    if isinstance(value, ExpertScale):
        return _expert(value, seen, then)
    if isinstance(value, list):
        return [_walk(v, seen, then) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_walk(v, seen, then) for v in value)
    if isinstance(value, dict):
        return {k: _walk(v, seen, then) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if id(value) in seen:
            return seen[id(value)]
        seen[id(value)] = value  # a dataclass that holds itself is left as it is
        changes = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            old = getattr(value, f.name)
            new = _walk(old, seen, then)
            if new is not old:
                changes[f.name] = new
        result = then(value, dataclasses.replace(value, **changes) if changes else value)
        seen[id(value)] = result
        return result
    return value


def estimate_cells(e: Estimate) -> Estimate:
    if not small(e.n):
        return e
    return dataclasses.replace(e, value=None, low=None, high=None, too_few=True)


def _lift(lift: Lift) -> Lift:
    if not (small(lift.flagged_n) or small(lift.random_n)):
        return lift
    return dataclasses.replace(
        lift,
        flagged_share=None if small(lift.flagged_n) else lift.flagged_share,
        random_share=None if small(lift.random_n) else lift.random_share,
        lift=None, low=None, high=None, too_few=True,
    )


def _adjusted(adjusted: Adjusted) -> Adjusted:
    if not small(adjusted.n):
        return adjusted
    return dataclasses.replace(adjusted, too_few=True, effects=tuple(
        dataclasses.replace(e, estimate=None, low=None, high=None, p_value=None,
                            p_adjusted=None, holds=False)
        for e in adjusted.effects
    ))


def _expert(scale: ExpertScale, seen: dict[int, Any], then: Then) -> ExpertScale:
    """The experts' scale corrects the judge's pooled estimate: where that rests on too few
    answers, so does the scale."""
    judge = _walk(scale.judge, seen, then)
    if judge is scale.judge:
        return scale
    return dataclasses.replace(
        scale, judge=judge, value=None, low=None, high=None, correction=None, too_few=True
    )
