"""The fields every leased job has: its state, the lease, the attempts and the last error.

A concrete job (monitoring.JudgeRun, investigations.Question) inherits them and adds its own
work's fields; jobs/framework.py claims, releases, finishes and re-queues it through them.
"""

from django.db import models
from django.utils.translation import gettext_lazy as _


class LeasedJob(models.Model):
    """A unit of background work claimed by a conditional UPDATE that hands out a lease token.

    Only the token's holder writes the job's progress and result, so a duplicate delivery or a
    worker that outlived its lease cannot write a second result. A job whose worker died is
    taken up again once its lease has expired; one whose task was lost, by the reconciler.
    """

    # The states the framework moves a job between. A concrete model overrides `status` with
    # its own choices, which must contain these three values.
    PENDING = "pending"
    RUNNING = "running"
    FAILED = "failed"

    status = models.CharField(_("Status"), max_length=10, default=PENDING)
    created_at = models.DateTimeField(_("angelegt"), auto_now_add=True)
    finished_at = models.DateTimeField(_("beendet"), null=True, blank=True)
    lease_token = models.UUIDField(_("Reservierungs-Token"), null=True, blank=True)
    lease_expires_at = models.DateTimeField(_("reserviert bis"), null=True, blank=True)
    attempts = models.PositiveIntegerField(_("Versuche"), default=0)
    # Set while a transient failure waits for its retry, so the reconciler does not jump in.
    not_before = models.DateTimeField(_("frühestens ab"), null=True, blank=True)
    error = models.TextField(_("Fehler"), blank=True)

    class Meta:
        abstract = True
