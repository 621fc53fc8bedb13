"""How far experts and judge agree on claim labels beyond chance: linearly weighted kappa over
the ordered labels UNGEDECKT < TEILWEISE < GEDECKT, with a bootstrap interval."""

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from review.domain.calibration import MIN_PAIRS_FOR_INTERVAL, check_confidence

LABELS = ("UNGEDECKT", "TEILWEISE", "GEDECKT")  # in order: index = rank


_INDEX = {label: index for index, label in enumerate(LABELS)}


# Linear disagreement weights |i - j| / (k - 1): TEILWEISE against either neighbour costs half
# as much as GEDECKT against UNGEDECKT. Kept as integers |i - j| here; the factor 1/2 cancels
# in the ratio and integers keep the counts' arithmetic exact.
_DISTANCE = np.abs(np.subtract.outer(np.arange(3), np.arange(3)))


# A kappa from fewer than 20 claims rests on a handful of off-diagonal cells: one changed
# label moves it by 0.1 or more, and a percentile bootstrap on so few is too narrow.
MIN_CLAIM_PAIRS_FOR_KAPPA = 20


@dataclass(frozen=True, slots=True)
class Kappa:
    n: int  # claim pairs
    kappa: float | None
    low: float | None  # bootstrap percentile interval; None when too few or undefined
    high: float | None
    too_few: bool


def weighted_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Linearly weighted Cohen's kappa of (manual label, judge label) pairs.

    kappa_w = 1 - sum(w * O) / sum(w * E) with w_ij = |i - j| / 2, O the observed and E the
    chance-expected (product of the marginals) proportions. Same value as scikit-learn's
    ``cohen_kappa_score(weights="linear")`` over the three labels.

    None when undefined: no pairs, or no disagreement is expected by chance (sum(w * E) = 0),
    which happens only when both raters used one and the same label for every claim. Kappa
    then is 0/0 (scikit-learn returns NaN); it is not 1, because agreement that chance alone
    would produce says nothing about the judge, so the page shows "undefined" instead.
    """
    if not pairs:
        return None
    return _kappa_from_counts(_counts(pairs))


def kappa_with_interval(
    pairs: Sequence[tuple[str, str]],
    *,
    groups: Sequence[Hashable] | None = None,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Kappa:
    """Weighted kappa with a bootstrap percentile interval, deterministic for a seed.

    With ``groups`` (one answer id per claim pair) whole answers are resampled: the claims of
    one answer share its chunks and its decomposition, so they are not independent, and
    resampling claims one by one would give an interval that is too narrow.

    Resamples in which kappa is undefined (every drawn claim got the same label from both) are
    left out of the percentiles. They occur when almost all claims agree on one label, so
    leaving them out moves the interval slightly down, the cautious side for an agreement
    measure. No defined resample: no interval.
    """
    check_confidence(confidence)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    n = len(pairs)
    if groups is not None and len(groups) != n:
        raise ValueError(f"groups has {len(groups)} entries for {n} pairs")
    codes = [3 * _label_index(manual) + _label_index(judge) for manual, judge in pairs]
    point = weighted_kappa(pairs)

    # Resampling units: answers when grouped, else each claim pair on its own. Units in order
    # of first appearance (not set order), so the result depends only on the input and seed.
    unit_of: dict[Hashable, int] = {}
    keys = groups if groups is not None else range(n)
    unit_counts_rows: list[np.ndarray] = []
    for key, code in zip(keys, codes, strict=True):
        unit = unit_of.setdefault(key, len(unit_of))
        if unit == len(unit_counts_rows):
            unit_counts_rows.append(np.zeros(9, dtype=np.int64))
        unit_counts_rows[unit][code] += 1
    units = len(unit_counts_rows)

    too_few = n < MIN_CLAIM_PAIRS_FOR_KAPPA or (
        groups is not None and units < MIN_PAIRS_FOR_INTERVAL
    )
    if too_few or point is None:
        return Kappa(n, point, None, None, too_few)

    unit_counts = np.stack(unit_counts_rows)
    rng = np.random.default_rng(seed)
    # How often each unit is drawn in each resample; drawing `units` units with replacement
    # is a multinomial with equal probabilities.
    draws = rng.multinomial(units, np.full(units, 1.0 / units), size=resamples)
    totals = (draws @ unit_counts).reshape(resamples, 3, 3)
    kappas = _kappas_from_counts(totals)
    defined = kappas[~np.isnan(kappas)]
    if defined.size == 0:
        return Kappa(n, point, None, None, too_few)
    alpha = 1.0 - confidence
    low, high = np.quantile(defined, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Kappa(n, point, float(low), float(high), too_few)


def _label_index(label: str) -> int:
    try:
        return _INDEX[label]
    except KeyError:
        raise ValueError(f"unknown label {label!r}; expected one of {LABELS}") from None


def _counts(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """3x3 counts: rows the manual label, columns the judge label, in LABELS order."""
    counts = np.zeros((3, 3), dtype=np.int64)
    for manual, judge in pairs:
        counts[_label_index(manual), _label_index(judge)] += 1
    return counts


def _kappa_from_counts(counts: np.ndarray) -> float | None:
    kappa = float(_kappas_from_counts(counts[np.newaxis])[0])
    return None if math.isnan(kappa) else kappa


def _kappas_from_counts(counts: np.ndarray) -> np.ndarray:
    """Kappa for a stack of 3x3 count tables (shape (m, 3, 3)); NaN where undefined.

    With O = C / n and E = r c^T / n^2 the ratio sum(w O) / sum(w E) equals
    n * sum(d C) / sum(d r c^T) for d = |i - j|: integers until the last division.
    """
    n = counts.sum(axis=(1, 2))
    observed = (counts * _DISTANCE).sum(axis=(1, 2))
    rows, cols = counts.sum(axis=2), counts.sum(axis=1)
    expected = np.einsum("mi,mj,ij->m", rows, cols, _DISTANCE)
    kappas = np.full(len(counts), np.nan)
    defined = expected > 0
    kappas[defined] = 1.0 - (n[defined] * observed[defined]) / expected[defined]
    return kappas
