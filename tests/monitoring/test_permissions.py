"""Who may see which page: a matrix of users against URLs, then what each list contains."""

import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from monitoring.models import Answer, UseCase
from tests.support.world import WorldBuilder, ingested

PASSWORD = "pw-for-tests-only-8e2c"
EMPTY_STATE = "Ihnen ist noch kein Anwendungsfall zugeordnet"


@dataclass
class World:
    answer_a: Answer
    answer_b: Answer
    users: dict[str, User | None]


@pytest.fixture
def world(
    world_builder: WorldBuilder, use_case: UseCase, other_use_case: UseCase,
    service_and_key: Any, make_answer: Any,
) -> World:
    service_a, _ = service_and_key
    service_b, _ = world_builder.service("sales-bot", other_use_case)
    answer_a = ingested(service_a, make_answer(external_id="ext-in-a", question="Frage aus A?"))
    answer_b = ingested(
        service_b,
        make_answer(external_id="ext-in-b", use_case="vertrieb", question="Question from B?"),
    )

    def user(name: str, **extra: Any) -> User:
        return world_builder.user(name, password=PASSWORD, **extra)

    expert = user("expertin", expert_of=[use_case])
    lead = user("teamleitung", lead_of=[use_case])
    return World(
        answer_a=answer_a,
        answer_b=answer_b,
        users={
            "anonymous": None,
            "expert_a": expert,
            "lead_a": lead,
            "unassigned": user("niemand"),
            "staff": user("verwaltung", is_staff=True),
        },
    )


def client_for(world: World, who: str) -> Client:
    client = Client()
    user = world.users[who]
    if user is not None:
        client.force_login(user)
    return client


def url_for(world: World, name: str) -> str:
    return {
        "list": "/answers/",
        "detail_a": f"/answers/{world.answer_a.pk}/",
        "detail_b": f"/answers/{world.answer_b.pk}/",
        "admin": "/admin/",
        "health": "/health",
        "openapi": "/api/v1/openapi.json",
    }[name]


LOGIN = "→ login"  # 302 to /login/?next=<the url>
ADMIN_LOGIN = "→ admin login"  # 302 to the admin's own login page
URLS = ("list", "detail_a", "detail_b", "admin", "health", "openapi")
MATRIX = {
    #              list   detail_a detail_b admin        health openapi
    "anonymous":  (LOGIN, LOGIN,   LOGIN,   ADMIN_LOGIN, 200,   200),
    "expert_a":   (200,   200,     404,     ADMIN_LOGIN, 200,   200),
    "lead_a":     (200,   200,     404,     ADMIN_LOGIN, 200,   200),
    "unassigned": (200,   404,     404,     ADMIN_LOGIN, 200,   200),
    "staff":      (200,   200,     200,     200,         200,   200),
}
CELLS = [(who, url, expected) for who, row in MATRIX.items()
         for url, expected in zip(URLS, row, strict=True)]


@pytest.mark.parametrize(("who", "url", "expected"), CELLS,
                         ids=[f"{who}-{url}" for who, url, _ in CELLS])
def test_permission_matrix(world: World, who: str, url: str, expected: Any) -> None:
    path = url_for(world, url)
    response = client_for(world, who).get(path)
    if expected == LOGIN:
        assert response.status_code == 302
        assert response["Location"] == f"/login/?next={path}"
    elif expected == ADMIN_LOGIN:
        assert response.status_code == 302
        assert response["Location"] == f"/admin/login/?next={path}"
    else:
        assert response.status_code == expected


def test_expert_and_lead_see_only_their_use_cases_answers(world: World) -> None:
    for who in ("expert_a", "lead_a"):
        html = client_for(world, who).get("/answers/").content.decode()
        assert "ext-in-a" in html
        assert f'href="/answers/{world.answer_a.pk}/"' in html
        assert "ext-in-b" not in html
        assert f'href="/answers/{world.answer_b.pk}/"' not in html
        assert "Question from B?" not in html
        # B is not even offered as a filter choice.
        assert "Vertrieb" not in html


def test_filtering_for_a_foreign_use_case_reveals_nothing(world: World) -> None:
    html = client_for(world, "expert_a").get("/", {"use_case": "vertrieb"}).content.decode()
    assert "ext-in-b" not in html
    assert "Question from B?" not in html


def test_unassigned_user_sees_the_empty_state_and_no_answers(world: World) -> None:
    response = client_for(world, "unassigned").get("/")
    html = response.content.decode()
    assert EMPTY_STATE in html
    assert "ext-in-a" not in html and "ext-in-b" not in html
    assert not re.search(r'href="/answers/\d+/"', html)


def test_staff_sees_every_use_case(world: World) -> None:
    html = client_for(world, "staff").get("/answers/").content.decode()
    assert "ext-in-a" in html and "ext-in-b" in html
    assert EMPTY_STATE not in html
    assert "Verwaltung" in html  # the admin link is offered to staff only


def test_admin_link_is_not_offered_to_non_staff(world: World) -> None:
    html = client_for(world, "expert_a").get("/").content.decode()
    assert 'href="/admin/"' not in html


def test_non_staff_cannot_log_into_the_admin(world: World) -> None:
    client = Client()
    response = client.post(
        "/admin/login/?next=/admin/", {"username": "expertin", "password": PASSWORD}
    )
    assert response.status_code == 200  # the form again, with an error; no redirect
    assert client.get("/admin/").status_code == 302
    assert client.get("/admin/monitoring/answer/").status_code == 302


def test_health_needs_no_login_and_says_ok(world: World) -> None:
    response = Client().get("/health")
    assert response.status_code == 200
    # No worker runs here, so the overall status is "degraded" (tests/monitoring/test_health.py).
    assert response.json()["database"] == "ok"


def test_openapi_schema_is_public_but_the_api_is_not(world: World) -> None:
    client = client_for(world, "staff")
    assert client.get("/api/v1/openapi.json").json()["info"]["title"] == "Treue ingest API"
    # A logged-in person's session is not a service key.
    assert client.get(f"/api/v1/answers/{world.answer_a.pk}").status_code == 401
