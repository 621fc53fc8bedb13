"""Signs of life of the Celery workers, read by /health."""


from django.db import models
from django.utils.translation import gettext_lazy as _


class WorkerHeartbeat(models.Model):
    """The last sign of life of each Celery worker, written by the worker's consumer every
    TREUE_HEARTBEAT_SECONDS (treue_site/celery.py) and read by /health."""

    hostname = models.CharField(max_length=255, unique=True)
    last_seen = models.DateTimeField()
    started_at = models.DateTimeField()

    class Meta:
        verbose_name = _("Worker-Lebenszeichen")
        verbose_name_plural = _("Worker-Lebenszeichen")

    def __str__(self) -> str:
        return self.hostname
