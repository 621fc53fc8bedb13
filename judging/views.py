"""A use case's judge page: what the judge costs and how it answers, its mode and evidence,
rescoring a week and retrying failed runs. The answer page's rescore lives with the answer page
(dashboard/views/answers.py) and asks for confirmation here (`rescore_confirm`)."""

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import (
    HttpResponse,
    HttpResponseBadRequest,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST

from common.http import AuthenticatedRequest
from common.weeks import previous_iso_week
from judging.client import JudgeConfig
from judging.forms import WeekRescoreForm
from judging.selectors import runs as judging_selectors
from judging.selectors.costs import (
    COST_WINDOW_DAYS,
    USAGE_DAYS,
    judge_run_counts,
    judge_usage_by_day,
    rescore_estimate_for_week,
    use_case_weekly_cost,
)
from judging.selectors.paths import (
    FALLBACK_WARNING_SHARE,
    judge_evidence_tokens,
    judge_paths_by_week,
)
from judging.selectors.prices import price_currencies
from judging.services import rescoring
from monitoring.models import JudgeMode, SettingChange, UseCase
from monitoring.selectors import access as answer_selectors
from monitoring.services import tuning
from monitoring.views import use_case_or_404


def _rescorable_use_case(request: AuthenticatedRequest, slug: str) -> UseCase:
    """The use case, if the user may see it (else 404) and rescore its answers (else 403)."""
    use_case = use_case_or_404(request, slug)
    if not judging_selectors.user_may_rescore(user=request.user, use_case=use_case):
        raise PermissionDenied
    return use_case


def _judge_page(
    request: AuthenticatedRequest, use_case: UseCase, week_form: WeekRescoreForm | None = None
) -> HttpResponse:
    may_rescore = judging_selectors.user_may_rescore(user=request.user, use_case=use_case)
    if may_rescore and week_form is None:
        week_form = WeekRescoreForm(initial={
            "week": previous_iso_week(),
            "judge_model": use_case.effective_judge_model,
        })
    usage, total = judge_usage_by_day(use_case=use_case)
    recent = list(judging_selectors.judge_runs_recent(use_case=use_case))
    blind = answer_selectors.blind_answer_ids(user=request.user)
    judge_model = use_case.effective_judge_model
    currencies = price_currencies(models={r.judge_model for r in recent} | {judge_model})
    for run in recent:
        run.blind = run.answer_id in blind  # type: ignore[attr-defined]  # shown by the template
        run.currency = currencies.get(run.judge_model, "")
    demo_model = settings.TREUE_DEMO_JUDGE_MODEL  # "" outside the demo: no run is marked
    paths = judge_paths_by_week(use_case=use_case)
    fallback = paths.latest.fallback if paths.fallback_warning and paths.latest else None
    return render(request, "monitoring/use_case_judge.html", {
        "use_case": use_case,
        "judge_modes": JudgeMode.choices,
        "paths": paths,
        "fallback_warning_percent": FALLBACK_WARNING_SHARE * 100,
        # The judge models of the runs asked again claim by claim, each in quotes.
        "fallback_models": ", ".join(
            _("„%(model)s“") % {"model": model} for model in fallback.judge_model_list
        ) if fallback else "",
        # Whether the installation's endpoint takes a JSON schema from the use case's judge.
        "judge_endpoint": judging_selectors.judge_endpoint(
            endpoint=JudgeConfig.from_settings(model=judge_model).endpoint, model=judge_model
        ),
        "evidence_tokens": judge_evidence_tokens(use_case=use_case),
        "cost_window_days": COST_WINDOW_DAYS,
        "usage": usage,
        # The day table's currency: that of the judge models' prices, when they agree.
        "currency": found.pop() if len(found := set(currencies.values())) == 1 else "",
        "total": total,
        "counts": judge_run_counts(use_case=use_case),
        "recent": recent,
        "demo_model": demo_model,
        "demo": bool(demo_model) and (
            use_case.effective_judge_model == demo_model
            or any(r.judge_model == demo_model for r in recent)
        ),
        "weekly": use_case_weekly_cost(use_case=use_case),
        "may_rescore": may_rescore,
        "week_form": week_form,
        "failed_to_retry": len(judging_selectors.judge_runs_to_retry(use_case=use_case))
        if may_rescore else 0,
        "usage_days": USAGE_DAYS,
    })


@login_required
@require_GET
def use_case_judge(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    return _judge_page(request, use_case_or_404(request, slug))


@login_required
@require_POST
def use_case_judge_mode(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """A team lead switches how the judge verifies this use case's claims, from the next run
    on (runs already made keep theirs; the trend marks the week, as for a model change)."""
    use_case = _rescorable_use_case(request, slug)
    mode = request.POST.get("judge_mode", "")
    if mode not in JudgeMode.values:
        return HttpResponseBadRequest(
            _("Unbekannter Prüfmodus „%(mode)s“; möglich: %(known)s.")
            % {"mode": mode, "known": ", ".join(JudgeMode.values)},
            content_type="text/plain; charset=utf-8",
        )
    if UseCase.objects.filter(pk=use_case.pk).exclude(judge_mode=mode).update(judge_mode=mode):
        messages.success(request, _("Prüfmodus ab dem nächsten Prüflauf: %(mode)s.") % {
            "mode": JudgeMode(mode).label})
    return redirect(reverse("monitoring:use_case_judge", args=[use_case.slug]) + "#mode")


@login_required
@require_POST
def use_case_judge_evidence(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """A team lead switches the judge's evidence (chunk ranks and a reason per verdict, batched
    and in one call) on or off, from the next run on; recorded as a setting change, as the
    thresholds and the sample rate are, so that the pages mark the week."""
    use_case = _rescorable_use_case(request, slug)
    value = request.POST.get("judge_evidence", "")
    if value not in ("1", "0"):
        return HttpResponseBadRequest(
            _("Belege und Begründungen: „1“ (an) oder „0“ (aus), nicht „%(value)s“.")
            % {"value": value},
            content_type="text/plain; charset=utf-8",
        )
    on = value == "1"
    changes = tuning.use_case_tune(
        use_case=use_case, user=request.user, values={"judge_evidence": on},
        source=SettingChange.Source.SETTINGS,
    )
    if changes:
        messages.success(request, _(
            "Belege und Begründungen des Prüfers ab dem nächsten Prüflauf: an."
        ) if on else _("Belege und Begründungen des Prüfers ab dem nächsten Prüflauf: aus."))
    return redirect(reverse("monitoring:use_case_judge", args=[use_case.slug]) + "#mode")


@login_required
@require_POST
def use_case_retry_failed(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    use_case = _rescorable_use_case(request, slug)
    result = rescoring.use_case_failed_retry(use_case=use_case, user=request.user)
    if not result.retried and not result.refused:
        messages.info(request, _("Kein fehlgeschlagener Prüflauf zu wiederholen."))
        return redirect(reverse("monitoring:use_case_judge", args=[use_case.slug]))
    messages.success(request, ngettext(
        "%(count)s fehlgeschlagener Prüflauf wird wiederholt.",
        "%(count)s fehlgeschlagene Prüfläufe werden wiederholt.",
        result.retried,
    ) % {"count": result.retried})
    if result.refused:
        messages.info(request, ngettext(
            "%(count)s nicht: ihr Prüfmodell ist das Modell der Antwort, oder es ist keines "
            "eingestellt.",
            "%(count)s nicht: ihr Prüfmodell ist das Modell der Antwort, oder es ist keines "
            "eingestellt.",
            result.refused,
        ) % {"count": result.refused})
    return redirect(reverse("monitoring:use_case_judge", args=[use_case.slug]))


@login_required
@require_POST
def use_case_rescore_week(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    use_case = _rescorable_use_case(request, slug)
    form = WeekRescoreForm(request.POST)
    if not form.is_valid():
        return _judge_page(request, use_case, week_form=form)
    (year, week), model = form.cleaned_data["week"], form.cleaned_data["judge_model"]
    week_label = f"{year}-W{week:02d}"
    back = reverse("monitoring:use_case_judge", args=[use_case.slug])
    estimate = rescore_estimate_for_week(
        use_case=use_case, year=year, week=week, judge_model=model
    )
    if not estimate.answers:
        form.add_error("week", _(
            "In der Woche %(week)s gibt es keine geprüften Antworten, die mit „%(model)s“ "
            "neu bewertet werden können."
        ) % {"week": week_label, "model": model})
        return _judge_page(request, use_case, week_form=form)
    if "confirm" not in request.POST:
        return rescore_confirm(request, {
            "kind": "week",
            "use_case": use_case,
            "week": week_label,
            "judge_model": model,
            "estimate": estimate,
            "action": reverse("monitoring:use_case_rescore_week", args=[use_case.slug]),
            "fields": {"week": week_label, "judge_model": model},
            "back": back,
        })
    result = rescoring.use_case_week_rescore(
        use_case=use_case, year=year, week=week, judge_model=model, user=request.user
    )
    messages.success(request, ngettext(
        "%(count)s Antwort der Woche %(week)s wird mit „%(model)s“ neu bewertet.",
        "%(count)s Antworten der Woche %(week)s werden mit „%(model)s“ neu bewertet.",
        result.created,
    ) % {"count": result.created, "week": week_label, "model": model})
    skipped = result.skipped_same_model + result.skipped_open
    if skipped:
        messages.info(request, ngettext(
            "%(count)s Antwort wurde ausgelassen (vom Prüfmodell selbst erzeugt oder schon in "
            "Prüfung).",
            "%(count)s Antworten wurden ausgelassen (vom Prüfmodell selbst erzeugt oder schon in "
            "Prüfung).",
            skipped,
        ) % {"count": skipped})
    return redirect(back)


def rescore_confirm(request: AuthenticatedRequest, context: dict[str, Any]) -> HttpResponse:
    return render(request, "monitoring/rescore_confirm.html", context)
