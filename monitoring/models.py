"""Use cases, the services that send answers, the answers themselves and their retrieved chunks."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from monitoring.domain.sampling import DEFAULT_SAMPLE_RATE, validate_rate


def _validate_sample_rate(value: float) -> None:
    from django.core.exceptions import ValidationError

    try:
        validate_rate(value)
    except ValueError as e:
        raise ValidationError(str(e)) from e


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
        validators=[_validate_sample_rate],
        help_text=_("Anteil der nicht markierten Antworten, die geprüft werden (sinnvoll: 2–5 %)."),
    )
    logprob_threshold = models.FloatField(
        _("Wahrscheinlichkeits-Schwelle"),
        default=0.5,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("Inhaltstragende Token unter dieser Wahrscheinlichkeit markieren die Antwort."),
    )
    action_threshold = models.FloatField(
        _("Handlungsschwelle"),
        default=0.85,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("Treue unter diesem Wert ist ein Handlungssignal."),
    )
    leaves_unreviewed = models.BooleanField(
        _("Antworten gehen ungeprüft nach außen"),
        default=False,
        help_text=_("Solche Antworten brauchen eine menschliche Freigabe, keine bessere Kennzahl."),
    )
    experts = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="expert_use_cases",
        verbose_name=_("Fachexperten"),
    )
    team_leads = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="led_use_cases",
        verbose_name=_("Teamleitung"),
    )
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
        ]

    def __str__(self) -> str:
        return self.name


class Service(models.Model):
    """A RAG service that sends answers. Its key is shown once; only a hash is stored."""

    name = models.CharField(_("Name"), max_length=200, unique=True)
    key_prefix = models.CharField(_("Schlüssel-Präfix"), max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
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


class Answer(models.Model):
    class Status(models.TextChoices):
        NOT_SAMPLED = "not_sampled", _("nicht in der Stichprobe")
        QUEUED = "queued", _("wartet auf Prüfung")
        JUDGING = "judging", _("wird geprüft")
        JUDGED = "judged", _("geprüft")
        FAILED = "failed", _("Prüfung fehlgeschlagen")

    class LogprobsStatus(models.TextChoices):
        OK = "ok", _("ausgewertet")
        NONE = "none", _("keine Wahrscheinlichkeiten")
        UNALIGNED = "unaligned", _("nicht zuordenbar")

    class SampleReason(models.TextChoices):
        FLAGGED = "flagged", _("markiert")
        RANDOM = "random", _("Zufallsstichprobe")
        NOT_SAMPLED = "not_sampled", _("nicht gezogen")

    use_case = models.ForeignKey(UseCase, on_delete=models.PROTECT, related_name="answers")
    service = models.ForeignKey(Service, on_delete=models.PROTECT, related_name="answers")
    external_id = models.CharField(max_length=200)
    content_hash = models.CharField(max_length=64)
    question = models.TextField(_("Frage"))
    text = models.TextField(_("Antwort"))
    model = models.CharField(_("Generator-Modell"), max_length=200)
    messages = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(_("Zeitpunkt"), default=timezone.now)
    received_at = models.DateTimeField(_("empfangen"), auto_now_add=True)

    # Tier 1: log-probabilities.
    logprobs_status = models.CharField(max_length=12, choices=LogprobsStatus.choices)
    token_data = models.JSONField(null=True, blank=True)
    logprob_threshold = models.FloatField()
    flagged = models.BooleanField(_("markiert"), default=False)
    uncertain_tokens = models.JSONField(default=list, blank=True)

    # Sampling for tier 2. in_random_sample is the hash draw, independent of the flag, so the
    # flagged answers that the random draw also hit can be compared with unflagged ones.
    in_random_sample = models.BooleanField(default=False)
    sampled = models.BooleanField(_("in der Stichprobe"), default=False)
    sample_reason = models.CharField(max_length=12, choices=SampleReason.choices)
    inclusion_probability = models.FloatField()
    status = models.CharField(max_length=12, choices=Status.choices)

    # Retrieval figures the dashboards group by, kept here so they need no join over chunks.
    chunk_count = models.PositiveIntegerField(default=0)
    best_chunk_score = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("Antwort")
        verbose_name_plural = _("Antworten")
        constraints = [
            models.UniqueConstraint(
                fields=["service", "external_id"], name="answer_unique_external_id"
            ),
        ]
        indexes = [
            models.Index(fields=["use_case", "created_at"], name="answer_use_case_time"),
            models.Index(fields=["use_case", "flagged", "created_at"], name="answer_flagged_time"),
            models.Index(fields=["use_case", "status", "created_at"], name="answer_status_time"),
            models.Index(
                fields=["status"], name="answer_awaiting_judge",
                condition=models.Q(status__in=["queued", "judging"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.service_id}/{self.external_id}"


class Chunk(models.Model):
    """A retrieved chunk, in the rank order the RAG service used."""

    answer = models.ForeignKey(Answer, on_delete=models.CASCADE, related_name="chunks")
    rank = models.PositiveIntegerField()
    text = models.TextField()
    score = models.FloatField(null=True, blank=True)
    source_chunk_id = models.CharField(max_length=200, blank=True)
    source = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["answer", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["answer", "rank"], name="chunk_unique_rank"),
        ]

    def __str__(self) -> str:
        return f"{self.answer_id}#{self.rank}"
