"""Celery tasks of the weekly review; each calls one service."""

from celery import shared_task

from review import services


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def create_review_batches() -> int:
    """Monday morning: this week's batch for every active use case (idempotent)."""
    return sum(r.created for r in services.review_batches_create())


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def check_review_alarms() -> int:
    return services.review_alarms_check_all()
