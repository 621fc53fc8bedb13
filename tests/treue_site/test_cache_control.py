"""`Cache-Control: no-store` on everything that can carry an answer: pages, exports, the API.

A browser's disk cache or a proxy must not keep an answer, a verdict or an export after the
person logged out. Static files are no such thing and keep their own caching.
"""

import json
from typing import Any

import pytest
from django.test import Client

from tests.support.http import bearer
from tests.support.world import WorldBuilder
from tests.treue_site.world import World, build_world


@pytest.fixture
def world(world_builder: WorldBuilder, db: None) -> World:
    return build_world(world_builder)


def as_user(world: World, role: str) -> Client:
    client = Client()
    client.force_login(world.users[role])
    return client


def no_store(response: Any) -> bool:
    directives = {d.strip() for d in response.get("Cache-Control", "").split(",")}
    return "no-store" in directives


def test_every_page_and_export_with_answers_is_not_stored(world: World) -> None:
    answer, item = world.answer_a.pk, world.item_a.pk
    pages = {
        "lead_a": [
            "/overview/", "/answers/", f"/answers/{answer}/",
            f"/answers/{answer}/record.json", "/answers/export.csv",
            "/use-cases/recht/", "/use-cases/recht/judge/",
            "/investigations/", f"/investigations/{world.investigation_a.pk}/",
            f"/investigations/{world.investigation_a.pk}/progress.json",
            "/api/v1/use-cases/recht/estimates",
        ],
        "expert_a": ["/review/", f"/review/items/{item}/", "/review/calibration/recht/"],
    }
    for role, urls in pages.items():
        client = as_user(world, role)
        for url in urls:
            response = client.get(url)
            assert response.status_code == 200, (role, url, response.status_code)
            assert no_store(response), (role, url, response.get("Cache-Control"))


def test_the_api_answers_are_not_stored(world: World, make_answer: Any) -> None:
    client = Client()
    key = bearer(world.key_a)
    body = make_answer(external_id="cache-1", use_case="recht")
    posted = client.post("/api/v1/answers", json.dumps(body), content_type="application/json",
                         **key)
    assert posted.status_code == 201 and posted.json()["external_id"] == "cache-1"
    batch = client.post(
        "/api/v1/answers/batch",
        json.dumps({"answers": [make_answer(external_id="cache-2", use_case="recht")]}),
        content_type="application/json", **key,
    )
    assert batch.status_code == 200
    got = client.get(f"/api/v1/answers/{posted.json()['id']}", **key)
    assert got.status_code == 200 and got.json()["answer"] == body["answer"]
    estimates = client.get("/api/v1/use-cases/recht/estimates", **key)
    assert estimates.status_code == 200
    for response in (posted, batch, got, estimates):
        assert no_store(response), response.get("Cache-Control")


def test_errors_and_the_login_are_not_stored_either(world: World) -> None:
    # One rule for every response Django makes, so no page is forgotten.
    for response in (
        Client().get("/login/"),
        Client().get("/api/v1/answers/1"),
        as_user(world, "lead_a").get("/answers/999999/"),
        as_user(world, "lead_b").get(f"/answers/{world.answer_a.pk}/"),
    ):
        assert no_store(response), response.get("Cache-Control")


def test_a_view_that_chose_its_own_caching_keeps_it(world: World) -> None:
    # /health is never_cache already: its header is left as it was, not patched twice.
    response = Client().get("/health")
    assert response["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private"


def test_static_files_keep_their_caching(client: Client, db: None) -> None:
    response = client.get("/static/css/treue.css")
    assert response.status_code == 200
    assert not no_store(response)
