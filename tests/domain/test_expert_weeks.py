"""The experts' scale per week and stratum (dashboard.domain.expert_weeks) against hand-computed
values.

The floor's offset is RECTIFIER_SPREAD = 0.35 in both examples (√((0.1225 + Σd²)/(1 + k̂)) is
above it), so it adds 0.1225·n_h/n to Σ(d − d̄)² of stratum h. Six reviews: the variance is
scaled by (t(0.975, 5)/z)² = (2.570582/1.959964)² = 1.720151.
"""

import pytest

from dashboard.domain.expert_scale import Review, ReviewSums, expert_scale, review_sums
from dashboard.domain.expert_weeks import expert_scale_by_week, weekly_rectifier
from dashboard.domain.statistics.cells import Stratum, StratumSums, summarize

approx = pytest.approx
T_OVER_Z_5 = 1.720151


def sums(values: list[float], size: int, *, drawn: bool) -> StratumSums:
    return summarize(Stratum(size, values, drawn=drawn))


def week(flagged: int, unflagged: int) -> list[StratumSums]:
    """A week of `flagged` answers judged in full (all 1.0) and `unflagged` ones with ten drawn
    (nine 1.0, one 0.5)."""
    return [sums([1.0] * flagged, flagged, drawn=False),
            sums([1.0] * 9 + [0.5], unflagged, drawn=True) if unflagged else
            sums([], 0, drawn=True)]


def diffs(flagged: list[float], unflagged: list[float]) -> list[Review]:
    """Reviews with these differences expert − judge (the judge at 0.5)."""
    return ([Review(0.5 + d, 0.5, True) for d in flagged]
            + [Review(0.5 + d, 0.5, False) for d in unflagged])


def test_two_weeks_of_unequal_volume_by_hand():
    # Week A: 20 flagged, 180 unflagged; week B three times as many: 60, 540. N = 800, so
    # W = 0.025, 0.225 (A) and 0.075, 0.675 (B).
    # A's reviews: flagged d = 0.5; unflagged 0, 0, 0.25. B's: unflagged 0, 0.5; no flagged one.
    # Δ̂ = 0.025·0.5 + 0.225·0.25/3 + 0.675·0.25 + 0.075·0.5 (B's flagged cell carried by A's)
    #   = 0.0125 + 0.01875 + 0.16875 + 0.0375 = 0.2375.
    # The pooled rectifier counts the six reviews alike: 0.1·0.5 + 0.9·0.15 = 0.185.
    weeks = [week(20, 180), week(60, 540)]
    reviews = [diffs([0.5], [0.0, 0.0, 0.25]), diffs([], [0.0, 0.5])]
    got = weekly_rectifier(weeks, reviews)
    fix = got.rectifier
    assert fix.value == approx(0.2375, abs=1e-12)
    assert expert_scale(weeks, [r for w in reviews for r in w]).correction == approx(0.185)
    # Loads: A's flagged cell carries B's, λ = 0.025 + 0.075 = 0.1; A1 0.225; B1 0.675.
    assert [(c.week, c.stratum, c.load) for c in got.cells] == [
        (0, 0, approx(0.1)), (0, 1, approx(0.225)), (1, 1, approx(0.675))]
    assert got.carried == 1
    # Spreads: flagged (0 + 0.1225·1/6)/1 = 0.0204167; unflagged Σ(d − 0.15)² = 0.2,
    #   (0.2 + 0.1225·5/6)/5 = 0.0604167.
    # λ²(1 − n/N)s̃²/n: 0.01·0.95·0.0204167 = 1.939583e-4; 0.050625·(1 − 3/180)·0.0604167/3
    #   = 1.002539e-3; 0.455625·(1 − 2/540)·0.0604167/2 = 1.371270e-2.
    # The carried cell's own answers: 0.075²·0.0204167/60 = 1.914063e-6 (τ̂² = 0: one flagged
    #   week reviewed). Σ = 1.491111e-2, ×1.720151 = 2.564936e-2.
    assert fix.variance == approx(2.564936e-2, rel=1e-5)
    assert (fix.n, fix.n_by_stratum, fix.degrees_of_freedom) == (6, (1, 5), 5)


def test_an_unreviewed_week_is_carried_with_its_own_width():
    # Three weeks of 100 unflagged answers (no flagged ones), W = 1/3 each. Week 1's reviews
    # d = 0, 0, 0.3, 0.1 (mean 0.1), week 2's 0.5, 0.3 (mean 0.4), week 3 not yet reviewed.
    # Δ̂ = (0.1 + 0.4 + 0.2)/3 = 0.233333: week 3 takes the stratum's mean of six, 0.2.
    # Loads: 1/3 + (1/3)(4/6) = 5/9 and 1/3 + (1/3)(2/6) = 4/9.
    # Σ(d − 0.2)² = 0.2, within the weeks 0.06 + 0.02 = 0.08, between 0.12. DerSimonian-Laird:
    #   s_w² = 0.08/(6 − 2) = 0.02, τ̂² = (0.12 − 0.02)/(6 − (16 + 4)/6) = 0.1/2.666667 = 0.0375.
    # s̃² = (0.2 + 0.1225)/6 = 0.05375.
    # Sampling: (5/9)²(0.96)(0.05375/4) + (4/9)²(0.98)(0.05375/2) = 9.183951e-3.
    # Carried: (1/9)(0.05375/100 + 0.0375·(1 + (4/6)² + (2/6)²)) = 6.541204e-3.
    # V = 1.572516e-2 × 1.720151 = 2.704965e-2.
    weeks = [week(0, 100)] * 3
    reviews = [diffs([], [0.0, 0.0, 0.3, 0.1]), diffs([], [0.5, 0.3]), []]
    fix = weekly_rectifier(weeks, reviews).rectifier
    assert fix.value == approx(0.7 / 3)
    assert fix.variance == approx(2.704965e-2, rel=1e-5)
    # Without the carried week, the same reviews: only the sampling part, loads 1/2 each.
    # (1/4)(0.96)(0.05375/4) + (1/4)(0.98)(0.05375/2) = 3.225e-3 + 6.584375e-3 = 9.809375e-3.
    two = weekly_rectifier(weeks[:2], reviews[:2]).rectifier
    assert two.value == approx(0.25)
    assert two.variance == approx(9.809375e-3 * T_OVER_Z_5, rel=1e-5)


def test_reviews_that_follow_the_volume_give_the_pooled_estimate():
    # Equal weeks and the same reviews in each reviewed week: the loads are W_h·n_c/n_h, and the
    # estimator is the pooled one, interval and all (the newest week unreviewed, as in use).
    weeks = [[Stratum(40, [1.0] * 30 + [0.5] * 10, drawn=False),
              Stratum(960, [1.0] * 25 + [0.75] * 5)]] * 4
    batch = [Review(0.5, 1.0, True), Review(1.0, 1.0, True), Review(0.75, 0.5, True)] + [
        Review(1.0, 1.0, False)] * 14 + [Review(0.75, 1.0, False)] * 3
    pooled = expert_scale(weeks, batch * 3)
    got = expert_scale_by_week(weeks, [batch, batch, batch, []])
    assert got.correction == approx(pooled.correction)
    assert (got.value, got.n_reviews, got.weeks_pooled, got.too_few) == (
        approx(pooled.value), 60, 4, False)
    # The widths differ by the finite population corrections only: a reviewed week's reviews
    # are (1 − n_c/N_c) of its own answers, not of the pool's, and the carried week adds its
    # own answers' scatter s̃²/N_c.
    assert got.low is not None and pooled.low is not None
    assert got.high is not None and pooled.high is not None
    assert got.high - got.low == approx(pooled.high - pooled.low, rel=0.005)


def test_one_week_is_the_pooled_estimate_covariance_and_all():
    # test_expert_scale pins `expert_scale` by hand; on one week the two are the same.
    one = [[Stratum(10, [1.0] * 6 + [0.5] * 2 + [0.0] * 2, drawn=False),
            Stratum(990, [1.0] * 27 + [0.5] * 3)]]
    given = [Review(0.7, 0.5, True), Review(1.0, 1.0, True)] + [
        Review(1.0, 1.0, False)] * 15 + [Review(1.0, 0.75, False)] * 3
    assert review_sums(given)[1].cross != 0
    assert expert_scale_by_week(one, [given]) == expert_scale(one, given)
    assert expert_scale_by_week(one, [review_sums(given)]) == expert_scale(one, given)


def test_a_stratum_without_reviews_borrows_every_review_of_the_pool():
    # No flagged review in either week: the flagged cells take the mean of all reviews (0.25),
    # and the unflagged reviews carry them: λ = W_unflagged + W_flagged·n_c/n.
    weeks = [week(100, 900), week(100, 900)]
    got = weekly_rectifier(weeks, [diffs([], [0.0, 0.5]), diffs([], [0.25, 0.25])])
    assert got.rectifier.value == approx(0.05 * 0.25 + 0.45 * 0.25 + 0.05 * 0.25 + 0.45 * 0.25)
    assert [c.load for c in got.cells] == [approx(0.5), approx(0.5)]
    assert got.carried == 2


def test_without_reviews_there_is_no_value():
    got = expert_scale_by_week([week(10, 90)], [[]])
    assert (got.value, got.low, got.high, got.correction, got.too_few) == (
        None, None, None, None, True)


@pytest.mark.parametrize("call", [
    lambda: weekly_rectifier([week(10, 90)], []),  # one list of reviews per week
    lambda: weekly_rectifier([week(1, 90)], [diffs([0.1, 0.2], [])]),  # 2 reviews of 1 answer
    lambda: weekly_rectifier([week(0, 90)], [diffs([0.1], [])]),  # reviews of an empty cell
    lambda: expert_scale_by_week([[week(10, 90)[1]]], [[]]),  # a week needs both strata
])
def test_refuses_what_cannot_be(call):
    with pytest.raises(ValueError):
        call()


def test_reviews_of_a_week_may_come_as_sums():
    weeks = [week(20, 180), week(60, 540)]
    reviews = [diffs([0.5], [0.0, 0.0, 0.25]), diffs([], [0.0, 0.5])]
    as_sums = [review_sums(r) for r in reviews]
    assert weekly_rectifier(weeks, as_sums) == weekly_rectifier(weeks, reviews)
    assert isinstance(as_sums[1][0], ReviewSums) and as_sums[1][0].n == 0


def test_third_cumulant_of_a_carried_pool():
    # Week 0 reviewed (d = [0.5, 0, 0, 0], Σ(d − d̄)³ = 0.046875), week 1 carried by it: the
    # cell's load is 0.5 + 0.5 = 1, κ₃(Δ̂) = 1³·(1 − 4/100)·(0.046875/4)/4² = 0.000703125.
    given = [Review(1.0, 0.5, False)] + [Review(1.0, 1.0, False)] * 3
    weeks = [week(0, 100), week(0, 100)]
    fix = weekly_rectifier(weeks, [review_sums(given), []]).rectifier
    assert fix.third == approx(0.000703125)
