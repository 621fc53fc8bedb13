"""Creating judge runs and handing them to the workers: a pending run per sampled answer (in its
use case's judge mode, with that mode's prompt version), published by task name after commit
(jobs/framework.py); no service imports a task. Executing a run is execution.py's.
"""

from collections.abc import Iterable, Sequence

from jobs import framework as jobs
from judging.domain.batched import BATCHED_PROMPT_VERSION
from judging.domain.judge_prompt import PROMPT_VERSION
from judging.domain.single import SINGLE_PROMPT_VERSION
from monitoring.models import (
    Answer,
    JudgeMode,
    JudgeRun,
    UseCase,
)

SELF_JUDGING = (
    "the judge model {model!r} is the answer's own generator: a model judges itself too "
    "leniently, so Treue refuses; configure another judge model"
)


def judge_runs_create(
    *,
    answers: Sequence[Answer],
    judge_model: str | None = None,
    trigger: str = JudgeRun.Trigger.SAMPLE,
    requested_by_id: int | None = None,
) -> list[JudgeRun]:
    """Create pending runs (in their use cases' judge modes) and enqueue them once the
    surrounding transaction commits."""
    use_cases = {u.pk: u for u in UseCase.objects.filter(
        pk__in={answer.use_case_id for answer in answers}
    ).only("pk", "judge_mode", "judge_model")}
    runs = JudgeRun.objects.bulk_create(
        judge_run_new(
            answer=answer, requested_by_id=requested_by_id, trigger=trigger,
            judge_model=judge_model if judge_model is not None
            else use_cases[answer.use_case_id].effective_judge_model,
            judge_mode=use_cases[answer.use_case_id].judge_mode,
        )
        for answer in answers
    )
    judge_runs_enqueue_on_commit(run_ids=[run.pk for run in runs])
    return runs


def judge_run_new(
    *,
    answer: Answer,
    judge_model: str | None = None,
    trigger: str = JudgeRun.Trigger.SAMPLE,
    requested_by_id: int | None = None,
    judge_mode: str | None = None,
) -> JudgeRun:
    """A pending run for the answer, not yet saved, with ``judge_model`` and in ``judge_mode``
    (default: the answer's use case's); its prompt version is its mode's."""
    if judge_mode is None:
        judge_mode = answer.use_case.judge_mode
    return JudgeRun(
        answer=answer,
        use_case_id=answer.use_case_id,
        answer_created_at=answer.created_at,
        judge_model=judge_model if judge_model is not None
        else answer.use_case.effective_judge_model,
        prompt_version=prompt_version_of(judge_mode),
        judge_mode=judge_mode,
        trigger=trigger,
        requested_by_id=requested_by_id,
    )


def prompt_version_of(judge_mode: str) -> str:
    """The prompt version a run in ``judge_mode`` is judged with."""
    versions: dict[str, str] = {
        JudgeMode.BATCHED: BATCHED_PROMPT_VERSION, JudgeMode.SINGLE: SINGLE_PROMPT_VERSION,
    }
    return versions.get(judge_mode, PROMPT_VERSION)


# A publish costs ~0.7 ms of the caller's CPU (Celery builds, serialises and sends each
# message): for a batch of 500 answers with a hundred sampled, a tenth of its ingest. More runs
# than this go out as one message that a worker fans out, off the request.
FAN_OUT_ABOVE = 4

# The tasks' names (judging/tasks.py): published by name, so no service imports tasks.
SCORE_ANSWER_TASK = "monitoring.tasks.score_answer"
SCORE_ANSWERS_TASK = "monitoring.tasks.score_answers"

JUDGE_RUN = jobs.JobKind(
    model=JudgeRun,
    task=SCORE_ANSWER_TASK,
    what="judge run",
    started_field="started_at",
    # Failed for good by the reconciler, the run can still be retried from the page.
    abandoned_fields={"retryable": True},
    fan_out_task=SCORE_ANSWERS_TASK,
    fan_out_above=FAN_OUT_ABOVE,
)


def judge_runs_enqueue_on_commit(*, run_ids: Sequence[int]) -> None:
    jobs.publish_on_commit(
        JUDGE_RUN, run_ids, publish_ids=lambda ids: judge_runs_enqueue(run_ids=ids)
    )


def judge_runs_enqueue(*, run_ids: Iterable[int]) -> int:
    """Publish a task per run; more than FAN_OUT_ABOVE runs as one message from which a worker
    publishes them. A broker that is down costs nothing: the runs stay pending in the database
    and the reconciler enqueues them later. Returns how many runs were handed to the broker."""
    return jobs.publish(JUDGE_RUN, run_ids)


