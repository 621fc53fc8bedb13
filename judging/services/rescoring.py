"""Rescoring: a team lead asks for another judge run of an answer, or of a whole week.

A rescore adds a run and keeps the earlier ones; the answer's score moves to the new run once it
succeeds (judging.services.runs). Runs are created through `judge_runs_create`, which
enqueues them after commit. Each request locks the answers it covers, so a double click or two
leads at once cannot queue two runs for the same answer: an answer with a run still waiting or
running is left out.
"""

from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction
from django.utils.translation import gettext as _

from judging.selectors import runs as selectors
from judging.services.runs import judge_runs_create
from monitoring.models import Answer, JudgeProgress, JudgeRun, UseCase


class RescoreRefused(Exception):
    """The rescore was not started; the message says why, in the user's language."""


def same_model_reason(model: str) -> str:
    return _(
        "„%(model)s“ ist das Modell, das die Antwort erzeugt hat. Ein Modell beurteilt sich "
        "selbst zu milde, darum prüft Treue nicht mit demselben Modell. Wählen Sie ein anderes "
        "Prüfmodell."
    ) % {"model": model}


def open_run_reason() -> str:
    return _("Für diese Antwort wartet schon ein Prüflauf oder läuft gerade.")


def lock_for_judging(answer_id: int) -> Answer:
    """The answer, locked; refused when retention has anonymised it (there is no text left to
    judge, and a judge would score the empty answer as an abstention)."""
    answer = Answer.objects.select_for_update().get(pk=answer_id)
    if answer.anonymised_at is not None:
        raise RescoreRefused(_("Die Antwort ist anonymisiert und kann nicht neu bewertet werden."))
    return answer


def answer_rescore(*, answer: Answer, judge_model: str, user: User) -> JudgeRun:
    """Queue one new run of `answer` with `judge_model`. Raises RescoreRefused, also for an
    answer outside the sample: judged, it would count in its stratum without having been drawn,
    and bias every estimate built on the sample."""
    judge_model = judge_model.strip()
    if not answer.sampled:
        raise RescoreRefused(_("Nur Antworten der Stichprobe werden vom Modell geprüft."))
    return run_requested(answer=answer, judge_model=judge_model,
                         trigger=JudgeRun.Trigger.RESCORE, user=user)


def run_requested(*, answer: Answer, judge_model: str, trigger: str, user: User) -> JudgeRun:
    """A run of ``answer`` that ``user`` asked for (a rescore, a verdict on demand), once the
    answer is locked: refused for the answer's own model or while a run of it is open."""
    if selectors.same_model(judge_model, answer.model):
        raise RescoreRefused(same_model_reason(judge_model))
    with transaction.atomic():
        locked = lock_for_judging(answer.pk)
        if locked.judge_runs.filter(status__in=selectors.OPEN_STATUSES).exists():
            raise RescoreRefused(open_run_reason())
        [run] = judge_runs_create(
            answers=[locked], judge_model=judge_model, trigger=trigger, requested_by_id=user.pk,
        )
    return run


def retry_model(run: JudgeRun) -> str:
    """The judge model a retry of `run` uses: its own, or, for a run created while no judge
    model was set (it failed for that), the use case's now; "" when there is none."""
    return run.judge_model or run.answer.use_case.effective_judge_model


def judge_run_retry(*, run: JudgeRun, user: User) -> JudgeRun:
    """Queue a failed run again: same answer, same judge model (the one set now if the run had
    none), same trigger.

    Only the answer's newest run can be retried (an older failure has been overtaken), and not
    a refusal to judge with the answer's own model. A retried sample run puts its answer back
    to "waiting for the judge".
    """
    with transaction.atomic():
        answer = lock_for_judging(run.answer_id)
        newest = answer.judge_runs.order_by("-created_at", "-id").first()
        if newest is None or newest.pk != run.pk or run.status != JudgeRun.Status.FAILED:
            raise RescoreRefused(
                _("Nur der neueste, fehlgeschlagene Prüflauf einer Antwort kann wiederholt werden.")
            )
        judge_model = retry_model(run)
        if not judge_model:
            raise RescoreRefused(_("Es ist kein Prüfmodell eingestellt (TREUE_JUDGE_MODEL)."))
        if selectors.same_model(judge_model, answer.model):
            raise RescoreRefused(same_model_reason(judge_model))
        [new_run] = judge_runs_create(
            answers=[answer], judge_model=judge_model, trigger=run.trigger,
            requested_by_id=user.pk,
        )
        if (new_run.judge_model, new_run.prompt_version) == (run.judge_model, run.prompt_version):
            # What the failed run received before it gave up is still good: not asked again.
            JudgeProgress.objects.filter(run=run).update(run=new_run)
        Answer.objects.filter(
            pk=answer.pk, status=Answer.Status.FAILED, current_run__isnull=True
        ).update(status=Answer.Status.QUEUED)
    return new_run


@dataclass(frozen=True)
class FailedRetry:
    retried: int
    refused: int  # the answer's own model, or no judge model set


def use_case_failed_retry(*, use_case: UseCase, user: User) -> FailedRetry:
    """Retry every failed run of the use case that is its answer's newest, as judge_run_retry
    does one: after an outage of the judge endpoint that outlasted the retries."""
    retried = refused = 0
    for run in selectors.judge_runs_to_retry(use_case=use_case):
        try:
            judge_run_retry(run=run, user=user)
        except RescoreRefused:
            refused += 1
        else:
            retried += 1
    return FailedRetry(retried=retried, refused=refused)


@dataclass(frozen=True)
class WeekRescore:
    created: int
    skipped_same_model: int
    skipped_open: int


def use_case_week_rescore(
    *, use_case: UseCase, year: int, week: int, judge_model: str, user: User
) -> WeekRescore:
    """Queue one run with `judge_model` per judged answer of the use case in the ISO week.

    Answers generated by `judge_model` and answers with a run waiting or running are left out
    and counted.
    """
    judge_model = judge_model.strip()
    with transaction.atomic():
        answers = selectors.week_judged_answers(use_case=use_case, year=year, week=week)
        # Lock first (no aggregates: PostgreSQL refuses FOR UPDATE with GROUP BY), then look
        # for open runs, which another request may have created a moment ago.
        locked = list(
            Answer.objects.select_for_update()
            .filter(pk__in=answers.values("pk"))
            .order_by("pk")
            .only("pk", "model")
        )
        open_ids = selectors.answers_with_open_runs(
            answers=Answer.objects.filter(pk__in=[a.pk for a in locked])
        )
        same = {a.pk for a in locked if selectors.same_model(a.model, judge_model)}
        eligible = [a for a in locked if a.pk not in same and a.pk not in open_ids]
        if eligible:
            judge_runs_create(
                answers=eligible, judge_model=judge_model, trigger=JudgeRun.Trigger.RESCORE,
                requested_by_id=user.pk,
            )
    return WeekRescore(
        created=len(eligible),
        skipped_same_model=len(same),
        skipped_open=len(open_ids - same),
    )
