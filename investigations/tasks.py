"""Celery tasks of the investigations app: one per question, and the reconciler. Retries,
backoff and limits are the job framework's (jobs/framework.py), as for judge runs."""

from celery import shared_task

from investigations import services
from jobs import framework as jobs
from judging.client import JudgeUnavailable


@shared_task(name=services.QUESTION.task, **jobs.TASK_OPTIONS)
def investigate_question(self, question_id: int) -> str:
    return jobs.run_task(
        self,
        execute=lambda: services.question_execute(question_id=question_id),
        give_up=lambda reason: services.question_give_up(question_id=question_id, reason=reason),
        transient=(JudgeUnavailable,),
    )


@shared_task(name="investigations.tasks.reconcile_questions", ignore_result=True)
def reconcile_questions() -> int:
    return services.questions_reconcile()
