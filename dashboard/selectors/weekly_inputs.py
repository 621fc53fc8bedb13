"""The weekly figures' inputs (answers counted, judged answers, judge runs) for a span of weeks:
from the rollups once they are whole, else (and always for a segment) from the raw rows."""

from __future__ import annotations

from collections.abc import Sequence

from dashboard.selectors import rollup_reads
from dashboard.selectors.judged import WeekJudged, judged_by_week
from dashboard.selectors.reads import (
    Usage,
    judged_rows,
    read_claims,
    read_counts,
    read_usage,
)
from dashboard.selectors.segments import SegmentFilter
from dashboard.selectors.weeks import Week


def weekly_inputs(
    use_case_ids: Sequence[int], span: Sequence[Week], *, claims_from: int | None,
    segment: SegmentFilter | None = None,
) -> tuple[dict[tuple[int, int], tuple[int, int]], dict[tuple[int, int], WeekJudged]]:
    """The answers counted and the judged answers per (use case, week index): from the rollups
    once they are whole, else from the raw rows (one use case for the claims, as the raw read
    of claims is per use case). Restricted to `segment`: from the raw rows."""
    where = segment.answers() if segment else None
    if where is None and rollup_reads.rollups_ready():
        return (
            rollup_reads.counts_from_rollups(use_case_ids, span),
            rollup_reads.judged_from_rollups(use_case_ids, span, claims_from=claims_from),
        )
    claims = None
    if claims_from is not None:
        (use_case_id,) = use_case_ids
        claims = read_claims(use_case_id, span[claims_from:], where)
    rows = judged_rows(use_case_ids, span, lean=claims_from is None, where=where)
    return (
        read_counts(use_case_ids, span, where),
        judged_by_week(rows, claims, claims_from=claims_from or 0),
    )


def weekly_usage(
    use_case_ids: Sequence[int], span: Sequence[Week], offset: int = 0,
    segment: SegmentFilter | None = None,
) -> dict[tuple[int, int], Usage]:
    """Judge runs per (use case, week index + offset): from the rollups once they are whole
    (the open runs raw), else from the raw runs (always for a `segment`)."""
    if segment:
        return read_usage(use_case_ids, span, offset, segment.answers("answer__"))
    if rollup_reads.rollups_ready():
        return rollup_reads.usage_from_rollups(use_case_ids, span, offset)
    return read_usage(use_case_ids, span, offset)
