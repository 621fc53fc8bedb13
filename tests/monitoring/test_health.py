"""/health: each state of the database, the broker, the workers' heartbeat and the judge
backlog, through the public endpoint. (A real worker's heartbeat: tests/integration.)"""

import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError, connection
from django.test import Client
from django.utils import timezone

from ingest import services
from ingest.schemas import AnswerIn
from ingest.services import IngestOutcome
from monitoring.domain import health
from monitoring.models import Answer, UseCase, WorkerHeartbeat
from monitoring.services.health import worker_heartbeat_record
from monitoring.services.use_cases import service_create, use_case_create

KEYS = {"status", "database", "broker", "worker", "oldest_unscored_seconds"}


def get(client: Client) -> tuple[int, dict[str, Any]]:
    response = client.get("/health")
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    data = response.json()
    assert set(data) == KEYS
    assert set(data["worker"]) == {"status", "last_heartbeat_age_seconds"}
    return response.status_code, data


@pytest.fixture
def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local port that accepts connections and never says a word (a hung broker)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


@pytest.fixture
def alive(db: None) -> None:
    worker_heartbeat_record(hostname="celery@web-1", started=True)


def test_all_well(client: Client, alive: None) -> None:
    status, data = get(client)
    assert status == 200
    assert data["status"] == "ok"
    assert (data["database"], data["broker"]) == ("ok", "ok")
    assert data["worker"]["status"] == "ok"
    assert 0 <= data["worker"]["last_heartbeat_age_seconds"] < 5
    assert data["oldest_unscored_seconds"] == 0


def test_head_answers_like_get_for_load_balancers(client: Client, alive: None) -> None:
    response = client.head("/health")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert client.post("/health").status_code == 405


def test_nothing_public_but_states_and_ages(client: Client, alive: None, settings: Any) -> None:
    body = client.get("/health").content.decode()
    assert "web-1" not in body and "celery@" not in body
    assert settings.CELERY_BROKER_URL not in body and "sqlite" not in body
    assert "redis" not in body and "127.0.0.1" not in body


def test_no_worker_ever(client: Client, db: None) -> None:
    status, data = get(client)
    assert status == 200  # a load balancer keeps the web tier
    assert data["status"] == "degraded"
    assert data["worker"] == {"status": "none", "last_heartbeat_age_seconds": None}


def test_a_stale_worker(client: Client, db: None, settings: Any) -> None:
    now = timezone.now()
    worker_heartbeat_record(hostname="celery@gone", now=now - timedelta(seconds=500), started=True)
    worker_heartbeat_record(hostname="celery@late", now=now - timedelta(seconds=200))
    status, data = get(client)
    assert status == 200
    assert data["status"] == "degraded"
    assert data["worker"]["status"] == "stale"
    assert 200 <= data["worker"]["last_heartbeat_age_seconds"] < 210  # the newest counts
    settings.TREUE_HEALTH_WORKER_STALE_SECONDS = 300
    assert get(client)[1]["worker"]["status"] == "ok"


def test_heartbeats_update_one_row_per_worker(db: None) -> None:
    start = timezone.now() - timedelta(minutes=5)
    worker_heartbeat_record(hostname="celery@a", now=start, started=True)
    worker_heartbeat_record(hostname="celery@a", now=start + timedelta(seconds=30))
    beat = WorkerHeartbeat.objects.get(hostname="celery@a")
    assert (beat.started_at, beat.last_seen) == (start, start + timedelta(seconds=30))
    # A worker gone for over a week is forgotten when another one starts.
    worker_heartbeat_record(hostname="celery@old", now=start - timedelta(days=8))
    worker_heartbeat_record(hostname="celery@b", started=True)
    assert set(WorkerHeartbeat.objects.values_list("hostname", flat=True)) == {
        "celery@a", "celery@b"
    }


def _ingest(use_case: UseCase, ext: str, **extra: Any) -> Answer:
    service, _ = service_create(name=f"bot-{ext}", use_cases=[use_case])
    body = {"external_id": ext, "use_case": use_case.slug, "question": "Frage?",
            "answer": "Antwort.", "model": "gpt-4o-mini", "logprobs": None, **extra}
    result = services.answer_ingest(
        service=service, payload=AnswerIn.model_validate(body), raw=body
    )
    assert result.outcome == IngestOutcome.CREATED, result.errors
    assert result.answer is not None
    return result.answer


def test_the_oldest_unscored_answer(client: Client, alive: None, settings: Any) -> None:
    sampled = use_case_create(slug="alles", name="Alles", sample_rate=1.0)
    now = timezone.now()
    queued = _ingest(sampled, "q")
    judging = _ingest(sampled, "j")
    judged = _ingest(sampled, "d")
    assert queued.status == Answer.Status.QUEUED
    Answer.objects.filter(pk=judging.pk).update(
        status=Answer.Status.JUDGING, received_at=now - timedelta(seconds=7200)
    )
    Answer.objects.filter(pk=queued.pk).update(received_at=now - timedelta(seconds=600))
    # Neither a scored answer nor one outside the sample is waiting, however old.
    Answer.objects.filter(pk=judged.pk).update(
        status=Answer.Status.JUDGED, received_at=now - timedelta(days=30)
    )
    # The client's created_at is not when Treue got it (a replay of last month's answers).
    _ingest(sampled, "replay", created_at=(now - timedelta(days=40)).isoformat())

    status, data = get(client)
    assert status == 200
    assert 7200 <= data["oldest_unscored_seconds"] < 7210
    assert data["status"] == "degraded"  # over TREUE_HEALTH_BACKLOG_SECONDS (half an hour)
    settings.TREUE_HEALTH_BACKLOG_SECONDS = 3 * 3600
    assert get(client)[1]["status"] == "ok"
    Answer.objects.filter(pk=judging.pk).update(status=Answer.Status.JUDGED)
    assert 600 <= get(client)[1]["oldest_unscored_seconds"] < 610


def test_a_broker_that_refuses(
    client: Client, alive: None, settings: Any, closed_port: int
) -> None:
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{closed_port}/0"
    status, data = get(client)
    assert status == 200
    assert (data["status"], data["broker"], data["database"]) == ("degraded", "down", "ok")
    assert data["worker"]["status"] == "ok"


def test_a_broker_that_hangs_costs_at_most_two_seconds(
    client: Client, alive: None, settings: Any, silent_port: int
) -> None:
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{silent_port}/0"
    started = time.monotonic()
    status, data = get(client)
    assert time.monotonic() - started <= 2.5
    assert (status, data["broker"]) == (200, "down")


def test_an_embedded_broker_that_cannot_be_opened(
    client: Client, alive: None, settings: Any, tmp_path: Any
) -> None:
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'missing-dir' / 'broker.sqlite3'}"
    assert get(client)[1]["broker"] == "down"
    settings.CELERY_BROKER_URL = f"sqla+sqlite:///{tmp_path / 'broker.sqlite3'}"
    assert get(client)[1]["broker"] == "ok"


def test_the_database_is_down(client: Client, alive: None, monkeypatch: Any) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("connection refused")

    with monkeypatch.context() as patch:  # undone before the test database is rolled back
        patch.setattr(connection, "cursor", refuse)
        status, data = get(client)
    assert status == 503
    assert (data["status"], data["database"]) == ("unavailable", "down")
    assert data["worker"] == {"status": None, "last_heartbeat_age_seconds": None}
    assert data["oldest_unscored_seconds"] is None


@pytest.mark.parametrize(("age", "expected"), [
    (None, "none"), (0.0, "ok"), (90.0, "ok"), (90.1, "stale"), (10_000.0, "stale"),
])
def test_worker_status(age: float | None, expected: str) -> None:
    assert health.worker_status(heartbeat_age=age, stale_after=90) == expected


@pytest.mark.parametrize(("database", "broker", "worker", "oldest", "expected"), [
    (True, True, "ok", 0.0, "ok"),
    (True, True, "ok", 3600.0, "ok"),
    (True, True, "ok", 3601.0, "degraded"),
    (True, False, "ok", 0.0, "degraded"),
    (True, True, "stale", 0.0, "degraded"),
    (True, True, "none", 0.0, "degraded"),
    (False, True, "ok", 0.0, "unavailable"),
    (False, False, "none", None, "unavailable"),
])
def test_overall_status(
    database: bool, broker: bool, worker: str, oldest: float | None, expected: str
) -> None:
    assert health.overall_status(
        database_ok=database, broker_ok=broker, worker=worker, oldest_unscored=oldest,
        backlog_after=3600,
    ) == expected
