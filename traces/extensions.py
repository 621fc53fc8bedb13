"""What the trace receiver contributes to monitoring's work (monitoring/extensions.py): its
figures on /metrics. Registered by TracesConfig.ready()."""

from collections.abc import Iterator

from django.utils import timezone
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from ingest import selectors as ingest_selectors
from ingest.models import RefusalCount
from monitoring import extensions
from traces import selectors, services


def otlp_metrics() -> Iterator[Metric]:
    """treue_otlp_traces_total{service, outcome}: every trace ever received, by what it came to
    (`not_rag` are the traces dropped as no RAG answer); the traces waiting to be assembled and
    the age of the oldest (a stopped beat or worker shows here); the spans refused one by one,
    by reason."""
    counts = selectors.otlp_outcome_counts()
    pending = selectors.otlp_pending()
    total = CounterMetricFamily(
        "treue_otlp_traces", "OpenTelemetry traces received, by what they came to",
        labels=["service", "outcome"],
    )
    for service, outcome, count in counts:
        total.add_metric([service, outcome], count)
    yield total
    waiting = GaugeMetricFamily("treue_otlp_traces_pending",
                                "OpenTelemetry traces waiting to be assembled")
    waiting.add_metric([], pending.traces)
    yield waiting
    oldest = GaugeMetricFamily(
        "treue_otlp_oldest_pending_seconds",
        "Seconds since the first span of the oldest trace waiting to be assembled arrived",
    )
    age = (timezone.now() - pending.oldest_since).total_seconds() if pending.oldest_since else 0
    oldest.add_metric([], age)
    yield oldest
    refused = CounterMetricFamily(
        "treue_otlp_spans_refused",
        "OpenTelemetry spans refused one by one (the exporter gets a partial success, which "
        "SDKs report as a success), by reason: invalid_span, use_case_not_allowed, "
        "trace_too_large, late",
        labels=["service", "reason"],
    )
    for service, reason, count in ingest_selectors.refusal_counts(
        kind=RefusalCount.Kind.OTLP_SPAN, reasons=services.SPAN_REFUSALS
    ):
        refused.add_metric([service, reason], count)
    yield refused


def register() -> None:
    extensions.metrics_part_register(name="traces", part=lambda: list(otlp_metrics()))
