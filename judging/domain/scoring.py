"""One answer's faithfulness score from its claims' verdict labels (tier 2 and the review).

Score = mean of 1 / 0.5 / 0 (GEDECKT / TEILWEISE / UNGEDECKT) over the claims whose verdict
could be read. An answer without claims (an honest "I don't know") scores 1.0 and is marked as
an abstention. UNPARSEABLE verdicts never count as 0; but when more than half of them are
unreadable the few left say too little, so the answer fails visibly instead of getting a score.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from judging.domain.judge_parse import LABEL_POINTS, Label


@dataclass(frozen=True, slots=True)
class ScoreResult:
    score: float | None
    abstention: bool
    failed: bool
    reason: str | None  # why it failed, in words; None when it did not
    parseable: int
    unparseable: int


def score_labels(labels: Sequence[Label | str]) -> ScoreResult:
    """Score one answer from its verdict labels, in any order (other words are skipped)."""
    points = [LABEL_POINTS[Label(label)] for label in labels if label in LABEL_POINTS]
    parseable = len(points)
    unparseable = len(labels) - parseable
    if not labels:
        return ScoreResult(1.0, True, False, None, 0, 0)
    if 2 * unparseable > len(labels):
        reason = f"{unparseable} of {len(labels)} verdicts unparseable"
        return ScoreResult(None, False, True, reason, parseable, unparseable)
    # fsum: the mean of k halves is exactly k/2/n, not off in the last digit.
    return ScoreResult(math.fsum(points) / parseable, False, False, None, parseable, unparseable)
