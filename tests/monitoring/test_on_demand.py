"""Issue 41 (12): a team lead judges any answer on demand from its page, and the verdict of an
answer outside the sample stays out of everything that estimates.

"drei Jahre" against a source that says "zwei Jahre", not drawn by the sample: the lead asks
for a verdict (a confirmation with the expected calls first), the run is executed by the real
judge service against the local OpenAI-compatible server, and then: the answer's page and the
explorer show the verdict marked "auf Anforderung geprüft – nicht in den Schätzungen", the API
returns it beside the answer's own fields, and the weekly estimates, every rollup (incremental,
recounted and rebuilt), the explorer's score filter and the review queue's draw are as before.
Who may: leads of the use case and staff; experts 403, others 404.
"""

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from common.domain.weeks import shift_week
from dashboard.selectors.metrics import queue_figures
from judging.services.execution import judge_run_execute
from monitoring.models import (
    Answer,
    JudgeRun,
    RollupCause,
    RollupCauseScore,
    RollupDay,
    RollupMoments,
    RollupScore,
    RollupState,
    RollupUsage,
    RollupUsageDay,
    Service,
    UseCase,
)
from monitoring.services.retention import answers_anonymise
from monitoring.services.rollup_rebuild import rollups_check, rollups_rebuild
from review import services as review_services
from tests.monitoring.test_judge_pages import judging_section, text_of
from tests.support.judged import Judge
from tests.support.world import WorldBuilder

THREE = "Die Prüfung ist alle drei Jahre fällig."
SOURCE = [{"text": "Prüfintervall: zwei Jahre für alle Behälter.", "score": 0.9}]
MARK = "auf Anforderung geprüft – nicht in den Schätzungen"


@dataclass
class World:
    use_case: UseCase
    service: Service
    key: str
    target: Answer  # outside the sample, never judged by the sample
    sampled: Answer  # judged by the sample
    users: dict[str, User]


@pytest.fixture
def judge(world_builder: WorldBuilder) -> Judge:
    return world_builder.judge(Judge())


@pytest.fixture
def world(world_builder: WorldBuilder, judge: Judge, db: None) -> World:
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=0.5)
    other = world_builder.use_case("fremd", "Fremd")
    service, key = world_builder.service("pruef-bot", use_case)
    # The sample: two random answers and a flagged one, judged.
    def drawn(prefix: str) -> str:
        return world_builder.external_id(service, use_case, prefix, in_random=True)

    sampled = world_builder.judged(
        judge, service, use_case, drawn("zz"),
        [("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT")])
    world_builder.judged(
        judge, service, use_case, drawn("zy"),
        [("Der Behälter wird alle 5 Jahre geprüft.", "GEDECKT"),
         ("Die Prüfung macht der TÜV.", "TEILWEISE")])
    world_builder.judged(judge, service, use_case, "markiert", [("Alle 5 Jahre.", "UNGEDECKT")],
                         flagged=True)
    target = world_builder.answer(
        service, use_case, world_builder.external_id(service, use_case, "drei", in_random=False),
        THREE, chunks=SOURCE)
    assert (target.sampled, target.status) == (False, Answer.Status.NOT_SAMPLED)
    assert not target.judge_runs.exists()
    judge.script(THREE, [(THREE, "UNGEDECKT")])
    user = world_builder.user
    return World(use_case, service, key, target, sampled, {
        "lead": user("teamleitung", lead_of=[use_case]),
        "expert": user("expertin", expert_of=[use_case]),
        "other_lead": user("fremdleitung", lead_of=[other]),
        "staff": user("verwaltung", is_staff=True),
    })


def client_of(world: World, who: str | None) -> Client:
    client = Client()
    if who is not None:
        client.force_login(world.users[who])
    return client


def judge_url(answer: Answer) -> str:
    return f"/answers/{answer.pk}/judge/"


def asked_and_confirmed(client: Client, answer: Answer) -> JudgeRun:
    """The lead's two POSTs: the confirmation with the expected calls, then the run."""
    page = client.post(judge_url(answer))
    assert page.status_code == 200, page.content
    assert not answer.judge_runs.filter(status=JudgeRun.Status.PENDING).exists(), (
        "nothing is queued before the confirmation")
    queued = client.post(judge_url(answer), {"confirm": "1"})
    assert queued.status_code == 302
    assert queued["Location"] == f"/answers/{answer.pk}/#pruefung"
    return answer.judge_runs.get(status=JudgeRun.Status.PENDING)


ROLLUPS = (RollupDay, RollupCause, RollupScore, RollupCauseScore, RollupMoments, RollupUsage)


def rollups() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the rollups the estimates read, without the ids."""
    out = {}
    for model in ROLLUPS:
        rows = [tuple(sorted((k, repr(v)) for k, v in row.items() if k != "id"))
                for row in model.objects.values()]
        out[model.__name__] = sorted(rows)
    return out


def estimates(client: Client, world: World) -> Any:
    response = client.get(f"/api/v1/use-cases/{world.use_case.slug}/estimates")
    assert response.status_code == 200, response.content
    return response.json()


def api_get(client: Client, world: World, path: str) -> Any:
    return client.get(path, HTTP_AUTHORIZATION=f"Bearer {world.key}")


# --- the way through, end to end --------------------------------------------------------------


def test_a_lead_judges_an_unsampled_answer_and_no_estimate_moves(
    world: World, judge: Judge
) -> None:
    lead = client_of(world, "lead")
    target = world.target
    rollups_rebuild()  # whole: the pages read the rollups
    before_rollups, before_estimates = rollups(), estimates(lead, world)
    assert before_estimates["weeks"][-1]["judged"] == 3
    week = review_services.current_week()

    # The page offers it, the confirmation names the calls and what the verdict will not do.
    page = lead.get(f"/answers/{target.pk}/")
    assert "data-judge-on-demand" in page.content.decode()
    confirm = text_of(lead.post(judge_url(target)).content.decode())
    assert "Prüfung auf Anforderung bestätigen" in confirm
    assert "Erwartete Aufrufe" in confirm
    assert "wird auf Anforderung mit dem Prüfmodell „judge-x“ geprüft" in confirm
    assert "nicht in der Stichprobe" in confirm and "bleiben unverändert" in confirm

    run = asked_and_confirmed(lead, target)
    assert (run.trigger, run.judge_model, run.requested_by_id) == (
        JudgeRun.Trigger.ON_DEMAND, "judge-x", world.users["lead"].pk)
    assert judge_run_execute(run_id=run.pk) == "scored"

    run.refresh_from_db()
    assert (run.status, run.score) == (JudgeRun.Status.SUCCEEDED, 0.0)
    assert list(run.claims.values_list("text", "label")) == [(THREE, "UNGEDECKT")]
    target.refresh_from_db()
    assert (target.status, target.score, target.current_run_id) == (
        Answer.Status.NOT_SAMPLED, None, None)

    # Nothing that estimates sees it: the rollups as they were, a recount agrees, and so does
    # a rebuild; the estimates from the rollups and from the raw rows as before.
    assert rollups() == before_rollups
    assert rollups_check() == []
    rollups_rebuild()
    assert rollups() == before_rollups
    assert estimates(lead, world) == before_estimates
    RollupState.objects.all().delete()  # not ready: the pages read the raw rows
    assert estimates(lead, world) == before_estimates
    # What it cost is counted by the day it was spent, under its trigger, and /metrics counts
    # the run from the rollups as from the raw rows.
    day = RollupUsageDay.objects.get(trigger=JudgeRun.Trigger.ON_DEMAND)
    assert (day.runs, day.calls) == (1, run.calls) and run.calls == 2
    raw = queue_figures()
    assert raw.runs[JudgeRun.Status.SUCCEEDED] == 4  # three of the sample, one on demand
    rollups_rebuild()
    rolled = queue_figures()
    assert (rolled.runs, rolled.calls) == (raw.runs, raw.calls)

    # The review queue draws from the sample only.
    batch = review_services.review_batch_create(
        use_case=world.use_case, week=shift_week(week, 1)).batch
    assert batch is not None
    assert target.pk not in set(batch.items.values_list("answer_id", flat=True))
    assert batch.available == 3

    # The answer's page shows the verdict, marked.
    html = lead.get(f"/answers/{target.pk}/").content.decode()
    section = text_of(judging_section(html))
    assert MARK in section and "Treue 0,00" in section and "UNGEDECKT" in section
    assert "auf Anforderung" in section  # the run's reason
    facts = text_of(html.split('<section class="card">')[0])
    assert f"Treue 0,00 {MARK}" in facts

    # The explorer shows it marked; its score filter reads the sample's scores only.
    listing = lead.get("/answers/").content.decode()
    row = next(r for r in listing.split("<tr>") if target.external_id in r)
    assert MARK in text_of(row) and "0,00" in text_of(row)
    low = lead.get("/answers/?score_max=0.1").content.decode()
    assert target.external_id not in low and "markiert" in low

    # The API reads it beside the answer's own fields.
    found = api_get(lead, world, f"/api/v1/answers?external_id={target.external_id}").json()
    assert (found["status"], found["score"], found["claims"]) == ("not_sampled", None, [])
    assert found["on_demand"]["score"] == 0.0
    assert found["on_demand"]["claims"] == [{"position": 0, "text": THREE, "label": "UNGEDECKT"}]
    assert found["on_demand"]["judge"]["model"] == "judge-x"


def test_in_the_sample_on_demand_is_a_rescore(world: World, judge: Judge) -> None:
    lead = client_of(world, "lead")
    answer = world.sampled
    page = lead.get(f"/answers/{answer.pk}/").content.decode()
    assert "data-judge-on-demand" not in page, "the rescore form does it"
    assert "Neubewertung bestätigen" in text_of(lead.post(judge_url(answer)).content.decode())
    run = asked_and_confirmed(lead, answer)
    assert (run.trigger, run.judge_model) == (JudgeRun.Trigger.RESCORE, "judge-x")
    judge.verdicts["Der Behälter wird alle 5 Jahre geprüft."] = "TEILWEISE"
    assert judge_run_execute(run_id=run.pk) == "scored"
    answer.refresh_from_db()
    assert (answer.current_run_id, answer.score) == (run.pk, 0.5)
    assert rollups_check() == []


def test_a_failed_on_demand_run_leaves_the_answer_outside_the_sample(
    world: World, judge: Judge, openai_server: Any
) -> None:
    lead = client_of(world, "lead")
    run = asked_and_confirmed(lead, world.target)
    openai_server.responder = lambda request: "kein JSON"
    judge_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.FAILED
    world.target.refresh_from_db()
    assert (world.target.status, world.target.score) == (Answer.Status.NOT_SAMPLED, None)
    assert rollups_check() == []
    # The lead can try again; the retry stays on demand.
    html = lead.get(f"/answers/{world.target.pk}/").content.decode()
    assert "Die Prüfung ist fehlgeschlagen." in text_of(html)
    assert "data-judge-on-demand" in html


def test_a_second_request_while_one_waits_is_refused(world: World) -> None:
    lead = client_of(world, "lead")
    asked_and_confirmed(lead, world.target)
    again = lead.post(judge_url(world.target), {"confirm": "1"}, follow=True)
    assert "Für diese Antwort wartet schon ein Prüflauf" in text_of(again.content.decode())
    assert world.target.judge_runs.count() == 1


def test_the_generator_does_not_judge_itself(world: World, settings: Any) -> None:
    settings.TREUE_JUDGE_MODEL = world.target.model
    lead = client_of(world, "lead")
    refused = lead.post(judge_url(world.target), {"confirm": "1"}, follow=True)
    assert "ist das Modell, das die Antwort erzeugt hat" in text_of(refused.content.decode())
    assert not world.target.judge_runs.exists()


# --- who may ----------------------------------------------------------------------------------


@pytest.mark.parametrize("who, status", [
    ("expert", 403),  # sees the answer, may not spend judge calls
    ("other_lead", 404),  # another use case's lead does not learn the answer exists
])
def test_who_may_not(world: World, who: str, status: int) -> None:
    client = client_of(world, who)
    assert client.post(judge_url(world.target)).status_code == status
    assert client.post(judge_url(world.target), {"confirm": "1"}).status_code == status
    assert not world.target.judge_runs.exists()


def test_anonymous_is_sent_to_log_in(world: World) -> None:
    response = client_of(world, None).post(judge_url(world.target), {"confirm": "1"})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not world.target.judge_runs.exists()


def test_staff_may(world: World) -> None:
    run = asked_and_confirmed(client_of(world, "staff"), world.target)
    assert run.trigger == JudgeRun.Trigger.ON_DEMAND


def test_only_a_post_queues(world: World) -> None:
    assert client_of(world, "lead").get(judge_url(world.target)).status_code == 405


def test_the_button_is_for_leads(world: World) -> None:
    expert_page = client_of(world, "expert").get(f"/answers/{world.target.pk}/")
    assert expert_page.status_code == 200
    assert "data-judge-on-demand" not in expert_page.content.decode()
    lead_page = client_of(world, "lead").get(f"/answers/{world.target.pk}/").content.decode()
    assert "Auf Anforderung prüfen …" in lead_page


def test_an_anonymised_answer_offers_no_verdict_and_refuses_one(world: World) -> None:
    assert answers_anonymise(answer_ids=[world.target.pk]) == 1
    lead = client_of(world, "lead")
    page = lead.get(f"/answers/{world.target.pk}/").content.decode()
    assert "data-judge-on-demand" not in page
    refused = lead.post(judge_url(world.target), {"confirm": "1"}, follow=True)
    assert "Die Antwort ist anonymisiert" in text_of(refused.content.decode())
    assert not world.target.judge_runs.exists()
