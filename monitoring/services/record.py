"""One answer's full record, for a person who asks what was stored about them (GDPR Art. 15).

Everything Treue keeps about an answer, read field by field from the models so that a field
added later is exported too: the answer, its chunks, every judge run with its claims and call
log, and what the other apps keep about it, each under its own key through
monitoring/extensions.py (the weekly reviews it was in, "reviews"; the self-consistency
investigations that re-asked its question, "investigations"). Alarms are about a use case and a
week, not an answer, and are not part of it. The caller decides whether the judge's verdicts may
be shown (an expert reviewing the answer blind must not see them); each part is told.
"""

from typing import Any

from django.db.models import Model
from django.utils import timezone

from monitoring import extensions
from monitoring.models import Answer, Chunk, Claim, JudgeRun

FORMAT = "treue.answer-record/1"
# The judge's results on the answer row itself, withheld with the runs.
_ANSWER_JUDGE_FIELDS = ("current_run_id", "score", "abstention")


def record_fields(obj: Model, *, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every stored column of `obj`, foreign keys as their ids (for the parts of the record
    other apps contribute too)."""
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
        "answer": record_fields(answer, skip=() if include_judge else _ANSWER_JUDGE_FIELDS),
        "chunks": [
            record_fields(c) for c in Chunk.objects.filter(answer=answer).order_by("rank")
        ],
        "judge_withheld": not include_judge,
    }
    if include_judge:
        runs = list(JudgeRun.objects.filter(answer=answer).order_by("created_at", "pk"))
        claims: dict[int, list[dict[str, Any]]] = {}
        for claim in Claim.objects.filter(run__answer=answer).order_by("run", "position"):
            claims.setdefault(claim.run_id, []).append(record_fields(claim))
        record["judge_runs"] = [
            {**record_fields(run), "claims": claims.get(run.pk, [])} for run in runs
        ]
    for name, part in extensions.registry.record_parts.items():
        record[name] = part(answer_id=answer.pk, include_judge=include_judge)
    return record
