"""What the weekly review contributes to monitoring's work on an answer (monitoring/extensions.py):
its part of an answer's record, holding back and blanking reviewed answers at retention, the
blind-review rule and the experts' reviews the dashboard corrects its estimate by. Registered by
ReviewConfig.ready()."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from monitoring import extensions
from monitoring.services.record import record_fields
from review.domain.retention import scrub_submitted_verdicts
from review.models import ReviewItem, ReviewSubmission, ReviewVerdict, ShadowRun
from review.selectors import calibration
from review.selectors import reviews as selectors
from review.services import review_alarms_check_later


def answer_reviews_record(*, answer_id: int, include_judge: bool) -> list[dict[str, Any]]:
    """The weekly reviews the answer was in, with their verdicts and submitted versions."""
    items = list(
        ReviewItem.objects.filter(answer_id=answer_id).select_related("batch").order_by("pk")
    )
    verdicts: dict[int, list[dict[str, Any]]] = {}
    for verdict in ReviewVerdict.objects.filter(item__in=items).order_by("item", "position"):
        verdicts.setdefault(verdict.item_id, []).append(record_fields(verdict))
    submissions: dict[int, list[dict[str, Any]]] = {}
    for submission in ReviewSubmission.objects.filter(item__in=items).order_by("item", "version"):
        # The judge's score, copied into each submission, is the judge's verdict too.
        skip = () if include_judge else ("automatic_score",)
        submissions.setdefault(submission.item_id, []).append(
            record_fields(submission, skip=skip)
        )
    return [
        {
            "batch": {
                "week": item.batch.week, "source_week": item.batch.source_week,
                "finished_at": item.batch.finished_at,
            },
            **record_fields(item),
            "verdicts": verdicts.get(item.pk, []),
            "submissions": submissions.get(item.pk, []),
        }
        for item in items
    ]


def answers_in_open_review(*, answer_ids: Sequence[int]) -> set[int]:
    """Those of the answers in a review batch that is not finished: an expert still reads them."""
    return set(
        ReviewItem.objects.filter(answer_id__in=answer_ids, batch__finished_at__isnull=True)
        .values_list("answer_id", flat=True)
    )


def answers_reviews_scrub(*, answer_ids: Sequence[int]) -> None:
    """Blank what the experts wrote about these answers (comments, added claims, the claim
    texts copied into their submissions); the labels stay, calibration pairs them with the
    judge's."""
    ReviewItem.objects.filter(answer_id__in=answer_ids).exclude(comment="").update(comment="")
    ReviewVerdict.objects.filter(item__answer_id__in=answer_ids).exclude(added_text="").update(
        added_text=""
    )
    submissions = list(
        ReviewSubmission.objects.filter(item__answer_id__in=answer_ids).only("pk", "verdicts")
    )
    for submission in submissions:
        submission.verdicts = scrub_submitted_verdicts(submission.verdicts)
        submission.comment = ""
    ReviewSubmission.objects.bulk_update(submissions, ["verdicts", "comment"], batch_size=500)
    # A candidate judge's replies and reasons may quote the answer; its labels stay.
    shadows = list(
        ShadowRun.objects.filter(submission__item__answer_id__in=answer_ids).only("pk", "verdicts")
    )
    for shadow in shadows:
        shadow.verdicts = [{**v, "raw": "", "reason": ""} for v in shadow.verdicts]
    ShadowRun.objects.bulk_update(shadows, ["verdicts"], batch_size=500)


def reviews_of_answers_in(*, start: datetime, end: datetime) -> bool:
    """Expert reviews are records: a month of answers that one of them points at is kept."""
    return ReviewItem.objects.filter(
        answer__created_at__gte=start, answer__created_at__lt=end
    ).exists()


def register() -> None:
    extensions.record_part_register(name="reviews", part=answer_reviews_record)
    extensions.retention_hold_register(
        name="review", hold=extensions.Hold.IN_REVIEW, answers_held=answers_in_open_review
    )
    extensions.retention_scrubber_register(name="review", scrub=answers_reviews_scrub)
    extensions.retention_keeps_register(name="review", keeps=reviews_of_answers_in)
    extensions.blind_answers_register(name="review", answers=selectors.blind_answer_ids)
    extensions.expert_reviews_register(name="review", reviews=selectors.expert_reviews_latest)
    extensions.drift_restarts_register(name="review", restarts=calibration.drift_restarts)
    extensions.alarm_check_register(name="review", check=review_alarms_check_later)
