"""Causes (dashboard.domain.causes) on hand-made rows: the buckets, their stratified
estimates, and the similarity cutoff rule."""

import math

import pytest

from dashboard.domain.causes import (
    Bucket,
    chunk_count_buckets,
    held_out_cutoff,
    multi_part_split,
    no_passing_chunk,
    similarity_buckets,
    similarity_cutoff,
)
from dashboard.domain.statistics.cells import Estimate, Stratum
from dashboard.domain.statistics.estimates import stratified_mean


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
