"""The workers' heartbeats: each consuming worker writes its last sign of life (the bootstep in
treue_site/celery.py calls this every TREUE_HEALTH_HEARTBEAT_SECONDS)."""

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from monitoring.models import WorkerHeartbeat

# Hostnames change with every deployment (containers); rows of workers gone this long are
# removed when a worker starts, so the table stays a handful of rows.
FORGET_AFTER = timedelta(days=7)


def worker_heartbeat_record(
    *, hostname: str, now: datetime | None = None, started: bool = False
) -> None:
    """Record that `hostname` is alive; `started` marks a (re)start of its consumer."""
    now = now or timezone.now()
    fields = {"last_seen": now, **({"started_at": now} if started else {})}
    if WorkerHeartbeat.objects.filter(hostname=hostname).update(**fields):
        return
    try:
        with transaction.atomic():
            WorkerHeartbeat.objects.create(hostname=hostname, last_seen=now, started_at=now)
    except IntegrityError:
        # Two consumers with the same name (a restart racing its predecessor): the row exists.
        WorkerHeartbeat.objects.filter(hostname=hostname).update(**fields)
    if started:
        WorkerHeartbeat.objects.filter(last_seen__lt=now - FORGET_AFTER).delete()
