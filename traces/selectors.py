"""Reads of the trace receiver: what traces came to, and what waits, for /metrics."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Min

from traces.models import OtlpOutcomeCount, OtlpTrace


@dataclass(frozen=True)
class Pending:
    traces: int
    oldest_since: datetime | None  # when the oldest pending trace's first span arrived


def otlp_outcome_counts() -> list[tuple[str, str, int]]:
    """(service name, outcome, traces ever) per service and outcome."""
    return list(
        OtlpOutcomeCount.objects.order_by("service__name", "outcome")
        .values_list("service__name", "outcome", "count")
    )


def otlp_pending() -> Pending:
    """The traces waiting to be assembled (pending, or claimed and not finished)."""
    row = OtlpTrace.objects.filter(
        status__in=[OtlpTrace.Status.PENDING, OtlpTrace.Status.RUNNING]
    ).aggregate(traces=Count("pk"), oldest=Min("created_at"))
    return Pending(traces=row["traces"], oldest_since=row["oldest"])
