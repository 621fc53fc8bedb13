"""Judging any answer on demand: a team lead (or staff) asks the judge about one answer from its
page, in the sample or not (issue 41, 12).

The estimates rest on the sample: every judged answer counts in its stratum with its inclusion
probability π, and an answer the sample did not draw has none it could count with. So an
answer outside the sample that is judged on demand must never look judged to anything that
estimates. The design that cannot leak: its run has the trigger ON_DEMAND and keeps its result
(score, claims) on the run only; the answer itself stays "not_sampled", without a score and
without a current run (judging.services.execution._finish moves an answer only for a run of an
answer in the sample, never for an on-demand run). Every estimate, rollup (and their rebuild
and check), weekly figure, explorer figure and the review queue's draw reads the answer's
status and score, so none of them can see it; only the answer's page, the explorer's column
and the API read the on-demand run, and mark it as outside the estimates. Its calls and cost
are counted with the judge's usage like any run's: they were spent.

An answer in the sample is judged on demand by a rescore (trigger RESCORE, with the use case's
judge model): its new score replaces the old one in the estimates, as rescoring does (it was
drawn, so its verdict belongs there).
"""

from django.contrib.auth.models import User
from django.utils.translation import gettext as _

from judging.services.rescoring import (
    RescoreRefused,
    answer_rescore,
    run_requested,
)
from monitoring.models import Answer, JudgeRun


def answer_judge_on_demand(*, answer: Answer, user: User) -> JudgeRun:
    """Queue a run of ``answer`` with its use case's judge model, requested by ``user`` (the
    caller has checked that they lead the use case). Outside the sample the run's trigger is
    ON_DEMAND and its result stays out of the estimates (see the module's docstring); in the
    sample it is a rescore. Raises RescoreRefused with the reason in the user's language: no
    judge model set, the answer's own model, a run already waiting or running, an anonymised
    answer."""
    judge_model = answer.use_case.effective_judge_model.strip()
    if not judge_model:
        raise RescoreRefused(_("Es ist kein Prüfmodell eingestellt (TREUE_JUDGE_MODEL)."))
    if answer.sampled:
        return answer_rescore(answer=answer, judge_model=judge_model, user=user)
    return run_requested(answer=answer, judge_model=judge_model,
                         trigger=JudgeRun.Trigger.ON_DEMAND, user=user)
