"""Reads of judge runs: an answer's runs for its page, who may rescore, the runs to retry, the
answers of a week that can be judged again, what is known of a judge endpoint."""

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import OuterRef, Q, QuerySet, Subquery

from common.weeks import iso_week_bounds
from judging.selectors.prices import price_currencies
from monitoring.models import (
    Answer,
    JudgeEndpoint,
    JudgeRun,
    UseCase,
)
from monitoring.selectors.access import user_leads

OPEN_STATUSES = (JudgeRun.Status.PENDING, JudgeRun.Status.RUNNING)


def structured_output(*, endpoint: str, model: str) -> bool | None:
    """Whether ``model`` at ``endpoint`` answers in a JSON schema it is sent: None until a
    batched or one-call request found out (judging.services.runs)."""
    known = judge_endpoint(endpoint=endpoint, model=model)
    return None if known is None else known.structured_output


def judge_endpoint(*, endpoint: str, model: str) -> JudgeEndpoint | None:
    """What is known about ``model`` at ``endpoint`` (whether it takes structured output, when
    that was found out, and how): None until a batched or one-call request found out."""
    if not model:
        return None
    return JudgeEndpoint.objects.filter(endpoint=endpoint[:500], model=model[:200]).first()


def same_model(a: str, b: str) -> bool:
    """The judge's rule for "the same model" (judging.services.runs): case and
    surrounding blanks do not make a different model."""
    return a.strip().lower() == b.strip().lower()


def user_may_rescore(*, user: User | AnonymousUser, use_case: UseCase) -> bool:
    """Rescoring spends judge calls: team leads of the use case and staff may, experts may not."""
    return user_leads(user=user, use_case=use_case)


@dataclass
class AnswerJudging:
    """Everything the answer page shows about tier 2."""

    runs: list[JudgeRun]  # newest first
    shown: JudgeRun | None  # the current run (whose score the answer carries), else the newest
    newer: list[JudgeRun]  # runs after the shown one: a rescore waiting, running or failed
    history: list[JudgeRun]  # every run but the shown one, newest first
    mixed: bool  # the runs differ in judge model or prompt version
    demo: bool  # a run of the demo judge, whose verdicts are replayed human labels
    open_run: JudgeRun | None  # a run waiting or running: no second one until it is done
    retry_run: JudgeRun | None  # the newest run, failed, and worth another try
    # The newest finished verdict asked for on demand of an answer outside the sample: shown,
    # marked as outside the estimates (the answer itself carries no score; on_demand.py).
    on_demand: JudgeRun | None = None


def answer_judging(*, answer: Answer) -> AnswerJudging:
    runs = list(
        answer.judge_runs.select_related("requested_by").prefetch_related("claims")
        .order_by("-created_at", "-id")
    )
    for run in runs:
        run.duration = (
            run.finished_at - run.started_at if run.finished_at and run.started_at else None
        )
        run.same_model = same_model(run.judge_model, answer.model)
    shown = next((r for r in runs if r.pk == answer.current_run_id), runs[0] if runs else None)
    newer = runs[: runs.index(shown)] if shown else []
    open_run = next((r for r in runs if r.status in OPEN_STATUSES), None)
    newest = runs[0] if runs else None
    retry_run = (
        newest
        if newest and newest.status == JudgeRun.Status.FAILED and not newest.same_model
        and open_run is None
        else None
    )
    currencies = price_currencies(models={r.judge_model for r in runs})
    for run in runs:
        run.currency = currencies.get(run.judge_model, "")
    # The judge's evidence with the chunks' sources: (rank, source) per chunk named.
    sources = dict(answer.chunks.values_list("rank", "source"))
    for run in runs:
        for claim in run.claims.all():
            claim.evidence = [  # type: ignore[attr-defined]  # shown by the template
                (rank, sources.get(rank, "")) for rank in claim.evidence_chunks
            ]
    demo_model = settings.TREUE_DEMO_JUDGE_MODEL  # the demo judge's name; "" outside the demo
    return AnswerJudging(
        runs=runs,
        shown=shown,
        newer=newer,
        history=[r for r in runs if r is not shown],
        mixed=len({(r.judge_model, r.prompt_version) for r in runs}) > 1,
        demo=bool(demo_model) and any(r.judge_model == demo_model for r in runs),
        open_run=open_run,
        retry_run=retry_run,
        on_demand=None if answer.sampled else next(
            (r for r in runs if r.trigger == JudgeRun.Trigger.ON_DEMAND
             and r.status == JudgeRun.Status.SUCCEEDED), None),
    )


def on_demand_verdicts(*, answers: Sequence[Answer]) -> dict[int, JudgeRun]:
    """The newest succeeded on-demand run of each of ``answers`` that is outside the sample, by
    answer id: the explorer shows its score beside the sample's, marked as outside the
    estimates. The answers' own score fields never hold it (judging/services/on_demand.py)."""
    outside = [a for a in answers if not a.sampled]
    if not outside:
        return {}
    runs = (
        JudgeRun.objects.filter(
            reduce(operator.or_, (Q(answer_id=a.pk, answer_created_at=a.created_at)
                                  for a in outside)),
            trigger=JudgeRun.Trigger.ON_DEMAND, status=JudgeRun.Status.SUCCEEDED,
        )
        .only("pk", "answer_id", "score", "abstention", "judge_model", "prompt_version",
              "finished_at")
        .order_by("answer_id", "-finished_at", "-id")
    )
    newest: dict[int, JudgeRun] = {}
    for run in runs:
        newest.setdefault(run.answer_id, run)
    return newest


def week_judged_answers(*, use_case: UseCase, year: int, week: int) -> QuerySet[Answer]:
    """Answers of the use case created in the ISO week (site time) that carry a score and
    still have their text (an anonymised answer cannot be judged again)."""
    start, end = iso_week_bounds(year=year, week=week)
    return Answer.objects.filter(
        use_case=use_case,
        created_at__gte=start,
        created_at__lt=end,
        status=Answer.Status.JUDGED,
        current_run__isnull=False,
        anonymised_at__isnull=True,
    )


def answers_with_open_runs(*, answers: QuerySet[Answer]) -> set[int]:
    return set(
        JudgeRun.objects.filter(answer__in=answers, status__in=OPEN_STATUSES)
        .values_list("answer_id", flat=True)
    )


def judge_runs_to_retry(*, use_case: UseCase) -> list[JudgeRun]:
    """The use case's failed runs that a retry can take up: each its answer's newest (an older
    failure has been overtaken by a later run), of an answer not anonymised, and not a refusal
    to judge an answer with its own model (a retry would be refused the same way)."""
    newest = (JudgeRun.objects.filter(answer=OuterRef("answer"))
              .order_by("-created_at", "-id").values("pk")[:1])
    # The answer by its id and time: one partition to look in, not every month's.
    answer = _answer_of_run().filter(anonymised_at__isnull=True)
    runs = (JudgeRun.objects.filter(use_case=use_case, status=JudgeRun.Status.FAILED)
            .filter(pk=Subquery(newest))
            .annotate(answer_model=Subquery(answer.values("model")[:1]))
            .filter(answer_model__isnull=False)
            .only("pk", "answer_id", "answer_created_at", "judge_model").order_by("pk"))
    model = use_case.effective_judge_model
    return [r for r in runs if not same_model(r.judge_model or model, r.answer_model)]


def _answer_of_run() -> QuerySet[Answer]:
    """A run's answer, for a subquery: by id and creation time, so that PostgreSQL looks for it
    in the one monthly partition that holds it."""
    return Answer.objects.filter(pk=OuterRef("answer_id"), created_at=OuterRef("answer_created_at"))


def judge_runs_recent(*, use_case: UseCase, limit: int = 20) -> list[JudgeRun]:
    """The use case's latest runs with their answers, for the per-run table of the judge page
    (the answers by id and time: each from its own monthly partition)."""
    runs = list(
        JudgeRun.objects.filter(use_case=use_case)
        .defer("call_log", "decomposition_raw")
        .order_by("-created_at", "-id")[:limit]
    )
    if runs:
        answers = Answer.objects.filter(
            reduce(operator.or_, (Q(pk=r.answer_id, created_at=r.answer_created_at)
                                  for r in runs))
        ).defer("token_data", "messages")
        by_id = {answer.pk: answer for answer in answers}
        for run in runs:
            if run.answer_id in by_id:
                run.answer = by_id[run.answer_id]
    return runs


