"""Shared fixtures: use cases, services with keys, users, an API client, the OpenAI server."""

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from monitoring import services
from monitoring.models import Service, UseCase

pytest_plugins = ["tests.support.openai_server"]

IN_CI = os.environ.get("CI") == "true"


def _on_postgres() -> bool:
    return os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Tests marked postgres prove behaviour under real concurrency. A new user's machine runs on
    # SQLite and skips them with the reason shown; in CI a missing PostgreSQL is a failure.
    if "postgres" in item.keywords and not _on_postgres():
        if IN_CI:
            pytest.fail("CI must run on PostgreSQL: DATABASE_URL is not a PostgreSQL URL")
        pytest.skip("needs PostgreSQL (set DATABASE_URL)")


@pytest.fixture
def use_case(db: None) -> UseCase:
    return services.use_case_create(slug="kundenservice", name="Kundenservice", language="de")


@pytest.fixture
def other_use_case(db: None) -> UseCase:
    return services.use_case_create(slug="vertrieb", name="Vertrieb", language="en")


@pytest.fixture
def service_and_key(use_case: UseCase) -> tuple[Service, str]:
    return services.service_create(name="rag-bot", use_cases=[use_case])


class ApiClient:
    """The Django test client speaking to the ingest API with a bearer key."""

    def __init__(self, client: Client, key: str | None) -> None:
        self.client = client
        self.key = key

    def _headers(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.key}"} if self.key else {}

    def post(self, path: str, body: Any, raw: bool = False) -> Any:
        data = body if raw else json.dumps(body)
        return self.client.post(
            path, data, content_type="application/json", **self._headers()
        )

    def get(self, path: str) -> Any:
        return self.client.get(path, **self._headers())


@pytest.fixture
def api(client: Client, service_and_key: tuple[Service, str]) -> ApiClient:
    return ApiClient(client, service_and_key[1])


@pytest.fixture
def make_answer() -> Callable[..., dict[str, Any]]:
    """A valid ingest body; keyword arguments override fields."""

    def make(**overrides: Any) -> dict[str, Any]:
        body: dict[str, Any] = {
            "external_id": "a-1",
            "use_case": "kundenservice",
            "question": "Wie oft muss der Behälter geprüft werden?",
            "answer": "Der Behälter muss alle 5 Jahre geprüft werden.",
            "model": "gpt-4o-mini",
            "chunks": [
                {"text": "Prüfintervall: 5 Jahre für Behälter über 1.000 Liter.",
                 "id": "doc-7#3", "score": 0.82, "source": "Prüfordnung.pdf"},
                {"text": "Kleine Behälter werden jährlich geprüft.", "score": 0.61},
            ],
            "logprobs": None,
        }
        body.update(overrides)
        return body

    return make


@pytest.fixture
def db_vendor(db: None) -> str:
    return connection.vendor
