"""One answer's full record, for a person who asks what was stored about them (GDPR Art. 15).

Everything Treue keeps about an answer, read field by field from the models so that a field
added later is exported too: the answer, its chunks, every judge run with its claims and call
log, the weekly reviews it was in with their verdicts and submitted versions, and the
self-consistency investigations that re-asked its question. Alarms are
about a use case and a week, not an answer, and are not part of it. The caller decides whether
the judge's verdicts may be shown (an expert reviewing the answer blind must not see them).
"""

from typing import Any

from django.db.models import Model
from django.utils import timezone

from investigations.models import Question
from monitoring.models import Answer, Chunk, Claim, JudgeRun
from review.models import ReviewItem, ReviewSubmission, ReviewVerdict

FORMAT = "treue.answer-record/1"
# The judge's results on the answer row itself, withheld with the runs.
_ANSWER_JUDGE_FIELDS = ("current_run_id", "score", "abstention")


def _fields(obj: Model, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every stored column of `obj`, foreign keys as their ids."""
    return {
        field.attname: getattr(obj, field.attname)
        for field in obj._meta.concrete_fields
        if field.attname not in skip
    }


def answer_record_build(*, answer_id: int, include_judge: bool = True) -> dict[str, Any]:
    """The record as plain values (datetimes, decimals and UUIDs as they are: serialise with
    DjangoJSONEncoder). Raises Answer.DoesNotExist."""
    answer = Answer.objects.select_related("use_case", "service").get(pk=answer_id)
    record: dict[str, Any] = {
        "format": FORMAT,
        "exported_at": timezone.now(),
        "use_case": {"slug": answer.use_case.slug, "name": answer.use_case.name},
        "service": {"name": answer.service.name},
        "answer": _fields(answer, skip=() if include_judge else _ANSWER_JUDGE_FIELDS),
        "chunks": [_fields(c) for c in Chunk.objects.filter(answer=answer).order_by("rank")],
        "judge_withheld": not include_judge,
    }
    if include_judge:
        runs = list(JudgeRun.objects.filter(answer=answer).order_by("created_at", "pk"))
        claims: dict[int, list[dict[str, Any]]] = {}
        for claim in Claim.objects.filter(run__answer=answer).order_by("run", "position"):
            claims.setdefault(claim.run_id, []).append(_fields(claim))
        record["judge_runs"] = [
            {**_fields(run), "claims": claims.get(run.pk, [])} for run in runs
        ]
    items = list(
        ReviewItem.objects.filter(answer=answer).select_related("batch").order_by("pk")
    )
    verdicts: dict[int, list[dict[str, Any]]] = {}
    for verdict in ReviewVerdict.objects.filter(item__in=items).order_by("item", "position"):
        verdicts.setdefault(verdict.item_id, []).append(_fields(verdict))
    submissions: dict[int, list[dict[str, Any]]] = {}
    for submission in ReviewSubmission.objects.filter(item__in=items).order_by("item", "version"):
        # The judge's score, copied into each submission, is the judge's verdict too.
        skip = () if include_judge else ("automatic_score",)
        submissions.setdefault(submission.item_id, []).append(_fields(submission, skip=skip))
    record["reviews"] = [
        {
            "batch": {
                "week": item.batch.week, "source_week": item.batch.source_week,
                "finished_at": item.batch.finished_at,
            },
            **_fields(item),
            "verdicts": verdicts.get(item.pk, []),
            "submissions": submissions.get(item.pk, []),
        }
        for item in items
    ]
    record["investigations"] = [
        {"investigation": {"id": q.investigation_id, "created_at": q.investigation.created_at},
         **_fields(q)}
        for q in Question.objects.filter(answer=answer).select_related("investigation")
        .order_by("pk")
    ]
    return record
