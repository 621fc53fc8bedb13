"""The Celery app. Tasks live in each app's tasks.py; the beat schedule is kept here, in code."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "treue_site.settings")

app = Celery("treue")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.conf.beat_schedule = {
    "clean-embedded-broker": {
        "task": "monitoring.tasks.clean_embedded_broker",
        "schedule": 600.0,
    },
}
