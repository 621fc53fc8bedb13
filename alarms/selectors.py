"""Reads of the alarm channels' pages: a use case's channels with their last delivery, and a
channel's delivery log."""

from django.db.models import Count, Q, QuerySet

from alarms.models import AlarmChannel, DeliveryAttempt

# The channel page shows this many attempts, newest first.
LOG_ROWS = 50


def channels_for_use_case(*, use_case_id: int) -> QuerySet[AlarmChannel]:
    return (
        AlarmChannel.objects.filter(use_case_id=use_case_id)
        .annotate(
            n_sent=Count("deliveries", filter=Q(deliveries__status="sent")),
            n_failed=Count("deliveries", filter=Q(deliveries__status="failed")),
        )
        .order_by("name", "pk")
    )


def channel_get(*, use_case_id: int, pk: int) -> AlarmChannel | None:
    return AlarmChannel.objects.filter(use_case_id=use_case_id, pk=pk).first()


def channel_log(*, channel: AlarmChannel) -> list[DeliveryAttempt]:
    return list(
        DeliveryAttempt.objects.filter(channel=channel)
        .select_related("delivery__alarm")
        .order_by("-started_at", "-pk")[:LOG_ROWS]
    )
