"""The trigger's worth: how much more often flagged answers are unfaithful than random ones."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Integral

from dashboard.domain.statistics.cells import MIN_JUDGED, z_value


@dataclass(frozen=True, slots=True)
class Lift:
    """How much more often flagged answers are unfaithful than random ones."""

    flagged_share: float | None
    flagged_n: int
    random_share: float | None
    random_n: int
    lift: float | None
    low: float | None
    high: float | None
    too_few: bool


def lift(
    *,
    flagged_bad: int,
    flagged_n: int,
    random_bad: int,
    random_n: int,
    confidence: float = 0.95,
    nested: bool = False,
    population_share: float | None = None,
) -> Lift:
    """Ratio of unfaithful shares, flagged vs random answers, with a log-ratio interval.

    Independent groups (``nested=False``): Katz's interval, exp(log L ± z·√(1/a − 1/n₁ + 1/c −
    1/n₂)). ``nested=True`` means the flagged answers are a subset of the random ones (the
    threshold tuner: those of the random sample that would be flagged vs the whole random
    sample); the two shares are then positively correlated and Katz's variance would be too
    wide, so the delta-method variance is taken over the two disjoint parts (flagged, rest).

    A count of 0 makes the logarithm undefined, and a group that is all unfaithful has no
    variance: then 0.5 is added to every cell of the 2×2 table (Haldane-Anscombe), so the lift
    and its interval are the corrected ones and the interval never has zero width. The shares
    are always the raw ones. The lift is None when either group is empty or neither has an
    unfaithful answer (0/0 says nothing about a ratio).

    ``population_share`` (nested only): the share of ALL answers the threshold flags, which the
    tuner knows exactly (it counts them). The unfaithful share of all answers is then
    post-stratified, share·p_F + (1 − share)·p_R, instead of resting on how many of the few
    sample answers happened to be flagged.
    """
    if population_share is not None and not (nested and 0.0 <= population_share <= 1.0):
        raise ValueError("population_share: a share in [0, 1], for a nested lift only")
    z = z_value(confidence)
    _check_counts("flagged", flagged_bad, flagged_n)
    _check_counts("random", random_bad, random_n)
    flagged_bad, flagged_n, random_bad, random_n = map(
        int, (flagged_bad, flagged_n, random_bad, random_n)
    )
    if nested and (
        flagged_n > random_n
        or flagged_bad > random_bad
        or random_bad - flagged_bad > random_n - flagged_n
    ):
        raise ValueError("nested: the flagged counts must be part of the random counts")
    flagged_share = flagged_bad / flagged_n if flagged_n else None
    random_share = random_bad / random_n if random_n else None
    too_few = flagged_n < MIN_JUDGED or random_n < MIN_JUDGED
    if not flagged_n or not random_n or (flagged_bad == 0 and random_bad == 0):
        return Lift(flagged_share, flagged_n, random_share, random_n, None, None, None, True)

    a, n1, c, n2 = float(flagged_bad), float(flagged_n), float(random_bad), float(random_n)
    if nested:
        rest_bad, rest_n = c - a, n2 - n1
        # A part that is all unfaithful or all faithful has no binomial variance and would
        # give a zero-width interval: the same half-count correction as for a zero cell.
        if a in (0, n1) or (rest_n and rest_bad in (0, rest_n)):
            a, n1 = a + 0.5, n1 + 1
            if rest_n:
                rest_bad, rest_n = rest_bad + 0.5, rest_n + 1
        c, n2 = a + rest_bad, n1 + rest_n
        p_f = a / n1
        share = n1 / n2 if population_share is None else population_share
        p_rest = rest_bad / rest_n if rest_n else p_f
        p_all = share * p_f + (1 - share) * p_rest
        # log p_F − log p_A with p_A = share·p_F + (1 − share)·p_R, p_F and p_R independent.
        variance = (1 / p_f - share / p_all) ** 2 * p_f * (1 - p_f) / n1
        if rest_n:
            p_r = rest_bad / rest_n
            variance += ((1 - share) / p_all) ** 2 * p_r * (1 - p_r) / rest_n
    else:
        if a in (0, n1) or c in (0, n2):
            a, n1, c, n2 = a + 0.5, n1 + 1, c + 0.5, n2 + 1
        variance = max(0.0, 1 / a - 1 / n1 + 1 / c - 1 / n2)
    ratio = p_f / p_all if nested else (a / n1) / (c / n2)
    spread = z * math.sqrt(variance)
    low, high = ratio * math.exp(-spread), ratio * math.exp(spread)
    return Lift(flagged_share, flagged_n, random_share, random_n, ratio, low, high, too_few)


def _check_counts(name: str, bad: int, n: int) -> None:
    if not (isinstance(n, Integral) and isinstance(bad, Integral) and 0 <= bad <= n):
        raise ValueError(f"{name}: need integers 0 <= bad <= n, not {bad!r} of {n!r}")
