"""Turns a lost database connection into a 503 with Retry-After instead of a 500."""

from collections.abc import Callable

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

RETRY_AFTER_SECONDS = 5


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, OperationalError | InterfaceError):
            return None
        if request.path.startswith("/api/"):
            response: HttpResponse = JsonResponse(
                {"errors": [{"field": "", "message": "the database is unavailable; retry later"}]},
                status=503,
            )
        else:
            response = HttpResponse(
                "Treue ist vorübergehend nicht erreichbar (Datenbank). Bitte gleich noch einmal.\n"
                "Treue is temporarily unavailable (database). Please retry shortly.\n",
                status=503,
                content_type="text/plain; charset=utf-8",
            )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
