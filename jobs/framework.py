"""Claiming, releasing, finishing, giving up and re-queueing leased jobs, publishing their tasks
and retrying them with backoff: the one copy of this that every job kind uses.

A kind (`JobKind`) names its model (a `jobs.models.LeasedJob`), the Celery task that executes
one job by id, and what little differs between kinds; the kind's service does the work between
`claim` and `finish`. Services publish tasks by name (`publish_on_commit`), so they never import
a tasks module: tasks import services, never the reverse.

Leases, attempts, backoff and the reconciler's patience are the judge tier's settings
(TREUE_JUDGE_*) for every kind: all kinds today call the same kind of endpoint.
"""

from __future__ import annotations

import logging
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery import Task, current_app
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from jobs.models import LeasedJob

logger = logging.getLogger(__name__)

# Celery enforces these only in a prefork pool; the judge client enforces the soft limit itself
# (TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS) in any pool, the thread pool included.
SOFT_TIME_LIMIT = settings.TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS
TIME_LIMIT = settings.TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS + 60

# The options of a task that executes one job: acknowledged after it ran, so a worker that dies
# hands it back; retries counted against TREUE_JUDGE_MAX_ATTEMPTS by `run_task`, not Celery.
TASK_OPTIONS: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": None,
    "soft_time_limit": SOFT_TIME_LIMIT,
    "time_limit": TIME_LIMIT,
}

# The reconciler looks at this many jobs per round; the rest wait for the next one.
RECONCILE_BATCH = 5000
MAX_ERROR_CHARS = 2000

WORKER_LOST = (
    "gave up after {attempts} attempts: the worker was lost each time (killed, out of memory "
    "or past its time limit)"
)


@dataclass(frozen=True)
class JobKind:
    """What the framework needs to know about one kind of job."""

    model: type[LeasedJob]
    # The name of the Celery task that executes one job, given its id.
    task: str
    # For log lines: "judge run".
    what: str
    # A further condition for claiming and re-queueing (say, the investigation still running).
    claimable: Q = field(default_factory=Q)
    # A field that is set to the time of every claim (the run's `started_at`), if any.
    started_field: str | None = None
    # The error of a job whose worker was lost on every attempt ({attempts} is filled in).
    worker_lost: str = WORKER_LOST
    # Further fields written when a job is abandoned (say, retryable=True).
    abandoned_fields: Mapping[str, Any] = field(default_factory=dict)
    # More jobs than `fan_out_above` are published as one message of this task, which gets the
    # list of ids and publishes `task` for each (a publish costs the caller's CPU).
    fan_out_task: str | None = None
    fan_out_above: int = 0

    @property
    def objects(self) -> Any:
        return self.model._default_manager


def lease_expiry(now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(seconds=settings.TREUE_JUDGE_LEASE_SECONDS)


def claim(kind: JobKind, pk: int) -> uuid.UUID | None:
    """Take the job if it is pending, or running under a lease that has expired: one
    conditional UPDATE, so of two workers exactly one gets it. Returns the lease token."""
    now = timezone.now()
    token = uuid.uuid4()
    started = {kind.started_field: now} if kind.started_field else {}
    claimed = kind.objects.filter(kind.claimable, pk=pk).filter(
        Q(status=LeasedJob.PENDING) | Q(status=LeasedJob.RUNNING, lease_expires_at__lt=now)
    ).update(
        status=LeasedJob.RUNNING,
        lease_token=token,
        lease_expires_at=lease_expiry(now),
        not_before=None,
        attempts=F("attempts") + 1,
        **started,
    )
    return token if claimed == 1 else None


def held(kind: JobKind, pk: int, token: uuid.UUID) -> QuerySet[Any]:
    """The job, as long as the holder of `token` still holds it."""
    return kind.objects.filter(pk=pk, status=LeasedJob.RUNNING, lease_token=token)


def renew(kind: JobKind, pk: int, token: uuid.UUID, **fields: Any) -> bool:
    """Store progress (`fields`) and extend the lease, if `token` still holds the job."""
    return bool(held(kind, pk, token).update(lease_expires_at=lease_expiry(), **fields))


def release(
    kind: JobKind, pk: int, token: uuid.UUID, *, reason: str, retry_in: float, **fields: Any
) -> bool:
    """Give a job back after a transient failure; its task retries after `retry_in` seconds.

    `retry_in` is capped like the task's backoff: a server's Retry-After of years would
    otherwise put `not_before` out of the reconciler's reach (or beyond what a date can hold).
    """
    retry_in = min(max(retry_in, 0.0), settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS)
    return bool(held(kind, pk, token).update(
        **fields,
        status=LeasedJob.PENDING,
        error=reason[:MAX_ERROR_CHARS],
        lease_token=None,
        lease_expires_at=None,
        not_before=timezone.now() + timedelta(seconds=retry_in),
    ))


def finish(kind: JobKind, pk: int, token: uuid.UUID, *, status: str, **fields: Any) -> bool:
    """End the job in `status`, if `token` still holds it. False: another delivery took it
    over after this one's lease ran out, and its result counts."""
    return bool(held(kind, pk, token).update(
        status=status,
        finished_at=timezone.now(),
        lease_token=None,
        lease_expires_at=None,
        **fields,
    ))


def fail(kind: JobKind, pk: int, token: uuid.UUID, *, reason: str, **fields: Any) -> bool:
    """End the job as failed, with the reason, if `token` still holds it."""
    return finish(
        kind, pk, token, status=LeasedJob.FAILED, error=reason[:MAX_ERROR_CHARS], **fields
    )


def give_up(kind: JobKind, pk: int, *, reason: str, **fields: Any) -> bool:
    """After the last retry: the pending job fails visibly with the reason."""
    return bool(kind.objects.filter(pk=pk, status=LeasedJob.PENDING).update(
        status=LeasedJob.FAILED,
        error=reason[:MAX_ERROR_CHARS],
        finished_at=timezone.now(),
        not_before=None,
        **fields,
    ))


def abandon_lost(
    kind: JobKind, *, now: datetime, on_abandoned: Callable[[Any], None] | None = None,
    only: Iterable[str] = (),
) -> int:
    """Fail the jobs whose workers died with them TREUE_JUDGE_MAX_ATTEMPTS times. Taken up
    again, such a job (one that kills its worker) would cost its calls every cycle.

    `on_abandoned(job)` runs in the same transaction for each (with `only` fields loaded)."""
    lost = kind.objects.filter(
        status=LeasedJob.RUNNING,
        lease_expires_at__lt=now,
        attempts__gte=settings.TREUE_JUDGE_MAX_ATTEMPTS,
    ).only("pk", "attempts", *only)
    abandoned = 0
    for job in lost[:RECONCILE_BATCH]:
        with transaction.atomic():
            done = kind.objects.filter(
                pk=job.pk, status=LeasedJob.RUNNING, lease_expires_at__lt=now
            ).update(
                status=LeasedJob.FAILED,
                error=kind.worker_lost.format(attempts=job.attempts),
                finished_at=now,
                lease_token=None,
                lease_expires_at=None,
                **kind.abandoned_fields,
            )
            if done:
                abandoned += 1
                if on_abandoned is not None:
                    on_abandoned(job)
    return abandoned


def lost(kind: JobKind, *, now: datetime) -> list[int]:
    """The jobs whose task was lost: pending past their time, or running under an expired
    lease (the worker died). Oldest first."""
    stale = now - timedelta(seconds=settings.TREUE_JUDGE_RECONCILE_AFTER_SECONDS)
    return list(
        kind.objects.filter(kind.claimable)
        .filter(
            Q(status=LeasedJob.PENDING, not_before__isnull=True, created_at__lt=stale)
            | Q(status=LeasedJob.PENDING, not_before__lt=stale)
            | Q(status=LeasedJob.RUNNING, lease_expires_at__lt=now)
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:RECONCILE_BATCH]
    )


def reconcile(
    kind: JobKind,
    *,
    publish_ids: Callable[[list[int]], int] | None = None,
    on_abandoned: Callable[[Any], None] | None = None,
    only: Iterable[str] = (),
) -> int:
    """The periodic reconciler: abandon what lost its worker too often, re-publish what was
    lost. Returns how many were published."""
    now = timezone.now()
    abandon_lost(kind, now=now, on_abandoned=on_abandoned, only=only)
    ids = lost(kind, now=now)
    return publish_ids(ids) if publish_ids is not None else publish(kind, ids)


_IMPORTING_TASKS = threading.Lock()


def task_named(name: str) -> Task:
    """The registered task of that name. Outside a worker Celery imports the apps' tasks
    modules only when asked to; a web process asks on its first publish. Threads of one
    process that publish at once wait for the first one's import: another would find the
    tasks modules half imported and its task unknown."""
    app = current_app
    try:
        return app.tasks[name]
    except KeyError:
        with _IMPORTING_TASKS:
            if name not in app.tasks:
                app.loader.import_default_modules()
        return app.tasks[name]


def publish_each(task_name: str, items: Iterable[Any], *, what: str, **options: Any) -> int:
    """Publish the task once per item (an id, or a list of ids). A broker that is down costs
    nothing: the first failure stops the loop, the work stays pending in the database and the
    reconciler publishes it later. Returns how many were published."""
    task = task_named(task_name)
    sent = 0
    for item in items:
        try:
            task.apply_async(args=[item], retry=False, **options)
            sent += 1
        except Exception as e:
            logger.warning("could not enqueue %s %s (%s); the reconciler will", what, item, e)
            break
    return sent


def publish(kind: JobKind, ids: Iterable[int]) -> int:
    """Publish a task per job; more than `kind.fan_out_above` as one fan-out message. Returns
    how many jobs were handed to the broker."""
    pks = list(ids)
    if kind.fan_out_task and len(pks) > kind.fan_out_above:
        sent = publish_each(kind.fan_out_task, [pks], what=f"{kind.what}s")
        return len(pks) if sent else 0
    return publish_each(kind.task, pks, what=kind.what)


def publish_on_commit(
    kind: JobKind, ids: Iterable[int], *, publish_ids: Callable[[list[int]], int] | None = None
) -> None:
    """Publish the jobs' tasks once the surrounding transaction commits (at once outside one):
    a worker must never look for a job that is not yet visible, or was rolled back.
    `publish_ids` replaces `publish(kind, ids)` where a kind has its own publishing function."""
    pks = list(ids)
    if pks:
        transaction.on_commit(
            lambda: publish_ids(pks) if publish_ids is not None else publish(kind, pks)
        )


def backoff_seconds(retries: int, retry_after: float | None) -> float:
    """Exponential backoff, capped, with "equal" jitter (between half the step and the step, so
    that retries of many jobs do not line up, yet their sum is known: with the defaults the
    attempts of a job span 34-67 minutes, see settings.TREUE_JUDGE_MAX_ATTEMPTS); a server's
    Retry-After is a floor."""
    cap = settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS
    step = min(cap, 2 ** (retries + 1))
    delay = random.uniform(step / 2, step)
    return max(delay, min(retry_after or 0.0, cap))


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


def run_task(
    task: Task,
    *,
    execute: Callable[[], str],
    give_up: Callable[[str], None],
    transient: tuple[type[Exception], ...],
) -> str:
    """The body of a job's task: execute it; after a transient failure (or the soft time
    limit) retry with backoff or give up."""
    try:
        return execute()
    except (*transient, SoftTimeLimitExceeded) as e:
        return retry_or_give_up(task, e, give_up)
