"""The ingest endpoints: a RAG service posts one answer or a batch, and reads one of its answers
back. The service (ingest/services.py) says what an answer's ingest came to; the HTTP
status of each outcome is said here, once (STATUS)."""

from typing import Any

from django.http import HttpResponse, JsonResponse
from ninja import Router
from ninja.params.functions import Path, Query  # typed; ninja.Path is an alias to mypy

from ingest import services
from ingest.api.auth import ServiceRequest
from ingest.api.errors import errors
from ingest.schemas import (
    AnswerDetailOut,
    AnswerIn,
    AnswerOut,
    BatchIn,
    BatchOut,
    ErrorOut,
    check_text,
)
from ingest.services import IngestOutcome
from judging.selectors import runs as judging_selectors
from monitoring.models import Answer, JudgeRun
from monitoring.selectors.access import (
    answer_get_for_service,
    answer_get_for_service_by_external_id,
)

router = Router()

STATUS = {
    IngestOutcome.CREATED: 201,
    IngestOutcome.EXISTING: 200,
    IngestOutcome.CONFLICT: 409,
    IngestOutcome.NOT_ALLOWED: 403,
    IngestOutcome.INVALID: 400,
}


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


@router.post(
    "/answers",
    response={201: AnswerOut, 200: AnswerOut, 409: ErrorOut, **ERROR_RESPONSES},
    summary="Send one answer",
    description=(
        "201 when stored, 200 when the same external_id with the same content was already "
        "stored (nothing is duplicated), 409 when that external_id holds different content."
    ),
)
def post_answer(request: ServiceRequest, payload: AnswerIn) -> HttpResponse:
    result = services.answer_ingest(
        service=request.auth,
        payload=payload,
        raw=request.treue_raw,
        allowed=request.treue_use_cases,
    )
    services.answers_refused_count(service=request.auth, results=[result])
    if result.answer is None:
        return errors(STATUS[result.outcome], result.errors)
    return JsonResponse(answer_to_dict(result.answer), status=STATUS[result.outcome])


@router.post(
    "/answers/batch",
    response={200: BatchOut, **ERROR_RESPONSES},
    summary="Send up to 500 answers",
    description="Each item is answered on its own, in order, with the status it would have got "
    "alone; a bad item never costs the others.",
)
def post_batch(request: ServiceRequest, payload: BatchIn) -> HttpResponse:
    results = services.answer_ingest_batch(
        service=request.auth,
        items=payload.answers,
        raws=request.treue_raw,
        allowed=request.treue_use_cases,
    )
    services.answers_refused_count(service=request.auth, results=results)
    out = []
    for index, result in enumerate(results):
        status = STATUS[result.outcome]
        if result.answer is None:
            out.append({"index": index, "status": status, "errors": result.errors})
        else:
            out.append({"index": index, "status": status, "answer": answer_to_dict(result.answer)})
    return JsonResponse({
        "results": out,
        "created": sum(r.outcome is IngestOutcome.CREATED for r in results),
        "existing": sum(r.outcome is IngestOutcome.EXISTING for r in results),
        "failed": sum(STATUS[r.outcome] >= 400 for r in results),
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
    if newest is not None and judging_selectors.same_model(newest.judge_model, answer.model):
        return ("the judge model is the model that generated the answer, and a model does not "
                "judge itself; an operator can rescore it with another judge model")
    if newest is not None and not newest.judge_model:
        return ("no judge model was configured when it was to be judged; an operator can retry "
                "it once one is")
    if newest is not None and newest.retryable:
        return "the judge was unavailable for longer than its retries; an operator can retry it"
    return "judging failed; an operator can see why and retry it"


@router.get(
    "/answers",
    response={
        200: AnswerDetailOut, 400: ErrorOut, 401: ErrorOut, 404: ErrorOut, 429: ErrorOut,
        503: ErrorOut,
    },
    summary="Find one of this key's answers by its external_id",
    description=(
        "The answer this key's service sent with `external_id` (unique per service, so at "
        "most one), with the same body as `GET /answers/{answer_id}`; 404 when this key's "
        "service sent none (answers of other services are never found)."
    ),
)
def find_answer(
    request: ServiceRequest,
    external_id: str = Query(
        ..., min_length=1, max_length=200, description="the id the answer was sent with"
    ),
) -> HttpResponse:
    try:
        check_text(external_id)
    except ValueError as e:
        return errors(400, [{"field": "external_id", "message": str(e)}])
    answer = answer_get_for_service_by_external_id(
        service_id=request.auth.pk, external_id=external_id
    )
    if answer is None:
        return errors(404, [{"field": "external_id",
                             "message": "no answer with this external_id for this key"}])
    return JsonResponse(answer_detail(answer))


@router.get(
    "/answers/{answer_id}",
    response={
        200: AnswerDetailOut, 400: ErrorOut, 401: ErrorOut, 404: ErrorOut, 429: ErrorOut,
        503: ErrorOut,
    },
    summary="Read one of this key's answers",
)
def get_answer(
    request: ServiceRequest, answer_id: int = Path(..., ge=1, le=2**63 - 1)
) -> HttpResponse:
    answer = answer_get_for_service(service_id=request.auth.pk, pk=answer_id)
    if answer is None:
        return errors(404, [{"field": "answer_id", "message": "no such answer for this key"}])
    return JsonResponse(answer_detail(answer))


def _claims(run: JudgeRun | None) -> list[dict[str, Any]]:
    return [
        {"position": c.position, "text": c.text, "label": c.label}
        for c in (run.claims.all() if run is not None else ())
    ]


def _on_demand(answer: Answer) -> dict[str, Any] | None:
    """The newest on-demand verdict of an answer outside the sample (judging/services/
    on_demand.py): beside the answer's own fields, which it never changes."""
    run = judging_selectors.on_demand_verdicts(answers=[answer]).get(answer.pk)
    if run is None:
        return None
    return {
        "score": run.score,
        "abstention": run.abstention,
        "judge": {
            "model": run.judge_model,
            "prompt_version": run.prompt_version,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        },
        "claims": _claims(run),
    }


def answer_detail(answer: Answer) -> dict[str, Any]:
    """What the read endpoints return of one answer: its record, content, score and claims."""
    data = answer_to_dict(answer)
    data.update(
        question=answer.question,
        answer=answer.text,
        model=answer.model,
        prompt_version=answer.prompt_version or None,
        metadata=answer.metadata or {},
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
        claims=_claims(answer.current_run),
        error=_failure_reason(answer),
        on_demand=_on_demand(answer),
    )
    return data
