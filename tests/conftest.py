"""Shared fixtures: use cases, services with keys, users, an API client, the OpenAI server;
and the suite's markers, which follow the folders (see CONTRIBUTING.md):

- `integration`: the product as a whole or at its limits, which takes seconds a test — real
  processes (tests/integration, tests/bench, and tests that start Django in processes of their
  own: celery workers, gunicorn, redis-server) against the database and the broker; a live
  server (every test that uses `live_server`: the Python client, the trace producers); the
  adversarial sweeps of tests/hardening; and the modules and tests that mark themselves
  because they migrate the schema back and forth, seed the whole demo, sweep its whole corpus,
  fuzz the API, start Django or a script in processes of their own, sign in against a real
  OpenID provider or race committed transactions in threads;
- `browser` (tests/browser): Chromium driven through Playwright against a live server;
- `timing` (set by hand): asserts on the wall clock, so such tests take turns
  (tests/support/timing.py).

`pytest -m "not integration and not browser"` is the fast part; tests/domain runs without
Django on its own (tests/domain/pytest.ini).
"""

import gc
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from monitoring.models import Service, UseCase
from monitoring.services.use_cases import service_create, use_case_create
from tests.support.http import Environ, bearer
from tests.support.postgres import HISTORY_KEPT, drop_empty_history_partitions
from tests.support.postgresql_fast_flush.creation import keep_as_template
from tests.support.shared_world import FAST_HASHER, shared_world_open
from tests.support.timing import _timing_tests_take_turns  # noqa: F401  (an autouse fixture)
from tests.support.world import WorldBuilder

pytest_plugins = ["tests.support.openai_server", "tests.support.oidc_provider"]

# Compiled bytecode is kept even where PYTHONDONTWRITEBYTECODE is set (this machine sets it):
# every test process - the pytest-xdist workers, and the celery workers, gunicorn and Django
# processes that tests start - would otherwise compile Django, the libraries, Treue and rewrite
# the asserts of every test module anew, 10 s of each worker's start. __pycache__ is ignored by
# git.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

IN_CI = os.environ.get("CI") == "true"
TESTS = Path(__file__).resolve().parent
# The folders whose tests are marked, and the marker. Their modules start processes or a
# browser in module-scoped fixtures, so under pytest-xdist (--dist loadgroup) each module
# stays on one worker instead of starting them again on every worker.
MARKED_FOLDERS = {"integration": "integration", "bench": "integration", "browser": "browser"}
# Marked too, without keeping a module on one worker: their cases are many and independent.
SWEEP_FOLDERS = {"hardening": "integration"}
LIVE_SERVER_MARKER = "integration"
TRANSACTIONAL_FIXTURES = {"transactional_db", "live_server", "django_db_serialized_rollback"}
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup", "live_server"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        try:
            folder = Path(item.path).resolve().relative_to(TESTS).parts[0]
        except ValueError:
            continue
        marker = MARKED_FOLDERS.get(folder)
        if marker:
            item.add_marker(marker)
            if not item.get_closest_marker("xdist_group"):
                item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
        elif folder in SWEEP_FOLDERS:
            item.add_marker(SWEEP_FOLDERS[folder])
        if "live_server" in getattr(item, "fixturenames", ()):
            item.add_marker(LIVE_SERVER_MARKER)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Everything alive after collection (Django, the test items, hypothesis' strategies) stays
    # for the whole run: moved out of the garbage collector's sight, its full passes no longer
    # walk it again and again (7 % of the page tests' CPU time).
    gc.collect()
    gc.freeze()


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


def _transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    return not TRANSACTIONAL_FIXTURES.isdisjoint(getattr(item, "fixturenames", ())) or bool(
        marker and marker.kwargs.get("transaction")
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # A module's shared world (tests/support/shared_world.py) holds a transaction open: a test
    # that commits for real (and other threads that read what it committed) cannot run in it.
    if _transactional(item) and shared_world_open():
        pytest.fail("a transactional test runs inside a module's shared world, whose "
                    "transaction is open: move it to a module of its own")


@pytest.fixture(autouse=True)
def fast_password_hasher(request: pytest.FixtureRequest) -> None:
    """Every test with a database hashes passwords with MD5: the production hasher takes a good
    part of a second per password, on purpose, and the suite creates hundreds of users."""
    if DATABASE_FIXTURES.isdisjoint(request.fixturenames) and not request.node.get_closest_marker(
        "django_db"
    ):
        return
    request.getfixturevalue("settings").PASSWORD_HASHERS = FAST_HASHER


@pytest.fixture
def world_builder(request: pytest.FixtureRequest, settings: Any) -> WorldBuilder:
    """The shared builder of test worlds (tests/support/world.py); the local OpenAI-compatible
    server starts only if the world needs it. The world fixture asks for the database."""
    return WorldBuilder(settings, lambda: request.getfixturevalue("openai_server"))


@pytest.fixture
def use_case(db: None) -> UseCase:
    return use_case_create(slug="kundenservice", name="Kundenservice", language="de")


@pytest.fixture
def other_use_case(db: None) -> UseCase:
    return use_case_create(slug="vertrieb", name="Vertrieb", language="en")


@pytest.fixture
def service_and_key(use_case: UseCase) -> tuple[Service, str]:
    return service_create(name="rag-bot", use_cases=[use_case])


class ApiClient:
    """The Django test client speaking to the ingest API with a bearer key."""

    def __init__(self, client: Client, key: str | None) -> None:
        self.client = client
        self.key = key

    def _headers(self) -> Environ:
        return bearer(self.key)

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


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> None:
    """The test database as migrated - on PostgreSQL kept as the template that later test
    databases are copied from (tests/support/postgresql_fast_flush/creation.py) -, less the
    empty monthly partitions of answers and chunks older than HISTORY_KEPT (tests/support/
    postgres.py)."""
    with django_db_blocker.unblock():
        keep_as_template(connection)
        drop_empty_history_partitions(older_than=timezone.now() - HISTORY_KEPT)
