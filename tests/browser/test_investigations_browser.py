"""A self-consistency investigation in a real browser, as a team lead runs one.

The lead ticks two answers in the answer explorer, asks for a consistency check, reads the
preview (questions, calls, expected cost and the warning that it costs 3× the calls), starts it
and lands on the report at 0/2. No worker runs here: the test plays it, executing each question
with the service the Celery task calls, against the local OpenAI-compatible server as generator
and judge. The page's script (investigation.js, under the Content-Security-Policy) must notice
the progress by itself and reload into the finished report: the inconsistent question first,
its differing values marked. A second investigation is cancelled from the page.

No page may log a console error (Chromium logs every Content-Security-Policy violation as one),
raise a script error or fail a request. Full-page screenshots of the preview and the finished
report are kept under var/test/artifacts/ (or $TREUE_VAR_DIR/artifacts).
"""

import os
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from investigations import services as investigation_services
from investigations import tasks as investigation_tasks
from investigations.models import Investigation, Question
from judging.services import runs as judging
from monitoring.models import JudgePrice
from tests.investigations.conftest import GENERATOR, GUESSED, JUDGE, KNOWN, World, world  # noqa: F401
from tests.support.text import found

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Q_GUESSED = "Wie oft muss der Behälter geprüft werden?"
Q_KNOWN = "Wie lange gilt die Prüfung?"
Q_OTHER = "Wer gibt Änderungen frei?"
# investigation.js polls every 3 s; one poll and the reload must fit in this.
POLL_TIMEOUT_MS = 10_000


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Question ids handed to the broker. The test plays the worker; nothing reaches a broker
    that a worker of another database might be reading."""
    sent: list[int] = []
    monkeypatch.setattr(
        investigation_tasks.investigate_question, "apply_async",
        lambda args=None, kwargs=None, **options: sent.append(args[0]),
    )
    monkeypatch.setattr(judging, "judge_runs_enqueue",
                        lambda *, run_ids: len(list(run_ids)))
    return sent


@pytest.fixture
def lead_world(world: World, enqueued: list[int]) -> World:  # noqa: F811
    world.models.scripts[Q_GUESSED] = GUESSED
    world.models.scripts[Q_KNOWN] = KNOWN
    for external_id, question in (("k-known", Q_KNOWN), ("k-guessed", Q_GUESSED),
                                  ("k-other", Q_OTHER)):
        world.answer(external_id, question)
    # The generator's list price (migration monitoring.0030) replaced by the test's own.
    JudgePrice.objects.filter(judge_model=GENERATOR).delete()
    JudgePrice.objects.create(judge_model=GENERATOR, prompt_per_1k=Decimal("0.15"),
                              completion_per_1k=Decimal("0.6"))
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("2.5"),
                              completion_per_1k=Decimal("10"))
    return world


class Watch:
    """Console errors, script errors and failed requests of a page, across reloads."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        page.on("response", self._response)

    def _console(self, message: Any) -> None:
        # Chromium asks every site for /favicon.ico; Treue has none, and that 404 is not a page's.
        if message.type == "error" and not message.location.get("url", "").endswith(
            "/favicon.ico"
        ):
            self.errors.append(f"console: {message.text} {message.location}")

    def _response(self, response: Any) -> None:
        if response.status >= 400 and not response.url.endswith("/favicon.ico"):
            self.errors.append(f"{response.status} {response.url}")


@pytest.fixture
def watched(page: Page) -> Iterator[tuple[Page, Watch]]:
    watch = Watch(page)
    yield page, watch
    assert not watch.errors


def screenshot(page: Page, name: str) -> None:
    var = os.environ.get("TREUE_VAR_DIR") or Path(django_settings.BASE_DIR) / "var" / "test"
    path = Path(var) / "artifacts" / f"investigation-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)


def log_in(page: Page, base: str, user: User) -> None:
    client = Client()
    client.force_login(user)
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": base, "httpOnly": True}]
    )


def start_from_explorer(page: Page, base: str, questions: list[str]) -> Investigation:
    """Tick the answers to `questions` in the explorer, preview, start; on the report."""
    page.goto(base + "/answers/")
    for question in questions:
        row = page.locator("table.answers tbody tr", has_text=question)
        row.get_by_role("checkbox", name="für die Konsistenzprüfung wählen").check()
    page.get_by_role("button", name="Gewählte Antworten auf Konsistenz prüfen").click()
    expect(page).to_have_url(re.compile(r"/investigations/new/\?"))
    start = page.get_by_role("button", name=re.compile(r"^Starten"))
    start.click()
    expect(page).to_have_url(re.compile(r"/investigations/\d+/$"))
    pk = int(found(r"/investigations/(\d+)/$", page.url).group(1))
    return Investigation.objects.get(pk=pk)


def test_a_lead_ticks_answers_starts_and_watches_the_report_fill_in(
    watched: tuple[Page, Watch], live_server: Any, lead_world: World, enqueued: list[int]
) -> None:
    page, _ = watched
    base = live_server.url
    log_in(page, base, lead_world.users["lead"])
    page.goto(base + "/answers/")
    for question in (Q_KNOWN, Q_GUESSED):
        row = page.locator("table.answers tbody tr", has_text=question)
        row.get_by_role("checkbox", name="für die Konsistenzprüfung wählen").check()
    page.get_by_role("button", name="Gewählte Antworten auf Konsistenz prüfen").click()

    # The preview: two questions, 3 samples each, at most one judge call each, and the price.
    expect(page).to_have_url(re.compile(r"/investigations/new/\?"))
    plan = page.locator("#plan")
    expect(plan.locator("#plan-questions")).to_have_text("2")
    expect(plan.locator("#plan-generator-calls")).to_have_text("6")
    expect(plan.locator("#plan-judge-calls")).to_contain_text("2")
    expect(plan.locator("#plan-judge-calls")).to_contain_text(JUDGE)
    expect(plan.locator("#plan-calls")).to_have_text("8")
    expect(plan.locator("#plan-cost")).to_contain_text(re.compile(r"^\d+,\d{4} EUR"))
    expect(plan.locator(".warning")).to_contain_text("3× so viele Aufrufe des Generators")
    expect(page.locator("ul.skipped")).to_have_count(0)
    assert enqueued == []  # a preview starts nothing
    screenshot(page, "preview")

    page.get_by_role("button", name="Starten (8 Aufrufe)").click()
    expect(page).to_have_url(re.compile(r"/investigations/\d+/$"))
    expect(page.locator("#progress-text")).to_have_text("0/2")
    expect(page.locator("#status-text")).to_have_text("läuft")
    expect(page.locator("#cancel")).to_be_visible()
    investigation = Investigation.objects.get()
    assert investigation.selection == Investigation.Selection.CHOSEN
    questions = list(investigation.questions.order_by("position"))
    assert sorted(enqueued) == sorted(q.pk for q in questions)
    assert {q.answer.question for q in questions} == {Q_KNOWN, Q_GUESSED}

    # The worker's part, question by question; the page notices each step by itself.
    known = next(q for q in questions if q.answer.question == Q_KNOWN)
    guessed = next(q for q in questions if q.answer.question == Q_GUESSED)
    assert investigation_services.question_execute(question_id=known.pk) == "done"
    expect(page.locator("#progress-text")).to_have_text("1/2", timeout=POLL_TIMEOUT_MS)
    # No reload under the reader's eyes: a link offers the fresh result.
    fresh = page.locator("#fresh-results")
    expect(fresh).to_be_visible()
    fresh.click()
    expect(page.locator(f"#q-{known.pk} .badge").first).to_have_text("konsistent")
    expect(page.locator("#fresh-results")).to_be_hidden()
    assert investigation_services.question_execute(question_id=guessed.pk) == "done"
    expect(page.locator("#status-text")).to_have_text("abgeschlossen", timeout=POLL_TIMEOUT_MS)

    # The finished report: the contradicting question first, its differing values marked.
    expect(page.locator("#progress-text")).to_have_text("2/2")
    expect(page.locator("#cancel")).to_have_count(0)
    cards = page.locator("article.question")
    expect(cards).to_have_count(2)
    expect(cards.nth(0)).to_have_id(f"q-{guessed.pk}")
    expect(cards.nth(0).locator(".badge").first).to_have_text("widersprüchlich")
    expect(cards.nth(1)).to_have_id(f"q-{known.pk}")
    marked = cards.nth(0).locator("mark.differs")
    expect(marked.first).to_be_visible()
    assert {"5 Jahre", "alle zwei Jahre"} <= set(marked.all_inner_texts())
    expect(cards.nth(1).locator("mark.differs")).to_have_count(0)
    expect(page.locator("#consistency-rate")).to_contain_text("Konsistent: 50 %")
    expect(page.locator("#consistency-rate")).to_contain_text("n = 2")
    expect(page.locator("#spent-calls")).to_contain_text("6 Generator, 1 Prüfmodell")
    expect(page.locator("#spent-cost")).to_have_text(re.compile(r"^\d+,\d{4} EUR"))
    screenshot(page, "report")


def test_a_lead_cancels_a_running_investigation(
    watched: tuple[Page, Watch], live_server: Any, lead_world: World, enqueued: list[int]
) -> None:
    page, _ = watched
    base = live_server.url
    log_in(page, base, lead_world.users["lead"])
    investigation = start_from_explorer(page, base, [Q_KNOWN, Q_GUESSED])
    expect(page.locator("#progress-text")).to_have_text("0/2")
    first = investigation.questions.order_by("position").first()
    assert first is not None
    assert investigation_services.question_execute(question_id=first.pk) == "done"
    expect(page.locator("#progress-text")).to_have_text("1/2", timeout=POLL_TIMEOUT_MS)

    page.get_by_role("button", name="Abbrechen").click()
    expect(page).to_have_url(re.compile(rf"/investigations/{investigation.pk}/$"))
    expect(page.get_by_text("Die Konsistenzprüfung wurde abgebrochen.")).to_be_visible()
    expect(page.locator("#status-text")).to_have_text("abgebrochen")
    expect(page.locator("#cancel")).to_have_count(0)
    investigation.refresh_from_db()
    assert investigation.status == Investigation.Status.CANCELLED
    statuses = dict(investigation.questions.values_list("pk", "status"))
    assert sorted(statuses.values()) == sorted([Question.Status.DONE, Question.Status.CANCELLED])
    # The queued task that arrives after the cancel finds nothing to claim, and asks nothing.
    asked = len(lead_world.models.generator_requests)
    for question_id in enqueued:
        investigation_services.question_execute(question_id=question_id)
    assert len(lead_world.models.generator_requests) == asked
    # What was asked before the cancel stays in the report; the script does not reload a
    # finished page.
    expect(page.locator("article.question")).to_have_count(2)
    expect(page.locator("#progress-text")).to_have_text("2/2")
