"""The health check, and the two look-ups every page of a use case or an answer starts with: the
object if the user may see it, else 404 (the same as one that does not exist)."""

from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    JsonResponse,
)
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from common.http import AuthenticatedRequest
from monitoring.models import Answer, UseCase
from monitoring.selectors import health as health_selectors
from monitoring.selectors.access import answer_get_for_user, use_case_get_for_user


@never_cache
@require_safe  # GET, and HEAD for load balancers that probe with it
def health(request: HttpRequest) -> HttpResponse:
    """For load balancers and monitoring: the database, the broker, the workers' heartbeat and
    the judge backlog. 503 only when the database is down: a dead broker or worker stops
    scoring, not the pages or ingest, and a load balancer must not drop the web tier for it
    ("degraded" says so)."""
    report = health_selectors.health_report()
    return JsonResponse(report, status=503 if report["database"] != "ok" else 200)


def answer_or_404(request: AuthenticatedRequest, pk: int) -> Answer:
    answer = answer_get_for_user(user=request.user, pk=pk)
    if answer is None:
        raise Http404
    return answer


def use_case_or_404(request: AuthenticatedRequest, slug: str) -> UseCase:
    use_case = use_case_get_for_user(user=request.user, slug=slug)
    if use_case is None:
        raise Http404
    return use_case
