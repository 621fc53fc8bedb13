"""The judge tier's rows: judge runs with their usage, their claims and the progress of a run
under way, and the price of each judge model."""

from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs.models import LeasedJob
from monitoring.domain.prices import token_cost
from monitoring.models.answers import Answer
from monitoring.models.rollups import ON_DEMAND_TRIGGER
from monitoring.models.use_cases import JudgeMode


class VerifyPath(models.TextChoices):
    """How a run's verdicts came back (judging.domain.judgement.PATHS)."""

    PER_CLAIM = "per-claim", _("je Aussage")
    BATCHED = "batched", _("gebündelt")
    CORRECTED = "corrected", _("gebündelt nach Korrektur")
    FALLBACK = "fallback", _("einzeln nachgefragt")
    SINGLE = "single", _("ein Aufruf")


class JudgeUsage(models.Model):
    """What a judge job's calls cost: every attempt's calls and tokens, priced by its model
    (judging.services.runs.usage_fields). A judge run's, and a shadow run's."""

    calls = models.PositiveIntegerField(_("Aufrufe"), default=0)
    prompt_tokens = models.PositiveIntegerField(_("Prompt-Token"), default=0)
    completion_tokens = models.PositiveIntegerField(_("Antwort-Token"), default=0)
    # Of the prompt tokens, those the provider served from its prefix cache.
    cached_tokens = models.PositiveIntegerField(_("davon aus dem Cache"), default=0)
    # Of the calls, those whose token figures the endpoint misreported (below 0, above 10^7):
    # counted, their tokens unknown and so not in the tokens or the cost.
    usage_unknown_calls = models.PositiveIntegerField(
        _("Aufrufe ohne glaubhafte Token-Angabe"), default=0
    )
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
        # A lead asked for a verdict on an answer outside the sample (judging/services/
        # on_demand.py). Its result stays on the run: the answer keeps its status and no score,
        # so no estimate, rollup or review draw, which all read the answer, can count it.
        ON_DEMAND = ON_DEMAND_TRIGGER, _("auf Anforderung")

    answer = models.ForeignKey(
        Answer, on_delete=models.CASCADE, related_name="judge_runs", verbose_name=_("Antwort"),
        db_constraint=False,  # answers are partitioned (see Chunk)
    )
    # The answer's use case, kept on the run: the judge page reads a use case's runs without
    # joining the (partitioned) answers.
    use_case = models.ForeignKey(
        "monitoring.UseCase", on_delete=models.CASCADE, related_name="+",
        verbose_name=_("Anwendungsfall"), db_index=False,  # judgerun_use_case_time leads with it
    )
    # The answer's month: with it PostgreSQL looks for the answer in one partition, not all.
    answer_created_at = models.DateTimeField(_("Antwort erstellt"))
    status = models.CharField(
        _("Status"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    trigger = models.CharField(
        _("Anlass"), max_length=10, choices=Trigger.choices, default=Trigger.SAMPLE
    )
    judge_model = models.CharField(_("Prüfmodell"), max_length=200, blank=True)
    prompt_version = models.CharField(_("Prompt-Version"), max_length=50)
    # How the claims were verified: one call per claim (the article's prompt), or all claims of
    # the answer in one call (judging.domain.batched). Goes with the prompt version.
    judge_mode = models.CharField(
        _("Prüfmodus"), max_length=12, choices=JudgeMode.choices, default=JudgeMode.PER_CLAIM
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+", verbose_name=_("angefordert von"),
    )
    # The way the claims' verdicts came (judging.domain.judgement.PATHS): read from
    # the batched reply, after one correction in the same conversation, or some asked again one
    # by one; empty for runs before it was recorded and for runs without claims to verify.
    verify_path = models.CharField(
        _("Weg der Urteile"), max_length=12, choices=VerifyPath.choices, blank=True, default=""
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
    # Not stored: what the answer page's selector (judging.selectors.runs.answer_judging)
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
            # The judge page: a use case's latest runs, and its runs finished in a window.
            models.Index(fields=["use_case", "-created_at"], name="judgerun_use_case_time"),
            models.Index(
                fields=["use_case", "finished_at"], name="judgerun_use_case_finished",
                condition=models.Q(finished_at__isnull=False),
            ),
            models.Index(fields=["use_case"], name="judgerun_use_case_failed",
                         condition=models.Q(status="failed")),
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


class JudgeEndpoint(models.Model):
    """What Treue found out about a judge endpoint and model: whether it answers a request with
    a JSON schema (`response_format`) in that schema. Asked once, on the first batched call,
    and remembered, so that no run pays the question again."""

    endpoint = models.CharField(_("Endpunkt"), max_length=500)
    model = models.CharField(_("Prüfmodell"), max_length=200)
    structured_output = models.BooleanField(_("strukturierte Ausgabe"))
    detail = models.CharField(_("Befund"), max_length=500, blank=True)
    checked_at = models.DateTimeField(_("geprüft"), auto_now=True)

    class Meta:
        verbose_name = _("Prüfmodell-Endpunkt")
        verbose_name_plural = _("Prüfmodell-Endpunkte")
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "model"], name="judgeendpoint_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.model} @ {self.endpoint}"
