"""Celery tasks of the judge tier: score a run, fan out a batch's runs, reconcile lost runs.

Their names stay those they had in monitoring/tasks.py (messages in a queue and the beat
schedule name them), so each sets `name=`; treue_site/celery.py discovers this module.
"""

from celery import Task, shared_task
from django.conf import settings

from common import queues
from jobs import framework as jobs
from judging.client import JudgeUnavailable
from judging.services import runs as judging
from judging.services.execution import judge_run_execute, judge_run_give_up, judge_runs_reconcile


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no type hints
    name=judging.SCORE_ANSWER_TASK, **jobs.TASK_OPTIONS
)
def score_answer(self: Task, run_id: int) -> str:
    return jobs.run_task(
        self,
        execute=lambda: judge_run_execute(run_id=run_id),
        give_up=lambda reason: judge_run_give_up(run_id=run_id, reason=reason),
        transient=(JudgeUnavailable,),
    )


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no type hints
    name=judging.SCORE_ANSWERS_TASK,
    bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True,
)
def score_answers(self: Task, run_ids: list[int]) -> int:
    """Publish score_answer for each run: the fan-out of a batch's runs, sent as one message.
    From the product's ingest queue the runs go where the routes send them (the judge queue,
    common/queues.py); from a queue of its own (an operator's, a test's) they go where this
    message came from, as Celery's own retries do. Delivered twice, it publishes twice, which
    costs nothing: a run is claimed once."""
    info = self.request.delivery_info or {}
    exchange, routing_key = info.get("exchange"), info.get("routing_key")
    if routing_key in queues.queue_names(settings.TREUE_QUEUE_PREFIX):
        where = {}
    elif exchange == "" and routing_key:  # sent straight to a queue (Redis, embedded broker)
        where = {"queue": routing_key}
    elif exchange:
        where = {"exchange": exchange, "routing_key": routing_key}
    else:  # called in-process
        where = {}
    return jobs.publish_each(judging.SCORE_ANSWER_TASK, run_ids, what="judge run", **where)


@shared_task(  # type: ignore[untyped-decorator]  # celery ships no type hints
    name="monitoring.tasks.reconcile_judge_runs", ignore_result=True
)
def reconcile_judge_runs() -> int:
    return judge_runs_reconcile()
