"""GET /answers/<pk>/record.json: everything stored about one answer, for whom it may be shown,
and without the judge's verdicts for an expert who reviews the answer blind."""

import json
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from common.domain.weeks import shift_week, week_monday
from investigations.models import Investigation, Question
from judging.services.execution import judge_run_execute
from monitoring import extensions
from monitoring.models import Answer, Service, UseCase
from monitoring.selectors import access
from monitoring.services import retention
from review import services as review_services
from review.models import ReviewBatch
from tests.support.judged import Judge, ingest
from tests.support.world import WorldBuilder

CLAIMS = [("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT"),
          ("Kleine Behälter jährlich.", "UNGEDECKT")]


@dataclass
class ReviewWorld:
    use_case: UseCase
    service: Service
    users: dict[str, User]


@pytest.fixture
def review_world(world_builder: WorldBuilder, db: None) -> ReviewWorld:
    """Use case "recht" (sample rate 1) with experts "expert" and "expert2" and lead "lead";
    use case "fremd" with its own expert and lead; staff; a user without a use case."""
    judge = world_builder.judge(Judge())
    use_case = world_builder.use_case("recht", "Rechtsauskunft", sample_rate=1.0)
    other = world_builder.use_case("fremd", "Fremd")
    service, _ = world_builder.service("recht-bot", use_case)
    roles: dict[str, dict[str, Any]] = {
        "lead": {"lead_of": [use_case]}, "expert": {"expert_of": [use_case]},
        "expert2": {"expert_of": [use_case]}, "other_expert": {"expert_of": [other]},
        "other_lead": {"lead_of": [other]}, "staff": {"is_staff": True}, "nobody": {},
    }
    users = {
        name: world_builder.user(name, password="pw-77a", **extra)
        for name, extra in roles.items()
    }
    text = "Der Behälter wird alle 5 Jahre geprüft, kleine jährlich."
    judge.script(text, CLAIMS)
    return ReviewWorld(use_case, service, users)


@pytest.fixture
def reviewed(review_world: ReviewWorld) -> tuple[Answer, ReviewBatch]:
    """A judged answer of last week, in this week's batch (open: the experts review blind)."""
    this_week = review_services.current_week()
    last_week = week_monday(shift_week(this_week, -1)) + timedelta(days=2)
    answer = ingest(
        review_world.service, review_world.use_case, "a-1",
        "Der Behälter wird alle 5 Jahre geprüft, kleine jährlich.",
        created_at=datetime.combine(last_week, time(10), tzinfo=timezone.get_current_timezone()),
    )
    Answer.objects.filter(pk=answer.pk).update(
        question="Frau Schmidt fragt: wie oft muss mein Behälter geprüft werden?"
    )
    judge_run_execute(run_id=answer.judge_runs.get().pk)
    answer.refresh_from_db()
    batch = review_services.review_batch_create(use_case=review_world.use_case, week=this_week)
    assert batch.batch is not None
    return answer, batch.batch


def url(answer: Answer) -> str:
    return reverse("monitoring:answer_record", args=[answer.pk])


def download(client: Client, answer: Answer) -> dict[str, Any]:
    response = client.get(url(answer))
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == (
        f'attachment; filename="treue-answer-{answer.pk}.json"'
    )
    return json.loads(response.content)


def as_user(review_world: ReviewWorld, who: str) -> Client:
    client = Client()
    client.force_login(review_world.users[who])
    return client


def test_the_lead_gets_everything(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch]
) -> None:
    answer, _ = reviewed
    data = download(as_user(review_world, "lead"), answer)
    assert data["format"] == "treue.answer-record/1"
    assert data["use_case"] == {"slug": "recht", "name": "Rechtsauskunft"}
    assert data["service"] == {"name": "recht-bot"}
    stored = data["answer"]
    assert stored["id"] == answer.pk
    assert stored["question"].startswith("Frau Schmidt fragt")
    assert stored["text"] == answer.text
    assert stored["score"] == 0.5 and stored["current_run_id"] == answer.current_run_id
    assert stored["anonymised_at"] is None
    assert stored["created_at"] == answer.created_at.isoformat().replace("+00:00", "Z")
    # Every stored column of the answer is there.
    assert set(stored) == {f.attname for f in Answer._meta.concrete_fields}
    [chunk] = data["chunks"]
    assert (chunk["text"], chunk["score"], chunk["rank"]) == (
        "Prüfintervall: 5 Jahre für Behälter über 1.000 Liter.", 0.8, 1
    )
    assert data["judge_withheld"] is False
    [run] = data["judge_runs"]
    assert run["status"] == "succeeded" and run["score"] == 0.5
    assert [c["text"] for c in run["claims"]] == [
        "Der Behälter wird alle 5 Jahre geprüft.", "Kleine Behälter jährlich."
    ]
    assert [c["label"] for c in run["claims"]] == ["GEDECKT", "UNGEDECKT"]
    assert run["decomposition_raw"] and len(run["call_log"]) == 3
    assert all(call["text"] for call in run["call_log"])
    [review] = data["reviews"]
    assert review["batch"]["week"] == review_services.current_week()
    assert review["status"] == "open" and review["submissions"] == []


def test_reviews_come_with_verdicts_and_submissions(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch]
) -> None:
    answer, batch = reviewed
    expert = review_world.users["expert"]
    item = batch.items.get(answer=answer)
    review_services.review_item_open(item=item)
    review_services.review_item_save(item=item, user=expert, data=review_services.ItemInput(
        labels={1: "GEDECKT", 2: "TEILWEISE"}, comment="Die Kundin heißt Schmidt.",
    ))
    review_services.review_item_submit(item=item, user=expert)
    data = download(as_user(review_world, "lead"), answer)
    [review] = data["reviews"]
    assert review["comment"] == "Die Kundin heißt Schmidt."
    assert [v["label"] for v in review["verdicts"]] == ["GEDECKT", "TEILWEISE"]
    [submission] = review["submissions"]
    assert submission["version"] == 1 and submission["manual_score"] == 0.75
    assert submission["automatic_score"] == 0.5
    assert [v["text"] for v in submission["verdicts"]] == [
        "Der Behälter wird alle 5 Jahre geprüft.", "Kleine Behälter jährlich."
    ]


def test_a_blind_expert_gets_no_verdict_of_the_judge(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch]
) -> None:
    answer, batch = reviewed
    client = as_user(review_world, "expert")
    data = download(client, answer)
    assert data["judge_withheld"] is True
    assert "judge_runs" not in data
    assert not {"score", "abstention", "current_run_id"} & set(data["answer"])
    assert data["answer"]["question"].startswith("Frau Schmidt")
    body = client.get(url(answer)).content.decode()
    assert "UNGEDECKT" not in body and "Kleine Behälter" not in body
    # Once the expert submitted, the judge's side is there (the page shows it too).
    item = batch.items.get(answer=answer)
    review_services.review_item_open(item=item)
    review_services.review_item_save(item=item, user=review_world.users["expert"],
                                     data=review_services.ItemInput(labels={1: "GEDECKT",
                                                                            2: "GEDECKT"}))
    review_services.review_item_submit(item=item, user=review_world.users["expert"])
    data = download(client, answer)
    assert data["judge_withheld"] is False and data["judge_runs"]


@pytest.mark.parametrize(("who", "status"), [
    ("lead", 200), ("expert2", 200), ("staff", 200),
    ("other_expert", 404), ("other_lead", 404), ("nobody", 404),
])
def test_who_may_download(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch], who: str, status: int
) -> None:
    answer, _ = reviewed
    assert as_user(review_world, who).get(url(answer)).status_code == status


def test_anonymous_is_sent_to_the_login(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch]
) -> None:
    response = Client().get(url(reviewed[0]))
    assert response.status_code == 302 and "/login" in response["Location"]


def test_an_unknown_answer_is_404(review_world: ReviewWorld) -> None:
    assert as_user(review_world, "staff").get("/answers/999999/record.json").status_code == 404


def test_the_detail_page_links_to_it(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch]
) -> None:
    answer, _ = reviewed
    html = as_user(review_world, "lead").get(f"/answers/{answer.pk}/").content.decode()
    assert f'href="{url(answer)}"' in html


def test_an_anonymised_answer_shows_what_is_left(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch]
) -> None:
    answer, batch = reviewed
    ReviewBatch.objects.filter(pk=batch.pk).update(finished_at=timezone.now())
    review_world.use_case.retention_days = 28
    review_world.use_case.save()
    retention.retention_apply_all(now=timezone.now() + timedelta(days=60))
    data = download(as_user(review_world, "lead"), answer)
    stored = data["answer"]
    assert stored["anonymised_at"] is not None
    assert (stored["question"], stored["text"], stored["messages"]) == ("", "", None)
    assert stored["score"] == 0.5
    assert [c["text"] for c in data["chunks"]] == [""]
    assert [c["text"] for c in data["judge_runs"][0]["claims"]] == ["", ""]
    assert "Schmidt" not in json.dumps(data)


def test_investigations_of_the_answer_are_part_of_it(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch]
) -> None:
    answer, _ = reviewed
    assert download(as_user(review_world, "lead"), answer)["investigations"] == []
    investigation = Investigation.objects.create(
        use_case=review_world.use_case, selection="chosen", requested=1, prompt_version="v1"
    )
    Question.objects.create(
        investigation=investigation, answer=answer, position=1, status=Question.Status.DONE,
        sample_data=[{"text": "Alle 5 Jahre.", "model": "gen"}], reason="übereinstimmend",
    )
    [question] = download(as_user(review_world, "lead"), answer)["investigations"]
    assert question["investigation"]["id"] == investigation.pk
    assert question["sample_data"] == [{"text": "Alle 5 Jahre.", "model": "gen"}]
    assert question["reason"] == "übereinstimmend"


def test_monitoring_works_alone_with_nothing_registered_by_review_or_investigations(
    review_world: ReviewWorld, reviewed: tuple[Answer, ReviewBatch], monkeypatch: Any
) -> None:
    """Review and investigations contribute their parts through monitoring/extensions.py;
    without them monitoring still exports, hides nothing, draws its pages and anonymises."""
    answer, batch = reviewed
    expert = review_world.users["expert"]
    assert set(extensions.registry.record_parts) == {"reviews", "investigations"}
    assert access.blind_answer_ids(user=expert) == {answer.pk}
    assert retention.answers_anonymise(answer_ids=[answer.pk]) == 0  # held: in an open review

    monkeypatch.setattr(extensions, "registry", extensions.Registry())
    data = download(as_user(review_world, "expert"), answer)
    assert "reviews" not in data and "investigations" not in data
    assert data["judge_withheld"] is False and data["judge_runs"]
    assert access.blind_answer_ids(user=expert) == set()
    lead = as_user(review_world, "lead")
    assert lead.get(reverse("monitoring:use_case", args=["recht"])).status_code == 200
    assert lead.get(reverse("monitoring:overview")).status_code == 200
    assert retention.answers_anonymise(answer_ids=[answer.pk]) == 1
    assert Answer.objects.get(pk=answer.pk).text == ""
    assert batch.items.get().answer_id == answer.pk  # review's rows are review's to blank
