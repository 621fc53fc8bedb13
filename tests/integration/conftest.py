"""Real processes for the judge tier: `celery -A treue_site worker` subprocesses that share the
test database, a broker and the local judge server with the test.

The broker is the configured one when CELERY_BROKER_URL is set (Redis in CI), else an
SQLite-backed kombu broker in a temporary file (never the demo's broker in var/). Every worker
consumes only a queue whose name is unique to this test run, and the test process's Celery app
routes the tasks there while these tests run, so messages of other tests or other runs on the
same broker cannot reach these workers and theirs cannot leak out.

The database is the test database pytest-django created: on PostgreSQL the same server with the
test database's name, on SQLite the test database file (settings.py makes it a file). Tests
using workers must commit their rows (`django_db(transaction=True)`), or the worker cannot see
them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

import kombu.pools
import pytest
from django.conf import settings
from django.db import connection

from tests.support.openai_server import FakeOpenAIServer
from treue_site.celery import app as celery_app

BASE_DIR = Path(settings.BASE_DIR)
# CI proves the production services: there, a worker test on the embedded broker or SQLite
# would prove less than it claims, so it fails instead.
IN_CI = os.environ.get("CI") == "true"
READY_RE = re.compile(r"@\S+ ready\.")
# Startup of a worker is ~5 s on an idle machine (importing openai is most of it).
READY_TIMEOUT = 60
# What the workers are told, chosen so that every scenario takes seconds, not minutes.
WORKER_SETTINGS = {
    "TREUE_JUDGE_MODEL": "judge-x",
    "TREUE_JUDGE_API_KEY": "test-key",
    "TREUE_JUDGE_LEASE_SECONDS": "4",
    "TREUE_JUDGE_RECONCILE_AFTER_SECONDS": "2",
    "TREUE_JUDGE_BACKOFF_MAX_SECONDS": "1",
    "TREUE_JUDGE_MAX_ATTEMPTS": "3",
    "TREUE_JUDGE_TIMEOUT_SECONDS": "10",
    "TREUE_JUDGE_CONCURRENCY": "8",
}
# The apps whose tasks a test's workers run.
TASK_APPS = ("monitoring", "review", "investigations", "alarms")
WORKERS_KEY = pytest.StashKey[list[tuple["Worker", int]]]()

T = TypeVar("T")


# --- Broker and queues ---------------------------------------------------------------------


@dataclass
class Broker:
    url: str
    token: str  # unique to this test run; every queue and worker name contains it
    queues: list[str] = field(default_factory=list)

    def new_queue(self, label: str) -> str:
        queue = f"{self.token}-{label}"
        self.queues.append(queue)
        return queue


def _reset_publishing(app: Any) -> None:
    """Drop the app's cached broker connections and producers, so the next publish uses the
    broker URL now configured. kombu keeps its pools in a registry keyed by the connection; a
    pool closed but left there would be handed out again for the same URL ("Acquire on closed
    pool"), so the registry is emptied too."""
    kombu.pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@contextmanager
def route_to(queue: str) -> Iterator[None]:
    """Route the tasks this process publishes (ingest, reconciler, investigations) to `queue`."""
    saved = celery_app.conf.task_routes
    celery_app.conf.update(
        task_routes={f"{app}.tasks.*": {"queue": queue} for app in TASK_APPS}
    )
    try:
        yield
    finally:
        celery_app.conf.update(task_routes=saved)


def _clean_redis(url: str, token: str) -> None:
    """Remove what this run's queues and workers left in Redis: queue lists, bindings (also
    the killed workers' remote-control queues) and unacknowledged messages of killed workers,
    which kombu would otherwise restore into dead queues an hour later."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        for key in client.scan_iter(match=f"*{token}*"):
            client.delete(key)
        for key in client.scan_iter(match="_kombu.binding*"):
            if client.type(key) != b"set":
                continue
            members = [m for m in client.smembers(key) if token.encode() in m]
            if members:
                client.srem(key, *members)
        for tag, raw in client.hscan_iter("unacked"):
            try:
                routing_key = json.loads(raw)[2]
            except (ValueError, IndexError, TypeError):
                continue
            if token in str(routing_key):
                client.hdel("unacked", tag)
                client.zrem("unacked_index", tag)
    finally:
        client.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    configured = os.environ.get("CELERY_BROKER_URL")
    if IN_CI and not str(configured).startswith(("redis://", "rediss://")):
        pytest.fail("CI must run the worker tests on Redis: CELERY_BROKER_URL is not redis://")
    if configured:
        url = configured
    else:
        # Not settings.CELERY_BROKER_URL: unset, that is the demo's broker file in var/.
        url = f"sqla+sqlite:///{tmp_path_factory.mktemp('broker') / 'broker.sqlite3'}"
    broker = Broker(url=url, token=f"treue-it-{uuid.uuid4().hex[:10]}")
    saved = celery_app.conf.broker_url
    celery_app.conf.update(broker_url=url)
    _reset_publishing(celery_app)
    try:
        yield broker
    finally:
        celery_app.conf.update(broker_url=saved)
        _reset_publishing(celery_app)
        if url.startswith(("redis://", "rediss://")):
            _clean_redis(url, broker.token)


# --- The database the workers use ------------------------------------------------------------


@pytest.fixture(scope="module")
def worker_database_url(django_db_setup: None) -> str:
    """DATABASE_URL of the test database, for a process outside pytest."""
    name = str(connection.settings_dict["NAME"])
    if IN_CI and connection.vendor != "postgresql":
        pytest.fail("CI must run the worker tests on PostgreSQL: DATABASE_URL is not postgres")
    if connection.vendor == "sqlite":
        if name == ":memory:" or "mode=memory" in name:
            pytest.fail(
                "the SQLite test database is in memory, so a worker process cannot open it; "
                "settings.py must set DATABASES['default']['TEST']['NAME'] to a file"
            )
        return f"sqlite:///{name}"
    if connection.vendor == "postgresql":
        parts = urlsplit(os.environ["DATABASE_URL"])
        return urlunsplit(parts._replace(path="/" + name))
    pytest.fail(f"no worker database URL for {connection.vendor}")


# --- Workers -------------------------------------------------------------------------------


class Worker:
    """One `celery worker` process with 2 slots, in its own process group.

    `pool` is "threads" (production, docs/operations.md: judging waits on the network) or
    "prefork" (child processes: time limits, and reject_on_worker_lost when a child dies).
    """

    def __init__(
        self, name: str, queue: str, env: dict[str, str], log_path: Path, pool: str = "prefork"
    ) -> None:
        self.name = name
        self.queue = queue
        self.env = env
        self.log_path = log_path
        self.pool = pool
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable, "-m", "celery", "-A", "treue_site", "worker",
                    "--pool", self.pool, "--concurrency", "2",
                    "--without-heartbeat", "--without-mingle", "--without-gossip",
                    *(["--queues", self.queue] if self.queue else []),  # none: all four
                    "--hostname", f"{self.name}@%h",
                    "--loglevel", "INFO",
                ],
                cwd=BASE_DIR,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killed with its children
            )
        return self

    def state(self) -> str:
        if self.process is None:
            return "not started"
        code = self.process.poll()
        return "running" if code is None else f"exited with {code}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self, offset: int = 0) -> str:
        try:
            return self.log_path.read_bytes()[offset:].decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> Worker:
        deadline = time.monotonic() + timeout
        while not READY_RE.search(self.log()):
            if not self.alive:
                pytest.fail(f"worker {self.name} exited while starting:\n{self.log()[-5000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"worker {self.name} not ready after {timeout} s:\n{self.log()}")
            time.sleep(0.05)
        return self

    def kill(self) -> None:
        """SIGKILL to the whole process group: the main process and its pool children die
        without acknowledging, cleaning up or giving anything back."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """End the worker after its test: by then it has nothing left to do, and a warm
        shutdown (SIGTERM) would only cost seconds per worker. What a killed worker leaves on
        the broker goes with the run's queues (see `broker`)."""
        self.kill()

    def results(self, offset: int = 0) -> list[str]:
        """What score_answer returned, in the order the log shows it ('scored', 'skipped'…)."""
        return re.findall(
            r"Task monitoring\.tasks\.score_answer\[[^\]]+\] succeeded in [^:]+: '([^']*)'",
            self.log(offset),
        )


def worker_env(
    *, database_url: str, broker_url: str, judge_url: str, var_dir: Path, **overrides: str
) -> dict[str, str]:
    env = dict(os.environ)
    env.update(WORKER_SETTINGS)
    env.update(
        # The settings module this test process uses (pytest-django puts it in the environment).
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "treue_site.settings"),
        DATABASE_URL=database_url,
        CELERY_BROKER_URL=broker_url,
        TREUE_JUDGE_BASE_URL=judge_url,
        TREUE_VAR_DIR=str(var_dir),  # not the project's var/: nothing of the demo is touched
        DB_CONN_MAX_AGE="0",
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.update(overrides)
    return env


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """On a failure, attach the log of every worker the test used (its part of the log)."""
    report = yield
    if report.failed:
        for worker, offset in item.stash.get(WORKERS_KEY, []):
            state = worker.state()
            report.sections.append(
                (f"worker {worker.name} log ({state}, {worker.log_path})", worker.log(offset))
            )
    return report


def _watch(request: pytest.FixtureRequest, worker: Worker) -> None:
    request.node.stash.setdefault(WORKERS_KEY, []).append((worker, worker.log_size()))


@pytest.fixture(scope="module")
def judge_server() -> Iterator[FakeOpenAIServer]:
    """One local judge endpoint for the module: workers are told its URL when they start."""
    server = FakeOpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shared_worker(
    broker: Broker,
    worker_database_url: str,
    judge_server: FakeOpenAIServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Worker]:
    """A worker for the scenarios that need nothing special, started once for the module,
    with the production pool (threads); the tests' own workers (`start_worker`) use prefork."""
    tmp = tmp_path_factory.mktemp("shared-worker")
    queue = broker.new_queue("shared")
    worker = Worker(
        f"{broker.token}-shared",
        queue,
        worker_env(
            database_url=worker_database_url,
            broker_url=broker.url,
            judge_url=judge_server.base_url,
            var_dir=tmp,
        ),
        tmp / "worker.log",
        pool="threads",
    )
    try:
        worker.start().wait_ready()
        yield worker
    finally:
        worker.stop()


@pytest.fixture
def on_shared_worker(
    request: pytest.FixtureRequest, shared_worker: Worker, transactional_db: None
) -> Iterator[Worker]:
    """The shared worker, with this process's tasks routed to it and its log watched."""
    if not shared_worker.alive:
        pytest.fail(f"the shared worker died:\n{shared_worker.log()[-5000:]}")
    _watch(request, shared_worker)
    with route_to(shared_worker.queue):
        yield shared_worker


@pytest.fixture
def start_worker(
    request: pytest.FixtureRequest,
    broker: Broker,
    worker_database_url: str,
    judge_server: FakeOpenAIServer,
    tmp_path: Path,
    transactional_db: None,
) -> Iterator[Callable[..., Worker]]:
    """Start workers of this test's own: `start_worker(queue, judge_url=..., **env)` (`queue`:
    one queue or several, comma-separated; `name` then names the worker). They are killed at
    teardown (before the database is flushed)."""
    started: list[Worker] = []

    def start(
        queue: str, *, judge_url: str | None = None, wait: bool = True, name: str | None = None,
        **env: str,
    ) -> Worker:
        n = len(started) + 1
        worker = Worker(
            f"{name or queue}-w{n}",
            queue,
            worker_env(
                database_url=worker_database_url,
                broker_url=broker.url,
                judge_url=judge_url or judge_server.base_url,
                var_dir=tmp_path,
                **env,
            ),
            tmp_path / f"worker-{n}.log",
        )
        started.append(worker)
        _watch(request, worker)
        worker.start()
        return worker.wait_ready() if wait else worker

    try:
        yield start
    finally:
        for worker in started:
            worker.stop()


@pytest.fixture(autouse=True)
def _fresh_judge_server(judge_server: FakeOpenAIServer) -> Iterator[None]:
    judge_server.reset()
    yield
    judge_server.reset()


@pytest.fixture(autouse=True)
def _same_judge_settings(settings: Any, judge_server: FakeOpenAIServer) -> None:
    """This process (ingest, the reconciler) is configured like the workers, as the web and
    worker processes of a deployment are: ingest records the judge model on each run."""
    settings.TREUE_JUDGE_BASE_URL = judge_server.base_url
    for name, value in WORKER_SETTINGS.items():
        # As settings.py reads them: names are strings, the timeout a float, the rest integers.
        if name in ("TREUE_JUDGE_MODEL", "TREUE_JUDGE_API_KEY"):
            setattr(settings, name, value)
        elif name == "TREUE_JUDGE_TIMEOUT_SECONDS":
            setattr(settings, name, float(value))
        else:
            setattr(settings, name, int(value))


def wait_for(
    what: str,
    probe: Callable[[], T | None | Literal[False]],
    *,
    timeout: float = 30.0,
    workers: tuple[Worker, ...] = (),
    interval: float = 0.05,
) -> T:
    """Poll `probe` until it returns something truthy; fail after `timeout` seconds, or at once
    when one of `workers` has died. What it returns is never None or False (a probe says "not
    yet" with either)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        for worker in workers:
            if not worker.alive:
                pytest.fail(f"worker {worker.name} died while waiting for {what}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
