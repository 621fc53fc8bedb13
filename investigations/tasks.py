"""Celery tasks of the investigations app: one per question, and the reconciler. Retries,
backoff and limits are the judge tier's (monitoring/tasks.py)."""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from investigations import services
from monitoring.judge_client import JudgeUnavailable
from monitoring.tasks import SCORE_SOFT_TIME_LIMIT, SCORE_TIME_LIMIT, retry_or_give_up


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,  # counted against TREUE_JUDGE_MAX_ATTEMPTS below
    soft_time_limit=SCORE_SOFT_TIME_LIMIT,
    time_limit=SCORE_TIME_LIMIT,
)
def investigate_question(self, question_id: int) -> str:
    try:
        return services.question_execute(question_id=question_id)
    except (JudgeUnavailable, SoftTimeLimitExceeded) as e:
        return retry_or_give_up(
            self, e,
            lambda reason: services.question_give_up(question_id=question_id, reason=reason),
        )


@shared_task(ignore_result=True)
def reconcile_questions() -> int:
    return services.questions_reconcile()
