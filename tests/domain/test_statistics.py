"""Weekly estimates (dashboard.domain.statistics) against values computed by hand.

z = 1.959964 at 95 %, z² = 3.841459. Wilson for a share p with (effective) sample size n:
centre = (p + z²/2n)/(1 + z²/n), half-width = z·√(p(1−p)/n + z²/4n²)/(1 + z²/n).
"""

import math

import numpy as np
import pytest

from dashboard.domain.statistics.cells import (
    MIN_JUDGED,
    SHARE_PRIOR,
    Estimate,
    Stratum,
    StratumSums,
    summarize,
    wilson,
    wilson_interval,
    z_value,
)
from dashboard.domain.statistics.claims import ClaimStratum, claim_share
from dashboard.domain.statistics.estimates import (
    POOLED_PRIOR,
    SCORE_PRIOR,
    fit_pooled,
    indicator_strata,
    mean_from_sums,
    pooled_mean,
    share_below,
    stratified_mean,
    stratified_share,
    week_strata,
)
from dashboard.domain.statistics.lift import Lift, lift
from dashboard.domain.statistics.precision import (
    DECISIVE_HALF_WIDTH,
    UNDECIDED_WIDTH,
    sample_rate_for,
    traffic_light,
    trend,
    week_precision,
    weeks_to_decide,
)

approx = pytest.approx


# --- wilson ---------------------------------------------------------------------------------

# (id, successes, n, confidence, low, high)
WILSON_CASES = [
    # p = 0.8: centre = (0.8 + 0.192073)/1.384146 = 0.716741; half = 1.959964·√(0.016 +
    # 0.009604)/1.384146 = 0.226579
    ("8 of 10", 8, 10, 0.95, 0.4902, 0.9433),
    # z = 1.644854, z² = 2.705543: centre = (0.8 + 0.135277)/1.270554 = 0.736117; half =
    # 1.644854·√(0.016 + 0.006764)/1.270554 = 0.195325
    ("8 of 10 at 90 %", 8, 10, 0.90, 0.5408, 0.9314),
    # p = 0: low exactly 0, high = z²/n/(1 + z²/n) = 0.384146/1.384146 = 0.277533
    ("0 of 10", 0, 10, 0.95, 0.0, 0.2775),
    # p = 1: high exactly 1, low = n/(n + z²) = 10/13.841459 = 0.722467
    ("10 of 10", 10, 10, 0.95, 0.7225, 1.0),
    # symmetric: half = 1.959964·√(0.025 + 0.009604)/1.384146 = 0.263407
    ("5 of 10", 5, 10, 0.95, 0.2366, 0.7634),
    # fractional counts (effective sizes): p = 0.5, n = 9, z²/n = 0.426829;
    # half = 1.959964·√(0.027778 + 0.011856)/1.426829 = 0.273471
    ("4.5 of 9", 4.5, 9, 0.95, 0.2265, 0.7735),
    # a single success: low = 1/(1 + 3.841459) = 0.206549
    ("1 of 1", 1, 1, 0.95, 0.2065, 1.0),
    ("nothing", 0, 0, 0.95, 0.0, 1.0),
]


@pytest.mark.parametrize(
    ("successes", "n", "confidence", "low", "high"),
    [c[1:] for c in WILSON_CASES],
    ids=[c[0] for c in WILSON_CASES],
)
def test_wilson(successes, n, confidence, low, high):
    assert wilson(successes, n, confidence=confidence) == (
        approx(low, abs=1e-4),
        approx(high, abs=1e-4),
    )


@pytest.mark.parametrize(
    ("successes", "n", "confidence"),
    [(11, 10, 0.95), (-1, 10, 0.95), (1, -1, 0.95), (1, math.nan, 0.95), (1, math.inf, 0.95),
     (5, 10, 1.0), (5, 10, 0.0), (5, 10, math.nan)],
)
def test_wilson_rejects_nonsense(successes, n, confidence):
    with pytest.raises(ValueError):
        wilson(successes, n, confidence=confidence)


def test_z_value():
    assert z_value(0.95) == approx(1.959964, abs=1e-6)
    assert z_value(0.90) == approx(1.644854, abs=1e-6)


# --- stratified_mean --------------------------------------------------------------------------

FLAGGED_10 = [1.0] * 6 + [0.5] * 2 + [0.0] * 2
UNFLAGGED_30 = [1.0] * 27 + [0.5] * 3


def test_two_strata_by_hand():
    # N_flagged = 10, all judged: 6×1, 2×0.5, 2×0 → ȳ_f = 7/10 = 0.7.
    # N_unflagged = 990, 30 judged: 27×1, 3×0.5 → ȳ_u = 28.5/30 = 0.95.
    # W_f = 0.01, W_u = 0.99 → estimate = 0.007 + 0.9405 = 0.9475.
    # (The naive mean of the 40 judged answers would be 35.5/40 = 0.8875: biased.)
    # Variance: the flagged stratum is judged in full, fpc = 0, it adds nothing.
    # Unflagged with a week's pseudo-answer, weight k = 0.05 (0.025 at 1, 0.025 at 0):
    #   p̃_u = (28.5 + 0.025)/30.05 = 0.949251.
    #   Σ(y − p̃)² + 0.025(1 − p̃)² + 0.025p̃² = 27·0.050749² + 3·0.449251² + 0.025·0.050749²
    #                                          + 0.025·0.949251² = 0.697608
    #   over the n − 1 degrees of freedom plus k: s̃² = 0.697608/29.05 = 0.0240141
    # V = 0.99² · (1 − 30/990) · s̃²/30 = 0.9801 · 0.969697 · 0.000800468 = 0.000760765
    # The flagged stratum is the fixed part, 0.01·0.7 = 0.007; Wilson is taken on the drawn
    # part's own mean p_S = 0.95 with p̃_S = 0.949251 and W_S = 0.99:
    # n_eff = p̃_S(1 − p̃_S)·W_S²/V = 0.0481731·0.9801/0.000760765 = 62.0621.
    # Wilson(0.95, 62.0621): z²/n = 0.061897; centre = (0.95 + 0.030949)/1.061897 = 0.923770;
    # half = 0.058794 → (0.864976, 0.982564);
    # back on the week's scale: 0.007 + 0.99·(0.864976, 0.982564) = (0.8633, 0.9797).
    e = stratified_mean([Stratum(10, FLAGGED_10), Stratum(990, UNFLAGGED_30)])
    assert e.value == approx(0.9475, abs=1e-12)
    assert (e.low, e.high) == (approx(0.8633, abs=1e-4), approx(0.9797, abs=1e-4))
    assert (e.n, e.population, e.n_by_stratum, e.too_few) == (40, 1000, (10, 30), False)


def test_all_ones_never_collapse():
    # Same sizes, every judged value 1.0: estimate 1.0 (no bias from the prior).
    # Drawn part: p̃_S = 30.025/30.05; its squares about p̃_S are 30.05·p̃_S(1 − p̃_S) (those
    # of 30 ones and the pseudo-answer), over 29.05: s̃² = p̃_S(1 − p̃_S)·30.05/29.05, so
    # n_eff = 30·(29.05/30.05)/(1 − 30/990) = 29.9080; at p = 1 Wilson's low is
    # n/(n + z²) = 29.9080/33.7495 = 0.886177; on the week's scale 0.01 + 0.99·0.886177 = 0.8873.
    e = stratified_mean([Stratum(10, [1.0] * 10), Stratum(990, [1.0] * 30)])
    assert e.value == 1.0
    assert e.low == approx(0.8873, abs=1e-4)
    assert e.high == 1.0


@pytest.mark.parametrize("n", [1, 2, 5, 9, 17, 30, 210, 900])
@pytest.mark.parametrize("size", [1_000, 100_000])
def test_all_ones_interval_has_width_and_stays_in_unit_interval(n, size):
    e = stratified_mean([Stratum(50, [1.0] * 50), Stratum(size, [1.0] * n)])
    assert e.value == 1.0
    assert e.low is not None and e.high is not None
    assert 0.0 <= e.low < e.high == 1.0
    if size >= 100 * n:
        # Without a finite population correction, roughly the rule of three: 1 − low ≈ 3.8/n.
        assert 1 - e.low > 1 / (n + 10)


def test_all_zero_interval_is_mirrored():
    ones = stratified_mean([Stratum(10, [1.0] * 10), Stratum(990, [1.0] * 30)])
    zeros = stratified_mean([Stratum(10, [0.0] * 10), Stratum(990, [0.0] * 30)])
    assert zeros.value == 0.0
    assert zeros.low == 0.0
    assert ones.low is not None
    assert zeros.high == approx(1 - ones.low, abs=1e-12)


def test_one_binary_stratum_is_wilson_on_half_a_degree_less():
    # For 0/1 values the squares about p̃ = 8.5/11 are 11·p̃(1 − p̃) (the 10 values and
    # Jeffreys' pseudo-answer); over n + 1 − ½ = 10.5, s̃² = p̃(1 − p̃)·11/10.5, so
    # n_eff = 10·10.5/11 = 9.5455 (the textbook interval would take 10). The fpc (1 − 10/10⁹)
    # is invisible at this precision. Wilson(0.8, 9.5455) = (0.4830, 0.9448); Wilson(8 of 10)
    # is (0.4902, 0.9433).
    e = stratified_share([Stratum(1_000_000_000, [1] * 8 + [0] * 2)])
    assert e.value == 0.8
    assert (e.low, e.high) == (approx(0.4830, abs=1e-4), approx(0.9448, abs=1e-4))
    assert (e.low, e.high) == tuple(
        approx(x) for x in wilson_interval(0.8, 10 * 10.5 / 11, z_value(0.95)))


def test_a_mean_of_scores_takes_a_small_pseudo_answer_over_its_degrees_of_freedom():
    # A share of 0/1 values takes Jeffreys' whole pseudo-answer over n + ½: Wilson on
    # n_eff = 30·30.5/31.
    values = [1] * 26 + [0] * 4
    share = stratified_share([Stratum(1_000_000_000, values)])
    assert (share.low, share.high) == tuple(
        approx(x) for x in wilson_interval(26 / 30, 30 * 30.5 / 31, z_value(0.95)))
    # Scores near 1 with partial values: Σ(y − ȳ)² = 0.216667 is small beside a whole
    # pseudo-answer's spread (½ at 0, ½ at 1), which would widen the interval by itself.
    # The mean takes a twentieth of one over its n − 1 degrees of freedom, as written out in
    # _interval_with_prior.
    scores = [1.0] * 26 + [0.75] * 4
    mean = stratified_mean([Stratum(1_000_000_000, scores)])
    assert mean.value == approx(0.966667, abs=1e-6)
    low, high = _interval_with_prior(scores, 0.05, lost=1)
    assert (mean.low, mean.high) == (approx(low, abs=1e-12), approx(high, abs=1e-12))
    whole = _interval_with_prior(scores, 1.0)
    assert mean.low is not None and mean.high is not None
    assert mean.high - mean.low < 0.8 * (whole[1] - whole[0])


def _interval_with_prior(values: list[float], k: float, lost: float = 0.0
                         ) -> tuple[float, float]:
    """One stratum's interval written out: a pseudo-answer of weight k, half at 1 and half at 0,
    the squares over n − lost + k, no finite population correction (N is 10⁹), Wilson on
    n_eff = p̃(1 − p̃)/(s̃²/n)."""
    n = len(values)
    p_tilde = (sum(values) + k / 2) / (n + k)
    spread = (sum((v - p_tilde) ** 2 for v in values)
              + k / 2 * ((1 - p_tilde) ** 2 + p_tilde**2)) / (n - lost + k)
    variance = spread / n * (1 - n / 1_000_000_000)
    low, high = wilson_interval(sum(values) / n, p_tilde * (1 - p_tilde) / variance,
                                z_value(0.95))
    return low, high


def test_finite_population_correction():
    # Half the stratum judged (80 of 100 judged are 1, N = 200): V is halved, n_eff =
    # 2·100·100.5/101 = 199.0099 (see test_one_binary_stratum_is_wilson_on_half_a_degree_less)
    # → Wilson(0.8, 199.0099) = (0.7390, 0.8497).
    half = stratified_share([Stratum(200, [1] * 80 + [0] * 20)])
    assert (half.low, half.high) == (approx(0.7390, abs=1e-4), approx(0.8497, abs=1e-4))
    assert (half.low, half.high) == tuple(
        approx(x) for x in wilson_interval(0.8, 2 * 100 * 100.5 / 101, z_value(0.95)))


def test_fully_judged_stratum_adds_no_variance():
    # Two flagged strata with the same mean (0.5), one spread 0/1, one all 0.5: judged in full
    # their spread does not matter, so the intervals are identical...
    unflagged = Stratum(990, UNFLAGGED_30)
    spread = stratified_mean([Stratum(10, [0.0, 1.0] * 5), unflagged])
    flat = stratified_mean([Stratum(10, [0.5] * 10), unflagged])
    assert spread == flat
    # ...while the same values as a sample of a larger stratum do widen the interval.
    sampled = stratified_mean([Stratum(20, [0.0, 1.0] * 5), Stratum(980, UNFLAGGED_30)])
    sampled_flat = stratified_mean([Stratum(20, [0.5] * 10), Stratum(980, UNFLAGGED_30)])
    assert sampled.low is not None and sampled.high is not None
    assert sampled_flat.low is not None and sampled_flat.high is not None
    assert sampled.high - sampled.low > sampled_flat.high - sampled_flat.low


def test_census_has_zero_width():
    # Every answer judged: the population mean is known, (7 + 20)/30 = 0.9.
    e = stratified_mean([Stratum(10, FLAGGED_10), Stratum(20, UNFLAGGED_30[:20])])
    assert e.value == approx(0.9)
    assert e.low == approx(e.value) and e.high == approx(e.value)
    assert e.low is not None and e.value is not None and e.high is not None
    assert e.low <= e.value <= e.high


def test_interval_is_cut_to_what_the_population_can_be():
    # 5 flagged answers all judged at 0.0 and 5 unflagged with 4 judged at 1.0: the one unjudged
    # answer scores in [0, 1], so the mean is in [4/10, 5/10]; Wilson alone would reach higher.
    e = stratified_mean([Stratum(5, [0.0] * 5), Stratum(5, [1.0] * 4)])
    assert e.value == 0.5
    assert e.high == 0.5
    assert e.low is not None
    assert 0.4 <= e.low < 0.5


# (id, strata, value, n, population, n_by_stratum, too_few)
EDGE_CASES = [
    ("empty week", [Stratum(0, []), Stratum(0, [])], None, 0, 0, (0, 0), True),
    ("no strata", [], None, 0, 0, (), True),
    ("nothing judged", [Stratum(3, []), Stratum(200, [])], None, 0, 203, (0, 0), True),
    # The unflagged stratum's mean is unknown: leaving it out would report the flagged mean.
    ("unflagged stratum unjudged", [Stratum(12, [0.5] * 12), Stratum(300, [])], None, 12, 312,
     (12, 0), True),
    ("flagged stratum unjudged", [Stratum(12, []), Stratum(300, [1.0] * 12)], None, 12, 312,
     (0, 12), True),
    # An empty flagged stratum is fine: nothing to estimate there.
    ("no flagged answers", [Stratum(0, []), Stratum(300, [1.0] * 12)], 1.0, 12, 300, (0, 12),
     False),
    ("one under the minimum", [Stratum(0, []), Stratum(300, [1.0] * (MIN_JUDGED - 1))], 1.0,
     MIN_JUDGED - 1, 300, (0, MIN_JUDGED - 1), True),
    ("exactly the minimum", [Stratum(0, []), Stratum(300, [1.0] * MIN_JUDGED)], 1.0,
     MIN_JUDGED, 300, (0, MIN_JUDGED), False),
    # Thirteen judged, but the unflagged 96 % of the week rest on a single random answer.
    ("one random answer beside the flagged census", [Stratum(12, [0.5] * 12), Stratum(300, [1.0])],
     (12 * 0.5 + 300 * 1.0) / 312, 13, 312, (12, 1), True),
    ("a random stratum one under the minimum",
     [Stratum(12, [0.5] * 12), Stratum(300, [1.0] * (MIN_JUDGED - 1))],
     (12 * 0.5 + 300 * 1.0) / 312, 12 + MIN_JUDGED - 1, 312, (12, MIN_JUDGED - 1), True),
    ("a random stratum at the minimum",
     [Stratum(12, [0.5] * 12), Stratum(300, [1.0] * MIN_JUDGED)],
     (12 * 0.5 + 300 * 1.0) / 312, 12 + MIN_JUDGED, 312, (12, MIN_JUDGED), False),
    # A stratum judged in full is exact however small; it needs no minimum of its own.
    ("a small census stratum", [Stratum(3, [0.0, 0.5, 1.0]), Stratum(300, [1.0] * MIN_JUDGED)],
     (1.5 + 300) / 303, 3 + MIN_JUDGED, 303, (3, MIN_JUDGED), False),
    # A small stratum drawn from: all of it, or it is too few (n = 25 alone would be enough).
    ("a small stratum partly judged", [Stratum(20, [1.0] * 20, drawn=False),
                                       Stratum(6, [1.0] * 5)], 1.0, 25, 26, (20, 5), True),
    # A stratum judged in full but for a run still pending or failed is no sample: no minimum.
    ("the flagged census short of one run",
     [Stratum(9, [0.5] * 8, drawn=False), Stratum(300, [1.0] * 40)],
     (9 * 0.5 + 300 * 1.0) / 309, 48, 309, (8, 40), False),
]


@pytest.mark.parametrize(
    ("strata", "value", "n", "population", "n_by", "too_few"),
    [c[1:] for c in EDGE_CASES],
    ids=[c[0] for c in EDGE_CASES],
)
def test_edge_cases(strata, value, n, population, n_by, too_few):
    e = stratified_mean(strata)
    assert (e.n, e.population, e.n_by_stratum, e.too_few) == (n, population, n_by, too_few)
    assert e.value == (None if value is None else pytest.approx(value, abs=1e-12))
    if value is None:
        assert e.low is None and e.high is None
    else:
        assert e.low is not None and e.value is not None and e.high is not None
        assert 0 <= e.low <= e.value <= e.high <= 1


def test_min_judged_is_ten():
    assert MIN_JUDGED == 10


@pytest.mark.parametrize(
    "strata",
    [
        [Stratum(10, [1.5])],
        [Stratum(10, [-0.1])],
        [Stratum(10, [math.nan])],
        [Stratum(1, [1.0, 1.0])],  # more judged answers than the stratum has
        [Stratum(-1, [])],
        [Stratum(2.5, [1.0])],  # type: ignore[arg-type]  # a fractional count, on purpose
    ],
)
def test_mean_rejects_nonsense(strata):
    with pytest.raises(ValueError):
        stratified_mean(strata)


def test_share_rejects_non_indicators():
    with pytest.raises(ValueError):
        stratified_share([Stratum(10, [1, 0, 0.5])])


def test_share_by_hand():
    # Share of answers below 0.85: flagged 10 judged in full, 4 below → 0.4;
    # unflagged 990, 30 judged, 3 below → 0.1. Estimate = 0.01·0.4 + 0.99·0.1 = 0.103.
    strata = indicator_strata(
        [Stratum(10, FLAGGED_10), Stratum(990, UNFLAGGED_30)], lambda v: v < 0.85
    )
    assert [list(s.values) for s in strata] == [
        [0.0] * 6 + [1.0] * 4,
        [0.0] * 27 + [1.0] * 3,
    ]
    # The flagged census is the fixed part, 0.01·0.4 = 0.004. The drawn part (unflagged,
    # W_S = 0.99): 0/1 values, so s̃² = p̃(1 − p̃)·31/30.5 and
    # n_eff = 30·(30.5/31)/(1 − 30/990) = 30.4385.
    # Wilson(0.1, 30.4385): z²/n = 0.126204; centre = (0.1 + 0.063102)/1.126204 = 0.144825;
    # half = 1.959964·√(0.00295679 + 0.00103668)/1.126204 = 0.109976 → (0.034848, 0.254801);
    # on the week's scale 0.004 + 0.99·(0.034848, 0.254801) = (0.0385, 0.2563). (Taken on the
    # whole week, as before, the interval's top was pulled down toward the flagged stratum's
    # share, and the truth lay above it too often.)
    e = stratified_share(strata)
    assert e.value == approx(0.103)
    assert (e.low, e.high) == (approx(0.0385, abs=1e-4), approx(0.2563, abs=1e-4))


def test_week_strata():
    rows = [(True, 0.5), (True, None), (False, 1.0), (False, None), (False, None), (True, 0.0)]
    flagged, unflagged = week_strata(rows)
    assert (flagged.size, list(flagged.values)) == (3, [0.5, 0.0])
    assert (unflagged.size, list(unflagged.values)) == (3, [1.0])
    assert [s.size for s in week_strata([])] == [0, 0]


# --- claim_share ---------------------------------------------------------------------------


def test_claim_share_by_hand():
    # Flagged N = 4, all judged: (points, claims) = (2,4) (1,2) (0,1) (3,3): Σa = 6, Σm = 10.
    # Unflagged N = 96, 5 judged: (2,2) (3,3) (1.5,2) (1,1) and an abstention (0,0):
    # Σa = 7.5, Σm = 8. W = 0.04, 0.96.
    # R = (0.04·6/4 + 0.96·7.5/5)/(0.04·10/4 + 0.96·8/5) = 1.5/1.636 = 0.9168704.
    # Shrunk (pseudo-answer of one claim, ½ supported, in the unflagged stratum only):
    #   ã = 8/6, m̃ = 9/6 → R̃ = (0.06 + 1.28)/(0.1 + 1.44) = 1.34/1.54 = 0.8701299.
    # Residuals a − R̃m: 0.259740, 0.389610, −0.240260, 0.129870, 0; pseudo ½·0.129870 and
    #   ½·(−0.870130). Weighted mean 0.168831/6 = 0.028139; Σw(r − mean)² = 0.676098;
    #   over 5 + 1 − ½ (a share's half degree): s̃² = 0.676098/5.5/1.54² = 0.0518329.
    # V = 0.96²·(1 − 5/96)·0.0518329/5 = 0.8736·0.0103666 = 0.00905624.
    # n_eff = 0.8701299·0.1298701/0.00905624 = 12.4780.
    # Wilson(0.9168704, 12.4780): z²/n = 0.307858; centre = 1.070800/1.307858 = 0.818743;
    # half = 1.959964·√(0.0061083 + 0.0061680)/1.307858 = 0.166043 → (0.6527, 0.9848).
    e = claim_share(
        [
            ClaimStratum(4, [(2, 4), (1, 2), (0, 1), (3, 3)]),
            ClaimStratum(96, [(2, 2), (3, 3), (1.5, 2), (1, 1), (0, 0)]),
        ]
    )
    assert e.value == approx(1.5 / 1.636)
    assert (e.low, e.high) == (approx(0.6527, abs=1e-4), approx(0.9848, abs=1e-4))
    assert (e.n, e.population, e.n_by_stratum, e.too_few) == (9, 100, (4, 5), True)


def test_claim_share_with_one_claim_per_answer_is_the_share():
    # One claim per answer, each supported or not: the claims' share is the answers' share,
    # with the same Jeffreys pseudo-answer. Without a stratum judged in full both are Wilson on
    # the whole ratio. (With one, the share takes the census as a fixed part and Wilson on the
    # drawn part; a ratio has no such part.)
    unflagged = [1] * 26 + [0] * 4
    flagged = [1] * 6 + [0] * 4
    assert claim_share([
        ClaimStratum(20, [(v, 1) for v in flagged]),
        ClaimStratum(990, [(v, 1) for v in unflagged]),
    ]) == approx_estimate(stratified_share([Stratum(20, flagged), Stratum(990, unflagged)]))


def approx_estimate(e: Estimate) -> Estimate:
    # approx() objects in place of the floats: equal to any float within the tolerance.
    value, low, high = approx(e.value), approx(e.low), approx(e.high)
    return Estimate(value, low, high,  # type: ignore[arg-type]  # approx() in place of floats
                    e.n, e.population, e.n_by_stratum, e.too_few)


def test_claim_share_weights_claims_not_answers():
    # Census: (1 of 1) and (0 of 4) → 1/5 of claims supported (the mean of scores would be 0.5).
    e = claim_share([ClaimStratum(2, [(1, 1), (0, 4)])])
    assert e.value == approx(0.2)
    assert e.low == approx(e.value) and e.high == approx(e.value)
    assert e.low is not None and e.value is not None and e.high is not None
    assert e.low <= e.value <= e.high


def test_claim_share_all_supported_has_width():
    e = claim_share([ClaimStratum(10, [(3, 3)] * 10), ClaimStratum(500, [(4, 4)] * 15)])
    assert e.value == 1.0
    assert e.low is not None
    assert 0.8 < e.low < 1.0 == e.high


@pytest.mark.parametrize(
    ("strata", "n"),
    [
        ([ClaimStratum(5, [(0, 0)] * 5)], 5),  # only abstentions: no claim to share
        ([ClaimStratum(5, []), ClaimStratum(20, [(1, 1)] * 3)], 3),
        ([], 0),
    ],
)
def test_claim_share_undefined(strata, n):
    e = claim_share(strata)
    assert (e.value, e.low, e.high, e.n, e.too_few) == (None, None, None, n, True)


@pytest.mark.parametrize("answer", [(3, 2), (-1, 2), (1, -1), (0.5, 1.5), (math.nan, 2)])
def test_claim_share_rejects_nonsense(answer):
    with pytest.raises(ValueError):
        claim_share([ClaimStratum(10, [answer])])


# --- lift ---------------------------------------------------------------------------------------

# (id, kwargs, flagged share, random share, lift, low, high, too_few)
LIFT_CASES = [
    # 10/50 = 0.2 vs 5/100 = 0.05 → 4; Var(log) = 1/10 − 1/50 + 1/5 − 1/100 = 0.27,
    # z·√0.27 = 1.018433 → 4·e^∓1.018433 = (1.4447, 11.0753).
    ("Katz", dict(flagged_bad=10, flagged_n=50, random_bad=5, random_n=100), 0.2, 0.05,
     4.0, 1.4447, 11.0753, False),
    # No unfaithful random answer: 0.5 added to every cell → (3.5/21)/(0.5/201) = 67.0;
    # Var = 1/3.5 − 1/21 + 1/0.5 − 1/201 = 2.233120, z·√ = 2.928899 → (3.5815, 1253.37).
    ("zero random", dict(flagged_bad=3, flagged_n=20, random_bad=0, random_n=200), 0.15, 0.0,
     67.0, 3.5815, 1253.37, False),
    # No unfaithful flagged answer: (0.5/31)/(6.5/101) = 0.250620;
    # Var = 1/0.5 − 1/31 + 1/6.5 − 1/101 = 2.111687, z·√ = 2.848152 → (0.01452, 4.3247).
    ("zero flagged", dict(flagged_bad=0, flagged_n=30, random_bad=6, random_n=100), 0.0, 0.06,
     0.250620, 0.01452, 4.3247, False),
    ("both zero", dict(flagged_bad=0, flagged_n=30, random_bad=0, random_n=100), 0.0, 0.0,
     None, None, None, True),
    ("no flagged answers", dict(flagged_bad=0, flagged_n=0, random_bad=3, random_n=100), None,
     0.03, None, None, None, True),
    ("no random answers", dict(flagged_bad=2, flagged_n=9, random_bad=0, random_n=0), 2 / 9,
     None, None, None, None, True),
    # 3/9 vs 1/12 → 4; Var = 1/3 − 1/9 + 1 − 1/12 = 1.138889, z·√ = 2.091653 → (0.4938, 32.40)
    ("few flagged", dict(flagged_bad=3, flagged_n=9, random_bad=1, random_n=12), 1 / 3, 1 / 12,
     4.0, 0.4938, 32.40, True),
    # Nested (the tuner): 10/50 of 15/100, the rest 5/50. p_F = 0.2, p_A = 0.15, share = 0.5,
    # p_R = 0.1: Var = (1/0.2 − 0.5/0.15)²·0.2·0.8/50 + (0.5/0.15)²·0.1·0.9/50
    # = 2.777778·0.0032 + 11.111111·0.0018 = 0.0288889, z·√ = 0.333131
    # → 1.333333·e^∓0.333131 = (0.9556, 1.8604). Katz would give Var = 0.1 − 0.02 + 0.0667 −
    # 0.01 = 0.1367, more than four times too wide for a subset.
    ("nested", dict(flagged_bad=10, flagged_n=50, random_bad=15, random_n=100, nested=True),
     0.2, 0.15, 4 / 3, 0.9556, 1.8604, False),
    # Nested, flagged = the whole sample: the ratio is 1 by construction, no variance.
    ("nested all", dict(flagged_bad=7, flagged_n=40, random_bad=7, random_n=40, nested=True),
     0.175, 0.175, 1.0, 1.0, 1.0, False),
]


@pytest.mark.parametrize(
    ("kwargs", "flagged_share", "random_share", "value", "low", "high", "too_few"),
    [c[1:] for c in LIFT_CASES],
    ids=[c[0] for c in LIFT_CASES],
)
def test_lift(kwargs, flagged_share, random_share, value, low, high, too_few):
    result = lift(**kwargs)
    assert isinstance(result, Lift)
    assert (result.flagged_n, result.random_n) == (kwargs["flagged_n"], kwargs["random_n"])
    assert result.flagged_share == (None if flagged_share is None else approx(flagged_share))
    assert result.random_share == (None if random_share is None else approx(random_share))
    if value is None:
        assert (result.lift, result.low, result.high) == (None, None, None)
    else:
        assert result.lift == approx(value, rel=1e-5)
        assert result.low == approx(low, rel=1e-3)
        assert result.high == approx(high, rel=1e-3)
    assert result.too_few is too_few


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(flagged_bad=5, flagged_n=4, random_bad=0, random_n=10),
        dict(flagged_bad=-1, flagged_n=4, random_bad=0, random_n=10),
        dict(flagged_bad=1.5, flagged_n=4, random_bad=0, random_n=10),
        # nested, but the flagged answers are not part of the random ones
        dict(flagged_bad=3, flagged_n=20, random_bad=2, random_n=100, nested=True),
        dict(flagged_bad=3, flagged_n=200, random_bad=20, random_n=100, nested=True),
    ],
)
def test_lift_rejects_nonsense(kwargs):
    with pytest.raises(ValueError):
        lift(**kwargs)


# --- traffic_light and trend ---------------------------------------------------------------


def est(value, low, high, too_few=False):
    return Estimate(value, low, high, 100, 1000, (20, 80), too_few)


# (id, estimate, threshold, colour). Grey only when the interval straddles the line AND is
# wider than UNDECIDED_WIDTH (0.10); how many answers it rests on does not grey it.
LIGHT_CASES = [
    ("interval below the line", est(0.80, 0.75, 0.84), 0.85, "red"),
    ("interval touches the line", est(0.80, 0.75, 0.85), 0.85, "amber"),
    ("estimate below, interval narrowly over", est(0.84, 0.80, 0.89), 0.85, "amber"),
    ("estimate below, interval 0.12 wide over the line", est(0.84, 0.78, 0.90), 0.85, "grey"),
    ("estimate on the line", est(0.85, 0.80, 0.90), 0.85, "green"),
    ("straddling exactly 0.10 wide is still decided", est(0.86, 0.80, 0.90), 0.85, "green"),
    ("estimate above, interval 0.13 wide under the line", est(0.88, 0.80, 0.93), 0.85, "grey"),
    ("estimate above, interval at the line", est(0.88, 0.85, 0.93), 0.85, "green"),
    ("well above", est(0.95, 0.92, 0.97), 0.85, "green"),
    # Too few answers, but the whole wide interval is below: that is evidence, it is red.
    ("too few, far below", est(0.30, 0.10, 0.50, too_few=True), 0.85, "red"),
    ("too few, wholly above", est(0.97, 0.86, 1.0, too_few=True), 0.85, "green"),
    ("too few and undecided", est(0.90, 0.60, 0.99, too_few=True), 0.85, "grey"),
    ("no estimate", Estimate(None, None, None, 0, 0, (0, 0), True), 0.85, "grey"),
]


@pytest.mark.parametrize(
    ("estimate", "threshold", "colour"),
    [c[1:] for c in LIGHT_CASES],
    ids=[c[0] for c in LIGHT_CASES],
)
def test_traffic_light(estimate, threshold, colour):
    assert traffic_light(estimate, threshold) == colour


# Previous week 0.90 in (0.86, 0.94): half-width 0.04, so "flat" within ±0.02.
PREVIOUS = est(0.90, 0.86, 0.94)

# (id, current, previous, direction)
TREND_CASES = [
    ("same", est(0.90, 0.85, 0.95), PREVIOUS, "flat"),
    ("small rise", est(0.915, 0.88, 0.95), PREVIOUS, "flat"),
    ("just flat", est(0.881, 0.84, 0.92), PREVIOUS, "flat"),
    ("just not flat", est(0.879, 0.84, 0.92), PREVIOUS, "down"),
    ("rise", est(0.93, 0.90, 0.96), PREVIOUS, "up"),
    ("fall", est(0.87, 0.83, 0.91), PREVIOUS, "down"),
    ("wide previous interval swallows a big change", est(0.80, 0.70, 0.90),
     est(0.90, 0.50, 1.00), "flat"),
    ("current too few", est(0.70, 0.40, 0.90, too_few=True), PREVIOUS, "none"),
    ("previous too few", est(0.90, 0.85, 0.95), est(0.5, 0.1, 0.9, too_few=True), "none"),
    ("previous missing", est(0.90, 0.85, 0.95), Estimate(None, None, None, 0, 0, (), True),
     "none"),
]


@pytest.mark.parametrize(
    ("current", "previous", "direction"),
    [c[1:] for c in TREND_CASES],
    ids=[c[0] for c in TREND_CASES],
)
def test_trend(current, previous, direction):
    assert trend(current, previous) == direction


def test_numpy_integers_are_accepted():
    flagged = Stratum(np.int64(10), FLAGGED_10)  # type: ignore[arg-type]  # numpy's, on purpose
    unflagged = Stratum(np.int64(990), UNFLAGGED_30)  # type: ignore[arg-type]  # numpy's, on purpose
    e = stratified_mean([flagged, unflagged])
    assert e == stratified_mean([Stratum(10, FLAGGED_10), Stratum(990, UNFLAGGED_30)])
    assert type(e.population) is int
    stratum = ClaimStratum(
        np.int64(5), [(1.0, np.int64(2))],  # type: ignore[arg-type, list-item]  # numpy's
    )
    shares = claim_share([stratum])
    assert shares.value == 0.5
    assert lift(
        flagged_bad=np.int64(10), flagged_n=np.int64(50),  # type: ignore[arg-type]  # numpy's
        random_bad=5, random_n=100,
    ) == lift(flagged_bad=10, flagged_n=50, random_bad=5, random_n=100)


def test_lift_interval_never_has_zero_width_when_a_part_is_pure() -> None:
    # Nested (tuner): 10 of 10 flagged unfaithful, 0 of 30 others: without the half-count
    # correction both parts have p(1 - p) = 0 and the interval would be the point 4.0.
    nested = lift(flagged_bad=10, flagged_n=10, random_bad=10, random_n=40, nested=True)
    assert nested.low is not None and nested.lift is not None and nested.high is not None
    assert nested.low < nested.lift < nested.high
    # Corrected counts: flagged 10.5/11, rest 0.5/31, all 11/42 -> lift (10.5/11)/(11/42).
    assert nested.lift == pytest.approx((10.5 / 11) / (11 / 42))
    # Independent groups, both entirely unfaithful: Katz's variance would be 0.
    katz = lift(flagged_bad=12, flagged_n=12, random_bad=20, random_n=20)
    assert katz.low is not None and katz.high is not None
    assert katz.low < 1.0 < katz.high


# --- sufficient statistics -----------------------------------------------------------------


def test_sums_give_the_same_estimate_as_the_values():
    strata = [Stratum(10, FLAGGED_10, drawn=False), Stratum(990, UNFLAGGED_30)]
    sums = [summarize(s) for s in strata]
    # FLAGGED_10: Σ = 7, mean 0.7, Σ(y − 0.7)² = 6·0.09 + 2·0.04 + 2·0.49 = 1.6.
    assert sums[0] == StratumSums(
        10, 10, 7.0, approx(1.6), drawn=False,  # type: ignore[arg-type]  # approx() as a float
    )
    assert mean_from_sums(sums) == stratified_mean(strata)
    # What a database would hand over: Σy² − (Σy)²/n.
    from_db = StratumSums(990, 30, 28.5, 27 + 3 * 0.25 - 28.5**2 / 30)
    assert mean_from_sums([sums[0], from_db]) == approx_estimate(stratified_mean(strata))


@pytest.mark.parametrize(
    "sums",
    [
        StratumSums(10, 11, 5.0, 0.0),  # more judged than the stratum has
        StratumSums(10, 5, 5.5, 0.0),  # a sum of 5 values in [0, 1] above 5
        StratumSums(10, 5, -0.1, 0.0),
        StratumSums(10, 5, 2.5, -0.1),
        StratumSums(10, 4, 2.0, 1.5),  # Σ(y − ȳ)² of 4 values in [0, 1] is at most 1
        StratumSums(10, 5, math.nan, 0.0),
        StratumSums(10, 2.5, 1.0, 0.0),  # type: ignore[arg-type]  # a fractional count, on purpose
    ],
)
def test_sums_reject_nonsense(sums):
    with pytest.raises(ValueError):
        mean_from_sums([sums])


# --- share below the action line ------------------------------------------------------------


def test_share_below_is_the_share_of_the_indicators():
    strata = [Stratum(10, FLAGGED_10, drawn=False), Stratum(990, UNFLAGGED_30)]
    e = share_below(strata, 0.85)
    assert e == stratified_share(indicator_strata(strata, lambda v: v < 0.85))
    assert (e.value, e.low, e.high) == (approx(0.103), approx(0.0385, abs=1e-4),
                                        approx(0.2563, abs=1e-4))
    # On the line is not below it.
    assert share_below([Stratum(4, [0.85, 0.85, 0.9, 0.5], drawn=False)], 0.85).value == 0.25
    with pytest.raises(ValueError):
        share_below(strata, math.nan)


# --- pooled weeks -----------------------------------------------------------------------------

POOL_WEEK_1 = [Stratum(5, [1.0, 0.5, 0.5, 1.0, 0.0], drawn=False),
               Stratum(95, [1.0] * 4 + [0.5])]
POOL_WEEK_2 = [Stratum(5, [1.0] * 5, drawn=False), Stratum(95, [1.0] * 5)]


def test_pooled_two_weeks_by_hand():
    # N = 200; cells W = 0.025 (flagged, judged in full: 0.6 and 1.0) and 0.475 (unflagged,
    # 5 of 95 judged each: 0.9 and 1.0). Value = 0.015 + 0.4275 + 0.025 + 0.475 = 0.9425.
    # Each week × stratum cell has a pseudo-answer of weight POOLED_PRIOR = 0.03; the sums of
    # squares about each week's shrunk mean:
    #   week 1: p̃ = (4.5 + 0.015)/5.03 = 0.8976143; 0.2 + 5·0.0023857² + 0.015·(0.1023857² +
    #           0.8976143²) = 0.2122714
    #   week 2: p̃ = 5.015/5.03 = 0.9970179; 5·0.0029821² + 0.015·(0.0029821² + 0.9970179²)
    #           = 0.0149553
    # The unflagged cells share one spread over their degrees of freedom, 2·(5 − 1 + 0.03):
    # 0.2272267/8.06 = 0.0281919; term per week 0.475²·(1 − 5/95)·0.0281919/5 = 0.00120520.
    # V = 0.00241041. Fixed part 0.04, W_S = 0.95, p_S = 0.95, p̃_S = 0.9473161;
    # n_eff = 0.9473161·0.0526839·0.95²/V = 18.6866. Wilson(0.95, 18.6866): z²/n = 0.205573;
    # centre 0.873266, half 0.118270 → 0.04 + 0.95·(0.754996, 0.991536) = (0.7572, 0.9820).
    e = pooled_mean([POOL_WEEK_1, POOL_WEEK_2])
    assert e.value == approx(0.9425, abs=1e-12)
    assert (e.low, e.high) == (approx(0.7572, abs=1e-4), approx(0.9820, abs=1e-4))
    # Each week alone is too few (5 random answers); pooled, the stratum has its ten.
    assert (e.n, e.population, e.n_by_stratum, e.too_few) == (20, 200, (10, 10), False)
    assert stratified_mean(POOL_WEEK_2).too_few


def test_pooled_weeks_share_their_stratum_spread_by_hand():
    # A week whose 8 random answers are all 1.0 and a week of 4 with a spread, 100 answers
    # each: W = 0.5 per cell, value = 0.5·1.0 + 0.5·0.625 = 0.8125. Pseudo-answers (0.03
    # each) and the sums of squares about each week's shrunk mean:
    #   week 1: p̃ = 8.015/8.03 = 0.9981320; 8·0.0018680² + 0.015·(0.0018680² + 0.9981320²)
    #           = 0.0149720
    #   week 2: p̃ = 2.515/4.03 = 0.6240695; 0.6875 + 4·0.0009305² + 0.015·(0.3759305² +
    #           0.6240695²) = 0.6954653
    # One spread for the stratum over its degrees of freedom (8 − 1 + 0.03) + (4 − 1 + 0.03):
    # 0.7104373/10.06 = 0.0706200. V = 0.25·0.92·0.07062/8 + 0.25·0.96·0.07062/4 = 0.00626753.
    # p̃_S = (0.9981320 + 0.6240695)/2 = 0.8111007; n_eff = 0.8111007·0.1888993/V = 24.4461.
    # Wilson(0.8125, 24.4461): z²/n = 0.157140, centre 0.770062, half 0.149964
    # → (0.6201, 0.9200).
    # Each cell with its own spread (before the spreads were pooled), week 1's answers claimed
    # almost none and week 2's four answers carried nearly all of V: (0.5564, 0.9374).
    weeks = [[Stratum(100, [1.0] * 8)], [Stratum(100, [1.0, 1.0, 0.5, 0.0])]]
    e = pooled_mean(weeks)
    assert e.value == approx(0.8125, abs=1e-12)
    assert (e.low, e.high) == (approx(0.6201, abs=1e-4), approx(0.9200, abs=1e-4))
    fit = fit_pooled(weeks)
    assert fit is not None
    assert fit.variance == approx(0.00626753, abs=1e-8)
    assert [spread for _, spread, *_ in fit.spreads] == [approx(0.0706200, abs=1e-7)] * 2
    # A week alone keeps its own spread: week 2 by itself is its stratified_mean.
    assert pooled_mean(weeks[1:]) == stratified_mean(weeks[1])


def test_pooling_one_week_is_the_week():
    assert pooled_mean([POOL_WEEK_1]) == stratified_mean(POOL_WEEK_1)
    sums = [[summarize(s) for s in week] for week in (POOL_WEEK_1, POOL_WEEK_2)]
    assert pooled_mean(sums) == pooled_mean([POOL_WEEK_1, POOL_WEEK_2])


def test_pooled_week_without_a_random_answer_collapses_its_stratum():
    # Week 2's unflagged stratum was not hit by the draw: its mean is taken as week 1's
    # (collapsed: one cell of 190 answers, 5 judged) rather than losing the pooled estimate.
    e = pooled_mean([POOL_WEEK_1, [POOL_WEEK_2[0], Stratum(95, [])]])
    assert e.value == approx(0.025 * 0.6 + 0.025 * 1.0 + 0.95 * 0.9)
    assert (e.n, e.n_by_stratum, e.too_few) == (15, (10, 5), True)
    assert e.low is not None and e.value is not None and e.high is not None
    assert 0 <= e.low < e.value < e.high <= 1
    # With no judged answer of a stratum in any week, there is nothing to borrow.
    none = pooled_mean([[POOL_WEEK_1[0], Stratum(95, [])], [POOL_WEEK_2[0], Stratum(95, [])]])
    assert none.value is None and none.low is None and none.too_few


def test_a_stratum_left_with_one_cell_takes_a_weeks_pseudo_answer():
    # Collapsed over the two weeks, the unflagged stratum is one cell of 190 answers, 5 judged:
    # nothing to pool, so its spread is a week's (SCORE_PRIOR over n + k), and the pool is the
    # stratified mean of the same answers taken as one week.
    assert (SHARE_PRIOR, SCORE_PRIOR, POOLED_PRIOR) == (1.0, 0.2, 0.03)
    pooled = pooled_mean([POOL_WEEK_1, [POOL_WEEK_2[0], Stratum(95, [])]])
    week = stratified_mean([Stratum(10, [1.0, 0.5, 0.5, 1.0, 0.0] + [1.0] * 5, drawn=False),
                            Stratum(190, [1.0] * 4 + [0.5])])
    assert (pooled.value, pooled.low, pooled.high) == (
        approx(week.value), approx(week.low), approx(week.high))


def test_pooled_weeks_need_the_same_strata():
    with pytest.raises(ValueError):
        pooled_mean([POOL_WEEK_1, POOL_WEEK_2[:1]])
    empty = pooled_mean([])
    assert (empty.value, empty.n, empty.population) == (None, 0, 0)


# --- what would make a week decisive -------------------------------------------------------


def test_undecided_width_is_stated():
    assert UNDECIDED_WIDTH == 0.10
    assert DECISIVE_HALF_WIDTH == 0.05


def test_sample_rate_for_by_hand():
    # The unflagged stratum's spread s̃² = 0.0240141 (test_two_strata_by_hand), W = 0.99,
    # N = 990; the flagged census adds nothing: A = 0.99²·0.0240141/990 = 2.37739e-5.
    # (w/z)² = (0.05/1.959964)² = 6.50794e-4 → r = A/(A + (w/z)²) = 0.035243: at this week's
    # volume and spread, a sample rate of 3.5 % instead of 3 % would give ±0.05.
    strata = [Stratum(10, FLAGGED_10, drawn=False), Stratum(990, UNFLAGGED_30)]
    assert sample_rate_for(strata) == approx(0.035243, abs=1e-6)
    # Check: at that rate, n = 36.7 and V = 0.9801·(1 − r)·s̃²/n = (w/z)².
    r = sample_rate_for(strata)
    assert r is not None
    n = r * 990
    assert 1.959964 * math.sqrt(0.9801 * (1 - r) * 0.0240141 / n) == approx(0.05, abs=1e-5)
    # A wider target needs a lower rate; the rate never exceeds 1.
    wider = sample_rate_for(strata, half_width=0.1)
    assert wider is not None and wider < r
    tight = sample_rate_for(strata, half_width=1e-6)
    assert tight is not None and tight <= 1.0


def test_sample_rate_for_without_a_drawn_stratum():
    assert sample_rate_for([Stratum(10, FLAGGED_10, drawn=False)]) is None
    assert sample_rate_for([Stratum(10, FLAGGED_10, drawn=False), Stratum(90, [])]) is None
    # Every value 1.0 still gives a rate: the spread includes the pseudo-answer.
    rate = sample_rate_for([Stratum(990, [1.0] * 30)])
    assert rate is not None and 0 < rate < 1
    with pytest.raises(ValueError):
        sample_rate_for([Stratum(990, [1.0] * 30)], half_width=0)


def test_week_precision():
    strata = [Stratum(10, FLAGGED_10, drawn=False), Stratum(990, UNFLAGGED_30)]
    pooled = Estimate(0.95, 0.93, 0.97, 160, 4000, (40, 120), False)
    # (0.8633, 0.9797) is wholly above 0.85: green and decided, however wide.
    above = week_precision(strata, action_threshold=0.85, pooled=pooled)
    assert (above.light, above.decisive) == ("green", True)
    assert above.half_width == approx((0.9797 - 0.8633) / 2, abs=1e-4)
    assert above.pooled_half_width == approx(0.02)
    assert above.pooled_weeks == 4
    # Against 0.90 the same interval straddles the line and is 0.12 wide: grey, and the page
    # can say "a sample rate of 3.5 % (now 3.0 %) or the 4-week view gives ±0.02".
    undecided = week_precision(strata, action_threshold=0.90, pooled=pooled)
    assert (undecided.light, undecided.decisive) == ("grey", False)
    assert undecided.sample_rate == approx(0.035243, abs=1e-6)
    assert undecided.current_rate == approx(30 / 990)
    assert undecided.target_half_width == DECISIVE_HALF_WIDTH
    alone = week_precision(strata, action_threshold=0.90)
    assert alone.pooled_half_width is None
    # The pooled view (±0.02 over 4 weeks, at 0.95) decides against 0.90: reach
    # max(0.05, 0.05) = 0.05, 4·(0.02/0.05)² = 0.64 → 1 week would do.
    assert undecided.weeks_to_decide == 1
    # Alone, the week (±0.0582 about 0.9475) needs 1·(0.0582/0.05)² = 1.355 → 2 weeks.
    assert alone.weeks_to_decide == 2


def test_weeks_to_decide_by_hand():
    # ±0.10 over 4 weeks, 0.02 from the line: the reach is DECISIVE_HALF_WIDTH (0.05), as the
    # light decides a narrow interval by its point: 4·(0.10/0.05)² = 16 weeks.
    wide = Estimate(0.88, 0.78, 0.98, 40, 200, (10, 30), False)
    assert weeks_to_decide(wide, 4, 0.86) == 16
    # 0.15 from the line: 4·(0.10/0.15)² = 1.78 → 2 weeks.
    assert weeks_to_decide(wide, 4, 0.73) == 2
    # ±0.30 about a week's 0.70, 0.01 from the line: 1·(0.30/0.05)² = 36 weeks.
    thin = Estimate(0.70, 0.40, 1.0, 3, 50, (1, 2), True)
    assert weeks_to_decide(thin, 1, 0.71) == 36
    # Over 4 weeks the same width would need 144: more than a year, said as 53.
    assert weeks_to_decide(thin, 4, 0.71) == 53
    # Nothing to scale: no value, or no weeks.
    assert weeks_to_decide(Estimate(None, None, None, 0, 50, (0, 0), True), 4, 0.85) is None
    assert weeks_to_decide(wide, 0, 0.85) is None
