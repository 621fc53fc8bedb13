"""A use case's segments (issue 40): `GET /use-cases/{slug}/segments?dimension=…`, a
dimension's segments with their figures, for a service key allowed on it or a team lead."""

import dataclasses
from typing import Any

from ninja import Router
from ninja.params.functions import Path, Query  # typed; ninja.Path is an alias to mypy
from pydantic import BaseModel, Field

from dashboard.api import (
    WEEK_PATTERN,
    EstimateOut,
    WeekError,
    estimate_out,
    readable_use_case,
    week_span,
)
from dashboard.selectors import segments as segment_selectors
from dashboard.selectors.weeks import CAUSES_WEEKS, iso_weeks
from ingest.api.auth import CallerRequest, PersonSession, ServiceKey
from ingest.api.errors import errors
from ingest.schemas import ErrorOut
from monitoring.domain.segments import SegmentError, dimensions, parse_dimension

router = Router()


class SegmentDifferenceOut(BaseModel):
    value: float = Field(description="the segment's estimate minus the rest's")
    low: float
    high: float
    confidence: float = Field(
        description="the interval's level, corrected for the segments compared (Bonferroni)"
    )
    p_adjusted: float = Field(description="Holm-adjusted over the segments compared")
    compared: int
    holds: bool = Field(description="the corrected interval excludes 0")


class SegmentExpertOut(BaseModel):
    value: float | None
    low: float | None
    high: float | None
    n_reviews: int
    too_few: bool


class SegmentOut(BaseModel):
    value: str = Field(description="the segment's value (\"\" where answers have none)")
    volume: int
    flagged: int
    share: float = Field(description="of the dimension's answers in the weeks")
    estimate: EstimateOut = Field(description="pooled over the weeks, stratified")
    share_below_threshold: EstimateOut
    light: str
    rest: EstimateOut = Field(description="the rest of the use case, the same way")
    difference: SegmentDifferenceOut | None = Field(
        description="null: too few judged answers in the segment or the rest"
    )
    sample_rate_needed: float | None = Field(
        description="grey: the sample rate at which these weeks would have decided it"
    )
    expert_scale: SegmentExpertOut | None = Field(
        default=None, description="on the experts' scale, where its answers were reviewed"
    )


class SegmentsOut(BaseModel):
    use_case: str
    dimension: str
    dimensions: list[str]
    weeks: list[str]
    segments: list[SegmentOut] = Field(description="largest first")


@router.get(
    "/use-cases/{slug}/segments",
    auth=[ServiceKey(), PersonSession()],
    response={
        200: SegmentsOut, 400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut,
        429: ErrorOut, 503: ErrorOut,
    },
    summary="A dimension's segments with their figures",
    description=(
        "The segments of one dimension (`model`, `service`, `prompt_version`, `source`, "
        "`metadata.<key>` for a key the use case declares) over the weeks `from` to `to` "
        f"(default: the {CAUSES_WEEKS} weeks up to the current one), largest "
        "first: each segment's stratified estimate pooled over the weeks, its share below the "
        "action threshold, its volume, and its difference to the rest of the use case with an "
        "interval corrected for the number of segments compared."
    ),
)
def get_segments(
    request: CallerRequest,
    slug: str = Path(..., max_length=64),
    dimension: str = Query(..., max_length=80, description="e.g. model or metadata.kanal"),
    first: str | None = Query(
        None, alias="from", pattern=WEEK_PATTERN, description="first ISO week, e.g. 2026-W07"
    ),
    last: str | None = Query(
        None, alias="to", pattern=WEEK_PATTERN, description="last ISO week, e.g. 2026-W18"
    ),
) -> Any:
    caller = request.auth
    use_case, refused = readable_use_case(caller, slug)
    if refused is not None:
        return refused
    assert use_case is not None
    try:
        chosen = parse_dimension(dimension, use_case.segment_keys)
        if first is None:
            until, weeks = week_span(None, last)
            weeks = min(weeks, CAUSES_WEEKS)
        else:
            until, weeks = week_span(first, last)
    except WeekError as e:
        return errors(400, [{"field": e.field, "message": str(e)}])
    except SegmentError as e:
        return errors(400, [{"field": "dimension", "message": e.message}])
    span = iso_weeks(weeks=weeks, until=until)
    figures = segment_selectors.breakdown(use_case=use_case, dimension=chosen, weeks=span)
    return {
        "use_case": use_case.slug,
        "dimension": chosen,
        "dimensions": dimensions(use_case.segment_keys),
        "weeks": [w.label for w in span],
        "segments": [
            {
                "value": f.value,
                "volume": f.volume,
                "flagged": f.flagged,
                "share": f.share,
                "estimate": estimate_out(f.estimate),
                "share_below_threshold": estimate_out(f.below),
                "light": f.light,
                "rest": estimate_out(f.rest),
                "difference": None if f.difference is None else {
                    **dataclasses.asdict(f.difference), "holds": f.difference.holds,
                },
                "sample_rate_needed": f.sample_rate_needed,
                "expert_scale": None if f.expert is None else {
                    "value": f.expert.value, "low": f.expert.low, "high": f.expert.high,
                    "n_reviews": f.expert.n_reviews, "too_few": f.expert.too_few,
                },
            }
            for f in figures
        ],
    }
