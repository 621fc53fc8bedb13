"""The investigation pages: who may see, start and cancel; what the page shows before the start
(calls, expected cost, the 3× warning, skipped answers); bad input; the report."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from investigations import services
from investigations.models import Investigation, Question
from monitoring.models import JudgePrice
from tests.investigations.conftest import GENERATOR, GUESSED, JUDGE, KNOWN, World

Q_GUESSED = "Wie oft muss der Behälter geprüft werden?"
Q_KNOWN = "Wie lange gilt die Prüfung?"


@pytest.fixture(autouse=True)
def _recorded(enqueued: list[int]) -> None:
    """Nothing is published from these tests."""


def as_user(world: World, name: str) -> Client:
    client = Client()
    client.force_login(world.users[name])
    return client


FORM = {"use_case": "behaelter", "selection": "latest", "n": "10", "samples": "3",
        "temperature": "0.7", "generator_model": "", "answers": ""}


def started(world: World) -> Investigation:
    response = as_user(world, "lead").post("/investigations/new/", FORM)
    assert response.status_code == 302, response.content.decode()[:3000]
    return Investigation.objects.get()


def test_the_preview_shows_calls_cost_warning_and_skipped_answers(world: World) -> None:
    world.answer("a1", Q_GUESSED)
    world.answer("a2", Q_KNOWN)
    world.answer("a3", "Ohne Nachrichten?", messages=False)
    # The generator's list price (migration monitoring.0030) replaced by the test's own.
    JudgePrice.objects.filter(judge_model=GENERATOR).delete()
    JudgePrice.objects.create(
        judge_model=GENERATOR, prompt_per_1k=Decimal("1"), completion_per_1k=Decimal("2")
    )
    JudgePrice.objects.create(
        judge_model=JUDGE, prompt_per_1k=Decimal("1"), completion_per_1k=Decimal("1")
    )
    response = as_user(world, "lead").get("/investigations/new/", FORM)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="plan-generator-calls">6<' in html
    assert 'id="plan-judge-calls">2 ' in html
    assert 'id="plan-calls">8<' in html
    assert "3× so viele Aufrufe" in html
    assert "Ohne Nachrichten?" in html
    assert "ohne messages eingeliefert" in html
    plan_cost = html.split('id="plan-cost">', 1)[1].split("<", 1)[0]
    assert plan_cost.strip() and plan_cost.strip() != "0,0000"
    assert Investigation.objects.count() == 0  # a preview starts nothing


def test_an_unknown_price_is_said_not_guessed(world: World) -> None:
    world.answer("a1", Q_GUESSED)
    html = as_user(world, "lead").get("/investigations/new/", FORM).content.decode()
    assert "unbekannt" in html.split('id="plan-cost">', 1)[1][:300]


def test_the_lead_starts_and_cancels_and_the_report_shows_the_settings(
    world: World, enqueued: list[int], django_capture_on_commit_callbacks: Any
) -> None:
    world.answer("a1", Q_GUESSED)
    with django_capture_on_commit_callbacks(execute=True):
        investigation = started(world)
    assert investigation.created_by == world.users["lead"]
    assert len(enqueued) == 1
    lead = as_user(world, "lead")
    html = lead.get(f"/investigations/{investigation.pk}/").content.decode()
    assert 'id="progress-text">0/1<' in html
    assert 'id="cancel"' in html
    assert "Temperatur 0,7" in html or "Temperatur 0.7" in html
    assert lead.get(f"/investigations/{investigation.pk}/progress.json").json() == {
        "total": 1, "finished": 0, "status": "running", "cancelled": 0
    }
    response = lead.post(f"/investigations/{investigation.pk}/cancel/")
    assert response.status_code == 302
    investigation.refresh_from_db()
    assert investigation.status == Investigation.Status.CANCELLED
    assert Question.objects.get().status == Question.Status.CANCELLED
    listing = lead.get("/investigations/?use_case=behaelter").content.decode()
    assert "abgebrochen" in listing and "1/1" in listing


@pytest.mark.parametrize(
    ("user", "list_", "new", "detail", "progress", "cancel"),
    [
        ("lead", 200, 200, 200, 200, 302),
        ("staff", 200, 200, 200, 200, 302),
        ("expert", 200, 403, 200, 200, 403),
        ("other_lead", 200, 200, 404, 404, 404),
        ("stranger", 200, 403, 404, 404, 404),
    ],
)
def test_who_may_do_what(
    world: World, user: str, list_: int, new: int, detail: int, progress: int, cancel: int
) -> None:
    world.answer("a1", Q_GUESSED)
    investigation = started(world)
    client = as_user(world, user)
    assert client.get("/investigations/").status_code == list_
    assert client.get("/investigations/new/").status_code == new
    assert client.get(f"/investigations/{investigation.pk}/").status_code == detail
    assert client.get(f"/investigations/{investigation.pk}/progress.json").status_code == progress
    assert client.post(f"/investigations/{investigation.pk}/cancel/").status_code == cancel
    listing = client.get("/investigations/").content.decode()
    assert (f"/investigations/{investigation.pk}/" in listing) == (detail == 200)


def test_a_lead_of_another_use_case_cannot_start_one_here(world: World) -> None:
    world.answer("a1", Q_GUESSED)
    response = as_user(world, "other_lead").post("/investigations/new/", FORM)
    assert response.status_code == 400
    assert Investigation.objects.count() == 0


def test_anonymous_visitors_are_sent_to_the_login(world: World) -> None:
    for url in ("/investigations/", "/investigations/new/", "/investigations/1/",
                "/investigations/1/progress.json"):
        response = Client().get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]
    assert Client().post("/investigations/1/cancel/").status_code == 302


@pytest.mark.parametrize(
    ("field", "value"),
    [("n", "abc"), ("n", "0"), ("n", "100000"), ("samples", "1"), ("samples", "99"),
     ("temperature", "-1"), ("temperature", "nan"), ("temperature", "5"),
     ("selection", "everything"), ("use_case", "nope"), ("answers", "1,x"),
     ("generator_model", "m" * 300)],
)
def test_bad_input_is_a_form_error_not_a_500(world: World, field: str, value: str) -> None:
    world.answer("a1", Q_GUESSED)
    data = dict(FORM, **{field: value})
    if field == "answers":
        data["selection"] = "chosen"
    lead = as_user(world, "lead")
    assert lead.get("/investigations/new/", data).status_code == 200
    response = lead.post("/investigations/new/", data)
    assert response.status_code == 400
    assert 'class="error' in response.content.decode()
    assert Investigation.objects.count() == 0


def test_answers_chosen_in_the_explorer_are_carried_to_the_form(world: World) -> None:
    first = world.answer("a1", Q_GUESSED)
    world.answer("a2", Q_KNOWN)
    lead = as_user(world, "lead")
    explorer = lead.get("/answers/").content.decode()
    assert f'name="answers" value="{first.pk}"' in explorer
    query: dict[str, str | list[int]] = {"selection": "chosen", "answers": [first.pk]}
    response = lead.get("/investigations/new/", query)
    html = response.content.decode()
    assert 'id="plan-questions">1<' in html
    assert 'id="plan-generator-calls">3<' in html
    # The start form carries the choice on.
    assert f'name="answers" value="{first.pk}"' in html
    experts_explorer = as_user(world, "expert").get("/answers/").content.decode()
    assert 'name="answers"' not in experts_explorer


def test_answers_of_a_use_case_the_lead_does_not_lead_are_refused(world: World) -> None:
    foreign = world.answer("x1", "Fremd?", use_case=world.other)
    response = as_user(world, "lead").post(
        "/investigations/new/", dict(FORM, selection="chosen", answers=str(foreign.pk))
    )
    assert response.status_code == 400
    assert Investigation.objects.count() == 0


def test_another_tenants_answer_id_reads_as_one_that_does_not_exist(world: World) -> None:
    # Seen in an attack: ?answers=<id> of another tenant's answer named its use case's slug
    # ("... vertrieb ist keine gültige Auswahl"), so walking ids listed every slug.
    foreign = world.answer("x1", "Fremd?", use_case=world.other)
    lead = as_user(world, "lead")
    pages = [
        lead.get("/investigations/new/", {"answers": [answer_id]})
        for answer_id in (foreign.pk, foreign.pk + 1000)
    ]
    assert [p.status_code for p in pages] == [200, 200]
    bodies = [p.content.decode() for p in pages]
    errors = [re.findall(r'class="errorlist[^"]*"[^>]*>(.*?)</ul>', b, re.S) for b in bodies]
    assert errors[0] == errors[1]
    assert "vertrieb" not in bodies[0] and "Vertrieb" not in bodies[0]


def test_the_report_escapes_what_the_generator_wrote(world: World) -> None:
    world.models.scripts[Q_GUESSED] = [
        "<script>alert(1)</script> alle 5 Jahre", *GUESSED[1:]
    ]
    world.answer("a1", Q_GUESSED)
    investigation = started(world)
    services.question_execute(question_id=investigation.questions.get().pk)
    html = as_user(world, "lead").get(f"/investigations/{investigation.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "widersprüchlich" in html


def test_the_report_in_english(world: World) -> None:
    world.models.scripts[Q_KNOWN] = KNOWN
    world.answer("a1", Q_KNOWN)
    investigation = started(world)
    services.question_execute(question_id=investigation.questions.get().pk)
    lead = as_user(world, "lead")
    lead.post("/i18n/setlang/", {"language": "en", "next": "/"})
    html = lead.get(f"/investigations/{investigation.pk}/").content.decode()
    assert "Consistency investigation" in html
    assert "consistent" in html


def test_the_reason_reads_in_the_readers_language(world: World) -> None:
    # Decided in the use case's language (German): the guessed figures contradict each other.
    world.models.scripts[Q_GUESSED] = GUESSED
    world.answer("a1", Q_GUESSED)
    investigation = started(world)
    services.question_execute(question_id=investigation.questions.get().pk)
    question = investigation.questions.get()
    assert question.reason.startswith("Zahlen widersprechen sich: ")
    lead = as_user(world, "lead")
    german = lead.get(f"/investigations/{investigation.pk}/").content.decode()
    assert "Zahlen widersprechen sich: " in german
    lead.post("/i18n/setlang/", {"language": "en", "next": "/"})
    english = lead.get(f"/investigations/{investigation.pk}/").content.decode()
    detail = question.reason.removeprefix("Zahlen widersprechen sich: ")
    assert f"Numbers contradict each other: {detail}" in english
    assert "Zahlen widersprechen sich" not in english
    # A question decided before the reason's parts were stored keeps its words.
    question.comparison = {k: v for k, v in question.comparison.items() if k != "verdict"}
    question.save(update_fields=["comparison"])
    assert "Zahlen widersprechen sich: " in lead.get(
        f"/investigations/{investigation.pk}/").content.decode()
