"""The ingest API (`/api/v1/`): RAG services post answers with a bearer key.

Errors are always `{"errors": [{"field", "message"}]}` with a 4xx status; a client's mistake is
never a 500. The body is parsed here rather than by Django's form machinery so that every way a
body can be malformed (not UTF-8, not JSON, NaN, nesting that exhausts the parser, too large)
becomes a named 400 or 413.
"""

import json
from typing import Any

import orjson
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from ninja import NinjaAPI, Path
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.security import HttpBearer

from monitoring import selectors, services
from monitoring.domain import keys
from monitoring.models import Answer, Service
from monitoring.schemas import (
    AnswerDetailOut,
    AnswerIn,
    AnswerOut,
    BatchIn,
    BatchOut,
    ErrorOut,
)

# Retry-After on 503: long enough for a database failover, short enough not to pile up answers.
RETRY_AFTER_SECONDS = 5
# last_used_at is for people ("is this key still in use?"), not an audit log: writing it on
# every request would double the writes of ingest.
LAST_USED_RESOLUTION_SECONDS = 300


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes")


class BodyError(Exception):
    pass


def _reject_constant(name: str) -> Any:
    raise BodyError(f"{name} is not valid JSON")


class StrictJSONParser(Parser):
    def parse_body(self, request: HttpRequest) -> Any:
        limit = _body_limit(request)
        if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
            raise BodyTooLarge(limit)
        body = request.body
        if len(body) > limit:
            raise BodyTooLarge(limit)
        try:
            # orjson is strict (no NaN, UTF-8 only) and several times faster; whatever it
            # refuses goes through json below, which names the problem precisely.
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            data = _parse_slowly(body)
        if not isinstance(data, dict):
            raise BodyError("the body must be a JSON object")
        request.treue_raw = data  # type: ignore[attr-defined]
        return data


def _parse_slowly(body: bytes) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BodyError("the body is not valid UTF-8") from e
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except RecursionError as e:
        raise BodyError("the body is nested too deeply") from e
    except json.JSONDecodeError as e:
        raise BodyError(f"the body is not valid JSON: {e.msg} at position {e.pos}") from e


def _body_limit(request: HttpRequest) -> int:
    if request.path.endswith("/batch"):
        return settings.TREUE_MAX_BATCH_BODY_BYTES
    return settings.TREUE_MAX_BODY_BYTES


class ServiceKey(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Service | None:
        prefix = keys.key_prefix(token)
        service = (
            Service.objects.filter(key_prefix=prefix, active=True).first() if prefix else None
        )
        if service is None or not keys.key_matches(token, service.key_hash):
            return None
        now = timezone.now()
        if (
            service.last_used_at is None
            or (now - service.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS
        ):
            Service.objects.filter(pk=service.pk).update(last_used_at=now)
        return service


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
        "log-probabilities and samples answers for the LLM judge."
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
    if isinstance(cause, BodyError | ValueError):
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


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def _database_unavailable(request: HttpRequest, exc: DatabaseError) -> HttpResponse:
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


ERROR_RESPONSES = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 413: ErrorOut, 503: ErrorOut}


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
        service=request.auth, payload=payload, raw=request.treue_raw  # type: ignore[attr-defined]
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
    results = services.answer_ingest_batch(service=request.auth, items=payload.answers)
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


@api.get(
    "/answers/{answer_id}",
    response={200: AnswerDetailOut, 400: ErrorOut, 401: ErrorOut, 404: ErrorOut, 503: ErrorOut},
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
    )
    return JsonResponse(data)
