"""Self-consistency investigations end to end with a real `celery worker`: started on the page,
run by the worker against the local OpenAI-compatible server playing generator and judge,
read back in the report; and cancelled while the generator holds its replies."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from investigations.models import Investigation, Question
from monitoring.models import Answer, UseCase
from monitoring.services.use_cases import service_create, use_case_create
from tests.integration.conftest import route_to, wait_for
from tests.investigations.conftest import (
    GENERATOR,
    GUESSED,
    JUDGE,
    KNOWN,
    PASSWORD,
    ScriptedModels,
    messages_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

Q_GUESSED = "Wie oft muss der Behälter geprüft werden?"
Q_KNOWN = "Wie lange gilt die Prüfung?"
Q_NONE = "Gibt es eine Ausnahme?"


def setup_world() -> tuple[UseCase, User, list[Answer]]:
    use_case = use_case_create(
        # The draw is a hash of (service id, external id), and the service's id differs from
        # run to run: at 0.001 one run in 300 sampled an answer (and failed below).
        slug="behaelter", name="Behälterprüfung", language="de", sample_rate=1e-9
    )
    service, _key = service_create(name="rag-bot", use_cases=[use_case])
    lead = User.objects.create_user("lead", password=PASSWORD)
    use_case.team_leads.add(lead)
    answers = []
    for n, (question, messages) in enumerate(
        [(Q_GUESSED, True), (Q_KNOWN, True), (Q_NONE, False)]
    ):
        body: dict[str, Any] = {
            "external_id": f"inv-{n}", "use_case": use_case.slug, "question": question,
            "answer": "Der Behälter wird alle 5 Jahre geprüft.", "model": GENERATOR,
            "chunks": [{"text": "Prüfintervall: 5 Jahre.", "score": 0.8}],
        }
        if messages:
            body["messages"] = messages_for(question)
        result = services.answer_ingest(
            service=service, payload=AnswerIn.model_validate(body), raw=body
        )
        # Not sampled: no judge run in the way.
        assert result.answer is not None
        assert result.outcome == IngestOutcome.CREATED and not result.answer.sampled
        answers.append(result.answer)
    return use_case, lead, answers


def start_on_page(lead: User, **fields: str) -> Investigation:
    client = Client()
    client.force_login(lead)
    data = {"use_case": "behaelter", "selection": "latest", "n": "10", "samples": "3",
            "temperature": "0.7", "generator_model": "", "answers": ""}
    data.update(fields)
    response = client.post("/investigations/new/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    return Investigation.objects.get()


def test_an_investigation_runs_on_the_worker_and_reports_where_the_model_guessed(
    start_worker, broker, judge_server
) -> None:
    models = ScriptedModels()
    models.scripts = {Q_GUESSED: GUESSED, Q_KNOWN: KNOWN}
    judge_server.responder = models
    use_case, lead, answers = setup_world()
    worker = start_worker(
        broker.new_queue("investigations"),
        TREUE_GENERATOR_BASE_URL=judge_server.base_url,
        TREUE_GENERATOR_API_KEY="gen-key",
    )
    with route_to(worker.queue):
        investigation = start_on_page(lead, temperature="0.8")
    wait_for(
        "the investigation to finish",
        lambda: Investigation.objects.filter(
            pk=investigation.pk, status=Investigation.Status.FINISHED
        ).exists(),
        timeout=60, workers=(worker,),
    )
    questions = {q.answer.question: q for q in Question.objects.select_related("answer")}
    assert questions[Q_GUESSED].consistent is False
    assert questions[Q_GUESSED].reason == (
        "Zahlen widersprechen sich: 5 Jahre / alle zwei Jahre / je nach Behältergröße"
    )
    assert questions[Q_KNOWN].consistent is True
    assert questions[Q_KNOWN].decided_by == "judge"
    assert questions[Q_NONE].status == Question.Status.SKIPPED
    # What the generator received: each answer's stored messages, at the chosen temperature.
    assert len(models.generator_requests) == 6
    for request in models.generator_requests:
        question = request["messages"][-1]["content"].rsplit("Frage: ", 1)[-1]
        assert request["messages"] == messages_for(question)
        assert request["temperature"] == 0.8
        assert request["logprobs"] is True
        assert request["model"] == GENERATOR
    # One contradiction check, for the question whose values agree, at temperature 0.
    assert len(models.judge_requests) == 1
    assert models.judge_requests[0]["temperature"] == 0
    assert models.judge_requests[0]["model"] == JUDGE
    # The report page shows the inconsistent question first, its differing values marked.
    client = Client()
    client.force_login(lead)
    html = client.get(f"/investigations/{investigation.pk}/").content.decode()
    guessed, known = questions[Q_GUESSED].pk, questions[Q_KNOWN].pk
    assert html.index(f'id="q-{guessed}"') < html.index(f'id="q-{known}"')
    assert "Zahlen widersprechen sich: 5 Jahre / alle zwei Jahre" in html
    assert '<mark class="differs">alle zwei Jahre</mark>' in html
    assert "n = 2" in html


def test_cancelling_on_the_page_stops_the_worker_before_its_next_call(
    start_worker, broker, judge_server
) -> None:
    models = ScriptedModels()
    models.scripts = {Q_GUESSED: GUESSED, Q_KNOWN: KNOWN}
    judge_server.responder = models
    # Every generator reply is held until the test wakes the server.
    judge_server.delay_for = lambda index, request: 30.0 if request["model"] != JUDGE else 0.0
    use_case, lead, answers = setup_world()
    worker = start_worker(
        broker.new_queue("investigations-cancel"),
        TREUE_GENERATOR_BASE_URL=judge_server.base_url,
    )
    with route_to(worker.queue):
        investigation = start_on_page(lead)
    wait_for("a generator call", lambda: judge_server.requests, timeout=30, workers=(worker,))
    client = Client()
    client.force_login(lead)
    response = client.post(f"/investigations/{investigation.pk}/cancel/")
    assert response.status_code == 302
    in_flight = len(judge_server.requests)
    judge_server.delay_for = None
    judge_server.wake()
    wait_for(
        "every question to end",
        lambda: not Question.objects.filter(
            status__in=[Question.Status.PENDING, Question.Status.RUNNING]
        ).exists(),
        timeout=60, workers=(worker,),
    )
    investigation.refresh_from_db()
    assert investigation.status == Investigation.Status.CANCELLED
    statuses = sorted(Question.objects.values_list("status", flat=True))
    assert statuses == ["cancelled", "cancelled", "skipped"]
    # Nothing was asked after the cancel but the calls already under way: a question checks
    # for the cancel before each call, so none got past its first of three samples.
    asked = Counter(r["messages"][-1]["content"] for r in models.generator_requests)
    assert asked and in_flight >= 1
    assert all(n == 1 for n in asked.values()), asked
    assert models.judge_requests == []
    progress = client.get(f"/investigations/{investigation.pk}/progress.json").json()
    assert progress == {"total": 2, "finished": 2, "status": "cancelled", "cancelled": 2}
