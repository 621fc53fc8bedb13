"""Faults of the machinery around Treue, with real processes: the broker gone while answers
arrive, the database gone under a running web server, the judge endpoint gone for longer than
its retries last, bodies over the limits and a database that refuses one item of a batch.

What test_worker.py already proves is not repeated here: a worker killed mid-task
(test_a_worker_killed_while_scoring_leaves_the_answer_scored_exactly_once), 429 and 500 from
the judge, duplicate deliveries, and a judge unreachable until the run fails visibly
(test_an_unreachable_judge_fails_the_run_visibly_after_the_last_attempt). The judge test here
goes on from that failure: retried from the page, scored once the endpoint is back.

Servers that a test stops are its own (a private redis-server, a TCP proxy in front of
PostgreSQL or the judge): the machine's Redis and PostgreSQL are shared and never stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.db import connection, connections
from django.test import Client
from django.urls import reverse

from common.broker import transport_options
from judging.services.execution import judge_runs_reconcile
from monitoring.models import Answer, Chunk, JudgeRun, UseCase
from monitoring.services.use_cases import use_case_create
from tests.integration.conftest import (
    BASE_DIR,
    IN_CI,
    Worker,
    _reset_publishing,
    _watch,
    route_to,
    wait_for,
    worker_env,
)
from tests.support.openai_server import ScriptedJudge
from tests.support.redis_server import REDIS_SERVER, RedisServer
from tests.support.tcp_proxy import TcpProxy, free_port
from treue_site.celery import app as celery_app

C1 = "Der Behälter wird alle 5 Jahre geprüft."
C2 = "Kleine Behälter werden jährlich geprüft."
# An ingest request while the broker is down may cost one failed publish, never a hang.
MAX_INGEST_SECONDS_BROKER_DOWN = 3.0

transactional = pytest.mark.django_db(transaction=True)


@pytest.fixture
def use_case(db: None) -> UseCase:
    # Overrides the shared fixture: every answer is in the sample.
    return use_case_create(
        slug="kundenservice", name="Kundenservice", language="de", sample_rate=1.0
    )


def counts() -> tuple[int, int, int]:
    return Answer.objects.count(), Chunk.objects.count(), JudgeRun.objects.count()


# --- 1. The broker stopped while answers arrive ------------------------------------------------


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    if not REDIS_SERVER:
        if IN_CI:
            pytest.fail("CI must run the broker fault test: redis-server is not installed")
        pytest.skip("needs redis-server on PATH to stop and restart a broker of its own")
    server = RedisServer(tmp_path).start()
    # Celery reads CELERY_BROKER_URL from the environment before its own configuration.
    saved_env = os.environ.get("CELERY_BROKER_URL")
    os.environ["CELERY_BROKER_URL"] = server.url
    saved = celery_app.conf.broker_url
    saved_options = celery_app.conf.broker_transport_options
    # The options production derives for a Redis broker (settings.py), whatever this run's is.
    celery_app.conf.update(
        broker_url=server.url, broker_transport_options=transport_options(server.url)
    )
    _reset_publishing(celery_app)
    try:
        yield server
    finally:
        if saved_env is None:
            del os.environ["CELERY_BROKER_URL"]
        else:
            os.environ["CELERY_BROKER_URL"] = saved_env
        celery_app.conf.update(broker_url=saved, broker_transport_options=saved_options)
        _reset_publishing(celery_app)
        server.stop()


def _timed_post(
    api: Any, path: str, body: Any, *, on_hang: Callable[[], None]
) -> tuple[Any, float]:
    """POST in a thread, so that a request hanging on the broker fails the test after
    MAX_INGEST_SECONDS_BROKER_DOWN instead of hanging it; `on_hang` releases the request."""
    result: dict[str, Any] = {}

    def post() -> None:
        try:
            result["response"] = api.post(path, body)
        finally:
            connections.close_all()  # this thread's own database connection

    thread = threading.Thread(target=post, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(MAX_INGEST_SECONDS_BROKER_DOWN)
    seconds = time.monotonic() - started
    if thread.is_alive():
        on_hang()
        thread.join(30)
        pytest.fail(f"POST {path} still waiting after {seconds:.1f} s while the broker was down")
    return result["response"], seconds


def _unacknowledged(url: str) -> int:
    """Messages a worker holds without having acknowledged them (kombu's Redis transport
    keeps them in the hash "unacked")."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        return int(client.hlen("unacked"))
    finally:
        client.close()


@transactional
@pytest.mark.parametrize("outage", [
    "killed",
    # A broker that holds the connection but answers nothing (a hung host): the socket
    # timeouts in settings.py bound the publish.
    "frozen",
])
def test_answers_arriving_while_the_broker_is_down_are_stored_and_scored_once_it_is_back(
    request, private_redis, worker_database_url, judge_server, tmp_path, api, make_answer, outage
):
    judge_server.responder = ScriptedJudge(claims=[C1, C2])
    queue = f"treue-it-broker-{private_redis.port}"
    worker = Worker(
        f"{queue}-w",
        queue,
        worker_env(
            database_url=worker_database_url, broker_url=private_redis.url,
            judge_url=judge_server.base_url, var_dir=tmp_path,
        ),
        tmp_path / "worker.log",
        pool="threads",
    )
    _watch(request, worker)
    try:
        worker.start().wait_ready()
        with route_to(queue):
            # The broker works: an answer goes through to the worker as usual.
            first = api.post("/api/v1/answers", make_answer(external_id="before"))
            assert first.status_code == 201, first.content
            before = Answer.objects.get(pk=first.json()["id"])
            wait_for("the first answer to be judged",
                     lambda: Answer.objects.get(pk=before.pk).status == Answer.Status.JUDGED,
                     workers=(worker,))
            # ... and its message acknowledged (acks_late: after the task returned). A broker
            # killed in the very moment of that ack makes Celery's consumer crash on
            # reconnecting (AttributeError on a connection already gone, an upstream race; a
            # supervisor restarts such a worker), which is not what this test is about.
            wait_for("the first message to be acknowledged",
                     lambda: _unacknowledged(private_redis.url) == 0, workers=(worker,))

            thaw = private_redis.thaw if outage == "frozen" else lambda: None
            if outage == "killed":
                private_redis.stop()  # SIGKILL: the queue and every connection are gone
            else:
                private_redis.freeze()  # SIGSTOP: connections stay open, nothing answers
            latencies = []
            ids = []
            for i in range(4):
                response, seconds = _timed_post(
                    api, "/api/v1/answers", make_answer(external_id=f"down-{i}"), on_hang=thaw
                )
                latencies.append(seconds)
                assert response.status_code == 201, response.content
                ids.append(response.json()["id"])
            response, seconds = _timed_post(api, "/api/v1/answers/batch", {
                "answers": [make_answer(external_id=f"down-batch-{i}") for i in range(3)]
            }, on_hang=thaw)
            latencies.append(seconds)
            assert response.status_code == 200, response.content
            assert [r["status"] for r in response.json()["results"]] == [201] * 3
            ids += [r["answer"]["id"] for r in response.json()["results"]]
            assert max(latencies) < MAX_INGEST_SECONDS_BROKER_DOWN, latencies

            # Stored, sampled and waiting: the publish failed, the run did not.
            down = Answer.objects.filter(pk__in=ids)
            assert down.count() == 7
            assert all(a.sampled and a.status == Answer.Status.QUEUED for a in down)
            assert JudgeRun.objects.filter(
                answer__in=down, status=JudgeRun.Status.PENDING
            ).count() == 7

            # The broker comes back empty (it kept nothing); the worker reconnects by itself,
            # and the reconciler (a beat task every 5 minutes; called here directly) re-sends
            # the runs whose publish was lost.
            if outage == "killed":
                private_redis.start()
            else:
                private_redis.thaw()

            def all_judged() -> bool:
                if down.exclude(status=Answer.Status.JUDGED).exists():
                    judge_runs_reconcile()
                    return False
                return True

            wait_for("every answer to be judged after the broker came back", all_judged,
                     timeout=60, interval=1.0, workers=(worker,))
    finally:
        worker.stop()

    for answer in Answer.objects.filter(pk__in=ids):
        (run,) = JudgeRun.objects.filter(answer=answer)
        assert run.status == JudgeRun.Status.SUCCEEDED, run.error
        assert answer.current_run_id == run.pk and answer.score == 1.0
        assert run.claims.count() == 2
    # The first answer and the seven: each decomposed once and its two claims verified once,
    # however often the reconciler re-sent a run.
    assert len(judge_server.requests) == 8 * 3


# --- 2. The database unreachable ---------------------------------------------------------------


class WebServer:
    """gunicorn serving treue_site.wsgi, as in production (DEBUG off), in its own process group."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.env = env
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self.http = requests.Session()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> WebServer:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable, "-m", "gunicorn", "treue_site.wsgi:application",
                    "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4",
                    "--timeout", "60", "--access-logfile", "-",
                ],
                cwd=BASE_DIR, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.http.get(self.url + "/health", timeout=10).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"gunicorn did not start:\n{self.log()[-5000:]}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_bytes().decode("utf-8", "replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait(timeout=10)

    def request(self, method: str, path: str, **kwargs: Any) -> tuple[requests.Response, float]:
        started = time.monotonic()
        response = self.http.request(
            method, self.url + path, timeout=30, allow_redirects=False, **kwargs
        )
        return response, time.monotonic() - started


@pytest.fixture
def db_proxy() -> Iterator[TcpProxy]:
    parts = urlsplit(os.environ["DATABASE_URL"])
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    try:
        yield proxy
    finally:
        proxy.cut()


@pytest.fixture
def web_behind_db_proxy(
    db_proxy: TcpProxy, tmp_path: Path, transactional_db: None
) -> Iterator[WebServer]:
    parts = urlsplit(os.environ["DATABASE_URL"])
    netloc = f"{parts.username or 'postgres'}@127.0.0.1:{db_proxy.port}"
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "treue_site.settings"),
        DATABASE_URL=f"postgres://{netloc}/{connection.settings_dict['NAME']}",
        DEBUG="False",
        # The test process writes the session, gunicorn reads it: the same key signs both.
        SECRET_KEY=django_settings.SECRET_KEY,
        SESSION_COOKIE_SECURE="False",
        CSRF_COOKIE_SECURE="False",
        SECURE_SSL_REDIRECT="False",  # plain HTTP on 127.0.0.1, no TLS proxy in front
        ALLOWED_HOSTS="127.0.0.1",
        TREUE_VAR_DIR=str(tmp_path),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    env.pop("DB_CONN_MAX_AGE", None)  # the default: persistent connections, as in production
    server = WebServer(env, tmp_path / "gunicorn.log")
    try:
        yield server.start()
    finally:
        server.stop()


def _assert_503(response: requests.Response, *, json_body: bool) -> None:
    assert response.status_code == 503, (response.status_code, response.text[:500])
    assert int(response.headers["Retry-After"]) > 0
    if json_body:
        assert response.headers["Content-Type"].startswith("application/json")
        errors = response.json()["errors"]
        assert errors and "database" in errors[0]["message"]


@pytest.mark.timing
@pytest.mark.postgres
@transactional
def test_the_database_unreachable_is_503_with_retry_after_and_recovers_by_itself(
    web_behind_db_proxy, db_proxy, service_and_key, make_answer, use_case
):
    web = web_behind_db_proxy
    _, key = service_and_key
    bearer = {"Authorization": f"Bearer {key}"}
    lead = User.objects.create_user("leitung")
    use_case.team_leads.add(lead)
    browser = Client()
    browser.force_login(lead)
    cookie = {"Cookie": f"sessionid={browser.cookies['sessionid'].value}"}

    def post(external_id: str) -> tuple[requests.Response, float]:
        return web.request("POST", "/api/v1/answers", headers=bearer,
                           json=make_answer(external_id=external_id))

    response, _ = post("before")
    assert response.status_code == 201, response.text
    stored = response.json()["id"]
    assert web.request("GET", "/answers/", headers=cookie)[0].status_code == 200

    db_proxy.cut()  # refused from now on; gunicorn's open connection breaks mid-use
    try:
        checks = [
            (post("during"), True),
            (web.request("POST", "/api/v1/answers/batch", headers=bearer,
                         json={"answers": [make_answer(external_id="during-batch")]}), True),
            (web.request("GET", f"/api/v1/answers/{stored}", headers=bearer), True),
            (web.request("GET", "/api/v1/use-cases/kundenservice/estimates", headers=bearer),
             True),
            (web.request("GET", "/answers/", headers=cookie), False),
            (web.request("GET", f"/answers/{stored}/", headers=cookie), False),
            (web.request("GET", "/overview/", headers=cookie), False),
            (web.request("GET", "/review/", headers=cookie), False),
        ]
        for (response, seconds), json_body in checks:
            _assert_503(response, json_body=json_body)
            assert seconds < 5, f"{response.request.url} took {seconds:.1f} s"
        health, _ = web.request("GET", "/health")
        assert health.status_code == 503 and health.json()["database"] == "down"
    finally:
        db_proxy.restore()

    # Back without a restart, from the first request on.
    response, _ = post("during")
    assert response.status_code == 201, response.text  # the refused answer was not stored
    assert web.request("GET", "/health")[0].status_code == 200
    assert web.request("GET", "/answers/", headers=cookie)[0].status_code == 200
    assert web.request("GET", f"/api/v1/answers/{stored}", headers=bearer)[0].status_code == 200
    assert set(Answer.objects.values_list("external_id", flat=True)) == {"before", "during"}
    assert " 500 " not in web.log()


@pytest.mark.postgres
@pytest.mark.xfail(strict=True, reason=(
    "known limit: settings.py bounds new connections (connect_timeout) and connections to a "
    "host that went away (keepalives, tcp_user_timeout: unacknowledged data), but this proxy "
    "stalls in user space, so its kernel still acknowledges every packet; a query already "
    "sent on a persistent connection then waits until gunicorn's worker timeout, and psycopg "
    "has no client-side query timeout to answer 503 sooner"
))
@transactional
def test_a_database_that_stops_answering_is_503_within_seconds(
    web_behind_db_proxy, db_proxy, service_and_key, make_answer
):
    web = web_behind_db_proxy
    _, key = service_and_key
    bearer = {"Authorization": f"Bearer {key}"}
    response, _ = web.request("POST", "/api/v1/answers", headers=bearer,
                              json=make_answer(external_id="before"))
    assert response.status_code == 201, response.text

    db_proxy.stall()  # open connections and new ones: nothing comes back
    try:
        for path, body in (("/api/v1/answers", make_answer(external_id="during")),
                           ("/health", None)):
            try:
                response = web.http.request(
                    "POST" if body else "GET", web.url + path, headers=bearer, json=body,
                    timeout=10,
                )
            except requests.Timeout:
                pytest.fail(f"{path}: no answer within 10 s while the database hung")
            _assert_503(response, json_body=body is not None)
    finally:
        db_proxy.restore()


# --- 4. The judge endpoint down for longer than the retries last -----------------------------


@transactional
def test_a_run_failed_while_the_judge_was_down_is_retried_from_the_page_and_scored(
    start_worker, broker, judge_server, api, make_answer, use_case
):
    judge_server.responder = ScriptedJudge(claims=[C1, C2], verdicts={C2: "UNGEDECKT"})
    proxy = TcpProxy("127.0.0.1", int(urlsplit(judge_server.base_url).port or 0)).start()
    try:
        queue = broker.new_queue("judge-down")
        worker = start_worker(queue, judge_url=f"http://127.0.0.1:{proxy.port}/v1")
        lead = User.objects.create_user("leitung")
        use_case.team_leads.add(lead)
        page = Client()
        page.force_login(lead)

        proxy.cut()  # the judge endpoint goes away
        with route_to(queue):
            response = api.post("/api/v1/answers", make_answer(external_id="judge-down"))
            assert response.status_code == 201
            answer = Answer.objects.get(pk=response.json()["id"])
            failed = wait_for(
                "the run to fail after its attempts",
                lambda: JudgeRun.objects.filter(answer=answer, status="failed").first(),
                workers=(worker,),
            )
            # It waited and retried within its limits (TREUE_JUDGE_MAX_ATTEMPTS = 3 here), then
            # failed visibly; nothing reached the judge.
            assert failed.attempts == 3 and failed.retryable
            assert failed.error.startswith("gave up after 3 attempts: judge unreachable")
            assert not judge_server.requests
            retry_url = reverse("monitoring:judge_run_retry", args=[answer.pk, failed.pk])
            html = page.get(f"/answers/{answer.pk}/").content.decode()
            assert f'action="{retry_url}"' in html
            assert "gave up after 3 attempts" in html

            proxy.restore()  # the endpoint is back
            confirm = page.post(retry_url)
            assert confirm.status_code == 200  # the confirmation with the calls it will cost
            done = page.post(retry_url, {"confirm": "1"})
            assert done.status_code == 302
            assert Answer.objects.get(pk=answer.pk).status == Answer.Status.QUEUED
            wait_for("the retried run to be scored",
                     lambda: Answer.objects.get(pk=answer.pk).status == Answer.Status.JUDGED,
                     workers=(worker,))
    finally:
        proxy.cut()

    runs = list(JudgeRun.objects.filter(answer=answer).order_by("pk"))
    assert [r.status for r in runs] == ["failed", "succeeded"]
    assert runs[1].requested_by_id == lead.pk and runs[1].attempts == 1
    answer.refresh_from_db()
    assert answer.current_run_id == runs[1].pk and answer.score == 0.5
    assert len(judge_server.requests) == 3
    response = page.get(f"/answers/{answer.pk}/")
    assert response.status_code == 200
    assert 'class="run-error"' not in response.content.decode()


# --- 5. Oversized payloads and a write failing inside a batch -----------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("case", ["single over the limit", "batch over the limit", "501 items"])
def test_oversized_bodies_are_refused_and_nothing_is_written(api, make_answer, settings, case):
    settings.TREUE_MAX_BODY_BYTES = 20_000
    settings.TREUE_MAX_BATCH_BODY_BYTES = 200_000
    api.post("/api/v1/answers", make_answer(external_id="already-there"))
    before = counts()
    if case == "single over the limit":
        response = api.post("/api/v1/answers", make_answer(question="F" * 20_000))
        expected, url = 413, "/api/v1/answers"
    elif case == "batch over the limit":
        # Every item alone would fit; together they are over the batch's limit.
        items = [make_answer(external_id=f"big-{i}", answer="A" * 15_000) for i in range(14)]
        response = api.post("/api/v1/answers/batch", {"answers": items})
        expected, url = 413, "/api/v1/answers/batch"
    else:
        items = [make_answer(external_id=f"n-{i}", chunks=[]) for i in range(501)]
        response = api.post("/api/v1/answers/batch", {"answers": items})
        expected, url = 400, "/api/v1/answers/batch"
    assert response.request["PATH_INFO"] == url
    assert response.status_code == expected, response.content[:300]
    errors = response.json()["errors"]
    assert errors and errors[0]["message"]
    if expected == 400:
        assert errors[0]["field"] == "answers"
    assert counts() == before


def _refuse_external_id(marker: str) -> None:
    """A trigger that makes the database refuse one answer (as a full disk, a quota or a
    constraint of a DBA would), inside the test's transaction: rolled back with it."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION treue_test_refuse() RETURNS trigger AS $$ BEGIN "
                "RAISE EXCEPTION 'refused by a trigger for %', NEW.external_id; END $$ "
                "LANGUAGE plpgsql"
            )
            cursor.execute(
                "CREATE TRIGGER treue_test_refuse BEFORE INSERT ON monitoring_answer "
                f"FOR EACH ROW WHEN (NEW.external_id = '{marker}') "
                "EXECUTE FUNCTION treue_test_refuse()"
            )
        else:
            cursor.execute(
                "CREATE TRIGGER treue_test_refuse BEFORE INSERT ON monitoring_answer "
                f"WHEN NEW.external_id = '{marker}' "
                "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
            )


@pytest.mark.django_db
def test_a_write_failing_for_one_item_costs_only_that_item(api, make_answer):
    """A full disk cannot be simulated safely on a shared machine; a trigger refusing one
    row is the nearest: the database fails one insert of a batch, not the connection."""
    _refuse_external_id("boom")
    before = counts()
    items = [make_answer(external_id=e) for e in ("ok-1", "boom", "ok-2")]
    response = api.post("/api/v1/answers/batch", {"answers": items})
    assert response.status_code == 200, response.content[:500]
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 400, 201], results
    assert results[1]["errors"][0]["message"].startswith("the database refused this answer")
    assert set(Answer.objects.values_list("external_id", flat=True)) == {"ok-1", "ok-2"}
    assert counts() == (before[0] + 2, before[1] + 4, before[2] + 2)

    # Alone, the same answer gets the same clear error.
    response = api.post("/api/v1/answers", make_answer(external_id="boom"))
    assert response.status_code == 400, response.content[:500]
    assert response.json()["errors"][0]["message"].startswith("the database refused this answer")
    assert counts() == (before[0] + 2, before[1] + 4, before[2] + 2)
