"""Celery tasks of the monitoring app. Tasks take ids (or nothing) and call one function."""

from celery import shared_task
from django.conf import settings

from treue_site.broker import delete_delivered_messages


@shared_task(ignore_result=True)
def clean_embedded_broker() -> int:
    return delete_delivered_messages(settings.CELERY_BROKER_URL)
