"""Pages of the monitoring app. Views parse input, call a selector or service, render.

Rescoring spends judge calls, so it takes two POSTs: the first validates the form and shows a
confirmation with the expected calls and cost, the second (with `confirm`) queues the runs.
"""

import tempfile
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST, require_safe

from monitoring.domain.csv_export import DIALECTS, csv_chunks
from monitoring.domain.highlight import segments
from monitoring.domain.xlsx_export import CONTENT_TYPE as XLSX_CONTENT_TYPE
from monitoring.domain.xlsx_export import TooManyRows, xlsx_write
from monitoring.forms import AnswerFilterForm, RescoreForm, WeekRescoreForm
from monitoring.judging import selectors as judging_selectors
from monitoring.judging.client import JudgeConfig
from monitoring.judging.services import rescoring
from monitoring.models import Answer, JudgeMode, SettingChange, UseCase
from monitoring.selectors import answers as answer_selectors
from monitoring.selectors import health as health_selectors
from monitoring.services import record, tuning
from treue_site.http import AuthenticatedRequest

PAGE_SIZE = 50


@never_cache
@require_safe  # GET, and HEAD for load balancers that probe with it
def health(request: HttpRequest) -> HttpResponse:
    """For load balancers and monitoring: the database, the broker, the workers' heartbeat and
    the judge backlog. 503 only when the database is down: a dead broker or worker stops
    scoring, not the pages or ingest, and a load balancer must not drop the web tier for it
    ("degraded" says so)."""
    report = health_selectors.health_report()
    return JsonResponse(report, status=503 if report["database"] != "ok" else 200)


class _Paginator(Paginator):
    """A paginator told the count where the rollups know it (else it counts, as Django's)."""

    def __init__(self, *args: Any, count: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if count is not None:
            self.__dict__["count"] = count  # Paginator.count is a cached property


@login_required
@require_GET
def answer_list(request: AuthenticatedRequest) -> HttpResponse:
    use_cases = list(answer_selectors.use_cases_for_user(user=request.user))
    form = AnswerFilterForm(request.GET or None, use_cases=use_cases)
    filters = form.filters()
    answers = answer_selectors.answer_list(user=request.user, **filters)
    count = answer_selectors.answer_count(user=request.user, **filters)
    page = _Paginator(answers, PAGE_SIZE, count=count).get_page(request.GET.get("page"))
    blind = answer_selectors.blind_answer_ids(user=request.user)
    for answer in page:
        answer.blind = answer.pk in blind  # shown by the template
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "monitoring/answer_list.html",
        {"form": form, "page": page, "query": query.urlencode(), "use_cases": use_cases},
    )


def _export_filters(request: AuthenticatedRequest) -> dict[str, Any] | HttpResponseBadRequest:
    """The explorer's filters for an export, or the 400 that refuses them.

    Unlike the page, which drops a bad filter and says so, an export with a bad filter is
    refused: a file shows no warning, and a silently wider export is a wrong file. A use case
    the user may not see is a 404, the same as one that does not exist.
    """
    use_cases = list(answer_selectors.use_cases_for_user(user=request.user))
    form = AnswerFilterForm(request.GET, use_cases=use_cases)
    if not form.is_valid():
        if "use_case" in form.errors:
            raise Http404
        problems = "; ".join(
            f"{name}: {' '.join(map(str, errors))}" for name, errors in form.errors.items()
        )
        return HttpResponseBadRequest(
            _("Ungültige Filter: %(problems)s") % {"problems": problems},
            content_type="text/plain; charset=utf-8",
        )
    return form.filters()


def _export_filename(extension: str) -> str:
    return f"treue-answers-{timezone.localdate().isoformat()}.{extension}"


@login_required
@require_GET
def answer_export(request: AuthenticatedRequest) -> HttpResponseBase:
    """The explorer's filtered answers as CSV, streamed a batch of rows at a time (which
    filters are refused: _export_filters)."""
    filters = _export_filters(request)
    if isinstance(filters, HttpResponseBase):
        return filters
    dialect = request.GET.get("dialect") or "standard"
    if dialect not in DIALECTS:
        return HttpResponseBadRequest(
            _("Unbekanntes CSV-Format „%(dialect)s“; möglich: %(known)s.")
            % {"dialect": dialect, "known": ", ".join(DIALECTS)},
            content_type="text/plain; charset=utf-8",
        )
    rows = answer_selectors.answer_export_rows(user=request.user, **filters)
    lines = csv_chunks(
        answer_selectors.EXPORT_HEADER, rows, dialect=dialect,
        rows_per_chunk=answer_selectors.EXPORT_CHUNK_SIZE, zone=timezone.get_current_timezone(),
    )
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{_export_filename("csv")}"'
    return response


@login_required
@require_GET
def answer_export_xlsx(request: AuthenticatedRequest) -> HttpResponseBase:
    """The same answers as the CSV export, as an Excel workbook with typed cells.

    A workbook is a zip whose directory comes last, so it cannot go out while the rows are read:
    it is written to an anonymous temporary file first (XlsxWriter keeps one row in memory)
    and then streamed from there in blocks. The file has no name on disk and is gone when the
    response closes it.
    """
    filters = _export_filters(request)
    if isinstance(filters, HttpResponseBase):
        return filters
    rows = answer_selectors.answer_export_values(user=request.user, **filters)
    workbook = tempfile.TemporaryFile()
    try:
        xlsx_write(
            workbook, answer_selectors.EXPORT_HEADER, rows, tz=timezone.get_current_timezone()
        )
    except TooManyRows as error:
        workbook.close()
        return HttpResponseBadRequest(
            _(
                "Mehr als %(limit)s Antworten passen nicht in eine Excel-Tabelle. Bitte die "
                "Auswahl eingrenzen oder als CSV exportieren."
            )
            % {"limit": number_format(error.limit, force_grouping=True)},
            content_type="text/plain; charset=utf-8",
        )
    except BaseException:
        workbook.close()
        raise
    workbook.seek(0)
    return FileResponse(
        workbook, as_attachment=True, filename=_export_filename("xlsx"),
        content_type=XLSX_CONTENT_TYPE,
    )


def _answer_or_404(request: AuthenticatedRequest, pk: int) -> Answer:
    answer = answer_selectors.answer_get_for_user(user=request.user, pk=pk)
    if answer is None:
        raise Http404
    return answer


def _rescorable_answer(request: AuthenticatedRequest, pk: int) -> Answer:
    """The answer, if the user may see it (else 404) and rescore it (else 403)."""
    answer = _answer_or_404(request, pk)
    if not judging_selectors.user_may_rescore(user=request.user, use_case=answer.use_case):
        raise PermissionDenied
    return answer


def _detail(
    request: AuthenticatedRequest, answer: Answer, rescore_form: RescoreForm | None = None
) -> HttpResponse:
    may_rescore = answer.sampled and judging_selectors.user_may_rescore(
        user=request.user, use_case=answer.use_case
    )
    if may_rescore and rescore_form is None:
        rescore_form = RescoreForm(
            initial={"judge_model": answer.use_case.effective_judge_model},
            generator_model=answer.model,
        )
    return render(
        request,
        "monitoring/answer_detail.html",
        {
            "blind": answer.pk in answer_selectors.blind_answer_ids(user=request.user),
            "answer": answer,
            "segments": segments(answer.text, answer.uncertain_tokens),
            "chunks": answer.chunks.all(),
            "judging": judging_selectors.answer_judging(answer=answer),
            "may_rescore": may_rescore,
            "rescore_form": rescore_form,
        },
    )


@login_required
@require_GET
def answer_detail(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    return _detail(request, _answer_or_404(request, pk))


def _confirm(request: AuthenticatedRequest, context: dict) -> HttpResponse:
    return render(request, "monitoring/rescore_confirm.html", context)


@login_required
@require_POST
def answer_rescore(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    answer = _rescorable_answer(request, pk)
    back = reverse("monitoring:answer_detail", args=[answer.pk])
    if not answer.sampled:
        # Judging an answer outside the sample would bias every estimate built on the sample.
        messages.error(request, _("Nur Antworten der Stichprobe werden vom Modell geprüft."))
        return redirect(back)
    form = RescoreForm(request.POST, generator_model=answer.model)
    if not form.is_valid():
        return _detail(request, answer, rescore_form=form)
    model = form.cleaned_data["judge_model"]
    if "confirm" not in request.POST:
        return _confirm(request, {
            "kind": "answer",
            "answer": answer,
            "use_case": answer.use_case,
            "judge_model": model,
            "estimate": judging_selectors.rescore_estimate_for_answer(
                answer=answer, judge_model=model),
            "action": reverse("monitoring:answer_rescore", args=[answer.pk]),
            "fields": {"judge_model": model},
            "back": back,
        })
    try:
        rescoring.answer_rescore(answer=answer, judge_model=model, user=request.user)
    except rescoring.RescoreRefused as e:
        messages.error(request, str(e))
        return redirect(back + "#pruefung")
    messages.success(
        request,
        _("Neubewertung mit „%(model)s“ angefordert: Der Prüflauf wartet auf den Prüfer.")
        % {"model": model},
    )
    return redirect(back + "#pruefung")


@login_required
@require_POST
def judge_run_retry(request: AuthenticatedRequest, pk: int, run_pk: int) -> HttpResponse:
    answer = _rescorable_answer(request, pk)
    run = answer.judge_runs.filter(pk=run_pk).first()
    if run is None:
        raise Http404
    back = reverse("monitoring:answer_detail", args=[answer.pk])
    if "confirm" not in request.POST:
        model = rescoring.retry_model(run)
        return _confirm(request, {
            "kind": "retry",
            "answer": answer,
            "use_case": answer.use_case,
            "run": run,
            "judge_model": model,
            "estimate": judging_selectors.rescore_estimate_for_answer(
                answer=answer, judge_model=model),
            "action": reverse("monitoring:judge_run_retry", args=[answer.pk, run.pk]),
            "fields": {},
            "back": back,
        })
    try:
        retried = rescoring.judge_run_retry(run=run, user=request.user)
    except rescoring.RescoreRefused as e:
        messages.error(request, str(e))
    else:
        messages.success(
            request,
            _("Der Prüflauf mit „%(model)s“ wird wiederholt und wartet auf den Prüfer.")
            % {"model": retried.judge_model},
        )
    return redirect(back + "#pruefung")


def _use_case_or_404(request: AuthenticatedRequest, slug: str) -> UseCase:
    use_case = answer_selectors.use_case_get_for_user(user=request.user, slug=slug)
    if use_case is None:
        raise Http404
    return use_case


def _rescorable_use_case(request: AuthenticatedRequest, slug: str) -> UseCase:
    """The use case, if the user may see it (else 404) and rescore its answers (else 403)."""
    use_case = _use_case_or_404(request, slug)
    if not judging_selectors.user_may_rescore(user=request.user, use_case=use_case):
        raise PermissionDenied
    return use_case


def _judge_page(
    request: AuthenticatedRequest, use_case: UseCase, week_form: WeekRescoreForm | None = None
) -> HttpResponse:
    may_rescore = judging_selectors.user_may_rescore(user=request.user, use_case=use_case)
    if may_rescore and week_form is None:
        week_form = WeekRescoreForm(initial={
            "week": judging_selectors.previous_iso_week(),
            "judge_model": use_case.effective_judge_model,
        })
    usage, total = judging_selectors.judge_usage_by_day(use_case=use_case)
    recent = list(judging_selectors.judge_runs_recent(use_case=use_case))
    blind = answer_selectors.blind_answer_ids(user=request.user)
    for run in recent:
        run.blind = run.answer_id in blind  # type: ignore[attr-defined]  # shown by the template
    demo_model = settings.TREUE_DEMO_JUDGE_MODEL  # "" outside the demo: no run is marked
    judge_model = use_case.effective_judge_model
    paths = judging_selectors.judge_paths_by_week(use_case=use_case)
    fallback = paths.latest.fallback if paths.fallback_warning and paths.latest else None
    return render(request, "monitoring/use_case_judge.html", {
        "use_case": use_case,
        "judge_modes": JudgeMode.choices,
        "paths": paths,
        "fallback_warning_percent": judging_selectors.FALLBACK_WARNING_SHARE * 100,
        # The judge models of the runs asked again claim by claim, each in quotes.
        "fallback_models": ", ".join(
            _("„%(model)s“") % {"model": model} for model in fallback.judge_model_list
        ) if fallback else "",
        # Whether the installation's endpoint takes a JSON schema from the use case's judge.
        "judge_endpoint": judging_selectors.judge_endpoint(
            endpoint=JudgeConfig.from_settings(model=judge_model).endpoint, model=judge_model
        ),
        "evidence_tokens": judging_selectors.judge_evidence_tokens(use_case=use_case),
        "cost_window_days": judging_selectors.COST_WINDOW_DAYS,
        "usage": usage,
        "total": total,
        "counts": judging_selectors.judge_run_counts(use_case=use_case),
        "recent": recent,
        "demo_model": demo_model,
        "demo": bool(demo_model) and (
            use_case.effective_judge_model == demo_model
            or any(r.judge_model == demo_model for r in recent)
        ),
        "weekly": judging_selectors.use_case_weekly_cost(use_case=use_case),
        "may_rescore": may_rescore,
        "week_form": week_form,
        "failed_to_retry": len(judging_selectors.judge_runs_to_retry(use_case=use_case))
        if may_rescore else 0,
        "usage_days": judging_selectors.USAGE_DAYS,
    })


@login_required
@require_GET
def use_case_judge(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    return _judge_page(request, _use_case_or_404(request, slug))


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
    estimate = judging_selectors.rescore_estimate_for_week(
        use_case=use_case, year=year, week=week, judge_model=model
    )
    if not estimate.answers:
        form.add_error("week", _(
            "In der Woche %(week)s gibt es keine geprüften Antworten, die mit „%(model)s“ "
            "neu bewertet werden können."
        ) % {"week": week_label, "model": model})
        return _judge_page(request, use_case, week_form=form)
    if "confirm" not in request.POST:
        return _confirm(request, {
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


@login_required
@require_GET
def answer_record(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Everything stored about one answer, as a JSON download (for a request under GDPR Art. 15).

    The same permission as the answer's page (404 for an answer of a use case the user is not
    assigned to); an expert who reviews the answer blind gets it without the judge's verdicts.
    """
    answer = _answer_or_404(request, pk)
    blind = answer.pk in answer_selectors.blind_answer_ids(user=request.user)
    data = record.answer_record_build(answer_id=answer.pk, include_judge=not blind)
    response = JsonResponse(data, json_dumps_params={"ensure_ascii": False, "indent": 2})
    response["Content-Disposition"] = f'attachment; filename="treue-answer-{answer.pk}.json"'
    return response
