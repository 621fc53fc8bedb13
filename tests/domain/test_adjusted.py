"""The causes adjusted for each other (dashboard.domain.adjusted): similarity by bucket (a level
and a slope in each), chunk count and multi-part, from rows and from power sums."""

import math
from bisect import bisect_right

import numpy as np
import pytest

from dashboard.domain.adjusted import (
    CAUSES,
    MIN_FOR_CONTRAST,
    MIN_FOR_REGRESSION,
    adjusted_effects,
    adjusted_effects_from_moments,
    holm,
)
from dashboard.domain.causes import chunk_count_buckets
from monitoring.domain.moments import DEFAULT_SIMILARITY_EDGES, NO_MOMENTS, Moments, moments_of


def test_holm_by_hand():
    # Sorted 0.01, 0.03, 0.04 → ×3, ×2, ×1 = 0.03, 0.06, 0.04 → step-down max: 0.03, 0.06, 0.06.
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


def test_two_buckets_by_hand():
    # Only similarity varies, between two buckets (<0.5 and ≥0.9) and not within them; one
    # stratum, every answer judged (weight 1). The fit is each bucket's mean; similarity's
    # difference is the two means' difference, and the stratified sandwich variance with its
    # k/(k − 1) is 40/39 · (Σe²_high/20² + Σe²_low/20²).
    low = [(0.45, 3, False, False, 1.0)] * 15 + [(0.45, 3, False, False, 0.5)] * 5  # 0.875
    high = [(0.95, 3, False, False, 1.0)] * 19 + [(0.95, 3, False, False, 0.0)]  # 0.95
    sq_low = 15 * 0.125**2 + 5 * 0.375**2  # 0.9375
    sq_high = 19 * 0.05**2 + 0.95**2  # 0.95
    se = math.sqrt(40 / 39 * (sq_high + sq_low) / 20**2)  # 0.0695683
    t = 2.0243941639119694  # t(0.975, 38 = 40 answers − 2 levels); one cause fitted

    got = adjusted_effects(low + high)

    similarity, chunks, multi = got.effects
    assert chunks.estimate is None and multi.estimate is None  # constant: left out
    assert similarity.estimate == pytest.approx(0.075)
    assert (similarity.low, similarity.high) == pytest.approx((0.075 - t * se, 0.075 + t * se))
    assert (similarity.low, similarity.high) == pytest.approx((-0.06583, 0.21583), abs=1e-5)
    assert similarity.p_value == pytest.approx(0.28780, abs=1e-4)
    assert similarity.p_adjusted == similarity.p_value and not similarity.holds
    assert got.similarity_buckets == (0, 5)  # <0.5 against ≥0.9
    assert (got.n, got.too_few) == (40, False)


def _weighted_lstsq(rows, sizes):
    """The regression written out independently: weighted least squares (numpy's lstsq on
    √w-scaled rows) of the score on a level and a slope (similarity/0.1) per bucket of
    DEFAULT_SIMILARITY_EDGES, chunks/10 and multi-part; returns (coefficients by name, the
    weighted mean similarity/0.1 per bucket)."""
    counts = [sum(1 for r in rows if r[3]), sum(1 for r in rows if not r[3])]
    buckets = sorted({bisect_right(DEFAULT_SIMILARITY_EDGES, r[0]) for r in rows})
    levels: list[tuple[str, int]] = []
    for b in buckets:
        levels += [("level", b), ("slope", b)]
    names: list[object] = [*levels, "chunks", "multi"]
    design, weight, score_of = [], [], []
    for s, c, m, flagged, score in rows:
        b = bisect_right(DEFAULT_SIMILARITY_EDGES, s)
        row = [0.0 if of != b else (1.0 if kind == "level" else s / 0.1) for kind, of in levels]
        design.append([*row, c / 10, float(m)])
        h = 0 if flagged else 1
        weight.append(sizes[h] / counts[h])
        score_of.append(score)
    x, w, y = np.array(design), np.array(weight), np.array(score_of)
    root = np.sqrt(w)
    beta = np.linalg.lstsq(x * root[:, None], y * root, rcond=None)[0]
    means = {}
    for b in buckets:
        inside = np.array([bisect_right(DEFAULT_SIMILARITY_EDGES, r[0]) == b for r in rows])
        means[b] = float(np.sum(w[inside] * np.array([r[0] for r in rows])[inside] / 0.1)
                         / np.sum(w[inside]))
    return dict(zip(names, beta, strict=True)), means


def test_the_broken_line_against_an_independent_least_squares():
    # A step in similarity, chunk count following similarity, multi-part lowering the score;
    # flagged answers all judged, the others at 30 %.
    rng = np.random.default_rng(11)
    rows, sizes = [], [0, 0]
    for _ in range(1500):
        s = float(rng.uniform(0.35, 1.0))
        c = int(rng.poisson(2 + 40 * (1 - s) ** 2))
        m = bool(rng.random() < 0.3)
        score = float(np.clip((0.6 if s < 0.65 else 0.95) - 0.1 * m + rng.normal(0, 0.1), 0, 1))
        flagged = score < 0.7
        sizes[0 if flagged else 1] += 1
        if flagged or rng.random() < 0.3:
            rows.append((s, c, m, flagged, score))
    beta, means = _weighted_lstsq(rows, sizes)
    low, high = min(means), max(means)
    want = (beta["level", high] + beta["slope", high] * means[high]
            - beta["level", low] - beta["slope", low] * means[low])

    got = adjusted_effects(rows, sizes=(sizes[0], sizes[1]))

    similarity, chunks, multi = got.effects
    assert got.similarity_buckets == (low, high) == (0, 5)
    assert similarity.estimate == pytest.approx(want, rel=1e-9)
    assert chunks.estimate == pytest.approx(beta["chunks"], rel=1e-9, abs=1e-12)
    assert multi.estimate == pytest.approx(beta["multi"], rel=1e-9)
    assert similarity.holds and multi.holds and multi.estimate == pytest.approx(-0.1, abs=0.02)
    assert not chunks.holds


def test_a_curve_is_recovered_exactly_where_it_is_a_broken_line():
    # score = a broken line in similarity (its kink at the bucket edge 0.7) − 0.02 per 10
    # chunks − 0.1 if multi-part, every answer judged: the fit is exact.
    rows = []
    for s in np.linspace(0.5, 0.99, 50):
        for c in (0, 5, 12, 30):
            for m in (False, True):
                level = 0.5 + 0.05 * (s - 0.5) / 0.1 if s < 0.7 else 0.6 + 0.1 * (s - 0.7) / 0.1
                rows.append((float(s), c, m, m, float(level - 0.002 * c - 0.1 * m)))
    got = adjusted_effects(rows)
    similarity, chunks, multi = got.effects
    # The ends: 0.5–0.6 and ≥0.9, each at its answers' mean similarity.
    ends = [[r[0] for r in rows if lo <= r[0] < hi] for lo, hi in ((0.5, 0.6), (0.9, 1.0))]
    at = [float(np.mean(e)) for e in ends]
    want = (0.6 + 0.1 * (at[1] - 0.7) / 0.1) - (0.5 + 0.05 * (at[0] - 0.5) / 0.1)
    assert got.similarity_buckets == (1, 5)
    assert similarity.estimate == pytest.approx(want)
    assert chunks.estimate == pytest.approx(-0.02)
    assert multi.estimate == pytest.approx(-0.1)
    assert [e.name for e in got.effects] == list(CAUSES)
    assert all(e.holds for e in got.effects)


def test_chunks_that_follow_an_s_curve_do_not_take_similarity_s_credit():
    # Faithfulness falls off an S-curve below similarity 0.65, and poor retrieval returns many
    # chunks, in an S-curve too. Bucketed alone, many chunks look bad; a straight line in
    # similarity leaves the curve to chunk count. By bucket, with a slope in each, chunk count
    # has no effect and multi-part (unrelated) none either.
    rng = np.random.default_rng(7)
    rows = []
    for _ in range(6000):
        s = float(np.clip(rng.normal(0.72, 0.12), 0.2, 0.99))
        c = int(rng.poisson(3 + 20 / (1 + math.exp((s - 0.65) / 0.05))))
        m = bool(rng.random() < 0.3)
        mean = 0.65 + 0.30 / (1 + math.exp(-(s - 0.65) / 0.03))
        score = float(rng.binomial(4, mean) / 4)
        flagged = rng.random() < 0.04 + 0.5 * (1 - score)
        judged = flagged or rng.random() < 0.3
        rows.append((s, c, m, flagged, score if judged else None))
    buckets = chunk_count_buckets([(c, f, y) for _, c, _, f, y in rows])
    few, many = buckets[2].estimate, buckets[-2].estimate  # 3–5 chunks vs 11–20
    assert few.low is not None and many.high is not None
    assert few.low > many.high  # the raw association is clear
    similarity, chunks, multi = adjusted_effects(rows).effects
    assert similarity.holds and similarity.estimate is not None and similarity.estimate > 0.2
    assert chunks.low is not None and chunks.high is not None
    assert not chunks.holds and chunks.low < 0 < chunks.high
    assert not multi.holds


def test_causes_that_always_go_together_are_not_told_apart():
    # Every poorly retrieved answer (similarity 0.45) also has twelve chunks and a two-part
    # question and scores 0.25; the rest 0.85 / 2 chunks / single / 1.0. The three causes are
    # one column three times over: no one of them can be credited.
    rows = [(0.45, 12, True, True, 0.25)] * 20 + [(0.85, 2, False, False, 1.0)] * 22
    got = adjusted_effects(rows)
    assert not got.too_few and got.n == 42
    assert all(e.estimate is None and not e.holds for e in got.effects)
    assert got.similarity_buckets is None
    # Chunk count and multi-part still together, similarity apart from them: similarity is
    # estimable, the other two are not.
    rows = []
    for s in (0.45, 0.55, 0.65, 0.75, 0.85, 0.95):
        for m in (False, True):
            rows += [(s, 12 if m else 2, m, False, 0.3 + 0.05 * s / 0.1 - 0.1 * m)] * 10
    got = adjusted_effects(rows)
    similarity, chunks, multi = got.effects
    assert similarity.estimate == pytest.approx(0.25) and similarity.holds
    assert chunks.estimate is None and multi.estimate is None
    assert not chunks.holds and not multi.holds


def test_similarity_needs_two_buckets_with_enough_answers():
    # Answers in three buckets, but only one with MIN_FOR_CONTRAST judged answers: chunk count
    # and multi-part are fitted, similarity's difference is not.
    rows = [(0.55 + 0.001 * i, i % 7, i % 3 == 0, False, 0.5 + 0.02 * (i % 5))
            for i in range(MIN_FOR_CONTRAST + 20)]
    rows += [(0.95, 3, False, False, 1.0)] * (MIN_FOR_CONTRAST - 1)
    rows += [(0.3, 3, True, False, 0.2)]  # one answer: its level is fitted exactly
    got = adjusted_effects(rows)
    similarity, chunks, multi = got.effects
    assert similarity.estimate is None and not similarity.holds
    assert got.similarity_buckets is None
    assert chunks.estimate is not None and multi.estimate is not None
    # One more high answer: now ≥0.9 is compared with 0.5–0.6 (not with the single answer
    # below 0.5, which would compare with a level of zero variance).
    got = adjusted_effects([*rows, (0.95, 3, False, False, 0.75)])
    assert got.similarity_buckets == (1, 5)
    assert got.effects[0].estimate is not None


def test_adjusted_effects_with_too_few_or_a_constant_cause():
    rows = [(0.5025 + 0.005 * i, i % 7, False, False, 0.5025 + 0.005 * i) for i in range(100)]
    got = adjusted_effects(rows[: MIN_FOR_REGRESSION - 1])
    assert got.too_few and all(e.estimate is None for e in got.effects)
    # No multi-part question at all: that cause is not fitted, the others are. The score is
    # the similarity: 0.5–0.6 (mean 0.55) against ≥0.9 (mean 0.95), 20 answers each.
    got = adjusted_effects(rows)
    assert not got.too_few
    assert got.effects[2].estimate is None and not got.effects[2].holds
    assert got.effects[0].estimate == pytest.approx(0.4)
    assert got.effects[1].estimate == pytest.approx(0.0, abs=1e-9)
    # Answers without a similarity or a score do not enter the fit.
    more = rows + [(None, 3, True, False, 0.2), (0.7, 3, True, False, None)]
    assert adjusted_effects(more).n == 100


@pytest.mark.parametrize(
    "rows",
    [[(0.5, -1, False, False, 0.5)], [(0.5, 1, False, False, 1.5)]],
)
def test_adjusted_effects_refuse_nonsense(rows):
    with pytest.raises(ValueError):
        adjusted_effects(rows * MIN_FOR_REGRESSION)
    with pytest.raises(ValueError, match="confidence"):
        adjusted_effects([], confidence=1.0)
    with pytest.raises(ValueError, match="edges"):
        adjusted_effects([], edges=(0.6, 0.5))


# --- the same from power sums per (stratum, similarity bucket) ------------------------------


def _moments_and_sizes(rows):
    """Per-(stratum, bucket) moments of the judged answers with a similarity, and the strata's
    sizes."""
    parts: dict[tuple[int, int], Moments] = {}
    sizes = [0, 0]
    for s, c, m, flagged, y in rows:
        h = 0 if flagged else 1
        sizes[h] += 1
        if y is not None and s is not None:
            key = (h, bisect_right(DEFAULT_SIMILARITY_EDGES, s))
            parts[key] = parts.get(key, NO_MOMENTS) + moments_of(s, c, m, y)
    return parts, (sizes[0], sizes[1])


def _same_effects(got, want, rel=1e-7, abs_=1e-12):
    assert (got.n, got.too_few, got.similarity_buckets) == (
        want.n, want.too_few, want.similarity_buckets)
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
    # Simulated answers: similarity drives the score in a step, chunks follow similarity,
    # multi-part lowers it a little; flagged (poorly retrieved) answers all judged, the rest
    # at 30 %.
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(2000):
        s = float(rng.uniform(0.3, 1.0))
        c = int(max(0, round(30 * (1 - s) + rng.normal(0, 3))))
        m = bool(rng.random() < 0.3)
        mean = 0.6 if s < 0.65 else 0.95
        score = float(np.clip(round((mean - 0.05 * m + rng.normal(0, 0.15)) * 6) / 6, 0, 1))
        flagged = s < 0.5
        judged = flagged or rng.random() < 0.3
        rows.append((s, c, m, flagged, score if judged else None))
    moments, sizes = _moments_and_sizes(rows)
    _same_effects(adjusted_effects_from_moments(moments, sizes=sizes), adjusted_effects(rows))


def test_power_sums_agree_at_the_edges():
    # Too few; a cause that does not vary; causes that always go together; a bucket whose
    # similarity does not vary (no slope) and one of a single answer; one bucket only.
    few = [(0.5 + 0.01 * i, i % 7, False, False, 0.5) for i in range(MIN_FOR_REGRESSION - 1)]
    constant = [(0.5 + 0.01 * i, i % 7, False, i % 3 == 0, 0.3 + 0.01 * i + 0.02 * (i * 7 % 5))
                for i in range(50)]
    together = [(0.45, 12, True, True, 0.25)] * 20 + [(0.85, 2, False, False, 1.0)] * 22
    flat = ([(0.45, i % 4, i % 2 == 0, False, 0.4 + 0.1 * (i % 3)) for i in range(30)]
            + [(0.3, 5, True, True, 0.1)]
            + [(0.9 + 0.002 * i, i % 5, i % 3 == 0, i % 4 == 0, 1.0 - 0.01 * (i % 6))
               for i in range(30)])
    one_bucket = [(0.61 + 0.001 * i, i % 5, i % 2 == 0, False, 0.3 + 0.02 * (i % 9))
                  for i in range(40)]
    for rows in (few, constant, together, flat, one_bucket):
        moments, sizes = _moments_and_sizes(rows)
        _same_effects(adjusted_effects_from_moments(moments, sizes=sizes),
                      adjusted_effects(rows))
    assert adjusted_effects(flat).similarity_buckets == (0, 5)
    assert adjusted_effects(one_bucket).effects[0].estimate is None
    moments, sizes = _moments_and_sizes(constant)
    with pytest.raises(ValueError, match="smaller"):
        adjusted_effects_from_moments(moments, sizes=(0, 0))
