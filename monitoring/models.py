"""Use cases, the services that send answers, the answers themselves and their retrieved chunks."""

import json
import math
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _

from jobs.models import LeasedJob
from monitoring.domain.logprobs import pack_compact, unpack_compact
from monitoring.domain.retention import MIN_RETENTION_DAYS
from monitoring.domain.sampling import DEFAULT_SAMPLE_RATE, validate_rate
from monitoring.judging.domain.cost import token_cost


def _validate_finite(value: float) -> None:
    """NaN passes every comparison unnoticed: a threshold of NaN flags nothing, silently."""
    from django.core.exceptions import ValidationError

    if not math.isfinite(value):
        raise ValidationError(_("Bitte eine Zahl angeben."), code="invalid")


def _validate_sample_rate(value: float) -> None:
    from django.core.exceptions import ValidationError

    try:
        validate_rate(value)
    except ValueError as e:
        raise ValidationError(str(e)) from e


class CompactTokensField(models.BinaryField):
    """Tier 1's compact copy of an answer's tokens (a dict in Python), stored as bytes
    (logprobs.pack_compact). A JSON column cost PostgreSQL more than the rest of the row."""

    # What the type checker (django-stubs) takes the attribute to hold: the unpacked dict.
    _pyi_private_set_type: dict[str, Any] | bytes | None
    # Narrower than BinaryField's own declaration, which is what this field changes.
    _pyi_private_get_type: dict[str, Any] | None  # type: ignore[assignment]  # see above

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return None if value is None else unpack_compact(value)

    def to_python(self, value: Any) -> Any:
        if value is None or isinstance(value, dict):
            return value
        return unpack_compact(value)

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            value = pack_compact(value)
        return super().get_prep_value(value)

    def value_to_string(self, obj: models.Model) -> str:
        value = self.value_from_object(obj)
        return "" if value is None else json.dumps(value)


class JudgeMode(models.TextChoices):
    """How a judge verifies an answer's claims (monitoring.judging.domain.judging.MODES)."""

    PER_CLAIM = "per-claim", _("je Aussage")
    BATCHED = "batched", _("gebündelt")


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
        validators=[_validate_finite, MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("Inhaltstragende Token unter dieser Wahrscheinlichkeit markieren die Antwort."),
    )
    action_threshold = models.FloatField(
        _("Handlungsschwelle"),
        default=0.85,
        validators=[_validate_finite, MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text=_("Treue unter diesem Wert ist ein Handlungssignal."),
    )
    judge_mode = models.CharField(
        _("Prüfmodus"), max_length=12, choices=JudgeMode.choices, default=JudgeMode.PER_CLAIM,
        help_text=_(
            "Je Aussage: ein Aufruf des Prüfmodells für jede Aussage, mit dem Prüf-Prompt des "
            "Artikels. Gebündelt: alle Aussagen einer Antwort in einem Aufruf, mit Beleg und "
            "Begründung je Aussage; etwa ein Drittel der Prompt-Token."
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
    """One change of a use case's tuning (flag threshold, sample rate, action threshold): who,
    when, old and new value. The pages mark the week of a change; the estimates before and
    after it rest on different settings."""

    class Field(models.TextChoices):
        LOGPROB_THRESHOLD = "logprob_threshold", _("Wahrscheinlichkeits-Schwelle")
        SAMPLE_RATE = "sample_rate", _("Stichprobenrate")
        ACTION_THRESHOLD = "action_threshold", _("Handlungsschwelle")

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

    use_case = models.ForeignKey(
        UseCase, on_delete=models.PROTECT, related_name="answers",
        verbose_name=_("Anwendungsfall"),
    )
    service = models.ForeignKey(
        Service, on_delete=models.PROTECT, related_name="answers", verbose_name=_("Dienst")
    )
    external_id = models.CharField(_("externe ID"), max_length=200)
    content_hash = models.CharField(_("Inhalts-Hash"), max_length=64)
    question = models.TextField(_("Frage"))
    text = models.TextField(_("Antwort"))
    model = models.CharField(_("Generator-Modell"), max_length=200)
    messages = models.JSONField(_("Nachrichten"), null=True, blank=True)
    metadata = models.JSONField(_("Metadaten"), default=dict, blank=True)
    created_at = models.DateTimeField(_("Zeitpunkt"), default=timezone.now)
    received_at = models.DateTimeField(_("empfangen"), auto_now_add=True)

    # Tier 1: log-probabilities.
    logprobs_status = models.CharField(
        _("Log-Wahrscheinlichkeiten"), max_length=12, choices=LogprobsStatus.choices
    )
    token_data = CompactTokensField(_("Token-Daten"), null=True, blank=True)
    logprob_threshold = models.FloatField(_("Wahrscheinlichkeits-Schwelle"))
    flagged = models.BooleanField(_("markiert"), default=False)
    uncertain_tokens = models.JSONField(_("unsichere Token"), default=list, blank=True)

    # Sampling for tier 2. in_random_sample is the hash draw, independent of the flag, so the
    # flagged answers that the random draw also hit can be compared with unflagged ones.
    in_random_sample = models.BooleanField(_("in der Zufallsstichprobe"), default=False)
    sampled = models.BooleanField(_("in der Stichprobe"), default=False)
    sample_reason = models.CharField(
        _("Grund der Stichprobe"), max_length=12, choices=SampleReason.choices
    )
    inclusion_probability = models.FloatField(_("Auswahlwahrscheinlichkeit"))
    status = models.CharField(_("Status"), max_length=12, choices=Status.choices)

    # Tier 2: the current judge run and its result, copied here for lists and dashboards.
    current_run = models.ForeignKey(
        "JudgeRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        verbose_name=_("aktueller Prüflauf"),
    )
    score = models.FloatField(_("Treue"), null=True, blank=True)
    abstention = models.BooleanField(_("Enthaltung"), default=False)

    # Retrieval figures the dashboards group by, kept here so they need no join over chunks.
    chunk_count = models.PositiveIntegerField(_("Zahl der Abschnitte"), default=0)
    best_chunk_score = models.FloatField(_("beste Ähnlichkeit"), null=True, blank=True)
    # Dashboard figures computed at ingest: the lowest probability of a content-bearing token
    # (the answer is flagged at threshold t iff it is below t), so the threshold tuner needs no
    # token data; and whether the question asks several things at once (a cause of invention).
    min_content_probability = models.FloatField(
        _("niedrigste Wahrscheinlichkeit inhaltstragender Token"), null=True, blank=True
    )
    multi_part = models.BooleanField(_("mehrteilige Frage"), null=True, blank=True)
    # Set when retention removed the content (monitoring/services/retention.py); the figures stay.
    anonymised_at = models.DateTimeField(_("anonymisiert"), null=True, blank=True)

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
            # The dashboard's counts per week and per cause bucket: an index-only range scan
            # per use case (answer_flagged_time has `flagged` before the time, so a time range
            # reads all of a use case).
            models.Index(
                fields=[
                    "use_case", "created_at", "flagged", "best_chunk_score", "chunk_count",
                    "multi_part", "min_content_probability",
                ],
                name="answer_dash_week",
            ),
            # The dashboard's judged answers: every figure it reads is in the key, so PostgreSQL
            # answers from the index alone; partial, because about a sixth of answers is judged.
            models.Index(
                fields=[
                    "use_case", "created_at", "flagged", "score", "abstention",
                    "in_random_sample", "best_chunk_score", "chunk_count", "multi_part",
                    "min_content_probability", "current_run",
                ],
                name="answer_dash_judged",
                condition=models.Q(status="judged"),
            ),
            # The oldest answer waiting for the judge (/health, /metrics): MIN(received_at) is
            # one probe here, where answer_awaiting_judge would read every waiting row. Partial:
            # it holds only the backlog.
            models.Index(
                fields=["received_at"], name="answer_unscored_received",
                condition=models.Q(status__in=["queued", "judging"]),
            ),
            # Retention's candidates: the old answers not yet anonymised. Partial, so the daily
            # run does not walk past the million it anonymised before.
            models.Index(
                fields=["use_case", "created_at"], name="answer_retention_due",
                condition=models.Q(anonymised_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.service_id}/{self.external_id}"


class Chunk(models.Model):
    """A retrieved chunk, in the rank order the RAG service used."""

    answer = models.ForeignKey(
        Answer, on_delete=models.CASCADE, related_name="chunks", verbose_name=_("Antwort")
    )
    rank = models.PositiveIntegerField(_("Rang"))
    text = models.TextField(_("Text"))
    score = models.FloatField(_("Ähnlichkeit"), null=True, blank=True)
    source_chunk_id = models.CharField(_("Abschnitts-ID"), max_length=200, blank=True)
    source = models.CharField(_("Quelle"), max_length=500, blank=True)

    class Meta:
        ordering = ["answer", "rank"]
        verbose_name = _("Abschnitt")
        verbose_name_plural = _("Abschnitte")
        constraints = [
            models.UniqueConstraint(fields=["answer", "rank"], name="chunk_unique_rank"),
        ]

    def __str__(self) -> str:
        return f"{self.answer_id}#{self.rank}"


class JudgeUsage(models.Model):
    """What a judge job's calls cost: every attempt's calls and tokens, priced by its model
    (monitoring.judging.services.runs.usage_fields). A judge run's, and a shadow run's."""

    calls = models.PositiveIntegerField(_("Aufrufe"), default=0)
    prompt_tokens = models.PositiveIntegerField(_("Prompt-Token"), default=0)
    completion_tokens = models.PositiveIntegerField(_("Antwort-Token"), default=0)
    # Of the prompt tokens, those the provider served from its prefix cache.
    cached_tokens = models.PositiveIntegerField(_("davon aus dem Cache"), default=0)
    cost = models.DecimalField(
        _("Kosten"), max_digits=12, decimal_places=6, null=True, blank=True
    )

    class Meta:
        abstract = True


class JudgeRun(LeasedJob, JudgeUsage):
    """One judgement of one answer by one judge model and prompt version.

    A rescore adds a run; earlier runs stay. The answer points at its current run. The worker
    claims a run with a conditional UPDATE that sets a fresh lease token; only the holder of the
    token can finish the run, so a duplicate delivery or a worker that outlived its lease cannot
    write a second result.
    """

    class Status(models.TextChoices):
        PENDING = "pending", _("wartet")
        RUNNING = "running", _("läuft")
        SUCCEEDED = "succeeded", _("fertig")
        FAILED = "failed", _("fehlgeschlagen")

    class Trigger(models.TextChoices):
        SAMPLE = "sample", _("Stichprobe")
        RESCORE = "rescore", _("Neubewertung")

    answer = models.ForeignKey(
        Answer, on_delete=models.CASCADE, related_name="judge_runs", verbose_name=_("Antwort")
    )
    status = models.CharField(
        _("Status"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    trigger = models.CharField(
        _("Anlass"), max_length=10, choices=Trigger.choices, default=Trigger.SAMPLE
    )
    judge_model = models.CharField(_("Prüfmodell"), max_length=200, blank=True)
    prompt_version = models.CharField(_("Prompt-Version"), max_length=50)
    # How the claims were verified: one call per claim (the article's prompt), or all claims of
    # the answer in one call (monitoring.judging.domain.batched). Goes with the prompt version.
    judge_mode = models.CharField(
        _("Prüfmodus"), max_length=12, choices=JudgeMode.choices, default=JudgeMode.PER_CLAIM
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+", verbose_name=_("angefordert von"),
    )
    # The lease fields (created_at, finished_at, lease_token, lease_expires_at, attempts,
    # not_before, error) are jobs.models.LeasedJob's; started_at is set at every claim.
    started_at = models.DateTimeField(_("gestartet"), null=True, blank=True)

    decomposition_raw = models.TextField(_("Zerlegung (Rohantwort)"), blank=True)
    # Every call of the run, retries included: purpose, claim position, attempt, raw reply,
    # model, tokens, latency. What a verdict was read from must stay inspectable.
    call_log = models.JSONField(_("Protokoll der Aufrufe"), default=list, blank=True)
    score = models.FloatField(_("Treue"), null=True, blank=True)
    abstention = models.BooleanField(_("Enthaltung"), default=False)
    unparseable = models.PositiveIntegerField(_("unlesbare Urteile"), default=0)
    retryable = models.BooleanField(
        _("wiederholbar"), default=False,
        help_text=_("der letzte Fehler war vorübergehend (Zeitüberschreitung, 429, 5xx)"),
    )
    # Not stored: what the answer page's selector (monitoring.judging.selectors.answer_judging)
    # adds to each run it shows.
    duration: timedelta | None
    same_model: bool
    currency: str

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("Prüflauf")
        verbose_name_plural = _("Prüfläufe")
        indexes = [
            models.Index(fields=["status", "created_at"], name="judgerun_status_time"),
            models.Index(fields=["answer", "-created_at"], name="judgerun_answer"),
            # The dashboard's calls and cost per week of the judged answers: index-only per
            # answer (otherwise PostgreSQL reads the whole table, call logs and all).
            models.Index(
                fields=["answer", "status", "calls", "cost", "judge_model", "prompt_version"],
                name="judgerun_dash_usage",
            ),
        ]

    def __str__(self) -> str:
        return gettext("Prüflauf %(run)s der Antwort %(answer)s") % {
            "run": self.pk, "answer": self.answer_id}

    @property
    def reason_display(self) -> str:
        """Why the run exists, in words: for a run of the sample, how its answer got there
        (flagged by tier 1 or drawn at random), which "sample" alone reads as the latter."""
        if self.trigger == self.Trigger.SAMPLE:
            if self.answer.sample_reason == Answer.SampleReason.FLAGGED:
                return str(_("markiert (Stufe 1)"))
            if self.answer.sample_reason == Answer.SampleReason.RANDOM:
                return self.answer.get_sample_reason_display()
        return self.get_trigger_display()


class Claim(models.Model):
    """A claim (Aussage) of an answer, as one judge run decomposed it, with its verdict."""

    class Label(models.TextChoices):
        GEDECKT = "GEDECKT", "GEDECKT"
        TEILWEISE = "TEILWEISE", "TEILWEISE"
        UNGEDECKT = "UNGEDECKT", "UNGEDECKT"
        UNPARSEABLE = "UNPARSEABLE", _("unlesbar")

    run = models.ForeignKey(
        JudgeRun, on_delete=models.CASCADE, related_name="claims", verbose_name=_("Prüflauf")
    )
    position = models.PositiveIntegerField(_("Position"))
    text = models.TextField(_("Text"))
    label = models.CharField(_("Urteil"), max_length=12, choices=Label.choices)
    raw_reply = models.TextField(_("Antwort des Prüfers"), blank=True)
    judge_model = models.CharField(_("Prüfmodell"), max_length=200)
    prompt_version = models.CharField(_("Prompt-Version"), max_length=50)
    # The judge's evidence, where it gave one (batched mode): the ranks of the chunks the verdict
    # rests on and a sentence why.
    evidence_chunks = models.JSONField(_("Belegabschnitte"), default=list, blank=True)
    reason = models.TextField(_("Begründung"), blank=True)
    attempts = models.PositiveSmallIntegerField(_("Versuche"), default=1)
    cached = models.BooleanField(_("Urteil wiederverwendet"), default=False)
    latency_ms = models.PositiveIntegerField(_("Dauer (ms)"), default=0)
    prompt_tokens = models.PositiveIntegerField(_("Prompt-Token"), default=0)
    completion_tokens = models.PositiveIntegerField(_("Antwort-Token"), default=0)

    class Meta:
        ordering = ["run", "position"]
        verbose_name = _("Aussage")
        verbose_name_plural = _("Aussagen")
        constraints = [
            models.UniqueConstraint(fields=["run", "position"], name="claim_unique_position"),
        ]
        # The dashboard's claim-level share reads only the labels of a run: index-only.
        indexes = [models.Index(fields=["run", "label"], name="claim_run_label")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.position}"


class JudgePrice(models.Model):
    """Price of a judge model per 1,000 tokens, for the cost figures."""

    judge_model = models.CharField(_("Prüfmodell"), max_length=200, unique=True)
    prompt_per_1k = models.DecimalField(
        _("Preis je 1.000 Prompt-Token"), max_digits=10, decimal_places=6, default=0
    )
    completion_per_1k = models.DecimalField(
        _("Preis je 1.000 Antwort-Token"), max_digits=10, decimal_places=6, default=0
    )
    cached_prompt_per_1k = models.DecimalField(
        _("Preis je 1.000 Prompt-Token aus dem Cache"), max_digits=10, decimal_places=6,
        null=True, blank=True,
        help_text=_("Leer: wie die übrigen Prompt-Token."),
    )
    currency = models.CharField(_("Währung"), max_length=3, default="EUR")

    class Meta:
        verbose_name = _("Preis eines Prüfmodells")
        verbose_name_plural = _("Preise der Prüfmodelle")

    def __str__(self) -> str:
        return self.judge_model

    def cost(
        self, *, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
    ) -> Decimal:
        """What these tokens cost at this price (cost.token_cost)."""
        return token_cost(
            prompt_tokens=Decimal(prompt_tokens), completion_tokens=Decimal(completion_tokens),
            cached_tokens=Decimal(cached_tokens), prompt_per_1k=self.prompt_per_1k,
            completion_per_1k=self.completion_per_1k, cached_per_1k=self.cached_prompt_per_1k,
        )


class JudgeProgress(models.Model):
    """What a judge run has received so far: its decomposition and each verdict, stored as it
    arrives, so that a run retried after a transient failure, taken over from a worker that
    died, or retried from the page asks the judge only for what is missing. The finished run's
    claims replace it."""

    DECOMPOSITION = "decomposition"

    run = models.ForeignKey(
        JudgeRun, on_delete=models.CASCADE, related_name="progress", verbose_name=_("Prüflauf")
    )
    # DECOMPOSITION, or a verdict's key: sha256 of (language, claim, context digest).
    key = models.CharField(_("Schlüssel"), max_length=64)
    language = models.CharField(_("Sprache"), max_length=8, blank=True)
    claim = models.TextField(_("Aussage"), blank=True)
    context_digest = models.CharField(_("Kontext (SHA-256)"), max_length=64, blank=True)
    label = models.CharField(_("Urteil"), max_length=12, blank=True)
    raw_reply = models.TextField(_("Antwort des Prüfers"), blank=True)
    judge_model = models.CharField(_("Prüfmodell"), max_length=200, blank=True)
    evidence_chunks = models.JSONField(_("Belegabschnitte"), default=list, blank=True)
    reason = models.TextField(_("Begründung"), blank=True)
    created_at = models.DateTimeField(_("erhalten"), auto_now_add=True)

    class Meta:
        verbose_name = _("Zwischenstand eines Prüflaufs")
        verbose_name_plural = _("Zwischenstände der Prüfläufe")
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="judgeprogress_unique_key"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}:{self.key[:12]}"


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
