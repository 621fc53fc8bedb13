"""Celery tasks of the monitoring app. Tasks take ids (or nothing) and call one service.

The judge tier's tasks are in judging/tasks.py, under their old names."""

from celery import shared_task
from django.conf import settings

from common.broker import delete_delivered_messages
from monitoring.services.prices import past_runs_price, past_runs_price_all
from monitoring.services.rollup_rebuild import rollups_repair
from monitoring.services.segment_rollups import SEGMENT_KEYS_ROLL_TASK, segment_keys_roll


@shared_task(ignore_result=True)
def clean_embedded_broker() -> int:
    return delete_delivered_messages(settings.CELERY_BROKER_URL)


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             soft_time_limit=3600, time_limit=3660)
def check_rollups() -> int:
    """Nightly: compare the dashboards' rollups with a recount; rebuild a use case that
    differs (logged as an error). Returns how many were rebuilt."""

    return rollups_repair()


@shared_task(acks_late=True, reject_on_worker_lost=True, ignore_result=True,
             soft_time_limit=600, time_limit=660)
def ensure_partitions() -> list[str]:
    """Daily: the months ahead of answers and chunks partitioned by month (PostgreSQL); rows
    that arrived in the default partition move into their month. Returns the names made."""
    from monitoring.services import partitions

    return partitions.partitions_ensure()


# The first run after a retention period is set may have a million answers to go through, about
# a second per batch of 1,000: longer than the default limit. Each batch commits on its own, so
# a run cut short loses at most one batch's work, and the next day's run goes on from there.
RETENTION_SOFT_TIME_LIMIT = 3600


@shared_task(
    acks_late=True, reject_on_worker_lost=True, ignore_result=True,
    soft_time_limit=RETENTION_SOFT_TIME_LIMIT, time_limit=RETENTION_SOFT_TIME_LIMIT + 60,
)
def apply_retention() -> int:
    """Daily: drop whole months where retention allows it, anonymise answers older than their
    use case's retention (idempotent, batched). Returns the answers dropped or anonymised."""
    from monitoring.services import retention

    dropped = sum(m.answers for m in retention.months_drop())
    return dropped + sum(r.anonymised for r in retention.retention_apply_all())


@shared_task(name="monitoring.tasks.price_past_runs", acks_late=True,
             reject_on_worker_lost=True, ignore_result=True,
             soft_time_limit=3600, time_limit=3660)
def price_past_runs(judge_model: str) -> int:
    """A judge model got a price: its past runs without a cost get one (and the rollups)."""
    return past_runs_price(judge_model=judge_model)


@shared_task(name="monitoring.tasks.price_past_runs_all", acks_late=True,
             reject_on_worker_lost=True, ignore_result=True,
             soft_time_limit=3600, time_limit=3660)
def price_past_runs_all() -> int:
    """Nightly: the past runs of every model with a price that still have no cost."""
    return sum(past_runs_price_all().values())


@shared_task(name=SEGMENT_KEYS_ROLL_TASK, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True, soft_time_limit=3600, time_limit=3660)
def roll_segment_keys(use_case_id: int) -> list[str]:
    """Metadata keys were declared: count their past answers' segments in the rollups."""
    return segment_keys_roll(use_case_id=use_case_id)
