"""Faithfulness on the experts' scale (monitoring.domain.expert_scale) against hand-computed values.

z = 1.959964 at 95 %; t(0.975, 19) = 2.093024, so a rectifier from 20 reviews has its variance
scaled by (t/z)² = 1.140387. The floor is one pseudo-review RECTIFIER_SPREAD = 0.35 off the mean,
shared out over the strata by their reviews: it adds 0.1225·n_h/n to Σ(d − d̄)² of stratum h.
"""

import math

import pytest

from monitoring.domain.expert_scale import (
    MIN_REVIEWS,
    RECTIFIER_SPREAD,
    Review,
    ReviewSums,
    expert_scale,
    pooling_weeks,
    rectifier,
    review_sums,
)
from monitoring.domain.statistics import (
    Stratum,
    fit_pooled,
    pooled_mean,
    stratified_mean,
    wilson_interval,
    z_value,
)

approx = pytest.approx

FLAGGED_10 = [1.0] * 6 + [0.5] * 2 + [0.0] * 2
UNFLAGGED_30 = [1.0] * 27 + [0.5] * 3
WEEK = [Stratum(10, FLAGGED_10, drawn=False), Stratum(990, UNFLAGGED_30)]


def reviews(flagged: list[tuple[float, float]], unflagged: list[tuple[float, float]]):
    return [Review(e, j, True) for e, j in flagged] + [Review(e, j, False) for e, j in unflagged]


def test_constants():
    assert RECTIFIER_SPREAD == 0.35
    assert MIN_REVIEWS == 20


def test_rectifier_by_hand():
    # Sizes 100 flagged, 900 unflagged: W = 0.1, 0.9.
    # Flagged d = 0.2, 0.0, 0.1: mean 0.1, Σ(d − d̄)² = 0.02, floor 0.1225·3/20 = 0.018375 →
    #   s̃² = 0.038375/3 = 0.0127917; term 0.01·(1 − 3/100)·0.0127917/3 = 4.13597e-5.
    # Unflagged d = 15×0, 2×0.25: mean 0.0294118, Σ(d − d̄)² = 0.1102941, floor 0.104125 →
    #   s̃² = 0.2144191/17 = 0.0126129; term 0.81·(1 − 17/900)·0.0126129/17 = 5.89615e-4.
    # Δ = 0.01 + 0.0264706 = 0.0364706; V = 6.30975e-4·1.140387 = 7.19556e-4; ±0.052575.
    got = rectifier(
        (100, 900),
        reviews([(0.7, 0.5), (1.0, 1.0), (0.6, 0.5)], [(1.0, 1.0)] * 15 + [(1.0, 0.75)] * 2),
    )
    assert got.value == approx(0.0364706, abs=1e-7)
    assert got.variance == approx(7.19556e-4, rel=1e-5)
    assert (got.low, got.high) == (approx(0.0364706 - 0.052575, abs=1e-6),
                                   approx(0.0364706 + 0.052575, abs=1e-6))
    assert (got.n, got.n_by_stratum, got.degrees_of_freedom) == (20, (3, 17), 19)


def test_twenty_identical_differences_still_have_an_interval():
    # 20 reviews where expert and judge agree exactly: Σ(d − d̄)² = 0. With the floor,
    # s̃² = 0.1225/20 = 0.006125, V = (1 − 20/1000)·0.006125/20·1.140387 = 3.42259e-4: ±0.0363.
    got = rectifier((0, 1000), reviews([], [(1.0, 1.0)] * 20))
    assert got.value == 0.0
    assert got.high - got.low == approx(2 * 0.036260, abs=1e-6)
    # Twenty identical nonzero differences too: the interval is about the point, same width.
    shifted = rectifier((0, 1000), reviews([], [(0.9, 0.8)] * 20))
    assert shifted.value == approx(0.1)
    assert shifted.high - shifted.low == approx(got.high - got.low)


def test_top_ups_count_with_their_stratum_weight():
    # A short random sample: 5 unflagged reviews (judge right) and 15 flagged top-ups (judge
    # 0.2 too strict). Pooled as one random sample the bias would be 0.15; flagged answers are
    # a tenth of the traffic, so it is 0.1·0.2 + 0.9·0 = 0.02.
    got = rectifier((100, 900), reviews([(0.7, 0.5)] * 15, [(1.0, 1.0)] * 5))
    assert got.value == approx(0.02)
    naive = sum(r.expert - r.judge for r in reviews([(0.7, 0.5)] * 15, [(1.0, 1.0)] * 5)) / 20
    assert naive == approx(0.15)


def test_a_stratum_without_reviews_borrows_all_reviews():
    # No flagged review: the flagged stratum takes the mean difference of all 10 reviews.
    got = rectifier((100, 900), reviews([], [(1.0, 0.9)] * 10))
    assert got.value == approx(0.1)
    assert got.n_by_stratum == (0, 10)
    assert rectifier((100, 900), []).value is None
    # A stratum smaller than the reviews it borrows is fine: they are not its sample.
    small = rectifier((5, 900), reviews([], [(1.0, 0.9)] * 20))
    assert small.value == approx(0.1)
    # An empty stratum needs no reviews at all.
    only = rectifier((0, 900), reviews([], [(1.0, 0.9)] * 10))
    assert only.value == approx(0.1)


def test_review_sums_match_the_reviews():
    rs = reviews([(0.7, 0.5), (1.0, 1.0)], [(1.0, 0.75), (1.0, 1.0), (0.5, 0.5)])
    flagged, unflagged = review_sums(rs)
    assert (flagged.n, flagged.total, flagged.sq_dev) == (2, approx(0.2), approx(0.02))
    assert (unflagged.n, unflagged.total) == (3, approx(0.25))
    assert unflagged.sq_dev == approx(2 * (0.25 / 3) ** 2 + (0.25 - 0.25 / 3) ** 2)
    assert rectifier((50, 950), rs) == rectifier((50, 950), (flagged, unflagged))


def test_expert_scale_by_hand():
    # Judge part: the week of test_statistics.test_two_strata_by_hand: 0.9475,
    # V_J = 0.000802733, shrunk p̃ = 0.01·0.7 + 0.99·28.6/30.2 = 0.944550.
    # Reviews, sizes (10, 990): flagged d = 0.2, 0 → term 0.0001·0.8·(0.02 + 0.01225)/2/2 =
    # 6.45e-7; unflagged 16×0, 2×0.25: Σ(d − d̄)² = 0.1111111, floor 0.11025 → s̃² = 0.0122978,
    # term 0.9801·(1 − 18/990)·0.0122978/18 = 6.57442e-4.
    # Δ = 0.001 + 0.0275 = 0.0285; V_Δ = 6.58087e-4·1.140387 = 7.50474e-4.
    # Covariance (the 18 unflagged reviews are among the 30 judged): j̄ = 17.5/18, d̄ = 0.5/18,
    # Σ(j − j̄)(d − d̄) = 16·(0.027778)(−0.027778) + 2·(−0.222222)(0.222222) = −0.111111,
    # S_jd = −0.111111/17 = −0.0065359; Cov = 0.9801·(1 − 30/990)/30·S_jd = −0.000207059
    # (within the bound √(V_J·V_Δ) = 0.000776; the flagged census adds none).
    # θ = 0.976; p̃ + Δ = 0.973050; V = 0.000802733 + 0.00075047 − 2·0.000207059 = 0.00113909;
    # n_eff = 0.973050·0.026950/V = 23.0219. Wilson(0.976, 23.0219): z²/n = 0.166861;
    # centre 0.907932, half 0.089347 → (0.8186, 0.9973).
    got = expert_scale(
        [WEEK], reviews([(0.7, 0.5), (1.0, 1.0)], [(1.0, 1.0)] * 16 + [(1.0, 0.75)] * 2)
    )
    assert got.value == approx(0.976)
    assert (got.low, got.high) == (approx(0.8186, abs=1e-4), approx(0.9973, abs=1e-4))
    assert got.correction == approx(0.0285)
    assert (got.n_reviews, got.weeks_pooled, got.too_few) == (20, 1, False)
    assert got.judge == stratified_mean(WEEK)


def test_without_the_judges_scores_of_the_reviews_the_covariance_is_left_out():
    # The same reviews as sums without Σj and Σ(j − j̄)(d − d̄): the wider interval of before,
    # V = V_J + V_Δ (n_eff 16.8838 → (0.7777, 0.9979)).
    flagged, unflagged = review_sums(
        reviews([(0.7, 0.5), (1.0, 1.0)], [(1.0, 1.0)] * 16 + [(1.0, 0.75)] * 2))
    assert unflagged.cross == approx(-0.111111, abs=1e-6)
    bare = tuple(ReviewSums(s.n, s.total, s.sq_dev) for s in (flagged, unflagged))
    got = expert_scale([WEEK], bare)
    assert got.value == approx(0.976)
    assert (got.low, got.high) == (approx(0.7777, abs=1e-4), approx(0.9979, abs=1e-4))


def test_the_covariance_never_takes_more_than_cauchy_schwarz_allows():
    # Sums from elsewhere that claim a covariance the two parts' variances cannot have (the
    # judged answers all 0.8, yet a cross sum at its largest): Cov is cut to −0.9·√(V_J·V_Δ),
    # so V = V_J + V_Δ − 1.8·√(V_J·V_Δ), never below a tenth of V_J + V_Δ.
    week = [Stratum(0, [], drawn=False), Stratum(1000, [0.8] * 20)]
    sums = (ReviewSums(0, 0.0, 0.0), ReviewSums(20, 2.0, 1.8, 16.0, -10.0))
    got = expert_scale([week], sums)
    fit = fit_pooled([week])
    fix = rectifier((0, 1000), sums)
    assert fit is not None and fix.variance is not None and fix.value is not None
    floor = fit.variance + fix.variance - 1.8 * math.sqrt(fit.variance * fix.variance)
    assert floor >= 0.1 * (fit.variance + fix.variance)
    shrunk = fit.ratio + fix.value
    low, high = wilson_interval(got.value, shrunk * (1 - shrunk) / floor, z_value(0.95))
    assert (got.low, got.high) == (approx(low), approx(high))
    # Without the cross sum the same reviews give the plain sum of the variances: wider.
    plain = expert_scale([week], (sums[0], ReviewSums(20, 2.0, 1.8)))
    assert plain.low < got.low


def test_a_week_judged_and_reviewed_in_full_is_known():
    # One answer, judged and reviewed: no sampling error on either side (the finite population
    # corrections are 0), so the experts' mean is the value itself. Found as a
    # ZeroDivisionError in the permission matrix's world.
    week = [Stratum(0, [], drawn=False), Stratum(1, [1.0])]
    got = expert_scale([week], reviews([], [(0.0, 1.0)]))
    assert (got.value, got.low, got.high) == (0.0, 0.0, 0.0)


def test_expert_scale_pools_the_weeks_it_is_given():
    weeks = [WEEK, WEEK, WEEK, WEEK]
    got = expert_scale(weeks, reviews([], [(1.0, 0.95)] * 40))
    assert got.weeks_pooled == 4
    assert got.judge == pooled_mean(weeks)
    assert got.value == approx(pooled_mean(weeks).value + 0.05)
    assert got.low < got.value < got.high
    # Fewer reviews than a week's batch: computed, but flagged as too few for a headline.
    few = expert_scale(weeks, reviews([], [(1.0, 0.95)] * 12))
    assert few.too_few and few.value is not None


def test_expert_scale_stays_in_the_unit_interval():
    lenient = expert_scale([[Stratum(0, []), Stratum(500, [1.0] * 30)]],
                           reviews([], [(0.5, 1.0)] * 20))
    assert lenient.value == approx(0.5)
    assert 0.0 <= lenient.low < 0.5 < lenient.high <= 1.0
    strict = expert_scale([[Stratum(0, []), Stratum(500, [0.5] * 30)]],
                          reviews([], [(1.0, 0.4)] * 20))
    assert strict.value == 1.0
    assert strict.low < 1.0 and strict.high == 1.0


def test_expert_scale_without_reviews_or_estimate():
    none = expert_scale([WEEK], [])
    assert (none.value, none.low, none.high, none.n_reviews, none.too_few) == (
        None, None, None, 0, True)
    unjudged = expert_scale([[Stratum(10, []), Stratum(990, [])]],
                            reviews([], [(1.0, 1.0)] * 20))
    assert unjudged.value is None


@pytest.mark.parametrize(
    "bad",
    [
        lambda: Review(1.1, 1.0, False),
        lambda: Review(0.5, -0.1, True),
        lambda: Review(math.nan, 0.5, True),
        lambda: Review(True, 0.5, True),
        lambda: ReviewSums(3, 3.5, 0.0),
        lambda: ReviewSums(3, 1.0, -0.1),
        lambda: ReviewSums(-1, 0.0, 0.0),
        lambda: rectifier((5, 5), reviews([(1.0, 1.0)] * 6, [])),  # more reviews than answers
        lambda: rectifier((-1, 5), []),
        lambda: expert_scale([[WEEK[1]]], []),  # a week needs both strata
    ],
)
def test_nonsense_is_refused(bad):
    with pytest.raises(ValueError):
        bad()


# (id, weeks, restart, count, expected)
WINDOW_CASES = [
    ("last four", ["2026-W01", "2026-W02", "2026-W03", "2026-W04", "2026-W05"], None, 4,
     ["2026-W02", "2026-W03", "2026-W04", "2026-W05"]),
    ("fewer weeks than asked", ["2026-W04", "2026-W05"], None, 4, ["2026-W04", "2026-W05"]),
    ("restarted by a drift alarm", ["2026-W02", "2026-W03", "2026-W04", "2026-W05"],
     "2026-W04", 4, ["2026-W04", "2026-W05"]),
    ("restart before the window", ["2026-W02", "2026-W03"], "2025-W40", 4,
     ["2026-W02", "2026-W03"]),
    ("across the year", ["2025-W52", "2026-W01"], "2025-W52", 13, ["2025-W52", "2026-W01"]),
    ("one week", ["2026-W02", "2026-W03"], None, 1, ["2026-W03"]),
]


@pytest.mark.parametrize(
    ("weeks", "restart", "count", "expected"),
    [c[1:] for c in WINDOW_CASES],
    ids=[c[0] for c in WINDOW_CASES],
)
def test_pooling_weeks(weeks, restart, count, expected):
    assert pooling_weeks(weeks, restart=restart, count=count) == expected


@pytest.mark.parametrize("count", [0, -1, True, 2.5])
def test_pooling_weeks_refuses_bad_counts(count):
    with pytest.raises(ValueError):
        pooling_weeks(["2026-W01"], count=count)
