"""GET /api/v1/use-cases/{slug}/estimates: the weekly figures against hand-computed values and
the dashboard's selector, who may read them, and the week parameters.

The use case samples half of the unflagged answers, so the judged answers are a stratified
sample and the naive mean over them is not the estimate: the test would notice if the API
returned it.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest
import schemathesis
from django.conf import settings
from django.contrib.auth.models import User
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from django.utils import timezone
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from dashboard.api import EstimatesOut
from dashboard.domain.statistics import estimates as statistics
from dashboard.domain.statistics.cells import Stratum
from dashboard.selectors.figures import use_case_weeks
from monitoring.models import Answer, JudgePrice, JudgeRun, Service, UseCase
from monitoring.services.use_cases import service_create
from tests.support.http import bearer
from tests.support.judged import JUDGE, Judge, external_id, ingest, judged
from tests.support.openai_server import FakeOpenAIServer
from tests.support.shared_world import built_once, read_again
from tests.support.world import WorldBuilder

PASSWORD = "pw-only-for-tests-5d1"


def url(slug: str = "pruefung", **query: str) -> str:
    path = f"/api/v1/use-cases/{slug}/estimates"
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return path


def week_label(day: date) -> str:
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


@dataclass
class World:
    use_case: UseCase
    other: UseCase
    service: Service
    key: str
    other_key: str
    week: str  # last week, where the judged answers are
    users: dict[str, User | None]
    answers: dict[str, Answer]


@pytest.fixture
def judge(world_builder: WorldBuilder) -> Judge:
    return world_builder.judge(Judge())


@pytest.fixture(scope="module")
def built(
    django_db_setup: None, django_db_blocker: Any,
    _openai_server_of_this_process: FakeOpenAIServer,
) -> Iterator[World]:
    """The world, built once for the module (tests/support/shared_world.py)."""

    def build_world() -> World:
        builder = WorldBuilder(settings, lambda: _openai_server_of_this_process)
        return build(builder, builder.judge(Judge()))

    with built_once(django_db_blocker, build_world) as world:
        yield world


@pytest.fixture(autouse=True)
def world(built: World, judge: Judge, db: None) -> World:
    """Every test here runs on the module's world, read again for it."""
    return read_again(built)


def build(world_builder: WorldBuilder, judge: Judge) -> World:
    """Last week: 2 flagged answers (scores 0.5 and 0), 4 unflagged of which the random sample
    took 2 (scores 1 and 0.5). This week: one answer, not sampled."""
    use_case = world_builder.use_case("pruefung", "Prüfung", sample_rate=0.5)
    other = world_builder.use_case("fremd", "Fremd")
    service, key = world_builder.service("pruef-bot", use_case)
    _, other_key = world_builder.service("fremd-bot", other)
    JudgePrice.objects.create(judge_model=JUDGE, prompt_per_1k=Decimal("0.5"),
                              completion_per_1k=Decimal("2"), currency="EUR")

    today = timezone.localdate()
    wednesday = today - timedelta(days=today.weekday() + 5)  # Wednesday of last week
    when = datetime.combine(wednesday, time(12), tzinfo=timezone.get_current_timezone())

    def ext(prefix: str, in_random: bool) -> str:
        return external_id(service, use_case, prefix, in_random=in_random)

    answers = {
        "flagged_a": judged(judge, service, use_case, ext("fa", False), [
            ("A1 ist belegt.", "GEDECKT"), ("A2 ist erfunden.", "UNGEDECKT"),
        ], flagged=True, created_at=when),
        "flagged_b": judged(judge, service, use_case, ext("fb", False), [
            ("B1 ist erfunden.", "UNGEDECKT"),
        ], flagged=True, created_at=when),
        "random_c": judged(judge, service, use_case, ext("rc", True), [
            ("C1 ist belegt.", "GEDECKT"), ("C2 ist belegt.", "GEDECKT"),
        ], created_at=when),
        "random_d": judged(judge, service, use_case, ext("rd", True), [
            ("D1 ist halb belegt.", "TEILWEISE"),
        ], created_at=when),
        "plain_e": ingest(service, use_case, ext("pe", False), "Antwort E.", created_at=when),
        "plain_f": ingest(service, use_case, ext("pf", False), "Antwort F.", created_at=when),
        "now_g": ingest(service, use_case, ext("ng", False), "Antwort G."),
    }

    def user(name: str, **extra: Any) -> User:
        return world_builder.user(name, password=PASSWORD, **extra)

    lead = user("leitung", lead_of=[use_case])
    expert = user("expertin", expert_of=[use_case])
    other_lead = user("fremdleitung", lead_of=[other])
    return World(
        use_case=use_case, other=other, service=service, key=key, other_key=other_key,
        week=week_label(wednesday), answers=answers,
        users={
            "anonymous": None, "lead": lead, "expert": expert, "other_lead": other_lead,
            "unassigned": user("niemand"), "staff": user("verwaltung", is_staff=True),
        },
    )


def as_user(world: World, who: str) -> Client:
    client = Client()
    user = world.users[who]
    if user is not None:
        client.force_login(user)
    return client


def errors_of(response: Any) -> list[dict[str, str]]:
    data = response.json()
    assert set(data) == {"errors"} and data["errors"], data
    assert all(set(e) == {"field", "message"} and e["message"] for e in data["errors"])
    return data["errors"]


# --- the figures -------------------------------------------------------------------------------


def test_week_figures_are_the_stratified_estimates(world: World, client: Client) -> None:
    assert [a.status for a in world.answers.values()] == [
        "judged", "judged", "judged", "judged", "not_sampled", "not_sampled", "not_sampled",
    ]
    response = client.get(url(**{"from": world.week, "to": world.week}), **bearer(world.key))
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["use_case"], data["name"], data["action_threshold"]) == (
        "pruefung", "Prüfung", 0.85
    )
    assert data["leaves_unreviewed"] is False
    [week] = data["weeks"]
    assert week["week"] == world.week
    assert week["current"] is False

    # Flagged stratum: 2 of 2 judged, mean (0.5 + 0) / 2; unflagged: 2 of 4 judged, mean
    # (1 + 0.5) / 2. Weighted by stratum size: 2/6 · 0.25 + 4/6 · 0.75 = 7/12. The naive mean
    # of the four judged scores would be 0.5.
    estimate = week["estimate"]
    assert estimate["value"] == pytest.approx(7 / 12)
    assert (estimate["n"], estimate["n_flagged"], estimate["n_random"]) == (4, 2, 2)
    assert estimate["population"] == 6
    assert estimate["too_few"] is True  # 4 judged answers: below statistics.MIN_JUDGED
    expected = statistics.stratified_mean([Stratum(2, [0.5, 0.0]), Stratum(4, [1.0, 0.5])])
    assert (estimate["low"], estimate["high"]) == pytest.approx((expected.low, expected.high))
    assert estimate["low"] < 7 / 12 < estimate["high"]

    # Below 0.85: both flagged, one of the two random: 2/6 · 1 + 4/6 · 1/2 = 2/3.
    below = week["share_below_threshold"]
    assert below["value"] == pytest.approx(2 / 3)
    assert (below["n_flagged"], below["n_random"], below["population"]) == (2, 2, 6)

    # Claims (GEDECKT 1, TEILWEISE 0.5): flagged 1 point of 3 claims over 2 answers, random
    # 2.5 of 3 over 2: (2/6 · 0.5 + 4/6 · 1.25) / (2/6 · 1.5 + 4/6 · 1.5) = 2/3.
    assert week["claim_share"]["value"] == pytest.approx(2 / 3)
    assert week["abstention_share"]["value"] == 0
    assert week["abstentions"] == 0

    assert (week["volume"], week["flagged"], week["judged"]) == (6, 2, 4)
    assert week["flagged_share"] == pytest.approx(2 / 6)
    runs = JudgeRun.objects.filter(answer__use_case=world.use_case)
    # One decomposition and one verification per claim: 3 + 2 + 3 + 2.
    assert (week["judge_runs"], week["judge_calls"]) == (4, 10)
    costs = [run.cost for run in runs if run.cost is not None]
    assert len(costs) == len(runs)
    cost = sum(costs)
    assert cost > 0
    assert Decimal(week["cost"]) == cost
    assert week["currency"] == "EUR"
    assert week["unpriced_runs"] == 0
    assert week["judges"] == [{"model": JUDGE, "prompt_version": runs[0].prompt_version,
                               "mode": "per-claim"}]
    # Few answers, but the whole interval lies below the action line: red, on evidence
    # (grey is kept for an interval across the line wider than 0.10).
    assert week["estimate"]["high"] < 0.85 and week["light"] == "red"
    # The pooled view (this week and the 3 before, which are empty) is the week's own here;
    # without reviews there is no experts' scale.
    assert week["pooled"]["value"] == pytest.approx(estimate["value"])
    assert week["pooled"]["n"] == estimate["n"] and week["pooled_weeks"] == 4
    assert week["expert_scale"] is None
    EstimatesOut.model_validate(data)


def test_figures_match_the_dashboard_selector(world: World, client: Client) -> None:
    response = client.get(url(), **bearer(world.key))
    assert response.status_code == 200
    weeks = response.json()["weeks"]
    # Default: the 12 weeks up to the current one, oldest first.
    expected = use_case_weeks(use_case=world.use_case, weeks=12)
    assert [w["week"] for w in weeks] == [f.label for f in expected]
    assert weeks[-1]["week"] == week_label(timezone.localdate())
    assert weeks[-1]["current"] is True
    assert weeks[-2]["week"] == world.week
    for out, figures in zip(weeks, expected, strict=True):
        assert out["estimate"]["value"] == figures.estimate.value
        assert out["estimate"]["low"] == figures.estimate.low
        assert out["estimate"]["n"] == figures.estimate.n
        assert out["volume"] == figures.volume
        assert out["judge_calls"] == figures.calls
        assert out["start"] == figures.week.start.isoformat()
    # This week: one unflagged answer, not sampled - nothing to estimate from.
    now = weeks[-1]
    assert now["volume"] == 1
    assert now["estimate"] == {
        "value": None, "low": None, "high": None, "n": 0, "n_flagged": 0, "n_random": 0,
        "population": 1, "too_few": True,
    }
    assert (now["judge_calls"], now["cost"]) == (0, "0.000000")
    assert now["currency"] is None
    # An empty week.
    assert weeks[0]["volume"] == 0 and weeks[0]["flagged_share"] is None


def test_pooled_is_the_week_and_the_three_before_it(
    world: World, judge: Judge, client: Client
) -> None:
    # Two weeks before last week: two random answers, both fully supported (1.0).
    first = world.answers["random_c"].created_at - timedelta(days=14)
    for prefix in ("ox", "oy"):
        judged(judge, world.service, world.use_case,
               external_id(world.service, world.use_case, prefix, in_random=True),
               [(f"{prefix} ist belegt.", "GEDECKT")], created_at=first)
    response = client.get(url(**{"from": world.week, "to": world.week}), **bearer(world.key))
    [week] = response.json()["weeks"]
    empty = [Stratum(0, [], drawn=False), Stratum(0, [], drawn=True)]
    expected = statistics.pooled_mean([
        empty,  # three weeks before
        [Stratum(0, [], drawn=False), Stratum(2, [1.0, 1.0], drawn=True)],
        empty,
        [Stratum(2, [0.5, 0.0], drawn=False), Stratum(4, [1.0, 0.5], drawn=True)],
    ])
    pooled = week["pooled"]
    assert week["pooled_weeks"] == 4
    assert pooled["value"] == pytest.approx(expected.value)
    assert (pooled["low"], pooled["high"]) == pytest.approx((expected.low, expected.high))
    assert (pooled["n"], pooled["population"]) == (6, 8)
    # The earlier week's answers raise the pool above the week's own 7/12.
    assert pooled["value"] > week["estimate"]["value"] == pytest.approx(7 / 12)
    assert set(pooled) == set(week["estimate"])  # the same fields as the estimate


def test_cost_is_unknown_when_a_model_has_no_price(world: World, client: Client) -> None:
    JudgePrice.objects.all().delete()
    JudgeRun.objects.update(cost=None)
    response = client.get(url(**{"from": world.week, "to": world.week}), **bearer(world.key))
    [week] = response.json()["weeks"]
    assert (week["cost"], week["currency"], week["unpriced_runs"]) == (None, None, 4)
    assert week["judge_calls"] == 10


# --- who may read them -------------------------------------------------------------------------


@pytest.mark.parametrize(("who", "status"), [
    ("anonymous", 401),
    ("lead", 200),
    ("staff", 200),
    ("expert", 403),  # sees the answers, does not lead
    ("other_lead", 404),  # does not learn that the use case exists
    ("unassigned", 404),
])
def test_people(world: World, who: str, status: int) -> None:
    response = as_user(world, who).get(url())
    assert response.status_code == status, response.content
    if status == 200:
        assert response.json()["use_case"] == "pruefung"
    else:
        errors_of(response)
    if status == 401:
        assert response["WWW-Authenticate"] == "Bearer"


def test_keys(world: World, client: Client) -> None:
    assert client.get(url(), **bearer(world.key)).status_code == 200
    # Another tenant's use case reads exactly as one that does not exist.
    refused = client.get(url(), **bearer(world.other_key))
    assert refused.status_code == 404
    assert refused.json() == client.get(url("gibt-es-nicht"), **bearer(world.other_key)).json()
    assert client.get(url("fremd"), **bearer(world.other_key)).status_code == 200
    unknown = client.get(url("gibt-es-nicht"), **bearer(world.key))
    assert unknown.status_code == 404
    assert errors_of(unknown) == [{"field": "slug", "message": "no such use case"}]
    assert client.get(url(), **bearer("treue_not-a-key")).status_code == 401
    Service.objects.filter(pk=world.service.pk).update(active=False)
    assert client.get(url(), **bearer(world.key)).status_code == 401


def test_a_wrong_key_does_not_hide_a_lead_session(world: World) -> None:
    client = as_user(world, "lead")
    assert client.get(url(), **bearer("treue_not-a-key")).status_code == 200


# --- the weeks asked for ----------------------------------------------------------------------


@pytest.mark.parametrize(("query", "field", "message"), [
    ({"from": "2026-48"}, "from", "String should match pattern"),
    ({"to": "2026-W4"}, "to", "String should match pattern"),
    ({"from": "2026-w10"}, "from", "String should match pattern"),
    ({"from": "2021-W53"}, "from", "2021 has no ISO week 53"),
    ({"to": "2026-W00"}, "to", "2026 has no ISO week 0"),
    ({"from": "1999-W52"}, "from", "the year must lie between 2000 and 2999"),
    ({"to": "3000-W01"}, "to", "the year must lie between 2000 and 2999"),
    ({"from": "2026-W10", "to": "2026-W09"}, "from", "must not lie after `to`"),
    ({"from": "2024-W01", "to": "2025-W53"}, "to", "2025 has no ISO week 53"),
    ({"from": "2024-W01", "to": "2026-W01"}, "from", "at most 104 weeks at a time, not 105"),
])
def test_bad_weeks(world: World, client: Client, query: dict[str, str], field: str,
                   message: str) -> None:
    response = client.get(url(**query), **bearer(world.key))
    assert response.status_code == 400, response.content
    [error] = errors_of(response)
    assert error["field"] == field
    assert error["message"].startswith(message), error


def test_range_limits(world: World, client: Client) -> None:
    # 2020 has 53 ISO weeks: 2020-W01 to 2021-W52 are 105 weeks, 2020-W02 to it 104.
    full = client.get(url(**{"from": "2020-W02", "to": "2021-W52"}), **bearer(world.key))
    assert full.status_code == 200
    weeks = full.json()["weeks"]
    assert len(weeks) == 104
    assert (weeks[0]["week"], weeks[-1]["week"]) == ("2020-W02", "2021-W52")
    assert "2020-W53" in [w["week"] for w in weeks]
    too_many = client.get(url(**{"from": "2020-W01", "to": "2021-W52"}), **bearer(world.key))
    assert too_many.status_code == 400
    # Only `to`: the 12 weeks up to it. Only `from`: up to the current week.
    only_to = client.get(url(to="2021-W52"), **bearer(world.key)).json()["weeks"]
    assert [w["week"] for w in only_to][0] == "2021-W41" and len(only_to) == 12
    only_from = client.get(url(**{"from": world.week}), **bearer(world.key)).json()["weeks"]
    assert [w["week"] for w in only_from] == [world.week, week_label(timezone.localdate())]
    # A week in the future is a week without answers, not an error.
    ahead = week_label(timezone.localdate() + timedelta(weeks=3))
    future = client.get(url(to=ahead), **bearer(world.key))
    assert future.status_code == 200
    assert future.json()["weeks"][-1]["volume"] == 0


# --- the published schema -----------------------------------------------------------------------


def test_openapi_documents_the_endpoint(db: None, client: Client) -> None:
    schema = client.get("/api/v1/openapi.json").json()
    operation = schema["paths"]["/api/v1/use-cases/{slug}/estimates"]["get"]
    assert {p["name"] for p in operation["parameters"]} == {"slug", "from", "to", "segment"}
    assert set(operation["responses"]) == {"200", "400", "401", "403", "404", "429", "503"}
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/EstimatesOut"}
    components = schema["components"]["schemas"]
    week = components["WeekOut"]["properties"]
    for name in ("estimate", "share_below_threshold", "claim_share", "flagged_share", "volume",
                 "judge_calls", "cost", "currency", "abstentions"):
        assert name in week, name
    assert set(components["EstimateOut"]["properties"]) == {
        "value", "low", "high", "n", "n_flagged", "n_random", "population", "too_few",
    }
    assert operation["security"] == [{"ServiceKey": []}, {"PersonSession": []}]


@pytest.fixture
def wsgi_app(db: None) -> Any:
    """The real WSGI application inside the test's transaction (as in test_api_fuzz.py)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.mark.parametrize("query", [{}, {"from": "2020-W02", "to": "2021-W52"}, "week"])
def test_responses_match_the_published_schema(world: World, wsgi_app: Any, query: Any) -> None:
    """A filled week and empty ones (nulls everywhere) against the served JSON schema; the
    fuzz tests mostly reach the 4xx answers of this operation."""
    if query == "week":
        query = {"from": world.week, "to": world.week}
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", wsgi_app)
    operation = schema["/api/v1/use-cases/{slug}/estimates"]["GET"]
    headers = {"Authorization": f"Bearer {world.key}"}
    case = operation.Case(path_parameters={"slug": "pruefung"}, query=query, headers=headers)
    response = case.call(headers=headers)
    assert response.status_code == 200
    case.validate_response(response, headers=headers, checks=[
        status_code_conformance, content_type_conformance, response_schema_conformance,
    ])


def test_an_answer_of_another_use_case_does_not_count(world: World, client: Client) -> None:
    other_service, _ = service_create(name="zweit-bot", use_cases=[world.other])
    ingest(other_service, world.other, "x-1", "Antwort X.")
    response = client.get(url(), **bearer(world.key))
    assert response.json()["weeks"][-1]["volume"] == 1
    assert Answer.objects.count() == 8
