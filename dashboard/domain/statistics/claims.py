"""The claim-level share of supported claims: a stratified ratio of points to claims."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

from dashboard.domain.statistics.cells import (
    SHARE_LOST,
    Cell,
    Estimate,
    check_size,
    estimate_cells,
)


@dataclass(frozen=True, slots=True)
class ClaimStratum:
    """One stratum for the claim-level share: per judged answer (supported points, claims)."""

    size: int  # N_h
    answers: Sequence[tuple[float, int]]  # GEDECKT = 1 and TEILWEISE = 0.5 points per claim
    drawn: bool = True  # as Stratum.drawn


def claim_share(strata: Sequence[ClaimStratum], *, confidence: float = 0.95) -> Estimate:
    """Claim-level share of supported claims as a stratified (combined) ratio estimator.

    R = Σ_h W_h·ā_h / Σ_h W_h·m̄_h, with ā_h the mean supported points and m̄_h the mean number
    of claims per judged answer of stratum h: the estimated population totals of points and of
    claims, divided. Answers are the sampling units, so claims of one answer are not treated as
    independent. The variance is the usual linearisation: the stratified variance of the
    residuals z_i = (a_i − R·m_i)/m̄, with the same Jeffreys pseudo-answer per sampled stratum
    (one claim, half supported and half unsupported) so that a sample in which every claim is
    supported still gets an interval. Answers without claims (abstentions) count in N_h but
    add no claims. ``value`` is None when no judged answer has a claim. The interval is Wilson
    on the whole ratio (a ratio has no fixed part to split off).
    """
    return estimate_cells([_claim_cell(s) for s in strata], confidence, ratio=True)


def _claim_cell(s: ClaimStratum) -> Cell:
    """A stratum's answers as the ratio's cell: n, Σa, Σm and their (co)deviations."""
    points: list[float] = []
    claims: list[float] = []
    for a, m in s.answers:
        if not (isinstance(m, Integral) and m >= 0):
            raise ValueError(f"number of claims must be an integer of at least 0, not {m!r}")
        if not 0 <= a <= m:
            raise ValueError(f"supported points must be between 0 and {m}, not {a!r}")
        points.append(float(a))
        claims.append(float(m))  # Integral: numpy integers are fine too
    check_size(s.size, len(points))
    n = len(points)
    a_sum, m_sum = math.fsum(points), math.fsum(claims)
    a_mean, m_mean = (a_sum / n, m_sum / n) if n else (0.0, 0.0)
    return Cell(
        int(s.size), n, a_sum, m_sum,
        math.fsum([(a - a_mean) ** 2 for a in points]),
        math.fsum([(m - m_mean) ** 2 for m in claims]),
        math.fsum([(a - a_mean) * (m - m_mean) for a, m in zip(points, claims, strict=True)]),
        s.drawn, lost=SHARE_LOST,
    )
