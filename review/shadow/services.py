"""Starting, executing and adopting a judge comparison.

A comparison picks the experts' latest reviews of a use case (the newest first, at most N), and
creates a shadow run for each: a leased job (jobs/framework.py) that has the candidate verify
the claims the expert labelled - the claims of the judge run the expert reviewed, given to the
judge as its decomposition, so both judges are set against the experts on the same claims. A
shadow run writes only itself: never an answer's score, run or status, so no estimate moves.
"""

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs import framework as jobs
from judging.client import JudgeMisconfigured, JudgeUnavailable
from judging.selectors.runs import same_model
from judging.services.execution import Meter, judge_client, judge_with
from monitoring.models import JudgeMode, UseCase
from monitoring.services.tuning import use_case_judge_set
from review.domain.comparison import LABELS
from review.models import JudgeComparison, ShadowRun
from review.shadow.selectors import comparison_plan, comparison_running

SHADOW_RUN_TASK = "review.tasks.shadow_run"

SHADOW_RUN = jobs.JobKind(
    model=ShadowRun, task=SHADOW_RUN_TASK, what="shadow run", started_field="started_at"
)


class ComparisonRefused(Exception):
    """Why a comparison cannot start, in the reader's language."""


@dataclass(frozen=True)
class ComparisonStart:
    """The comparison a start leads to: a new one, or the one of the same candidate that is
    still under way (``started`` False), which a second start shows instead of paying again."""

    comparison: JudgeComparison
    started: bool


def judge_comparison_start(
    *, use_case: UseCase, judge_model: str, judge_mode: str, answers: int, user: User
) -> ComparisonStart:
    """Create the comparison and a shadow run per reviewed answer it takes; the runs are
    published once the transaction commits. A comparison of the same candidate (model and mode)
    whose runs are not all done is returned instead of a new one: five confirmed starts made
    five comparisons, each paying its calls. Raises ComparisonRefused when there is nothing to
    compare on."""
    plan = comparison_plan(
        use_case=use_case, judge_model=judge_model, judge_mode=judge_mode, answers=answers
    )
    if not plan.submissions:
        raise ComparisonRefused(_(
            "Es gibt noch keine von Fachleuten geprüften Antworten, auf denen „%(model)s“ "
            "verglichen werden könnte."
        ) % {"model": judge_model})
    with transaction.atomic():
        # Starts for one use case one after another, so two at once cannot both miss the other.
        UseCase.objects.select_for_update().filter(pk=use_case.pk).exists()
        running = comparison_running(
            use_case=use_case, judge_model=plan.judge_model, judge_mode=judge_mode
        )
        if running is not None:
            return ComparisonStart(running, started=False)
        comparison = JudgeComparison.objects.create(
            use_case=use_case, judge_model=plan.judge_model, judge_mode=judge_mode,
            requested=answers, created_by=user,
        )
        runs = ShadowRun.objects.bulk_create(
            ShadowRun(comparison=comparison, submission=s) for s in plan.submissions
        )
        jobs.publish_on_commit(SHADOW_RUN, [run.pk for run in runs])
    return ComparisonStart(comparison, started=True)


def judge_comparison_adopt(*, comparison: JudgeComparison, user: User) -> None:
    """The candidate becomes the use case's judge (model and mode) from the next run on."""
    with transaction.atomic():
        use_case_judge_set(
            use_case=comparison.use_case, judge_model=comparison.judge_model,
            judge_mode=comparison.judge_mode,
        )
        JudgeComparison.objects.filter(pk=comparison.pk).update(
            adopted_at=timezone.now(), adopted_by=user
        )


def _same_claim(text: str) -> str:
    """A claim's text as two decompositions are compared: blanks, case and the closing mark
    do not make another claim."""
    return " ".join(text.split()).casefold().rstrip(".!?;:")


def _claims(run: ShadowRun) -> list[tuple[int, str]]:
    """(claim id, text) of the judge's claims the expert labelled, in the run's order."""
    labelled = {
        v["claim_id"] for v in run.submission.verdicts
        if not v.get("added") and v.get("claim_id") and v.get("label") in LABELS
    }
    claims = run.submission.item.judge_run.claims.order_by("position")
    return [(c.pk, c.text) for c in claims if c.pk in labelled]


def shadow_run_execute(*, run_id: int) -> str:
    """Claim and execute one shadow run. Returns what happened, for logs and tests; raises
    JudgeUnavailable after giving the run back, so the task retries it later."""
    token = jobs.claim(SHADOW_RUN, run_id)
    if token is None:
        return "skipped"
    run = ShadowRun.objects.select_related(
        "comparison", "submission__item__answer__use_case", "submission__item__judge_run"
    ).get(pk=run_id)
    comparison, answer = run.comparison, run.submission.item.answer
    claims = _claims(run)
    if answer.anonymised_at is not None or not claims:
        _fail(run, token, "the answer was anonymised, or has no claim an expert labelled")
        return "failed"
    if same_model(comparison.judge_model, answer.model):
        _fail(run, token, f"the judge model {comparison.judge_model!r} generated the answer")
        return "refused"
    meter = Meter()
    try:
        # The candidate verifies the claims the experts labelled; in one-call mode it splits
        # the answer itself, as it would in production, and its verdicts are tied to the
        # experts' claims by their text (its own score stands for the answer).
        judgement = judge_with(
            client=judge_client(model=comparison.judge_model), meter=meter, answer=answer,
            mode=comparison.judge_mode,
            decomposition=None if comparison.judge_mode == JudgeMode.SINGLE
            else json.dumps([text for _, text in claims], ensure_ascii=False),
        )
    except JudgeUnavailable as e:
        jobs.release(
            SHADOW_RUN, run.pk, token, reason=str(e), retry_in=e.retry_after or 0,
            **meter.spent(run, comparison.judge_model),
        )
        raise
    except JudgeMisconfigured as e:
        _fail(run, token, str(e), meter=meter)
        return "failed"
    except Exception as e:
        _fail(run, token, f"internal error: {e!r}", meter=meter)
        raise
    ids = {_same_claim(text): pk for pk, text in claims}
    verdicts = [
        {
            "claim_id": ids.get(_same_claim(v.claim)), "position": v.position,
            "label": v.label.value,
            "raw": v.raw, "chunks": list(v.chunks), "reason": v.reason,
        }
        for v in judgement.claims
    ]
    failed = judgement.failed_reason
    done = jobs.finish(
        SHADOW_RUN, run.pk, token,
        status=ShadowRun.Status.FAILED if failed else ShadowRun.Status.SUCCEEDED,
        error=failed or "", verdicts=verdicts,
        score=None if failed else judgement.result.score,
        **meter.spent(run, comparison.judge_model),
    )
    return ("failed" if failed else "scored") if done else "superseded"


def _fail(run: ShadowRun, token: uuid.UUID, reason: str, *, meter: Meter | None = None) -> None:
    spent: dict[str, Any] = meter.spent(run, run.comparison.judge_model) if meter else {}
    jobs.fail(SHADOW_RUN, run.pk, token, reason=reason, **spent)


def shadow_run_give_up(*, run_id: int, reason: str) -> None:
    jobs.give_up(SHADOW_RUN, run_id, reason=reason)


def shadow_runs_reconcile() -> int:
    """Re-enqueue shadow runs whose message was lost or whose worker died."""
    return jobs.reconcile(SHADOW_RUN)
