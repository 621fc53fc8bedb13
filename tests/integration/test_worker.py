"""The judge tier end to end with real processes: answers come in through the ingest API, a real
`celery worker` process scores them against the local judge server, through the real broker
(Redis in CI) and database (PostgreSQL in CI; on a developer machine the embedded defaults: an
SQLite test database file and an SQLite-backed broker).

Each scenario checks the database (one run, claims once, the answer's score) and what the judge
server received (how many calls, when, at temperature 0).
"""

import socket
from typing import Any

import pytest
from django.utils import timezone

from judging.services import runs as judging
from judging.services.execution import judge_runs_reconcile
from monitoring.models import Answer, Claim, JudgeRun, UseCase
from monitoring.services.use_cases import use_case_create
from tests.integration.conftest import route_to, wait_for
from tests.support.openai_server import ScriptedJudge

pytestmark = pytest.mark.django_db(transaction=True)

C1 = "Der Behälter wird alle 5 Jahre geprüft."
C2 = "Kleine Behälter werden jährlich geprüft."
C3 = "Die Prüfung macht die Sicherheitsfachkraft."


@pytest.fixture
def use_case(db: None) -> UseCase:
    # Overrides the shared fixture: every answer is in the sample.
    return use_case_create(
        slug="kundenservice", name="Kundenservice", language="de", sample_rate=1.0
    )


def ingest(api, make_answer, **overrides: Any) -> Answer:
    response = api.post("/api/v1/answers", make_answer(**overrides))
    assert response.status_code == 201, response.content
    answer = Answer.objects.get(pk=response.json()["id"])
    assert answer.sampled
    return answer


def finished_run(answer: Answer) -> JudgeRun | None:
    return (
        JudgeRun.objects.filter(answer=answer, status__in=["succeeded", "failed"])
        .order_by("pk")
        .first()
    )


def assert_temperature_0(server) -> None:
    assert server.requests, "the judge received no request"
    for request in server.requests:
        assert request["temperature"] == 0, request
        assert request["max_tokens"] > 0, request
        assert request["model"] == "judge-x", request


def assert_scored_once(answer: Answer, claims: int) -> JudgeRun:
    (run,) = JudgeRun.objects.filter(answer=answer)
    assert run.status == JudgeRun.Status.SUCCEEDED, run.error
    assert run.claims.count() == claims
    assert Claim.objects.filter(run__answer=answer).count() == claims
    answer.refresh_from_db()
    assert answer.status == Answer.Status.JUDGED
    assert answer.current_run_id == run.pk
    assert answer.score == run.score
    return run


def test_an_ingested_answer_is_scored_by_the_worker(
    on_shared_worker, judge_server, api, make_answer
):
    judge_server.responder = ScriptedJudge(
        claims=[C1, C2, C3], verdicts={C2: "TEILWEISE", C3: "UNGEDECKT"}
    )
    judge_server.usage_for = lambda request, content: (200, 3)

    answer = ingest(api, make_answer, external_id="e2e-1")
    run = wait_for("the run to finish", lambda: finished_run(answer), workers=(on_shared_worker,))

    run = assert_scored_once(answer, claims=3)
    assert run.score == 0.5
    assert (run.calls, run.prompt_tokens, run.completion_tokens) == (4, 800, 12)
    assert run.attempts == 1
    assert run.judge_model == "judge-x"
    labels = list(run.claims.order_by("position").values_list("label", flat=True))
    assert labels == ["GEDECKT", "TEILWEISE", "UNGEDECKT"]
    assert len(judge_server.requests) == 4
    assert_temperature_0(judge_server)
    # The page's API reads the same answer back as judged.
    assert api.get(f"/api/v1/answers/{answer.pk}").json()["status"] == "judged"


def test_429_with_retry_after_then_success(on_shared_worker, judge_server, api, make_answer):
    judge_server.responder = ScriptedJudge(claims=[C1, C2])
    judge_server.fail_next(429, headers={"Retry-After": "1"})

    answer = ingest(api, make_answer, external_id="rate-limited")
    wait_for("the run to finish", lambda: finished_run(answer), workers=(on_shared_worker,))

    run = assert_scored_once(answer, claims=2)
    assert run.attempts == 2
    assert run.error == ""
    assert len(judge_server.requests) == 1 + 3
    # The retry came no earlier than the server asked for.
    first, retry = judge_server.request_times[:2]
    assert retry - first >= 1.0, f"retried after {retry - first:.3f} s, Retry-After was 1 s"
    assert_temperature_0(judge_server)


def test_500_then_success(on_shared_worker, judge_server, api, make_answer):
    judge_server.responder = ScriptedJudge(claims=[C1, C2])
    judge_server.fail_next(500)

    answer = ingest(api, make_answer, external_id="server-error")
    wait_for("the run to finish", lambda: finished_run(answer), workers=(on_shared_worker,))

    run = assert_scored_once(answer, claims=2)
    assert run.attempts == 2
    assert len(judge_server.requests) == 1 + 3
    assert_temperature_0(judge_server)


def test_duplicate_deliveries_score_once(on_shared_worker, judge_server, api, make_answer):
    judge_server.responder = ScriptedJudge(claims=[C1, C2, C3])
    # Slow replies keep the first delivery busy while the others arrive.
    judge_server.delay_for = lambda index, request: 0.3
    offset = on_shared_worker.log_size()

    answer = ingest(api, make_answer, external_id="duplicates")  # the first delivery
    (run,) = JudgeRun.objects.filter(answer=answer)
    assert judging.judge_runs_enqueue(run_ids=[run.pk] * 4) == 4  # four more

    results = wait_for(
        "five deliveries to be processed",
        lambda: (r := on_shared_worker.results(offset)) and len(r) >= 5 and r,
        workers=(on_shared_worker,),
    )
    assert sorted(results) == ["scored", "skipped", "skipped", "skipped", "skipped"]
    run = assert_scored_once(answer, claims=3)
    assert run.attempts == 1
    assert len(judge_server.requests) == 1 + 3  # no call was made twice
    assert_temperature_0(judge_server)


def test_a_batchs_runs_fanned_out_by_the_worker_are_each_scored_once(
    on_shared_worker, judge_server, api, make_answer
):
    judge_server.responder = ScriptedJudge(claims=[C1])
    count = judging.FAN_OUT_ABOVE + 4  # sent as one message, which the worker fans out
    response = api.post("/api/v1/answers/batch", {
        "answers": [make_answer(external_id=f"fan-{i}") for i in range(count)]
    })
    assert response.json()["created"] == count, response.content
    answers = list(Answer.objects.filter(external_id__startswith="fan-"))
    wait_for(
        "every run to finish",
        lambda: all(finished_run(a) for a in answers),
        workers=(on_shared_worker,),
    )
    for answer in answers:
        assert_scored_once(answer, claims=1)
    assert len(judge_server.requests) == 2 * count  # decompose and one verdict each, once


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_judge_fails_the_run_visibly_after_the_last_attempt(
    start_worker, broker, api, make_answer
):
    queue = broker.new_queue("down")
    down = f"http://127.0.0.1:{_closed_port()}/v1"  # connection refused
    worker = start_worker(queue, judge_url=down)

    with route_to(queue):
        answer = ingest(api, make_answer, external_id="endpoint-down")
    run = wait_for("the run to fail", lambda: finished_run(answer), workers=(worker,))

    assert run.status == JudgeRun.Status.FAILED
    assert run.retryable is True  # the page offers to try again
    assert run.error.startswith("gave up after 3 attempts: judge unreachable"), run.error
    assert run.attempts == 3
    assert run.score is None and not run.claims.exists()
    answer.refresh_from_db()
    assert answer.status == Answer.Status.FAILED and answer.score is None
    # The run is committed before its task returns and the worker logs the result.
    wait_for("the worker to log the result", lambda: worker.results(), workers=(worker,),
             timeout=10)
    assert worker.results().count("gave up") == 1


def test_a_worker_killed_while_scoring_leaves_the_answer_scored_exactly_once(
    start_worker, broker, judge_server, api, make_answer
):
    judge_server.responder = ScriptedJudge(claims=[C1, C2])
    # The first request (the first worker's decomposition) hangs until the test wakes it.
    judge_server.delay_for = lambda index, request: 60.0 if index == 0 else 0.0
    queue = broker.new_queue("kill")
    first = start_worker(queue)

    with route_to(queue):
        answer = ingest(api, make_answer, external_id="killed")
        wait_for("the first worker to call the judge", lambda: judge_server.requests,
                 workers=(first,))
        (run,) = JudgeRun.objects.filter(answer=answer)
        assert run.status == JudgeRun.Status.RUNNING and run.attempts == 1

        first.kill()  # SIGKILL to the main process and its children, mid-call
        assert not first.alive
        judge_server.wake()
        second = start_worker(queue)

        # The dead worker's message is gone (SIGKILL: never acknowledged, never given back)
        # or comes back later; either way the reconciler finds the run once its lease ran
        # out, and the claim lets only one delivery score it.
        def scored() -> JudgeRun | None:
            current = JudgeRun.objects.get(pk=run.pk)
            if current.status == JudgeRun.Status.RUNNING:
                assert current.lease_expires_at is not None  # a running run holds a lease
                if current.lease_expires_at < timezone.now():
                    judge_runs_reconcile()
            return finished_run(answer)

        wait_for("the run to be scored after the kill", scored, timeout=40, interval=0.25,
                 workers=(second,))

    run = assert_scored_once(answer, claims=2)
    assert run.attempts == 2  # the dead worker's claim, then the one that finished
    wait_for("the second worker to log the result", lambda: second.results(),
             workers=(second,), timeout=10)
    assert second.results().count("scored") == 1
    # The dead worker's decomposition, then the second worker's decomposition and verdicts.
    assert len(judge_server.requests) == 1 + 3
    assert_temperature_0(judge_server)
