"""GET /api/v1/answers/{id} once the judge has scored the answer: score, judge, claims."""

import json

import pytest
from django.test import override_settings

from judging.services.execution import judge_run_execute
from monitoring.models import JudgeRun

CLAIMS = ["Der Behälter wird alle 5 Jahre geprüft.", "Die Prüfung kostet 250 Euro."]


def responder(request: dict) -> str:
    last = request["messages"][-1]["content"]
    if "JSON" in request["messages"][0]["content"]:
        return json.dumps(CLAIMS, ensure_ascii=False)
    return "GEDECKT" if CLAIMS[0] in last else "UNGEDECKT"


@pytest.fixture
def every_answer_judged(use_case, openai_server) -> None:
    use_case.sample_rate = 1.0
    use_case.save()
    openai_server.responder = responder


@pytest.mark.django_db
def test_scores_and_claims_are_returned(
    api, make_answer, openai_server, every_answer_judged
) -> None:
    with override_settings(
        TREUE_JUDGE_BASE_URL=openai_server.base_url, TREUE_JUDGE_MODEL="judge-x"
    ):
        created = api.post("/api/v1/answers", make_answer()).json()
        before = api.get(f"/api/v1/answers/{created['id']}").json()
        assert (before["score"], before["judge"], before["claims"]) == (None, None, [])
        run = JudgeRun.objects.get(answer_id=created["id"])
        assert judge_run_execute(run_id=run.pk) == "scored"

    data = api.get(f"/api/v1/answers/{created['id']}").json()
    assert data["status"] == "judged"
    assert data["score"] == 0.5
    assert data["abstention"] is False
    assert data["judge"]["model"] == "judge-x"
    assert data["judge"]["prompt_version"] == run.prompt_version
    assert [(c["position"], c["text"], c["label"]) for c in data["claims"]] == [
        (0, CLAIMS[0], "GEDECKT"),
        (1, CLAIMS[1], "UNGEDECKT"),
    ]
    assert data["error"] is None


@pytest.mark.django_db
def test_a_failed_answer_says_why(api, make_answer, openai_server, every_answer_judged) -> None:
    # The judge refuses to judge an answer with the model that generated it.
    with override_settings(
        TREUE_JUDGE_BASE_URL=openai_server.base_url, TREUE_JUDGE_MODEL="gpt-4o-mini"
    ):
        created = api.post("/api/v1/answers", make_answer(model="gpt-4o-mini")).json()
        assert api.get(f"/api/v1/answers/{created['id']}").json()["error"] is None
        run = JudgeRun.objects.get(answer_id=created["id"])
        judge_run_execute(run_id=run.pk)

    data = api.get(f"/api/v1/answers/{created['id']}").json()
    assert data["status"] == "failed"
    run.refresh_from_db()
    assert run.error and run.error != data["error"]  # the operator's text stays with the operator
    assert data["error"].startswith("the judge model is the model that generated the answer")

    # Any other failure: a plain sentence, not the run's error.
    JudgeRun.objects.filter(pk=run.pk).update(judge_model="judge-x",
                                              error="internal error: KeyError('x')")
    data = api.get(f"/api/v1/answers/{created['id']}").json()
    assert data["error"] == "judging failed; an operator can see why and retry it"
    JudgeRun.objects.filter(pk=run.pk).update(retryable=True)
    assert api.get(f"/api/v1/answers/{created['id']}").json()["error"].startswith(
        "the judge was unavailable")
    # Queued while no judge model was set: said so, not "unavailable".
    JudgeRun.objects.filter(pk=run.pk).update(judge_model="")
    assert api.get(f"/api/v1/answers/{created['id']}").json()["error"] == (
        "no judge model was configured when it was to be judged; an operator can retry it "
        "once one is")
