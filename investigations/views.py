"""Pages of self-consistency investigations: the list, setting one up (with the calls and the
expected cost shown before it starts), the report with progress, and cancelling.

Experts and team leads of a use case see its investigations; team leads and staff start and
cancel them. A use case the user may not see is a 404, the same as one that does not exist.
"""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from common.http import AuthenticatedRequest
from investigations import selectors, services
from investigations.forms import InvestigationForm
from investigations.models import Investigation
from monitoring.models import Answer, UseCase
from monitoring.selectors.access import Role, use_cases_for_user, user_leads


def _led_use_cases(request: AuthenticatedRequest) -> list[UseCase]:
    use_cases = use_cases_for_user(user=request.user, role=Role.LEAD)
    return list(use_cases.order_by("name"))


def _investigation_or_404(request: AuthenticatedRequest, pk: int) -> Investigation:
    investigation = selectors.investigations_for_user(user=request.user).filter(pk=pk).first()
    if investigation is None:
        raise Http404
    return investigation


def _may_lead(request: AuthenticatedRequest, use_case: UseCase) -> bool:
    return user_leads(user=request.user, use_case=use_case)


@login_required
@require_GET
def investigation_list(request: AuthenticatedRequest) -> HttpResponse:
    use_cases = list(use_cases_for_user(user=request.user).order_by("name"))
    slug = request.GET.get("use_case") or ""
    use_case = next((uc for uc in use_cases if uc.slug == slug), None)
    if slug and use_case is None:
        raise Http404
    return render(request, "investigations/list.html", {
        "investigations": selectors.investigations_for_user(
            user=request.user, use_case=use_case
        )[:200],
        "use_cases": use_cases,
        "use_case": use_case,
        "can_start": bool(_led_use_cases(request)),
    })


def _form_data(request: AuthenticatedRequest, use_cases: list[UseCase]) -> dict[str, str] | None:
    """The form's input; the explorer sends its chosen answers as repeated `answers`."""
    source = request.POST if request.method == "POST" else request.GET
    if not source:
        return None
    data = {key: source.get(key, "") for key in source}
    data["answers"] = ",".join(v for v in source.getlist("answers") if v)
    # The explorer sends only its choice: the settings not sent start at their defaults.
    for name, field in InvestigationForm.base_fields.items():
        if name not in data and field.initial is not None:
            data[name] = str(field.initial)
    if data["answers"] and not data.get("use_case"):
        # From the explorer: the use case is the chosen answers' (one use case at a time).
        first = data["answers"].split(",")[0].strip()
        if first.isdigit():
            # Only among the use cases the user leads: another tenant's answer reads exactly
            # as one that does not exist (no slug, no hint that the id is taken).
            slug = (
                Answer.objects.filter(pk=int(first), use_case__in=use_cases)
                .values_list("use_case__slug", flat=True)
                .first()
            )
            data["use_case"] = slug or ""
        data.setdefault("selection", Investigation.Selection.CHOSEN)
    return data


@login_required
@require_http_methods(["GET", "POST"])
def investigation_new(request: AuthenticatedRequest) -> HttpResponse:
    use_cases = _led_use_cases(request)
    if not use_cases:
        return render(request, "investigations/forbidden.html", status=403)
    data = _form_data(request, use_cases)
    form = InvestigationForm(data, use_cases=use_cases) if data is not None else (
        InvestigationForm(use_cases=use_cases)
    )
    plan = None
    if data is not None and form.is_valid():
        try:
            plan = selectors.investigation_plan(
                use_case=form.chosen_use_case,
                selection=form.cleaned_data["selection"],
                n=form.cleaned_data["n"],
                samples=form.cleaned_data["samples"],
                temperature=form.cleaned_data["temperature"],
                generator_model=form.cleaned_data["generator_model"],
                answer_ids=form.cleaned_data["answers"],
                user=request.user,
            )
        except selectors.SelectionError as e:
            form.add_error("answers", str(e))
    if request.method == "POST" and plan is not None:
        if not plan.answers:
            form.add_error(None, _("Keine der gewählten Antworten kann erneut gestellt werden."))
        else:
            investigation = services.investigation_start(plan=plan, user=request.user)
            messages.success(request, _("Die Konsistenzprüfung läuft."))
            return redirect("investigations:detail", pk=investigation.pk)
    status = 400 if request.method == "POST" else 200
    return render(
        request, "investigations/new.html", {"form": form, "plan": plan}, status=status
    )


@login_required
@require_GET
def investigation_detail(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    investigation = _investigation_or_404(request, pk)
    report = selectors.investigation_report(investigation=investigation, user=request.user)
    return render(request, "investigations/detail.html", {
        "report": report,
        "investigation": investigation,
        "can_cancel": _may_lead(request, investigation.use_case),
        "progress": report.progress.as_dict(),
    })


@login_required
@require_GET
def investigation_progress(request: AuthenticatedRequest, pk: int) -> JsonResponse:
    investigation = _investigation_or_404(request, pk)
    progress = selectors.investigation_progress(investigation=investigation)
    return JsonResponse(progress.as_dict())


@login_required
@require_POST
def investigation_cancel(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    investigation = _investigation_or_404(request, pk)
    if not _may_lead(request, investigation.use_case):
        return render(request, "investigations/forbidden.html", status=403)
    if services.investigation_cancel(investigation=investigation):
        messages.success(request, _("Die Konsistenzprüfung wurde abgebrochen."))
    else:
        messages.info(request, _("Die Konsistenzprüfung lief nicht mehr."))
    return redirect("investigations:detail", pk=investigation.pk)
