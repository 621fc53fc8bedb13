"""What HTTP clients send, to a real gunicorn serving treue_site.wsgi as in production: bodies
sent chunked, without a Content-Length (httpx given a generator, requests given an iterator,
curl with the header), are read like any other (common.request_body)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from monitoring.models import Answer
from tests.integration.test_faults import WebServer


@pytest.fixture
def web(worker_database_url: str, tmp_path: Path, transactional_db: None) -> Iterator[WebServer]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "treue_site.settings"),
        DATABASE_URL=worker_database_url,
        # Judge tasks of sampled answers go to a broker of this test's own: no worker reads it.
        CELERY_BROKER_URL=f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}",
        DEBUG="False",
        SECRET_KEY=settings.SECRET_KEY,
        SECURE_SSL_REDIRECT="False",  # plain HTTP on 127.0.0.1
        ALLOWED_HOSTS="127.0.0.1",
        TREUE_VAR_DIR=str(tmp_path),
        DB_CONN_MAX_AGE="0",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    server = WebServer(env, tmp_path / "gunicorn.log")
    try:
        yield server.start()
    finally:
        server.stop()


def in_pieces(data: bytes, size: int = 1000) -> Iterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_chunked_bodies_are_read_like_any_other(web, service_and_key, make_answer):
    headers = {"Authorization": f"Bearer {service_and_key[1]}",
               "Content-Type": "application/json"}
    body = json.dumps(make_answer(external_id="single")).encode()
    response, _ = web.request("POST", "/api/v1/answers", headers=headers, data=in_pieces(body))
    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in response.request.headers
    assert response.status_code == 201, response.text

    batch = json.dumps({"answers": [make_answer(external_id=f"b-{i}") for i in range(3)]})
    response, _ = web.request("POST", "/api/v1/answers/batch", headers=headers,
                              data=in_pieces(batch.encode()))
    assert response.status_code == 200, response.text
    assert [r["status"] for r in response.json()["results"]] == [201, 201, 201]

    too_big = json.dumps(make_answer(external_id="big", question="x" * 3_000_000)).encode()
    response, _ = web.request("POST", "/api/v1/answers", headers=headers,
                              data=in_pieces(too_big, 64 * 1024))
    assert response.status_code == 413, response.text
    assert response.json()["errors"][0]["message"].startswith("the body is larger than")

    assert sorted(Answer.objects.values_list("external_id", flat=True)) == [
        "b-0", "b-1", "b-2", "single"
    ]
