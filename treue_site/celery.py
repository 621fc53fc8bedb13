"""The Celery app. Tasks live in each app's tasks.py; the beat schedule is kept here, in code."""

import os

from celery import Celery

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
    "clean-embedded-broker": {
        "task": "monitoring.tasks.clean_embedded_broker",
        "schedule": 600.0,
    },
}
