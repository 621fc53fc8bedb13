"""A team lead's way through tier 2 in a real browser: open a judged answer, read the coloured
verdicts, ask for a rescore with another judge model, confirm the expected calls, see the
message and the waiting run; the worker's part is played by the real judge service."""

import re
from collections.abc import Iterable
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from judging.services import runs as judging
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgeRun
from tests.monitoring.test_judge_pages import ScriptedJudge

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEXT = "Der Behälter muss alle 5 Jahre geprüft werden, der TÜV prüft, es kostet 250 Euro."
CLAIMS = [
    ("Der Behälter muss alle 5 Jahre geprüft werden.", "GEDECKT"),
    ("Der TÜV prüft den Behälter.", "TEILWEISE"),
    ("Die Prüfung kostet 250 Euro.", "UNGEDECKT"),
]
# Computed colours of the badges (treue.css): green, amber, red text on light backgrounds.
COLOURS = {
    "GEDECKT": "rgb(6, 118, 71)",
    "TEILWEISE": "rgb(147, 55, 13)",
    "UNGEDECKT": "rgb(180, 35, 24)",
}


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Run ids handed to the broker. The test plays the worker; nothing reaches a broker that
    a worker of another database might be reading."""
    sent: list[int] = []

    def enqueue(*, run_ids: Iterable[int]) -> int:
        ids = list(run_ids)
        sent.extend(ids)
        return len(ids)

    monkeypatch.setattr(judging, "judge_runs_enqueue", enqueue)
    return sent


@pytest.fixture
def judged_answer(
    settings: Any, openai_server: Any, use_case: Any, service_and_key: Any, make_answer: Any,
    enqueued: list[int],
) -> Answer:
    settings.TREUE_JUDGE_BASE_URL = openai_server.base_url
    settings.TREUE_JUDGE_MODEL = "judge-x"
    judge = ScriptedJudge()
    judge.script(TEXT, CLAIMS)
    openai_server.responder = judge
    use_case.sample_rate = 1.0
    use_case.save(update_fields=["sample_rate"])
    body = make_answer(external_id="browser-1", answer=TEXT)
    result = services.answer_ingest(
        service=service_and_key[0], payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.outcome == IngestOutcome.CREATED
    [run_id] = enqueued
    assert judge_run_execute(run_id=run_id) == "scored"
    use_case.team_leads.add(User.objects.create_user("teamleitung"))
    assert result.answer is not None
    return Answer.objects.get(pk=result.answer.pk)


def log_in_as_lead(page: Page, base: str) -> None:
    client = Client()
    client.force_login(User.objects.get(username="teamleitung"))
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": base, "httpOnly": True}]
    )


def test_lead_sees_verdicts_and_rescores_with_another_model(
    page: Page, live_server: Any, judged_answer: Answer, enqueued: list[int]
) -> None:
    base = live_server.url
    log_in_as_lead(page, base)
    page.goto(f"{base}/answers/{judged_answer.pk}/")

    section = page.locator("section.judging")
    expect(section.get_by_role("heading", name="Prüfung durch das Modell")).to_be_visible()
    # (1 + 0.5 + 0) / 3 = 0.5
    expect(section.locator(".score-line .score")).to_have_text("Treue 0,50")
    verdicts = section.locator(".badge.verdict")
    expect(verdicts).to_have_text(["GEDECKT", "TEILWEISE", "UNGEDECKT"])
    backgrounds = set()
    for label, colour in COLOURS.items():
        badge = section.locator(f".badge.verdict.v-{label.lower()}")
        expect(badge).to_be_visible()
        assert badge.evaluate("b => getComputedStyle(b).color") == colour
        backgrounds.add(badge.evaluate("b => getComputedStyle(b).backgroundColor"))
    assert len(backgrounds) == 3, "each verdict has its own colour"
    expect(section.locator(".claim-text")).to_have_text([c for c, _ in CLAIMS])
    expect(section.locator("dl.run-facts")).to_contain_text("judge-x")
    expect(section.locator("dl.run-facts")).to_contain_text("4")  # 1 + 3 calls
    page.screenshot(path="/tmp/treue-judge-detail.png", full_page=True)

    field = page.get_by_label("Neu bewerten mit Prüfmodell")
    expect(field).to_have_value("judge-x")
    field.fill("judge-y")
    page.get_by_role("button", name="Neu bewerten …").click()

    expect(page.get_by_role("heading", name="Neubewertung bestätigen")).to_be_visible()
    expect(page.locator(".expected-calls strong")).to_have_text("4")  # 1 + 3 claims
    expect(page.locator(".confirm")).to_contain_text("mit dem Prüfmodell „judge-y“ neu bewertet")
    page.screenshot(path="/tmp/treue-judge-confirm.png", full_page=True)
    assert judged_answer.judge_runs.count() == 1, "nothing is queued before the confirmation"
    page.get_by_role("button", name="Ja, neu bewerten").click()

    expect(page).to_have_url(re.compile(rf"/answers/{judged_answer.pk}/(#pruefung)?$"))
    expect(page.locator(".messages")).to_contain_text(
        "Neubewertung mit „judge-y“ angefordert: Der Prüflauf wartet auf den Prüfer."
    )
    expect(page.locator(".newer-run")).to_contain_text("wartet auf den Prüfer")
    new_run = judged_answer.judge_runs.get(judge_model="judge-y")
    assert (new_run.trigger, new_run.status) == (JudgeRun.Trigger.RESCORE, "pending")
    assert enqueued[-1] == new_run.pk

    # The worker runs it; the page then shows the new score and the earlier run in the history.
    assert judge_run_execute(run_id=new_run.pk) == "scored"
    page.reload()
    expect(section.locator("dl.run-facts")).to_contain_text("judge-y")
    history = section.locator("details.history")
    expect(history.locator("summary")).to_have_text("1 weiterer Prüflauf")
    expect(history.locator("table")).not_to_be_visible()
    history.locator("summary").click()
    expect(history.locator("tbody tr")).to_contain_text("judge-x")
    expect(section.locator(".note")).to_have_text(
        "Werte verschiedener Prüfmodelle/Prompt-Versionen sind nicht direkt vergleichbar."
    )
    page.screenshot(path="/tmp/treue-judge-after.png", full_page=True)

    page.goto(f"{base}/use-cases/kundenservice/judge/")
    expect(page.get_by_role("heading", name="Prüfung durch das Modell: Kundenservice")) \
        .to_be_visible()
    page.screenshot(path="/tmp/treue-judge-use-case.png", full_page=True)
