"""Issue 41 (12) with real processes: a team lead asks from the answer's page for a verdict on an
answer outside the sample, the run goes through the real broker to a real `celery worker`, which
judges it against the local judge server; the verdict stays on the run, out of the estimates,
and the ingest API finds the answer by its external_id with the verdict beside it.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from monitoring.models import Answer, JudgeRun, RollupScore
from monitoring.services.rollup_rebuild import rollups_check
from monitoring.services.use_cases import service_create, use_case_create
from tests.integration.conftest import wait_for
from tests.support.judged import external_id
from tests.support.openai_server import ScriptedJudge

pytestmark = pytest.mark.django_db(transaction=True)

THREE = "Die Prüfung ist alle drei Jahre fällig."


def test_a_lead_has_an_unsampled_answer_judged_by_the_worker(
    on_shared_worker: Any, judge_server: Any, make_answer: Any
) -> None:
    judge_server.responder = ScriptedJudge(claims=[THREE], verdicts={THREE: "UNGEDECKT"})
    use_case = use_case_create(slug="selten", name="Selten", sample_rate=0.02)
    service, key = service_create(name="rag", use_cases=[use_case])
    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    external = external_id(service, use_case, "kunde-drei", in_random=False)
    body = make_answer(
        external_id=external, use_case=use_case.slug, answer=THREE,
        chunks=[{"text": "Prüfintervall: zwei Jahre für alle Behälter.", "score": 0.9}],
    )
    sent = api.post("/api/v1/answers", body, content_type="application/json")
    assert sent.status_code == 201, sent.content
    assert (sent.json()["sampled"], sent.json()["status"]) == (False, "not_sampled")
    answer = Answer.objects.get(pk=sent.json()["id"])

    lead = User.objects.create_user("teamleitung")
    use_case.team_leads.add(lead)
    page = Client()
    page.force_login(lead)
    assert page.post(f"/answers/{answer.pk}/judge/", {"confirm": "1"}).status_code == 302

    run = wait_for(
        "the on-demand run to finish",
        lambda: JudgeRun.objects.filter(
            answer=answer, status__in=[JudgeRun.Status.SUCCEEDED, JudgeRun.Status.FAILED]
        ).first(),
        workers=(on_shared_worker,),
    )
    assert (run.trigger, run.status, run.score) == ("on_demand", "succeeded", 0.0), run.error
    assert len(judge_server.requests) == 2  # a decomposition and one verdict
    answer.refresh_from_db()
    assert (answer.status, answer.score, answer.current_run_id) == ("not_sampled", None, None)
    assert not RollupScore.objects.filter(use_case=use_case).exists()
    assert rollups_check(use_cases=[use_case]) == []

    found = api.get("/api/v1/answers", {"external_id": external})
    assert found.status_code == 200, found.content
    data = found.json()
    assert (data["id"], data["status"], data["score"]) == (answer.pk, "not_sampled", None)
    assert data["on_demand"]["score"] == 0.0
    assert [c["label"] for c in data["on_demand"]["claims"]] == ["UNGEDECKT"]
