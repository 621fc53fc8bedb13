"""The pages people use: the answer list (filters, paging), the answer detail (question,
highlighted answer, chunks), escaping of hostile input, the UI languages and /health.

Answers are created through the real ingest, with OpenAI-style log-probabilities where a test
needs uncertain words.
"""

import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.contrib.staticfiles import finders
from django.test import Client

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from monitoring.models import Answer, Service, UseCase
from monitoring.services.use_cases import service_create, use_case_create

EN_CATALOGUE = Path(__file__).resolve().parents[2] / "locale/en/LC_MESSAGES/django.mo"


def logprobs_for(text: str, low: dict[str, float]) -> dict[str, Any]:
    """OpenAI logprobs spelling `text` one word per token; words in `low` get that probability,
    all others probability 1."""
    content = []
    for word in re.findall(r"\s*\S+", text):
        p = low.get(word.strip(), 1.0)
        # The ingest caps a token at 1000 characters; a longer word becomes several tokens.
        for piece in (word[i:i + 500] for i in range(0, len(word), 500)):
            content.append(
                {"token": piece, "logprob": math.log(p), "bytes": list(piece.encode())}
            )
    return {"content": content}


def ingest(service: Service, body: dict[str, Any]) -> Answer:
    result = services.answer_ingest(
        service=service, payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.outcome == IngestOutcome.CREATED, result.errors
    assert result.answer is not None
    return result.answer


def shown(html: str) -> set[int]:
    """Primary keys of the answers a list page links to."""
    return {int(pk) for pk in re.findall(r'href="/answers/(\d+)/"', html)}


@pytest.fixture
def expert(use_case: UseCase) -> User:
    user = User.objects.create_user("expertin")
    use_case.experts.add(user)
    return user


@pytest.fixture
def browser_client(client: Client, expert: User) -> Client:
    client.force_login(expert)
    return client


# --- filters ---------------------------------------------------------------------------------


@pytest.fixture
def filter_world(
    expert: User, service_and_key: Any, make_answer: Any
) -> dict[str, Answer]:
    """Answers that differ in one property each, so every filter has something to tell apart.

    "voll" samples every answer, "kaum" practically none, so whether an unflagged answer is
    sampled is fixed by its use case, not by the hash draw. "ks" is in the fixture's use case.
    """
    voll = use_case_create(slug="voll", name="Voll", sample_rate=1.0)
    kaum = use_case_create(slug="kaum", name="Kaum", sample_rate=1e-9)
    for uc in (voll, kaum):
        uc.experts.add(expert)
    service, _ = service_create(name="filter-bot", use_cases=[voll, kaum])
    text = "Der Behälter muss alle 5 Jahre geprüft werden."

    def add(service: Service, external_id: str, slug: str, when: str, flagged: bool) -> Answer:
        return ingest(service, make_answer(
            external_id=external_id,
            use_case=slug,
            answer=text,
            created_at=when,
            logprobs=logprobs_for(text, {"5": 0.1} if flagged else {}),
        ))

    answers = {
        "ks": add(service_and_key[0], "ks", "kundenservice", "2025-02-01T10:00:00Z", True),
        "early": add(service, "early", "kaum", "2025-03-01T10:00:00Z", flagged=False),
        "mid": add(service, "mid", "kaum", "2025-03-15T10:00:00Z", flagged=True),
        # Berlin is UTC+1 in March: 23:30 UTC on the 15th is the 16th on the page.
        "late_evening": add(service, "late-evening", "voll", "2025-03-15T23:30:00Z", False),
        "late": add(service, "late", "voll", "2025-04-01T10:00:00Z", flagged=True),
    }
    assert [(a.flagged, a.sampled) for a in answers.values()] == [
        (True, True), (False, False), (True, True), (False, True), (True, True)
    ]
    return answers


ALL = {"ks", "early", "mid", "late_evening", "late"}
FILTER_CASES = [
    ({}, ALL),
    ({"use_case": ""}, ALL),
    ({"use_case": "voll"}, {"late_evening", "late"}),
    ({"use_case": "kaum"}, {"early", "mid"}),
    ({"use_case": "kundenservice"}, {"ks"}),
    ({"flagged": "1"}, {"ks", "mid", "late"}),
    ({"flagged": "0"}, {"early", "late_evening"}),
    ({"sampled": "1"}, {"ks", "mid", "late_evening", "late"}),
    ({"sampled": "0"}, {"early"}),
    ({"flagged": "0", "sampled": "1"}, {"late_evening"}),
    ({"date_from": "2025-03-15"}, {"mid", "late_evening", "late"}),
    ({"date_to": "2025-03-15"}, {"ks", "early", "mid"}),
    ({"date_from": "2025-03-16", "date_to": "2025-03-16"}, {"late_evening"}),
    ({"date_from": "2025-03-02", "date_to": "2025-03-14"}, set()),
    ({"date_from": "2025-04-02", "date_to": "2025-03-01"}, set()),
    ({"use_case": "kaum", "flagged": "1", "date_to": "2025-03-31"}, {"mid"}),
    # A bad value drops that filter only; the valid ones still narrow the list.
    ({"flagged": "1", "date_from": "garbage"}, {"ks", "mid", "late"}),
    ({"flagged": "x", "use_case": "voll"}, {"late_evening", "late"}),
    ({"use_case": "gibt-es-nicht", "sampled": "0"}, {"early"}),
]


@pytest.mark.parametrize(("params", "expected"), FILTER_CASES,
                         ids=["&".join(f"{k}={v}" for k, v in p.items()) or "none"
                              for p, _ in FILTER_CASES])
def test_filters_narrow_the_list(
    browser_client: Client, filter_world: dict[str, Answer], params: dict[str, str],
    expected: set[str],
) -> None:
    response = browser_client.get("/answers/", params)
    assert response.status_code == 200
    html = response.content.decode()
    assert shown(html) == {filter_world[n].pk for n in expected}
    count = len(expected)
    assert f"{count} Antwort{'' if count == 1 else 'en'}</p>" in html
    if not expected:
        assert "Keine Antworten für diese Filter." in html


def test_invalid_filter_is_reported_and_the_rest_applied(
    browser_client: Client, filter_world: dict[str, Answer]
) -> None:
    html = browser_client.get(
        "/answers/", {"flagged": "1", "date_from": "garbage"}).content.decode()
    assert "Einige Filter waren ungültig und wurden ignoriert." in html
    assert shown(html) == {filter_world[n].pk for n in ("ks", "mid", "late")}
    # The form still shows the valid choice, and marks the bad field.
    assert re.search(r'<option value="1" selected>', html)
    assert re.search(r'<input[^>]*name="date_from"[^>]*aria-invalid="true"', html)


@pytest.mark.parametrize("params", [
    {"date_from": "garbage"},
    {"date_to": "2025-02-30"},
    {"date_from": "99999-01-01"},
    {"flagged": "x"},
    {"sampled": "maybe"},
    {"use_case": "gibt-es-nicht"},
    {"use_case": "<script>"},
    {"page": "abc"},
    {"page": "99999"},
    {"page": "0"},
    {"page": "-1"},
    {"page": "1e9"},
    {"flagged": "1", "page": "x" * 5000},
], ids=lambda p: "&".join(f"{k}={v[:12]}" for k, v in p.items()))
def test_invalid_parameters_give_the_page_not_an_error(
    browser_client: Client, filter_world: dict[str, Answer], params: dict[str, str]
) -> None:
    response = browser_client.get("/answers/", params)
    assert response.status_code == 200
    assert shown(response.content.decode())


def test_list_shows_newest_first(browser_client: Client, filter_world: dict[str, Answer]) -> None:
    html = browser_client.get("/answers/").content.decode()
    order = [int(pk) for pk in re.findall(r'href="/answers/(\d+)/"', html)]
    names = ["late", "late_evening", "mid", "early", "ks"]
    assert order == [filter_world[n].pk for n in names]
    assert "Seite" not in html, "one page needs no pager"


# --- paging ----------------------------------------------------------------------------------


@pytest.fixture
def sixty(api: Any, make_answer: Any, browser_client: Client) -> list[int]:
    """60 answers through the batch endpoint, one minute apart; their pks, oldest first."""
    start = datetime(2025, 5, 1, 8, 0, tzinfo=UTC)
    body = {"answers": [
        make_answer(external_id=f"p-{i:03d}", created_at=(start + timedelta(minutes=i)).isoformat())
        for i in range(60)
    ]}
    response = api.post("/api/v1/answers/batch", body)
    assert response.status_code == 200
    assert response.json()["created"] == 60
    return [r["answer"]["id"] for r in response.json()["results"]]


def test_paging_splits_sixty_answers_into_fifty_and_ten(
    browser_client: Client, sixty: list[int]
) -> None:
    first = browser_client.get("/answers/").content.decode()
    second = browser_client.get("/answers/", {"page": "2"}).content.decode()
    assert shown(first) == set(sixty[10:])
    assert shown(second) == set(sixty[:10])
    assert "60 Antworten" in first
    assert "Seite 1 von 2" in first and "Seite 2 von 2" in second
    assert 'rel="next"' in first and 'rel="prev"' not in first
    assert 'rel="prev"' in second and 'rel="next"' not in second


@pytest.mark.parametrize(("page", "expected_page"), [
    ("abc", 1), ("", 1), ("99999", 2), ("2", 2),
])
def test_bad_page_numbers_fall_back_to_a_real_page(
    browser_client: Client, sixty: list[int], page: str, expected_page: int
) -> None:
    response = browser_client.get("/answers/", {"page": page})
    assert response.status_code == 200
    html = response.content.decode()
    assert f"Seite {expected_page} von 2" in html
    assert shown(html) == (set(sixty[10:]) if expected_page == 1 else set(sixty[:10]))


def test_pager_links_keep_the_filters(browser_client: Client, sixty: list[int]) -> None:
    html = browser_client.get("/answers/", {"flagged": "0", "page": "1"}).content.decode()
    link = re.search(r'<a href="\?([^"]*)" rel="next"', html)
    assert link is not None
    params = link.group(1).replace("&amp;", "&").split("&")
    assert sorted(params) == ["flagged=0", "page=2"]


# --- detail ----------------------------------------------------------------------------------


def marked(html: str) -> str:
    """The answer paragraph with each <mark> written as [[word|title]] and no other tags."""
    paragraph = re.search(r'<p class="prose answer-text">(.*?)</p>', html, re.DOTALL)
    assert paragraph is not None
    body = re.sub(
        r'<mark class="uncertain"[^>]*?title="([^"]*)"[^>]*>(.*?)</mark>',
        lambda m: f"[[{m.group(2)}|{m.group(1)}]]",
        paragraph.group(1),
    )
    assert "<mark" not in body
    return body


def chunks_on_page(html: str) -> list[str]:
    return [
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", article)).strip()
        for article in re.findall(
            r'<article class="chunk" id="chunk-\d+">(.*?)</article>', html, re.DOTALL)
    ]


def test_detail_shows_question_highlighted_answer_and_chunks_in_rank_order(
    browser_client: Client, service_and_key: Any, make_answer: Any
) -> None:
    text = "Der Behälter muss alle 5 Jahre geprüft werden."
    answer = ingest(service_and_key[0], make_answer(
        question="Wie oft muss der Behälter geprüft werden?",
        answer=text,
        logprobs=logprobs_for(text, {"Behälter": 0.3, "5": 0.2, "muss": 0.1}),
        chunks=[
            {"text": "Erster Abschnitt: Prüfintervall 5 Jahre.", "score": 0.4, "source": "A.pdf",
             "id": "doc-1#1"},
            {"text": "Zweiter Abschnitt: kleine Behälter jährlich.", "score": 0.9},
            {"text": "Dritter Abschnitt ohne Ähnlichkeitswert."},
        ],
    ))
    response = browser_client.get(f"/answers/{answer.pk}/")
    assert response.status_code == 200
    html = response.content.decode()

    assert "<h2>Frage</h2>" in html
    assert "Wie oft muss der Behälter geprüft werden?" in html
    # "muss" is lower case, not content-bearing: tier 1 does not report it.
    assert marked(html) == (
        "Der [[Behälter|p = 0,300]] muss alle [[5|p = 0,200]] Jahre geprüft werden."
    )
    assert 'data-probability="0.200"' in html  # machine-readable, whatever the language
    assert "2 unsichere Wörter unter p = 0,5" in html

    assert chunks_on_page(html) == [
        "#1 Ähnlichkeit 0,400 A.pdf doc-1#1 Erster Abschnitt: Prüfintervall 5 Jahre.",
        "#2 Ähnlichkeit 0,900 Zweiter Abschnitt: kleine Behälter jährlich.",
        "#3 Dritter Abschnitt ohne Ähnlichkeitswert.",
    ]
    assert "3 abgerufene Abschnitte" in html


def test_highlight_lands_on_the_right_word_when_the_text_needs_escaping(
    browser_client: Client, service_and_key: Any, make_answer: Any
) -> None:
    text = 'Laut <Anlage 2> & "Tabelle" gilt:\nFrist 14 Tage.'
    answer = ingest(service_and_key[0], make_answer(
        answer=text, logprobs=logprobs_for(text, {"14": 0.05})
    ))
    html = browser_client.get(f"/answers/{answer.pk}/").content.decode()
    assert marked(html) == (
        "Laut &lt;Anlage 2&gt; &amp; &quot;Tabelle&quot; gilt:<br>Frist [[14|p = 0,050]] Tage."
    )


def test_answer_without_logprobs_says_so_and_marks_nothing(
    browser_client: Client, service_and_key: Any, make_answer: Any
) -> None:
    answer = ingest(service_and_key[0], make_answer(logprobs=None, chunks=[]))
    html = browser_client.get(f"/answers/{answer.pk}/").content.decode()
    assert "keine Logprobs" in html
    assert marked(html) == "Der Behälter muss alle 5 Jahre geprüft werden."
    assert "Keine Abschnitte übermittelt." in html


def test_unknown_answer_is_404(browser_client: Client) -> None:
    assert browser_client.get("/answers/999999/").status_code == 404
    assert browser_client.get("/answers/99999999999999999999/").status_code == 404


# --- hostile input ---------------------------------------------------------------------------

SCRIPT = "<script>alert(1)</script>"
RLO = "\u202e"


def test_hostile_strings_are_escaped_on_list_and_detail(
    client: Client, service_and_key: Any, make_answer: Any
) -> None:
    word = "W" * 99_000  # about 100 kB, just inside the ingest's 100 000-character cap
    text = f"{SCRIPT} {RLO}gespiegelt Ergebnis 42 {word}"
    answer = ingest(service_and_key[0], make_answer(
        external_id=f"{SCRIPT}{RLO}id",
        question=f"{SCRIPT} Frage {RLO}rückwärts " + "Q" * 49_000,
        answer=text,
        model=f"{SCRIPT}model",
        logprobs=logprobs_for(text, {"42": 0.2}),
        chunks=[{"text": f'{SCRIPT}<img src=x onerror="alert(2)"> {RLO} ' + "C" * 99_000,
                 "id": SCRIPT, "source": SCRIPT, "score": 0.5}],
    ))
    staff = User.objects.create_user("verwaltung", is_staff=True)
    client.force_login(staff)
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"

    for path in ("/answers/", f"/answers/{answer.pk}/"):
        response = client.get(path)
        assert response.status_code == 200
        html = response.content.decode()
        assert "<script>alert" not in html
        assert "<img src=x" not in html
        assert escaped in html

    html = client.get(f"/answers/{answer.pk}/").content.decode()
    assert f"<title>Antwort {escaped}{RLO}id · Treue</title>" in html
    assert word in html, "the long word is shown whole"
    assert "C" * 99_000 in html
    assert f"{escaped} {RLO}gespiegelt Ergebnis [[42|p = 0,200]] {word}" == marked(html)
    assert html.count(escaped) >= 5  # external id (title, heading), question, answer, chunk


# --- languages -------------------------------------------------------------------------------


def test_german_is_the_default(browser_client: Client, service_and_key: Any,
                               make_answer: Any) -> None:
    html = browser_client.get("/answers/").content.decode()
    assert '<html lang="de">' in html
    for word in ("Antworten", "Anwendungsfall", "markiert", "Filtern", "Abmelden"):
        assert word in html
    answer = ingest(service_and_key[0], make_answer())
    detail = browser_client.get(f"/answers/{answer.pk}/").content.decode()
    assert "<h2>Frage</h2>" in detail and "alle Antworten" in detail


def test_login_page_is_german_for_anonymous_visitors(client: Client) -> None:
    html = client.get("/login/?next=/").content.decode()
    assert '<html lang="de">' in html
    assert "Anmelden" in html and "Passwort" in html


def switch(client: Client, language: str, next_url: str = "/") -> None:
    response = client.post("/i18n/setlang/", {"language": language, "next": next_url})
    assert response.status_code == 302
    assert response["Location"] == next_url


def test_language_switcher_sets_english_and_back(browser_client: Client) -> None:
    html = browser_client.get("/answers/").content.decode()
    assert 'name="language" value="en"' in html
    switch(browser_client, "en")
    assert '<html lang="en">' in browser_client.get("/answers/").content.decode()
    switch(browser_client, "de")
    html = browser_client.get("/answers/").content.decode()
    assert '<html lang="de">' in html and "Antworten" in html


def test_language_switcher_returns_to_the_same_page(
    browser_client: Client, service_and_key: Any, make_answer: Any
) -> None:
    answer = ingest(service_and_key[0], make_answer())
    switch(browser_client, "en", f"/answers/{answer.pk}/")
    assert browser_client.get(f"/answers/{answer.pk}/").status_code == 200


@pytest.mark.xfail(
    not EN_CATALOGUE.exists(), strict=True,
    reason="English catalogue pending: locale/en/LC_MESSAGES/django.mo does not exist yet",
)
def test_english_words_after_switching(browser_client: Client) -> None:
    switch(browser_client, "en")
    html = browser_client.get("/answers/").content.decode()
    assert ">Answers<" in html
    assert "Antworten" not in html


# --- health ----------------------------------------------------------------------------------


def test_health_is_ok_without_login(client: Client, db: None) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    # No worker runs here, so the overall status is "degraded" (tests/monitoring/test_health.py).
    assert response.json()["database"] == "ok"
    assert "no-cache" in response["Cache-Control"]


def test_every_page_names_its_icon_which_the_static_files_hold(client: Client) -> None:
    # Without one, browsers ask for /favicon.ico, a 404 in every page's console.
    html = client.get("/login/").content.decode()
    match = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', html)
    assert match, "the base template links an icon"
    assert match.group(1).endswith("img/favicon.svg")
    found = finders.find("img/favicon.svg")
    assert found and Path(found).read_text().startswith("<svg")
