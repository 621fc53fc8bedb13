"""Separate queues with their own workers (issue 22, scale-out): the product's routes send the
follow-up of a batch ingest to the ingest queue, judge runs to the judge queue and beat's work
to housekeeping (common/queues.py), and two real workers, each consuming only its own
queues, share the work between them as a production deployment would.

The queues get this run's token as TREUE_QUEUE_PREFIX, so nothing else on the Redis sees them.
"""

from collections.abc import Iterator

import pytest

from common import queues
from judging.services import runs as judging
from monitoring.models import Answer, JudgeRun, UseCase
from monitoring.services.use_cases import use_case_create
from tests.integration.conftest import Broker, celery_app, wait_for
from tests.support.openai_server import ScriptedJudge

pytestmark = pytest.mark.django_db(transaction=True)

CLAIM = "Der Behälter wird alle 5 Jahre geprüft."


@pytest.fixture
def use_case(db: None) -> UseCase:
    return use_case_create(
        slug="kundenservice", name="Kundenservice", language="de", sample_rate=1.0
    )


@pytest.fixture
def product_routes(broker: Broker) -> Iterator[str]:
    """This process publishes by the product's routes, under this run's prefix."""
    prefix = f"{broker.token}-"
    broker.queues.extend(queues.queue_names(prefix))
    saved = (celery_app.conf.task_routes, celery_app.conf.task_default_queue)
    celery_app.conf.update(task_routes=queues.task_routes(prefix),
                           task_default_queue=queues.default_queue(prefix))
    try:
        yield prefix
    finally:
        celery_app.conf.update(task_routes=saved[0], task_default_queue=saved[1])


def test_the_routes_name_a_queue_for_every_kind_of_work():
    routes = queues.task_routes("p-")
    assert routes[judging.SCORE_ANSWERS_TASK] == {"queue": "p-ingest"}
    assert routes[judging.SCORE_ANSWER_TASK] == {"queue": "p-judge"}
    assert routes["review.tasks.shadow_run"] == {"queue": "p-judge"}
    assert routes["investigations.tasks.investigate_question"] == {"queue": "p-investigations"}
    assert queues.default_queue("p-") == "p-housekeeping"
    # Every task the product defines goes to one of the four queues.
    celery_app.loader.import_default_modules()
    ours = [n for n in celery_app.tasks if n.split(".")[0] in ("monitoring", "review",
                                                               "investigations", "traces")]
    assert judging.SCORE_ANSWER_TASK in ours and len(ours) >= 10
    router = celery_app.amqp.Router(queues=celery_app.amqp.queues)
    for name in ours:
        queue = router.route({}, name)["queue"].name
        assert queue in queues.queue_names(""), (name, queue)
    assert router.route({}, "monitoring.tasks.reconcile_judge_runs")["queue"].name == (
        "housekeeping")
    assert router.route({}, "traces.tasks.assemble_due_traces")["queue"].name == "housekeeping"


def test_two_workers_on_their_own_queues_share_a_batch(
    product_routes, start_worker, judge_server, api, make_answer
):
    prefix = product_routes
    judge_server.responder = ScriptedJudge(claims=[CLAIM])
    env = {"TREUE_QUEUE_PREFIX": prefix}
    front = start_worker(f"{prefix}ingest,{prefix}housekeeping", name=f"{prefix}front", **env)
    judges = start_worker(f"{prefix}judge", name=f"{prefix}judges", **env)

    count = judging.FAN_OUT_ABOVE + 6  # one fan-out message on the ingest queue
    response = api.post("/api/v1/answers/batch", {
        "answers": [make_answer(external_id=f"q-{i}") for i in range(count)]
    })
    assert response.json()["created"] == count, response.content
    answers = list(Answer.objects.filter(external_id__startswith="q-"))
    wait_for(
        "every run to finish",
        lambda: JudgeRun.objects.filter(answer__in=answers, status="succeeded").count() == count,
        workers=(front, judges), timeout=60,
    )
    # The front worker fanned the batch out and judged nothing; the judge worker judged every
    # run and fanned out nothing.
    fan_out = "Task monitoring.tasks.score_answers["
    assert front.log().count(fan_out) >= 1 and "succeeded" in front.log()
    assert front.results() == []
    assert fan_out not in judges.log()
    # A run is committed before its task returns and the worker logs the result.
    wait_for("the judge worker to log every result", lambda: len(judges.results()) >= count,
             workers=(judges,), timeout=10)
    assert sorted(judges.results()) == ["scored"] * count
    assert len(judge_server.requests) == 2 * count


def test_a_worker_without_queues_consumes_all_four(product_routes, start_worker, broker):
    prefix = product_routes
    worker = start_worker("", name=f"{prefix}all", TREUE_QUEUE_PREFIX=prefix, wait=False)
    worker.wait_ready()
    log = worker.log()
    for name in queues.queue_names(prefix):
        assert f".> {name} " in log, log[-3000:]
