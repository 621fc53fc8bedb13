"""Alarms: something a team lead must act on, raised by monitoring (the action signal) and by
the weekly review (drift, decomposition, missed review).

The app sits below both: it names the use case by string ("monitoring.UseCase") and imports
neither, so each can write alarms without importing the other.
"""

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from alarms.text import render


class Alarm(models.Model):
    """Something a team lead must act on, for one use case.

    One row per (use case, kind, key): the key names what the alarm is about (usually an ISO
    week), so raising the same alarm again finds the row and mails nobody twice. An alarm is
    open until `cleared_at` is set — by itself when the condition recovers, or by a person.
    """

    class Kind(models.TextChoices):
        ACTION = "action", _("Handlungssignal")
        DRIFT = "drift", _("Kalibrierungsdrift")
        DECOMPOSITION = "decomposition", _("Zerlegung oft falsch")
        MISSED_REVIEW = "missed_review", _("Wochenprüfung versäumt")

    use_case = models.ForeignKey(
        "monitoring.UseCase", on_delete=models.CASCADE, related_name="alarms",
        verbose_name=_("Anwendungsfall"),
    )
    kind = models.CharField(_("Art"), max_length=20, choices=Kind.choices)
    key = models.CharField(_("Kennung"), max_length=50)
    message = models.TextField(_("Meldung"))
    # The message as (message id, values) sentences (alarms.text), rendered in each reader's
    # language; empty for alarms raised before December 2026, which show `message` as stored.
    message_parts = models.JSONField(_("Bausteine der Meldung"), default=list, blank=True)
    details = models.JSONField(_("Details"), default=dict, blank=True)
    opened_at = models.DateTimeField(_("ausgelöst"), default=timezone.now)
    cleared_at = models.DateTimeField(_("erledigt"), null=True, blank=True)
    mailed_at = models.DateTimeField(_("per E-Mail gemeldet"), null=True, blank=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        verbose_name = _("Alarm")
        verbose_name_plural = _("Alarme")
        constraints = [
            models.UniqueConstraint(fields=["use_case", "kind", "key"], name="alarm_unique_key"),
        ]
        indexes = [
            models.Index(
                fields=["use_case", "kind"], name="alarm_open",
                condition=models.Q(cleared_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.use_case_id}:{self.kind}:{self.key}"

    @property
    def text(self) -> str:
        """The message in the active language: rendered from its message ids where the alarm
        kept them (alarms.text), else the message as stored (alarms raised before December
        2026 keep the language they were raised in)."""
        parts = self.message_parts
        if parts:
            try:
                return render(parts)
            except (KeyError, TypeError, ValueError):
                pass
        return self.message
