"""What the self-consistency investigations contribute to monitoring's work on an answer
(monitoring/extensions.py): their part of an answer's record, and holding back and blanking the
re-asked answers at retention. Registered by InvestigationsConfig.ready()."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from investigations.domain.retention import scrub_samples
from investigations.models import Question
from monitoring import extensions
from monitoring.services.record import record_fields

# A question in these states will still re-ask the answer's question.
_OPEN_QUESTIONS = (Question.Status.PENDING, Question.Status.RUNNING)


def answer_investigations_record(*, answer_id: int, include_judge: bool) -> list[dict[str, Any]]:
    """The investigations that re-asked the answer's question, one entry per question."""
    return [
        {"investigation": {"id": q.investigation_id, "created_at": q.investigation.created_at},
         **record_fields(q)}
        for q in Question.objects.filter(answer_id=answer_id).select_related("investigation")
        .order_by("pk")
    ]


def answers_being_reasked(*, answer_ids: Sequence[int]) -> set[int]:
    """Those of the answers an investigation question waits to re-ask or is re-asking."""
    return set(
        Question.objects.filter(answer_id__in=answer_ids, status__in=_OPEN_QUESTIONS)
        .values_list("answer_id", flat=True)
    )


def answers_investigations_scrub(*, answer_ids: Sequence[int]) -> None:
    """Blank the re-asked answers, their comparison and the contradiction judge's reason and
    raw reply; whether the answers were consistent, the calls and their cost stay."""
    questions = list(Question.objects.filter(answer_id__in=answer_ids).only("pk", "sample_data"))
    for question in questions:
        question.sample_data = scrub_samples(question.sample_data)
        question.comparison = {}
        question.reason = ""
        question.judge_raw = ""
    Question.objects.bulk_update(
        questions, ["sample_data", "comparison", "reason", "judge_raw"], batch_size=500
    )


def questions_of_answers_in(*, start: datetime, end: datetime) -> bool:
    """An investigation's questions are its record: their answers' month is kept."""
    return Question.objects.filter(
        answer__created_at__gte=start, answer__created_at__lt=end
    ).exists()


def register() -> None:
    extensions.record_part_register(name="investigations", part=answer_investigations_record)
    extensions.retention_hold_register(
        name="investigations", hold=extensions.Hold.FOR_WORKER,
        answers_held=answers_being_reasked,
    )
    extensions.retention_scrubber_register(
        name="investigations", scrub=answers_investigations_scrub
    )
    extensions.retention_keeps_register(name="investigations", keeps=questions_of_answers_in)
