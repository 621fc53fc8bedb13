"""The answers themselves, their compact token copy and their retrieved chunks."""

import json
from typing import Any

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from monitoring.domain.compact import pack_compact, unpack_compact
from monitoring.models.use_cases import Service, UseCase


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
    # Segments (issue 40): the RAG prompt's version as sent (or the completion's
    # system_fingerprint), and the source of the best-ranked chunk, kept here so that a
    # breakdown needs no join over chunks.
    prompt_version = models.CharField(_("Prompt-Version"), max_length=100, blank=True,
                                      default="")
    source = models.CharField(_("Quelle des ersten Abschnitts"), max_length=500, blank=True,
                              default="")
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
        # (service, external_id) is unique through AnswerKey: PostgreSQL partitions answers by
        # month (monitoring/services/partitions.py), and a partitioned table has no unique
        # index without the month in it.
        indexes = [
            models.Index(fields=["service", "external_id"], name="answer_external_id"),
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


class AnswerKey(models.Model):
    """The one answer a service stored under an external id: what makes ingest idempotent, a
    small table of its own because answers are partitioned by month on PostgreSQL. Written in
    the transaction that stores the answer; a unique violation here is a replay (or a race)."""

    service = models.ForeignKey(Service, on_delete=models.PROTECT, related_name="+")
    external_id = models.CharField(max_length=200)
    answer = models.ForeignKey(Answer, on_delete=models.CASCADE, related_name="+",
                               db_constraint=False)  # answers are partitioned (see Chunk)
    # The answer's month: retention deletes a dropped month's keys by it (a scan, once a month;
    # an index would cost every ingest).
    answer_created_at = models.DateTimeField()

    class Meta:
        verbose_name = _("Antwortschlüssel")
        verbose_name_plural = _("Antwortschlüssel")
        constraints = [
            models.UniqueConstraint(fields=["service", "external_id"],
                                    name="answerkey_unique_external_id"),
        ]

    def __str__(self) -> str:
        return f"{self.service_id}/{self.external_id}"


# Tables that point at answers do so without a database constraint: a foreign key into a
# partitioned table must name its partition key too. Django keeps the relation (joins, the
# cascade on delete), and answers are never deleted but by retention, which removes what
# points at them first.
class Chunk(models.Model):
    """A retrieved chunk, in the rank order the RAG service used."""

    answer = models.ForeignKey(
        Answer, on_delete=models.CASCADE, related_name="chunks", verbose_name=_("Antwort"),
        db_constraint=False,
    )
    # The answer's created_at: chunks are partitioned by the answer's month along with it.
    answer_created_at = models.DateTimeField(_("Zeitpunkt der Antwort"))
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
            models.UniqueConstraint(fields=["answer", "answer_created_at", "rank"],
                                    name="chunk_unique_rank"),
        ]

    def __str__(self) -> str:
        return f"{self.answer_id}#{self.rank}"
