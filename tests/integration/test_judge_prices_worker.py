"""A judge price set in the admin prices the runs that ran without one, on a real worker (issue
41, point 6): the admin's save publishes the task once the price is committed, the worker takes
it from the real broker, and the runs and the usage rollups carry the cost."""

from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from monitoring.models import Answer, JudgePrice, JudgeRun, RollupUsage, UseCase
from monitoring.services.rollup_rebuild import rollups_check
from monitoring.services.use_cases import use_case_create
from tests.integration.conftest import wait_for
from tests.support.openai_server import ScriptedJudge

pytestmark = pytest.mark.django_db(transaction=True)

C1 = "Der Behälter wird alle 5 Jahre geprüft."
C2 = "Kleine Behälter werden jährlich geprüft."


@pytest.fixture
def use_case(db: None) -> UseCase:
    # Overrides the shared fixture: every answer is in the sample.
    return use_case_create(
        slug="kundenservice", name="Kundenservice", language="de", sample_rate=1.0
    )


def test_a_price_set_in_the_admin_prices_past_runs_on_the_worker(
    on_shared_worker: Any, judge_server: Any, api: Any, make_answer: Any
) -> None:
    JudgePrice.objects.filter(judge_model="judge-x").delete()
    judge_server.responder = ScriptedJudge(claims=[C1, C2], verdicts={C2: "UNGEDECKT"})
    judge_server.usage_for = lambda request, content: (200, 3)
    answers = []
    for i in range(3):
        response = api.post("/api/v1/answers", make_answer(external_id=f"preis-{i}"))
        assert response.status_code == 201, response.content
        answers.append(Answer.objects.get(pk=response.json()["id"]))
    runs = JudgeRun.objects.filter(answer__in=answers)
    wait_for("the runs to finish",
             lambda: runs.filter(status="succeeded").count() == 3,
             workers=(on_shared_worker,))
    assert not runs.filter(cost__isnull=False).exists()
    assert RollupUsage.objects.get(judge_model="judge-x").unpriced_runs == 3

    admin = get_user_model().objects.create_superuser("preise", "p@example.org", "x")
    client = Client()
    client.force_login(admin)
    response = client.post("/admin/monitoring/judgeprice/add/", {
        "judge_model": "judge-x", "prompt_per_1k": "0.5", "completion_per_1k": "2",
        "cached_prompt_per_1k": "", "currency": "EUR",
    })
    assert response.status_code == 302

    wait_for("the worker to price the past runs",
             lambda: not runs.filter(cost__isnull=True).exists(),
             workers=(on_shared_worker,))
    # Each run: 3 calls of 200 prompt and 3 completion tokens.
    for run in runs:
        assert (run.prompt_tokens, run.completion_tokens) == (600, 9)
        assert run.cost == Decimal("0.318")
    usage = RollupUsage.objects.get(judge_model="judge-x")
    assert (usage.priced_runs, usage.unpriced_runs, usage.cost_micros) == (3, 0, 954_000)
    assert rollups_check() == []
