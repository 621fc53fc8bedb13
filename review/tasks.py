"""Celery tasks of the weekly review; each calls one service."""

from celery import shared_task

from jobs import framework as jobs
from judging.client import JudgeUnavailable
from review import services
from review.shadow import services as shadow


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def create_review_batches() -> int:
    """Monday morning: this week's batch for every active use case (idempotent)."""
    return sum(r.created for r in services.review_batches_create())


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def check_review_alarms() -> int:
    return services.review_alarms_check_all()


@shared_task(
    name=services.REVIEW_ALARMS_TASK, acks_late=True, reject_on_worker_lost=True,
    ignore_result=True,
)
def check_use_case_review_alarms(use_case_id: int) -> int:
    """After an expert's submit: that use case's review alarms (drift, decomposition)."""
    return len(services.review_alarms_check_for(use_case_id=use_case_id))


@shared_task(name=shadow.SHADOW_RUN_TASK, **jobs.TASK_OPTIONS)
def shadow_run(self, run_id: int) -> str:
    return jobs.run_task(
        self,
        execute=lambda: shadow.shadow_run_execute(run_id=run_id),
        give_up=lambda reason: shadow.shadow_run_give_up(run_id=run_id, reason=reason),
        transient=(JudgeUnavailable,),
    )


@shared_task(name="review.tasks.reconcile_shadow_runs", ignore_result=True)
def reconcile_shadow_runs() -> int:
    return shadow.shadow_runs_reconcile()
