"""The Celery app. Tasks live in each app's tasks.py; the beat schedule is kept here, in code."""

import logging
import os
from typing import Any

from celery import Celery, bootsteps
from celery.schedules import crontab

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "treue_site.settings")

app = Celery("treue")
app.config_from_object("django.conf:settings", namespace="CELERY")

if str(app.conf.broker_url).startswith("sqla+"):
    # The embedded broker polls its table, once a second by default, which caps it near one
    # task a second. Its transport hands every transport option to SQLAlchemy's create_engine,
    # so the interval cannot go there; it is the transport's class attribute.
    from kombu.transport import sqlalchemy as kombu_sqla

    kombu_sqla.Transport.polling_interval = 0.2
app.autodiscover_tasks()

logger = logging.getLogger(__name__)


class WorkerHeartbeat(bootsteps.StartStopStep):
    """Every TREUE_HEALTH_HEARTBEAT_SECONDS, write this worker's last sign of life (/health).

    A step of the consumer, started after its task consumer: it beats only between the moment
    the worker consumes its queues and the moment it stops (a lost broker connection stops the
    consumer, and so the beats, until it reconnects). The beat is a call on the consumer's
    timer: on Redis that timer is driven by the same event loop that takes messages off the
    queue, so a worker whose loop is stuck stops beating. (On the embedded broker, whose
    transport has no event loop, the timer is a thread: the beat proves the process and its
    consumer alive.) A beat task sent through the queue would prove more, but only while beat
    runs, and a busy queue would make a healthy worker look dead.
    """

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent: object, **kwargs: object) -> None:
        super().__init__(parent, **kwargs)
        self.timer_ref = None

    def start(self, consumer: Any) -> None:
        from django.conf import settings

        hostname = consumer.hostname
        self.beat(hostname, started=True)
        self.timer_ref = consumer.timer.call_repeatedly(
            settings.TREUE_HEALTH_HEARTBEAT_SECONDS, self.beat, (hostname,)
        )

    def stop(self, consumer: Any) -> None:
        if self.timer_ref is not None:
            self.timer_ref.cancel()
            self.timer_ref = None

    shutdown = stop

    @staticmethod
    def beat(hostname: str, started: bool = False) -> None:
        from django.db import close_old_connections

        from monitoring.services.health import worker_heartbeat_record

        try:
            # A connection the database dropped since the last beat is replaced, not reused.
            close_old_connections()
            worker_heartbeat_record(hostname=hostname, started=started)
        except Exception:  # a missed beat is what /health is for; the consumer must go on
            logger.warning("worker heartbeat not written", exc_info=True)


app.steps["consumer"].add(WorkerHeartbeat)
app.conf.beat_schedule = {
    # OpenTelemetry traces whose quiet period is over, assembled into answers (traces/). Each
    # sweep expires after 10 s, so a stopped worker does not find a pile of them.
    "assemble-otlp-traces": {
        "task": "traces.tasks.assemble_due_traces",
        "schedule": 10.0,
    },
    "reconcile-judge-runs": {
        "task": "monitoring.tasks.reconcile_judge_runs",
        "schedule": 300.0,
    },
    "reconcile-shadow-runs": {
        "task": "review.tasks.reconcile_shadow_runs",
        "schedule": 300.0,
    },
    "reconcile-alarm-deliveries": {
        "task": "alarms.tasks.reconcile_alarm_deliveries",
        "schedule": 300.0,
    },
    "reconcile-investigation-questions": {
        "task": "investigations.tasks.reconcile_questions",
        "schedule": 300.0,
    },
    # Monday morning in the site's time zone (CELERY_TIMEZONE = Europe/Berlin).
    "create-review-batches": {
        "task": "review.tasks.create_review_batches",
        "schedule": crontab(minute=0, hour=6, day_of_week="mon"),
    },
    "check-review-alarms": {
        "task": "review.tasks.check_review_alarms",
        "schedule": crontab(minute=15),
    },
    "clean-embedded-broker": {
        "task": "monitoring.tasks.clean_embedded_broker",
        "schedule": 600.0,
    },
    # The action signal; alarm_raise mails each alarm once, so hourly costs nobody a mail.
    "check-action-alarms": {
        "task": "monitoring.tasks.check_action_alarms",
        "schedule": 3600.0,
    },
    # The dashboards' rollups against a recount, repaired where they differ, at night.
    "check-rollups": {
        "task": "monitoring.tasks.check_rollups",
        "schedule": crontab(minute=0, hour=4),
    },
    # Past judge runs of a model that got a price since (its setting prices them at once; this
    # catches a lost message and the list prices an update brought).
    "price-past-runs": {
        "task": "monitoring.tasks.price_past_runs_all",
        "schedule": crontab(minute=30, hour=4),
    },
    # Answers are partitioned by month on PostgreSQL: the months ahead, made a night early.
    "ensure-partitions": {
        "task": "monitoring.tasks.ensure_partitions",
        "schedule": crontab(minute=45, hour=2),
    },
    # Retention: anonymise answers past their use case's retention_days, at night.
    "apply-retention": {
        "task": "monitoring.tasks.apply_retention",
        "schedule": crontab(minute=30, hour=3),
    },
}
