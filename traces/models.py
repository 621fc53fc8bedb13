"""Spans held until their trace is assembled, the trace as a leased job, and the counts of what
traces came to (for /metrics: trace rows are purged, the counts are not)."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from jobs.models import LeasedJob
from traces.domain.assembly import Outcome


class OtlpTrace(LeasedJob):
    """One trace of one service: pending while its spans arrive, assembled into an answer once
    its root span has arrived and TREUE_OTLP_QUIET_SECONDS have passed since its last span
    (`not_before`), or TREUE_OTLP_ORPHAN_SECONDS without a root. Holds no content itself."""

    class Status(models.TextChoices):
        PENDING = "pending", _("wartet")
        RUNNING = "running", _("läuft")
        DONE = "done", _("zusammengesetzt")
        FAILED = "failed", _("fehlgeschlagen")

    class Result(models.TextChoices):
        CREATED = Outcome.CREATED.value, _("Antwort angelegt")
        EXISTING = Outcome.EXISTING.value, _("Antwort schon vorhanden")
        CONFLICT = Outcome.CONFLICT.value, _("andere Antwort unter dieser ID")
        NOT_ALLOWED = Outcome.NOT_ALLOWED.value, _("Anwendungsfall nicht erlaubt")
        INVALID = Outcome.INVALID.value, _("ungültige Antwort")
        NOT_RAG = Outcome.NOT_RAG.value, _("keine RAG-Antwort")
        NO_QUESTION = Outcome.NO_QUESTION.value, _("keine Frage")
        NO_ANSWER = Outcome.NO_ANSWER.value, _("keine Antwort")
        NO_CHUNK_TEXT = Outcome.NO_CHUNK_TEXT.value, _("Dokumente ohne Text")
        USE_CASE_MISSING = Outcome.USE_CASE_MISSING.value, _("kein Anwendungsfall")

    status = models.CharField(
        _("Status"), max_length=10, choices=Status.choices, default=Status.PENDING
    )
    service = models.ForeignKey(
        "monitoring.Service", on_delete=models.CASCADE, related_name="+",
        verbose_name=_("Dienst"),
    )
    # 32 lowercase hex digits: the answer's external_id.
    trace_id = models.CharField(_("Trace-ID"), max_length=32)
    last_span_at = models.DateTimeField(_("letzter Span"))
    root_seen_at = models.DateTimeField(_("Wurzel-Span erhalten"), null=True, blank=True)
    span_count = models.PositiveIntegerField(_("Spans"), default=0)
    # The use case a span of the trace names (`treue.use_case`), empty while none does: the
    # sweep takes turns between (service, use case), so that a backlog waits behind itself.
    use_case = models.CharField(_("Anwendungsfall"), max_length=64, blank=True)
    outcome = models.CharField(
        _("Ergebnis"), max_length=20, choices=Result.choices, blank=True
    )
    detail = models.TextField(_("Einzelheiten"), blank=True)
    # The answer's id, not a relation: retention may drop the answer's month while this row is
    # kept, and the row must not hold monitoring's answers in place (monitoring.extensions'
    # retention_keeps) for a number shown in the admin.
    answer_pk = models.BigIntegerField(_("Antwort-ID"), null=True, blank=True)

    class Meta:
        verbose_name = _("Trace (OpenTelemetry)")
        verbose_name_plural = _("Traces (OpenTelemetry)")
        constraints = [
            models.UniqueConstraint(fields=["service", "trace_id"], name="otlp_trace_unique"),
        ]
        indexes = [models.Index(fields=["status", "not_before"], name="otlp_trace_due")]

    def __str__(self) -> str:
        return self.trace_id


class OtlpSpan(models.Model):
    """A span of a pending trace, as traces.domain.spans.SpanRecord.to_data() (prompts and
    documents included): deleted when its trace is assembled."""

    trace = models.ForeignKey(OtlpTrace, on_delete=models.CASCADE, related_name="spans")
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    data = models.JSONField()

    class Meta:
        constraints = [
            # An exporter's retry stores nothing twice.
            models.UniqueConstraint(fields=["trace", "span_id"], name="otlp_span_unique"),
        ]

    def __str__(self) -> str:
        return self.span_id


class OtlpOutcomeCount(models.Model):
    """How many traces of a service came to an outcome, ever (monotonic, for /metrics)."""

    service = models.ForeignKey(
        "monitoring.Service", on_delete=models.CASCADE, related_name="+",
        verbose_name=_("Dienst"),
    )
    outcome = models.CharField(_("Ergebnis"), max_length=20)
    count = models.PositiveBigIntegerField(_("Anzahl"), default=0)

    class Meta:
        verbose_name = _("OpenTelemetry-Ergebnis")
        verbose_name_plural = _("OpenTelemetry-Ergebnisse")
        constraints = [
            models.UniqueConstraint(fields=["service", "outcome"], name="otlp_count_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.outcome}: {self.count}"
