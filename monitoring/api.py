"""The API (`/api/v1/`): RAG services post answers with a bearer key; the weekly estimates of
a use case are read with a service key allowed on it or by a team lead logged in to the pages.

Errors are always `{"errors": [{"field", "message"}]}` with a 4xx status; a client's mistake is
never a 500. The body is parsed here rather than by Django's form machinery so that every way a
body can be malformed (not UTF-8, not JSON, NaN, nesting that exhausts the parser, too large)
becomes a named 400 or 413.
"""

import logging
import re
from collections.abc import Sequence
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from ninja import NinjaAPI, Path, Query
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer, SessionAuth
from pydantic import BaseModel, Field

from monitoring import decoding, ratelimit, selectors, services
from monitoring.domain import keys
from monitoring.domain.statistics import Estimate
from monitoring.models import Answer, Service, UseCase
from monitoring.schemas import (
    AnswerDetailOut,
    AnswerIn,
    AnswerOut,
    BatchIn,
    BatchOut,
    ErrorOut,
)
from monitoring.selectors import dashboard
from monitoring.selectors import metrics as metric_selectors

logger = logging.getLogger(__name__)

# Retry-After on 503: long enough for a database failover, short enough not to pile up answers.
RETRY_AFTER_SECONDS = 5
# last_used_at is for people ("is this key still in use?"), not an audit log: writing it on
# every request would double the writes of ingest.
LAST_USED_RESOLUTION_SECONDS = 300


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes")


class BodyEncoded(Exception):
    """A compressed body (Content-Encoding gzip, br, ...): Treue reads JSON as it is sent."""


class StrictJSONParser(Parser):
    def parse_body(self, request: HttpRequest) -> Any:
        encoding = request.headers.get("Content-Encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            raise BodyEncoded(f"Content-Encoding {encoding!r} is not read here; send the body "
                              "uncompressed")
        limit = _body_limit(request)
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            raise BodyTooLarge(limit)
        body = request.body
        if len(body) > limit:
            raise BodyTooLarge(limit)
        # The fast way first (msgspec, see monitoring.decoding); what it refuses is parsed
        # again below, so that the error names the problem. `treue_raw` keeps each answer as
        # sent, for replays of answers stored under the old fingerprint.
        if _is_batch(request):
            answers, raws = _decode_batch(body)
            if answers is not None:
                request.treue_raw = raws  # type: ignore[attr-defined]
                return {"answers": answers}
        else:
            answer = decoding.decode_answer(body)
            if answer is not None:
                request.treue_raw = body  # type: ignore[attr-defined]
                return answer
        data = decoding.parse(body)
        if not isinstance(data, dict):
            raise decoding.BodyError("the body must be a JSON object")
        answers = data.get("answers")
        request.treue_raw = (  # type: ignore[attr-defined]
            answers if _is_batch(request) and isinstance(answers, list) else data
        )
        return data


def _decode_batch(body: bytes) -> tuple[list[Any] | None, Sequence[bytes | None]]:
    """A batch's items the fast way: all in one pass; when an item is refused, item by item.
    (None, ()) when the body itself must go the slow way: not JSON, not UTF-8 (msgspec
    splits without checking the strings it skips), too many items."""
    answers = decoding.decode_batch(body)
    if answers is not None:
        return answers, decoding.BatchItems(body, len(answers))
    items = decoding.split_batch(body)
    if items is None or not _is_utf8(body):
        return None, ()
    return [decoding.decode_item(item) for item in items], items


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _is_batch(request: HttpRequest) -> bool:
    return request.path.endswith("/batch")


def _body_limit(request: HttpRequest) -> int:
    return body_limit(request.path)


def body_limit(path: str) -> int:
    """The most an ingest endpoint takes, by its path: the batch endpoint has its own limit."""
    if path.endswith("/batch"):
        return settings.TREUE_MAX_BATCH_BODY_BYTES
    return settings.TREUE_MAX_BODY_BYTES


class RateLimited(Exception):
    def __init__(self, limited: ratelimit.Limited) -> None:
        super().__init__(f"more than {limited.limit} requests a minute with this key")
        self.retry_after = limited.retry_after


class ServiceKey(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Service | None:
        # The prefix only finds the row; the secret is compared as hashes in constant time,
        # and a revoked service (active=False) is not found at all.
        prefix = keys.key_prefix(token)
        found = selectors.service_for_key(prefix) if prefix else None
        if found is None or not keys.key_matches(token, found.service.key_hash):
            return None
        service = found.service
        # Ingest resolves use cases against these, without asking the database again.
        request.treue_use_cases = found.use_cases  # type: ignore[attr-defined]
        # Counted once per request, after the key is known to be valid: a batch is one request,
        # and a stranger guessing keys cannot use up a real key's allowance.
        limited = ratelimit.check(service.key_prefix)
        if limited is not None:
            raise RateLimited(limited)
        now = timezone.now()
        if (
            service.last_used_at is None
            or (now - service.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS
        ):
            Service.objects.filter(pk=service.pk).update(last_used_at=now)
        return service


class PersonSession(SessionAuth):
    """A person logged in to the pages (Django's session cookie), for the read endpoints.

    Only identifies the person; each operation decides what they may read (the estimates: team
    leads of the use case and staff). CSRF is checked for unsafe methods only, so a GET needs
    no token.
    """

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = request.user
        return user if user.is_authenticated else None


class TreueAPI(NinjaAPI):
    def get_openapi_schema(self, *args: Any, **kwargs: Any) -> Any:
        schema = super().get_openapi_schema(*args, **kwargs)
        # Batch items are validated one by one (a bad item must not cost the others), so the
        # model holds them as Any; the published schema still says what an item must be.
        answers = schema["components"]["schemas"]["BatchIn"]["properties"]["answers"]
        answers["items"] = {"$ref": "#/components/schemas/AnswerIn"}
        return schema


api = TreueAPI(
    title="Treue ingest API",
    version="1",
    description=(
        "RAG services send every answer they produce. Treue flags doubtful answers from token "
        "log-probabilities and samples answers for the LLM judge. Each service key may make a "
        "limited number of requests a minute (a batch counts as one); above it the answer is "
        "429 with Retry-After, the seconds until the minute is over."
    ),
    parser=StrictJSONParser(),
    auth=ServiceKey(),
    urls_namespace="api",
    docs_url=None,
)


def errors(status: int, items: list[dict[str, str]], **headers: str) -> JsonResponse:
    response = JsonResponse({"errors": items}, status=status)
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    items = []
    for err in exc.errors:
        # ninja prefixes where the value came from: ("body", "payload", ...) or ("path", ...).
        # Only that prefix goes, so a client's field called "body" or "path" is still named.
        loc = list(err["loc"])
        if loc[:1] in (["body"], ["path"], ["query"]):
            loc = loc[1:]
        if loc[:1] == ["payload"]:
            loc = loc[1:]
        message = str(err["msg"]).removeprefix("Value error, ")
        if not loc and ": " in message:
            name, message = message.split(": ", 1)
            loc = [name]
        items.append({"field": services.format_loc(loc), "message": message})
    return errors(400, items)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    cause = exc.__cause__
    if isinstance(cause, BodyTooLarge | RequestDataTooBig):
        return errors(413, [{"field": "", "message": str(cause) or "the body is too large"}])
    if isinstance(cause, BodyEncoded):
        return errors(415, [{"field": "Content-Encoding", "message": str(cause)}])
    if isinstance(cause, decoding.BodyError):
        return errors(400, [{"field": cause.field, "message": str(cause)}])
    if isinstance(cause, ValueError):
        return errors(400, [{"field": "", "message": str(cause)}])
    return errors(exc.status_code, [{"field": "", "message": str(exc)}])


@api.exception_handler(RequestDataTooBig)
def _request_too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    # Django's own cap (DATA_UPLOAD_MAX_MEMORY_SIZE) trips when ninja first reads request.body,
    # outside the parser: without this it is Django's HTML 400 page.
    return errors(413, [{"field": "", "message": "the body is too large"}])


@api.exception_handler(AuthenticationError)
def _unauthorized(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return errors(
        401,
        [{"field": "Authorization", "message": "missing or invalid service key"}],
        WWW_Authenticate="Bearer",
    )


@api.exception_handler(RateLimited)
def _rate_limited(request: HttpRequest, exc: RateLimited) -> HttpResponse:
    return errors(429, [{"field": "", "message": str(exc)}], Retry_After=str(exc.retry_after))


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def _database_unavailable(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
    # The client retries; the operator needs to see why.
    logger.warning("503 for %s: %s: %s", request.path, type(exc).__name__, exc)
    return errors(
        503,
        [{"field": "", "message": "the database is unavailable; retry later"}],
        Retry_After=str(RETRY_AFTER_SECONDS),
    )


def answer_to_dict(answer: Answer) -> dict[str, Any]:
    return {
        "id": answer.pk,
        "external_id": answer.external_id,
        "use_case": answer.use_case.slug,
        "created_at": answer.created_at.isoformat(),
        "flagged": answer.flagged,
        "logprobs_status": answer.logprobs_status,
        "uncertain_tokens": answer.uncertain_tokens,
        "sampled": answer.sampled,
        "sample_reason": answer.sample_reason,
        "inclusion_probability": answer.inclusion_probability,
        "status": answer.status,
        "warnings": services.answer_warnings(answer),
    }


ERROR_RESPONSES = {
    400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 413: ErrorOut, 415: ErrorOut, 429: ErrorOut,
    503: ErrorOut,
}


@api.post(
    "/answers",
    response={201: AnswerOut, 200: AnswerOut, 409: ErrorOut, **ERROR_RESPONSES},
    summary="Send one answer",
    description=(
        "201 when stored, 200 when the same external_id with the same content was already "
        "stored (nothing is duplicated), 409 when that external_id holds different content."
    ),
)
def post_answer(request: HttpRequest, payload: AnswerIn) -> HttpResponse:
    result = services.answer_ingest(
        service=request.auth,
        payload=payload,
        raw=request.treue_raw,  # type: ignore[attr-defined]
        allowed=request.treue_use_cases,  # type: ignore[attr-defined]
    )
    if result.answer is None:
        return errors(result.status, result.errors)
    return JsonResponse(answer_to_dict(result.answer), status=result.status)


@api.post(
    "/answers/batch",
    response={200: BatchOut, **ERROR_RESPONSES},
    summary="Send up to 500 answers",
    description="Each item is answered on its own, in order, with the status it would have got "
    "alone; a bad item never costs the others.",
)
def post_batch(request: HttpRequest, payload: BatchIn) -> HttpResponse:
    results = services.answer_ingest_batch(
        service=request.auth,
        items=payload.answers,
        raws=request.treue_raw,  # type: ignore[attr-defined]
        allowed=request.treue_use_cases,  # type: ignore[attr-defined]
    )
    out = []
    for index, result in enumerate(results):
        if result.answer is None:
            out.append({"index": index, "status": result.status, "errors": result.errors})
        else:
            out.append(
                {"index": index, "status": result.status, "answer": answer_to_dict(result.answer)}
            )
    return JsonResponse({
        "results": out,
        "created": sum(r.status == 201 for r in results),
        "existing": sum(r.status == 200 for r in results),
        "failed": sum(r.status >= 400 for r in results),
    })


def _judge_info(answer: Answer) -> dict[str, Any] | None:
    run = answer.current_run
    if run is None:
        return None
    return {
        "model": run.judge_model,
        "prompt_version": run.prompt_version,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def _failure_reason(answer: Answer) -> str | None:
    """Why judging failed, in words for the RAG service: the run's own error stays with the
    operator (it can hold a provider's message or the name of a setting)."""
    if answer.status != Answer.Status.FAILED:
        return None
    newest = (answer.judge_runs.order_by("-created_at", "-id")
              .only("judge_model", "retryable").first())
    if newest is not None and selectors.same_model(newest.judge_model, answer.model):
        return ("the judge model is the model that generated the answer, and a model does not "
                "judge itself; an operator can rescore it with another judge model")
    if newest is not None and newest.retryable:
        return "the judge was unavailable for longer than its retries; an operator can retry it"
    return "judging failed; an operator can see why and retry it"


@api.get(
    "/answers/{answer_id}",
    response={
        200: AnswerDetailOut, 400: ErrorOut, 401: ErrorOut, 404: ErrorOut, 429: ErrorOut,
        503: ErrorOut,
    },
    summary="Read one of this key's answers",
)
def get_answer(
    request: HttpRequest, answer_id: int = Path(..., ge=1, le=2**63 - 1)
) -> HttpResponse:
    answer = selectors.answer_get_for_service(service_id=request.auth.pk, pk=answer_id)
    if answer is None:
        return errors(404, [{"field": "answer_id", "message": "no such answer for this key"}])
    data = answer_to_dict(answer)
    data.update(
        question=answer.question,
        answer=answer.text,
        model=answer.model,
        chunks=[
            {
                "rank": c.rank,
                "text": c.text,
                "id": c.source_chunk_id or None,
                "score": c.score,
                "source": c.source or None,
            }
            for c in answer.chunks.all()
        ],
        score=answer.score,
        abstention=answer.abstention,
        judge=_judge_info(answer),
        claims=[
            {"position": c.position, "text": c.text, "label": c.label}
            for c in (answer.current_run.claims.all() if answer.current_run else ())
        ],
        error=_failure_reason(answer),
    )
    return JsonResponse(data)


# --- weekly estimates ------------------------------------------------------------------------

WEEK_PATTERN = r"^\d{4}-W\d{2}$"
_WEEK = re.compile(r"(\d{4})-W(\d{2})")
# The default span when `from` is missing: a quarter, enough to see a trend.
DEFAULT_WEEKS = 12
# Two years of weeks: more is a bulk export, and the answer would take seconds to compute.
MAX_WEEKS = 104
# Weeks outside these years are a typo; the bounds also keep a week's end (and its time in UTC)
# inside what datetime can represent.
MIN_YEAR, MAX_YEAR = 1970, 9998
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


class JudgeOut(BaseModel):
    model: str
    prompt_version: str


class WeekOut(BaseModel):
    week: str = Field(description="ISO week, YYYY-Www")
    start: str = Field(description="Monday 00:00 in the site's time zone, ISO 8601")
    end: str = Field(description="the next Monday 00:00, ISO 8601")
    current: bool = Field(description="the week is not over yet")
    estimate: EstimateOut = Field(description="mean faithfulness of the week's answers")
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
    judges: list[JudgeOut] = Field(description="judge model and prompt version of the week")
    judge_changed: bool = Field(
        description="a judge model or prompt version the weeks before (in this answer) had not"
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


class EstimatesOut(BaseModel):
    use_case: str
    name: str
    action_threshold: float
    leaves_unreviewed: bool = Field(
        description="answers leave the company unreviewed: they need a human release, "
        "whatever the estimate"
    )
    weeks: list[WeekOut] = Field(description="oldest first")


class WeekError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def _week_monday(text: str, field: str) -> date:
    match = _WEEK.fullmatch(text)
    if match is None:
        raise WeekError(field, "must be an ISO week like 2026-W07")
    year, week = int(match.group(1)), int(match.group(2))
    if not MIN_YEAR <= year <= MAX_YEAR:
        raise WeekError(field, f"the year must lie between {MIN_YEAR} and {MAX_YEAR}")
    try:
        return date.fromisocalendar(year, week, 1)
    except ValueError:
        raise WeekError(field, f"{year} has no ISO week {week}") from None


def _week_span(first: str | None, last: str | None) -> tuple[date, int]:
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


def _estimate_out(estimate: Estimate | None) -> dict[str, Any] | None:
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
    figures: dashboard.WeekFigures, currencies: dict[str, str]
) -> dict[str, Any]:
    unpriced = figures.unpriced_runs
    return {
        "week": figures.label,
        "start": figures.week.start.isoformat(),
        "end": figures.week.end.isoformat(),
        "current": figures.current,
        "estimate": _estimate_out(figures.estimate),
        "share_below_threshold": _estimate_out(figures.below),
        "claim_share": _estimate_out(figures.claims),
        "abstention_share": _estimate_out(figures.abstention_share),
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
        "judges": [{"model": m, "prompt_version": v} for m, v in figures.judges],
        "judge_changed": figures.judge_changed,
        "light": figures.light,
        "pooled": _estimate_out(figures.pooled),
        "pooled_weeks": figures.pooled_weeks,
        "pooled_light": figures.pooled_light,
        "expert_scale": None if figures.expert is None else {
            "value": figures.expert.value,
            "low": figures.expert.low,
            "high": figures.expert.high,
            "n_reviews": figures.expert.n_reviews,
            "weeks_pooled": figures.expert.weeks_pooled,
        },
    }


def _may_read(caller: Any, use_case: UseCase) -> bool:
    if isinstance(caller, Service):
        return caller.use_cases.filter(pk=use_case.pk).exists()
    return bool(caller.is_staff or use_case.team_leads.filter(pk=caller.pk).exists())


@api.get(
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
    request: HttpRequest,
    slug: str = Path(..., max_length=64),
    first: str | None = Query(
        None, alias="from", pattern=WEEK_PATTERN, description="first ISO week, e.g. 2026-W07"
    ),
    last: str | None = Query(
        None, alias="to", pattern=WEEK_PATTERN, description="last ISO week, e.g. 2026-W18"
    ),
) -> Any:
    caller = request.auth  # type: ignore[attr-defined]
    use_case = UseCase.objects.filter(slug=slug).first()
    if use_case is None or (
        # Nobody learns of another tenant's use case: a key not allowed on it, or a person not
        # assigned to it, gets exactly what a use case that does not exist gets.
        not caller.use_cases.filter(pk=use_case.pk).exists() if isinstance(caller, Service)
        else not selectors.use_cases_for_user(user=caller).filter(pk=use_case.pk).exists()
    ):
        return errors(404, [{"field": "slug", "message": "no such use case"}])
    if not _may_read(caller, use_case):
        return errors(403, [{"field": "slug", "message": (
            "only the use case's team leads may read its estimates"
        )}])
    try:
        until, weeks = _week_span(first, last)
    except WeekError as e:
        return errors(400, [{"field": e.field, "message": str(e)}])
    figures = dashboard.use_case_weeks(use_case=use_case, weeks=weeks, until=until)
    currencies = metric_selectors.judge_currencies(
        models={model for f in figures for model, _ in f.judges}
    )
    return {
        "use_case": use_case.slug,
        "name": use_case.name,
        "action_threshold": use_case.action_threshold,
        "leaves_unreviewed": use_case.leaves_unreviewed,
        "weeks": [_week_out(f, currencies) for f in figures],
    }
