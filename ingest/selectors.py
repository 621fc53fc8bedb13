"""Reads of ingest's own tables: the refusal counters, for /metrics."""

from collections.abc import Sequence

from ingest.models import RefusalCount
from monitoring.models import Service


def refusal_counts(
    *, kind: RefusalCount.Kind, reasons: Sequence[str]
) -> list[tuple[str, str, int]]:
    """(service name, reason, refused ever) of one kind: every reason of every active service,
    0 where none was refused (so that a rate over the counter sees its first refusal, which a
    series that only appears with it would hide), and any other service that has counts."""
    counted = {
        (name, reason): count
        for name, reason, count in RefusalCount.objects.filter(kind=kind)
        .values_list("service__name", "reason", "count")
    }
    for name in Service.objects.filter(active=True).values_list("name", flat=True):
        for reason in reasons:
            counted.setdefault((name, reason), 0)
    return [(name, reason, count) for (name, reason), count in sorted(counted.items())]
