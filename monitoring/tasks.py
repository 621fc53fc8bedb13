"""Celery tasks of the monitoring app. Tasks take ids (or nothing) and call one service."""

from celery import shared_task
from django.conf import settings

from jobs import framework as jobs
from monitoring.judge_client import JudgeUnavailable
from monitoring.services import judging
from treue_site.broker import delete_delivered_messages


@shared_task(name=judging.SCORE_ANSWER_TASK, **jobs.TASK_OPTIONS)
def score_answer(self, run_id: int) -> str:
    return jobs.run_task(
        self,
        execute=lambda: judging.judge_run_execute(run_id=run_id),
        give_up=lambda reason: judging.judge_run_give_up(run_id=run_id, reason=reason),
        transient=(JudgeUnavailable,),
    )


@shared_task(
    name=judging.SCORE_ANSWERS_TASK,
    bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
)
def score_answers(self, run_ids: list[int]) -> int:
    """Publish score_answer for each run: the fan-out of a batch's runs, sent as one message.
    The runs go where this message came from, as Celery's own retries do. Delivered twice, it
    publishes twice, which costs nothing: a run is claimed once."""
    info = self.request.delivery_info or {}
    exchange, routing_key = info.get("exchange"), info.get("routing_key")
    if exchange == "" and routing_key:  # sent straight to a queue (Redis, the embedded broker)
        where = {"queue": routing_key}
    elif exchange:
        where = {"exchange": exchange, "routing_key": routing_key}
    else:  # called in-process
        where = {}
    return jobs.publish_each(judging.SCORE_ANSWER_TASK, run_ids, what="judge run", **where)


@shared_task(ignore_result=True)
def reconcile_judge_runs() -> int:
    return judging.judge_runs_reconcile()


@shared_task(ignore_result=True)
def clean_embedded_broker() -> int:
    return delete_delivered_messages(settings.CELERY_BROKER_URL)


@shared_task(ignore_result=True)
def check_action_alarms() -> int:
    """The action signal, hourly: raise (and mail once) or clear each use case's alarms."""
    from monitoring.services import action

    return action.action_alarms_check_all()


# The first run after a retention period is set may have a million answers to go through, about
# a second per batch of 1,000: longer than the default limit. Each batch commits on its own, so
# a run cut short loses at most one batch's work, and the next day's run goes on from there.
RETENTION_SOFT_TIME_LIMIT = 3600


@shared_task(
    acks_late=True, reject_on_worker_lost=True, ignore_result=True,
    soft_time_limit=RETENTION_SOFT_TIME_LIMIT, time_limit=RETENTION_SOFT_TIME_LIMIT + 60,
)
def apply_retention() -> int:
    """Daily: anonymise answers older than their use case's retention (idempotent, batched)."""
    from monitoring.services import retention

    return sum(r.anonymised for r in retention.retention_apply_all())
