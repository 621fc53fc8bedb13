"""/health with a real `celery worker` process: its consumer writes a heartbeat while it runs,
/health says "ok", and a killed worker turns "stale" once its heartbeat is older than the limit.
The broker is the real one of the run (Redis in CI; else the temporary SQLite broker)."""

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from monitoring.models import WorkerHeartbeat
from tests.integration.conftest import Broker, Worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

BEAT = 1  # seconds between heartbeats in this test (30 by default)
STALE = 3


def health(client: Client) -> dict[str, Any]:
    response = client.get("/health")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_running_worker_beats_and_a_dead_one_goes_stale(
    start_worker: Callable[..., Worker], broker: Broker, settings: Any, client: Client
) -> None:
    settings.CELERY_BROKER_URL = broker.url
    settings.TREUE_HEALTH_WORKER_STALE_SECONDS = STALE
    assert health(client)["worker"] == {"status": "none", "last_heartbeat_age_seconds": None}

    queue = broker.new_queue("health")
    worker = start_worker(
        queue,
        TREUE_HEALTH_HEARTBEAT_SECONDS=str(BEAT),
        TREUE_HEALTH_WORKER_STALE_SECONDS=str(STALE),
    )
    hostname = f"{worker.name}@"

    def beat() -> WorkerHeartbeat | None:
        return WorkerHeartbeat.objects.filter(hostname__startswith=hostname).first()

    first = wait_for("the worker's first heartbeat", beat, workers=(worker,), timeout=20)
    report = health(client)
    assert report["status"] == "ok", report
    assert (report["database"], report["broker"]) == ("ok", "ok")
    assert report["worker"]["status"] == "ok"
    assert report["worker"]["last_heartbeat_age_seconds"] < STALE
    # It keeps beating: the timer repeats, the row is updated (one row per worker).
    wait_for(
        "a second heartbeat",
        lambda: (b := beat()) is not None and b.last_seen > first.last_seen,
        workers=(worker,), timeout=10,
    )
    assert WorkerHeartbeat.objects.filter(hostname__startswith=hostname).count() == 1
    assert health(client)["worker"]["status"] == "ok"

    worker.kill()
    report = wait_for(
        "the dead worker to go stale",
        lambda: (r := health(client))["worker"]["status"] == "stale" and r,
        timeout=STALE + 10, interval=0.2,
    )
    assert report["status"] == "degraded"
    assert report["worker"]["last_heartbeat_age_seconds"] > STALE
    assert report["database"] == "ok"
