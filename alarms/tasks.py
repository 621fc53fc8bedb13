"""Celery tasks of the alarms: each calls one service."""

from celery import shared_task

from alarms import services
from jobs import framework as jobs


@shared_task(name=services.DELIVERY.task, **jobs.TASK_OPTIONS)
def deliver_alarm(self, delivery_id: int) -> str:
    """Post one alarm to one channel; retried with backoff while the receiver may take it
    later, up to TREUE_JUDGE_MAX_ATTEMPTS attempts, then failed visibly."""
    return jobs.run_task(
        self,
        execute=lambda: services.alarm_delivery_execute(delivery_id=delivery_id),
        give_up=lambda reason: services.alarm_delivery_give_up(
            delivery_id=delivery_id, reason=reason
        ),
        transient=(services.ChannelUnavailable,),
    )


@shared_task(name="alarms.tasks.reconcile_alarm_deliveries", ignore_result=True)
def reconcile_alarm_deliveries() -> int:
    return services.alarm_deliveries_reconcile()
