"""Use cases and their settings (with the record of their changes), and the RAG services
that send answers to them."""

import math

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from monitoring.domain.retention import MIN_RETENTION_DAYS
from monitoring.domain.sample_rate import DEFAULT_SAMPLE_RATE, validate_rate


def validate_finite(value: float) -> None:
    """NaN passes every comparison unnoticed: a threshold of NaN flags nothing, silently."""
    from django.core.exceptions import ValidationError

    if not math.isfinite(value):
        raise ValidationError(_("Bitte eine Zahl angeben."), code="invalid")


def validate_sample_rate(value: float) -> None:
    from django.core.exceptions import ValidationError

    try:
        validate_rate(value)
    except ValueError as e:
        raise ValidationError(str(e)) from e


class JudgeMode(models.TextChoices):
    """How a judge verifies an answer's claims (judging.domain.judgement.MODES)."""

    PER_CLAIM = "per-claim", _("je Aussage")
    BATCHED = "batched", _("gebündelt")
    SINGLE = "single", _("ein Aufruf")


class UseCase(models.Model):
    class Language(models.TextChoices):
        DE = "de", "Deutsch"
        EN = "en", "English"

    slug = models.SlugField(_("Kürzel"), max_length=64, unique=True)
    name = models.CharField(_("Name"), max_length=200)
    language = models.CharField(
        _("Sprache"), max_length=2, choices=Language.choices, default=Language.DE
    )
    sample_rate = models.FloatField(
        _("Stichprobenrate"),
        default=DEFAULT_SAMPLE_RATE,
        validators=[validate_sample_rate],
        help_text=_("Anteil der nicht markierten Antworten, die geprüft werden (sinnvoll: 2–5 %)."),
    )
    logprob_threshold = models.FloatField(
        _("Wahrscheinlichkeits-Schwelle"),
        default=0.5,
        validators=[validate_finite, MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("Inhaltstragende Token unter dieser Wahrscheinlichkeit markieren die Antwort."),
    )
    action_threshold = models.FloatField(
        _("Handlungsschwelle"),
        default=0.85,
        validators=[validate_finite, MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("Treue unter diesem Wert ist ein Handlungssignal."),
    )
    judge_mode = models.CharField(
        _("Prüfmodus"), max_length=12, choices=JudgeMode.choices, default=JudgeMode.PER_CLAIM,
        help_text=_(
            "Je Aussage: ein Aufruf des Prüfmodells für jede Aussage, mit dem Prüf-Prompt des "
            "Artikels. Gebündelt: alle Aussagen einer Antwort in einem Aufruf, jedes Urteil "
            "an die Kennung seiner Aussage gebunden; etwa ein Viertel der Prompt-Token. Ein "
            "Aufruf: Zerlegung und Urteile zusammen, strukturiert."
        ),
    )
    judge_evidence = models.BooleanField(
        _("Belege und Begründungen des Prüfers"),
        default=True,
        help_text=_(
            "Gebündelt und in einem Aufruf: zu jedem Urteil die Abschnitte, auf die es sich "
            "stützt, und ein Satz Begründung. Kostet Antwort-Token (etwa 25 je Aussage)."
        ),
    )
    # Set when a team lead adopts a candidate judge compared on the experts' labels (review's
    # judge comparison); empty: the judge model of the installation (TREUE_JUDGE_MODEL).
    judge_model = models.CharField(
        _("Prüfmodell"), max_length=200, blank=True,
        help_text=_("Leer: das Prüfmodell der Installation (TREUE_JUDGE_MODEL)."),
    )
    leaves_unreviewed = models.BooleanField(
        _("Antworten gehen ungeprüft nach außen"),
        default=False,
        help_text=_("Solche Antworten brauchen eine menschliche Freigabe, keine bessere Kennzahl."),
    )
    review_batch_size = models.PositiveSmallIntegerField(
        _("Antworten je Wochenprüfung"),
        default=20,
        validators=[MinValueValidator(1), MaxValueValidator(200)],
        help_text=_("So viele geprüfte Antworten der Vorwoche bekommen die Fachexperten je Woche."),
    )
    experts = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="expert_use_cases",
        verbose_name=_("Fachexperten"),
    )
    team_leads = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="led_use_cases",
        verbose_name=_("Teamleitung"),
    )
    # Null keeps answers forever. At least MIN_RETENTION_DAYS (see monitoring/domain/retention.py):
    # the weekly review and last week's batch must never lose their answers.
    retention_days = models.PositiveIntegerField(
        _("Aufbewahrung in Tagen"),
        null=True,
        blank=True,
        validators=[MinValueValidator(MIN_RETENTION_DAYS)],
        help_text=_(
            "Ältere Antworten werden anonymisiert: Frage, Antwort, Abschnitte und Urteilstexte "
            "werden gelöscht, die Kennzahlen bleiben. Leer: unbegrenzt. Mindestens 28 Tage, "
            "damit die Wochenprüfung ihre Antworten behält."
        ),
    )
    # What happens past the retention period where answers are partitioned by month
    # (PostgreSQL): a month whose every use case allows it is dropped whole (rows, chunks,
    # judge runs; the dashboards' rollups keep its figures); otherwise answers are anonymised.
    retention_deletes = models.BooleanField(
        _("Alte Monate löschen"),
        default=False,
        help_text=_(
            "Statt zu anonymisieren: Monate, deren Antworten alle älter als die Aufbewahrung "
            "sind, werden ganz gelöscht, sofern jeder Anwendungsfall mit Antworten in dem Monat "
            "das erlaubt und keine Fachprüfung oder Untersuchung auf sie verweist. Die Zahlen "
            "der Übersichten bleiben."
        ),
    )
    # Metadata keys whose values become segments (issue 40), at most 10.
    segment_keys = models.JSONField(_("Segment-Schlüssel der Metadaten"), default=list,
                                    blank=True)
    # The declared keys whose segments the rollups hold in full (a key declared later is read
    # from the raw answers until a task has counted its past answers: segment_keys_roll).
    segment_keys_rolled = models.JSONField(_("Segment-Schlüssel in den Wochensummen"),
                                           default=list, blank=True, editable=False)
    active = models.BooleanField(_("aktiv"), default=True)
    created_at = models.DateTimeField(_("angelegt"), auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("Anwendungsfall")
        verbose_name_plural = _("Anwendungsfälle")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(sample_rate__gt=0, sample_rate__lte=1),
                name="use_case_sample_rate_range",
            ),
            models.CheckConstraint(
                condition=models.Q(retention_days__isnull=True)
                | models.Q(retention_days__gte=MIN_RETENTION_DAYS),
                name="use_case_retention_min",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def effective_judge_model(self) -> str:
        """The judge model new runs of this use case use."""
        return self.judge_model.strip() or settings.TREUE_JUDGE_MODEL


class SettingChange(models.Model):
    """One change of a use case's tuning (flag threshold, sample rate, action threshold, the
    judge's evidence): who, when, old and new value (a switch as 1 for on, 0 for off). The pages
    mark the week of a change; the estimates before and after it rest on different settings."""

    class Field(models.TextChoices):
        LOGPROB_THRESHOLD = "logprob_threshold", _("Wahrscheinlichkeits-Schwelle")
        SAMPLE_RATE = "sample_rate", _("Stichprobenrate")
        ACTION_THRESHOLD = "action_threshold", _("Handlungsschwelle")
        JUDGE_EVIDENCE = "judge_evidence", _("Belege und Begründungen des Prüfers")

    class Source(models.TextChoices):
        """Where a change was made: named in the reader's language when shown."""

        SETTINGS = "settings", _("Einstellungen")
        TUNER = "tuner", _("aus der Abwägung der Schwelle")
        ADMIN = "admin", _("in der Verwaltung")

    use_case = models.ForeignKey(
        UseCase, on_delete=models.CASCADE, related_name="setting_changes",
        verbose_name=_("Anwendungsfall"),
    )
    field = models.CharField(_("Einstellung"), max_length=32, choices=Field.choices)
    old_value = models.FloatField(_("vorher"))
    new_value = models.FloatField(_("nachher"))
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
        related_name="+", verbose_name=_("geändert von"),
    )
    changed_at = models.DateTimeField(_("geändert am"), auto_now_add=True, db_index=True)
    source = models.CharField(
        _("Ort"), max_length=10, choices=Source.choices, default=Source.SETTINGS
    )
    # What the person who made the change wrote about why (as they wrote it).
    note = models.CharField(pgettext_lazy("setting change", "Anlass"), max_length=200, blank=True)

    class Meta:
        ordering = ["-changed_at", "-pk"]
        verbose_name = _("Änderung einer Einstellung")
        verbose_name_plural = _("Änderungen der Einstellungen")

    def __str__(self) -> str:
        return f"{self.use_case} {self.field}: {self.old_value:g} → {self.new_value:g}"

    @property
    def reason(self) -> str:
        """Why, as the pages show it: the person's note, else where the change was made (the
        settings form says nothing more than that it was changed)."""
        if self.note:
            return self.note
        return "" if self.source == self.Source.SETTINGS else str(self.get_source_display())


class Service(models.Model):
    """A RAG service that sends answers. Its key is shown once; only a hash is stored."""

    name = models.CharField(_("Name"), max_length=200, unique=True)
    key_prefix = models.CharField(_("Schlüssel-Präfix"), max_length=16, unique=True)
    key_hash = models.CharField(_("Schlüssel-Hash"), max_length=64)
    # The key before the last rotation, valid until previous_key_expires_at (a grace period in
    # which the services move to the new key); empty when there is none.
    previous_key_prefix = models.CharField(
        _("Präfix des alten Schlüssels"), max_length=16, blank=True, default="", db_index=True
    )
    previous_key_hash = models.CharField(
        _("Hash des alten Schlüssels"), max_length=64, blank=True, default=""
    )
    previous_key_expires_at = models.DateTimeField(
        _("alter Schlüssel gültig bis"), null=True, blank=True
    )
    use_cases = models.ManyToManyField(
        UseCase, blank=True, related_name="services", verbose_name=_("erlaubte Anwendungsfälle")
    )
    active = models.BooleanField(_("aktiv"), default=True)
    created_at = models.DateTimeField(_("angelegt"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("zuletzt benutzt"), null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("Dienst")
        verbose_name_plural = _("Dienste")

    def __str__(self) -> str:
        return self.name
