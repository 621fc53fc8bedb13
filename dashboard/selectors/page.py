"""The use-case page: its weeks, the diagnosis of the last weeks, its open alarms; each table
read once for all of it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from alarms.models import Alarm
from common.db_router import reads_from_replica
from dashboard.selectors import rollup_reads
from dashboard.selectors.diagnosis import Diagnosis, use_case_diagnosis
from dashboard.selectors.figures import WeekFigures, week_figures
from dashboard.selectors.judged import judged_by_week
from dashboard.selectors.overview import cost_currency, open_alarms
from dashboard.selectors.reads import (
    judged_rows,
    read_claims,
    read_counts,
    read_reviews,
    read_usage,
)
from dashboard.selectors.restarts import pool_restarts
from dashboard.selectors.segments import SegmentFilter
from dashboard.selectors.weeks import CAUSES_WEEKS, POOLED_WEEKS, WEEKS, iso_weeks
from monitoring.models import UseCase


@dataclass(frozen=True)
class UseCasePage:
    weeks: list[WeekFigures]  # oldest first
    diagnosis: Diagnosis
    alarms: list[Alarm]
    currency: str


@reads_from_replica
def use_case_page(
    *, use_case: UseCase, until: datetime | date | None = None, weeks: int = WEEKS,
    pooled_weeks: int = POOLED_WEEKS, segment: SegmentFilter | None = None,
) -> UseCasePage:
    """Everything the use-case page shows; each table is read once for all of it.

    The claim-level share only for the last CAUSES_WEEKS weeks: it needs every claim label of
    every judged answer, the most expensive read of the page, and the weekly trend is the
    estimate's. (`use_case_weeks` computes it for every week it is asked for.) Restricted to
    `segment`: every figure of its answers alone, from the raw rows.
    """
    span = iso_weeks(weeks=max(weeks, CAUSES_WEEKS), until=until)
    ids = [use_case.pk]
    # (The first shown weeks pool what the span holds: their pooled_weeks says how many.)
    recent = len(span) - CAUSES_WEEKS
    where = segment.answers() if segment else None
    if where is None and rollup_reads.rollups_ready():
        usage = rollup_reads.usage_from_rollups(ids, span)
        # The weeks and the diagnosis from the rollups.
        counts = rollup_reads.counts_from_rollups(ids, span)
        judged_weeks = rollup_reads.judged_from_rollups(ids, span, claims_from=recent)
        causes_span = span[recent:]
        judged = None
        causes_usage = {(uc, wk - recent): u for (uc, wk), u in usage.items() if wk >= recent}
    else:
        usage = read_usage(ids, span, where=segment.answers("answer__") if segment else None)
        counts = read_counts(ids, span, where)
        judged = judged_rows(ids, span, where=where)
        judged_weeks = judged_by_week(judged, read_claims(use_case.pk, span[recent:], where),
                                      claims_from=recent)
        causes_span, causes_usage = span, usage
    figures = week_figures(
        use_case=use_case, weeks=span, counts=counts, judged=judged_weeks,
        usage=usage, claims_from=recent,
        reviews=read_reviews(ids, span, where),
        restarts=pool_restarts(ids, span).get(use_case.pk, ()),
        pooled_weeks=pooled_weeks,
    )
    return UseCasePage(
        weeks=figures[-weeks:],
        diagnosis=use_case_diagnosis(
            use_case=use_case, judged=judged, usage=causes_usage, weeks=causes_span,
            segment=segment,
        ),
        alarms=open_alarms(use_cases=[use_case]).get(use_case.pk, []),
        currency=cost_currency(judges={j for w in figures for j in w.judges}),
    )
