"""Writes of the investigations app: starting, executing, cancelling and reconciling.

A question is a leased job of the job framework (jobs/framework.py), like a judge run, and with
the same settings for retries, backoff and leases: claimed by a conditional UPDATE that hands
out a lease token; each generator sample is stored the moment it arrives, by the token's
holder only, so a redelivered or retried task asks only for the samples still missing and
nothing is paid twice; the verdict is written once. Cancelling flips the investigation; a
running question sees it before its next call, and queued tasks find nothing to claim.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict
from decimal import Decimal
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from investigations.domain.consistency import compare as consistency_compare
from investigations.domain.consistency import prompt as consistency_prompt
from investigations.models import Investigation, Question
from investigations.selectors import Plan, model_prices, price_of
from jobs import framework as jobs
from judging.client import (
    GeneratorClient,
    JudgeClient,
    JudgeConfig,
    JudgeMisconfigured,
    JudgeUnavailable,
)
from judging.domain.judgement import CallResult

# The contradiction check's reply: one word and a short reason.
JUDGE_MAX_TOKENS = 200
SELF_JUDGING = (
    "the judge model {model!r} is the generator that was re-asked: a model judges itself too "
    "leniently, so Treue refuses; configure another judge model"
)
UNFINISHED = (Question.Status.PENDING, Question.Status.RUNNING)

QUESTION = jobs.JobKind(
    model=Question,
    task="investigations.tasks.investigate_question",
    what="question",
    # A cancelled investigation's questions are not taken up again.
    claimable=Q(investigation__status=Investigation.Status.RUNNING),
    worker_lost="gave up: the worker was lost on every attempt",
)


def investigation_start(*, plan: Plan, user: User) -> Investigation:
    """Create the investigation and its questions (skipped ones with their reason) and enqueue
    one task per question once the transaction commits."""
    with transaction.atomic():
        investigation = Investigation.objects.create(
            use_case=plan.use_case,
            created_by=user,
            selection=plan.selection,
            requested=plan.requested,
            samples=plan.samples,
            temperature=plan.temperature,
            generator_model=plan.generator_model,
            judge_model=plan.judge_model,
            prompt_version=consistency_prompt.PROMPT_VERSION,
            estimated_calls=plan.calls,
            estimated_cost=plan.estimated_cost,
        )
        rows = [
            Question(
                investigation=investigation,
                answer=answer,
                position=position,
                generator_model=plan.generator_model or answer.model,
            )
            for position, answer in enumerate(plan.answers)
        ]
        rows += [
            Question(
                investigation=investigation,
                answer=answer,
                position=len(plan.answers) + position,
                status=Question.Status.SKIPPED,
                skip_reason=reason,
            )
            for position, (answer, reason) in enumerate(plan.skipped)
        ]
        created = Question.objects.bulk_create(rows)
        ids = [q.pk for q in created if q.status == Question.Status.PENDING]
        if not ids:
            _finish_investigation(investigation.pk)
            investigation.refresh_from_db()
        jobs.publish_on_commit(QUESTION, ids)
    return investigation


def questions_enqueue(*, question_ids: Iterable[int]) -> int:
    """A broker that is down costs nothing: the questions stay pending and the reconciler
    enqueues them later."""
    return jobs.publish(QUESTION, question_ids)


def investigation_cancel(*, investigation: Investigation) -> bool:
    """Stop an investigation: questions not yet started are cancelled now, a running one before
    its next call. What was already asked stays in the report."""
    now = timezone.now()
    with transaction.atomic():
        done = Investigation.objects.filter(
            pk=investigation.pk, status=Investigation.Status.RUNNING
        ).update(status=Investigation.Status.CANCELLED, finished_at=now)
        Question.objects.filter(
            investigation_id=investigation.pk, status=Question.Status.PENDING
        ).update(status=Question.Status.CANCELLED, finished_at=now)
    return bool(done)


def _cost(question: Question, model: str, result: CallResult) -> Decimal | None:
    """The question's cost so far plus this call's; unknown once any call's price is."""
    if question.cost is None and (question.generator_calls or question.judge_calls):
        return None
    price = price_of(
        model_prices([model]), model, result.prompt_tokens, result.completion_tokens,
        result.cached_tokens,
    )
    if price is None:
        return None
    return (question.cost or Decimal(0)) + price


def _record_call(
    question: Question, token: uuid.UUID, model: str, result: CallResult, *, judge: bool,
    **fields: Any,
) -> bool:
    """Store one call's usage (and `fields`) if we still hold the lease, extending it."""
    cost = _cost(question, model, result)
    counter = "judge_calls" if judge else "generator_calls"
    done = jobs.renew(
        QUESTION, question.pk, token,
        **{counter: F(counter) + 1},
        prompt_tokens=F("prompt_tokens") + result.prompt_tokens,
        completion_tokens=F("completion_tokens") + result.completion_tokens,
        usage_unknown_calls=F("usage_unknown_calls") + int(not result.usage_known),
        cost=cost,
        **fields,
    )
    if done:
        setattr(question, counter, getattr(question, counter) + 1)
        question.cost = cost
        for name, value in fields.items():
            setattr(question, name, value)
    return bool(done)


def _release(question: Question, token: uuid.UUID, reason: str, retry_in: float) -> None:
    jobs.release(QUESTION, question.pk, token, reason=reason, retry_in=retry_in)


def _end(question: Question, token: uuid.UUID, status: str, **fields: Any) -> bool:
    with transaction.atomic():
        done = jobs.finish(QUESTION, question.pk, token, status=status, **fields)
        if done:
            _finish_investigation(question.investigation_id)
    return bool(done)


def _finish_investigation(investigation_id: int) -> None:
    """The last question to end finishes its investigation (a cancelled one stays so).

    The investigation's row is locked first: two questions ending at once would otherwise each
    see the other still running (neither has committed) and leave it running for ever. Under
    the lock, the later of the two reads after the earlier one's commit.
    """
    with transaction.atomic():
        locked = Investigation.objects.select_for_update().filter(
            pk=investigation_id, status=Investigation.Status.RUNNING
        )
        if locked.first() is None:
            return
        if not Question.objects.filter(
            investigation_id=investigation_id, status__in=UNFINISHED
        ).exists():
            locked.update(status=Investigation.Status.FINISHED, finished_at=timezone.now())


def _cancelled(question: Question) -> bool:
    return Investigation.objects.filter(
        pk=question.investigation_id, status=Investigation.Status.CANCELLED
    ).exists()


def question_execute(*, question_id: int) -> str:
    """Claim one question and ask what is still missing: the samples, then (where the values
    do not decide) the judge's contradiction check. Returns what happened, for logs and tests.

    Raises JudgeUnavailable after giving the question back, so the task can retry it later.
    """
    token = jobs.claim(QUESTION, question_id)
    if token is None:
        return "skipped"
    question = Question.objects.select_related("investigation__use_case", "answer").get(
        pk=question_id
    )
    investigation = question.investigation
    deadline = time.monotonic() + settings.TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS
    try:
        return _execute(question, token, investigation, deadline)
    except JudgeUnavailable as e:
        _release(question, token, str(e), retry_in=e.retry_after or 0)
        raise
    except JudgeMisconfigured as e:
        _end(question, token, Question.Status.FAILED, error=str(e)[:2000])
        return "failed"
    except SoftTimeLimitExceeded as e:
        _release(question, token, "time limit exceeded", retry_in=0)
        raise JudgeUnavailable("time limit exceeded") from e
    except Exception as e:
        _end(question, token, Question.Status.FAILED, error=f"internal error: {e!r}"[:2000])
        raise


def _execute(
    question: Question, token: uuid.UUID, investigation: Investigation, deadline: float
) -> str:
    language = investigation.use_case.language
    judge_model = investigation.judge_model
    if not judge_model:
        raise JudgeMisconfigured("no judge model: set TREUE_JUDGE_MODEL")
    if judge_model.strip().lower() == question.generator_model.strip().lower():
        raise JudgeMisconfigured(SELF_JUDGING.format(model=judge_model))
    messages = question.answer.messages or []
    if len(question.sample_data) < investigation.samples:
        generator = GeneratorClient(deadline=deadline)
    while len(question.sample_data) < investigation.samples:
        if _cancelled(question):
            _end(question, token, Question.Status.CANCELLED)
            return "cancelled"
        generation = generator.generate(
            messages, model=question.generator_model, temperature=investigation.temperature
        )
        result = generation.result
        sample = {
            "text": result.text,
            "model": result.model,
            "logprobs": generation.logprobs,
            "latency_ms": result.latency_ms,
            "prompt_tokens": result.prompt_tokens,
            "completion_tokens": result.completion_tokens,
        }
        stored = _record_call(
            question, token, question.generator_model, result, judge=False,
            sample_data=[*question.sample_data, sample],
        )
        if not stored:
            return "superseded"  # another delivery took over after our lease ran out
    if _cancelled(question):
        _end(question, token, Question.Status.CANCELLED)
        return "cancelled"
    texts = [s["text"] for s in question.sample_data]
    comparison = consistency_compare.compare_samples(texts, language=language)
    reply = None
    raw: list[str] = []
    if consistency_compare.needs_judge(comparison):
        judge = JudgeClient(JudgeConfig.from_settings(model=judge_model), deadline=deadline)
        question_text = question.answer.question
        ask = consistency_prompt.contradiction_messages(
            question=question_text, samples=texts, language=language
        )
        for attempt in range(2):
            result = judge.call(ask, max_tokens=JUDGE_MAX_TOKENS)
            raw.append(result.text)
            if not _record_call(question, token, judge_model, result, judge=True):
                return "superseded"
            reply = consistency_prompt.parse_contradiction(result.text)
            if reply.contradiction is not None or attempt == 1:
                break
            ask = consistency_prompt.contradiction_retry_messages(
                question=question_text, samples=texts, language=language, reply=result.text
            )
    verdict = consistency_compare.decide(comparison, reply, language=language)
    ended = _end(
        question, token, Question.Status.DONE,
        comparison={**_comparison_json(comparison),
                    "verdict": {"kind": verdict.kind, "detail": verdict.detail}},
        consistent=verdict.consistent,
        reason=verdict.reason,
        decided_by=verdict.source,
        judge_raw="\n---\n".join(raw),
        error="",
    )
    return "done" if ended else "superseded"


def _comparison_json(comparison: consistency_compare.Comparison) -> dict[str, Any]:
    return {
        "agree": comparison.agree,
        "has_values": comparison.has_values,
        "dimension": comparison.dimension,
        "reason": comparison.reason,
        "values": [[asdict(v) for v in values] for values in comparison.values],
        "differing": [[list(span) for span in spans] for spans in comparison.differing],
    }


def question_give_up(*, question_id: int, reason: str) -> None:
    """After the last retry: the question fails visibly with the reason."""
    with transaction.atomic():
        if jobs.give_up(QUESTION, question_id, reason=reason):
            investigation_id = (
                Question.objects.filter(pk=question_id)
                .values_list("investigation_id", flat=True)
                .get()
            )
            _finish_investigation(investigation_id)


def questions_reconcile() -> int:
    """Re-enqueue questions whose message was lost: pending past their time, or whose worker
    died (running with an expired lease). Returns how many were enqueued."""
    now = timezone.now()
    jobs.abandon_lost(QUESTION, now=now)
    ids = jobs.lost(QUESTION, now=now)
    for investigation_id in set(
        Investigation.objects.filter(status=Investigation.Status.RUNNING).values_list(
            "pk", flat=True
        )
    ):
        _finish_investigation(investigation_id)
    return questions_enqueue(question_ids=ids)
