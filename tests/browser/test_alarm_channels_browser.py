"""The alarm channels' pages in a real browser at 1440 and 375 px, as staff set one up: from
the use case's page to its channels, a refused address (the error where the eye is), a new
signed webhook with its secret shown once, "Test senden" against a local receiver and the
result in the page and its log. Nothing wider than the screen; the address never in full;
no console error (Content-Security-Policy) or failed request."""

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from alarms.domain import channels as domain
from monitoring.models import UseCase
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET_PATH = "/hooks/T0AAA/B0BBB/geheimerPfad1234"


@pytest.fixture(scope="module")
def receiver() -> Iterator[WebhookReceiver]:
    server = WebhookReceiver().start()
    try:
        yield server
    finally:
        server.stop()


def log_in(page: Page, base: str, user: User) -> None:
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": base, "httpOnly": True}]
    )


def screenshot(page: Page, name: str) -> None:
    var = os.environ.get("TREUE_VAR_DIR") or Path(django_settings.BASE_DIR) / "var" / "test"
    path = Path(var) / "artifacts" / f"alarm-channels-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def fits(page: Page, width: int) -> None:
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("width", [1440, 375])
def test_staff_set_up_a_signed_webhook_and_send_a_test(
    page: Page, live_server, use_case: UseCase, receiver: WebhookReceiver, width: int
) -> None:
    receiver.reset()
    errors: list[str] = []
    # The refused form is a 400, which Chromium logs as a failed resource: every other console
    # error counts (a Content-Security-Policy violation is one).
    page.on("console", lambda m: errors.append(m.text) if m.type == "error"
            and "status of 400" not in m.text else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}")
            if r.status >= 500 else None)
    staff = User.objects.create_user("ops", "ops@example.com", "pw", is_staff=True)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, live_server.url, staff)

    # The use case's page computes its figures on the first visit: more than the 5 s a click
    # may take on a busy machine.
    page.goto(f"{live_server.url}/use-cases/{use_case.slug}/", timeout=30_000)
    page.click("#alarm-channels-link")
    expect(page.locator("h1")).to_contain_text("Alarmkanäle")
    expect(page.locator(".alarm-channels .empty")).to_be_visible()
    fits(page, width)

    # An address that is not http(s): refused, with the error beside the focused field.
    page.select_option("#id_kind", "webhook")
    page.fill("#id_name", "Ops-Leitstand")
    page.fill("#id_url", "ftp://example.com/hook")
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.click(".channel-form button[type=submit]")
    assert posted.value.status == 400
    page.wait_for_load_state("load")
    error = page.locator("#id_url_error")
    expect(error).to_contain_text("Nur http- und https-Adressen")
    expect(error).to_be_in_viewport()
    expect(page.locator("#id_url")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_url")).to_be_in_viewport()
    fits(page, width)

    page.fill("#id_url", receiver.url(SECRET_PATH))
    page.click(".channel-form button[type=submit]")
    secret = page.locator("#signing-secret").inner_text().strip()
    assert len(secret) >= 40
    expect(page.locator(".channel-facts .url-hint")).to_have_text("127.0.0.1 …1234")
    fits(page, width)
    screenshot(page, f"created-{width}")

    page.click("#send-test")
    expect(page.locator(".messages")).to_contain_text("Testnachricht zugestellt (HTTP 200)")
    expect(page.locator("table.delivery-log tbody tr")).to_have_count(1)
    expect(page.locator("table.delivery-log tbody tr").first).to_contain_text("Testnachricht")
    # Shown once: the page after the test no longer holds the secret.
    assert secret not in page.content()
    assert SECRET_PATH not in page.content()
    fits(page, width)
    screenshot(page, f"tested-{width}")

    (request,) = receiver.received()
    assert request.path == SECRET_PATH
    assert domain.signature_valid(secret, request.headers["x-treue-timestamp"], request.body,
                                  request.headers["x-treue-signature"], now=time.time())

    page.click("a[href$='/alarm-channels/']")
    row = page.locator("table.channel-list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Ops-Leitstand")
    expect(row).to_contain_text("127.0.0.1 …1234")
    assert SECRET_PATH not in page.content()
    fits(page, width)
    screenshot(page, f"list-{width}")
    assert not errors, errors
