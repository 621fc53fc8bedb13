"""The statistics' inputs from histograms (count per distinct value) instead of lists of values.

Weekly rollups (issue 22) keep, per week and stratum, how many judged answers had each score
(and each (points, claims) pair), not the answers themselves. The functions here turn such a
histogram into exactly what the list-based functions build from the list it describes:
`sums_from_counts` gives `summarize`'s `StratumSums`, `claim_share_from_counts` gives
`claim_share`'s estimate. Exactly means the same floats, not nearly the same, so that every
estimate, interval, light and `too_few` read from rollups is the one read from the raw rows.

Why the floats agree: `summarize` takes ``math.fsum`` of the values, which is the exact sum
correctly rounded, whatever the order. Here a value v counted k times enters as the terms
v·2^j for each set bit j of k; multiplying by a power of two is exact in binary floating
point, so these terms add up exactly to k·v, and fsum rounds the same exact sum to the same
float. The mean is then the same division, each deviation (v − ȳ)² the same float operations
on the same operands, and their sum the same exact sum again. About twenty terms per
distinct value for counts up to a million, whatever the number of answers.

Plain Python on purpose (no django, no openai): the selectors feed it plain values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral

from dashboard.domain.statistics.cells import (
    SHARE_LOST,
    Cell,
    Estimate,
    StratumSums,
    check_size,
    estimate_cells,
    unit,
)


@dataclass(frozen=True, slots=True)
class ClaimCounts:
    """`ClaimStratum` as a histogram: how many judged answers had each (points, claims) pair.

    The pairs are `ClaimStratum.answers`' (an answer without claims is (0.0, 0)); a rollup that
    keeps doubled points as an integer halves them first, which is exact.
    """

    size: int  # N_h
    counts: Mapping[tuple[float, int], int]  # (supported points, claims) → judged answers
    drawn: bool = True  # as Stratum.drawn


def sums_from_counts(counts: Mapping[float, int], *, size: int, drawn: bool) -> StratumSums:
    """`summarize(Stratum(size, values, drawn))` for the values that ``counts`` describes
    (value → how many judged answers had it), with the same floats.

    Values are checked as `summarize` checks them (in [0, 1], not NaN), also those counted
    0 times; counts must be integers of at least 0, and their sum at most ``size`` (with a
    list, the estimators refuse that later; a histogram is refused at once).
    """
    items = [(unit(v), _count(k)) for v, k in counts.items()]
    n = sum(k for _, k in items)
    check_size(size, n)
    total = math.fsum(_terms(items))
    mean = total / n if n else 0.0
    sq_dev = math.fsum(_terms([((v - mean) ** 2, k) for v, k in items])) if n else 0.0
    return StratumSums(size, n, total, sq_dev, drawn)


def indicator_counts(
    counts: Mapping[float, int], predicate: Callable[[float], bool]
) -> dict[float, int]:
    """The histogram of `indicator_strata`'s values: {1.0: answers whose value satisfies
    ``predicate``, 0.0: the others} (values checked as `sums_from_counts` checks them)."""
    out = {1.0: 0, 0.0: 0}
    for v, k in counts.items():
        out[1.0 if predicate(unit(v)) else 0.0] += _count(k)
    return out


def claim_share_from_counts(
    strata: Sequence[ClaimCounts], *, confidence: float = 0.95
) -> Estimate:
    """`claim_share` of the answers these histograms describe, with the same floats."""
    return estimate_cells([_claim_cell_from_counts(s) for s in strata], confidence, ratio=True)


def _claim_cell_from_counts(s: ClaimCounts) -> Cell:
    """The `Cell` that `claim_share` builds from the answers the histogram describes."""
    items: list[tuple[float, float, int]] = []
    for (a, m), k in s.counts.items():
        # The checks and conversions of `claim_share`, per distinct pair.
        if not (isinstance(m, Integral) and m >= 0):
            raise ValueError(f"number of claims must be an integer of at least 0, not {m!r}")
        if not 0 <= a <= m:
            raise ValueError(f"supported points must be between 0 and {m}, not {a!r}")
        items.append((float(a), float(m), _count(k)))
    n = sum(k for _, _, k in items)
    check_size(s.size, n)
    a_sum = math.fsum(_terms([(a, k) for a, _, k in items]))
    m_sum = math.fsum(_terms([(m, k) for _, m, k in items]))
    a_mean, m_mean = (a_sum / n, m_sum / n) if n else (0.0, 0.0)
    return Cell(
        int(s.size), n, a_sum, m_sum,
        math.fsum(_terms([((a - a_mean) ** 2, k) for a, _, k in items])),
        math.fsum(_terms([((m - m_mean) ** 2, k) for _, m, k in items])),
        math.fsum(_terms([((a - a_mean) * (m - m_mean), k) for a, m, k in items])),
        s.drawn, lost=SHARE_LOST,
    )


def _count(k: int) -> int:
    if isinstance(k, bool) or not isinstance(k, Integral) or k < 0:
        raise ValueError(f"a count must be an integer of at least 0, not {k!r}")
    return int(k)  # a numpy integer becomes Python's, for the bit loop and for n


def _terms(weighted: Sequence[tuple[float, int]]) -> Iterator[float]:
    """x·k for each (x, k) as exact terms x·2^j, one per set bit j of k (ldexp is exact)."""
    for x, k in weighted:
        j = 0
        while k:
            if k & 1:
                yield math.ldexp(x, j)
            k >>= 1
            j += 1
