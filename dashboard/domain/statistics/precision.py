"""What a week's estimate can decide: its light, its trend, and what would make it decisive.

A week is always shown with its interval, however wide (`estimates.Estimate.too_few` states
low precision, it hides nothing). The light turns grey only when the interval straddles the
action line *and* is wider than `UNDECIDED_WIDTH`: then the week is consistent both with a use
case that needs action and with a healthy one, and any colour would be a guess. For such a
week `week_precision` says, in numbers, what would decide it: the sample rate that would give
±`DECISIVE_HALF_WIDTH` at this week's volume and spread, and the half-width the pooled view
(the week and the 3 before it) already gives. The wording is the page's job.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from dashboard.domain.statistics.cells import Estimate, Stratum, StratumSums, summarize, z_value
from dashboard.domain.statistics.estimates import fit_mean

# An interval across the action line that is wider than 0.10 cannot tell a use case needing
# action from a healthy one: 0.10 is twice the gap between the action line (0.85) and where an
# internal search with shown sources typically sits (0.90), so such an interval reaches from
# below "act now" to above "typical". Narrower, it says "near the line", which the point's
# side of it (amber or green) describes.
UNDECIDED_WIDTH = 0.10
# ±0.05: an interval of exactly UNDECIDED_WIDTH. What the page offers as "decisive".
DECISIVE_HALF_WIDTH = UNDECIDED_WIDTH / 2


def traffic_light(estimate: Estimate, action_threshold: float) -> str:
    """The week's light from its interval and the action line.

    "red": the whole interval is below the line (evidence that action is needed; one noisy
    point is not). "green": the interval is at or above it, or straddles it narrowly with the
    estimate at or above it. "amber": it straddles narrowly with the estimate below. "grey":
    no estimate, or the interval straddles the line and is wider than UNDECIDED_WIDTH.
    Few judged answers alone no longer grey a week: an interval wholly on one side of the line
    decides it however few answers it rests on (its width already says how few).
    """
    value, low, high = estimate.value, estimate.low, estimate.high
    if value is None or low is None or high is None:
        return "grey"
    if high < action_threshold:
        return "red"
    if low >= action_threshold:
        return "green"
    if high - low > UNDECIDED_WIDTH:
        return "grey"
    return "amber" if value < action_threshold else "green"


def shown_digits(value: float, threshold: float | None, digits: int = 2) -> int:
    """How many decimals show ``value`` beside the action line ``threshold``: ``digits``, or
    one more where ``digits`` would print it on the line it lies under or over.

    A week at 0.846 under a line at 0.85 is amber, "below the threshold"; printed as 0.85 it
    reads as a contradiction. Rounded half up, as the pages round (`floatformat`).
    """
    if threshold is None or value == threshold:
        return digits
    step = Decimal(1).scaleb(-digits)
    same = (Decimal(repr(float(value))).quantize(step, rounding=ROUND_HALF_UP)
            == Decimal(repr(float(threshold))).quantize(step, rounding=ROUND_HALF_UP))
    return digits + 1 if same else digits


def tops_at_estimate(estimate: Estimate) -> bool:
    """Whether the interval ends at the estimate itself above, while reaching below it.

    That is a week whose randomly drawn answers all scored 1.0: the drawn part cannot be
    higher than its mean, so the upper end is the value (the bounds may differ from it in the
    last bits). A page says why, or "0.96 (0.67–0.96)" reads as a mistake.
    """
    return tops_at(estimate.value, estimate.low, estimate.high)


def tops_at(value: float | None, low: float | None, high: float | None) -> bool:
    """`tops_at_estimate` for any figure with a value and an interval (a headline too)."""
    if value is None or low is None or high is None:
        return False
    return high - value <= 1e-9 < value - low


def trend(current: Estimate, previous: Estimate) -> str:
    """"up", "down" or "flat" from the previous week to this one; "none" when either is "too
    few" (or unknown).

    "flat" when the change is at most half of the previous interval's half-width. A change that
    small is well inside the week-to-week sampling noise (each estimate alone is uncertain by
    a whole half-width), so calling it up or down would make the arrow flicker. It is a reading
    aid, not a test: the chart with both intervals is the evidence.
    """
    if current.too_few or previous.too_few or current.value is None or previous.value is None:
        return "none"
    change = current.value - previous.value
    tolerance = 0.0
    if previous.low is not None and previous.high is not None:
        tolerance = (previous.high - previous.low) / 4
    if abs(change) <= tolerance:
        return "flat"
    return "up" if change > 0 else "down"


@dataclass(frozen=True, slots=True)
class Precision:
    """What a week's estimate can decide and what would make it decisive (numbers only)."""

    light: str  # traffic_light of the week
    half_width: float | None  # (high − low)/2 of the week's interval
    decisive: bool  # the light is not grey
    target_half_width: float  # the half-width offered as decisive
    # The sample rate of the random draw that would give ±target_half_width at this week's
    # volume and observed spread (normal approximation), or None: no stratum drawn at random
    # with a judged answer, or no rate can (the strata judged in full are short of runs).
    sample_rate: float | None
    current_rate: float | None  # the share of the drawn strata that was judged
    pooled_half_width: float | None  # the pooled view's (high − low)/2, when given
    pooled_weeks: int
    # About how many weeks a pooled view needs to decide (`weeks_to_decide`); None: unknown.
    weeks_to_decide: int | None = None


def sample_rate_for(
    strata: Sequence[Stratum] | Sequence[StratumSums],
    *,
    half_width: float = DECISIVE_HALF_WIDTH,
    confidence: float = 0.95,
) -> float | None:
    """The sample rate at which this week's volume and spread would give ±``half_width``.

    Every drawn stratum sampled at rate r has n_h = r·N_h, so the stratified variance is
    V(r) = (1/r − 1)·A + B with A = Σ W_h²·s̃_h²/N_h over the drawn strata (s̃_h² the same
    spread the interval uses, pseudo-answer included, so an all-1.0 sample still gives a rate)
    and B the variance of the strata judged in full but short of some runs. V(r) = (w/z)²
    gives r = A / (A + (w/z)² − B). The half-width is the normal one, z·√V; the Wilson
    interval near 1 is a little narrower above and wider below.
    """
    if not half_width > 0:
        raise ValueError(f"half_width must be positive, not {half_width!r}")
    z = z_value(confidence)
    sums = _sums(strata)
    _, fit = fit_mean(sums)
    if fit is None:
        return None
    a = b = 0.0
    drawn = False
    live = [s for s in sums if s.size]
    for (w, spread, size, n, _), s in zip(fit.spreads, live, strict=True):
        if s.drawn and n > 0:
            drawn = True
            a += w * w * spread / size
        elif n < size:
            b += w * w * (1 - n / size) * spread / n
    target = (half_width / z) ** 2
    if not drawn or a <= 0 or target <= b:
        return None
    return min(1.0, a / (a + target - b))


def week_precision(
    strata: Sequence[Stratum] | Sequence[StratumSums],
    *,
    action_threshold: float,
    pooled: Estimate | None = None,
    pooled_weeks: int = 4,
    half_width: float = DECISIVE_HALF_WIDTH,
    confidence: float = 0.95,
) -> Precision:
    """The week's light, its precision, and what would make it decisive (see `Precision`)."""
    sums = _sums(strata)
    estimate, fit = fit_mean(sums, confidence=confidence)
    light = traffic_light(estimate, action_threshold)
    own = _half(estimate)
    drawn = [s for s in sums if s.size and s.drawn]
    current = (
        sum(s.n for s in drawn) / sum(s.size for s in drawn) if drawn and fit is not None
        else None
    )
    return Precision(
        light=light,
        half_width=own,
        decisive=light != "grey",
        target_half_width=half_width,
        sample_rate=sample_rate_for(sums, half_width=half_width, confidence=confidence),
        current_rate=current,
        pooled_half_width=_half(pooled) if pooled is not None else None,
        pooled_weeks=pooled_weeks,
        weeks_to_decide=weeks_to_decide(
            pooled if pooled is not None and pooled.value is not None else estimate,
            pooled_weeks if pooled is not None and pooled.value is not None else 1,
            action_threshold,
        ),
    )


# Beyond a year of weeks a pooled view says nothing about the week it is meant to describe.
MAX_WEEKS_TO_DECIDE = 52


def weeks_to_decide(estimate: Estimate, weeks: int, action_threshold: float) -> int | None:
    """About how many weeks a pooled view needs before its light is no longer grey, if the
    use case's volume, sample rate and faithfulness stay as ``estimate`` (over ``weeks``
    weeks) shows them: the interval's half-width h shrinks as 1/√k with k weeks, and the
    light decides once h ≤ max(|value − line|, DECISIVE_HALF_WIDTH) (`traffic_light`). So
    k = ⌈weeks·(h / max(|value − line|, DECISIVE_HALF_WIDTH))²⌉, at least 1; None for an
    estimate without a value, MAX_WEEKS_TO_DECIDE + 1 for "more than a year". A normal
    approximation: the Wilson interval near 1 is a little narrower above and wider below.
    """
    half = _half(estimate)
    if half is None or estimate.value is None or weeks < 1:
        return None
    reach = max(abs(estimate.value - action_threshold), DECISIVE_HALF_WIDTH)
    needed = weeks * (half / reach) ** 2
    if needed > MAX_WEEKS_TO_DECIDE:
        return MAX_WEEKS_TO_DECIDE + 1
    return max(1, math.ceil(needed - 1e-9))


def _half(estimate: Estimate) -> float | None:
    if estimate.low is None or estimate.high is None:
        return None
    return (estimate.high - estimate.low) / 2


def _sums(strata: Sequence[Stratum] | Sequence[StratumSums]) -> list[StratumSums]:
    return [s if isinstance(s, StratumSums) else summarize(s) for s in strata]

