"""The trace receiver's periodic work: assembling the traces that have gone quiet."""

from celery import shared_task

from traces import services


@shared_task(acks_late=True, expires=10)
def assemble_due_traces() -> int:
    """Every 10 s (treue_site/celery.py): assemble each trace whose quiet period is over. The
    spans wait in the database, so a sweep that is lost or runs late loses nothing; two sweeps
    at once each claim different traces."""
    return services.otlp_traces_assemble_due()
