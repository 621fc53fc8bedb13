"""Alarm channels (issue 41, point 14): the staff pages, the "Test senden" button and the
deliveries, against a local HTTP receiver over real HTTP (tests/support/webhook_receiver.py).

The deliveries through a real worker, with retries and a receiver that is down, are in
tests/integration/test_alarm_channels_worker.py; the payloads and the signature without Django
in tests/domain/test_alarm_channels.py."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from alarms import services
from alarms.domain import channels as domain
from alarms.models import Alarm, AlarmChannel, AlarmDelivery, DeliveryAttempt
from alarms.tasks import deliver_alarm
from monitoring.models import UseCase
from tests.support.webhook_receiver import WebhookReceiver

SLACK_PATH = "/services/T0AAA/B0BBB/sEcReTtOkEnXyZ9"


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _fresh(receiver: WebhookReceiver, settings: Any) -> None:
    receiver.reset()
    settings.TREUE_SITE_URL = "https://treue.example"
    settings.TREUE_ALARM_CHANNEL_TIMEOUT_SECONDS = 3.0


@pytest.fixture
def staff(db: None) -> User:
    return User.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)


@pytest.fixture
def staff_client(staff: User) -> Client:
    client = Client()
    client.force_login(staff)
    return client


@pytest.fixture
def lead(use_case: UseCase) -> User:
    user = User.objects.create_user("lead", "lead@example.com", "pw")
    use_case.team_leads.add(user)
    return user


def base(use_case: UseCase) -> str:
    return f"/use-cases/{use_case.slug}/alarm-channels/"


def create(client: Client, use_case: UseCase, kind: str, url: str, name: str = "Team") -> Any:
    return client.post(base(use_case), {"kind": kind, "name": name, "url": url, "active": "on"})


def shown_secret(response: Any) -> str:
    found = re.search(r'id="signing-secret">([^<]+)<', response.content.decode())
    assert found, "the new webhook's page shows no signing secret"
    return found.group(1)


# --- permissions ---------------------------------------------------------------------------


def test_anonymous_is_sent_to_the_login(client: Client, use_case: UseCase) -> None:
    response = client.get(base(use_case))
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_team_lead_who_is_not_staff_cannot_reach_the_channel_pages(
    client: Client, use_case: UseCase, lead: User, staff: User, receiver: WebhookReceiver
) -> None:
    channel = services.alarm_channel_create(
        use_case=use_case, kind="slack", name="Team", url=receiver.url(), user=staff
    ).channel
    client.force_login(lead)
    one = f"{base(use_case)}{channel.pk}/"
    assert client.get(base(use_case)).status_code == 403
    assert create(client, use_case, "slack", receiver.url()).status_code == 403
    assert client.get(one).status_code == 403
    assert client.post(one, {"name": "x", "active": "on"}).status_code == 403
    assert client.post(one + "test/").status_code == 403
    assert client.post(one + "delete/").status_code == 403
    assert AlarmChannel.objects.get().name == "Team"
    assert receiver.received() == []
    # Nor does the use case's page link there for them.
    assert "alarm-channels-link" not in client.get(f"/use-cases/{use_case.slug}/").content.decode()


def test_staff_reach_every_use_case_and_nothing_that_does_not_exist(
    staff_client: Client, use_case: UseCase, other_use_case: UseCase, staff: User,
    receiver: WebhookReceiver,
) -> None:
    assert staff_client.get(base(use_case)).status_code == 200
    assert staff_client.get(base(other_use_case)).status_code == 200
    assert staff_client.get("/use-cases/nope/alarm-channels/").status_code == 404
    channel = services.alarm_channel_create(
        use_case=use_case, kind="slack", name="Team", url=receiver.url(), user=staff
    ).channel
    # A channel is found only under its own use case.
    assert staff_client.get(f"{base(other_use_case)}{channel.pk}/").status_code == 404
    assert staff_client.post(f"{base(other_use_case)}{channel.pk}/delete/").status_code == 404
    page = staff_client.get(f"/use-cases/{use_case.slug}/").content.decode()
    assert f'href="{base(use_case)}" id="alarm-channels-link"' in page


# --- the address is a secret ---------------------------------------------------------------


@pytest.mark.parametrize(("url", "error"), [
    ("ftp://example.com/hook", "Nur http- und https-Adressen"),
    ("file:///etc/passwd", "Nur http- und https-Adressen"),
    ("javascript:alert(1)", "Nur http- und https-Adressen"),
    ("https:///hook", "keinen Server"),
    ("https://example.com:99999/", "keine gültige Adresse"),
])
def test_only_http_and_https_addresses(
    staff_client: Client, use_case: UseCase, url: str, error: str
) -> None:
    response = create(staff_client, use_case, "slack", url)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert 'aria-invalid="true"' in response.content.decode()
    assert not AlarmChannel.objects.exists()


def test_an_unknown_kind_is_a_form_error(staff_client: Client, use_case: UseCase) -> None:
    response = create(staff_client, use_case, "pager", "https://example.com/x")
    assert response.status_code == 400
    assert not AlarmChannel.objects.exists()


def test_the_address_is_stored_encrypted_and_never_shown_in_full(
    staff_client: Client, use_case: UseCase, staff: User
) -> None:
    url = f"https://hooks.slack.com{SLACK_PATH}"
    response = create(staff_client, use_case, "slack", url)
    assert response.status_code == 302
    channel = AlarmChannel.objects.get()
    assert "sEcReTtOkEn" not in channel.url_encrypted
    assert channel.url_hint == "hooks.slack.com …XyZ9"
    for page in (base(use_case), f"{base(use_case)}{channel.pk}/"):
        html = staff_client.get(page).content.decode()
        assert "hooks.slack.com …XyZ9" in html
        assert "sEcReTtOkEn" not in html and SLACK_PATH not in html
    # Nor in the admin.
    staff.is_superuser = True
    staff.save()
    for page in ("/admin/alarms/alarmchannel/", f"/admin/alarms/alarmchannel/{channel.pk}/change/"):
        admin = staff_client.get(page)
        assert admin.status_code == 200
        html = admin.content.decode()
        assert "hooks.slack.com …XyZ9" in html
        assert "sEcReTtOkEn" not in html and channel.url_encrypted not in html


def test_the_signing_secret_is_shown_once(
    staff_client: Client, use_case: UseCase, receiver: WebhookReceiver
) -> None:
    response = create(staff_client, use_case, "webhook", receiver.url())
    assert response.status_code == 201
    secret = shown_secret(response)
    assert len(secret) >= 40
    channel = AlarmChannel.objects.get()
    assert secret not in channel.secret_encrypted
    again = staff_client.get(f"{base(use_case)}{channel.pk}/").content.decode()
    assert secret not in again and "signing-secret" not in again


def test_edit_keeps_the_address_unless_a_new_one_is_given(
    staff_client: Client, use_case: UseCase, receiver: WebhookReceiver
) -> None:
    create(staff_client, use_case, "slack", receiver.url("/old"))
    channel = AlarmChannel.objects.get()
    page = f"{base(use_case)}{channel.pk}/"
    assert staff_client.post(page, {"name": "Neu", "url": ""}).status_code == 302
    channel.refresh_from_db()
    assert (channel.name, channel.active, channel.url_hint) == ("Neu", False, "127.0.0.1 …/old")
    bad = staff_client.post(page, {"name": "Neu", "url": "gopher://x/"})
    assert bad.status_code == 400 and "Nur http- und https-Adressen" in bad.content.decode()
    assert staff_client.post(page, {"name": "Neu", "url": receiver.url("/new"),
                                    "active": "on"}).status_code == 302
    staff_client.post(page + "test/")
    assert [r.path for r in receiver.received()] == ["/new"]
    assert staff_client.post(page + "delete/").status_code == 302
    assert not AlarmChannel.objects.exists()


# --- the test button -----------------------------------------------------------------------


def test_test_button_slack(staff_client: Client, use_case: UseCase,
                           receiver: WebhookReceiver) -> None:
    create(staff_client, use_case, "slack", receiver.url("/slack"))
    channel = AlarmChannel.objects.get()
    response = staff_client.post(f"{base(use_case)}{channel.pk}/test/", follow=True)
    assert "Testnachricht zugestellt (HTTP 200)" in response.content.decode()
    (request,) = receiver.received()
    assert request.path == "/slack"
    assert request.headers["content-type"].startswith("application/json")
    body = request.json()
    assert "Testnachricht" in body["text"] and "Kundenservice" in body["text"]
    assert "https://treue.example/use-cases/kundenservice/" in body["text"]
    assert "x-treue-signature" not in request.headers
    attempt = DeliveryAttempt.objects.get()
    assert (attempt.ok, attempt.http_status, attempt.is_test) == (True, 200, True)
    # The log on the channel's page shows it.
    assert 'class="ok"' in response.content.decode()


def test_test_button_teams(staff_client: Client, use_case: UseCase,
                           receiver: WebhookReceiver) -> None:
    create(staff_client, use_case, "teams", receiver.url("/teams"))
    channel = AlarmChannel.objects.get()
    staff_client.post(f"{base(use_case)}{channel.pk}/test/")
    (request,) = receiver.received()
    body = request.json()
    card = body["attachments"][0]["content"]
    assert body["type"] == "message" and card["type"] == "AdaptiveCard"
    assert card["actions"][0]["url"] == "https://treue.example/use-cases/kundenservice/"


def test_test_button_webhook_is_signed_with_the_secret_shown(
    staff_client: Client, use_case: UseCase, receiver: WebhookReceiver
) -> None:
    secret = shown_secret(create(staff_client, use_case, "webhook", receiver.url()))
    channel = AlarmChannel.objects.get()
    staff_client.post(f"{base(use_case)}{channel.pk}/test/")
    (request,) = receiver.received()
    timestamp = request.headers["x-treue-timestamp"]
    assert abs(int(timestamp) - time.time()) < 60
    # The documented algorithm, written out as a receiver would (docs/alarm-channels.md).
    expected = hmac.new(
        secret.encode(), timestamp.encode() + b"." + request.body, hashlib.sha256
    ).hexdigest()
    assert request.headers["x-treue-signature"] == f"sha256={expected}"
    assert domain.signature_valid(secret, timestamp, request.body,
                                  request.headers["x-treue-signature"], now=time.time())
    assert request.headers["x-treue-event"] == "test"
    body = request.json()
    assert body["event"] == "test" and body["use_case"] == {
        "slug": "kundenservice", "name": "Kundenservice"}


def test_test_button_says_when_the_receiver_refuses(
    staff_client: Client, use_case: UseCase, receiver: WebhookReceiver
) -> None:
    create(staff_client, use_case, "slack", receiver.url())
    channel = AlarmChannel.objects.get()
    receiver.fail_next(500)
    response = staff_client.post(f"{base(use_case)}{channel.pk}/test/", follow=True)
    html = response.content.decode()
    assert "Testnachricht nicht zugestellt: HTTP 500" in html
    attempt = DeliveryAttempt.objects.get()
    assert (attempt.ok, attempt.http_status) == (False, 500)
    assert "receiver says no" in attempt.error


def test_test_button_on_a_receiver_that_is_down(
    staff_client: Client, use_case: UseCase, staff: User
) -> None:
    channel = services.alarm_channel_create(
        use_case=use_case, kind="slack", name="Weg", url=closed_url(), user=staff
    ).channel
    response = staff_client.post(f"{base(use_case)}{channel.pk}/test/", follow=True)
    assert response.status_code == 200
    assert "Testnachricht nicht zugestellt: ConnectError" in response.content.decode()


def closed_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


# --- deliveries of a raised alarm ------------------------------------------------------------


def raise_alarm(use_case: UseCase, capture: Any) -> Alarm:
    with capture(execute=False):
        alarm = services.alarm_raise(
            use_case=use_case, kind=Alarm.Kind.ACTION, key="2026-W40",
            text=[("Treue %(value)s unter der Handlungsschwelle.", {"value": "0,78"})],
            details={"week": "2026-W40", "estimate": 0.78, "low": 0.7, "high": 0.83},
        )
    assert alarm is not None
    return alarm


def test_a_raised_alarm_gets_a_delivery_per_active_channel(
    use_case: UseCase, staff: User, receiver: WebhookReceiver,
    django_capture_on_commit_callbacks: Any,
) -> None:
    hook = services.alarm_channel_create(
        use_case=use_case, kind="webhook", name="Ops", url=receiver.url("/ops"), user=staff)
    services.alarm_channel_create(
        use_case=use_case, kind="slack", name="Aus", url=receiver.url("/off"), user=staff,
        active=False)
    alarm = raise_alarm(use_case, django_capture_on_commit_callbacks)
    (delivery,) = AlarmDelivery.objects.all()
    assert delivery.channel_id == hook.channel.pk and delivery.status == "pending"

    assert deliver_alarm.apply(args=[delivery.pk]).get() == "sent"
    (request,) = receiver.received()
    assert request.path == "/ops"
    assert domain.signature_valid(hook.secret, request.headers["x-treue-timestamp"],
                                  request.body, request.headers["x-treue-signature"],
                                  now=time.time())
    body = request.json()
    assert body["event"] == "alarm"
    assert body["alarm"] == {
        "id": alarm.pk, "kind": "action", "kind_label": "Handlungssignal", "key": "2026-W40",
        "week": "2026-W40", "opened_at": alarm.opened_at.isoformat(),
        "figures": {"week": "2026-W40", "estimate": 0.78, "low": 0.7, "high": 0.83},
    }
    assert body["use_case"] == {"slug": "kundenservice", "name": "Kundenservice"}
    assert body["text"] == "Treue 0,78 unter der Handlungsschwelle."
    assert body["link"] == "https://treue.example/use-cases/kundenservice/"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.http_status, delivery.attempts) == ("sent", 200, 1)
    # A second delivery of the same message posts nothing twice.
    assert deliver_alarm.apply(args=[delivery.pk]).get() == "not claimed"
    assert len(receiver.received()) == 1


def test_raising_the_same_alarm_again_delivers_nothing_new(
    use_case: UseCase, staff: User, receiver: WebhookReceiver,
    django_capture_on_commit_callbacks: Any,
) -> None:
    services.alarm_channel_create(
        use_case=use_case, kind="slack", name="Team", url=receiver.url(), user=staff)
    raise_alarm(use_case, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=False):
        again = services.alarm_raise(use_case=use_case, kind=Alarm.Kind.ACTION, key="2026-W40",
                                     text=[("x", {})])
    assert again is None
    assert AlarmDelivery.objects.count() == 1


def test_a_refusing_receiver_fails_the_delivery_without_retrying(
    use_case: UseCase, staff: User, receiver: WebhookReceiver,
    django_capture_on_commit_callbacks: Any,
) -> None:
    services.alarm_channel_create(
        use_case=use_case, kind="slack", name="Team", url=receiver.url(), user=staff)
    raise_alarm(use_case, django_capture_on_commit_callbacks)
    delivery = AlarmDelivery.objects.get()
    receiver.fail_next(404)  # a revoked Slack webhook
    assert deliver_alarm.apply(args=[delivery.pk]).get() == "refused"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.http_status) == ("failed", 404)
    assert delivery.error.startswith("HTTP 404")
    assert len(receiver.received()) == 1


def test_keys_can_be_rotated_and_a_lost_key_is_said_not_a_500(
    staff_client: Client, use_case: UseCase, staff: User, receiver: WebhookReceiver,
    settings: Any,
) -> None:
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.TREUE_ALARM_CHANNEL_KEYS = [old]
    channel = services.alarm_channel_create(
        use_case=use_case, kind="webhook", name="Ops", url=receiver.url(), user=staff
    ).channel
    test = f"{base(use_case)}{channel.pk}/test/"
    settings.TREUE_ALARM_CHANNEL_KEYS = [new, old]  # rotated: the old key still decrypts
    assert "Testnachricht zugestellt" in staff_client.post(test, follow=True).content.decode()
    settings.TREUE_ALARM_CHANNEL_KEYS = [new]  # the old key lost
    response = staff_client.post(test, follow=True)
    assert response.status_code == 200
    assert "Testnachricht nicht zugestellt" in response.content.decode()
    assert len(receiver.received()) == 1


def test_the_pages_speak_english_too(
    staff_client: Client, use_case: UseCase, receiver: WebhookReceiver
) -> None:
    staff_client.cookies["django_language"] = "en"
    create(staff_client, use_case, "slack", receiver.url())
    channel = AlarmChannel.objects.get()
    html = staff_client.get(f"{base(use_case)}{channel.pk}/").content.decode()
    assert "Send a test" in html and "Test senden" not in html
    html = create(staff_client, use_case, "slack", "ftp://x/").content.decode()
    assert "Only http and https addresses are allowed" in html
