"""Scoring one answer from its verdict labels (judging.domain.scoring), hand-computed."""

import pytest

from judging.domain.judge_parse import Label
from judging.domain.scoring import ScoreResult, score_labels

G, T, U, X = Label.GEDECKT, Label.TEILWEISE, Label.UNGEDECKT, Label.UNPARSEABLE

# (id, labels, score, parseable, unparseable); none of these fail.
SCORE_CASES = [
    ("one supported", [G], 1.0, 1, 0),
    ("one partly", [T], 0.5, 1, 0),
    ("one unsupported", [U], 0.0, 1, 0),
    ("all supported", [G] * 8, 1.0, 8, 0),
    ("all unsupported", [U] * 5, 0.0, 5, 0),
    ("one of each", [G, T, U], 0.5, 3, 0),  # (1 + 0.5 + 0) / 3
    ("three of four supported", [G, G, U, G], 0.75, 4, 0),
    ("two halves and two wholes", [T, G, T, G], 0.75, 4, 0),  # (0.5+1+0.5+1) / 4
    ("five claims", [G, G, G, T, U], 0.7, 5, 0),  # 3.5 / 5
    ("three claims, one partly", [G, G, T], 2.5 / 3, 3, 0),
    ("seven partly", [T] * 7, 0.5, 7, 0),
    # UNPARSEABLE is left out, not counted as 0.
    ("one unparseable of four", [G, X, G, G], 1.0, 3, 1),
    ("one unparseable of three", [U, X, G], 0.5, 2, 1),
    # Exactly half unparseable still scores over the parseable ones.
    ("half unparseable of two", [X, T], 0.5, 1, 1),
    ("half unparseable of four", [G, X, X, U], 0.5, 2, 2),
    ("half unparseable of eight", [X, G, X, G, X, T, X, G], 0.875, 4, 4),  # 3.5 / 4
]


@pytest.mark.parametrize(
    ("labels", "score", "parseable", "unparseable"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_score(labels, score, parseable, unparseable):
    result = score_labels(labels)
    assert result.score == pytest.approx(score, abs=1e-12)
    assert (result.abstention, result.failed, result.reason) == (False, False, None)
    assert (result.parseable, result.unparseable) == (parseable, unparseable)


def test_halves_are_exact():
    assert score_labels([T, G, T]).score == 2 / 3
    assert score_labels([G, G, G, T, U]).score == 0.7


@pytest.mark.parametrize("labels", [[], ()])
def test_no_claims_is_an_abstention_scoring_one(labels):
    assert score_labels(labels) == ScoreResult(1.0, True, False, None, 0, 0)


# (labels, reason) - more than half unparseable fails visibly without a score.
FAIL_CASES = [
    ([X], "1 of 1 verdicts unparseable"),
    ([X, X], "2 of 2 verdicts unparseable"),
    ([X, X, G], "2 of 3 verdicts unparseable"),
    ([G, X, X, X, G], "3 of 5 verdicts unparseable"),
    ([X, X, X, G, X, G, X, G], "5 of 8 verdicts unparseable"),
]


@pytest.mark.parametrize(("labels", "reason"), FAIL_CASES, ids=[c[1] for c in FAIL_CASES])
def test_mostly_unparseable_fails(labels, reason):
    result = score_labels(labels)
    assert result.score is None
    assert result.failed and not result.abstention
    assert result.reason == reason
    assert result.parseable + result.unparseable == len(labels)


def test_plain_strings_are_read_as_labels():
    # The review side may hand over stored label strings.
    assert score_labels(["GEDECKT", "TEILWEISE"]).score == 0.75


def test_result_is_frozen():
    result = score_labels([G])
    with pytest.raises(AttributeError):
        result.score = 0.0  # type: ignore[misc]  # a frozen result, assigned to on purpose
