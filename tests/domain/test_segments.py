"""Segments (issue 40): the vocabulary (dimensions, filters, metadata bounds), the breakdown's
estimates and corrected differences, pinned by hand, and the change finder."""

import math

import pytest

from dashboard.domain import segments
from dashboard.domain.segments import Tally, breakdown, changes, leading_finding, model_mean
from dashboard.domain.statistics.estimates import pooled_mean
from monitoring.domain.segments import (
    MAX_METADATA_KEYS,
    Segment,
    SegmentError,
    check_declared,
    dimensions,
    metadata_problems,
    parse_dimension,
    parse_segment,
    parse_segments,
    segment_value,
)


def test_dimensions_are_the_built_in_ones_and_the_declared_keys() -> None:
    assert dimensions(["kanal"]) == ["model", "service", "prompt_version", "source",
                                     "metadata.kanal"]
    assert parse_dimension("metadata.kanal", ["kanal"]) == "metadata.kanal"
    with pytest.raises(SegmentError) as refused:
        parse_dimension("metadata.sprache", ["kanal"])
    assert "metadata.kanal" in refused.value.message and "model" in refused.value.allowed


def test_a_segment_is_dimension_colon_value_and_the_value_may_hold_colons() -> None:
    assert parse_segment("model:gpt-4o-mini", []) == Segment("model", "gpt-4o-mini")
    assert parse_segment("source:https://wiki/x", []) == Segment("source", "https://wiki/x")
    assert parse_segment("metadata.kanal:", ["kanal"]) == Segment("metadata.kanal", "")
    for bad in ("model", "modell:x", "metadata.kanal:chat", "x" * 400):
        with pytest.raises(SegmentError):
            parse_segment(bad, [])
    assert parse_segments(["model:a", "model:a", "service:b"], []) == [
        Segment("model", "a"), Segment("service", "b")]


def test_declared_keys_are_checked() -> None:
    assert check_declared(["kanal", "sprache-1"]) == ["kanal", "sprache-1"]
    for bad in (["a b"], ["kanal", "kanal"], [f"k{i}" for i in range(11)], [""], "kanal", [3]):
        with pytest.raises(ValueError):
            check_declared(bad)


def test_metadata_values_become_segment_text() -> None:
    assert [segment_value(v) for v in ("chat", 3, 2.5, True, None, {"a": 1}, [1])] == [
        "chat", "3", "2.5", "true", None, None, None]
    assert segment_value(math.inf) is None


def test_metadata_bounds() -> None:
    assert metadata_problems({"kanal": "chat", "x": {"deep": [1]}}, ["kanal"]) == []
    assert metadata_problems({f"k{i}": 1 for i in range(MAX_METADATA_KEYS + 1)}, [])[0][0] == \
        "metadata"
    assert metadata_problems({"k" * 101: 1}, [])[0][0] == "metadata"
    assert [f for f, _ in metadata_problems({"kanal": {"a": 1}}, ["kanal"])] == [
        "metadata.kanal"]
    assert [f for f, _ in metadata_problems({"kanal": "x" * 201}, ["kanal"])] == [
        "metadata.kanal"]
    # An undeclared key may hold anything the size limits allow.
    assert metadata_problems({"kanal": {"a": 1}}, []) == []


def _tally(flagged: int, unflagged: int, f_scores: dict, u_scores: dict) -> Tally:
    return Tally.of((flagged, unflagged), (f_scores, u_scores), 0.8)


def test_a_segment_is_its_own_stratified_estimate_and_the_rest_the_others() -> None:
    a = _tally(4, 40, {0.0: 2, 1.0: 2}, {1.0: 10, 0.5: 2})
    b = _tally(2, 60, {1.0: 2}, {1.0: 12})
    whole = [_tally(6, 100, {0.0: 2, 1.0: 4}, {1.0: 22, 0.5: 2})]
    [first, second] = breakdown("model", {"a": [a], "b": [b]}, whole, threshold=0.8)
    assert (second.value, first.value) == ("a", "b")  # largest first: 62 against 44
    assert first.volume == 62 and second.volume == 44
    assert second.share == pytest.approx(44 / 106)
    # a: 4/44 · 0.5 + 40/44 · (11/12)
    assert second.estimate.value == pytest.approx(4 / 44 * 0.5 + 40 / 44 * 11 / 12)
    assert second.estimate == pooled_mean([a.strata()])
    assert second.rest == pooled_mean([b.strata()])
    # Share below 0.8: flagged 2 of 4, unflagged 2 of 12.
    assert second.below.value == pytest.approx(4 / 44 * 0.5 + 40 / 44 * 2 / 12)


def test_the_difference_is_model_based_and_bonferroni_corrected() -> None:
    weeks = 4
    good = [_tally(10, 240, {1.0: 6, 0.5: 4}, {1.0: 7, 0.5: 1}) for _ in range(weeks)]
    bad = [_tally(30, 220, {1.0: 6, 0.0: 24}, {1.0: 4, 0.0: 4}) for _ in range(weeks)]
    other = [_tally(10, 240, {1.0: 7, 0.5: 3}, {1.0: 8}) for _ in range(weeks)]
    whole = [_tally(50, 700, {1.0: 19, 0.5: 7, 0.0: 24}, {1.0: 19, 0.5: 1, 0.0: 4})
             for _ in range(weeks)]
    figures = breakdown("model", {"good": good, "bad": bad, "other": other}, whole,
                        threshold=0.8)
    by = {f.value: f for f in figures}
    d = by["bad"].difference
    assert d is not None and d.compared == 3
    assert d.confidence == pytest.approx(1 - 0.05 / 3)
    mine = model_mean(bad, segments.spreads(whole))
    rest = model_mean([w.minus(b) for w, b in zip(whole, bad, strict=True)],
                      segments.spreads(whole))
    assert mine is not None and rest is not None
    assert d.value == pytest.approx(mine[0] - rest[0])
    z = 2.3939797998185104  # the normal quantile at 1 − 0.05/6
    half = z * math.sqrt(mine[1] + rest[1])
    assert (d.low, d.high) == pytest.approx((d.value - half, d.value + half))
    assert d.holds and d.value < 0
    assert leading_finding(figures) is by["bad"]


def test_two_segments_are_one_comparison() -> None:
    a = [_tally(5, 100, {1.0: 5}, {1.0: 20, 0.0: 2})]
    b = [_tally(5, 100, {1.0: 4, 0.0: 1}, {1.0: 21, 0.0: 1})]
    whole = [_tally(10, 200, {1.0: 9, 0.0: 1}, {1.0: 41, 0.0: 3})]
    figures = breakdown("model", {"a": a, "b": b}, whole, threshold=0.8)
    first, second = (f.difference for f in figures)
    assert first is not None and second is not None
    assert first.compared == second.compared == 1
    assert first.value == pytest.approx(-second.value)
    # Of the two mirrored differences the finding is the worse segment's.
    worse = leading_finding(figures)
    assert worse is None or (worse.difference is not None and worse.difference.value < 0)


def test_too_few_judged_is_grey_with_the_rate_that_would_decide() -> None:
    thin = [_tally(0, 300, {}, {1.0: 2, 0.5: 1})]
    rest = [_tally(0, 300, {}, {1.0: 30})]
    whole = [_tally(0, 600, {}, {1.0: 32, 0.5: 1})]
    by = {f.value: f for f in breakdown("model", {"thin": thin, "rest": rest}, whole,
                                         threshold=0.8)}
    assert by["thin"].light == "grey" and by["thin"].difference is None
    assert by["thin"].sample_rate_needed is not None
    assert 3 / 300 < by["thin"].sample_rate_needed <= 1


def test_a_change_is_the_week_a_new_value_carries_most_answers() -> None:
    volumes = [{"a": 100}, {"a": 90, "b": 10}, {"a": 45, "b": 55}, {"a": 35, "b": 65},
               {"b": 100}, {"a": 4}, {"b": 60, "a": 50}]
    [change] = changes("model", volumes)
    # 55 of 100 is not clearly most (Wilson's lower end 0.45); 65 of 100 is (0.55).
    assert (change.week, change.before, change.after) == (3, "a", "b")
    assert change.share == pytest.approx(0.65)
    # A week too small to count, or without a clear leader, changes nothing; `since` hides
    # earlier changes; ten answers of ten are a change.
    assert changes("model", volumes, since=4) == []
    assert [c.week for c in changes("model", [{"a": 50}, {"b": 4}, {"b": 10}])] == [2]


def test_tally_minus_takes_a_segment_out() -> None:
    whole = _tally(5, 50, {1.0: 3, 0.0: 2}, {1.0: 9, 0.5: 1})
    part = _tally(2, 20, {1.0: 1, 0.0: 1}, {1.0: 4})
    assert whole.minus(part) == _tally(3, 30, {1.0: 2, 0.0: 1}, {1.0: 5, 0.5: 1})


def test_a_reviewed_segment_is_on_the_experts_scale_too() -> None:
    from dashboard.domain.expert_scale import Review
    from dashboard.domain.expert_weeks import expert_scale_by_week

    a = [_tally(5, 100, {1.0: 3, 0.5: 2}, {1.0: 20, 0.5: 2})]
    b = [_tally(5, 100, {1.0: 4, 0.0: 1}, {1.0: 21, 0.0: 1})]
    whole = [_tally(10, 200, {1.0: 7, 0.5: 2, 0.0: 1}, {1.0: 41, 0.5: 2, 0.0: 1})]
    reviews = [Review(0.5, 1.0, False), Review(1.0, 1.0, False), Review(0.5, 0.5, True)] * 4
    by = {f.value: f for f in breakdown("model", {"a": a, "b": b}, whole, threshold=0.8,
                                         reviews={"a": [reviews]})}
    assert by["b"].expert is None
    assert by["a"].expert == expert_scale_by_week([a[0].strata()], [reviews])
    assert by["a"].expert is not None and by["a"].expert.n_reviews == 12


def test_the_finding_alone_is_the_breakdowns_leading_finding() -> None:
    """`finding` skips the estimates of segments that do not lead; its result, its count of
    comparisons and its cheap `too_few` are those of the full breakdown, over random use
    cases (small strata, empty weeks, strata without a judged answer)."""
    import random

    rng = random.Random(40)
    found = 0
    for _ in range(300):
        k, weeks = rng.randint(1, 6), rng.randint(1, 4)
        segs: dict[str, list[Tally]] = {}
        for i in range(k):
            shift = rng.choice([0.0, 0.0, 0.3])
            segs[f"s{i}"] = []
            for _ in range(weeks):
                sizes = (rng.randint(0, 20), rng.randint(0, 200))
                hist: list[dict[float, int]] = []
                for h, size in enumerate(sizes):
                    judged = size if h == 0 else min(size, rng.randint(0, 30))
                    counts: dict[float, int] = {}
                    for _ in range(judged):
                        v = 1.0 if rng.random() > 0.2 + shift else rng.choice([0.0, 0.5])
                        counts[v] = counts.get(v, 0) + 1
                    hist.append(counts)
                segs[f"s{i}"].append(Tally.of(sizes, (hist[0], hist[1]), 0.8))
        whole = [sum((segs[s][w] for s in segs), Tally()) for w in range(weeks)]
        figures = breakdown("model", segs, whole, threshold=0.8)
        expected = leading_finding(figures)
        got, m = segments.finding("model", segs, whole, threshold=0.8)
        assert got == expected
        assert m == max((f.difference.compared for f in figures if f.difference), default=0)
        for weeks_of in segs.values():
            assert segments.too_few(weeks_of) == segments.pooled_of(weeks_of).too_few
        found += got is not None
    assert found > 10  # the case with a finding is exercised, not only the empty one
