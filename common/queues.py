"""Celery's queues and which task goes to which, so that each kind of work can have its own
workers (docs/operations.md, "Production").

- `ingest`: the follow-up of an ingest, the fan-out message that publishes a batch's judge runs.
- `judge`: the judge runs and the shadow runs of a judge comparison (they wait on the model).
- `investigations`: the self-consistency questions (they wait on the model too, and can be many
  at once when someone starts an investigation; they must not hold up the weekly judging).
- `housekeeping`: everything beat sends (reconcilers, review batches, alarms, retention) and
  whatever else; it is also the default queue.

A worker started without `--queues` consumes all four (the demo, a single machine); in
production each group of workers names its own. TREUE_QUEUE_PREFIX goes in front of every name,
so that several installations (or a test run) can share one Redis.
"""

from __future__ import annotations

from kombu.entity import Queue

INGEST, JUDGE, INVESTIGATIONS, HOUSEKEEPING = "ingest", "judge", "investigations", "housekeeping"
QUEUES = (INGEST, JUDGE, INVESTIGATIONS, HOUSEKEEPING)

# Task name → queue; a task not named here goes to housekeeping (the default queue).
ROUTES = {
    "monitoring.tasks.score_answers": INGEST,
    "monitoring.tasks.score_answer": JUDGE,
    "review.tasks.shadow_run": JUDGE,
    "investigations.tasks.investigate_question": INVESTIGATIONS,
}


def queue_names(prefix: str = "") -> tuple[str, ...]:
    """The four queues' names as the broker knows them."""
    return tuple(prefix + name for name in QUEUES)


def task_routes(prefix: str = "") -> dict[str, dict[str, str]]:
    """CELERY_TASK_ROUTES: each named task to its queue (the rest take the default queue)."""
    return {task: {"queue": prefix + queue} for task, queue in ROUTES.items()}


def task_queues(prefix: str = "") -> list[Queue]:
    """CELERY_TASK_QUEUES: what a worker without --queues consumes."""
    return [
        Queue(name, routing_key=name)  # type: ignore[no-untyped-call]  # kombu: untyped __init__
        for name in queue_names(prefix)
    ]


def default_queue(prefix: str = "") -> str:
    return prefix + HOUSEKEEPING
