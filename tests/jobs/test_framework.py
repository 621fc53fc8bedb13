"""The job framework (jobs/framework.py) on a real leased job (a judge run): claiming, leases,
re-queueing, giving up, publishing after commit and backoff."""

from datetime import timedelta
from typing import Any

import pytest
from celery.exceptions import Retry
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobs import framework as jobs
from monitoring.models import Answer, JudgeRun, UseCase
from monitoring.services.use_cases import use_case_create

KIND = jobs.JobKind(model=JudgeRun, task="tests.jobs.work", what="test job")
FANNED = jobs.JobKind(
    model=JudgeRun, task="tests.jobs.work", what="test job",
    fan_out_task="tests.jobs.fan_out", fan_out_above=2,
)


class RecordingTask:
    """Stands in for a Celery task: records what was published, or refuses like a broker
    that is down."""

    def __init__(self, name: str, sent: list[tuple[str, Any]], refuse: bool = False) -> None:
        self.name = name
        self.sent = sent
        self.refuse = refuse

    def apply_async(self, args: list[Any], **options: Any) -> None:
        if self.refuse:
            raise ConnectionError("broker down")
        self.sent.append((self.name, args[0]))


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    published: list[tuple[str, Any]] = []
    monkeypatch.setattr(jobs, "task_named", lambda name: RecordingTask(name, published))
    return published


@pytest.fixture
def use_case(db: None) -> UseCase:
    return use_case_create(slug="kundenservice", name="Kundenservice", sample_rate=1.0)


@pytest.fixture
def answer(api: Any, make_answer: Any) -> Answer:
    response = api.post("/api/v1/answers", make_answer())
    assert response.status_code == 201, response.content
    return Answer.objects.get(pk=response.json()["id"])


def new_job(answer: Answer, **fields: Any) -> JudgeRun:
    return JudgeRun.objects.create(
        answer=answer, use_case_id=answer.use_case_id, answer_created_at=answer.created_at,
        prompt_version="test", **fields
    )


def expire_lease(job: JudgeRun) -> None:
    JudgeRun.objects.filter(pk=job.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )


def test_a_job_is_claimed_once(answer: Answer) -> None:
    job = new_job(answer)
    token = jobs.claim(KIND, job.pk)
    assert token is not None
    assert jobs.claim(KIND, job.pk) is None  # the second delivery finds it taken
    job.refresh_from_db()
    assert (job.status, job.lease_token, job.attempts) == (JudgeRun.Status.RUNNING, token, 1)
    assert job.lease_expires_at is not None and job.lease_expires_at > timezone.now()


def test_an_expired_lease_lets_another_worker_take_over_and_the_first_cannot_finish(
    answer: Answer,
) -> None:
    job = new_job(answer)
    first = jobs.claim(KIND, job.pk)
    assert first is not None
    expire_lease(job)
    second = jobs.claim(KIND, job.pk)
    assert second is not None and second != first
    assert not jobs.finish(KIND, job.pk, first, status=JudgeRun.Status.SUCCEEDED)
    assert jobs.finish(KIND, job.pk, second, status=JudgeRun.Status.SUCCEEDED, calls=3)
    job.refresh_from_db()
    assert (job.status, job.attempts, job.calls) == (JudgeRun.Status.SUCCEEDED, 2, 3)
    assert job.lease_token is None and job.finished_at is not None
    assert jobs.claim(KIND, job.pk) is None  # finished is finished


def test_a_claim_stamps_the_started_field_and_honours_the_claimable_condition(
    answer: Answer,
) -> None:
    job = new_job(answer)
    stamped = jobs.JobKind(model=JudgeRun, task="t", what="t", started_field="started_at")
    assert jobs.claim(stamped, job.pk) is not None
    job.refresh_from_db()
    assert job.started_at is not None
    other = new_job(answer)
    nowhere = jobs.JobKind(
        model=JudgeRun, task="t", what="t", claimable=Q(trigger="rescore")
    )
    assert jobs.claim(nowhere, other.pk) is None


def test_release_gives_the_job_back_with_a_capped_wait(answer: Answer, settings: Any) -> None:
    settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS = 600
    job = new_job(answer)
    token = jobs.claim(KIND, job.pk)
    assert token is not None
    assert jobs.release(KIND, job.pk, token, reason="429", retry_in=10**9, retryable=True)
    job.refresh_from_db()
    assert (job.status, job.error, job.retryable, job.lease_token) == ("pending", "429", True, None)
    assert job.not_before is not None
    assert job.not_before <= timezone.now() + timedelta(seconds=601)
    assert not jobs.renew(KIND, job.pk, token, calls=1)  # released: the token holds nothing
    assert jobs.claim(KIND, job.pk) is not None


def test_fail_records_the_reason_only_for_the_holder(answer: Answer) -> None:
    job = new_job(answer)
    token = jobs.claim(KIND, job.pk)
    assert token is not None
    assert jobs.renew(KIND, job.pk, token, calls=2)
    assert jobs.fail(KIND, job.pk, token, reason="x" * 5000)
    job.refresh_from_db()
    assert job.status == "failed" and len(job.error) == jobs.MAX_ERROR_CHARS and job.calls == 2


def test_the_reconciler_requeues_lost_jobs_and_leaves_waiting_ones(
    answer: Answer, settings: Any, sent: list[tuple[str, Any]]
) -> None:
    settings.TREUE_JUDGE_RECONCILE_AFTER_SECONDS = 600
    JudgeRun.objects.all().delete()
    now = timezone.now()
    fresh = new_job(answer)  # its task is surely still on its way
    old = new_job(answer)
    JudgeRun.objects.filter(pk=old.pk).update(created_at=now - timedelta(hours=1))
    died = new_job(answer)
    assert jobs.claim(KIND, died.pk) is not None
    expire_lease(died)
    waiting = new_job(answer)  # released, its retry not yet due
    JudgeRun.objects.filter(pk=waiting.pk).update(
        created_at=now - timedelta(hours=1), not_before=now + timedelta(minutes=1)
    )
    working = new_job(answer)
    assert jobs.claim(KIND, working.pk) is not None  # lease still valid
    assert jobs.reconcile(KIND) == 2
    assert sorted(pk for _, pk in sent) == sorted([old.pk, died.pk])
    assert {pk for _, pk in sent}.isdisjoint({fresh.pk, waiting.pk, working.pk})


def test_a_job_whose_worker_is_lost_every_time_is_given_up(
    answer: Answer, settings: Any, sent: list[tuple[str, Any]]
) -> None:
    settings.TREUE_JUDGE_MAX_ATTEMPTS = 3
    JudgeRun.objects.all().delete()
    job = new_job(answer)
    abandoned: list[int] = []
    for attempt in range(1, 4):
        assert jobs.claim(KIND, job.pk) is not None
        expire_lease(job)  # the worker died
        jobs.reconcile(KIND, on_abandoned=lambda j: abandoned.append(j.pk))
        job.refresh_from_db()
        assert job.attempts == attempt
    assert job.status == "failed" and abandoned == [job.pk]
    assert job.error.startswith("gave up after 3 attempts: the worker was lost")
    assert [pk for _, pk in sent] == [job.pk, job.pk]  # re-queued twice, then given up


def test_give_up_fails_only_a_pending_job(answer: Answer) -> None:
    pending, running = new_job(answer), new_job(answer)
    assert jobs.claim(KIND, running.pk) is not None
    assert jobs.give_up(KIND, pending.pk, reason="gave up after 15 attempts: 503")
    assert not jobs.give_up(KIND, running.pk, reason="late")
    pending.refresh_from_db()
    running.refresh_from_db()
    assert (pending.status, pending.error) == ("failed", "gave up after 15 attempts: 503")
    assert running.status == "running"


class FakeTask:
    """Enough of a bound Celery task for retry_or_give_up."""

    def __init__(self, retries: int) -> None:
        self.request = type("Request", (), {"retries": retries})()
        self.countdowns: list[float] = []

    def retry(self, countdown: float) -> Retry:
        self.countdowns.append(countdown)
        return Retry()


def test_a_transient_failure_is_retried_with_backoff_until_the_last_attempt(
    settings: Any,
) -> None:
    settings.TREUE_JUDGE_MAX_ATTEMPTS = 3
    given_up: list[str] = []
    error = TimeoutError("judge timed out")
    early = FakeTask(retries=0)
    with pytest.raises(Retry):
        jobs.run_task(
            early, execute=lambda: (_ for _ in ()).throw(error), give_up=given_up.append,
            transient=(TimeoutError,),
        )
    assert given_up == [] and 1 <= early.countdowns[0] <= 2
    last = FakeTask(retries=2)
    outcome = jobs.run_task(
        last, execute=lambda: (_ for _ in ()).throw(error), give_up=given_up.append,
        transient=(TimeoutError,),
    )
    assert outcome == "gave up" and given_up == ["gave up after 3 attempts: judge timed out"]
    with pytest.raises(ValueError):  # not transient: no retry hides a bug
        jobs.run_task(
            FakeTask(0), execute=lambda: (_ for _ in ()).throw(ValueError("bug")),
            give_up=given_up.append, transient=(TimeoutError,),
        )


@pytest.mark.parametrize(
    ("retries", "retry_after", "low", "high"),
    [(0, None, 1, 2), (4, None, 16, 32), (30, None, 300, 600), (0, 45.0, 45, 45),
     (0, 10**6, 600, 600)],
)
def test_backoff_doubles_with_jitter_up_to_its_cap(
    settings: Any, retries: int, retry_after: float | None, low: float, high: float
) -> None:
    settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS = 600
    delays = [jobs.backoff_seconds(retries, retry_after) for _ in range(100)]
    assert all(low <= d <= high for d in delays)


@pytest.mark.django_db(transaction=True)
def test_publish_on_commit_publishes_only_after_the_commit(
    api: Any, make_answer: Any, sent: list[tuple[str, Any]]
) -> None:
    response = api.post("/api/v1/answers", make_answer())
    answer = Answer.objects.get(pk=response.json()["id"])
    sent.clear()
    with transaction.atomic():
        job = new_job(answer)
        jobs.publish_on_commit(KIND, [job.pk])
        assert sent == []  # a worker must not look for a job it cannot see yet
    assert sent == [("tests.jobs.work", job.pk)]
    sent.clear()
    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = new_job(answer)
        jobs.publish_on_commit(KIND, [rolled_back.pk])
        raise RuntimeError("rolled back")
    assert sent == []


def test_many_jobs_go_out_as_one_fan_out_message(
    sent: list[tuple[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert jobs.publish(FANNED, [1, 2]) == 2
    assert sent == [("tests.jobs.work", 1), ("tests.jobs.work", 2)]
    sent.clear()
    assert jobs.publish(FANNED, [1, 2, 3]) == 3
    assert sent == [("tests.jobs.fan_out", [1, 2, 3])]
    # A broker that is down stops the loop; the reconciler publishes the rest later.
    monkeypatch.setattr(jobs, "task_named", lambda name: RecordingTask(name, sent, refuse=True))
    assert jobs.publish(FANNED, [4, 5]) == 0
    assert jobs.publish(FANNED, [4, 5, 6]) == 0


def test_tasks_are_found_by_the_names_services_publish() -> None:
    from investigations.services import QUESTION
    from judging.services.runs import JUDGE_RUN

    for name in (JUDGE_RUN.task, JUDGE_RUN.fan_out_task, QUESTION.task):
        assert name is not None
        assert jobs.task_named(name).name == name


def test_every_task_of_the_beat_schedule_is_found_by_its_name() -> None:
    from treue_site.celery import app

    for entry in app.conf.beat_schedule.values():
        assert jobs.task_named(entry["task"]).name == entry["task"]
