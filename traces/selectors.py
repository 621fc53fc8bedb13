"""Reads of the trace receiver: what traces came to, and what waits, for /metrics."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min

from monitoring.models import Service
from traces.models import OtlpOutcomeCount, OtlpTrace


@dataclass(frozen=True)
class Pending:
    traces: int
    oldest_since: datetime | None  # when the oldest pending trace's first span arrived


def otlp_outcome_counts() -> list[tuple[str, str, int]]:
    """(service name, outcome, traces ever) per service and outcome: every outcome of every
    active service, 0 where no trace came to it (a rate over the counter sees the first such
    trace, which a series that only appears with it would hide), and any other service that
    has counts."""
    counted = {
        (name, outcome): count
        for name, outcome, count in OtlpOutcomeCount.objects.values_list(
            "service__name", "outcome", "count"
        )
    }
    for name in Service.objects.filter(active=True).values_list("name", flat=True):
        for outcome in OtlpTrace.Result.values:
            counted.setdefault((name, outcome), 0)
    return [(name, outcome, count) for (name, outcome), count in sorted(counted.items())]


def otlp_pending() -> Pending:
    """The traces waiting to be assembled (pending, or claimed and not finished)."""
    row = OtlpTrace.objects.filter(
        status__in=[OtlpTrace.Status.PENDING, OtlpTrace.Status.RUNNING]
    ).aggregate(traces=Count("pk"), oldest=Min("created_at"))
    return Pending(traces=row["traces"], oldest_since=row["oldest"])
