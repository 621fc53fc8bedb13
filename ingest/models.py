"""What ingest refused, counted for /metrics: the answers of the ingest API refused one by one
(409, 403, 400 of an answer or a batch item) and the spans the OTLP receiver refused one by one
(a bad id, a use case the key may not send to, a late span). Both come back to the sender as
an error it may not look at (a batch item's status, OTLP's `partial_success`, which SDKs drop),
so operations count them; the rows are monotonic counters, never reset."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class RefusalCount(models.Model):
    """How many answers or spans of a service were refused for a reason, ever."""

    class Kind(models.TextChoices):
        ANSWER = "answer", _("Antwort")
        OTLP_SPAN = "otlp_span", _("OpenTelemetry-Span")

    service = models.ForeignKey(
        "monitoring.Service", on_delete=models.CASCADE, related_name="+",
        verbose_name=_("Dienst"),
    )
    kind = models.CharField(_("Art"), max_length=20, choices=Kind.choices)
    # A short code from a fixed set (ingest.services.ANSWER_REFUSALS, traces' SPAN_REFUSALS):
    # a Prometheus label, so never the sender's text.
    reason = models.CharField(_("Grund"), max_length=30)
    count = models.PositiveBigIntegerField(_("Anzahl"), default=0)

    class Meta:
        verbose_name = _("Abgewiesener Eingang")
        verbose_name_plural = _("Abgewiesene Eingänge")
        constraints = [
            models.UniqueConstraint(
                fields=["service", "kind", "reason"], name="ingest_refusal_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.reason}: {self.count}"
