"""The Celery app. Tasks live in each app's tasks.py; the beat schedule is kept here, in code."""

import os

from celery import Celery
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
app.conf.beat_schedule = {
    "reconcile-judge-runs": {
        "task": "monitoring.tasks.reconcile_judge_runs",
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
}
