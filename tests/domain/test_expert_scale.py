"""Faithfulness on the experts' scale (dashboard.domain.expert_scale) against hand-computed values.

z = 1.959964 at 95 %; t(0.975, 19) = 2.093024, so a rectifier from 20 reviews has its variance
scaled by (t/z)² = 1.140387. The floor is one pseudo-review `offset` off the mean, shared out over
the strata by their reviews: it adds offset²·n_h/n to Σ(d − d̄)² of stratum h. The offset is
RECTIFIER_SPREAD = 0.35 without a disagreement, else √((0.1225 + Σd²)/(1 + k̂)), k̂ = (Σd)²/Σd².
"""

import math

import pytest

from dashboard.domain.expert_scale import (
    JUDGE_PRIOR,
    MIN_REVIEWS,
    RECTIFIER_SPREAD,
    Review,
    ReviewSums,
    expert_scale,
    merge_cells,
    pooling_weeks,
    pseudo_review_offset,
    rectifier,
    review_sums,
)
from dashboard.domain.statistics.cells import Stratum, wilson_interval, z_value
from dashboard.domain.statistics.estimates import (
    SCORE_PRIOR,
    fit_pooled,
    pooled_mean,
    stratified_mean,
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
    assert JUDGE_PRIOR == 0.1


def test_rectifier_by_hand():
    # Sizes 100 flagged, 900 unflagged: W = 0.1, 0.9.
    # All 20 d: Σd = 0.8, Σd² = 0.04 + 0.01 + 2·0.0625 = 0.175, k̂ = 0.64/0.175 = 3.657143,
    #   offset² = (0.1225 + 0.175)/4.657143 = 0.0638804.
    # Flagged d = 0.2, 0.0, 0.1: mean 0.1, Σ(d − d̄)² = 0.02, floor 0.0638804·3/20 = 0.0095821 →
    #   s̃² = 0.0295821/3 = 0.0098607; term 0.01·(1 − 3/100)·0.0098607/3 = 3.18829e-5.
    # Unflagged d = 15×0, 2×0.25: mean 0.0294118, Σ(d − d̄)² = 0.1102941, floor 0.0542983 →
    #   s̃² = 0.1645924/17 = 0.0096819; term 0.81·(1 − 17/900)·0.0096819/17 = 4.52601e-4.
    # Δ = 0.01 + 0.0264706 = 0.0364706; V = 4.84484e-4·1.140387 = 5.52499e-4; ±0.046070.
    got = rectifier(
        (100, 900),
        reviews([(0.7, 0.5), (1.0, 1.0), (0.6, 0.5)], [(1.0, 1.0)] * 15 + [(1.0, 0.75)] * 2),
    )
    assert got.value == approx(0.0364706, abs=1e-7)
    assert got.variance == approx(5.52499e-4, rel=1e-5)
    assert (got.low, got.high) == (approx(0.0364706 - 0.046070, abs=1e-6),
                                   approx(0.0364706 + 0.046070, abs=1e-6))
    assert (got.n, got.n_by_stratum, got.degrees_of_freedom) == (20, (3, 17), 19)


def test_twenty_identical_differences_still_have_an_interval():
    # 20 reviews where expert and judge agree exactly: Σ(d − d̄)² = 0. With the floor,
    # s̃² = 0.1225/20 = 0.006125, V = (1 − 20/1000)·0.006125/20·1.140387 = 3.42259e-4: ±0.0363.
    got = rectifier((0, 1000), reviews([], [(1.0, 1.0)] * 20))
    assert got.value == 0.0
    assert got.low is not None and got.high is not None
    assert got.high - got.low == approx(2 * 0.036260, abs=1e-6)
    # Twenty identical differences of 0.1 (a judge off by the same amount every time): the
    # offset moves toward them, Σd² = 0.2, k̂ = 4/0.2 = 20, offset² = (0.1225 + 0.2)/21 =
    # 0.0153571; V = 0.98·0.0153571/20/20·1.140387 = 4.29071e-5: ±0.0128384, narrower than
    # without a disagreement but not zero.
    shifted = rectifier((0, 1000), reviews([], [(0.9, 0.8)] * 20))
    assert shifted.value == approx(0.1)
    assert shifted.low is not None and shifted.high is not None
    assert shifted.high - shifted.low == approx(2 * 0.0128384, abs=1e-6)


def test_the_floor_moves_toward_the_disagreements_seen():
    # None seen: 0.35. One of 0.5 among 20: Σd² = 0.25, k̂ = 1, √((0.1225 + 0.25)/2) = 0.4316,
    # capped at 0.35. Eight of 60 at 0.15 (a judge strict by 0.02): Σd² = 0.18, k̂ = 8,
    # √(0.3025/9) = 0.183333. Opposite signs that cancel (Σd = 0): k̂ = 0, capped at 0.35.
    assert pseudo_review_offset(review_sums(reviews([], [(1.0, 1.0)] * 20))[1]) == 0.35
    one = reviews([], [(1.0, 1.0)] * 19 + [(1.0, 0.5)])
    assert pseudo_review_offset(review_sums(one)[1]) == 0.35
    eight = reviews([], [(1.0, 1.0)] * 52 + [(1.0, 0.85)] * 8)
    assert pseudo_review_offset(review_sums(eight)[1]) == approx(0.183333, abs=1e-6)
    cancel = reviews([], [(1.0, 1.0)] * 18 + [(1.0, 0.8), (0.8, 1.0)])
    assert pseudo_review_offset(review_sums(cancel)[1]) == 0.35
    assert pseudo_review_offset(ReviewSums(0, 0.0, 0.0)) == 0.35


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
    # Reviews, sizes (10, 990): Σd = 0.7, Σd² = 0.165, k̂ = 0.49/0.165 = 2.969697, offset² =
    # 0.2875/3.969697 = 0.0724237. Flagged d = 0.2, 0 → term 0.0001·0.8·(0.02 + 0.0072424)/2/2
    # = 5.44847e-7; unflagged 16×0, 2×0.25: Σ(d − d̄)² = 0.1111111, floor 0.0651813 →
    # s̃² = 0.0097940, term 0.9801·(1 − 18/990)·0.0097940/18 = 5.23588e-4.
    # Δ = 0.001 + 0.0275 = 0.0285; V_Δ = 5.24133e-4·1.140387 = 5.97715e-4.
    # Covariance (the 18 unflagged reviews are among the 30 judged): j̄ = 17.5/18, d̄ = 0.5/18,
    # Σ(j − j̄)(d − d̄) = 16·(0.027778)(−0.027778) + 2·(−0.222222)(0.222222) = −0.111111,
    # S_jd = −0.111111/17 = −0.0065359; Cov = 0.9801·(1 − 30/990)/30·S_jd = −0.000207059
    # (within the bound √(V_J·V_Δ) = 0.000693; the flagged census adds none).
    # θ = 0.976; p̃ + Δ = 0.973050. With the full pseudo-answer V would be 0.000802733 +
    # 0.000597715 − 2·0.000207059 = 0.00098633. The correction adds V_Δ + 2·Cov = 0.000183597
    # > 0, so the judge part's pseudo-answer is taken at JUDGE_PRIOR = 0.1: p̃_u = 28.55/30.1,
    # R = 0.946020; z̄ = 0.0039800, centre 0.0024850; s̃² = (0.675 + 30·(0.001495)² +
    # 0.05·(0.051495² + 0.948505²))/30.1 = 0.0239230, V_J' = 0.9801·(1 − 30/990)·s̃²/30 =
    # 0.000757986. V = 0.000757986 + 0.000183597 = 0.000941583, between V_J = 0.000802733 and
    # 0.00098633. n_eff = 0.973050·0.026950/V = 27.851. Wilson(0.976, 27.851): z²/n =
    # 0.137929; centre 0.918307, half 0.078532 → (0.8398, 0.9968).
    got = expert_scale(
        [WEEK], reviews([(0.7, 0.5), (1.0, 1.0)], [(1.0, 1.0)] * 16 + [(1.0, 0.75)] * 2)
    )
    assert got.value == approx(0.976)
    assert (got.low, got.high) == (approx(0.8398, abs=1e-4), approx(0.9968, abs=1e-4))
    assert got.correction == approx(0.0285)
    assert (got.n_reviews, got.weeks_pooled, got.too_few) == (20, 1, False)
    assert got.judge == stratified_mean(WEEK)


def test_without_the_judges_scores_of_the_reviews_the_covariance_is_left_out():
    # The same reviews as sums without Σj and Σ(j − j̄)(d − d̄): a wider interval, V = V_J' +
    # V_Δ = 0.000757986 + 0.000597715 = 0.00135570 (n_eff 19.3434 → (0.7966, 0.9976)).
    flagged, unflagged = review_sums(
        reviews([(0.7, 0.5), (1.0, 1.0)], [(1.0, 1.0)] * 16 + [(1.0, 0.75)] * 2))
    assert unflagged.cross == approx(-0.111111, abs=1e-6)
    bare = (ReviewSums(flagged.n, flagged.total, flagged.sq_dev),
            ReviewSums(unflagged.n, unflagged.total, unflagged.sq_dev))
    got = expert_scale([WEEK], bare)
    assert got.value == approx(0.976)
    assert (got.low, got.high) == (approx(0.7966, abs=1e-4), approx(0.9976, abs=1e-4))


def test_the_covariance_never_takes_more_than_cauchy_schwarz_allows():
    # Sums from elsewhere that claim a covariance the two parts' variances cannot have (the
    # judged answers all 0.8, yet a cross sum at its largest): Cov is cut to −0.9·√(V_J·V_Δ),
    # so V = V_J + V_Δ − 1.8·√(V_J·V_Δ), never below a tenth of V_J + V_Δ.
    week = [Stratum(0, [], drawn=False), Stratum(1000, [0.8] * 20)]
    sums = (ReviewSums(0, 0.0, 0.0), ReviewSums(20, 2.0, 1.8, 16.0, -10.0))
    got = expert_scale([week], sums)
    # The judge part as expert_scale takes it.
    fit = fit_pooled([week], prior=SCORE_PRIOR, pooled=False)
    fix = rectifier((0, 1000), sums)
    assert fit is not None and fix.variance is not None and fix.value is not None
    floor = fit.variance + fix.variance - 1.8 * math.sqrt(fit.variance * fix.variance)
    assert floor >= 0.1 * (fit.variance + fix.variance)
    shrunk = fit.ratio + fix.value
    assert got.value is not None
    low, high = wilson_interval(got.value, shrunk * (1 - shrunk) / floor, z_value(0.95))
    assert (got.low, got.high) == (approx(low), approx(high))
    # Without the cross sum the same reviews give the plain sum of the variances: wider.
    plain = expert_scale([week], (sums[0], ReviewSums(20, 2.0, 1.8)))
    assert plain.low is not None and got.low is not None
    assert plain.low < got.low


@pytest.mark.parametrize(("judged", "reviewed", "branch"), [
    # The judge's errors are its own noise (expert 1.0 throughout): the correction takes
    # variance away (V_Δ + 2·Cov < 0), and the sum keeps the full pseudo-answer, as before.
    ([1.0] * 14 + [0.6] * 6, [(1.0, 1.0)] * 14 + [(1.0, 0.6)] * 6, "full"),
    # Twenty equal small differences: the correction adds less than half the pseudo-answer
    # did, and V(Ĵ) with the full pseudo-answer is the floor.
    ([0.98] * 20, [(1.0, 0.98)] * 20, "judge"),
    # A lenient judge (all 1.0, the experts see four answers at 0.5): the correction's spread
    # is the larger, and the judge part's pseudo-answer counts at JUDGE_PRIOR.
    ([1.0] * 20, [(1.0, 1.0)] * 16 + [(0.5, 1.0)] * 4, "lighter"),
])
def test_the_pseudo_answer_and_the_corrections_spread_do_not_stack(judged, reviewed, branch):
    week = [Stratum(0, [], drawn=False), Stratum(1000, judged)]
    given = reviews([], reviewed)
    fit = fit_pooled([week], prior=SCORE_PRIOR, pooled=False)
    lighter = fit_pooled([week], prior=JUDGE_PRIOR, pooled=False)
    fix = rectifier((0, 1000), given)
    assert fit is not None and lighter is not None
    assert fix.value is not None and fix.variance is not None
    # Every judged answer reviewed: Cov(Ĵ, Δ̂) = (1 − 20/1000)/20 · Σ(j − j̄)(d − d̄)/19.
    cov = (1 - 20 / 1000) / 20 * review_sums(given)[1].cross / 19
    variance = {
        "full": fit.variance + fix.variance + 2 * cov,
        "judge": fit.variance,
        "lighter": lighter.variance + fix.variance + 2 * cov,
    }[branch]
    got = expert_scale([week], given)
    assert got.value is not None
    shrunk = fit.ratio + fix.value
    low, high = wilson_interval(got.value, shrunk * (1 - shrunk) / variance, z_value(0.95))
    assert (got.low, got.high) == (approx(low), approx(high))


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
    judge_value = pooled_mean(weeks).value
    assert judge_value is not None
    assert got.value == approx(judge_value + 0.05)
    assert got.low is not None and got.value is not None and got.high is not None
    assert got.low < got.value < got.high
    # Fewer reviews than a week's batch: computed, but flagged as too few for a headline.
    few = expert_scale(weeks, reviews([], [(1.0, 0.95)] * 12))
    assert few.too_few and few.value is not None


def test_expert_scale_stays_in_the_unit_interval():
    lenient = expert_scale([[Stratum(0, []), Stratum(500, [1.0] * 30)]],
                           reviews([], [(0.5, 1.0)] * 20))
    assert lenient.value == approx(0.5)
    assert lenient.low is not None and lenient.high is not None
    assert 0.0 <= lenient.low < 0.5 < lenient.high <= 1.0
    strict = expert_scale([[Stratum(0, []), Stratum(500, [0.5] * 30)]],
                          reviews([], [(1.0, 0.4)] * 20))
    assert strict.value == 1.0
    assert strict.low is not None
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


# Four unflagged reviews, d = expert − judge = [0.5, 0, 0, 0]: d̄ = 0.125,
# Σ(d − d̄)³ = 0.375³ + 3·(−0.125)³ = 0.052734375 − 0.005859375 = 0.046875.
SKEWED = [(1.0, 0.5)] + [(1.0, 1.0)] * 3


def test_review_sums_carry_the_third_central_moment():
    flagged, unflagged = review_sums(reviews([], SKEWED))
    assert unflagged.cube == approx(0.046875)
    assert flagged.cube == 0.0
    assert ReviewSums(4, 0.5, 0.1875).cube == 0.0  # older callers: unknown, 0


def test_merged_cells_move_the_third_moment_to_the_common_mean():
    # [0.5, 0] (d̄ 0.25, Σ(d − d̄)² 0.125, Σ(d − d̄)³ 0) and [0, 0]: shifts ±0.125 from 0.125 add
    # 3·0.125·0.125 + 2·0.125³ − 2·0.125³ = 0.046875.
    a = review_sums(reviews([], SKEWED[:2]))[1]
    b = review_sums(reviews([], SKEWED[2:]))[1]
    assert merge_cells(a, b).cube == approx(0.046875)
    merged, whole = merge_cells(b, a), review_sums(reviews([], SKEWED))[1]
    assert (merged.n, merged.total, merged.sq_dev, merged.cross, merged.cube) == approx(
        (whole.n, whole.total, whole.sq_dev, whole.cross, whole.cube))


def test_rectifier_third_cumulant():
    # κ₃(Δ̂) = W³·(1 − n/N)·μ₃/n² with μ₃ = 0.046875/4: 0.96·0.01171875/16.
    fix = rectifier((0, 100), reviews([], SKEWED))
    assert fix.third == approx(0.000703125)
    assert rectifier((0, 100), reviews([], [(1.0, 1.0)] * 4)).third == 0.0


def test_a_third_moment_beyond_the_spread_is_refused():
    with pytest.raises(ValueError):
        ReviewSums(4, 0.5, 0.1, cube=0.3)  # |Σ(d − d̄)³| ≤ 2·Σ(d − d̄)² as |d − d̄| ≤ 2
