"""Self-consistency investigations (method 2 of the article): a team lead re-asks the generator
several times for a set of stored questions and sees where its answers disagree.

An investigation is not a tier: nothing starts one automatically. Each question is a unit of
work like a judge run: claimed with a lease by a conditional UPDATE, its samples stored one by
one as they arrive, so a retried or redelivered task continues instead of paying again.
"""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.models import LeasedJob
from monitoring.models import Answer, UseCase


class Investigation(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", _("läuft")
        FINISHED = "finished", _("abgeschlossen")
        CANCELLED = "cancelled", _("abgebrochen")

    class Selection(models.TextChoices):
        LATEST = "latest", _("die letzten N Antworten")
        FLAGGED = "flagged", _("N markierte Antworten")
        BELOW = "below", _("N Antworten unter der Schwelle")
        CHOSEN = "chosen", _("im Explorer gewählte Antworten")

    use_case = models.ForeignKey(
        UseCase, on_delete=models.CASCADE, related_name="investigations",
        verbose_name=_("Anwendungsfall"),
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+",
        verbose_name=_("gestartet von"),
    )
    created_at = models.DateTimeField(_("gestartet"), auto_now_add=True)
    finished_at = models.DateTimeField(_("beendet"), null=True, blank=True)
    status = models.CharField(
        _("Status"), max_length=10, choices=Status.choices, default=Status.RUNNING
    )
    selection = models.CharField(_("Auswahl"), max_length=10, choices=Selection.choices)
    requested = models.PositiveIntegerField(_("angefragt"))
    samples = models.PositiveSmallIntegerField(
        _("Stichproben je Frage"),
        default=3,
        validators=[MinValueValidator(2), MaxValueValidator(10)],
    )
    temperature = models.FloatField(
        _("Temperatur"), default=0.7, validators=[MinValueValidator(0.01), MaxValueValidator(2)]
    )
    # Blank: each question is re-asked with its answer's own generator model.
    generator_model = models.CharField(_("Generator-Modell"), max_length=200, blank=True)
    judge_model = models.CharField(_("Prüfmodell"), max_length=200, blank=True)
    prompt_version = models.CharField(_("Prompt-Version"), max_length=50)
    estimated_calls = models.PositiveIntegerField(_("Erwartete Aufrufe"), default=0)
    estimated_cost = models.DecimalField(
        _("Erwartete Kosten"), max_digits=12, decimal_places=6, null=True, blank=True
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("Konsistenzprüfung")
        verbose_name_plural = _("Konsistenzprüfungen")
        indexes = [models.Index(fields=["use_case", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.use_case.slug} #{self.pk}"


class Question(LeasedJob):
    class Status(models.TextChoices):
        SKIPPED = "skipped", _("übersprungen")
        PENDING = "pending", _("wartet")
        RUNNING = "running", _("läuft")
        DONE = "done", _("fertig")
        FAILED = "failed", _("fehlgeschlagen")
        CANCELLED = "cancelled", _("abgebrochen")

    investigation = models.ForeignKey(
        Investigation, on_delete=models.CASCADE, related_name="questions",
        verbose_name=_("Konsistenzprüfung"),
    )
    answer = models.ForeignKey(
        Answer, on_delete=models.CASCADE, related_name="+", verbose_name=_("Antwort"),
        db_constraint=False,  # answers are partitioned by month on PostgreSQL
    )
    position = models.PositiveIntegerField(_("Position"))
    status = models.CharField(
        _("Status"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    skip_reason = models.CharField(_("Grund für das Überspringen"), max_length=200, blank=True)
    generator_model = models.CharField(_("Generator-Modell"), max_length=200, blank=True)
    # [{"text", "logprobs", "model", "latency_ms", "prompt_tokens", "completion_tokens"}], in
    # the order they arrived; a retry asks only for the ones still missing.
    sample_data = models.JSONField(_("Stichproben"), default=list, blank=True)
    # What the comparison found: per sample the values and the spans that differ.
    comparison = models.JSONField(_("Vergleich"), default=dict, blank=True)
    consistent = models.BooleanField(_("konsistent"), null=True, blank=True)
    reason = models.TextField(_("Grund"), blank=True)
    # "values" | "judge"
    decided_by = models.CharField(_("entschieden durch"), max_length=10, blank=True)
    judge_raw = models.TextField(_("Antwort des Prüfers"), blank=True)
    # The lease fields are jobs.models.LeasedJob's.
    generator_calls = models.PositiveIntegerField(_("Generator-Aufrufe"), default=0)
    judge_calls = models.PositiveIntegerField(_("Aufrufe des Prüfmodells"), default=0)
    prompt_tokens = models.PositiveIntegerField(_("Prompt-Token"), default=0)
    completion_tokens = models.PositiveIntegerField(_("Antwort-Token"), default=0)
    # Of the calls, those whose token figures the endpoint misreported (below 0, above 10^7):
    # counted, their tokens unknown and so not in the tokens or the cost.
    usage_unknown_calls = models.PositiveIntegerField(
        _("Aufrufe ohne glaubhafte Token-Angabe"), default=0
    )
    cost = models.DecimalField(
        _("Kosten"), max_digits=12, decimal_places=6, null=True, blank=True
    )

    class Meta:
        ordering = ["investigation", "position"]
        verbose_name = _("Frage")
        verbose_name_plural = _("Fragen")
        constraints = [
            models.UniqueConstraint(
                fields=["investigation", "answer"], name="investigation_answer_once"
            )
        ]
        indexes = [models.Index(fields=["status", "created_at"])]

    def __str__(self) -> str:
        return f"{self.investigation_id}/{self.position}"
