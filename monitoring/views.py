"""Pages of the monitoring app. Views parse input, call a selector, render."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from monitoring import selectors
from monitoring.domain.highlight import segments
from monitoring.forms import AnswerFilterForm

PAGE_SIZE = 50


@never_cache
@require_GET
def health(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers: 200 when the database answers, else 503."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception:  # any failure here means "not healthy", which is the answer
        return JsonResponse({"status": "unavailable", "database": "down"}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})


@login_required
@require_GET
def answer_list(request: HttpRequest) -> HttpResponse:
    use_cases = list(selectors.use_cases_for_user(user=request.user))
    form = AnswerFilterForm(request.GET or None, use_cases=use_cases)
    answers = selectors.answer_list(user=request.user, **form.filters())
    page = Paginator(answers, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "monitoring/answer_list.html",
        {"form": form, "page": page, "query": query.urlencode(), "use_cases": use_cases},
    )


@login_required
@require_GET
def answer_detail(request: HttpRequest, pk: int) -> HttpResponse:
    answer = selectors.answer_get_for_user(user=request.user, pk=pk)
    if answer is None:
        raise Http404
    return render(
        request,
        "monitoring/answer_detail.html",
        {
            "answer": answer,
            "segments": segments(answer.text, answer.uncertain_tokens),
            "chunks": answer.chunks.all(),
        },
    )
