"""Alarm channels through the real path: an alarm raised and committed in this process, its
deliveries published on commit to the broker, posted by a real `celery worker` to a local
receiver over HTTP, retried with backoff, each attempt logged; a receiver that is down costs
the alarm nothing (it stays raised and mailed). The workers are told 3 attempts and a backoff
of at most 1 s (tests/integration/conftest.py, WORKER_SETTINGS)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.db import transaction

from alarms import services
from alarms.domain import channels as domain
from alarms.models import Alarm, AlarmDelivery, DeliveryAttempt
from monitoring.services.use_cases import use_case_create
from tests.integration.conftest import Worker, wait_for
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def world(receiver: WebhookReceiver) -> Any:
    receiver.reset()
    use_case = use_case_create(slug="kundenservice", name="Kundenservice", language="de")
    lead = User.objects.create_user("lead", "lead@example.com", "pw")
    use_case.team_leads.add(lead)
    staff = User.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)
    return use_case, staff


def raise_alarm(use_case: Any, key: str) -> Alarm:
    """As a check raises it: in its transaction; mail and deliveries follow the commit."""
    with transaction.atomic():
        alarm = services.alarm_raise(
            use_case=use_case, kind=Alarm.Kind.ACTION, key=key,
            text=[("Treue %(value)s unter der Handlungsschwelle.", {"value": "0,78"})],
            details={"week": key, "estimate": 0.78},
        )
    assert alarm is not None
    return alarm


def finished(delivery_id: int) -> AlarmDelivery | None:
    delivery = AlarmDelivery.objects.get(pk=delivery_id)
    return delivery if delivery.status in ("sent", "failed") else None


def test_500_then_200_is_retried_and_both_attempts_are_logged(
    on_shared_worker: Worker, receiver: WebhookReceiver, world: Any
) -> None:
    use_case, staff = world
    created = services.alarm_channel_create(
        use_case=use_case, kind="webhook", name="Ops", url=receiver.url("/ops"), user=staff
    )
    receiver.fail_next(500)
    alarm = raise_alarm(use_case, "2026-W40")
    delivery_id = AlarmDelivery.objects.get(alarm=alarm).pk

    delivery = wait_for("the delivery to end", lambda: finished(delivery_id),
                        workers=(on_shared_worker,))

    assert (delivery.status, delivery.http_status, delivery.attempts) == ("sent", 200, 2)
    first, second = receiver.received()
    assert first.body == second.body
    # Backoff: the retry came after a pause (0.5-1 s with the workers' 1 s cap).
    assert second.at - first.at >= 0.45
    for request in (first, second):
        assert domain.signature_valid(
            created.secret, request.headers["x-treue-timestamp"], request.body,
            request.headers["x-treue-signature"], now=time.time(),
        )
    assert request.json()["alarm"]["id"] == alarm.pk
    log = list(DeliveryAttempt.objects.filter(delivery_id=delivery_id).order_by("number"))
    assert [(a.number, a.ok, a.http_status) for a in log] == [(1, False, 500), (2, True, 200)]
    assert log[0].error.startswith("HTTP 500")
    assert log[0].finished_at is not None and log[1].started_at >= log[0].finished_at


def test_a_receiver_that_is_down_costs_the_alarm_nothing(
    on_shared_worker: Worker, receiver: WebhookReceiver, world: Any
) -> None:
    use_case, staff = world
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    services.alarm_channel_create(
        use_case=use_case, kind="slack", name="Weg", url=f"http://127.0.0.1:{port}/hook",
        user=staff,
    )
    services.alarm_channel_create(
        use_case=use_case, kind="teams", name="Teams", url=receiver.url("/teams"), user=staff
    )
    mail.outbox.clear()
    alarm = raise_alarm(use_case, "2026-W41")

    # The alarm is raised and mailed at once, whatever the channels do.
    alarm.refresh_from_db()
    assert alarm.cleared_at is None and alarm.mailed_at is not None
    assert [m.to for m in mail.outbox] == [["lead@example.com"]]

    down = AlarmDelivery.objects.get(alarm=alarm, channel__name="Weg").pk
    up = AlarmDelivery.objects.get(alarm=alarm, channel__name="Teams").pk
    failed = wait_for("the delivery to give up", lambda: finished(down),
                      workers=(on_shared_worker,))
    assert failed.status == "failed" and failed.attempts == 3
    assert failed.error.startswith("gave up after 3 attempts")
    log = list(DeliveryAttempt.objects.filter(delivery_id=down).order_by("number"))
    assert [(a.number, a.ok, a.http_status) for a in log] == [
        (1, False, None), (2, False, None), (3, False, None)]
    assert all("ConnectError" in a.error for a in log)
    # The other channel got it; the alarm is still open and was mailed once.
    assert wait_for("the other channel", lambda: finished(up)).status == "sent"
    assert receiver.received()[0].json()["type"] == "message"
    assert Alarm.objects.filter(pk=alarm.pk, cleared_at__isnull=True).exists()
    assert len(mail.outbox) == 1
