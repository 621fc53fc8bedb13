"""What /health reports: the database, the broker, the workers' heartbeats and the judge
backlog. Public: only states and ages, never names, hosts, URLs or error messages."""

import concurrent.futures
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Max, Min
from django.utils import timezone

from monitoring.domain import health
from monitoring.models import Answer, WorkerHeartbeat

# Two threads for the broker ping: a ping that hangs past its socket timeouts (a DNS lookup is
# not bounded by them) is abandoned by the request, and the other thread serves the next one.
_PING_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="health")
_ENGINES: dict[str, Any] = {}
_UNSCORED = (Answer.Status.QUEUED, Answer.Status.JUDGING)


def _ping(url: str, timeout: float) -> bool:
    if url.startswith(("redis://", "rediss://", "unix://")):
        import redis

        client = redis.Redis.from_url(
            url, socket_connect_timeout=timeout, socket_timeout=timeout, retry_on_timeout=False
        )
        try:
            return bool(client.ping())
        finally:
            client.close()
    if url.startswith("sqla+"):
        # The embedded broker is a table in a database: reachable if a query answers. One
        # engine per URL, without a pool, so a health check holds no connection open.
        import sqlalchemy
        from sqlalchemy.pool import NullPool

        engine = _ENGINES.get(url)
        if engine is None:
            target = url.removeprefix("sqla+")
            args = {"timeout": timeout} if target.startswith("sqlite") else {}
            engine = sqlalchemy.create_engine(target, poolclass=NullPool, connect_args=args)
            _ENGINES[url] = engine
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
        return True
    from kombu import Connection

    with Connection(url, connect_timeout=timeout) as conn:
        conn.ensure_connection(max_retries=1, timeout=timeout)
    return True


def broker_ok(*, url: str, timeout: float) -> bool:
    """Connect to the broker and ping it; False after `timeout` seconds whatever happens."""
    future = _PING_POOL.submit(_ping, url, timeout)
    try:
        return future.result(timeout=timeout)
    except Exception:  # down, refused, timed out, misconfigured: all "down" to a prober
        return False


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # any failure here means "not healthy", which is the answer
        return False
    return True


def _age(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else round(max(0.0, (now - then).total_seconds()), 1)


def health_report(*, now: datetime | None = None) -> dict[str, Any]:
    """The report /health returns.

    The oldest unscored answer is measured from `received_at` (a replay's `created_at` may lie
    in the past), like /metrics: one probe of the partial index answer_unscored_received.
    Queued or judging implies sampled (ingest queues only sampled answers); the filter says so.
    """
    broker = broker_ok(
        url=settings.CELERY_BROKER_URL, timeout=settings.TREUE_HEALTH_BROKER_TIMEOUT_SECONDS
    )
    report: dict[str, Any] = {
        "status": health.STATUS_UNAVAILABLE,
        "database": "down",
        "broker": "ok" if broker else "down",
        "worker": {"status": None, "last_heartbeat_age_seconds": None},
        "oldest_unscored_seconds": None,
    }
    if not _database_ok():
        return report
    now = now or timezone.now()
    try:
        last_seen = WorkerHeartbeat.objects.aggregate(t=Max("last_seen"))["t"]
        oldest = Answer.objects.filter(status__in=_UNSCORED, sampled=True).aggregate(
            t=Min("received_at")
        )["t"]
    except Exception:  # the database went away between the two checks
        return report
    heartbeat_age = _age(now, last_seen)
    worker = health.worker_status(
        heartbeat_age=heartbeat_age, stale_after=settings.TREUE_HEALTH_WORKER_STALE_SECONDS
    )
    unscored = _age(now, oldest) or 0.0  # 0 when nothing waits, as on /metrics
    report.update(
        status=health.overall_status(
            database_ok=True, broker_ok=broker, worker=worker, oldest_unscored=unscored,
            backlog_after=settings.TREUE_HEALTH_BACKLOG_SECONDS,
        ),
        database="ok",
        worker={"status": worker, "last_heartbeat_age_seconds": heartbeat_age},
        oldest_unscored_seconds=unscored,
    )
    return report
