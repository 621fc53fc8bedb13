"""The judge tier (tier 2): claiming, executing and finishing judge runs; reconciling lost ones.
Creating and enqueueing them is runs.py's.

A run is the unit of work, a leased job of the job framework (jobs/framework.py). Ingest creates
one per sampled answer in the same transaction as the answer and publishes `score_answer` after
commit; a rescore creates another. The worker claims a run with a conditional UPDATE that hands
out a lease token; only the token's holder can finish the run, and finishing is one
transaction (claims, verdicts, the run, the answer's score), so a run is scored exactly
once however often its task is delivered.

A run's calls, tokens and cost add up every attempt of its holders: the calls of an attempt
that failed midway (a 429 after three verdicts) were billed too. What they brought is not lost:
the decomposition and every verdict are stored as they arrive (JudgeProgress), and the next
attempt - a retry after a transient failure, a take-over from a worker that died, a retry from
the page - asks only for what is missing. The claims and score come from the attempt that
finished the run, with the verdicts earlier attempts received; its call log holds that
attempt's calls.
"""

import dataclasses
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import transaction

from jobs import framework as jobs
from judging.client import JudgeClient, JudgeConfig, JudgeMisconfigured, JudgeUnavailable
from judging.domain.judge_parse import Label
from judging.domain.judgement import (
    CachedVerdict,
    CacheKey,
    CallResult,
    Judgement,
    VerdictCache,
)
from judging.domain.verification import judge_answer
from judging.selectors import runs as judging_selectors
from judging.selectors.prices import price_for_model
from judging.services.runs import JUDGE_RUN, SELF_JUDGING, judge_runs_enqueue
from monitoring.domain.segments import SEGMENT_FIELDS
from monitoring.models import (
    Answer,
    Claim,
    JudgeEndpoint,
    JudgeMode,
    JudgeProgress,
    JudgeRun,
    JudgeUsage,
)
from monitoring.services import rollups

# Output tokens a batched reply may spend per claim: "K3: TEILWEISE [1, 2]" and a sentence.
BATCH_LINE_TOKENS = 80


class Meter:
    """Counts the calls of one attempt as they return (from several threads)."""

    def __init__(self) -> None:
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        self.usage_unknown_calls = 0
        self._lock = threading.Lock()

    def wrap(self, call: Callable[..., CallResult]) -> Callable[..., CallResult]:
        def metered(messages: list[dict[str, str]], *args: Any, **kwargs: Any) -> CallResult:
            result = call(messages, *args, **kwargs)
            with self._lock:
                self.calls += 1
                self.prompt_tokens += result.prompt_tokens
                self.completion_tokens += result.completion_tokens
                self.cached_tokens += result.cached_tokens
                self.usage_unknown_calls += not result.usage_known
            return result

        return metered

    def spent(self, run: JudgeUsage, model: str) -> dict[str, object]:
        """The usage fields of ``run`` (a judge run or a shadow run) after this attempt: what
        earlier attempts spent (as read after the claim) plus this one's; {} without calls."""
        return usage_fields(run, model, self.calls, self.prompt_tokens, self.completion_tokens,
                            self.cached_tokens, self.usage_unknown_calls) if self.calls else {}


MAX_RUN_TOKENS = 2**31 - 1  # PositiveIntegerField on PostgreSQL


def usage_fields(
    run: JudgeUsage, model: str, calls: int, prompt_tokens: int, completion_tokens: int,
    cached_tokens: int, usage_unknown_calls: int = 0,
) -> dict[str, object]:
    """A job's usage fields: its earlier attempts' (as read after the claim) plus these,
    priced by ``model``'s price (cached prompt tokens at its cached price). Calls whose usage
    the endpoint misreported count as calls, with no tokens and so no cost."""
    # A run's totals stay within their columns however many attempts add up (10^7 believed
    # tokens a call, ~215 calls reach 2^31): the most the column holds, not an error at the end.
    prompt = min(run.prompt_tokens + prompt_tokens, MAX_RUN_TOKENS)
    completion = min(run.completion_tokens + completion_tokens, MAX_RUN_TOKENS)
    cached = min(run.cached_tokens + cached_tokens, prompt)
    price = price_for_model(judge_model=model)
    return {
        "calls": run.calls + calls,
        "usage_unknown_calls": run.usage_unknown_calls + usage_unknown_calls,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cached_tokens": cached,
        "cost": None if price is None else price.cost(
            prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached
        ),
    }


def _progress_key(key: CacheKey) -> str:
    return hashlib.sha256(json.dumps(key, ensure_ascii=False).encode()).hexdigest()


class _Progress(MutableMapping[CacheKey, CachedVerdict]):
    """A run's verdict cache backed by JudgeProgress: each readable verdict is stored the moment
    it arrives (judge_answer sets it in the caller's thread), and a later attempt of the run
    starts with every verdict the earlier ones received. The decomposition likewise."""

    def __init__(self, run: JudgeRun) -> None:
        self.run = run
        self.decomposition: str | None = None
        self._verdicts: dict[CacheKey, CachedVerdict] = {}
        for row in JudgeProgress.objects.filter(run=run).order_by("pk"):
            if row.key == JudgeProgress.DECOMPOSITION:
                self.decomposition = row.raw_reply
                continue
            try:
                label = Label(row.label)
            except ValueError:
                continue
            self._verdicts[(row.language, row.claim, row.context_digest)] = (
                CachedVerdict(
                    label, row.raw_reply, row.judge_model, tuple(row.evidence_chunks), row.reason
                )
            )

    def decomposed(self, raw: str) -> None:
        self.decomposition = raw
        self._store(JudgeProgress(run=self.run, key=JudgeProgress.DECOMPOSITION, raw_reply=raw))

    def __getitem__(self, key: CacheKey) -> CachedVerdict:
        return self._verdicts[key]

    def __setitem__(self, key: CacheKey, verdict: CachedVerdict) -> None:
        self.update({key: verdict})

    def _row(self, key: CacheKey, verdict: CachedVerdict) -> JudgeProgress:
        language, claim, digest = key
        return JudgeProgress(
            run=self.run, key=_progress_key(key), language=language, claim=claim,
            context_digest=digest, label=verdict.label.value, raw_reply=verdict.raw,
            judge_model=verdict.model, evidence_chunks=list(verdict.chunks),
            reason=verdict.reason,
        )

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        """Several verdicts (a batched reply's) stored in one insert."""
        new = dict(other, **kwargs)
        self._verdicts.update(new)
        JudgeProgress.objects.bulk_create(
            [self._row(key, verdict) for key, verdict in new.items()], ignore_conflicts=True
        )

    def __delitem__(self, key: CacheKey) -> None:
        del self._verdicts[key]

    def __iter__(self) -> Iterator[CacheKey]:
        return iter(self._verdicts)

    def __len__(self) -> int:
        return len(self._verdicts)

    @staticmethod
    def _store(row: JudgeProgress) -> None:
        # A run taken over while its first holder still works may receive a verdict twice:
        # the first stored stays.
        JudgeProgress.objects.bulk_create([row], ignore_conflicts=True)


def _finish_failed(
    run: JudgeRun,
    token: uuid.UUID,
    reason: str,
    *,
    retryable: bool,
    meter: Meter | None = None,
) -> bool:
    spent = meter.spent(run, run.judge_model) if meter is not None else {}
    with transaction.atomic():
        done = jobs.fail(JUDGE_RUN, run.pk, token, reason=reason, retryable=retryable, **spent)
        if done:
            _run_ended(run)
        else:
            _superseded(run)
    return done


def _superseded(run: JudgeRun) -> None:
    """Another delivery took the run over after this one's lease ran out, and its result
    counts: what this one stored after the other finished is of no further use."""
    JudgeProgress.objects.filter(run=run, run__status=JudgeRun.Status.SUCCEEDED).delete()


def _run_ended(run: Any) -> None:
    """A run ended: it leaves its answer failed where that is due, and counts in the rollups."""
    _answer_failed(run)
    rollups.run_ended(run.pk)


def _answer_failed(run: Any) -> None:
    """A run of the sample that failed leaves its answer failed, unless an earlier run scored
    it (a failed rescore keeps the answer's score)."""
    if run.trigger == JudgeRun.Trigger.SAMPLE:
        Answer.objects.filter(pk=run.answer_id, current_run__isnull=True).update(
            status=Answer.Status.FAILED
        )


def _release(
    run: JudgeRun, token: uuid.UUID, reason: str, retry_in: float, meter: Meter
) -> None:
    """Give a run back after a transient failure (keeping what its calls cost); its task
    retries after `retry_in` seconds."""
    spent = meter.spent(run, run.judge_model)
    if not jobs.release(
        JUDGE_RUN, run.pk, token, reason=reason, retry_in=retry_in, retryable=True, **spent
    ):
        _superseded(run)


def _finish(run: JudgeRun, token: uuid.UUID, judgement: Judgement) -> bool:
    result = judgement.result
    failed = judgement.failed_reason or (result.reason if result.failed else None)
    with transaction.atomic():
        # The answer first, as rescoring and retention lock it (answer before run): what it was
        # judged before this run is what the rollups subtract.
        answer = (
            Answer.objects.select_for_update()
            .filter(pk=run.answer_id)
            .values("use_case_id", "created_at", "flagged", "in_random_sample", "sampled",
                    "status", "score", "abstention", "current_run_id", *rollups.TRAITS,
                    *SEGMENT_FIELDS)
            .get()
        )
        done = jobs.finish(
            JUDGE_RUN, run.pk, token,
            status=JudgeRun.Status.FAILED if failed else JudgeRun.Status.SUCCEEDED,
            **usage_fields(
                run, run.judge_model, judgement.calls, judgement.prompt_tokens,
                judgement.completion_tokens, judgement.cached_tokens,
                judgement.usage_unknown_calls,
            ),
            decomposition_raw=judgement.decomposition_raw,
            call_log=[dataclasses.asdict(record) for record in judgement.call_log],
            score=None if failed else result.score,
            abstention=result.abstention and not failed,
            unparseable=result.unparseable,
            error=failed or "",
            retryable=False,
            verify_path=judgement.path,
        )
        if not done:
            _superseded(run)
            return False
        rollups.run_ended(run.pk)
        JudgeProgress.objects.filter(run=run).delete()  # the claims hold it now
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
                evidence_chunks=list(c.chunks),
                reason=c.reason,
            )
            for c in judgement.claims
        )
        if not moves_answer(run.trigger, sampled=answer["sampled"]):
            # An on-demand verdict of an answer outside the sample stays on its run: the answer
            # keeps its status and no score, so no estimate can count it (on_demand.py).
            return True
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
            before = None
            if answer["status"] == Answer.Status.JUDGED:
                before = rollups.judged_state(
                    answer["score"], answer["abstention"],
                    rollups.run_labels(answer["current_run_id"]),
                )
            rollups.answer_judged(
                use_case_id=answer["use_case_id"], created_at=answer["created_at"],
                flagged=answer["flagged"], in_random_sample=answer["in_random_sample"],
                traits=rollups.Traits.of(answer), before=before, segment_fields=answer,
                after=rollups.judged_state(
                    result.score, result.abstention, (c.label.value for c in judgement.claims)
                ),
            )
    return True


def moves_answer(trigger: str, *, sampled: bool) -> bool:
    """Whether a run that ends gives its answer its result (status, score, current run, and so
    the rollups). Only for an answer of the sample, and never for an on-demand run: the
    estimates rest on the sample, and an answer the sample did not draw has no inclusion
    probability to count with (judging/services/on_demand.py)."""
    return bool(sampled) and trigger != JudgeRun.Trigger.ON_DEMAND


def judge_run_execute(*, run_id: int) -> str:
    """Claim and execute one run. Returns what happened, for logs and tests.

    Raises JudgeUnavailable after giving the run back, so the task can retry it later.
    """
    token = jobs.claim(JUDGE_RUN, run_id)
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
        client = judge_client(model=run.judge_model)
    except JudgeMisconfigured as e:
        _finish_failed(run, token, str(e), retryable=True)
        return "failed"
    meter = Meter()
    progress = _Progress(run)
    try:
        judgement = judge_with(
            client=client, meter=meter, answer=answer, mode=run.judge_mode, cache=progress,
            decomposition=progress.decomposition, on_decomposed=progress.decomposed,
        )
    except JudgeUnavailable as e:
        _release(run, token, str(e), retry_in=e.retry_after or 0, meter=meter)
        raise
    except JudgeMisconfigured as e:
        _finish_failed(run, token, str(e), retryable=False, meter=meter)
        return "failed"
    except Exception as e:
        # A bug, not the endpoint: fail visibly (retryable from the page) instead of letting
        # the reconciler run the same failure again every few minutes.
        _finish_failed(run, token, f"internal error: {e!r}", retryable=True, meter=meter)
        raise
    finally:
        client.close()
    return "scored" if _finish(run, token, judgement) else "superseded"


def judge_client(*, model: str) -> JudgeClient:
    """A client for ``model`` at the configured endpoint, with the task's soft time limit as
    its deadline. Raises JudgeMisconfigured without an endpoint or model."""
    return JudgeClient(
        JudgeConfig.from_settings(model=model),
        deadline=time.monotonic() + settings.TREUE_JUDGE_SOFT_TIME_LIMIT_SECONDS,
    )


def judge_with(
    *,
    client: JudgeClient,
    meter: "Meter",
    answer: Answer,
    mode: str,
    cache: VerdictCache | None = None,
    decomposition: str | None = None,
    on_decomposed: Callable[[str], None] | None = None,
) -> Judgement:
    """Judge ``answer`` (against its chunks, in its use case's language, with evidence where
    the use case asks for it) through ``client``, each kind of call with its output-token cap
    and counted by ``meter``; batched and one-call requests carry a JSON schema where the
    endpoint is known to take one, and find that out where it is not yet known. Raises what
    judge_answer raises; a soft time limit as JudgeUnavailable, to be retried."""
    chunks = list(answer.chunks.order_by("rank").values_list("text", flat=True))
    size = settings.TREUE_JUDGE_BATCH_SIZE
    endpoint, model = client.config.endpoint, client.config.model

    def batch_call(
        messages: list[dict[str, str]], response_format: dict[str, Any] | None = None
    ) -> CallResult:
        # A line per claim (the word, the chunk ranks and a sentence), and in one-call mode
        # the claims themselves.
        cap = BATCH_LINE_TOKENS * size + (
            settings.TREUE_JUDGE_MAX_TOKENS_DECOMPOSE if mode == JudgeMode.SINGLE else 0
        )
        return client.call(messages, max_tokens=cap, response_format=response_format)

    try:
        return judge_answer(
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
            batch_call=meter.wrap(batch_call),
            concurrency=settings.TREUE_JUDGE_CONCURRENCY,
            mode=mode,
            batch_size=size,
            cache=cache,
            decomposition=decomposition,
            on_decomposed=on_decomposed,
            evidence=answer.use_case.judge_evidence,
            structured=judging_selectors.structured_output(endpoint=endpoint, model=model),
            on_structured=lambda supported, detail: structured_output_learned(
                endpoint=endpoint, model=model, supported=supported, detail=detail
            ),
        )
    except SoftTimeLimitExceeded as e:
        raise JudgeUnavailable("time limit exceeded") from e
    finally:
        client.close()


def structured_output_learned(*, endpoint: str, model: str, supported: bool, detail: str) -> None:
    """Remember whether ``model`` at ``endpoint`` answers in a JSON schema it is sent."""
    JudgeEndpoint.objects.update_or_create(
        endpoint=endpoint[:500], model=model[:200],
        defaults={"structured_output": supported, "detail": detail[:500]},
    )


def judge_run_give_up(*, run_id: int, reason: str) -> None:
    """After the last retry: the run fails visibly and can be retried from the page."""
    with transaction.atomic():
        if jobs.give_up(JUDGE_RUN, run_id, reason=reason, retryable=True):
            _run_ended(JudgeRun.objects.only("trigger", "answer_id").get(pk=run_id))


def judge_runs_reconcile() -> int:
    """Re-enqueue runs whose message was lost: pending past their time, or whose worker died
    (running with an expired lease); fail those whose worker died with them too often.
    Returns how many were enqueued."""
    return jobs.reconcile(
        JUDGE_RUN,
        publish_ids=lambda ids: judge_runs_enqueue(run_ids=ids),
        on_abandoned=_run_ended,
        only=("answer_id", "trigger"),
    )
