"""Estimates for the team-lead dashboard: faithfulness of a use case per week, with intervals.

Tier 2 judges answers with unequal inclusion probabilities: every flagged answer (π = 1) and a
random share of the others (π = sample rate). The judged answers are therefore a stratified
sample, and the mean over them overweights the flagged ones, which are much less faithful. Every
estimate here is stratified: per stratum h (flagged, unflagged) the judged answers are a simple
random sample of n_h from the stratum's N_h answers (the hash draw is independent of the flag
and of the answer; judge failures are assumed to miss at random), and the population mean is

    ŷ = Σ_h W_h · ȳ_h,    W_h = N_h / N.

The interval ("stratified Wilson", after Kott & Liu 2009) is a Wilson score interval around ŷ
with an effective sample size n_eff = p̃(1 − p̃) / V, where V is the stratified variance

    V = Σ_h W_h² · (1 − n_h/N_h) · s̃_h² / n_h.

A Wald or t interval (ŷ ± z·√V with the plain sample variance) is useless here: most answers
score exactly 1.0, so a small random stratum often has s_h² = 0 and the interval collapses to
a point; in simulation such intervals cover the truth in about 57-75 % of small weeks. Two
things keep this one honest:

- s̃_h² is the variance of the stratum's judged values plus one Jeffreys pseudo-answer (half a
  supported claim, half an unsupported one, i.e. Beta(½, ½) prior counts), taken about the
  shrunk mean p̃_h = (Σy + ½)/(n_h + 1) and divided by n_h + 1. With all values 1.0 it is
  p̃_h(1 − p̃_h) > 0, not 0; with a real spread of scores the pseudo-answer adds O(1/n_h) and
  vanishes on large samples. For 0/1 values in one stratum it is exactly p̃(1 − p̃), so the
  interval reduces to the textbook Wilson interval for k of n.
- Wilson rather than ŷ ± z·√V: the score interval is asymmetric near 1, where the weekly
  estimates live, and never leaves [0, 1].

A stratum judged in full (n_h = N_h, usually the flagged one) has no sampling error: the finite
population correction removes its variance and its values enter p̃ unshrunk. Simulation
(tests/domain/test_statistics_simulation.py) measures 95-96 % coverage on 7,000 answers a week
(~200 random judged) and ~98 % on 300 answers a week (~8 random judged), where a Wald interval
covers ~70 %. On small samples the pseudo-answer makes the interval err on the wide side; that
is the price of never claiming certainty from eight answers that all scored 1.0.

Plain Python on purpose (no django, no openai): the selectors feed it plain values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from numbers import Integral
from statistics import NormalDist

# Below ten judged answers a point is noise to the eye: at 9 of 10 supported the 95 % Wilson
# interval is 0.60-0.98, and one answer moves the estimate by a tenth. The dashboard greys such
# points (the numbers are still returned). Ten is also the smallest sample at which the lift's
# log-ratio interval stops being dominated by the continuity correction.
MIN_JUDGED = 10

# Jeffreys prior Beta(½, ½): half a supported and half an unsupported pseudo-claim per stratum.
_PRIOR = 0.5


@dataclass(frozen=True, slots=True)
class Stratum:
    """One stratum of a week: its size N_h and the values of its judged answers."""

    size: int  # N_h: answers in the stratum that week, judged or not
    values: Sequence[float]  # judged values in [0, 1] (scores, or 0/1 indicators)
    # Drawn at random (the unflagged answers) rather than judged in full (the flagged ones,
    # which may lack a few runs still pending or failed): only a drawn stratum needs MIN_JUDGED
    # judged answers of its own before its week is an estimate and not "too few".
    drawn: bool = True


@dataclass(frozen=True, slots=True)
class ClaimStratum:
    """One stratum for the claim-level share: per judged answer (supported points, claims)."""

    size: int  # N_h
    answers: Sequence[tuple[float, int]]  # GEDECKT = 1 and TEILWEISE = 0.5 points per claim
    drawn: bool = True  # as Stratum.drawn


@dataclass(frozen=True, slots=True)
class Estimate:
    """A stratified estimate with its interval and sample sizes.

    ``value``, ``low`` and ``high`` are None when the week cannot be estimated: nothing judged,
    or a non-empty stratum without a single judged answer (its mean is then unknown, and
    leaving it out would bias the estimate toward the other stratum).
    """

    value: float | None
    low: float | None
    high: float | None
    n: int  # judged answers used (Σ n_h)
    population: int  # N
    n_by_stratum: tuple[int, ...]
    # n < MIN_JUDGED, a non-empty stratum without a judged answer, or a stratum drawn at random
    # with fewer than MIN_JUDGED judged (Stratum.drawn; a stratum judged in full needs none)
    too_few: bool


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


def z_value(confidence: float) -> float:
    """The two-sided standard normal quantile for ``confidence`` (1.96 at 0.95)."""
    if not 0.0 < confidence < 1.0:  # also false for NaN
        raise ValueError(f"confidence must be between 0 and 1, not {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: float, n: float, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``successes`` of ``n``; fractional counts allowed; n=0 → (0, 1).

    Fractional counts are what effective sample sizes give; the formula does not need integers.
    """
    if not (n >= 0 and math.isfinite(n)):
        raise ValueError(f"n must be a finite number of at least 0, not {n!r}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n={n}, not {successes!r}")
    z = z_value(confidence)
    if n == 0:
        return 0.0, 1.0
    return _wilson(successes / n, n, z)


def _wilson(p: float, n: float, z: float) -> tuple[float, float]:
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    # The formula gives exactly 0 (1) at p = 0 (1) up to rounding; say so exactly.
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return low, high


def stratified_mean(strata: Sequence[Stratum], *, confidence: float = 0.95) -> Estimate:
    """Population mean of the values (e.g. faithfulness scores) with a stratified Wilson interval.

    The interval is also cut to what the population mean can be at all, given that the
    unjudged answers lie somewhere in [0, 1]: this only removes impossible values, so coverage
    is unchanged, and it makes a nearly fully judged week's interval as narrow as it really is.
    """
    cells = [(s.size, _units(s.values), None, s.drawn) for s in strata]
    return _estimate(cells, confidence, bounded=True)


def stratified_share(strata: Sequence[Stratum], *, confidence: float = 0.95) -> Estimate:
    """Population share of 0/1 indicators (e.g. score below the action threshold).

    The same estimator as ``stratified_mean``; with one stratum and no finite population
    correction the interval is exactly ``wilson(k, n)``.
    """
    for s in strata:
        try:
            fine = set(s.values) <= {0, 1}  # the same test as below, at C speed
        except TypeError:
            fine = False
        if fine:
            continue
        for v in s.values:
            if v not in (0, 1):
                raise ValueError(f"a share needs 0/1 values, not {v!r}")
    return stratified_mean(strata, confidence=confidence)


def claim_share(strata: Sequence[ClaimStratum], *, confidence: float = 0.95) -> Estimate:
    """Claim-level share of supported claims as a stratified (combined) ratio estimator.

    R = Σ_h W_h·ā_h / Σ_h W_h·m̄_h, with ā_h the mean supported points and m̄_h the mean number
    of claims per judged answer of stratum h: the estimated population totals of points and of
    claims, divided. Answers are the sampling units, so claims of one answer are not treated as
    independent. The variance is the usual linearisation: the stratified variance of the
    residuals z_i = (a_i − R·m_i)/m̄, with the same Jeffreys pseudo-answer per sampled stratum
    (one claim, half supported and half unsupported) so that a sample in which every claim is
    supported still gets an interval. Answers without claims (abstentions) count in N_h but
    add no claims. ``value`` is None when no judged answer has a claim.
    """
    cells = []
    for s in strata:
        points, claims = [], []
        for a, m in s.answers:
            if not (isinstance(m, Integral) and m >= 0):
                raise ValueError(f"number of claims must be an integer of at least 0, not {m!r}")
            if not 0 <= a <= m:
                raise ValueError(f"supported points must be between 0 and {m}, not {a!r}")
            points.append(float(a))
            claims.append(float(m))  # Integral: numpy integers are fine too
        cells.append((s.size, points, claims, s.drawn))
    return _estimate(cells, confidence, bounded=False)


def _units(values: Sequence[float]) -> list[float]:
    """The values as floats in [0, 1], as `_unit` checks them one by one.

    A fast path for the usual case, a list of floats in range, checked at C speed: every value
    a float (no bool, int, Decimal or subclass), none below 0 or above 1, and no NaN (a NaN
    makes the sum NaN; an infinity is out of range already). Anything else goes through
    `_unit`, which converts or raises exactly as before.
    """
    out = values if type(values) is list else list(values)
    if not out:
        return []
    if set(map(type, out)) == {float} and min(out) >= 0 and max(out) <= 1:
        total = sum(out)
        if total == total:
            return out
    return [_unit(v) for v in out]


def _unit(value: float) -> float:
    if not 0 <= value <= 1:  # also false for NaN
        raise ValueError(f"values must lie in [0, 1], not {value!r}")
    return float(value)


def _estimate(
    cells: list[tuple[int, list[float], list[float] | None, bool]], confidence: float,
    bounded: bool,
) -> Estimate:
    """The shared machinery: a stratified ratio Σ W_h ā_h / Σ W_h m̄_h with its interval.

    ``claims`` None means one "claim" per answer (a plain mean); then the ratio is the mean.
    """
    z = z_value(confidence)
    for size, points, _, _ in cells:
        if isinstance(size, bool) or not isinstance(size, Integral) or size < 0:
            raise ValueError(f"stratum size must be an integer of at least 0, not {size!r}")
        if len(points) > size:
            raise ValueError(f"{len(points)} judged answers in a stratum of {size}")
    population = int(sum(size for size, _, _, _ in cells))
    n_by = tuple(len(points) for _, points, _, _ in cells)
    n = sum(n_by)
    unknown = Estimate(None, None, None, n, population, n_by, True)
    if population == 0 or any(size > 0 and not points for size, points, _, _ in cells):
        return unknown
    # A stratum drawn at random speaks through its own judged answers only: twelve flagged
    # answers judged in full and one random one are n = 13, but the unflagged majority of the
    # week rests on that one answer. A sampled stratum needs MIN_JUDGED of its own.
    too_few = n < MIN_JUDGED or any(
        drawn and 0 < len(points) < min(size, MIN_JUDGED) for size, points, _, drawn in cells
    )

    # (W_h, n_h, sampled, Σa, Σm) of the non-empty strata.
    parts = []
    for size, points, claims, _ in cells:
        if size:
            total_claims = float(len(points)) if claims is None else math.fsum(claims)
            parts.append((size / population, len(points), len(points) < size,
                          math.fsum(points), total_claims))
    numerator = math.fsum(w * a / k for w, k, _, a, _ in parts)
    denominator = math.fsum(w * m / k for w, k, _, _, m in parts)
    if denominator == 0:
        return unknown  # no judged answer has a claim: a claim share is undefined
    value = min(1.0, numerator / denominator)

    # Shrunk ratio: Jeffreys counts in the sampled strata only; a census stratum is exact.
    shrunk_num = math.fsum(
        w * ((a + _PRIOR) / (k + 1) if sampled else a / k) for w, k, sampled, a, _ in parts
    )
    shrunk_den = math.fsum(
        w * ((m + 2 * _PRIOR) / (k + 1) if sampled else m / k) for w, k, sampled, _, m in parts
    )
    ratio = shrunk_num / shrunk_den

    terms = []
    for size, points, claims, _ in cells:
        k = len(points)
        if not size or k == size:
            continue  # empty, or judged in full: the finite population correction is 0
        w = size / population
        if claims is None:
            # One claim per answer: ratio * 1.0 is ratio exactly, so this is the same sum.
            residuals = [(a - ratio) / shrunk_den for a in points]
        else:
            residuals = [(a - ratio * m) / shrunk_den for a, m in zip(points, claims, strict=True)]
        # The pseudo-answer: one claim, weight ½ supported and ½ unsupported.
        supported, unsupported = (1 - ratio) / shrunk_den, -ratio / shrunk_den
        centre = (math.fsum(residuals) + _PRIOR * (supported + unsupported)) / (k + 1)
        spread = (
            math.fsum([(r - centre) ** 2 for r in residuals])
            + _PRIOR * ((supported - centre) ** 2 + (unsupported - centre) ** 2)
        ) / (k + 1)
        terms.append(w * w * (1 - k / size) * spread / k)
    variance = math.fsum(terms)

    if variance <= 0:
        low = high = value  # every stratum judged in full: the population value is known
    else:
        low, high = _wilson(value, ratio * (1 - ratio) / variance, z)
    if bounded:
        # Unjudged answers score somewhere in [0, 1]; the mean cannot leave these bounds.
        judged_sum = math.fsum(math.fsum(points) for _, points, _, _ in cells)
        unjudged = population - n
        # min/max with the value: the bounds and the weighted value differ in the last bit.
        low = min(max(low, judged_sum / population), value)
        high = max(min(high, (judged_sum + unjudged) / population), value)
    return Estimate(value, low, high, n, population, n_by, too_few)


def week_strata(rows: Iterable[tuple[bool, float | None]]) -> list[Stratum]:
    """[flagged stratum, unflagged stratum] from (flagged, score or None) of EVERY answer.

    Unjudged answers (not sampled, pending or failed) count in the stratum size only.
    """
    sizes = [0, 0]
    values: list[list[float]] = [[], []]
    for flagged, score in rows:
        h = 0 if flagged else 1
        sizes[h] += 1
        if score is not None:
            values[h].append(score)
    return [Stratum(sizes[0], values[0], drawn=False), Stratum(sizes[1], values[1])]


def indicator_strata(
    strata: Sequence[Stratum], predicate: Callable[[float], bool]
) -> list[Stratum]:
    """The same strata with each value replaced by 1.0 where ``predicate`` holds, else 0.0."""
    return [
        Stratum(s.size, [1.0 if predicate(v) else 0.0 for v in s.values], s.drawn) for s in strata
    ]


def lift(
    *,
    flagged_bad: int,
    flagged_n: int,
    random_bad: int,
    random_n: int,
    confidence: float = 0.95,
    nested: bool = False,
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
    """
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
        p_f, p_all = a / n1, c / n2
        share = n1 / n2
        # log p_F − log p_A with p_A = share·p_F + (1 − share)·p_R, p_F and p_R independent.
        variance = (1 / p_f - share / p_all) ** 2 * p_f * (1 - p_f) / n1
        if rest_n:
            p_r = rest_bad / rest_n
            variance += ((1 - share) / p_all) ** 2 * p_r * (1 - p_r) / rest_n
    else:
        if a in (0, n1) or c in (0, n2):
            a, n1, c, n2 = a + 0.5, n1 + 1, c + 0.5, n2 + 1
        variance = max(0.0, 1 / a - 1 / n1 + 1 / c - 1 / n2)
    ratio = (a / n1) / (c / n2)
    spread = z * math.sqrt(variance)
    low, high = ratio * math.exp(-spread), ratio * math.exp(spread)
    return Lift(flagged_share, flagged_n, random_share, random_n, ratio, low, high, too_few)


def _check_counts(name: str, bad: int, n: int) -> None:
    if not (isinstance(n, Integral) and isinstance(bad, Integral) and 0 <= bad <= n):
        raise ValueError(f"{name}: need integers 0 <= bad <= n, not {bad!r} of {n!r}")


def traffic_light(estimate: Estimate, action_threshold: float) -> str:
    """"red" when the whole interval is below the action line, "amber" when the estimate is
    but the interval reaches it, "green" otherwise; "grey" when there are too few answers.

    Red needs the interval, not the point, below the line: a red week starts work, and one
    noisy week must not.
    """
    if estimate.too_few or estimate.value is None:
        return "grey"
    if estimate.high is not None and estimate.high < action_threshold:
        return "red"
    if estimate.value < action_threshold:
        return "amber"
    return "green"


def trend(current: Estimate, previous: Estimate) -> str:
    """"up", "down" or "flat" from the previous week to this one; "none" when either is grey.

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
