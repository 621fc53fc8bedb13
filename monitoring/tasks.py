"""Celery tasks of the monitoring app. Tasks take ids (or nothing) and call one service."""

import logging
import random
from collections.abc import Callable, Iterable
from typing import Any

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from monitoring.judge_client import JudgeUnavailable
from monitoring.services import judging
from treue_site.broker import delete_delivered_messages

# Celery enforces these only in a prefork pool; the judge client enforces the soft limit itself
# (TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS) in any pool, the thread pool included.
logger = logging.getLogger(__name__)

SCORE_SOFT_TIME_LIMIT = settings.TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS
SCORE_TIME_LIMIT = settings.TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS + 60


def backoff_seconds(retries: int, retry_after: float | None) -> float:
    """Exponential backoff, capped, with "equal" jitter (between half the step and the step, so
    that retries of many runs do not line up, yet their sum is known: with the defaults the
    attempts of a run span 34-67 minutes, see settings.TREUE_JUDGE_MAX_ATTEMPTS); a server's
    Retry-After is a floor."""
    cap = settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS
    step = min(cap, 2 ** (retries + 1))
    delay = random.uniform(step / 2, step)
    return max(delay, min(retry_after or 0.0, cap))


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,  # counted against TREUE_JUDGE_MAX_ATTEMPTS below
    soft_time_limit=SCORE_SOFT_TIME_LIMIT,
    time_limit=SCORE_TIME_LIMIT,
)
def score_answer(self, run_id: int) -> str:
    try:
        return judging.judge_run_execute(run_id=run_id)
    except (JudgeUnavailable, SoftTimeLimitExceeded) as e:
        return retry_or_give_up(
            self, e, lambda reason: judging.judge_run_give_up(run_id=run_id, reason=reason)
        )


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
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
    return publish_each(score_answer, run_ids, what="judge run", **where)


def retry_or_give_up(task: Task, error: Exception, give_up: Callable[[str], None]) -> str:
    """After a transient failure: retry with backoff (a server's Retry-After as a floor), or,
    after TREUE_JUDGE_MAX_ATTEMPTS, let `give_up` fail the work visibly with the reason."""
    reason = str(error) or type(error).__name__
    attempts = task.request.retries + 1
    if attempts >= settings.TREUE_JUDGE_MAX_ATTEMPTS:
        give_up(f"gave up after {attempts} attempts: {reason}")
        return "gave up"
    retry_after = getattr(error, "retry_after", None)
    raise task.retry(countdown=backoff_seconds(task.request.retries, retry_after)) from error


def publish_each(task: Task, ids: Iterable[Any], *, what: str, **options: Any) -> int:
    """Publish `task` once per id (or list of ids). A broker that is down costs nothing: the
    first failure stops the loop, the work stays pending in the database and a reconciler
    publishes it later. Returns how many were published."""
    sent = 0
    for pk in ids:
        try:
            task.apply_async(args=[pk], retry=False, **options)
            sent += 1
        except Exception as e:
            logger.warning("could not enqueue %s %s (%s); the reconciler will", what, pk, e)
            break
    return sent


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
