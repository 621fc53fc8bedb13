"""An optional read replica for the dashboards (issue 22, scale-out), with a second database on
the same PostgreSQL server standing in for it: a copy of the primary taken at one moment, which
then falls behind as a real replica would, only for good.

gunicorn runs with DATABASE_URL (the primary) and DATABASE_REPLICA_URL (the copy): the
estimates API, which reads its figures through the dashboard selectors, sees the copy; ingest
and everything else go to the primary.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import connection, connections

from common import db_router
from dashboard.selectors.figures import use_case_weeks
from monitoring.models import Answer
from tests.integration.test_faults import WebServer
from tests.support.postgres import admin_connection, database_url

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def replica_of_primary(transactional_db: None) -> Iterator[Callable]:
    """`copy()` makes the replica: the primary (the test database) as it is at that moment."""
    primary = str(connection.settings_dict["NAME"])
    name = f"{primary}_replica"

    def copy() -> str:
        for conn in connections.all():
            conn.close()  # a database being copied must have no other session
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{primary}"')
        return database_url(name)

    try:
        yield copy
    finally:
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def web_with(database_url: str, replica_url: str, tmp_path: Path) -> WebServer:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "treue_site.settings"),
        DATABASE_URL=database_url,
        DATABASE_REPLICA_URL=replica_url,
        CELERY_BROKER_URL=f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}",  # no worker reads it
        DEBUG="False",
        SECRET_KEY=django_settings.SECRET_KEY,
        SECURE_SSL_REDIRECT="False",
        ALLOWED_HOSTS="127.0.0.1",
        TREUE_VAR_DIR=str(tmp_path),
        DB_CONN_MAX_AGE="0",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return WebServer(env, tmp_path / "gunicorn.log").start()


def this_weeks_volume(response) -> int:
    assert response.status_code == 200, response.text
    return response.json()["weeks"][-1]["volume"]


def test_dashboards_read_the_replica_and_everything_else_the_primary(
    replica_of_primary, worker_database_url, api, service_and_key, make_answer, tmp_path
):
    _, key = service_and_key
    for i in range(5):
        assert api.post("/api/v1/answers", make_answer(external_id=f"r-{i}")).status_code == 201
    replica_url = replica_of_primary()
    for i in range(5, 8):  # the replica never sees these
        assert api.post("/api/v1/answers", make_answer(external_id=f"r-{i}")).status_code == 201

    web = web_with(worker_database_url, replica_url, tmp_path)
    try:
        bearer = {"Authorization": f"Bearer {key}"}
        response, _ = web.request("GET", "/api/v1/use-cases/kundenservice/estimates",
                                  headers=bearer)
        assert this_weeks_volume(response) == 5  # the replica's figures
        # A write through the same server lands on the primary (and is refused nowhere).
        response, _ = web.request("POST", "/api/v1/answers", headers=bearer,
                                  json=make_answer(external_id="r-8"))
        assert response.status_code == 201, response.text
        # Idempotency is the primary's: the replica lacks r-6, yet its replay is no new answer.
        response, _ = web.request("POST", "/api/v1/answers", headers=bearer,
                                  json=make_answer(external_id="r-6"))
        assert response.status_code == 200, response.text
        response, _ = web.request("GET", "/api/v1/use-cases/kundenservice/estimates",
                                  headers=bearer)
        assert this_weeks_volume(response) == 5
        assert "error" not in web.log().lower().replace("errors", "")
    finally:
        web.stop()
    assert Answer.objects.filter(external_id__startswith="r-").count() == 9
    # Without a replica (this process) the same figures come from the primary.
    some_answer = Answer.objects.first()
    assert some_answer is not None
    assert use_case_weeks(use_case=some_answer.use_case, weeks=1)[-1].volume == 9


def test_the_router_sends_only_dashboard_reads_to_a_configured_replica(monkeypatch):
    router = db_router.ReplicaRouter()
    assert router.db_for_read(Answer) is None
    with db_router.dashboard_reads():
        assert router.db_for_read(Answer) is None  # no replica configured: the primary
        monkeypatch.setattr(db_router, "replica_configured", lambda: True)
        assert router.db_for_read(Answer) == "replica"
        assert router.db_for_write(Answer) == "default"
    assert router.db_for_read(Answer) is None
    assert router.allow_migrate("replica", "monitoring") is False
    assert router.allow_migrate("default", "monitoring") is None
