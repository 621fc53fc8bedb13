"""The worker under supervision, as the demo and production run it: `scripts/supervise.sh`
around `celery worker` (docs/operations.md has the systemd units that do the same).

A worker can exit after a broker outage instead of reconnecting (issue 36), and then nothing is
judged until someone starts it again. The cause, reproduced by the cuts below (once or twice in
each of the last two runs): Celery 5.7.0's consumer, on a lost connection, first collects the
kombu connection (which drops the transport's link to its connection) and then closes it;
closing the channel that holds unacknowledged messages (acks_late) restores them to Redis
through a new client built from that link, and so fails with AttributeError "'NoneType' object
has no attribute 'hostname'", which Celery does not count among the connection errors it
retries: "Unrecoverable error", then the same error on "stopping Hub", and the worker exits
with status 1. 5.7.0 is the newest Celery and kombu; 5.6 did not close there, but could hang in
that collect instead (Celery GH-9705), which is worse than exiting. So the worker is
supervised. These tests prove that it comes back by itself and that every answer is judged: a
worker killed outright, and twenty cuts of the broker while answers arrive (the supervisor's
restarts are printed).

The broker of the cuts is a private redis-server behind a TCP proxy (the machine's Redis is
shared and never stopped): a cut of the proxy breaks every open connection and refuses new ones
while Redis keeps its queues (a network outage); every fifth cut kills Redis itself, which loses
what it held (a restart without persistence), so the reconciler has to send those runs again.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connections

from common.broker import transport_options
from judging.services.execution import judge_runs_reconcile
from monitoring.models import Answer, JudgeRun, UseCase
from monitoring.services.use_cases import use_case_create
from tests.integration.conftest import (
    BASE_DIR,
    IN_CI,
    Broker,
    _reset_publishing,
    route_to,
    wait_for,
    worker_env,
)
from tests.support.openai_server import FakeOpenAIServer, ScriptedJudge
from tests.support.redis_server import REDIS_SERVER, RedisServer
from tests.support.tcp_proxy import TcpProxy
from treue_site.celery import app as celery_app

C1 = "Der Behälter wird alle 5 Jahre geprüft."
C2 = "Kleine Behälter werden jährlich geprüft."
SUPERVISE = BASE_DIR / "scripts" / "supervise.sh"
# The demo's worker (scripts/demo.sh) and the flags of production's (docs/operations.md).
WORKER_FLAGS = [
    "--loglevel=INFO", "--pool=threads", "--concurrency=8",
    "--without-gossip", "--without-mingle", "--without-heartbeat",
]
READY_RE = re.compile(r"@\S+ ready\.")
CUTS = 20
ANSWERS = 200
# Each cut lasts 1 to 3 s, and comes once the worker is connected again and has finished a task
# since the last one: every cut meets a consumer that is working, not one still reconnecting.
CUT_SECONDS = (1.0, 3.0)
# The judge takes its time, so that cuts find tasks in the middle of their calls.
JUDGE_DELAY_SECONDS = (0.05, 0.3)


class SupervisedWorker:
    """`bash scripts/supervise.sh celery -A treue_site worker ...` in its own process group;
    `celery_pid()` is the worker the supervisor runs now."""

    def __init__(self, env: dict[str, str], log_path: Path, args: list[str]) -> None:
        self.env = env
        self.log_path = log_path
        self.args = args
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> SupervisedWorker:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                ["bash", str(SUPERVISE), sys.executable, "-m", "celery", "-A", "treue_site",
                 "worker", *WORKER_FLAGS, *self.args],
                cwd=BASE_DIR, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def starts(self) -> int:
        """How often a worker has said it is ready."""
        return len(READY_RE.findall(self.log()))

    def restarts(self) -> list[str]:
        return re.findall(r"supervise\.sh: .* ended with status \d+", self.log())

    def celery_pid(self) -> int | None:
        assert self.process is not None
        pid = self.process.pid
        try:
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except FileNotFoundError:
            return None
        return int(children[0]) if children else None

    def wait_ready(self, starts: int, timeout: float = 60) -> int:
        """Wait until the worker has been ready `starts` times; its pid."""
        wait_for(f"worker start {starts}", lambda: self.starts() >= starts, timeout=timeout,
                 interval=0.1)
        pid = self.celery_pid()
        assert pid is not None, self.log()[-3000:]
        return pid

    def stop(self) -> int | None:
        """TERM to the supervisor (as scripts/demo.sh and systemd stop it); its status, or None
        if it had to be killed."""
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
            return None


@pytest.fixture
def use_case(db: None) -> UseCase:
    # Overrides the shared fixture: every answer is in the sample.
    return use_case_create(
        slug="kundenservice", name="Kundenservice", language="de", sample_rate=1.0
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, not yet collected) is not alive either.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1][0] != "Z"


def _all_judged(ids: list[int]) -> bool:
    """Every answer judged; else the reconciler sends the runs whose message was lost again
    (beat does this every 5 minutes; TREUE_JUDGE_RECONCILE_AFTER_SECONDS is 2 here)."""
    if Answer.objects.filter(pk__in=ids).exclude(status=Answer.Status.JUDGED).exists():
        judge_runs_reconcile()
        return False
    return True


def _assert_judged_once(ids: list[int]) -> None:
    answers = Answer.objects.filter(pk__in=ids)
    assert answers.count() == len(ids)
    for answer in answers:
        runs = list(JudgeRun.objects.filter(answer=answer))
        assert [r.status for r in runs] == [JudgeRun.Status.SUCCEEDED], [r.error for r in runs]
        assert answer.current_run_id == runs[0].pk and answer.score == 1.0
        assert runs[0].claims.count() == 2


# --- A killed worker comes back --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_is_started_again_and_judges_what_arrives_after(
    broker: Broker, worker_database_url: str, judge_server: FakeOpenAIServer, tmp_path: Path,
    api: Any, make_answer: Any, use_case: UseCase,
) -> None:
    judge_server.responder = ScriptedJudge(claims=[C1, C2])
    queue = broker.new_queue("supervised")
    env = worker_env(database_url=worker_database_url, broker_url=broker.url,
                     judge_url=judge_server.base_url, var_dir=tmp_path)
    worker = SupervisedWorker(env, tmp_path / "worker.log",
                              ["--queues", queue, "--hostname", f"{queue}@%h"])
    worker.start()
    try:
        first = worker.wait_ready(1)
        with route_to(queue):
            before = api.post("/api/v1/answers", make_answer(external_id="before"))
            assert before.status_code == 201, before.content
            wait_for("the first answer to be judged",
                     lambda: _all_judged([before.json()["id"]]), interval=0.2)

            # The worker dies as after kombu's error, or the kernel's OOM killer: at once,
            # without a word. Nobody starts it by hand.
            os.kill(first, signal.SIGKILL)
            after = api.post("/api/v1/answers", make_answer(external_id="after"))
            assert after.status_code == 201, after.content
            second = worker.wait_ready(2, timeout=60)
            assert second != first and not _alive(first)
            assert worker.restarts() == [f"supervise.sh: '{sys.executable}' ended with status 137"]
            wait_for("the answer sent while it was dead to be judged",
                     lambda: _all_judged([after.json()["id"]]), interval=0.2)
        _assert_judged_once([before.json()["id"], after.json()["id"]])
    finally:
        status = worker.stop()
    # Stopped on purpose (TERM, as demo.sh and systemd stop it): the warm shutdown ends the
    # worker with 0, and the supervisor with it, leaving nothing behind.
    assert status == 0, worker.log()[-3000:]
    assert not _alive(second)
    assert len(worker.restarts()) == 1


# --- Twenty broker cuts under load -----------------------------------------------------------


@pytest.fixture
def broker_behind_proxy(tmp_path: Path) -> Iterator[tuple[RedisServer, TcpProxy, str]]:
    """A private Redis behind a proxy, the broker of this process and of the worker."""
    if not REDIS_SERVER:
        if IN_CI:
            pytest.fail("CI must run the broker cut test: redis-server is not installed")
        pytest.skip("needs redis-server on PATH to cut a broker of its own")
    server = RedisServer(tmp_path).start()
    proxy = TcpProxy("127.0.0.1", server.port).start()
    url = f"redis://127.0.0.1:{proxy.port}/0"
    # Celery reads CELERY_BROKER_URL from the environment before its own configuration.
    saved_env = os.environ.get("CELERY_BROKER_URL")
    os.environ["CELERY_BROKER_URL"] = url
    saved = celery_app.conf.broker_url, celery_app.conf.broker_transport_options
    # The options production derives for a Redis broker (settings.py), whatever this run's is.
    celery_app.conf.update(broker_url=url, broker_transport_options=transport_options(url))
    _reset_publishing(celery_app)
    try:
        yield server, proxy, url
    finally:
        if saved_env is None:
            del os.environ["CELERY_BROKER_URL"]
        else:
            os.environ["CELERY_BROKER_URL"] = saved_env
        celery_app.conf.update(broker_url=saved[0], broker_transport_options=saved[1])
        _reset_publishing(celery_app)
        proxy.cut()
        server.stop()


@pytest.mark.django_db(transaction=True)
def test_every_answer_is_judged_through_twenty_broker_cuts_under_load(
    broker_behind_proxy: tuple[RedisServer, TcpProxy, str], worker_database_url: str,
    judge_server: FakeOpenAIServer, tmp_path: Path, api: Any, make_answer: Any,
    use_case: UseCase,
) -> None:
    server, proxy, url = broker_behind_proxy
    rng = random.Random(36)
    judge_server.responder = ScriptedJudge(claims=[C1, C2])
    judge_server.delay_for = lambda index, request: rng.uniform(*JUDGE_DELAY_SECONDS)
    env = worker_env(database_url=worker_database_url, broker_url=url,
                     judge_url=judge_server.base_url, var_dir=tmp_path)
    # As the demo runs it: all queues (the broker is this test's alone) and beat in the worker.
    worker = SupervisedWorker(env, tmp_path / "worker.log",
                              ["--beat", f"--schedule={tmp_path / 'beat-schedule'}"])
    ids: list[int] = []
    failures: list[str] = []
    done = threading.Event()

    def ingest() -> None:
        """The load: answers arrive all through the cuts, one every 0.3 s."""
        try:
            for n in range(ANSWERS):
                if done.is_set():
                    return
                response = api.post("/api/v1/answers", make_answer(external_id=f"cut-{n}"))
                if response.status_code != 201:
                    failures.append(f"{response.status_code}: {response.content[:200]!r}")
                    return
                ids.append(response.json()["id"])
                time.sleep(0.3)
        finally:
            connections.close_all()  # this thread's own database connection

    worker.start()
    load = threading.Thread(target=ingest, daemon=True)
    started = time.monotonic()
    try:
        worker.wait_ready(1)
        load.start()
        for cut in range(CUTS):
            finished = worker.log().count("succeeded in")

            def working(finished: int = finished) -> bool:
                return worker.log().count("succeeded in") > finished

            wait_for(f"the worker to work again before cut {cut + 1}", working, timeout=90,
                     interval=0.1)
            time.sleep(rng.uniform(0.0, 0.5))
            if cut % 5 == 4:
                server.stop()  # Redis itself: gone with what it held
                time.sleep(rng.uniform(*CUT_SECONDS))
                server.start()
            else:
                proxy.cut()  # the network: connections break, Redis keeps its queues
                time.sleep(rng.uniform(*CUT_SECONDS))
                proxy.restore()
        cuts_done = time.monotonic() - started
        load.join(120)
        assert not failures, failures
        assert len(ids) == ANSWERS
        wait_for("every answer to be judged after the cuts", lambda: _all_judged(ids),
                 timeout=120, interval=1.0)
        _assert_judged_once(ids)
        # The worker noticed the cuts (each cut of the proxy breaks its connection), and runs.
        log = worker.log()
        assert log.count("Connection to broker lost") >= CUTS * 3 // 4, log[-5000:]
        assert worker.celery_pid() is not None
        # Gossip, mingle and worker events are off (WORKER_FLAGS): Celery's failing attempts to
        # close their channels after a lost connection ("Error on restarting Gossip:
        # AttributeError") are gone with them.
        assert "Error on restarting" not in log, log[-5000:]
        print(
            f"{CUTS} cuts in {cuts_done:.0f} s, all judged after {time.monotonic() - started:.0f}"
            f" s; worker restarts: {worker.restarts() or 'none'}"
        )
    finally:
        done.set()
        worker.stop()
