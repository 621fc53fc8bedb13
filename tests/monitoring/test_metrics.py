"""/metrics: Prometheus' text format parsed back with prometheus_client's parser, the current
week's figures against the dashboard selector and hand-computed values, the judge queue and
counters, and who may scrape."""

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any, Unpack

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from alarms.models import Alarm
from dashboard.selectors.figures import use_case_weeks
from judging.services.execution import judge_run_execute
from monitoring.models import Answer, JudgePrice, JudgeRun, Service, UseCase
from tests.support.http import Environ
from tests.support.judged import JUDGE, Judge, external_id, ingest, judged
from tests.support.world import WorldBuilder

TOKEN = "metrics-token-for-tests-9f3a"


@dataclass
class World:
    use_case: UseCase
    quiet: UseCase  # active, no answers
    retired: UseCase  # inactive: not reported
    service: Service
    waiting: Answer


@pytest.fixture
def judge(world_builder: WorldBuilder) -> Judge:
    return world_builder.judge(Judge())


@pytest.fixture
def world(world_builder: WorldBuilder, judge: Judge, db: None) -> World:
    """This week: 2 flagged answers judged (1.0 and 0.0), one refused (judge = generator),
    3 unflagged of which the random sample took 2 (judged 1.0; waiting), 1 not sampled."""
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=0.5)
    quiet = world_builder.use_case("ruhig", "Ruhig")
    retired = world_builder.use_case("alt", "Alt")
    service, _ = world_builder.service("pruef-bot", use_case, retired)
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("1"),
                              completion_per_1k=Decimal("1"), currency="EUR")

    def ext(prefix: str, in_random: bool) -> str:
        return external_id(service, use_case, prefix, in_random=in_random)

    judged(judge, service, use_case, ext("fa", False), [("A ist belegt.", "GEDECKT")],
           flagged=True)
    judged(judge, service, use_case, ext("fb", False), [("B ist erfunden.", "UNGEDECKT")],
           flagged=True)
    # The judge model is the generator: refused, a failed run without calls.
    judged(judge, service, use_case, ext("fc", False), [("C ist belegt.", "GEDECKT")],
           flagged=True, model=JUDGE)
    judged(judge, service, use_case, ext("rd", True), [("D ist belegt.", "GEDECKT")])
    waiting = ingest(service, use_case, ext("re", True), "Antwort E.")
    ingest(service, use_case, ext("pf", False), "Antwort F.")
    # Waiting for an hour (received_at is set on insert; move it as time would).
    Answer.objects.filter(pk=waiting.pk).update(
        received_at=timezone.now() - timedelta(hours=1)
    )
    # Not in the random sample (which depends on the use case's id): a waiting answer of an
    # inactive use case would rightly show in the judge queue's figures.
    ingest(service, retired, external_id(service, retired, "alt", in_random=False),
           "Antwort alt.")
    UseCase.objects.filter(pk=retired.pk).update(active=False)
    return World(use_case, quiet, retired, service, waiting)


def scrape(client: Client, **headers: Unpack[Environ]) -> Any:
    return client.get("/metrics", **headers)


def samples(response: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a scrape, through prometheus_client's parser."""
    out = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            out[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return out


def families(response: Any) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(response.content.decode())}


@pytest.fixture
def staff(db: None, settings: Any) -> Client:
    client = Client()
    client.force_login(User.objects.create_user("betrieb", password="x-3kd9", is_staff=True))
    return client


def uc(slug: str, **labels: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"use_case": slug, **labels}.items()))


def test_current_week_figures(world: World, staff: Client) -> None:
    response = scrape(staff)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert response["Cache-Control"].startswith("max-age=0")
    got = samples(response)

    # Flagged stratum: 3 answers, 2 judged (1.0, 0.0) - the refused one is unjudged; unflagged:
    # 3 answers, 1 judged (1.0). 3/6 · 0.5 + 3/6 · 1.0 = 0.75.
    assert got["treue_week_faithfulness", uc("pruefung")] == pytest.approx(0.75)
    figures = use_case_weeks(use_case=world.use_case, weeks=1)[-1]
    assert figures.estimate.value == pytest.approx(0.75)
    assert got["treue_week_faithfulness_low", uc("pruefung")] == pytest.approx(
        figures.estimate.low)
    assert got["treue_week_faithfulness_high", uc("pruefung")] == pytest.approx(
        figures.estimate.high)
    # The pooled view over this week and the 3 before it (empty here: the week's own figures),
    # and no experts' scale without reviews (absent, not 0).
    assert figures.pooled is not None
    assert got["treue_week_faithfulness_pooled", uc("pruefung")] == pytest.approx(
        figures.pooled.value)
    assert got["treue_week_faithfulness_pooled_low", uc("pruefung")] == pytest.approx(
        figures.pooled.low)
    assert ("treue_week_faithfulness_expert_scale", uc("pruefung")) not in got
    assert ("treue_week_expert_scale_reviews", uc("pruefung")) not in got
    assert got["treue_week_judged_answers", uc("pruefung", stratum="flagged")] == 2
    assert got["treue_week_judged_answers", uc("pruefung", stratum="random")] == 1
    assert got["treue_week_too_few", uc("pruefung")] == 1
    # Below 0.85: one of the two judged flagged, none of the random: 3/6 · 0.5 = 0.25.
    assert got["treue_week_below_threshold_share", uc("pruefung")] == pytest.approx(0.25)
    assert got["treue_week_flagged_share", uc("pruefung")] == pytest.approx(0.5)
    assert got["treue_week_answers", uc("pruefung")] == 6
    # Three runs with calls: a decomposition and one verification each.
    assert got["treue_week_judge_calls", uc("pruefung")] == 6
    cost = float(sum(r.cost or 0 for r in JudgeRun.objects.all()))
    assert cost > 0
    assert got["treue_week_judge_cost", uc("pruefung", currency="EUR")] == pytest.approx(cost)
    assert got["treue_action_threshold", uc("pruefung")] == 0.85
    start = got["treue_week_start_timestamp_seconds", ()]
    assert start == figures.week.start.timestamp()

    # A quiet use case: counts of zero, no estimate (absent, not 0), too few.
    assert got["treue_week_answers", uc("ruhig")] == 0
    assert got["treue_week_too_few", uc("ruhig")] == 1
    assert ("treue_week_faithfulness", uc("ruhig")) not in got
    assert ("treue_week_flagged_share", uc("ruhig")) not in got
    # An inactive use case is not reported.
    assert not any(dict(labels).get("use_case") == "alt" for _, labels in got)


def test_queue_and_counters(world: World, staff: Client, judge: Judge) -> None:
    got = samples(scrape(staff))
    assert got["treue_judge_queue_answers", uc("pruefung", status="queued")] == 1
    assert got["treue_judge_queue_answers", uc("pruefung", status="judging")] == 0
    assert got["treue_judge_queue_answers", uc("ruhig", status="queued")] == 0
    assert got["treue_judge_queue_runs", (("status", "pending"),)] == 1
    assert got["treue_judge_queue_runs", (("status", "running"),)] == 0
    age = got["treue_judge_oldest_unscored_seconds", ()]
    assert 3600 <= age < 3600 + 60
    # Counters over all use cases; the refused run is the failed one.
    assert got["treue_judge_calls_total", ()] == 6
    assert got["treue_judge_runs_failed_total", ()] == 1
    types = families(scrape(staff))
    assert types["treue_judge_calls"] == "counter"
    assert types["treue_judge_runs_failed"] == "counter"
    assert types["treue_week_faithfulness"] == "gauge"

    # The waiting answer is judged: the queue empties, the counters grow.
    judge.script(world.waiting.text, [("E ist belegt.", "GEDECKT")])
    judge_run_execute(run_id=world.waiting.judge_runs.get().pk)
    got = samples(scrape(staff))
    assert got["treue_judge_queue_answers", uc("pruefung", status="queued")] == 0
    assert got["treue_judge_oldest_unscored_seconds", ()] == 0
    assert got["treue_judge_calls_total", ()] > 6
    assert got["treue_judge_runs_failed_total", ()] == 1


def test_label_values_are_escaped(world: World, staff: Client) -> None:
    # Slugs cannot hold quotes, but the format must survive whatever a label carries.
    JudgePrice.objects.update(currency='E"\\')
    got = samples(scrape(staff))
    assert got["treue_week_judge_cost", uc("pruefung", currency='E"\\')] > 0


def test_cost_is_absent_while_a_model_has_no_price(world: World, staff: Client) -> None:
    JudgePrice.objects.all().delete()
    JudgeRun.objects.update(cost=None)
    got = samples(scrape(staff))
    assert not any(
        name == "treue_week_judge_cost" and dict(labels)["use_case"] == "pruefung"
        for name, labels in got
    )
    # Nothing judged costs nothing, in no currency.
    assert got["treue_week_judge_cost", uc("ruhig", currency="")] == 0
    assert got["treue_week_judge_calls", uc("pruefung")] == 6


def test_empty_installation(db: None, staff: Client) -> None:
    response = scrape(staff)
    assert response.status_code == 200
    got = samples(response)
    assert got["treue_judge_oldest_unscored_seconds", ()] == 0
    assert got["treue_judge_queue_runs", (("status", "pending"),)] == 0


# --- who may scrape -----------------------------------------------------------------------------


def test_access_rules(db: None, settings: Any) -> None:
    anonymous = Client()
    response = scrape(anonymous)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert "Location" not in response

    person = Client()
    person.force_login(User.objects.create_user("leitung", password="x-3kd9"))
    assert scrape(person).status_code == 403
    staff = Client()
    staff.force_login(User.objects.create_user("betrieb", password="x-3kd9", is_staff=True))
    assert scrape(staff).status_code == 200

    # No token configured: no token opens it, not even the empty one.
    settings.TREUE_METRICS_TOKEN = ""
    assert scrape(anonymous, HTTP_AUTHORIZATION="Bearer ").status_code == 401
    assert scrape(anonymous, HTTP_AUTHORIZATION="Bearer").status_code == 401

    settings.TREUE_METRICS_TOKEN = TOKEN
    assert scrape(anonymous, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert scrape(anonymous, HTTP_AUTHORIZATION=f"bearer {TOKEN}").status_code == 200
    for wrong in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", "Bearer ", f"Basic {TOKEN}",
                  TOKEN, "Bearer ä"):
        refused = scrape(anonymous, HTTP_AUTHORIZATION=wrong)
        assert refused.status_code == 401, wrong
        assert "Location" not in refused
    # A bearer request is judged by its token, even from a staff session.
    assert scrape(staff, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    # Reading only.
    assert staff.post("/metrics").status_code in (403, 405)


# --- alarms and ingest, for the alerting rules (deploy/prometheus/) ----------------------------


def test_open_alarms_per_use_case_and_kind(world: World, staff: Client) -> None:
    """Every kind of every active use case, 0 where none is open; a cleared alarm is not
    counted, and the inactive use case's alarm is not reported."""
    got = samples(scrape(staff))
    for kind in Alarm.Kind.values:
        assert got["treue_alarms_open", uc("pruefung", kind=kind)] == 0
        assert got["treue_alarms_open", uc("ruhig", kind=kind)] == 0
    Alarm.objects.create(use_case=world.use_case, kind=Alarm.Kind.DRIFT, key="2026-W48",
                         message="Drift")
    Alarm.objects.create(use_case=world.use_case, kind=Alarm.Kind.DRIFT, key="2026-W49",
                         message="Drift")
    Alarm.objects.create(use_case=world.use_case, kind=Alarm.Kind.MISSED_REVIEW,
                         key="2026-W47", message="versäumt", cleared_at=timezone.now())
    Alarm.objects.create(use_case=world.quiet, kind=Alarm.Kind.MISSED_REVIEW, key="2026-W48",
                         message="versäumt")
    Alarm.objects.create(use_case=world.retired, kind=Alarm.Kind.ACTION, key="2026-W48",
                         message="rot")
    response = scrape(staff)
    assert families(response)["treue_alarms_open"] == "gauge"
    got = samples(response)
    assert got["treue_alarms_open", uc("pruefung", kind="drift")] == 2
    assert got["treue_alarms_open", uc("pruefung", kind="missed_review")] == 0
    assert got["treue_alarms_open", uc("ruhig", kind="missed_review")] == 1
    assert ("treue_alarms_open", uc("alt", kind="action")) not in got


def test_answers_the_ingest_api_refused_are_counted(
    world: World, world_builder: WorldBuilder, staff: Client
) -> None:
    """A refused answer (409, 403, 400 of one answer or a batch item) is counted by service
    and reason; every reason of every active service starts at 0."""
    service, key = world_builder.service("zweiter-bot", world.use_case)
    got = samples(scrape(staff))
    for reason in ("conflict", "not_allowed", "invalid"):
        labels = (("reason", reason), ("service", "zweiter-bot"))
        assert got["treue_ingest_answers_refused_total", labels] == 0

    api = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    body = {"external_id": "m-1", "use_case": "pruefung", "question": "Wie oft?",
            "answer": "Alle 5 Jahre.", "model": "gpt-4o-mini", "chunks": [{"text": "5 Jahre."}]}
    assert api.post("/api/v1/answers", body, content_type="application/json"
                    ).status_code == 201
    assert api.post("/api/v1/answers", {**body, "answer": "Alle 6 Jahre."},
                    content_type="application/json").status_code == 409
    assert api.post("/api/v1/answers", {**body, "use_case": "ruhig"},
                    content_type="application/json").status_code == 403
    batch = {"answers": [{**body, "external_id": "m-2"},
                         {**body, "external_id": "m-4", "created_at": "gestern"},
                         {**body, "external_id": "m-3", "use_case": "gibt-es-nicht"}]}
    assert api.post("/api/v1/answers/batch", batch, content_type="application/json"
                    ).json()["failed"] == 2

    response = scrape(staff)
    assert families(response)["treue_ingest_answers_refused"] == "counter"
    got = samples(response)

    def refused(reason: str) -> float:
        return got["treue_ingest_answers_refused_total",
                   (("reason", reason), ("service", "zweiter-bot"))]

    assert (refused("conflict"), refused("not_allowed"), refused("invalid")) == (1, 2, 1)
    # The other service refused nothing.
    assert service.name == "zweiter-bot"
    assert got["treue_ingest_answers_refused_total",
               (("reason", "invalid"), ("service", "pruef-bot"))] == 0
