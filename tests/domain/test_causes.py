"""Causes (dashboard.domain.causes) on hand-made rows: the buckets, their stratified
estimates, and the similarity cutoff rule."""

import math

import numpy as np
import pytest

from dashboard.domain.causes import (
    CAUSES,
    MIN_FOR_REGRESSION,
    Bucket,
    adjusted_effects,
    adjusted_effects_from_moments,
    chunk_count_buckets,
    held_out_cutoff,
    holm,
    multi_part_split,
    no_passing_chunk,
    similarity_buckets,
    similarity_cutoff,
)
from dashboard.domain.statistics.cells import Estimate, Stratum
from dashboard.domain.statistics.estimates import stratified_mean
from monitoring.domain.moments import NO_MOMENTS, moments_of


def answers(key, flagged, judged_scores, unjudged=0):
    """Rows (key, flagged, score) for judged answers plus ``unjudged`` rows without a score."""
    return [(key, flagged, s) for s in judged_scores] + [(key, flagged, None)] * unjudged


# Low similarity: 2 flagged answers both judged (0.0, 0.5), 20 unflagged of which 10 judged
# (all 0.5) → W = 2/22, 20/22; estimate = (2·0.25 + 20·0.5)/22 = 10.5/22 = 0.4773.
LOW = answers(0.31, True, [0.0, 0.5]) + answers(0.42, False, [0.5] * 10, unjudged=10)
# Exactly on an edge: [0.5, 0.6) holds 0.5. 1 flagged (1.0) and 12 unflagged, 11 judged.
EDGE = answers(0.5, True, [1.0]) + answers(0.5999, False, [1.0] * 10 + [0.5], unjudged=1)
# High similarity, ≥ 0.9: nothing flagged, 100 unflagged of which 12 judged, all 1.0.
HIGH = answers(0.9, False, [1.0] * 12, unjudged=88)
# No chunk scores: 5 answers, 1 judged.
NONE = answers(None, False, [0.75], unjudged=4)
ROWS = LOW + EDGE + HIGH + NONE


def test_similarity_buckets_labels_and_ranges():
    buckets = similarity_buckets(ROWS)
    assert [(b.label, b.low, b.high) for b in buckets] == [
        ("<0.5", None, 0.5),
        ("0.5–0.6", 0.5, 0.6),
        ("0.6–0.7", 0.6, 0.7),
        ("0.7–0.8", 0.7, 0.8),
        ("0.8–0.9", 0.8, 0.9),
        ("≥0.9", 0.9, None),
        ("none", None, None),
    ]


def test_similarity_buckets_are_stratified_within_each_bucket():
    low, edge, b60, b70, b80, high, none = (b.estimate for b in similarity_buckets(ROWS))
    assert low.value == pytest.approx(10.5 / 22)  # the naive judged mean would be 5.5/12
    assert (low.n, low.population, low.n_by_stratum) == (12, 22, (2, 10))
    assert low == stratified_mean([Stratum(2, [0.0, 0.5]), Stratum(20, [0.5] * 10)])
    # [0.5, 0.6): (1·1.0 + 12·(10.5/11))/13
    assert edge.value == pytest.approx((1 + 12 * 10.5 / 11) / 13)
    assert (edge.n, edge.population, edge.n_by_stratum) == (12, 13, (1, 11))
    for empty in (b60, b70, b80):
        assert (empty.value, empty.population, empty.too_few) == (None, 0, True)
    assert high.low is not None
    assert high.value == 1.0 and high.low < 1.0  # all 1.0, still an interval
    assert (high.population, high.n_by_stratum) == (100, (0, 12))
    assert (none.value, none.n, none.population, none.too_few) == (0.75, 1, 5, True)


def test_similarity_buckets_custom_edges():
    buckets = similarity_buckets([(0.2, False, 1.0), (0.7, False, 0.0)], edges=[0.5])
    assert [(b.label, b.estimate.value) for b in buckets] == [
        ("<0.5", 1.0),
        ("≥0.5", 0.0),
        ("none", None),
    ]


@pytest.mark.parametrize("edges", [(0.5, 0.5), (0.6, 0.5), (math.nan,)])
def test_similarity_buckets_reject_bad_edges(edges):
    with pytest.raises(ValueError):
        similarity_buckets([], edges=edges)


def est(value, low, high, too_few=False):
    return Estimate(value, low, high, 50, 500, (10, 40), too_few)


def buckets_of(*estimates):
    """Buckets <0.5, 0.5–0.6, ..., ≥0.9 with the given estimates, plus a red "none" bucket."""
    lows = [None, 0.5, 0.6, 0.7, 0.8, 0.9]
    highs = [0.5, 0.6, 0.7, 0.8, 0.9, None]
    ranged = [
        Bucket("b", low, high, e) for low, high, e in zip(lows, highs, estimates, strict=True)
    ]
    return [*ranged, Bucket("none", None, None, est(0.2, 0.1, 0.3))]


RED = est(0.60, 0.50, 0.70)
AMBER = est(0.80, 0.70, 0.88)
GREEN = est(0.93, 0.90, 0.96)
GREY = est(0.30, 0.05, 0.60, too_few=True)

# (id, estimates per bucket from <0.5 up, cutoff at action line 0.85)
CUTOFF_CASES = [
    ("low buckets red", [RED, RED, AMBER, GREEN, GREEN, GREEN], 0.6),
    ("only the lowest red", [RED, AMBER, GREEN, GREEN, GREEN, GREEN], 0.5),
    # Amber is not evidence: the point dips, the interval reaches the line.
    ("amber only", [AMBER, AMBER, GREEN, GREEN, GREEN, GREEN], None),
    ("all green", [GREEN] * 6, None),
    # Too few answers never set a cutoff, however low their estimate.
    ("grey low bucket", [GREY, GREEN, GREEN, GREEN, GREEN, GREEN], None),
    ("grey below red", [GREY, RED, GREEN, GREEN, GREEN, GREEN], 0.6),
    # Not monotone: the highest red bucket decides.
    ("gap", [RED, GREEN, RED, GREEN, GREEN, GREEN], 0.7),
    # Even the best retrieval is red: similarity does not explain it, no cutoff.
    ("top bucket red", [RED, RED, RED, RED, RED, RED], None),
    ("empty buckets", [est(None, None, None, True)] * 6, None),
]


@pytest.mark.parametrize(
    ("estimates", "cutoff"),
    [c[1:] for c in CUTOFF_CASES],
    ids=[c[0] for c in CUTOFF_CASES],
)
def test_similarity_cutoff(estimates, cutoff):
    # The red "none" bucket never counts: it has no similarity.
    assert similarity_cutoff(buckets_of(*estimates), 0.85) == cutoff


def test_similarity_cutoff_from_rows():
    # 40 low-similarity answers, 30 judged at 0.25 (plus 5 flagged at 0.0): clearly red.
    rows = (
        answers(0.45, True, [0.0] * 5)
        + answers(0.45, False, [0.25] * 30, unjudged=10)
        + answers(0.95, False, [1.0] * 30, unjudged=300)
    )
    buckets = similarity_buckets(rows)
    assert buckets[0].estimate.high is not None
    assert buckets[0].estimate.high < 0.85
    assert similarity_cutoff(buckets, 0.85) == 0.5


# (count, label)
CHUNK_CASES = [
    (0, "0"), (1, "1–2"), (2, "1–2"), (3, "3–5"), (5, "3–5"), (6, "6–10"), (10, "6–10"),
    (11, "11–20"), (20, "11–20"), (21, "21+"), (30, "21+"),
]


def test_chunk_count_buckets():
    rows = [(count, False, 1.0) for count, _ in CHUNK_CASES]
    buckets = chunk_count_buckets(rows)
    assert [(b.label, b.low, b.high) for b in buckets] == [
        ("0", 0, 1),
        ("1–2", 1, 3),
        ("3–5", 3, 6),
        ("6–10", 6, 11),
        ("11–20", 11, 21),
        ("21+", 21, None),
    ]
    by_label = {b.label: b.estimate.population for b in buckets}
    expected: dict[str, int] = {}
    for _, label in CHUNK_CASES:
        expected[label] = expected.get(label, 0) + 1
    assert by_label == expected


def test_chunk_count_buckets_estimates():
    # 30 chunks: 4 flagged judged (0.0 each), 16 unflagged, 8 judged at 0.5 →
    # (4·0 + 16·0.5)/20 = 0.4. 4 chunks: 10 unflagged, all judged at 1.0 → exactly 1.0.
    rows = (
        answers(30, True, [0.0] * 4)
        + answers(30, False, [0.5] * 8, unjudged=8)
        + answers(4, False, [1.0] * 10)
    )
    buckets = {b.label: b.estimate for b in chunk_count_buckets(rows)}
    assert buckets["21+"].value == pytest.approx(0.4)
    assert buckets["21+"].n_by_stratum == (4, 8)
    assert buckets["3–5"].value == 1.0
    assert buckets["3–5"].low == buckets["3–5"].high == 1.0  # every answer judged
    assert buckets["0"].value is None


def test_chunk_count_buckets_reject_negative_counts():
    with pytest.raises(ValueError):
        chunk_count_buckets([(-1, False, 1.0)])


def test_multi_part_split():
    # Single: 1 flagged (0.5) + 30 unflagged, 15 judged at 1.0 → (0.5 + 30)/31.
    # Multi: 4 flagged (0.0, 0.5, 0.5, 1.0) + 6 unflagged, 2 judged (0.5, 1.0) → (2 + 4.5)/10.
    rows = (
        answers(False, True, [0.5])
        + answers(False, False, [1.0] * 15, unjudged=15)
        + answers(True, True, [0.0, 0.5, 0.5, 1.0])
        + answers(True, False, [0.5, 1.0], unjudged=4)
    )
    single, multi = multi_part_split(rows)
    assert single.value == pytest.approx(30.5 / 31)
    assert (single.n, single.population, single.too_few) == (16, 31, False)
    assert multi.value == pytest.approx(0.65)
    assert (multi.n, multi.population, multi.too_few) == (6, 10, True)


def test_no_passing_chunk():
    # Below 0.6: the LOW rows (0.4773 as above) and 0.5999 ones; 0.6 itself passes, None is
    # unknown and left out.
    rows = (
        LOW
        + answers(0.5999, False, [1.0] * 2, unjudged=2)
        + answers(0.6, False, [0.0] * 50)
        + answers(None, False, [0.0] * 50)
    )
    e = no_passing_chunk(rows, 0.6)
    # flagged 2 (0.0, 0.5); unflagged 24, 12 judged: 10×0.5 + 2×1.0 → 7/12.
    assert e.value == pytest.approx((0.5 + 24 * 7 / 12) / 26)
    assert (e.n, e.population, e.n_by_stratum) == (14, 26, (2, 12))
    assert no_passing_chunk(rows, 0.0).value is None
    with pytest.raises(ValueError):
        no_passing_chunk(rows, math.nan)


# --- causes adjusted for each other ----------------------------------------------------------


def test_holm_by_hand():
    # Sorted 0.01, 0.03, 0.04 → ×3, ×2, ×1 = 0.03, 0.06, 0.04 → step-down max: 0.03, 0.06, 0.06.
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_adjusted_effects_recover_an_exact_linear_score():
    # score = 0.3 + 0.05 per 0.1 similarity − 0.02 per 10 chunks − 0.1 if multi-part, every
    # answer judged: the fit is exact, the effects are the coefficients.
    rows = []
    for s in (0.5, 0.6, 0.7, 0.8, 0.9):
        for c in (0, 5, 12, 30):
            for m in (False, True):
                score = 0.3 + 0.05 * s / 0.1 - 0.02 * c / 10 - 0.1 * m
                rows.append((s, c, m, m, score))  # the multi-part ones flagged, all judged
    got = adjusted_effects(rows)
    assert [e.name for e in got.effects] == list(CAUSES)
    similarity, chunks, multi = got.effects
    assert similarity.estimate == pytest.approx(0.05)
    assert chunks.estimate == pytest.approx(-0.02)
    assert multi.estimate == pytest.approx(-0.1)
    assert (got.n, got.too_few) == (40, False)
    assert all(e.holds for e in got.effects)


def test_adjusted_effect_interval_by_hand():
    # One cause that varies (multi-part), one stratum, every answer judged (weight 1): the
    # slope is the difference of the two groups' means, and the stratified sandwich variance
    # with its k/(k − 1) is 30/29 · (Σe²_multi/15² + Σe²_single/15²).
    rows = ([(0.7, 3, True, False, 1.0)] * 10 + [(0.7, 3, True, False, 0.5)] * 5
            + [(0.7, 3, False, False, 1.0)] * 14 + [(0.7, 3, False, False, 0.0)])
    multi_mean, single_mean = 12.5 / 15, 14 / 15
    sq_multi = 10 * (1 - multi_mean) ** 2 + 5 * (0.5 - multi_mean) ** 2  # 5/6
    sq_single = 14 * (1 - single_mean) ** 2 + single_mean**2  # 14/15
    se = math.sqrt(30 / 29 * (sq_multi + sq_single) / 15**2)  # 0.090126
    t = 2.048407141795244  # t(0.975, 28 = 30 answers − 2 columns); one cause fitted
    p_value = 0.27666  # 2·P(T₂₈ > 0.1/se)

    adjusted = adjusted_effects(rows)

    similarity, chunks, multi = adjusted.effects
    assert similarity.estimate is None and chunks.estimate is None  # constant: left out
    assert multi.estimate == pytest.approx(multi_mean - single_mean)  # −0.1
    assert (multi.low, multi.high) == pytest.approx((-0.1 - t * se, -0.1 + t * se))
    assert (multi.low, multi.high) == pytest.approx((-0.28462, 0.08462), abs=1e-5)
    assert multi.p_value == pytest.approx(p_value, abs=1e-4)
    assert multi.p_adjusted == multi.p_value and not multi.holds
    assert adjusted.n == 30 and not adjusted.too_few


def test_a_correlated_cause_does_not_take_the_credit():
    # Similarity alone drives the score; poor retrieval also returns more chunks. Bucketed
    # alone, many chunks look bad; adjusted for similarity, chunk count has no effect, and
    # multi-part (unrelated) none either. Flagged answers (all judged) are the poorly
    # retrieved ones, the others sampled at 30 %: the weights matter.
    rng = np.random.default_rng(7)
    rows = []
    for _ in range(3000):
        s = float(rng.uniform(0.4, 1.0))
        c = int(max(0, round(30 * (1 - s) + rng.normal(0, 3))))
        m = bool(rng.random() < 0.3)
        score = float(np.clip(0.3 + 0.7 * s + rng.normal(0, 0.1), 0, 1))
        flagged = s < 0.55
        judged = flagged or rng.random() < 0.3
        rows.append((s, c, m, flagged, score if judged else None))
    buckets = chunk_count_buckets([(c, f, y) for _, c, _, f, y in rows])
    few, many = buckets[1].estimate, buckets[-2].estimate  # 1–2 chunks vs 11–20
    assert few.low is not None and many.high is not None
    assert few.low > many.high  # the raw association is clear
    similarity, chunks, multi = adjusted_effects(rows).effects
    assert similarity.holds and similarity.estimate == pytest.approx(0.07, abs=0.01)
    assert chunks.low is not None and chunks.high is not None
    assert not chunks.holds and chunks.low < 0 < chunks.high
    assert not multi.holds


def test_causes_that_always_go_together_are_not_told_apart():
    # Every poorly retrieved answer (similarity 0.45) also has twelve chunks and a two-part
    # question and scores 0.25; the rest 0.85 / 2 chunks / single / 1.0. The three causes are
    # one column three times over: no one of them can be credited. (A rounding inverse of the
    # singular matrix once made "similarity" hold, depending on the rows' order.)
    rows = [(0.45, 12, True, True, 0.25)] * 10 + [(0.85, 2, False, False, 1.0)] * 22
    got = adjusted_effects(rows)
    assert not got.too_few and got.n == 32
    assert all(e.estimate is None and not e.holds for e in got.effects)
    # Chunk count and multi-part still together, similarity apart from them: similarity is
    # estimable (0.05 per 0.1), the other two are not.
    rows = []
    for s in (0.5, 0.6, 0.7, 0.8, 0.9):
        for m in (False, True):
            rows += [(s, 12 if m else 2, m, False, 0.3 + 0.05 * s / 0.1 - 0.1 * m)] * 4
    similarity, chunks, multi = adjusted_effects(rows).effects
    assert similarity.estimate == pytest.approx(0.05) and similarity.holds
    assert chunks.estimate is None and multi.estimate is None
    assert not chunks.holds and not multi.holds


def test_adjusted_effects_with_too_few_or_a_constant_cause():
    rows = [(0.5 + 0.01 * i, i % 7, False, False, 0.5 + 0.01 * i) for i in range(40)]
    got = adjusted_effects(rows[: MIN_FOR_REGRESSION - 1])
    assert got.too_few and all(e.estimate is None for e in got.effects)
    # No multi-part question at all: that cause is not fitted, the others are.
    got = adjusted_effects(rows)
    assert not got.too_few
    assert got.effects[2].estimate is None and not got.effects[2].holds
    assert got.effects[0].estimate == pytest.approx(0.1)
    # Answers without a similarity or a score do not enter the fit.
    more = rows + [(None, 3, True, False, 0.2), (0.7, 3, True, False, None)]
    assert adjusted_effects(more).n == 40


@pytest.mark.parametrize(
    "rows",
    [[(0.5, -1, False, False, 0.5)], [(0.5, 1, False, False, 1.5)]],
)
def test_adjusted_effects_refuse_nonsense(rows):
    with pytest.raises(ValueError):
        adjusted_effects(rows * MIN_FOR_REGRESSION)


def week_rows(low_score: float) -> list:
    """A week: 20 answers at similarity 0.3 scoring ``low_score`` and 20 at 0.95 scoring 1.0,
    all judged (unflagged, but the whole stratum judged)."""
    return ([(0.3, False, low_score)] * 20) + ([(0.95, False, 1.0)] * 20)


def test_held_out_cutoff_keeps_a_cutoff_that_holds_on_the_other_weeks():
    got = held_out_cutoff([week_rows(0.2)] * 4, 0.85)
    assert got.cutoff == 0.5
    assert got.test is not None
    assert got.test.value == pytest.approx(0.2)
    assert got.holds


def test_held_out_cutoff_drops_a_dip_seen_only_where_it_was_chosen():
    # Low-similarity answers dipped in the weeks the cut-off was chosen on, not in the others.
    got = held_out_cutoff([week_rows(0.2), week_rows(1.0)] * 2, 0.85)
    assert got.cutoff == 0.5
    assert got.test is not None
    assert got.test.value == pytest.approx(1.0)
    assert not got.holds
    none = held_out_cutoff([week_rows(1.0)] * 4, 0.85)
    assert (none.cutoff, none.test, none.holds) == (None, None, False)


def _moments_and_sizes(rows):
    """Per-stratum moments of the judged answers with a similarity, and the strata's sizes."""
    parts = [NO_MOMENTS, NO_MOMENTS]
    sizes = [0, 0]
    for s, c, m, flagged, y in rows:
        h = 0 if flagged else 1
        sizes[h] += 1
        if y is not None and s is not None:
            parts[h] = parts[h] + moments_of(s, c, m, y)
    return (parts[0], parts[1]), (sizes[0], sizes[1])


def _same_effects(got, want, rel=1e-7, abs_=1e-12):
    assert (got.n, got.too_few) == (want.n, want.too_few)
    for g, w in zip(got.effects, want.effects, strict=True):
        assert g.name == w.name and g.holds == w.holds
        for field in ("estimate", "low", "high", "p_value", "p_adjusted"):
            a, b = getattr(g, field), getattr(w, field)
            if b is None:
                assert a is None, (g.name, field)
            else:
                assert a == pytest.approx(b, rel=rel, abs=abs_), (g.name, field)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_regression_from_power_sums_is_the_regression_from_rows(seed):
    # Simulated answers: similarity drives the score, chunks follow similarity, multi-part
    # lowers it a little; flagged (poorly retrieved) answers all judged, the rest at 30 %.
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(2000):
        s = float(rng.uniform(0.3, 1.0))
        c = int(max(0, round(30 * (1 - s) + rng.normal(0, 3))))
        m = bool(rng.random() < 0.3)
        score = float(np.clip(round((0.3 + 0.7 * s - 0.05 * m + rng.normal(0, 0.15)) * 6) / 6,
                              0, 1))
        flagged = s < 0.5
        judged = flagged or rng.random() < 0.3
        rows.append((s, c, m, flagged, score if judged else None))
    moments, sizes = _moments_and_sizes(rows)
    _same_effects(adjusted_effects_from_moments(moments, sizes=sizes), adjusted_effects(rows))


def test_power_sums_agree_at_the_edges():
    # Too few; a cause that does not vary; causes that always go together.
    few = [(0.5 + 0.01 * i, i % 7, False, False, 0.5) for i in range(MIN_FOR_REGRESSION - 1)]
    constant = [(0.5 + 0.01 * i, i % 7, False, i % 3 == 0, 0.3 + 0.01 * i + 0.02 * (i * 7 % 5))
                for i in range(40)]
    together = [(0.45, 12, True, True, 0.25)] * 10 + [(0.85, 2, False, False, 1.0)] * 22
    for rows in (few, constant, together):
        moments, sizes = _moments_and_sizes(rows)
        _same_effects(adjusted_effects_from_moments(moments, sizes=sizes),
                      adjusted_effects(rows))
    moments, sizes = _moments_and_sizes(constant)
    with pytest.raises(ValueError, match="smaller"):
        adjusted_effects_from_moments(moments, sizes=(0, 0))
