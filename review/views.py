"""Pages of the weekly review: the expert's queue, one answer to review, the calibration page
and the experts' submitted reviews behind it.

Blindness: until an item is submitted, nothing the item page or its save endpoint returns
carries the judge's verdicts or score — they are not even put into the template context. The
submitted reviews leave out every answer the viewer still reviews blind
(`selectors.blind_answer_ids`).
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import F
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy
from django.views.decorators.http import require_GET, require_POST

from common.charts import chart_config
from common.http import AuthenticatedRequest
from dashboard.domain.charts import SEPARATORS
from dashboard.domain.highlight import segments
from judging.selectors import runs as judging_selectors
from monitoring.models import JudgeMode, UseCase
from review import services
from review.domain import charts
from review.domain.cusum import DRIFT_COST
from review.forms import JudgeComparisonForm
from review.models import ReviewItem
from review.selectors import reviews as selectors
from review.selectors.calibration import (
    calibration_data,
    calibration_use_cases,
    drift_cusum,
    drift_restart,
)
from review.shadow import selectors as shadow_selectors
from review.shadow import services as shadow_services

TOO_FEW_FOR_SCATTER = 3
REVIEWS_ON_CALIBRATION = 10  # the newest submitted reviews; the rest on their own pages
REVIEWS_PER_PAGE = 25


def _item_or_404(request: AuthenticatedRequest, pk: int) -> ReviewItem:
    item = selectors.item_get_for_expert(user=request.user, pk=pk)
    if item is None:
        raise Http404
    return item


@login_required
@require_GET
def queue(request: AuthenticatedRequest) -> HttpResponse:
    batches = list(selectors.batches_for_expert(user=request.user))
    current = [b for b in batches if b.finished_at is None]
    for batch in current:
        batch.items_list = selectors.batch_items(batch=batch)  # type: ignore[attr-defined]  # shown by the template
    return render(request, "review/queue.html", {
        "current": current,
        "finished": [b for b in batches if b.finished_at is not None][:20],
        "use_cases": selectors.expert_use_cases(user=request.user),
    })


def _wants_json(request: AuthenticatedRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


# Text fields of the review form. A NUL character cannot be typed, and PostgreSQL refuses it in
# text: such a field is refused (and named) while everything else in the post is saved.
_TEXT_FIELDS = {"comment": _lazy("Kommentar"), "new_claim": _lazy("Neue Aussage")}


def _item_input(request: AuthenticatedRequest) -> tuple[services.ItemInput, list[str]]:
    """The form's input, and the names of the text fields refused for holding a NUL."""
    post = request.POST
    labels: dict[int, str] = {}
    for key in post:
        value = post.get(key, "")
        if key.startswith("claim-"):
            try:
                labels[int(key.removeprefix("claim-"))] = value
            except ValueError as e:
                raise services.ReviewError(_("Unbekanntes Feld %(key)s.") % {"key": key}) from e
    remove = post.get("remove_claim")
    try:
        remove_position = int(remove) if remove else None
    except ValueError as e:
        raise services.ReviewError(_("Unbekannte Aussage zum Entfernen.")) from e
    refused = [str(name) for field, name in _TEXT_FIELDS.items() if "\x00" in post.get(field, "")]
    comment = post.get("comment", "")
    new_claim = post.get("new_claim", "")
    return services.ItemInput(
        labels=labels,
        decomposition_wrong=post.get("decomposition_wrong") in ("on", "true", "1"),
        problems=post.getlist("problems"),
        comment=None if "\x00" in comment else comment,  # None: left as it was
        new_claim="" if "\x00" in new_claim else new_claim,
        remove_claim=remove_position,
        revision=post.get("revision"),
    ), refused


def _refused_message(refused: list[str]) -> str:
    return _(
        "%(fields)s enthält ein unzulässiges Zeichen (NUL) und wurde nicht gespeichert; "
        "alles andere ist gespeichert."
    ) % {"fields": ", ".join(refused)}


def _item_url(item: ReviewItem, anchor: str = "") -> str:
    return reverse("review:item", args=[item.pk]) + anchor


@login_required
def item(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    if request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET"})
    item = _item_or_404(request, pk)
    verdicts = services.review_item_open(item=item)
    answer = item.answer
    submitted = item.status == ReviewItem.Status.SUBMITTED
    context = {
        "item": item,
        "batch": item.batch,
        "use_case": item.batch.use_case,
        "answer": answer,
        "segments": segments(answer.text, answer.uncertain_tokens),
        "chunks": answer.chunks.all(),
        "verdicts": verdicts,
        "labels": services.LABELS_ORDERED,
        "problems": services.problem_choices(),
        "submitted": submitted,
        "items": selectors.batch_items(batch=item.batch),
        "next_item": selectors.next_item(item=item),
        "due": item.batch.due,
        "revision": services.item_revision(item),
    }
    if submitted:
        # Only now, after the expert's own verdicts are in, does the judge's side appear.
        context["comparison"] = selectors.item_comparison(item=item, verdicts=verdicts)
    return render(request, "review/item.html", context)


@login_required
@require_POST
def item_save(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    item = _item_or_404(request, pk)
    if item.status == ReviewItem.Status.SUBMITTED:
        message = _("Diese Antwort ist abgegeben. Zum Ändern zuerst „Bearbeiten“ wählen.")
        if _wants_json(request):
            return JsonResponse({"errors": [message]}, status=409)
        messages.error(request, message)
        return redirect(_item_url(item))
    try:
        data, refused = _item_input(request)
        item = services.review_item_save(item=item, user=request.user, data=data)
    except services.ReviewError as e:
        if _wants_json(request):
            status = 409 if isinstance(e, services.ReviewConflict) else 400
            return JsonResponse({"errors": [str(e)]}, status=status)
        messages.error(request, str(e))
        return redirect(_item_url(item))
    if _wants_json(request):
        verdicts = list(item.verdicts.all())
        return JsonResponse({
            "saved": not refused,
            "status": item.status,
            "labelled": sum(1 for v in verdicts if v.label),
            "claims": len(verdicts),
            "revision": services.item_revision(item),
            **({"errors": [_refused_message(refused)]} if refused else {}),
        }, status=400 if refused else 200)
    if refused:
        messages.error(request, _refused_message(refused))
        return redirect(_item_url(item))
    changed_claims = request.POST.get("new_claim") or request.POST.get("remove_claim")
    anchor = "#aussagen" if changed_claims else ""
    return redirect(_item_url(item, anchor))


@login_required
@require_POST
def item_submit(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    item = _item_or_404(request, pk)
    try:
        if item.status != ReviewItem.Status.SUBMITTED:
            # The form carries the latest state: without JavaScript this is the only save.
            data, refused = _item_input(request)
            item = services.review_item_save(item=item, user=request.user, data=data)
            if refused:
                # Saved but for the refused field: not submitted, so it can be put right.
                messages.error(request, _refused_message(refused))
                return redirect(_item_url(item))
        services.review_item_submit(item=item, user=request.user)
    except services.ReviewError as e:
        messages.error(request, str(e))
        return redirect(_item_url(item))
    messages.success(request, _("Abgegeben. Hier der Vergleich mit dem Prüfmodell."))
    return redirect(_item_url(item, "#vergleich"))


@login_required
@require_POST
def item_reopen(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    item = _item_or_404(request, pk)
    services.review_item_reopen(item=item, user=request.user)
    messages.info(request, _(
        "Die Antwort ist wieder offen. Die abgegebene Fassung bleibt im Verlauf erhalten."
    ))
    return redirect(_item_url(item))


def _calibration_use_case(request: AuthenticatedRequest, slug: str) -> UseCase:
    use_case = calibration_use_cases(user=request.user).filter(slug=slug).first()
    if use_case is None:
        raise Http404
    return use_case


@login_required
@require_GET
def calibration(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    use_case = _calibration_use_case(request, slug)
    data = calibration_data(use_case=use_case)
    points = [
        charts.ScatterPoint(
            p.answer_id, p.week, p.manual, p.automatic,
            reverse("monitoring:answer_detail", args=[p.answer_id]),
        )
        for p in data.points
    ]
    # Numbers on the charts as the page writes them: "0,5" in German.
    separators = SEPARATORS.get((translation.get_language() or "de")[:2], SEPARATORS["de"])
    scatter = charts.calibration_scatter(points, action_threshold=use_case.action_threshold,
                                         labels={
        "x": _("automatisch (Prüfmodell)"),
        "y": _("manuell (Fachexperten)"),
        "diagonal": _("Übereinstimmung"),
        "threshold": _("Handlungsschwelle"),
        "hover": _("Antwort {answer}"),
        "legend": _("Woche"),
        "earlier": _("frühere Wochen"),
    }, config=chart_config(), separators=separators)
    # The bias stratified by the answers' flag (top-ups weighted); n, MAE and "too few" are
    # the week's reviews as they are.
    weekly = []
    for week, s in data.weekly.items():
        b = data.weekly_bias[week]
        weekly.append(charts.WeekBias(week, s.n, b.value, b.low, b.high, s.mae, s.too_few))
    bias_chart = charts.weekly_bias_chart(weekly, labels={
        "bias": _("mittlere Abweichung (manuell − automatisch)"),
        "mae": _("mittlere absolute Abweichung"),
        "week": _("Woche"),
        "difference": _("Abweichung"),
        "too_few": _("zu wenige Prüfungen"),
    }, config=chart_config(), separators=separators)
    drift = drift_cusum(
        use_case=use_case, data=data, restart=drift_restart(use_case=use_case)
    )
    return render(request, "review/calibration.html", {
        "use_case": use_case,
        "data": data,
        "drift": drift,
        "drift_cost": DRIFT_COST,
        "weekly_rows": [(week, s, data.weekly_bias[week]) for week, s in
                        reversed(data.weekly.items())],
        "scatter": scatter,
        "bias_chart": bias_chart,
        "too_few_for_scatter": len(points) < TOO_FEW_FOR_SCATTER,
        "alarms": use_case.alarms.order_by(
            F("cleared_at").asc(nulls_first=True), "-opened_at"
        )[:20],
        "batches": use_case.review_batches.order_by("-week")[:8],
        "bias_tolerance": services.bias_tolerance(),
        "reviews": selectors.submitted_reviews_page(
            use_case=use_case, user=request.user, page=1, per_page=REVIEWS_ON_CALIBRATION
        ),
    })


@login_required
@require_GET
def calibration_reviews(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """The use case's submitted reviews, newest first, a page at a time."""
    use_case = _calibration_use_case(request, slug)
    reviews = selectors.submitted_reviews_page(
        use_case=use_case, user=request.user, page=request.GET.get("page"),
        per_page=REVIEWS_PER_PAGE,
    )
    return render(request, "review/calibration_reviews.html", {
        "use_case": use_case, "reviews": reviews,
    })


@login_required
@require_GET
def calibration_review(request: AuthenticatedRequest, slug: str, pk: int) -> HttpResponse:
    """What an expert submitted for one answer, beside the judge's verdicts."""
    use_case = _calibration_use_case(request, slug)
    review = selectors.submitted_review_get(use_case=use_case, user=request.user, item_id=pk)
    if review is None:
        raise Http404
    return render(request, "review/calibration_review.html", {
        "use_case": use_case, "review": review,
        "problems": [name for key, name in services.problem_choices()
                     if key in review.decomposition_problems],
    })


# --- Judge comparison: a candidate judge on the experts' labels --------------------------


def _comparison_use_case(request: AuthenticatedRequest, slug: str, *, act: bool) -> UseCase:
    """The use case, if the user may see its calibration; to start or adopt a comparison they
    must also be allowed to spend judge calls on it (team leads and staff, as for a rescore)."""
    use_case = _calibration_use_case(request, slug)
    if act and not judging_selectors.user_may_rescore(user=request.user, use_case=use_case):
        raise PermissionDenied
    return use_case


@login_required
def judges(request: AuthenticatedRequest, slug: str) -> HttpResponse:
    """The use case's comparisons and the form for a new one; a POST shows what it will cost
    first and starts it once confirmed."""
    use_case = _comparison_use_case(request, slug, act=request.method == "POST")
    may_start = judging_selectors.user_may_rescore(user=request.user, use_case=use_case)
    form = JudgeComparisonForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        model = form.cleaned_data["judge_model"]
        mode = form.cleaned_data["judge_mode"]
        answers = form.cleaned_data["answers"]
        if request.POST.get("confirm") != "1":
            return render(request, "review/judges_confirm.html", {
                "use_case": use_case,
                "plan": shadow_selectors.comparison_plan(
                    use_case=use_case, judge_model=model, judge_mode=mode, answers=answers
                ),
                "mode_label": JudgeMode(mode).label,
                "fields": {"judge_model": model, "judge_mode": mode, "answers": answers},
                "running": shadow_selectors.comparison_running(
                    use_case=use_case, judge_model=model, judge_mode=mode
                ),
            })
        try:
            start = shadow_services.judge_comparison_start(
                use_case=use_case, judge_model=model, judge_mode=mode, answers=answers,
                user=request.user,
            )
        except shadow_services.ComparisonRefused as e:
            messages.error(request, str(e))
        else:
            if not start.started:
                messages.info(request, _(
                    "Dieser Vergleich läuft schon; er wurde nicht noch einmal gestartet "
                    "(das hätte seine Aufrufe ein zweites Mal gekostet)."
                ))
            return redirect(
                reverse("review:judge_comparison", args=[slug, start.comparison.pk])
            )
    status = 400 if request.method == "POST" else 200
    return render(request, "review/judges.html", {
        "use_case": use_case,
        "comparisons": shadow_selectors.comparisons_with_figures(use_case=use_case),
        "form": form if may_start else None,
        "current_model": use_case.effective_judge_model,
        "current_mode": use_case.get_judge_mode_display(),
    }, status=status)


@login_required
@require_GET
def judge_comparison(request: AuthenticatedRequest, slug: str, pk: int) -> HttpResponse:
    use_case = _comparison_use_case(request, slug, act=False)
    comparison = shadow_selectors.comparisons_of(use_case=use_case).filter(pk=pk).first()
    if comparison is None:
        raise Http404
    return render(request, "review/judge_comparison.html", {
        "use_case": use_case,
        "figures": shadow_selectors.comparison_figures(comparison=comparison),
        "mode_label": JudgeMode(comparison.judge_mode).label,
        "may_adopt": judging_selectors.user_may_rescore(user=request.user, use_case=use_case),
        "is_current": (
            use_case.effective_judge_model == comparison.judge_model
            and use_case.judge_mode == comparison.judge_mode
        ),
    })


@login_required
@require_POST
def judge_comparison_adopt(request: AuthenticatedRequest, slug: str, pk: int) -> HttpResponse:
    use_case = _comparison_use_case(request, slug, act=True)
    comparison = use_case.judge_comparisons.filter(pk=pk).first()
    if comparison is None:
        raise Http404
    shadow_services.judge_comparison_adopt(comparison=comparison, user=request.user)
    messages.success(request, _(
        "„%(model)s“ (%(mode)s) prüft die Antworten von „%(name)s“ ab dem nächsten Prüflauf."
    ) % {"model": comparison.judge_model, "mode": JudgeMode(comparison.judge_mode).label,
         "name": use_case.name})
    return redirect(reverse("review:judge_comparison", args=[slug, pk]))
