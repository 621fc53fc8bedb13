"""The judge tier (tier 2): creating, claiming, executing and finishing judge runs.

A run is the unit of work. Ingest creates one per sampled answer in the same transaction as the
answer and enqueues `score_answer` after commit; a rescore creates another. The worker claims a
run with a conditional UPDATE that hands out a lease token; only the token's holder can finish
the run, and finishing is one transaction (claims, verdicts, the run, the answer's score), so a
run is scored exactly once however often its task is delivered.

A run's calls, tokens and cost add up every attempt of its holders: the calls of an attempt
that failed midway (a 429 after three verdicts) were billed too. Its claims, call log and score
come from the attempt that finished it.
"""

import dataclasses
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from monitoring.domain import judging
from monitoring.domain.judge_prompt import PROMPT_VERSION
from monitoring.domain.judging import CallResult, JudgeCall
from monitoring.judge_client import (
    JudgeClient,
    JudgeConfig,
    JudgeMisconfigured,
    JudgeUnavailable,
)
from monitoring.models import Answer, Claim, JudgePrice, JudgeRun

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
    """Create pending runs and enqueue them once the surrounding transaction commits."""
    runs = JudgeRun.objects.bulk_create(
        judge_run_new(
            answer=answer, judge_model=judge_model, trigger=trigger,
            requested_by_id=requested_by_id,
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
) -> JudgeRun:
    """A pending run for the answer, not yet saved."""
    return JudgeRun(
        answer=answer,
        judge_model=judge_model if judge_model is not None else settings.TREUE_JUDGE_MODEL,
        prompt_version=PROMPT_VERSION,
        trigger=trigger,
        requested_by_id=requested_by_id,
    )


def judge_runs_enqueue_on_commit(*, run_ids: Sequence[int]) -> None:
    ids = list(run_ids)
    transaction.on_commit(lambda: judge_runs_enqueue(run_ids=ids))


# A publish costs ~0.7 ms of the caller's CPU (Celery builds, serialises and sends each
# message): for a batch of 500 answers with a hundred sampled, a tenth of its ingest. More runs
# than this go out as one message that a worker fans out, off the request.
FAN_OUT_ABOVE = 4


def judge_runs_enqueue(*, run_ids: Iterable[int]) -> int:
    """Publish a task per run; more than FAN_OUT_ABOVE runs as one message from which a worker
    publishes them. A broker that is down costs nothing: the runs stay pending in the database
    and the reconciler enqueues them later. Returns how many runs were handed to the broker."""
    from monitoring.tasks import publish_each, score_answer, score_answers

    ids = list(run_ids)
    if len(ids) > FAN_OUT_ABOVE:
        return len(ids) if publish_each(score_answers, [ids], what="judge runs") else 0
    return publish_each(score_answer, ids, what="judge run")


def _claim(run_id: int) -> uuid.UUID | None:
    now = timezone.now()
    token = uuid.uuid4()
    claimed = JudgeRun.objects.filter(pk=run_id).filter(
        Q(status=JudgeRun.Status.PENDING)
        | Q(status=JudgeRun.Status.RUNNING, lease_expires_at__lt=now)
    ).update(
        status=JudgeRun.Status.RUNNING,
        lease_token=token,
        lease_expires_at=now + timedelta(seconds=settings.TREUE_JUDGE_LEASE_SECONDS),
        started_at=now,
        not_before=None,
        attempts=F("attempts") + 1,
    )
    return token if claimed == 1 else None


def _price(model: str, prompt_tokens: int, completion_tokens: int) -> Decimal | None:
    price = JudgePrice.objects.filter(judge_model=model).first()
    if price is None:
        return None
    return (
        price.prompt_per_1k * prompt_tokens + price.completion_per_1k * completion_tokens
    ) / 1000


class _Meter:
    """Counts the calls of one attempt as they return (from several threads)."""

    def __init__(self) -> None:
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._lock = threading.Lock()

    def wrap(self, call: JudgeCall) -> JudgeCall:
        def metered(messages: list[dict[str, str]]) -> CallResult:
            result = call(messages)
            with self._lock:
                self.calls += 1
                self.prompt_tokens += result.prompt_tokens
                self.completion_tokens += result.completion_tokens
            return result

        return metered


def _spent(
    run: JudgeRun, calls: int, prompt_tokens: int, completion_tokens: int
) -> dict[str, object]:
    """The run's usage fields: earlier attempts (as read after the claim) plus this one's."""
    prompt = run.prompt_tokens + prompt_tokens
    completion = run.completion_tokens + completion_tokens
    return {
        "calls": run.calls + calls,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cost": _price(run.judge_model, prompt, completion),
    }


def _finish_failed(
    run: JudgeRun,
    token: uuid.UUID,
    reason: str,
    *,
    retryable: bool,
    meter: _Meter | None = None,
) -> bool:
    spent = (
        _spent(run, meter.calls, meter.prompt_tokens, meter.completion_tokens)
        if meter is not None and meter.calls
        else {}
    )
    with transaction.atomic():
        done = JudgeRun.objects.filter(
            pk=run.pk, status=JudgeRun.Status.RUNNING, lease_token=token
        ).update(
            status=JudgeRun.Status.FAILED,
            error=reason[:2000],
            retryable=retryable,
            finished_at=timezone.now(),
            lease_token=None,
            lease_expires_at=None,
            **spent,
        )
        if done and run.trigger == JudgeRun.Trigger.SAMPLE:
            Answer.objects.filter(pk=run.answer_id, current_run__isnull=True).update(
                status=Answer.Status.FAILED
            )
    return bool(done)


def _release(
    run: JudgeRun, token: uuid.UUID, reason: str, retry_in: float, meter: _Meter
) -> None:
    """Give a run back after a transient failure; its task retries after `retry_in` seconds.

    `retry_in` is capped like the task's backoff: a server's Retry-After of years would
    otherwise put `not_before` out of the reconciler's reach (or beyond what a date can hold).
    """
    retry_in = min(max(retry_in, 0.0), settings.TREUE_JUDGE_BACKOFF_MAX_SECONDS)
    spent = (
        _spent(run, meter.calls, meter.prompt_tokens, meter.completion_tokens)
        if meter.calls
        else {}
    )
    JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.RUNNING, lease_token=token).update(
        **spent,
        status=JudgeRun.Status.PENDING,
        error=reason[:2000],
        retryable=True,
        lease_token=None,
        lease_expires_at=None,
        not_before=timezone.now() + timedelta(seconds=retry_in),
    )


def _finish(run: JudgeRun, token: uuid.UUID, judgement: judging.Judgement) -> bool:
    result = judgement.result
    failed = judgement.failed_reason or (result.reason if result.failed else None)
    now = timezone.now()
    with transaction.atomic():
        done = JudgeRun.objects.filter(
            pk=run.pk, status=JudgeRun.Status.RUNNING, lease_token=token
        ).update(
            status=JudgeRun.Status.FAILED if failed else JudgeRun.Status.SUCCEEDED,
            finished_at=now,
            lease_token=None,
            lease_expires_at=None,
            **_spent(
                run, judgement.calls, judgement.prompt_tokens, judgement.completion_tokens
            ),
            decomposition_raw=judgement.decomposition_raw,
            call_log=[dataclasses.asdict(record) for record in judgement.call_log],
            score=None if failed else result.score,
            abstention=result.abstention and not failed,
            unparseable=result.unparseable,
            error=failed or "",
            retryable=False,
        )
        if not done:
            # Another delivery took the run over after our lease ran out; its result counts.
            return False
        Claim.objects.bulk_create(
            Claim(
                run=run,
                position=c.position,
                text=c.claim,
                label=c.label.value,
                raw_reply=c.raw,
                judge_model=run.judge_model,
                prompt_version=run.prompt_version,
                attempts=c.attempts,
                cached=c.cached,
                latency_ms=c.latency_ms,
                prompt_tokens=c.prompt_tokens,
                completion_tokens=c.completion_tokens,
            )
            for c in judgement.claims
        )
        if failed:
            Answer.objects.filter(pk=run.answer_id, current_run__isnull=True).update(
                status=Answer.Status.FAILED
            )
        else:
            Answer.objects.filter(pk=run.answer_id).update(
                status=Answer.Status.JUDGED,
                current_run=run,
                score=result.score,
                abstention=result.abstention,
            )
    return True


def judge_run_execute(*, run_id: int) -> str:
    """Claim and execute one run. Returns what happened, for logs and tests.

    Raises JudgeUnavailable after giving the run back, so the task can retry it later.
    """
    token = _claim(run_id)
    if token is None:
        return "skipped"
    run = JudgeRun.objects.select_related("answer__use_case").get(pk=run_id)
    answer = run.answer
    if answer.status == Answer.Status.QUEUED:
        Answer.objects.filter(pk=answer.pk, status=Answer.Status.QUEUED).update(
            status=Answer.Status.JUDGING
        )
    if not run.judge_model:
        _finish_failed(run, token, "no judge model: set TREUE_JUDGE_MODEL", retryable=True)
        return "failed"
    if run.judge_model.strip().lower() == answer.model.strip().lower():
        _finish_failed(run, token, SELF_JUDGING.format(model=run.judge_model), retryable=False)
        return "refused"
    try:
        client = JudgeClient(
            JudgeConfig.from_settings(model=run.judge_model),
            deadline=time.monotonic() + settings.TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS,
        )
    except JudgeMisconfigured as e:
        _finish_failed(run, token, str(e), retryable=True)
        return "failed"
    chunks = list(answer.chunks.order_by("rank").values_list("text", flat=True))
    meter = _Meter()
    try:
        judgement = judging.judge_answer(
            question=answer.question,
            answer=answer.text,
            chunks=chunks,
            language=answer.use_case.language,
            call=meter.wrap(
                lambda messages: client.call(
                    messages, max_tokens=settings.TREUE_JUDGE_MAX_TOKENS_DECOMPOSE
                )
            ),
            verify_call=meter.wrap(
                lambda messages: client.call(
                    messages, max_tokens=settings.TREUE_JUDGE_MAX_TOKENS_VERIFY
                )
            ),
            concurrency=settings.TREUE_JUDGE_CONCURRENCY,
        )
    except JudgeUnavailable as e:
        _release(run, token, str(e), retry_in=e.retry_after or 0, meter=meter)
        raise
    except JudgeMisconfigured as e:
        _finish_failed(run, token, str(e), retryable=False, meter=meter)
        return "failed"
    except SoftTimeLimitExceeded as e:
        _release(run, token, "time limit exceeded", retry_in=0, meter=meter)
        raise JudgeUnavailable("time limit exceeded") from e
    except Exception as e:
        # A bug, not the endpoint: fail visibly (retryable from the page) instead of letting
        # the reconciler run the same failure again every few minutes.
        _finish_failed(run, token, f"internal error: {e!r}", retryable=True, meter=meter)
        raise
    finally:
        client.close()
    return "scored" if _finish(run, token, judgement) else "superseded"


def judge_run_give_up(*, run_id: int, reason: str) -> None:
    """After the last retry: the run fails visibly and can be retried from the page."""
    with transaction.atomic():
        run = JudgeRun.objects.select_for_update().filter(
            pk=run_id, status=JudgeRun.Status.PENDING
        ).first()
        if run is None:
            return
        run.status = JudgeRun.Status.FAILED
        run.error = reason[:2000]
        run.retryable = True
        run.finished_at = timezone.now()
        run.not_before = None
        run.save(update_fields=["status", "error", "retryable", "finished_at", "not_before"])
        if run.trigger == JudgeRun.Trigger.SAMPLE:
            Answer.objects.filter(pk=run.answer_id, current_run__isnull=True).update(
                status=Answer.Status.FAILED
            )


WORKER_LOST = (
    "gave up after {attempts} attempts: the worker was lost each time (killed, out of memory "
    "or past its time limit)"
)


def _abandon_runs_of_lost_workers(now: datetime) -> None:
    """Fail the runs whose workers died with them TREUE_JUDGE_MAX_ATTEMPTS times. Taken up
    again, such a run (an answer that kills its worker) would cost its calls every cycle."""
    abandoned = JudgeRun.objects.filter(
        status=JudgeRun.Status.RUNNING,
        lease_expires_at__lt=now,
        attempts__gte=settings.TREUE_JUDGE_MAX_ATTEMPTS,
    ).only("pk", "answer_id", "trigger", "attempts")
    for run in abandoned[:5000]:
        with transaction.atomic():
            done = JudgeRun.objects.filter(
                pk=run.pk, status=JudgeRun.Status.RUNNING, lease_expires_at__lt=now
            ).update(
                status=JudgeRun.Status.FAILED,
                error=WORKER_LOST.format(attempts=run.attempts),
                retryable=True,
                finished_at=now,
                lease_token=None,
                lease_expires_at=None,
            )
            if done and run.trigger == JudgeRun.Trigger.SAMPLE:
                Answer.objects.filter(pk=run.answer_id, current_run__isnull=True).update(
                    status=Answer.Status.FAILED
                )


def judge_runs_reconcile() -> int:
    """Re-enqueue runs whose message was lost: pending past their time, or whose worker died
    (running with an expired lease). Returns how many were enqueued."""
    now = timezone.now()
    stale = now - timedelta(seconds=settings.TREUE_JUDGE_RECONCILE_AFTER_SECONDS)
    _abandon_runs_of_lost_workers(now)
    ids = list(
        JudgeRun.objects.filter(
            Q(status=JudgeRun.Status.PENDING, not_before__isnull=True, created_at__lt=stale)
            | Q(status=JudgeRun.Status.PENDING, not_before__lt=stale)
            | Q(status=JudgeRun.Status.RUNNING, lease_expires_at__lt=now)
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:5000]
    )
    return judge_runs_enqueue(run_ids=ids)
