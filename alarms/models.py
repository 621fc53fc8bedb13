"""Alarms: something a team lead must act on, raised by monitoring (the action signal) and by
the weekly review (drift, decomposition, missed review).

The app sits below both: it names the use case by string ("monitoring.UseCase") and imports
neither, so each can write alarms without importing the other.
"""

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from alarms.text import render
from jobs.models import LeasedJob


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


class AlarmChannel(models.Model):
    """Where a use case's alarms go besides the team leads' mail: a Slack or Microsoft Teams
    incoming webhook, or a generic JSON webhook signed with HMAC-SHA256 (docs/alarm-channels.md).

    The address is a secret (whoever has a Slack webhook's address may post to the channel):
    stored encrypted (alarms.crypto), shown only as `url_hint` (host and last 4 characters).
    The generic webhook's signing secret is encrypted too: shown once, when the channel is made.
    """

    class Kind(models.TextChoices):
        SLACK = "slack", _("Slack")
        TEAMS = "teams", _("Microsoft Teams")
        WEBHOOK = "webhook", _("Webhook (JSON, signiert)")

    use_case = models.ForeignKey(
        "monitoring.UseCase", on_delete=models.CASCADE, related_name="alarm_channels",
        verbose_name=_("Anwendungsfall"),
    )
    kind = models.CharField(_("Art"), max_length=10, choices=Kind.choices)
    name = models.CharField(_("Name"), max_length=100)
    url_encrypted = models.TextField(_("Adresse (verschlüsselt)"))
    url_hint = models.CharField(_("Adresse"), max_length=300)
    secret_encrypted = models.TextField(_("Signaturschlüssel (verschlüsselt)"), blank=True)
    active = models.BooleanField(_("aktiv"), default=True)
    created_at = models.DateTimeField(_("angelegt"), default=timezone.now)
    created_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
        verbose_name=_("angelegt von"),
    )

    class Meta:
        ordering = ["use_case", "name", "id"]
        verbose_name = _("Alarmkanal")
        verbose_name_plural = _("Alarmkanäle")

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"


class AlarmDelivery(LeasedJob):
    """One alarm sent to one channel: a leased job (jobs.framework) whose task posts it,
    retried with backoff; each attempt is kept as a `DeliveryAttempt`."""


    class Status(models.TextChoices):
        PENDING = LeasedJob.PENDING, _("wartet")
        RUNNING = LeasedJob.RUNNING, _("wird gesendet")
        SENT = "sent", _("zugestellt")
        FAILED = LeasedJob.FAILED, _("fehlgeschlagen")

    alarm = models.ForeignKey(
        Alarm, on_delete=models.CASCADE, related_name="deliveries", verbose_name=_("Alarm")
    )
    channel = models.ForeignKey(
        AlarmChannel, on_delete=models.CASCADE, related_name="deliveries",
        verbose_name=_("Kanal"),
    )
    status = models.CharField(
        _("Status"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    http_status = models.PositiveSmallIntegerField(_("HTTP-Status"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("Zustellung")
        verbose_name_plural = _("Zustellungen")
        constraints = [
            models.UniqueConstraint(fields=["alarm", "channel"], name="alarm_delivery_once"),
        ]
        indexes = [
            models.Index(
                fields=["status", "created_at"], name="alarm_delivery_open",
                condition=models.Q(status__in=["pending", "running"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.alarm_id}->{self.channel_id}:{self.status}"


class DeliveryAttempt(models.Model):
    """One HTTP call to a channel: an alarm's delivery attempt, or a staff member's test
    message (`delivery` empty). The channel's page shows them, newest first."""

    channel = models.ForeignKey(
        AlarmChannel, on_delete=models.CASCADE, related_name="attempts", verbose_name=_("Kanal")
    )
    delivery = models.ForeignKey(
        AlarmDelivery, on_delete=models.CASCADE, null=True, blank=True, related_name="log",
        verbose_name=_("Zustellung"),
    )
    number = models.PositiveIntegerField(_("Versuch"), default=1)
    started_at = models.DateTimeField(_("begonnen"), default=timezone.now)
    finished_at = models.DateTimeField(_("beendet"), null=True, blank=True)
    ok = models.BooleanField(_("erfolgreich"), default=False)
    http_status = models.PositiveSmallIntegerField(_("HTTP-Status"), null=True, blank=True)
    error = models.TextField(_("Fehler"), blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        verbose_name = _("Zustellversuch")
        verbose_name_plural = _("Zustellversuche")
        indexes = [models.Index(fields=["channel", "-started_at"], name="attempt_channel_recent")]

    def __str__(self) -> str:
        return f"{self.channel_id}#{self.number}:{'ok' if self.ok else 'error'}"

    @property
    def is_test(self) -> bool:
        return self.delivery_id is None
