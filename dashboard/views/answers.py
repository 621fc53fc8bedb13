"""Pages of the monitoring app. Views parse input, call a selector or service, render.

Rescoring spends judge calls, so it takes two POSTs: the first validates the form and shows a
confirmation with the expected calls and cost, the second (with `confirm`) queues the runs.
"""

import tempfile
from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import (
    FileResponse,
    Http404,
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
from django.views.decorators.http import require_GET, require_POST

from common.http import AuthenticatedRequest
from dashboard.domain.csv_export import DIALECTS, csv_chunks
from dashboard.domain.highlight import segments
from dashboard.domain.xlsx_export import CONTENT_TYPE as XLSX_CONTENT_TYPE
from dashboard.domain.xlsx_export import TooManyRows, xlsx_write
from dashboard.forms import AnswerFilterForm
from dashboard.selectors import answers as answer_selectors
from judging.forms import RescoreForm
from judging.selectors import runs as judging_selectors
from judging.selectors.costs import rescore_estimate_for_answer
from judging.services import on_demand, rescoring
from judging.views import rescore_confirm
from monitoring.models import Answer
from monitoring.selectors.access import blind_answer_ids, use_cases_for_user
from monitoring.services import record
from monitoring.views import answer_or_404

PAGE_SIZE = 50


if TYPE_CHECKING:  # django-stubs makes Paginator generic; Django's cannot be subscripted
    _AnswerPaginator = Paginator[Answer]
else:
    _AnswerPaginator = Paginator


class _Paginator(_AnswerPaginator):
    """A paginator told the count where the rollups know it (else it counts, as Django's)."""

    def __init__(self, *args: Any, count: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if count is not None:
            self.__dict__["count"] = count  # Paginator.count is a cached property


@login_required
@require_GET
def answer_list(request: AuthenticatedRequest) -> HttpResponse:
    use_cases = list(use_cases_for_user(user=request.user))
    form = AnswerFilterForm(request.GET or None, use_cases=use_cases)
    filters = form.filters()
    answers = answer_selectors.answer_list(user=request.user, **filters)
    count = answer_selectors.answer_count(user=request.user, **filters)
    page = _Paginator(answers, PAGE_SIZE, count=count).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    # Verdicts asked for on demand of answers outside the sample: shown beside the answer,
    # marked, never counted (the score filters and sorts read the sample's scores only).
    verdicts = judging_selectors.on_demand_verdicts(answers=list(page))
    for answer in page:
        answer.on_demand = verdicts.get(answer.pk)  # type: ignore[attr-defined]  # the template
    return render(
        request,
        "monitoring/answer_list.html",
        {"form": form, "page": page, "query": query.urlencode(), "use_cases": use_cases,
         "blind": blind_answer_ids(user=request.user)},  # the answers whose score is hidden
    )


def _export_filters(request: AuthenticatedRequest) -> dict[str, Any] | HttpResponseBadRequest:
    """The explorer's filters for an export, or the 400 that refuses them.

    Unlike the page, which drops a bad filter and says so, an export with a bad filter is
    refused: a file shows no warning, and a silently wider export is a wrong file. A use case
    the user may not see is a 404, the same as one that does not exist.
    """
    use_cases = list(use_cases_for_user(user=request.user))
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


def _rescorable_answer(request: AuthenticatedRequest, pk: int) -> Answer:
    """The answer, if the user may see it (else 404) and rescore it (else 403)."""
    answer = answer_or_404(request, pk)
    if not judging_selectors.user_may_rescore(user=request.user, use_case=answer.use_case):
        raise PermissionDenied
    return answer


def _detail(
    request: AuthenticatedRequest, answer: Answer, rescore_form: RescoreForm | None = None
) -> HttpResponse:
    may_judge = judging_selectors.user_may_rescore(user=request.user, use_case=answer.use_case)
    may_rescore = answer.sampled and may_judge
    if may_rescore and rescore_form is None:
        rescore_form = RescoreForm(
            initial={"judge_model": answer.use_case.effective_judge_model},
            generator_model=answer.model,
        )
    return render(
        request,
        "monitoring/answer_detail.html",
        {
            "blind": answer.pk in blind_answer_ids(user=request.user),
            "answer": answer,
            "segments": segments(answer.text, answer.uncertain_tokens),
            "chunks": answer.chunks.all(),
            "judging": judging_selectors.answer_judging(answer=answer),
            "may_rescore": may_rescore,
            # Outside the sample a lead may still ask for a verdict, kept out of the estimates
            # (judging/services/on_demand.py); in the sample the rescore form does that. An
            # anonymised answer has no text left to judge.
            "may_judge_on_demand": may_judge and not answer.sampled
            and answer.anonymised_at is None,
            "rescore_form": rescore_form,
        },
    )


@login_required
@require_GET
def answer_detail(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    return _detail(request, answer_or_404(request, pk))


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
        return rescore_confirm(request, {
            "kind": "answer",
            "answer": answer,
            "use_case": answer.use_case,
            "judge_model": model,
            "estimate": rescore_estimate_for_answer(
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
def answer_judge_on_demand(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A lead asks the judge about any answer (issue 41, 12): the first POST shows the
    expected calls and cost, the second (with `confirm`) queues the run. Outside the sample
    its verdict stays out of the estimates; in the sample it is a rescore with the use case's
    judge model (judging/services/on_demand.py)."""
    answer = _rescorable_answer(request, pk)
    back = reverse("monitoring:answer_detail", args=[answer.pk])
    model = answer.use_case.effective_judge_model
    if "confirm" not in request.POST:
        if not model:
            messages.error(request, _("Es ist kein Prüfmodell eingestellt (TREUE_JUDGE_MODEL)."))
            return redirect(back + "#pruefung")
        return rescore_confirm(request, {
            "kind": "answer" if answer.sampled else "on_demand",
            "answer": answer,
            "use_case": answer.use_case,
            "judge_model": model,
            "estimate": rescore_estimate_for_answer(answer=answer, judge_model=model),
            "action": reverse("monitoring:answer_judge_on_demand", args=[answer.pk]),
            "fields": {},
            "back": back,
        })
    try:
        run = on_demand.answer_judge_on_demand(answer=answer, user=request.user)
    except rescoring.RescoreRefused as e:
        messages.error(request, str(e))
        return redirect(back + "#pruefung")
    if run.trigger == run.Trigger.ON_DEMAND:
        messages.success(request, _(
            "Prüfung mit „%(model)s“ angefordert: Der Prüflauf wartet auf den Prüfer. Sein "
            "Urteil zählt nicht in den Schätzungen, weil die Antwort nicht in der Stichprobe ist."
        ) % {"model": run.judge_model})
    else:
        messages.success(
            request,
            _("Neubewertung mit „%(model)s“ angefordert: Der Prüflauf wartet auf den Prüfer.")
            % {"model": run.judge_model},
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
        return rescore_confirm(request, {
            "kind": "retry",
            "answer": answer,
            "use_case": answer.use_case,
            "run": run,
            "judge_model": model,
            "estimate": rescore_estimate_for_answer(
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


@login_required
@require_GET
def answer_record(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Everything stored about one answer, as a JSON download (for a request under GDPR Art. 15).

    The same permission as the answer's page (404 for an answer of a use case the user is not
    assigned to); an expert who reviews the answer blind gets it without the judge's verdicts.
    """
    answer = answer_or_404(request, pk)
    blind = answer.pk in blind_answer_ids(user=request.user)
    data = record.answer_record_build(answer_id=answer.pk, include_judge=not blind)
    response = JsonResponse(data, json_dumps_params={"ensure_ascii": False, "indent": 2})
    response["Content-Disposition"] = f'attachment; filename="treue-answer-{answer.pk}.json"'
    return response
