"""An expert's way through the pages in a real browser: log in, filter, open an answer and
read its highlighted words, switch the language, log out."""

import math
import re
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from ingest import services
from ingest.schemas import AnswerIn
from monitoring.models import UseCase
from monitoring.services.use_cases import service_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

USERNAME, PASSWORD = "expertin", "browser-test-pw-5b1d"
TEXT = "Der Behälter muss alle 5 Jahre geprüft werden."


def logprobs_for(text: str, low: dict[str, float]) -> dict[str, Any]:
    """OpenAI logprobs spelling `text` one word per token; words in `low` get that probability."""
    content = []
    for piece in re.findall(r"\s*\S+", text):
        p = low.get(piece.strip(), 1.0)
        content.append({"token": piece, "logprob": math.log(p), "bytes": list(piece.encode())})
    return {"content": content}


@pytest.fixture
def answers(
    settings: Any, use_case: UseCase, other_use_case: UseCase, api: Any, make_answer: Any
) -> dict[str, int]:
    """An expert of A; in A one flagged and one unremarkable answer, in B one answer."""
    use_case.experts.add(User.objects.create_user(USERNAME, password=PASSWORD))
    ids = {}
    for external_id, low in (("a-flagged", {"5": 0.2}), ("a-calm", {})):
        response = api.post("/api/v1/answers", make_answer(
            external_id=external_id, answer=TEXT, logprobs=logprobs_for(TEXT, low)
        ))
        assert response.status_code == 201, response.content
        ids[external_id] = response.json()["id"]
    service_b, _ = service_create(name="sales-bot", use_cases=[other_use_case])
    body = make_answer(external_id="b-other", use_case="vertrieb")
    result = services.answer_ingest(
        service=service_b, payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.answer is not None
    ids["b-other"] = result.answer.pk
    return ids


def log_in(page: Page, base: str) -> None:
    """Through the form from "/": an expert lands on the review queue, their weekly work."""
    page.goto(base + "/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.get_by_label("Benutzername").fill(USERNAME)
    page.get_by_label("Passwort").fill(PASSWORD)
    page.get_by_role("button", name="Anmelden").click()
    expect(page).to_have_url(base + "/review/")


def logged_in(page: Page, base: str) -> Page:
    """The session cookie of a logged-in expert, without a trip through the form (the first
    test takes that trip)."""
    client = Client()
    client.force_login(User.objects.get(username=USERNAME))
    cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
    page.context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": base, "httpOnly": True}]
    )
    page.goto(base + "/answers/")
    expect(page).to_have_url(base + "/answers/")
    return page


def listed(page: Page) -> list[str]:
    return page.locator("table.answers code.external-id").all_inner_texts()


def test_login_lands_on_the_queue_and_the_list_shows_own_answers(
    page: Page, live_server: Any, answers: dict[str, int]
) -> None:
    log_in(page, live_server.url)
    page.goto(live_server.url + "/answers/")
    expect(page.get_by_role("heading", name="Antworten")).to_be_visible()
    expect(page.locator("table.answers tbody tr")).to_have_count(2)
    assert sorted(listed(page)) == ["a-calm", "a-flagged"]
    expect(page.locator(".who")).to_have_text(USERNAME)


def test_filter_flagged_yes_shows_only_flagged(
    page: Page, live_server: Any, answers: dict[str, int]
) -> None:
    logged_in(page, live_server.url)
    page.locator("select[name=flagged]").select_option(label="ja")
    page.get_by_role("button", name="Filtern").click()
    expect(page).to_have_url(re.compile(r"flagged=1"))
    expect(page.locator("table.answers tbody tr")).to_have_count(1)
    assert listed(page) == ["a-flagged"]
    expect(page.locator("select[name=flagged]")).to_have_value("1")
    expect(page.locator("p.count")).to_have_text("1 Antwort")


def test_uncertain_word_is_highlighted_and_shows_its_probability(
    page: Page, live_server: Any, answers: dict[str, int]
) -> None:
    logged_in(page, live_server.url)
    page.locator("tr", has_text="a-flagged").get_by_role("link").click()
    expect(page).to_have_url(f"{live_server.url}/answers/{answers['a-flagged']}/")
    mark = page.locator("mark.uncertain")
    expect(mark).to_have_count(1)
    expect(mark).to_be_visible()
    expect(mark).to_have_text("5")
    expect(mark).to_have_attribute("title", "p = 0,200")
    expect(page.locator(".answer-text")).to_have_text(TEXT)

    mark.hover()
    tooltip = mark.evaluate("m => getComputedStyle(m, '::after').content")
    assert tooltip == '"p = 0,200"'
    background = mark.evaluate("m => getComputedStyle(m).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent"), "the word stands out"
    page.screenshot(path="/tmp/treue-browser-detail.png", full_page=True)

    # The unflagged answer has nothing to highlight.
    page.goto(f"{live_server.url}/answers/{answers['a-calm']}/")
    expect(page.locator("mark.uncertain")).to_have_count(0)
    # B's answer stays hidden.
    response = page.goto(f"{live_server.url}/answers/{answers['b-other']}/")
    assert response is not None and response.status == 404


def test_switch_to_english_and_back(
    page: Page, live_server: Any, answers: dict[str, int]
) -> None:
    logged_in(page, live_server.url)
    page.goto(f"{live_server.url}/answers/{answers['a-flagged']}/")
    page.get_by_role("button", name="EN", exact=True).click()
    expect(page.locator("html")).to_have_attribute("lang", "en")
    # The switcher brings you back to the page you were on.
    expect(page).to_have_url(f"{live_server.url}/answers/{answers['a-flagged']}/")
    expect(page.get_by_role("button", name="EN", exact=True)).to_have_class(re.compile("current"))
    page.get_by_role("button", name="DE", exact=True).click()
    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.get_by_role("heading", name="Frage")).to_be_visible()


def test_log_out(page: Page, live_server: Any, answers: dict[str, int]) -> None:
    logged_in(page, live_server.url)
    page.get_by_role("button", name="Abmelden").click()
    expect(page).to_have_url(re.compile(r"/login/$"))
    expect(page.get_by_role("button", name="Anmelden")).to_be_visible()
    page.goto(live_server.url + "/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))


@pytest.mark.parametrize("width", [1440, 375])
def test_the_sample_column_and_the_detail_say_what_pi_is(
    page: Page, live_server: Any, answers: dict[str, int], width: int
) -> None:
    # Issue 41: "π=1,00" stood unexplained; a legend below the list, words on the detail page.
    page.set_viewport_size({"width": width, "height": 900})
    logged_in(page, live_server.url)
    legend = page.locator("#pi-legend")
    expect(legend).to_be_visible()
    expect(legend).to_contain_text("Wahrscheinlichkeit, mit der die Antwort in die Stichprobe kam")
    box = legend.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width
    page.goto(f"{live_server.url}/answers/{answers['a-flagged']}/")
    expect(page.get_by_text("Auswahlwahrscheinlichkeit")).to_be_visible()
