"""Issue 41 (12) in a real browser, at 1440 px and on a 375 px phone: a team lead opens an answer
outside the sample ("drei Jahre" against a source that says "zwei Jahre"), asks for a verdict on
demand, reads the expected calls, confirms, and after the judge (the real judge service against
the local server) sees the verdict marked as outside the estimates, on the page and in the
explorer; nothing sticks out of the screen."""

import re
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeRun, UseCase
from tests.support.judged import Judge, external_id

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

THREE = "Die Prüfung ist alle drei Jahre fällig."
MARK = "auf Anforderung geprüft – nicht in den Schätzungen"


@pytest.fixture
def unsampled(
    settings: Any, openai_server: Any, use_case: UseCase, service_and_key: Any, make_answer: Any
) -> Answer:
    settings.TREUE_JUDGE_BASE_URL = openai_server.base_url
    settings.TREUE_JUDGE_MODEL = "judge-x"
    judge = Judge()
    judge.script(THREE, [(THREE, "UNGEDECKT")])
    openai_server.responder = judge
    service = service_and_key[0]
    body = make_answer(
        external_id=external_id(service, use_case, "drei", in_random=False), answer=THREE,
        chunks=[{"text": "Prüfintervall: zwei Jahre für alle Behälter.", "score": 0.9}],
    )
    result = services.answer_ingest(service=service, payload=AnswerIn.model_validate(body),
                                    raw=body)
    assert result.outcome == IngestOutcome.CREATED and result.answer is not None
    assert not result.answer.sampled
    use_case.team_leads.add(User.objects.create_user("teamleitung"))
    return result.answer


def log_in_as_lead(page: Page, base: str) -> None:
    client = Client()
    client.force_login(User.objects.get(username="teamleitung"))
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": base, "httpOnly": True}]
    )


def fits(page: Page, width: int) -> None:
    """Nothing wider than the screen: no sideways scrolling of the whole page."""
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width


def inside(locator: Any, width: int) -> None:
    expect(locator).to_be_visible()
    box = locator.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width, box


@pytest.mark.parametrize("width", [1440, 375])
def test_a_lead_judges_an_unsampled_answer_from_its_page(
    page: Page, live_server: Any, unsampled: Answer, width: int
) -> None:
    base = live_server.url
    page.set_viewport_size({"width": width, "height": 900})
    log_in_as_lead(page, base)
    page.goto(f"{base}/answers/{unsampled.pk}/")
    section = page.locator("section.judging")
    expect(section).to_contain_text("nur auf Anforderung vom Modell geprüft")
    button = page.get_by_role("button", name="Auf Anforderung prüfen …")
    inside(button, width)
    fits(page, width)
    button.click()

    expect(page.get_by_role("heading", name="Prüfung auf Anforderung bestätigen")).to_be_visible()
    # No judged answer yet in the use case: the assumption of the per-claim mode.
    expect(page.locator(".expected-calls strong")).to_have_text("≈ 6,0")
    inside(page.locator("[data-on-demand-note]"), width)
    expect(page.locator("[data-on-demand-note]")).to_contain_text("bleiben unverändert")
    fits(page, width)
    assert not unsampled.judge_runs.exists(), "nothing is queued before the confirmation"
    page.get_by_role("button", name="Ja, prüfen").click()

    expect(page).to_have_url(re.compile(rf"/answers/{unsampled.pk}/(#pruefung)?$"))
    expect(page.locator(".messages")).to_contain_text("zählt nicht in den Schätzungen")
    expect(section.locator(".run-state")).to_contain_text("wartet auf den Prüfer")
    run = unsampled.judge_runs.get()
    assert (run.trigger, run.status) == (JudgeRun.Trigger.ON_DEMAND, "pending")

    # The worker's part, by the real judge service.
    assert judge_run_execute(run_id=run.pk) == "scored"
    page.reload()
    mark = section.locator("[data-on-demand] .badge.on-demand")
    expect(mark).to_have_text(MARK)
    inside(mark, width)
    expect(section.locator(".score-line .score")).to_have_text("Treue 0,00")
    expect(section.locator(".badge.verdict")).to_have_text(["UNGEDECKT"])
    expect(page.locator("dl.facts").first).to_contain_text(MARK)
    fits(page, width)
    page.screenshot(path=f"/tmp/treue-on-demand-{width}.png", full_page=True)

    # The explorer: the verdict in the Treue column, marked; the page does not scroll sideways.
    page.goto(f"{base}/answers/")
    row = page.locator("table.answers tbody tr", has_text=unsampled.external_id)
    expect(row.locator(".badge.on-demand")).to_have_text(MARK)
    expect(row).to_contain_text("0,00")
    fits(page, width)
