"""The weekly estimates of a use case (`GET /use-cases/{slug}/estimates`), for a service key
allowed on it or a team lead logged in to the pages: the dashboard's figures of each week."""

import dataclasses
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone
from ninja import Router
from ninja.params.functions import Path, Query  # typed; ninja.Path is an alias to mypy
from pydantic import BaseModel, Field

from common.domain.weeks import WeekError as BadWeek
from common.domain.weeks import parse_week
from dashboard.domain.headline import Headline
from dashboard.domain.statistics.cells import Estimate
from dashboard.selectors import blind
from dashboard.selectors import figures as dashboard_figures
from dashboard.selectors import metrics as metric_selectors
from dashboard.selectors import overview as dashboard_overview
from dashboard.selectors.segments import segment_filter
from ingest.api.auth import CallerRequest, PersonSession, ServiceKey
from ingest.api.errors import errors
from ingest.schemas import ErrorOut
from judging.domain import judgement
from monitoring.domain.segments import SegmentError, parse_segments
from monitoring.models import Service, SettingChange, UseCase
from monitoring.selectors.access import service_sees, use_cases_for_user, user_leads

router = Router()

WEEK_PATTERN = r"^\d{4}-W\d{2}$"
# The default span when `from` is missing: a quarter, enough to see a trend.
DEFAULT_WEEKS = 12
# Two years of weeks: more is a bulk export, and the answer would take seconds to compute.
MAX_WEEKS = 104
# Weeks outside these years are a typo; the bounds also keep a week's end (and its time in UTC)
# inside what datetime can represent.
COST_PLACES = Decimal("0.000001")  # the precision JudgeRun.cost is stored with


class EstimateOut(BaseModel):
    value: float | None = Field(
        description="the stratified estimate; null when the week cannot be estimated (nothing "
        "judged, or a non-empty stratum without a judged answer)"
    )
    low: float | None = Field(description="lower end of the 95 % interval")
    high: float | None = Field(description="upper end of the 95 % interval")
    n: int = Field(description="judged answers the estimate rests on")
    n_flagged: int = Field(description="judged answers of the flagged stratum (judged in full)")
    n_random: int = Field(description="judged answers of the unflagged stratum (random sample)")
    population: int = Field(description="answers of the week, judged or not")
    too_few: bool = Field(
        description="a statement of precision: few judged answers (value and interval are "
        "still given; the light says whether the interval decides the week)"
    )


class ExpertScaleOut(BaseModel):
    value: float | None = Field(
        description="faithfulness on the experts' scale: the pooled judge-scale estimate "
        "corrected by the mean expert − judge difference of the reviewed answers "
        "(prediction-powered inference); null when it cannot be computed"
    )
    low: float | None = Field(description="lower end of the 95 % interval")
    high: float | None = Field(description="upper end of the 95 % interval")
    n_reviews: int = Field(description="reviewed answers (expert scores) in the pooled weeks")
    weeks_pooled: int = Field(
        description="weeks pooled: the week and up to 3 before it, none before a drift alarm"
    )


class TrendOut(BaseModel):
    slope: float = Field(description="change of the weekly estimates per week")
    slope_se: float
    lag: float
    current: float = Field(description="where the line puts the newest week: the headline's "
                           "value moved by slope × lag")
    low: float = Field(description="its 95 % interval (the pool's and the slope's variance)")
    high: float
    falling: bool = Field(description="the slope is below 0 at one-sided 90 %")


class HeadlineOut(BaseModel):
    scale: str = Field(description="experts (the experts' scale leads: a week's batch of "
                       "reviews stands behind it) or judge")
    view: str = Field(description="week (the week alone) or pooled (the week and the ones "
                      "before it)")
    week: str = Field(description="the ISO week it speaks for (the last of the pooled ones)")
    weeks: int = Field(description="weeks it spans")
    running: bool = Field(description="the week is not over yet (it leads only where even its "
                          "stricter interval for hourly looks lies below the threshold)")
    value: float | None
    low: float | None = Field(description="lower end of the 95 % interval")
    high: float | None = Field(description="upper end of the 95 % interval")
    n: int = Field(description="reviews (experts) or judged answers (judge) behind it")
    light: str = Field(description="red, amber, green or grey, as `light`: the overview card's "
                       "light, its place in the order and the action alarm read it")
    lag: float | None = Field(
        default=None, description="a pooled headline only: weeks from the pool's centre (its "
        "weeks weighted by volume) to the week it speaks for; it is their average, not that "
        "week's")
    trend: TrendOut | None = Field(
        default=None, description="a pooled headline only: the line through its weeks' judge "
        "estimates; null with fewer than 3 weeks to fit")
    trend_amber: bool = Field(
        default=False, description="the pool's weeks fall and the line puts the newest week "
        "below the threshold: a green light was turned amber")


class JudgeOut(BaseModel):
    model: str
    prompt_version: str
    mode: str = Field(
        description="per-claim, batched or single (one call): how the claims were verified"
    )


class SettingChangeOut(BaseModel):
    setting: str = Field(
        description="logprob_threshold, sample_rate, action_threshold or judge_evidence (the "
        "judge's chunk ranks and reason per verdict: 1 on, 0 off)"
    )
    old: float
    new: float
    at: str = Field(description="when, ISO 8601")
    by: str | None = Field(description="who (user name); null when the account is gone")


class WeekOut(BaseModel):
    week: str = Field(description="ISO week, YYYY-Www")
    start: str = Field(description="Monday 00:00 in the site's time zone, ISO 8601")
    end: str = Field(description="the next Monday 00:00, ISO 8601")
    current: bool = Field(description="the week is not over yet")
    estimate: EstimateOut = Field(
        description="mean faithfulness of the week's answers, on the judge's scale")
    share_below_threshold: EstimateOut | None = Field(
        description="share of answers whose faithfulness is below the action threshold"
    )
    claim_share: EstimateOut | None = Field(
        description="share of supported claims (GEDECKT 1, TEILWEISE 0.5)"
    )
    abstention_share: EstimateOut | None = Field(
        description="share of answers without claims (an honest 'I don't know')"
    )
    volume: int = Field(description="answers received for the week")
    flagged: int = Field(description="answers flagged by their token log-probabilities")
    flagged_share: float | None = Field(description="flagged / volume; null without answers")
    judged: int = Field(description="answers with a judge score")
    abstentions: int = Field(description="judged answers without claims")
    judge_runs: int
    judge_calls: int
    cost: str | None = Field(
        description="judge cost as a decimal string; null when a run was made with a judge "
        "model that has no price (the cost is then not known)"
    )
    currency: str | None = Field(description="currency of the cost; null when not known")
    unpriced_runs: int = Field(description="runs with calls of a judge model without a price")
    judges: list[JudgeOut] = Field(
        description="judge model, prompt version and mode of the week's runs"
    )
    judge_changed: bool = Field(
        description="a judge model or prompt version (and so a mode) the weeks before (in "
        "this answer) had not: figures before and after may differ for that reason alone"
    )
    setting_changes: list[SettingChangeOut] = Field(
        description="changes of the flag threshold, sample rate, action threshold or the "
        "judge's evidence made in the week, oldest first: the weeks before and after rest on "
        "other settings"
    )
    light: str = Field(
        description="red (interval below the action threshold), amber or green (interval "
        "narrowly across it, the estimate below or above), or grey (no estimate, or an "
        "interval across the threshold and wider than 0.10)"
    )
    pooled: EstimateOut = Field(
        description="the judge-scale estimate over this week and the 3 before it (fewer at the "
        "start of the data), same fields as estimate"
    )
    pooled_weeks: int = Field(description="weeks the pooled estimate spans")
    pooled_light: str = Field(description="the pooled estimate's light, as light")
    expert_scale: ExpertScaleOut | None = Field(
        description="faithfulness on the experts' scale over the pooled weeks; null without "
        "any review of their answers"
    )
    headline: HeadlineOut | None = Field(
        description="the figure a complete week is judged by: the experts' scale where it "
        "leads, else the judge's week where its light decides, else the judge's pooled view; "
        "null for the running week (see the answer's `headline`)"
    )


class EstimatesOut(BaseModel):
    use_case: str
    name: str
    segments: list[str] = Field(
        default_factory=list,
        description="the segments every figure is restricted to (`?segment=`); empty: all"
    )
    action_threshold: float
    leaves_unreviewed: bool = Field(
        description="answers leave the company unreviewed: they need a human release, "
        "whatever the estimate"
    )
    headline: HeadlineOut | None = Field(
        description="the use case's headline as of the last week asked for: that week's, or "
        "for a running week the week before's until the running one decides; null without "
        "weeks"
    )
    weeks: list[WeekOut] = Field(description="oldest first")


class WeekError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _week_monday(text: str, field: str) -> date:
    try:
        year, week = parse_week(text)
    except BadWeek as e:
        raise WeekError(field, "must be an ISO week like 2026-W07" if e.code == "format"
                        else str(e)) from None
    return date.fromisocalendar(year, week, 1)


def week_span(first: str | None, last: str | None) -> tuple[date, int]:
    """The Monday of the last week asked for and the number of weeks up to it."""
    today = timezone.localdate()
    until = _week_monday(last, "to") if last else today - timedelta(days=today.weekday())
    since = (
        _week_monday(first, "from") if first else until - timedelta(weeks=DEFAULT_WEEKS - 1)
    )
    if since > until:
        raise WeekError("from", "must not lie after `to`")
    weeks = (until - since).days // 7 + 1
    if weeks > MAX_WEEKS:
        raise WeekError("from", f"at most {MAX_WEEKS} weeks at a time, not {weeks}")
    return until, weeks


def estimate_out(estimate: Estimate | None) -> dict[str, Any] | None:
    if estimate is None:
        return None
    n_flagged, n_random = (tuple(estimate.n_by_stratum) + (0, 0))[:2]
    return {
        "value": estimate.value,
        "low": estimate.low,
        "high": estimate.high,
        "n": estimate.n,
        "n_flagged": n_flagged,
        "n_random": n_random,
        "population": estimate.population,
        "too_few": estimate.too_few,
    }


def _week_out(
    figures: dashboard_figures.WeekFigures, currencies: dict[str, str],
    changes: dict[str, list[SettingChange]],
) -> dict[str, Any]:
    unpriced = figures.unpriced_runs
    return {
        "week": figures.label,
        "start": figures.week.start.isoformat(),
        "end": figures.week.end.isoformat(),
        "current": figures.current,
        "estimate": estimate_out(figures.estimate),
        "share_below_threshold": estimate_out(figures.below),
        "claim_share": estimate_out(figures.claims),
        "abstention_share": estimate_out(figures.abstention_share),
        "volume": figures.volume,
        "flagged": figures.flagged,
        "flagged_share": figures.flagged_share,
        "judged": figures.judged,
        "abstentions": figures.abstentions,
        "judge_runs": figures.runs,
        "judge_calls": figures.calls,
        # A sum that leaves out the unpriced runs would understate the cost as if it were known.
        "cost": None if unpriced else str(figures.cost.quantize(COST_PLACES)),
        "currency": metric_selectors.week_currency(figures=figures, currencies=currencies),
        "unpriced_runs": unpriced,
        "judges": [
            {"model": m, "prompt_version": v, "mode": judgement.mode_of_prompt_version(v)}
            for m, v in figures.judges
        ],
        "judge_changed": figures.judge_changed,
        "setting_changes": [
            {"setting": c.field, "old": c.old_value, "new": c.new_value,
             "at": c.changed_at.isoformat(),
             "by": c.changed_by.get_username() if c.changed_by else None}
            for c in changes.get(figures.label, [])
        ],
        "light": figures.light,
        "pooled": estimate_out(figures.pooled),
        "pooled_weeks": figures.pooled_weeks,
        "pooled_light": figures.pooled_light,
        "headline": None if figures.current else _headline_out(figures.complete_headline),
        "expert_scale": None if figures.expert is None else {
            "value": figures.expert.value,
            "low": figures.expert.low,
            "high": figures.expert.high,
            "n_reviews": figures.expert.n_reviews,
            "weeks_pooled": figures.expert.weeks_pooled,
        },
    }


def _headline_out(headline: Headline) -> dict[str, Any]:
    return dataclasses.asdict(headline)


def _may_read(caller: Service | User, use_case: UseCase) -> bool:
    if isinstance(caller, Service):
        return service_sees(service=caller, use_case=use_case)
    return user_leads(user=caller, use_case=use_case)


# The estimates' segment filter, a repeatable parameter (its default a module-level value, as
# ruff's B008 asks of a mutable one).
SEGMENT_QUERY = Query(
    None, description="DIMENSION:VALUE, repeatable: every figure of these segments' answers "
    "alone (values of one dimension select either, dimensions all of theirs). Dimensions: "
    "model, service, prompt_version, source, metadata.<declared key>"
)


def readable_use_case(caller: Service | User, slug: str) -> tuple[UseCase | None, Any]:
    """The use case the caller may read the figures of, or the error response."""
    use_case = UseCase.objects.filter(slug=slug).first()
    if use_case is None or (
        # Nobody learns of another tenant's use case: a key not allowed on it, or a person not
        # assigned to it, gets exactly what a use case that does not exist gets.
        not caller.use_cases.filter(pk=use_case.pk).exists() if isinstance(caller, Service)
        else not use_cases_for_user(user=caller).filter(pk=use_case.pk).exists()
    ):
        return None, errors(404, [{"field": "slug", "message": "no such use case"}])
    if not _may_read(caller, use_case):
        return None, errors(403, [{"field": "slug", "message": (
            "only the use case's team leads may read its estimates"
        )}])
    return use_case, None


@router.get(
    "/use-cases/{slug}/estimates",
    auth=[ServiceKey(), PersonSession()],
    response={
        200: EstimatesOut, 400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut,
        429: ErrorOut, 503: ErrorOut,
    },
    summary="Weekly faithfulness estimates of a use case",
    description=(
        "Per ISO week (site time zone, Europe/Berlin) from `from` to `to`, both included "
        f"(default: the {DEFAULT_WEEKS} weeks up to the current one; at most {MAX_WEEKS}): "
        "the stratified estimate of mean faithfulness with its 95 % interval and sample sizes, "
        "the share of answers below the action threshold, the share of supported claims, "
        "volume, flagged share, abstentions, judge calls and cost. Faithfulness is to the "
        "retrieved sources, not truth. For a service key allowed on the use case, or a "
        "logged-in team lead of it (or staff)."
    ),
)
def get_estimates(
    request: CallerRequest,
    slug: str = Path(..., max_length=64),
    first: str | None = Query(
        None, alias="from", pattern=WEEK_PATTERN, description="first ISO week, e.g. 2026-W07"
    ),
    last: str | None = Query(
        None, alias="to", pattern=WEEK_PATTERN, description="last ISO week, e.g. 2026-W18"
    ),
    segment: list[str] | None = SEGMENT_QUERY,
) -> Any:
    caller = request.auth
    use_case, refused = readable_use_case(caller, slug)
    if refused is not None:
        return refused
    assert use_case is not None
    try:
        until, weeks = week_span(first, last)
        chosen = parse_segments(segment or [], use_case.segment_keys)
    except WeekError as e:
        return errors(400, [{"field": e.field, "message": str(e)}])
    except SegmentError as e:
        return errors(400, [{"field": "segment", "message": e.message}])
    figures = dashboard_figures.use_case_weeks(
        use_case=use_case, weeks=weeks, until=until,
        segment=segment_filter(chosen) if chosen else None,
    )
    if not isinstance(caller, Service):
        figures = blind.figures_for_reader(figures, user=caller, use_case_id=use_case.pk)
    currencies = metric_selectors.judge_currencies(
        models={model for f in figures for model, _ in f.judges}
    )
    changes = dashboard_overview.setting_changes_by_week(
        use_case=use_case, weeks=[f.week for f in figures])
    return {
        "use_case": use_case.slug,
        "name": use_case.name,
        "segments": [c.text for c in chosen],
        "action_threshold": use_case.action_threshold,
        "leaves_unreviewed": use_case.leaves_unreviewed,
        "headline": _headline_out(dashboard_figures.use_case_headline(figures)) if figures
        else None,
        "weeks": [_week_out(f, currencies, changes) for f in figures],
    }

